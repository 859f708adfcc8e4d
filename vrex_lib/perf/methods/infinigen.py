"""InfiniGen (Lee et al., OSDI 2024) and the V-Rex authors' prefill extension InfiniGenP (§VI.A).

``infinigen``: speculative partial-key scoring at text steps -- a partial query projection, a partial Q·K^T over a
resident copy of the partial keys, softmax/aggregation kernels and a radix top-k, then a fetch of the selected
tokens (token layout); frame prefill fetches everything. ``infinigen_p``: full-key Q·K^T over every key + top-k
during frame prefill (the keys stay resident in device DRAM, so only V is fetched), partial keys at text steps.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model_ops import BF16, Op
from .base import PredContext, PredWork, SimMethod


def key_scoring_work(ctx: PredContext, partial: bool) -> PredWork:
    """Partial-key (InfiniGen) or full-key (InfiniGenP frame stage) scoring of ``ctx.n_cand`` candidates, then
    softmax/aggregation over each KV head's query heads and a radix top-k reading the scores ``topk_passes`` times."""
    p, llm, B, N = ctx.p, ctx.llm, ctx.batch, ctx.n_new
    Hq, Hkv, D = llm.n_q_heads, llm.n_kv_heads, llm.head_dim
    rows_q = B * N * Hq
    f = p.infinigen_partial_frac if partial else p.infinigen_p_key_frac
    dp = max(1.0, f * D)
    qproj = Op("pred_qproj", "pred", 2.0 * B * N * llm.hidden * Hq * dp,
               weight_bytes=llm.hidden * Hq * dp * BF16) if partial else None
    score = Op("pred_score", "pred", 2.0 * rows_q * dp * ctx.n_cand,
               kv_bytes=B * ctx.n_cand * Hkv * dp * BF16, act_bytes=rows_q * ctx.n_cand * 4, kernels=1)
    reduce_ = Op("pred_reduce", "pred", 3.0 * rows_q * ctx.n_cand,
                 act_bytes=rows_q * ctx.n_cand * 4 + B * Hkv * ctx.n_cand * 4, kernels=2)
    topk = Op("pred_topk", "pred", 0.0, act_bytes=p.topk_passes * B * Hkv * ctx.n_cand * 4, kernels=p.topk_passes)
    return PredWork([o for o in (qproj, score, reduce_, topk) if o is not None])


@dataclass(frozen=True)
class InfiniGenModel(SimMethod):
    """Partial-key scoring at text steps only (``frame_scoring`` None); InfiniGenP adds full-key frame scoring."""

    frame_scoring: str | None = None  # None | 'full_key'

    def predictor(self, stage: str) -> str:
        if stage == "frame":
            return self.frame_scoring or "none"
        return "partial_key"

    def prediction_work(self, stage: str, ctx: PredContext) -> PredWork:
        if not self.selects(stage) or ctx.n_cand <= 0:
            return PredWork([])
        return key_scoring_work(ctx, partial=self.predictor(stage) == "partial_key")

    def metadata_bytes(self, llm, p, kv_len, batch, tokens_per_frame, tokens_per_cluster) -> float:
        frac = p.infinigen_p_key_frac if self.frame_scoring == "full_key" else p.infinigen_partial_frac
        return batch * kv_len * llm.n_layers * llm.n_kv_heads * llm.head_dim * frac * 2

    def keys_resident(self, p) -> bool:
        return self.frame_scoring == "full_key" and p.infinigen_p_key_frac >= 1.0


MODELS = (InfiniGenModel("infinigen", layout="token", ratio_key="infinigen"),
          InfiniGenModel("infinigen_p", layout="token", ratio_key="infinigen_p", frame_scoring="full_key"))
