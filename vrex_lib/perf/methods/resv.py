"""ReSV (§IV) as the simulator's ``resv`` and the Fig. 16 KVPU-only ablation ``resv_kvpu``.

Hash generation and Q·K_cluster^T run on the main engine (the LXE's DPE on V-Rex); clustering and WiCSum run on
the DRE's HCU/WTU on V-Rex (:mod:`vrex_lib.hw.timing` cycle models) or as GPU kernels elsewhere (GPU+ReSV,
Fig. 16). ``resv`` on V-Rex fetches cluster-contiguous runs (the KVMU's reordering, §V.C); on a GPU, or as
``resv_kvpu`` (the KVPU without the KVMU), clusters stay scattered in token order.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..model_ops import BF16, Gemm, Op
from .base import PredContext, PredWork, SimMethod, dre_cycles


def _gpu_work(ctx: PredContext, hashg: Op, score: Op, hcmap: Op, compares: float, C: float,
              C_recent: float) -> PredWork:
    p, B, N, Hkv = ctx.p, ctx.batch, ctx.n_new, ctx.llm.n_kv_heads
    rows_q = B * N * ctx.llm.n_q_heads
    # Clustering: tokens join clusters in arrival order (a dependency chain), one kernel per new token, plus the
    # eager host calls per new token and KV head a GPU port issues (SimParams.gpu_resv_host_calls, D423).
    calls = N + B * N * Hkv * p.gpu_resv_host_calls
    clus = Op("pred_cluster", "pred", 2.0 * compares, act_bytes=B * Hkv * N * C_recent * 4 * 2, kernels=calls)
    # WiCSum on a GPU: sort each row (radix sort of 32-bit scores + payload: sort_passes read+write passes),
    # cumulative sum, threshold, union over rows.
    wics = Op("pred_wicsum", "pred", 4.0 * rows_q * C, act_bytes=rows_q * C * 8 * (p.sort_passes + 2),
              kernels=p.sort_passes + 4)
    return PredWork([hashg, clus, score, wics, hcmap])


def _dre_work(ctx: PredContext, hashg: Op, score: Op, hcmap: Op, compares: float, C: float,
              C_recent: float) -> PredWork:
    if ctx.core is None or ctx.n_cores < 1:
        raise ValueError("prediction on the DRE needs the V-Rex core configuration and core count")
    B, N, Hkv = ctx.batch, ctx.n_new, ctx.llm.n_kv_heads
    rows_q = B * N * ctx.llm.n_q_heads
    # Per core, the layer's (stream, KV head) pairs are spread over the cores' HCU/WTU.
    per_unit_tokens = math.ceil(B * Hkv * N / ctx.n_cores)
    per_unit_rows = math.ceil(rows_q / ctx.n_cores)
    opened = math.ceil(per_unit_tokens / ctx.tokens_per_cluster)
    hcu, wtu = dre_cycles(per_unit_tokens, int(round(C_recent)), opened, per_unit_rows, int(math.ceil(C)), ctx.core)
    # WTU elements: one pass over the row's clusters to find min/max and Sum, then the walk up to the early exit.
    return PredWork([hashg, score, hcmap], hcu_cycles=hcu, wtu_cycles=wtu, hcu_compares=compares,
                    wtu_elems=rows_q * C * (1 + ctx.wics_exit_frac))


def resv_work(ctx: PredContext) -> PredWork:
    """One layer's ReSV prediction: hash the new keys, cluster them, score the clusters, WiCSum, map to tokens."""
    p, llm, B, N = ctx.p, ctx.llm, ctx.batch, ctx.n_new
    Hkv, D = llm.n_kv_heads, llm.head_dim
    rows_q = B * N * llm.n_q_heads
    C = ctx.n_cand / ctx.tokens_per_cluster  # clusters per (stream, KV head)
    C_recent = max(1.0, min(ctx.n_cand, p.recent_capacity) / ctx.tokens_per_cluster)
    # On the LXE (DPE): keys [N, D] x hyperplanes [D, N_hp] per KV head; Q [N*group, D] x K_cluster^T [D, C].
    hashg = Op("pred_hash", "pred", 2.0 * B * N * Hkv * D * p.n_hp, act_bytes=B * N * Hkv * (D * BF16 + p.n_hp / 8),
               weight_bytes=p.n_hp * D * BF16, kernels=1, gemms=(Gemm(N, D, p.n_hp, B * Hkv),))
    score = Op("pred_score", "pred", 2.0 * rows_q * D * C, kv_bytes=B * C * Hkv * (D * BF16 + 4 + 2),
               act_bytes=rows_q * C * (4 if ctx.engine == "gpu" else BF16), kernels=1,
               gemms=(Gemm(N * llm.group, D, max(1, math.ceil(C)), B * Hkv),))
    # Mapping selected clusters back to token indices through the HC table (4 B per token index).
    hcmap = Op("pred_hcmap", "pred", 0.0, kv_bytes=B * Hkv * ctx.n_cand * 4 * 0.5, kernels=1)
    compares = B * N * Hkv * C_recent
    if ctx.engine == "gpu":
        return _gpu_work(ctx, hashg, score, hcmap, compares, C, C_recent)
    return _dre_work(ctx, hashg, score, hcmap, compares, C, C_recent)


@dataclass(frozen=True)
class ReSVModel(SimMethod):
    def predictor(self, stage: str) -> str:
        return "resv"

    def engine(self, system_kind: str, stage: str) -> str:
        return "dre" if system_kind == "vrex" else "gpu"

    def on_system(self, system_kind: str) -> SimMethod:
        base = super().on_system(system_kind)
        # No KVMU on a GPU: ReSV's clusters stay scattered in token order (§V.C: online reordering is impractical).
        return base.replace(layout="token") if system_kind != "vrex" and base.layout == "cluster" else base

    def prediction_work(self, stage: str, ctx: PredContext) -> PredWork:
        return resv_work(ctx) if ctx.n_cand > 0 else PredWork([])

    def metadata_bytes(self, llm, p, kv_len, batch, tokens_per_frame, tokens_per_cluster) -> float:
        # HC table: per cluster a BF16 centroid + 32-bit code + 16-bit count, plus a 32-bit index per token.
        return batch * llm.n_layers * llm.n_kv_heads * (kv_len / tokens_per_cluster * (llm.head_dim * 2 + 6)
                                                         + kv_len * 4)


MODELS = (ReSVModel("resv", layout="cluster", ratio_key="resv"),
          ReSVModel("resv_kvpu", layout="token", ratio_key="resv", vrex_only=True))
