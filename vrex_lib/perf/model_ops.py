"""The VideoLLM-online workload, op by op: Llama-3-8B decoder + SigLIP-ViT-L-384 vision tower + MLP connector.

Everything here is *counts* (FLOPs and bytes), never time: the systems and methods turn counts into time.
Model dimensions are the public configurations (docs/DECISIONS.md D8): Llama-3-8B(-Instruct) and
google/siglip-large-patch16-384; VideoLLM-online "Live1+ 3x3" feeds 10 tokens per frame (CLS + 3x3 pooled).

Shapes (per decoder layer, per stream): new tokens X [N, hidden]; Q [Hq, N, D]; K,V [Hkv, S, D] with S the
attended KV length; FFN is SwiGLU (gate, up: hidden -> ffn; down: ffn -> hidden).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

BF16 = 2  # bytes per element


@dataclass(frozen=True)
class LLMSpec:
    """Decoder-only LLM dimensions (default Llama-3-8B, BF16)."""

    n_layers: int = 32
    hidden: int = 4096
    n_q_heads: int = 32
    n_kv_heads: int = 8
    head_dim: int = 128
    ffn: int = 14336
    vocab: int = 128256
    bytes_per_param: int = BF16
    kv_bits: int = 16  # 4 models Oaken's 4-bit KV quantisation (Fig. 15)

    @property
    def group(self) -> int:
        return self.n_q_heads // self.n_kv_heads

    @property
    def layer_params(self) -> int:
        h, kv = self.hidden, self.n_kv_heads * self.head_dim
        return h * self.n_q_heads * self.head_dim + 2 * h * kv + self.n_q_heads * self.head_dim * h + 3 * h * self.ffn

    @property
    def params(self) -> int:
        """Decoder layers + embedding + LM head (untied in Llama-3-8B)."""
        return self.n_layers * self.layer_params + 2 * self.vocab * self.hidden

    @property
    def weight_bytes(self) -> int:
        return self.params * self.bytes_per_param

    @property
    def kv_bytes_per_token_layer(self) -> float:
        """K and V of one token in one layer (all KV heads): 2 * Hkv * D * kv_bits/8 (4096 B for Llama-3-8B)."""
        return 2 * self.n_kv_heads * self.head_dim * self.kv_bits / 8

    @property
    def kv_bytes_per_token(self) -> float:
        """131,072 B per token for Llama-3-8B BF16 (docs/DECISIONS.md D8)."""
        return self.n_layers * self.kv_bytes_per_token_layer


@dataclass(frozen=True)
class VisionSpec:
    """SigLIP-ViT-L/16-384 frame encoder + VideoLLM-online's 2-layer MLP connector (1024 -> 4096 -> 4096)."""

    n_layers: int = 24
    hidden: int = 1024
    n_heads: int = 16
    mlp: int = 4096
    n_patches: int = 576  # (384/16)^2
    tokens_per_frame: int = 10  # CLS + 3x3 pooled (VideoLLM-online Live1+)
    connector_hidden: int = 4096
    llm_hidden: int = 4096
    bytes_per_param: int = BF16

    @property
    def layer_params(self) -> int:
        return 4 * self.hidden * self.hidden + 2 * self.hidden * self.mlp

    @property
    def params(self) -> int:
        patch_embed = 3 * 16 * 16 * self.hidden
        connector = self.hidden * self.connector_hidden + self.connector_hidden * self.llm_hidden
        return self.n_layers * self.layer_params + patch_embed + connector

    @property
    def weight_bytes(self) -> int:
        return self.params * self.bytes_per_param


@dataclass(frozen=True)
class Gemm:
    """``count`` independent products ``[rows, k] x [k, n]``; the ``[k, n]`` operand streams from DRAM (weights,
    or cached keys/values in attention) and is reused by the ``rows`` inputs."""

    rows: int
    k: int
    n: int
    count: int = 1

    def __post_init__(self) -> None:
        if min(self.rows, self.k, self.n, self.count) < 1:
            raise ValueError(f"Gemm dimensions must be >= 1, got {self}")


@dataclass
class Op:
    """One operator's work for one batched step (all streams of the batch).

    kind: 'gemm' (weight-streaming matmul), 'attn' (attention over cached KV), 'pred' (KV prediction),
          'vector' (elementwise / norms), 'vision' (vision tower + connector).
    flops: floating-point operations (2 per MAC). DRAM traffic by access stream (:mod:`vrex_lib.perf.dram`):
    ``weight_bytes`` and ``act_bytes`` long reads; ``kv_bytes`` reads of resident KV in long runs; ``sel_kv_bytes``
    reads of selected KV in runs of ``sel_run_bytes``; ``kv_write_bytes`` new K/V written in runs of
    ``kv_write_run_bytes``; ``dma_bytes`` fetched KV landing from the link in runs of ``dma_run_bytes``.
    gemms / vpe: the work the V-Rex LXE model maps (:mod:`vrex_lib.perf.lxe`); GPUs use flops and bytes.
    kernels: GPU kernel launches; host_ops: framework calls an eager host issues (None = one per kernel).
    """

    name: str
    kind: str
    flops: float
    weight_bytes: float = 0.0
    kv_bytes: float = 0.0
    act_bytes: float = 0.0
    kernels: int = 1
    sel_kv_bytes: float = 0.0
    sel_run_bytes: float = math.inf
    kv_write_bytes: float = 0.0
    kv_write_run_bytes: float = math.inf
    dma_bytes: float = 0.0
    dma_run_bytes: float = math.inf
    gemms: tuple[Gemm, ...] = ()
    vpe: dict = field(default_factory=dict)
    host_ops: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def dram_bytes(self) -> float:
        return (self.weight_bytes + self.kv_bytes + self.act_bytes + self.sel_kv_bytes + self.kv_write_bytes
                + self.dma_bytes)

    @property
    def macs(self) -> float:
        return self.flops / 2

    @property
    def n_host_ops(self) -> int:
        return self.kernels if self.host_ops is None else self.host_ops


def _gemm(name: str, n_rows: int, k: int, n: int, bpp: int, host_ops: int | None = None) -> Op:
    """X[n_rows, k] @ W[k, n]: weights read once per batched step, activations in and out."""
    return Op(name, "gemm", 2.0 * n_rows * k * n, weight_bytes=k * n * bpp, act_bytes=(n_rows * k + n_rows * n) * BF16,
              gemms=(Gemm(n_rows, k, n),), host_ops=host_ops)


#: Framework calls per op of one eager decoder layer (pytorch-labs/gpt-fast model.py TransformerBlock counted with
#: TorchDispatchMode; total = constants ``stack.eager_ops_per_layer``): linears 4 each, attention (RoPE, KV-cache
#: update, repeat_interleave, SDPA, reshapes) 61, FFN 14, norms + residuals 19.
EAGER_HOST_OPS = dict(qkv=4, attn=61, o_proj=4, ffn=14, vector=19)

#: Per GPU software stack, per decoder op: (framework calls the host issues, kernels the GPU runs, kernels among them
#: that stream DRAM -- weights or cached KV), from each framework's own trace (:mod:`vrex_lib.perf.constants`
#: ``stack.*``): 'compiled' = gpt-fast's Inductor graph in CUDA graphs (no host calls); 'eager' = eager gpt-fast
#: (the GPU baselines' stack); 'hf_eager' = Hugging Face transformers 4.35 eager (the Jetson AI Lab measurement).
#: ``lm_head`` is the step outside the layers (embedding, final norm, LM head).
STACK_COUNTS: dict[str, dict[str, tuple[int, int, int]]] = {
    "compiled": dict(qkv=(0, 2, 1), attn=(0, 1, 1), o_proj=(0, 1, 1), ffn=(0, 4, 3), vector=(0, 2, 0),
                     lm_head=(0, 2, 1)),
    "eager": dict(qkv=(4, 1, 1), attn=(61, 22, 1), o_proj=(4, 1, 1), ffn=(14, 5, 3), vector=(19, 14, 0)),
    "hf_eager": dict(qkv=(9, 3, 3), attn=(50, 18, 4), o_proj=(3, 1, 1), ffn=(11, 5, 3), vector=(16, 14, 0),
                     lm_head=(13, 8, 1)),
}


def stack_counts(stack: str, op: "Op") -> tuple[int, int, int]:
    """(host calls, kernels, DRAM-streaming kernels) of ``op`` under GPU software ``stack`` (:data:`STACK_COUNTS`);
    an op the table does not list (prediction kernels, the vision tower, FlexGen's staging) keeps its own counts,
    each of its kernels taken as streaming DRAM (no host calls in a compiled graph)."""
    if stack not in STACK_COUNTS:
        raise ValueError(f"unknown GPU software stack {stack!r}: choose one of {', '.join(STACK_COUNTS)}")
    row = STACK_COUNTS[stack].get(op.name)
    if row is not None:
        return row
    return (0 if stack == "compiled" else op.n_host_ops), op.kernels, op.kernels


def decoder_layer_ops(llm: LLMSpec, n_new: int, batch: int, n_attended: float, *, n_selected: float = 0.0,
                      sel_run_bytes: float = math.inf) -> list[Op]:
    """One decoder layer for ``batch`` streams, each adding ``n_new`` tokens and attending ``n_attended`` cached
    tokens (recent + retrieved + its own new tokens), all read from accelerator DRAM; ``n_selected`` of them are
    selected tokens read in runs of ``sel_run_bytes`` (the rest are contiguous recent KV).

    Returns ops in execution order: qkv (+ RoPE), attn (+ softmax), o_proj, ffn (+ SiLU gate), and the norms and
    residuals as one 'vector' op. Shapes per stream: X [n_new, hidden]; K, V [n_kv_heads, n_attended, head_dim].
    """
    if n_new < 1 or batch < 1 or n_attended < 0 or not 0 <= n_selected <= n_attended:
        raise ValueError(f"decoder_layer_ops: need n_new>=1, batch>=1, 0<=n_selected<=n_attended "
                         f"(got {n_new}, {batch}, {n_selected}, {n_attended})")
    rows = n_new * batch
    h, d, g = llm.hidden, llm.head_dim, llm.group
    q_dim, kv_dim = llm.n_q_heads * d, llm.n_kv_heads * d
    bpp = llm.bytes_per_param
    kvb = llm.kv_bytes_per_token_layer
    qkv = _gemm("qkv", rows, h, q_dim + 2 * kv_dim, bpp, EAGER_HOST_OPS["qkv"])
    qkv.kv_write_bytes = rows * kvb  # the new K,V written to the cache, per (stream, head) one run of n_new tokens
    qkv.kv_write_run_bytes = n_new * d * llm.kv_bits / 8
    qkv.vpe = dict(rope=rows * (llm.n_q_heads + llm.n_kv_heads) * d)
    # QK^T and AV: 2 matmuls, 2 FLOP per MAC, per query head; GQA reads each KV head once per group.
    attn_flops = 2 * 2.0 * batch * llm.n_q_heads * n_new * n_attended * d
    s = max(1, math.ceil(n_attended))
    attn = Op("attn", "attn", attn_flops, kv_bytes=batch * (n_attended - n_selected) * kvb,
              act_bytes=2 * rows * q_dim * BF16, kernels=1, sel_kv_bytes=batch * n_selected * kvb,
              sel_run_bytes=sel_run_bytes, host_ops=EAGER_HOST_OPS["attn"],
              gemms=(Gemm(n_new * g, d, s, batch * llm.n_kv_heads), Gemm(n_new * g, s, d, batch * llm.n_kv_heads)),
              vpe=dict(softmax=batch * llm.n_q_heads * n_new * n_attended))
    o = _gemm("o_proj", rows, q_dim, h, bpp, EAGER_HOST_OPS["o_proj"])
    ffn = _gemm("ffn", rows, h, 2 * llm.ffn, bpp)
    down = _gemm("ffn_down", rows, llm.ffn, h, bpp)
    ffn = Op("ffn", "gemm", ffn.flops + down.flops + rows * llm.ffn * 4.0,
             weight_bytes=ffn.weight_bytes + down.weight_bytes, act_bytes=ffn.act_bytes + down.act_bytes, kernels=3,
             gemms=ffn.gemms + down.gemms, vpe=dict(silu_mul=rows * llm.ffn), host_ops=EAGER_HOST_OPS["ffn"])
    # RMSNorm x2, RoPE, residual x2, SiLU*mul: ~20 FLOP per element of the hidden state, 6 passes over it.
    vec = Op("vector", "vector", 20.0 * rows * h, act_bytes=6 * rows * h * BF16, kernels=6,
             vpe=dict(rmsnorm=2 * rows * h, residual=2 * rows * h), host_ops=EAGER_HOST_OPS["vector"])
    return [qkv, attn, o, ffn, vec]


def lm_head_op(llm: LLMSpec, rows: int, host_ops: int | None = None) -> Op:
    """LM head on ``rows`` positions (frame stage: each stream's last frame token decides whether to speak);
    ``host_ops``: the eager step's calls outside the layers (embedding, final norm, sampling)."""
    return _gemm("lm_head", rows, llm.hidden, llm.vocab, llm.bytes_per_param, host_ops)


def vision_op(vis: VisionSpec, batch: int) -> Op:
    """SigLIP-ViT-L-384 over one frame per stream + MLP connector on the 10 pooled tokens, as one op."""
    p, hd, L = vis.n_patches, vis.hidden, vis.n_layers
    heads = vis.n_heads
    dh = hd // heads
    tower = L * (2.0 * p * vis.layer_params + 2 * 2.0 * p * p * hd)
    patch = 2.0 * p * 3 * 16 * 16 * hd
    conn = 2.0 * vis.tokens_per_frame * (hd * vis.connector_hidden + vis.connector_hidden * vis.llm_hidden)
    act = L * 8 * p * hd * BF16
    rows = batch * p
    per_layer = (Gemm(rows, hd, 3 * hd), Gemm(rows, hd, hd), Gemm(rows, hd, vis.mlp), Gemm(rows, vis.mlp, hd),
                 Gemm(p, dh, p, batch * heads), Gemm(p, p, dh, batch * heads))
    gemms = per_layer * L + (Gemm(rows, 3 * 16 * 16, hd), Gemm(batch * vis.tokens_per_frame, hd, vis.connector_hidden),
                             Gemm(batch * vis.tokens_per_frame, vis.connector_hidden, vis.llm_hidden))
    vpe = dict(softmax=batch * L * heads * p * p, layernorm=2 * L * rows * hd, gelu=L * rows * vis.mlp,
               residual=2 * L * rows * hd)
    return Op("vision_mlp", "vision", batch * (tower + patch + conn), weight_bytes=vis.weight_bytes,
              act_bytes=batch * act, kernels=vis.n_layers * 8, gemms=gemms, vpe=vpe)


@dataclass(frozen=True)
class COINCase:
    """The average COIN working scenario (paper §VI.A: 26 frames, 25 question tokens, 39 answer tokens)."""

    frames: int = 26
    question_tokens: int = 25
    answer_tokens: int = 39
    source: str = "paper §VI.A average COIN case"

    @classmethod
    def from_stats(cls, path: str | Path) -> "COINCase":
        """Read notebook 01's ``coin_stats.csv`` (``vrex_lib.coin.task_stats``: columns task, avg_frames_2fps,
        avg_question_tokens, avg_answer_tokens, tokenizer; the pooled row has task 'all')."""
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"{p}: no COIN statistics; run notebooks/01_coin_data.ipynb first "
                                    "or use COINCase()")
        df = pd.read_csv(p)
        need = {"task", "avg_frames_2fps", "avg_question_tokens", "avg_answer_tokens"}
        if not need <= set(df.columns):
            raise ValueError(f"{p}: needs columns {sorted(need)}, has {list(df.columns)}; rerun notebook 01")
        row = df[df.task == "all"].iloc[0] if (df.task == "all").any() else df[list(need - {"task"})].mean()
        tok = f", tokenizer {row['tokenizer']}" if "tokenizer" in df.columns and "tokenizer" in row else ""
        return cls(max(1, int(round(row["avg_frames_2fps"]))), max(1, int(round(row["avg_question_tokens"]))),
                   max(1, int(round(row["avg_answer_tokens"]))), source=f"measured by notebook 01 ({p.name}{tok})")


LLAMA3_8B = LLMSpec()
SIGLIP_L384 = VisionSpec()
