"""Fig. 19's "ReSV w/o clustering" as the simulator's ``resv_noclust``: WiCSum on per-token scores.

Without the HC table there is no Key_cluster to score: every candidate key is scored with the query (Q·K^T over
all candidates on the LXE's DPE, or a GPU kernel), WiCSum runs over tokens instead of clusters (on V-Rex the WTU
walks rows of ``n_cand`` one-token "clusters"; on a GPU a sort + cumulative sum per row), and the selected tokens
are fetched one by one (token layout). The paper says clustering "avoids fetching/computing the full key for
WiCSum" (§VI.E): the keys of the offloaded candidates must reach the scorer, so the ablation fetches every offloaded
key (sequentially) each step and then the selected tokens' values -- or, with ``SimParams.noclust_keys='resident'``,
keeps every key on the device as InfiniGenP does and fetches only the selected values (docs/DECISIONS.md D246).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..model_ops import BF16, Gemm, Op
from .base import PredContext, PredWork, SimMethod, dre_cycles


def token_wicsum_work(ctx: PredContext) -> PredWork:
    """Score every candidate key of one layer, then WiCSum per query row over the tokens."""
    p, llm, B, N = ctx.p, ctx.llm, ctx.batch, ctx.n_new
    Hkv, D, n = llm.n_kv_heads, llm.head_dim, ctx.n_cand
    rows_q = B * N * llm.n_q_heads
    score = Op("pred_score", "pred", 2.0 * rows_q * D * n, kv_bytes=B * n * Hkv * D * BF16,
               act_bytes=rows_q * n * (4 if ctx.engine == "gpu" else BF16), kernels=1,
               gemms=(Gemm(N * llm.group, D, max(1, math.ceil(n)), B * Hkv),))
    if ctx.engine == "gpu":
        wics = Op("pred_wicsum", "pred", 4.0 * rows_q * n, act_bytes=rows_q * n * 8 * (p.sort_passes + 2),
                  kernels=p.sort_passes + 4)
        return PredWork([score, wics])
    if ctx.core is None or ctx.n_cores < 1:
        raise ValueError("prediction on the DRE needs the V-Rex core configuration and core count")
    per_unit_rows = math.ceil(rows_q / ctx.n_cores)
    _, wtu = dre_cycles(1, 1, 0, per_unit_rows, int(math.ceil(n)), ctx.core)
    return PredWork([score], hcu_cycles=0, wtu_cycles=wtu, wtu_elems=rows_q * n * (1 + ctx.wics_exit_frac))


@dataclass(frozen=True)
class ReSVNoClusteringModel(SimMethod):
    def predictor(self, stage: str) -> str:
        return "token_wicsum"

    def engine(self, system_kind: str, stage: str) -> str:
        return "dre" if system_kind == "vrex" else "gpu"

    def prediction_work(self, stage: str, ctx: PredContext) -> PredWork:
        return token_wicsum_work(ctx) if ctx.n_cand > 0 else PredWork([])

    def keys_resident(self, p) -> bool:
        return p.noclust_keys == "resident"

    def fetches_all_keys(self, p) -> bool:
        return p.noclust_keys == "fetch"

    def metadata_bytes(self, llm, p, kv_len, batch, tokens_per_frame, tokens_per_cluster) -> float:
        return batch * kv_len * llm.n_layers * llm.n_kv_heads * llm.head_dim * BF16 if self.keys_resident(p) else 0.0


MODELS = (ReSVNoClusteringModel("resv_noclust", layout="token", ratio_key="resv_noclust"),)
