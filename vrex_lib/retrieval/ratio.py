"""The retrieval ratio: one definition (docs/DECISIONS.md D7) and its alternatives, computed from one trace.

The V-Rex paper reports retrieval ratios (Table II, Fig. 19/20) without saying what is counted. This artifact's
definition, used by every table and by the performance model (:func:`retrieval_ratio`, ``"selected/candidates"``):

    ratio(stage) = Σ selected / Σ candidates

summed (token-weighted, not a mean of per-step ratios) over the steps of ``stage`` ('frame': frame prefills;
'text': the question prefill and every generated token), the layers the policy was consulted at (layers below
``RuntimeConfig.dense_layers`` -- layer 0 -- are excluded; a layer where the policy itself chooses to attend
densely, e.g. InfiniGen's layer 1, counts as selecting every candidate, since it fetches them), and every KV head.
*Candidates* are the cache positions the policy may drop: everything except the sinks (system prompt, and in the
COIN layout the user prompt before the stream), the recent frame window (``recent_frames``) and the step's own
tokens. Those always-attended tokens are in neither term.

Alternatives, side by side in notebook 03 (:func:`ratio_table`):

* ``"attended/all"``: Σ tokens attended / Σ tokens in the cache, over every layer (dense ones included) and head
  -- the share of the KV cache each head reads, sinks, window and own tokens included (always ≥ the default).
* ``"selected/candidates (step mean)"``: the default's ratio per step, then averaged over steps (short early
  steps weigh as much as long late ones).
* WiCSum over candidates only: ReSV's threshold ``Th_r-wics × Sum_i`` takes ``Sum_i`` over *all* clusters, the
  sinks and the current frame included (§IV.C); restricting the sum to candidate tokens is a different
  selection rule, so it is a separate policy run on the same samples
  (:class:`ReSVCandidatesWiCSum`, method name ``resv_candwics``), reported with the default definition.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..resv import cluster_weights, wicsum_select
from ..runtime.trace import pooled_counts
from .base import Selection, Stage
from .resv_policy import ReSV
from ._common import Stopwatch

DEFINITIONS: tuple[str, ...] = ("selected/candidates", "attended/all", "selected/candidates (step mean)")


def _counts(tr, stage: str | None, definition: str) -> tuple[np.ndarray, np.ndarray]:
    """(numerator, denominator) of ``definition`` for one trace: totals, or per step for the step mean."""
    if definition == "attended/all":
        m = tr.step_mask(stage)
        att = tr["attended"][m]                                                  # [n, L, H]
        return pooled_counts(att, tr["n_cache"][m][:, None, None], True)
    return tr.retrieval_counts(stage, by="step" if definition == "selected/candidates (step mean)" else "all")


def _check(definition: str) -> None:
    if definition not in DEFINITIONS:
        raise ValueError(f"unknown retrieval-ratio definition {definition!r}: choose one of {', '.join(DEFINITIONS)}")


def retrieval_ratio(tr, stage: str | None = None, definition: str = "selected/candidates") -> float:
    """The retrieval ratio of one :class:`~vrex_lib.runtime.RetrievalTrace` under ``definition`` (module
    docstring; the default is docs/DECISIONS.md D7). NaN when nothing counts."""
    return ratio_table([tr], stage, (definition,))[definition]


def ratio_table(traces, stage: str | None = None, definitions: tuple[str, ...] = DEFINITIONS) -> dict[str, float]:
    """Every definition over several traces pooled (sums over all their steps; the step mean over all steps).

    The sums are :func:`~vrex_lib.runtime.trace.pooled_counts` of the trace, so the default definition is
    exactly :meth:`RetrievalTrace.retrieval_ratio` (the one definition of the ratio)."""
    out = {}
    for d in definitions:
        _check(d)
        counts = [_counts(tr, stage, d) for tr in traces]
        if d == "selected/candidates (step mean)":
            per_step = [r for num, den in counts for r in np.atleast_1d(num / np.where(den > 0, den, 1.0))[den > 0]]
            out[d] = float(np.mean(per_step)) if per_step else math.nan
        else:
            num, den = sum(float(n) for n, _ in counts), sum(float(dd) for _, dd in counts)
            out[d] = num / den if den > 0 else math.nan
    return out


class ReSVCandidatesWiCSum(ReSV):
    """ReSV with the WiCSum total taken over candidate tokens only (an alternative rule, docs/DECISIONS.md D7).

    Same HC table and weights as :class:`~vrex_lib.retrieval.ReSV`; each cluster's count is the number of its
    members that are candidates, clusters without candidate members are left out, so ``Sum_i`` excludes the
    sinks, the recent window and the current frame. Per-head hashing and per-KV-head granularity only.
    """

    name = "resv_candwics"

    def __init__(self, cfg=None, quant_bits: int | None = None, **overrides):
        super().__init__(cfg, quant_bits, **overrides)
        if self.cfg.hash_mode != "per_head" or self.cfg.granularity != "kv_head":
            raise ValueError("resv_candwics supports hash_mode='per_head' and granularity='kv_head' only")

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        if candidates.numel() == 0:
            return None
        if self.cfg.hash_mode != "per_head" or self.cfg.granularity != "kv_head":
            raise ValueError("resv_candwics supports hash_mode='per_head' and granularity='kv_head' only")
        t = self.table(layer)
        with Stopwatch() as sw:
            cent, _, valid = t.padded_heads()                              # [Hkv, C, D], [Hkv, C]
            hkv, C, d = cent.shape
            is_cand = torch.isin(t.positions, candidates.to(t.device))
            cc = torch.stack([torch.bincount(t.assignment[h][is_cand], minlength=C)[:C] for h in range(hkv)])
            ok = valid & (cc > 0)
            hq, nq, _ = query.shape
            r = hq // hkv * nq
            rows = query.detach().reshape(hkv, r, d).to(t.device, torch.float64)
            s = (rows @ cent.to(torch.float64).transpose(1, 2)) / math.sqrt(d)
            vr = ok[:, None, :].expand(hkv, r, C)
            w = cluster_weights(s.masked_fill(~vr, float("-inf")), self.cfg.score)
            mask = wicsum_select(w.reshape(hkv * r, C), cc[:, None, :].expand(hkv, r, C).reshape(hkv * r, C),
                                 self.cfg.th_r_wics, self.quant_bits, valid=vr.reshape(hkv * r, C)).view(hkv, r, C)
            head_mask = mask.any(1) & ok
            idx = [i[torch.isin(i, candidates.to(i.device))].to(candidates.device)
                   for i in t.tokens_of_heads(head_mask)]
        stats = dict(rows=hkv * r, scored=int(ok.sum()), score_dims=d, score_macs=int(ok.sum()) * (r) * d,
                     clusters=int(ok.sum()), clusters_selected=int(head_mask.sum()), select_s=sw.seconds)
        return Selection(idx, int(candidates.numel()), stats)
