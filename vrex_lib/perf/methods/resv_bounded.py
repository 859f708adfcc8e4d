"""Beyond the paper: the bounded ReSV ``resv_best`` (:mod:`vrex_lib.resv.bounded`, docs/DECISIONS.md D496) as a
simulator method, beside the paper's ``resv``.

What differs from ``resv`` (:mod:`.resv`), step by step:

* **Clustering** (HCU): the same hash generation on the LXE and the same Hamming compare on the HCU, but clusters
  hold at most ``cap`` tokens, so there are ``n_cand / min(cap, tpc)`` of them (more compares per new token, more
  HC-table rows) and the KVMU's cluster-contiguous runs are ``min(cap, tpc)`` tokens long
  (:meth:`ReSVBounded.cluster_tokens`).
* **Scoring**: a ``bits``-bit copy of every key (plus a 12-bit scale per token) sits in device DRAM beside the
  recent KV (:meth:`ReSVBounded.metadata_bytes`); every step reads the copies of ``shortlist`` of the candidates
  (``kv_bytes``) and scores them on the LXE's DPE (a GEMM of the query rows against the low-bit keys, the same
  mapping as ``resv``'s Q·K_cluster^T, with the low-bit values exact in BF16); the best member per cluster and the
  row sum of its softmax numerators run on the VPE (one softmax element per row and cluster). With ``shortlist``
  < 1 the centroids are scored first, as ``resv`` scores them.
* **Stop** (WTU): one walk per (stream, KV head) over the clusters in descending priority, ending at the token
  budget: the budget stop of :mod:`vrex_lib.hw.bounded` in place of WiCSum's Sum and ratio compare; the walk's
  cycles are the WTU's (:func:`~.base.dre_cycles`).
* **Fetch**: the selected share of the offloaded candidates is the budget plus, on average, half a cluster per
  (layer, KV head) (whole clusters are taken; :meth:`ReSVBounded.fallback_selection`), unless the workload holds a
  measured ``resv_best`` fraction (then that).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...resv.bounded import BoundedConfig
from ..model_ops import BF16, Gemm, Op
from .base import PredContext, PredWork, SimMethod, dre_cycles

#: Bytes of one token's scale in the low-bit copy: an 8-bit mantissa and a 4-bit exponent, rounded up to 2 B.
SCALE_BYTES = 2


def bounded_work(ctx: PredContext, cfg: BoundedConfig) -> PredWork:
    """One layer's prediction of the bounded ReSV: hash + capped clustering, low-bit scoring of the shortlist,
    best member + priorities on the VPE, the budgeted walk on the WTU."""
    p, llm, B, N = ctx.p, ctx.llm, ctx.batch, ctx.n_new
    Hkv, D = llm.n_kv_heads, llm.head_dim
    rows_q = B * N * llm.n_q_heads
    tpc = max(1.0, min(float(cfg.cap), ctx.tokens_per_cluster))
    C = ctx.n_cand / tpc
    C_recent = max(1.0, min(ctx.n_cand, p.recent_capacity) / tpc)
    n_scored = cfg.shortlist * ctx.n_cand
    hashg = Op("pred_hash", "pred", 2.0 * B * N * Hkv * D * p.n_hp, act_bytes=B * N * Hkv * (D * BF16 + p.n_hp / 8),
               weight_bytes=p.n_hp * D * BF16, kernels=1, gemms=(Gemm(N, D, p.n_hp, B * Hkv),))
    lowbit = Op("pred_lowbit_score", "pred", 2.0 * rows_q * D * n_scored,
                kv_bytes=B * Hkv * n_scored * (D * cfg.bits / 8 + SCALE_BYTES),
                act_bytes=rows_q * n_scored * BF16, kernels=1,
                gemms=(Gemm(N * llm.group, D, max(1, math.ceil(n_scored)), B * Hkv),),
                vpe=dict(softmax=rows_q * C * cfg.shortlist))
    ops = [hashg, lowbit]
    if cfg.shortlist < 1.0:  # the centroid front end, as resv scores its clusters
        ops.append(Op("pred_score", "pred", 2.0 * rows_q * D * C, kv_bytes=B * C * Hkv * (D * BF16 + 4 + 2),
                      act_bytes=rows_q * C * BF16, kernels=1,
                      gemms=(Gemm(N * llm.group, D, max(1, math.ceil(C)), B * Hkv),)))
    ops.append(Op("pred_hcmap", "pred", 0.0, kv_bytes=B * Hkv * ctx.n_cand * 4 * 0.5, kernels=1))
    compares = B * N * Hkv * C_recent
    if ctx.engine == "gpu":
        return PredWork(ops + [Op("pred_cluster", "pred", 2.0 * compares, act_bytes=B * Hkv * N * C_recent * 8,
                                  kernels=N),
                               Op("pred_topk", "pred", 4.0 * B * Hkv * C, act_bytes=B * Hkv * C * 8 * (p.sort_passes + 2),
                                  kernels=p.sort_passes + 2)])
    if ctx.core is None or ctx.n_cores < 1:
        raise ValueError("prediction on the DRE needs the V-Rex core configuration and core count")
    per_unit_tokens = math.ceil(B * Hkv * N / ctx.n_cores)
    walks = math.ceil(B * Hkv / ctx.n_cores)        # one budgeted walk per (stream, KV head), not per row
    hcu, wtu = dre_cycles(per_unit_tokens, int(round(C_recent)), math.ceil(per_unit_tokens / tpc), walks,
                          int(math.ceil(C)), ctx.core)
    return PredWork(ops, hcu_cycles=hcu, wtu_cycles=wtu, hcu_compares=compares, wtu_elems=B * Hkv * C * 2)


@dataclass(frozen=True)
class ReSVBounded(SimMethod):
    """``resv_best``: capped clusters + a low-bit best-member score + a budgeted stop (the module docstring)."""

    cfg: BoundedConfig = field(default_factory=BoundedConfig)

    def predictor(self, stage: str) -> str:
        return "resv_bounded"

    def engine(self, system_kind: str, stage: str) -> str:
        return "dre" if system_kind == "vrex" else "gpu"

    def on_system(self, system_kind: str) -> SimMethod:
        base = super().on_system(system_kind)
        return base.replace(layout="token") if system_kind != "vrex" and base.layout == "cluster" else base

    def cluster_tokens(self, tokens_per_cluster: float) -> float:
        """Tokens per cluster under the cap (the KVMU's run length and the HC table's rows)."""
        return min(float(self.cfg.cap), tokens_per_cluster)

    def fallback_selection(self, stage: str, kv_len: int) -> tuple[float, str]:
        # No paper-stated ratio exists for it; a workload measured with it holds "resv_best" (looked up first).
        r = min(1.0, self.cfg.budget + 0.5 * self.cfg.cap / max(1.0, float(kv_len)))
        return r, "budget + half a cluster (BoundedConfig)"

    def prediction_work(self, stage: str, ctx: PredContext) -> PredWork:
        return bounded_work(ctx, self.cfg) if ctx.n_cand > 0 else PredWork([])

    def metadata_bytes(self, llm, p, kv_len, batch, tokens_per_frame, tokens_per_cluster) -> float:
        # HC table as resv's (capped clusters: more rows) + the low-bit key copy of every token.
        tpc = self.cluster_tokens(tokens_per_cluster)
        per_head = kv_len / tpc * (llm.head_dim * 2 + 6) + kv_len * 4 + kv_len * (llm.head_dim * self.cfg.bits / 8
                                                                                  + SCALE_BYTES)
        return batch * llm.n_layers * llm.n_kv_heads * per_head


MODELS = (ReSVBounded("resv_best", layout="cluster"),)
