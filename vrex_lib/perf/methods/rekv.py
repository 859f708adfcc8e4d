"""ReKV (Di et al., ICLR 2025) as the simulator's ``rekv``: frame-block mean keys scored against the step's
queries, a top-k of blocks, whole frames (one block = one frame's tokens) fetched."""
from __future__ import annotations

from dataclasses import dataclass

from ..model_ops import BF16, Op
from .base import PredContext, PredWork, SimMethod


@dataclass(frozen=True)
class ReKVModel(SimMethod):
    def predictor(self, stage: str) -> str:
        return "block_mean"

    def prediction_work(self, stage: str, ctx: PredContext) -> PredWork:
        if ctx.n_cand <= 0:
            return PredWork([])
        p, llm, B, N = ctx.p, ctx.llm, ctx.batch, ctx.n_new
        Hkv, D = llm.n_kv_heads, llm.head_dim
        rows_q = B * N * llm.n_q_heads
        blocks = ctx.n_cand / ctx.tokens_per_frame
        score = Op("pred_score", "pred", 2.0 * rows_q * D * blocks, kv_bytes=B * blocks * Hkv * D * BF16,
                   act_bytes=rows_q * blocks * 4, kernels=1)
        topk = Op("pred_topk", "pred", 0.0, act_bytes=(1 + p.topk_passes) * B * Hkv * blocks * 4,
                  kernels=1 + p.topk_passes)
        return PredWork([score, topk])

    def metadata_bytes(self, llm, p, kv_len, batch, tokens_per_frame, tokens_per_cluster) -> float:
        return batch * kv_len / tokens_per_frame * llm.n_layers * llm.n_kv_heads * llm.head_dim * 2


MODELS = (ReKVModel("rekv", layout="block", ratio_key="rekv"),)
