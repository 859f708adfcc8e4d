"""Per-layer attention inputs of the current forward step, for policies that need more than post-RoPE Q/K.

The attention function (:mod:`vrex_lib.runtime.attention`) receives post-RoPE queries and keys only. Two
reference baselines need what comes before that:

* ReKV (Becomebright/ReKV) scores *pre-RoPE* keys and queries: it un-rotates them with this step's RoPE
  ``(cos, sin)`` (:func:`unrope`), exactly, at the positions the runtime used;
* InfiniGen (snu-comparch/InfiniGen) speculates layer ℓ's attention from layer ℓ-1's attention *input*
  (the hidden state after its input norm) times layer ℓ's ``W_q``.

:func:`attach` adds one forward pre-hook per decoder layer's ``self_attn`` that keeps a reference to that
call's ``hidden_states`` [B, N, hidden] and ``position_embeddings`` ``(cos, sin)`` [B, N, D]; nothing is copied
or changed, and the hooks are added once per model (idempotent) and only when a policy asks (``bind``).
Within one step, layer ℓ's entry is written before layer ℓ's attention runs, and layer ℓ-1's entry then holds
the same step's tokens.
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
