"""``resv`` and ``resv_noclust`` — V-Rex's ReSV as a retrieval policy, and its Fig. 19 ablation.

``resv`` wraps :mod:`vrex_lib.resv` (the one definition of ReSV): every appended token's post-RoPE
keys go into the layer's :class:`~vrex_lib.resv.HashClusterTable` (hash-bit clustering, §IV.B), and
``select`` runs :func:`~vrex_lib.resv.select_tokens` (Q·Key_cluster^T -> WiCSum per row -> union per
KV head, §IV.C). Clustering covers every token in the cache (the always-attended ones too, since
they sit in V-Rex's recent KV); the returned sets are restricted to the runtime's ``candidates``.
Text-stage tokens (question, answer) are clustered as they arrive, like frames.

``resv_noclust`` is "ReSV w/o clustering" of Fig. 19: the same WiCSum rule applied to individual
keys (every token its own cluster of count 1), so it must score the full key cache -- the cost that
clustering removes.

``resv_rescore`` is beyond the paper: the clusters as a shortlist, the shortlisted members re-scored exactly.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from ..config import ReSVConfig, check_int, refuse_renamed
from ..resv import HashClusterTable, cluster_weights, select_tokens, wicsum_select
from ..resv.rescore import RANKS, rescore_select
from ._common import Stopwatch, kv_rows
from .base import PolicyBase, Selection, Stage


def _config(cfg: ReSVConfig | None, overrides: dict, quant_bits: int | None = None) -> ReSVConfig:
    if cfg is not None and not isinstance(cfg, ReSVConfig):
        raise ValueError(f"ReSV policy: cfg must be a ReSVConfig, got {type(cfg).__name__}; pass its fields "
                         "themselves instead, e.g. th_r_wics=0.3 (--method-kwargs '{\"th_r_wics\": 0.3}')")
    refuse_renamed("ReSV policy", overrides, ReSVConfig.RENAMED)
    unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(ReSVConfig)})
    if unknown:
        raise ValueError(f"ReSV policy: unknown option(s) {', '.join(unknown)}; ReSVConfig has "
                         f"{', '.join(f.name for f in dataclasses.fields(ReSVConfig))} (and quant_bits)")
    cfg = (cfg or ReSVConfig()).replace(**overrides)
    if cfg.granularity == "q_head":
        raise ValueError("ReSV policy: granularity='q_head' gives one set per query head, but the runtime attends "
                         "per KV head; use 'kv_head' (default) or 'layer' (ReSVConfig.granularity)")
    if quant_bits is not None:
        check_int("ReSV policy", "quant_bits", quant_bits, 1, 32)
        if cfg.score != "softmax":  # integer WiCSum quantizes weights in [0, 1]: softmax numerators
            raise ValueError("ReSV policy: quant_bits needs score='softmax' (raw scores are not in [0, 1])")
    return cfg


class ReSVConfigured(PolicyBase):
    """A WiCSum policy set by a :class:`~vrex_lib.config.ReSVConfig` (its defaults; kwargs override its fields, e.g.
    ``th_r_wics=0.5`` for a Th_r-wics sweep), retrieving at every frame. ``quant_bits=16`` runs the DRE's integer
    WiCSum."""

    retrieves_at_frame = True

    def __init__(self, cfg: ReSVConfig | None = None, quant_bits: int | None = None, **overrides):
        self.cfg = _config(cfg, overrides, quant_bits)
        self.quant_bits = quant_bits


class ReSV(ReSVConfigured):
    """ReSV (paper §IV): hash-bit clustering, then WiCSum over the clusters (see :class:`ReSVConfigured`)."""

    name = "resv"

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.n_kv_heads, self.head_dim = n_kv_heads, head_dim
        self.tables: list[HashClusterTable | None] = [None] * n_layers  # built on first observe (key device)
        self._hash_macs = [0] * n_layers

    def table(self, layer: int) -> HashClusterTable:
        t = self.tables[layer]
        if t is None:
            raise ValueError(f"resv: layer {layer} has no HC table yet (the runtime must observe before select)")
        return t

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        if self.tables[layer] is None:
            self.tables[layer] = HashClusterTable(self.n_kv_heads, self.head_dim, self.cfg, layer,
                                                  device=new_keys.device)
        t = self.tables[layer]
        if start != t.n_tokens:
            raise ValueError(f"resv: layer {layer} observed position {start}, expected {t.n_tokens} "
                             "(observe must see every appended token in order; call reset() per stream)")
        n = new_keys.shape[1]
        t.add_frame(new_keys.detach())  # positions start.. (checked above): the table's default
        # Hash-bit generation cost of this step (N keys x N_hp hyperplanes x dim per hashed group).
        self._hash_macs[layer] += n * t.n_groups * self.cfg.n_hp * t.group_dim

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        if candidates.numel() == 0:
            return None
        t = self.table(layer)
        with Stopwatch() as sw:
            indices, raw = self._select(query.detach(), keys, t, candidates)
        stats = self._stats(raw, keys, candidates)
        stats.update(hash_macs=self._hash_macs[layer], table_tokens=t.n_tokens, select_s=sw.seconds)
        self._hash_macs[layer] = 0
        return Selection([i.to(candidates.device) for i in indices], int(candidates.numel()), stats)

    def _select(self, query: torch.Tensor, keys: torch.Tensor, t: HashClusterTable,
                candidates: torch.Tensor) -> tuple[list[torch.Tensor], dict]:
        """Steps 3-5 (§IV.C) on the layer's table: (token positions per KV head, the selection's raw counts)."""
        r = select_tokens(query, t, cfg=self.cfg, candidates=candidates, quant_bits=self.quant_bits)
        return r.indices, r.stats

    def _stats(self, raw: dict, keys: torch.Tensor, candidates: torch.Tensor) -> dict:
        """The step's statistics from :meth:`_select`'s raw counts (``select`` adds the hashing and the time)."""
        grp_rows = raw["rows"] // self.n_kv_heads
        per_head = raw["clusters"]
        return dict(rows=raw["rows"], scored=sum(per_head), score_dims=self.head_dim,
                    score_macs=sum(grp_rows * c * self.head_dim for c in per_head),
                    clusters=sum(per_head), clusters_selected=sum(raw["clusters_selected"]),
                    clusters_per_head=list(per_head), clusters_selected_per_head=list(raw["clusters_selected"]),
                    prefix_frac=raw["prefix_frac"])


class ReSVNoClustering(ReSVConfigured):
    """Fig. 19 "ReSV w/o clustering": WiCSum (same weights, same Th_r-wics) over every cached key."""

    name = "resv_noclust"

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.head_dim = head_dim

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        pass  # no table: every key is its own cluster

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        hkv, s, d = keys.shape
        if candidates.numel() == 0:
            return None
        with Stopwatch() as sw:
            rows = kv_rows(query.detach(), hkv)                             # [Hkv, R, D]
            scores = torch.matmul(rows.double(), keys.detach().double().transpose(-1, -2)) / math.sqrt(d)
            ones = torch.ones(s, dtype=torch.int64, device=keys.device)
            indices, n_sel = [], 0
            for h in range(hkv):
                mask = wicsum_select(cluster_weights(scores[h], self.cfg.score), ones, self.cfg.th_r_wics,
                                     self.quant_bits).any(0)               # union over the head's rows
                n_sel += int(mask.sum())
                chosen = mask.nonzero().flatten()
                indices.append(chosen[torch.isin(chosen, candidates.to(chosen.device))].to(candidates.device))
        r = rows.shape[1]
        stats = dict(rows=hkv * r, scored=hkv * s, score_dims=d, score_macs=hkv * r * s * d,
                     clusters=hkv * s, clusters_selected=n_sel, select_s=sw.seconds)
        return Selection(indices, int(candidates.numel()), stats)


class ReSVRescore(ReSV):
    """Beyond the paper (docs/DECISIONS.md D262): ReSV's HC table as a shortlist -- clusters ranked by the bound
    ``q·c̄ + ||q||·r_c`` until their members reach ``shortlist`` of the candidates -- and the shortlisted members
    re-scored exactly before WiCSum (:func:`vrex_lib.resv.rescore.rescore_select`). ``counters`` sums the keys
    re-scored (``shortlist_keys``) and the candidates seen, so a study can charge the key reads."""

    name = "resv_rescore"

    def __init__(self, cfg: ReSVConfig | None = None, quant_bits: int | None = None, shortlist: float = 0.02,
                 rank: str = "bound", **overrides):
        super().__init__(cfg, quant_bits, **overrides)
        if not 0.0 < float(shortlist) <= 1.0:
            raise ValueError(f"resv_rescore: shortlist must be in (0, 1] (a fraction of the candidates), got "
                             f"{shortlist}")
        self.shortlist = float(shortlist)
        if rank not in RANKS:
            raise ValueError(f"resv_rescore: rank={rank!r}: use one of {', '.join(RANKS)}")
        self.rank = rank
        self.counters = dict(shortlist_keys=0, candidates=0)

    def _select(self, query: torch.Tensor, keys: torch.Tensor, t: HashClusterTable,
                candidates: torch.Tensor) -> tuple[list[torch.Tensor], dict]:
        return rescore_select(query, keys.detach(), t, candidates, self.cfg.th_r_wics, self.shortlist, self.rank)

    def _stats(self, st: dict, keys: torch.Tensor, candidates: torch.Tensor) -> dict:
        """Also adds the step's re-scored keys and candidates to ``counters``."""
        hkv = keys.shape[0]
        self.counters["shortlist_keys"] += st["shortlist_keys"]
        self.counters["candidates"] += int(candidates.numel()) * hkv
        grp_rows = st["rows"] // hkv
        return dict(rows=st["rows"], scored=sum(st["clusters"]) + st["shortlist_keys"], score_dims=self.head_dim,
                    score_macs=grp_rows * (sum(st["clusters"]) + st["shortlist_keys"]) * self.head_dim,
                    clusters=sum(st["clusters"]), clusters_selected=sum(st["clusters_shortlisted"]),
                    clusters_per_head=st["clusters"], clusters_selected_per_head=st["clusters_shortlisted"],
                    shortlist_keys=st["shortlist_keys"])
