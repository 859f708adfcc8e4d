"""Per-layer attention inputs of the current forward step, for policies that need more than post-RoPE Q/K.

The attention function (:mod:`vrex_lib.runtime.attention`) receives post-RoPE queries and keys only. Two
reference baselines need what comes before that:

* ReKV (Becomebright/ReKV) scores *pre-RoPE* keys and queries: :func:`attach_pre_rope` keeps the outputs of
  every layer's ``q_proj`` / ``k_proj``, the very tensors RoPE is then applied to (un-rotating the post-RoPE
  tensors with :func:`unrope` is exact only in fp32: in bf16 it loses ~3e-3 relative);
* InfiniGen (snu-comparch/InfiniGen) speculates layer ℓ's attention from layer ℓ-1's attention *input*
  (the hidden state after its input norm) times layer ℓ's ``W_q``.

:func:`attach` adds one forward pre-hook per decoder layer's ``self_attn`` that keeps a reference to that
call's ``hidden_states`` [B, N, hidden] and ``position_embeddings`` ``(cos, sin)`` [B, N, D]; nothing is copied
or changed, and the hooks are added once per model (idempotent) and only when a policy asks (``bind``);
:func:`attach_pre_rope` likewise adds one forward hook per projection. Within one step, layer ℓ's entries are
written before layer ℓ's attention function runs, and layer ℓ-1's entry then holds the same step's tokens.
"""
from __future__ import annotations

import torch


def attach(model) -> list:
    """Install the capture hooks on ``model`` (a StreamingVideoLLM) once; returns the per-layer list whose entry
    ℓ is ``(hidden_states, (cos, sin))`` of the latest forward of layer ℓ's attention (None before any)."""
    store = getattr(model, "_vrex_attn_inputs", None)
    if store is not None:
        return store
    layers = model.llm.model.layers
    store = [None] * len(layers)

    def make(i: int):
        def hook(module, args, kwargs):
            h = kwargs.get("hidden_states", args[0] if args else None)
            store[i] = (h, kwargs.get("position_embeddings"))
        return hook

    for i, layer in enumerate(layers):
        layer.self_attn.register_forward_pre_hook(make(i), with_kwargs=True)
    model._vrex_attn_inputs = store
    return store


def attach_pre_rope(model) -> list:
    """Install forward hooks on every decoder layer's ``self_attn.q_proj`` and ``k_proj`` of ``model`` (a
    StreamingVideoLLM) once; returns the per-layer list whose entry ℓ is ``[q, k]``, the outputs of the latest
    forward of layer ℓ's projections: ``q`` [B, N, Hq·D], ``k`` [B, N, Hkv·D] (None before any).

    These are the pre-RoPE queries and keys only when nothing sits between the projection and the rotary
    embedding, as in Llama; an attention with q/k normalisation after the projection is refused.
    """
    store = getattr(model, "_vrex_pre_rope", None)
    if store is not None:
        return store
    layers = model.llm.model.layers
    attn0 = layers[0].self_attn
    if any(hasattr(attn0, n) for n in ("q_norm", "k_norm")):
        raise ValueError(f"{getattr(model, 'name', type(model).__name__)}: its attention normalises q/k after the "
                         "projection, so q_proj/k_proj outputs are not the pre-RoPE tensors ReKV scores; use a "
                         "Llama-family model or ReKV mode='legacy' (post-RoPE)")
    store = [[None, None] for _ in layers]

    def make(i: int, j: int):
        def hook(module, args, output):
            store[i][j] = output
        return hook

    for i, layer in enumerate(layers):
        layer.self_attn.q_proj.register_forward_hook(make(i, 0))
        layer.self_attn.k_proj.register_forward_hook(make(i, 1))
    model._vrex_pre_rope = store
    return store


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """HF Llama's rotate_half: (x1, x2) -> (-x2, x1) over the last dim's halves."""
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [H, N, D] with ``cos``/``sin`` [N, D] (HF Llama layout): x·cos + rotate_half(x)·sin."""
    return x * cos + rotate_half(x) * sin


def unrope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`rope` at the same positions: x·cos − rotate_half(x)·sin (a rotation by −θ; exact up to
    rounding since cos² + sin² = 1 per frequency pair)."""
    return x * cos - rotate_half(x) * sin
