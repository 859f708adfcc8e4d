"""Capture the post-RoPE queries/keys (and values) of an HF Llama-family model, for analysis.

Uses transformers' own extension point (its documented ``AttentionInterface``): an attention function registered with
``AttentionInterface`` (plus the sdpa mask via ``AttentionMaskInterface``) records what each layer's
attention receives -- queries ``[B, Hq, T, D]`` and keys/values ``[B, Hkv, T, D]``, after RoPE -- and then
calls the stock sdpa attention, so outputs are unchanged. No model class is patched. The runtime's
serving hook is separate (``vrex_lib.runtime``); this one is for Fig. 7(b), notebook 02 and DRE traces.
"""
from __future__ import annotations

import contextlib
import threading

import torch

ATTN_NAME = "vrex_capture_qk"
_state = threading.local()
_registered = False


def _capture_attention(module, query, key, value, attention_mask, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    rec = getattr(_state, "record", None)
    layer = getattr(module, "layer_idx", None)
    if rec is not None and (rec["layers"] is None or layer in rec["layers"]):
        # batch 0 only; float32 CPU copies (analysis runs on CPU; later cache updates cannot alter them)
        rec["out"][layer] = tuple(x[0].detach().to("cpu", torch.float32, copy=True) for x in (query, key, value))
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def _register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(ATTN_NAME, _capture_attention)
    AttentionMaskInterface.register(ATTN_NAME, sdpa_mask)
    _registered = True


@contextlib.contextmanager
def _capturing(model, layers):
    _register()
    prev = model.config._attn_implementation
    out: dict = {}
    _state.record = dict(layers=None if layers is None else set(layers), out=out)
    model.set_attn_implementation(ATTN_NAME)
    try:
        yield out
    finally:
        _state.record = None
        model.set_attn_implementation(prev)


@torch.no_grad()
def capture_qkv(model, input_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                layers=None) -> dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """One forward pass (no cache) -> ``{layer: (q [Hq,T,D], k [Hkv,T,D], v [Hkv,T,D])}`` post-RoPE, batch 0,
    as float32 CPU tensors whatever the model's device and dtype.

    ``input_ids [T]`` or ``[1, T]``, or ``inputs_embeds [T, hidden]`` / ``[1, T, hidden]``; ``layers`` an
    iterable of layer indices (default: all).
    """
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("capture_qk: pass exactly one of input_ids or inputs_embeds")
    kw = {}
    if input_ids is not None:
        kw["input_ids"] = (input_ids.reshape(1, -1) if input_ids.dim() == 1 else input_ids).to(model.device)
    else:
        x = inputs_embeds[None] if inputs_embeds.dim() == 2 else inputs_embeds
        kw["inputs_embeds"] = x.to(model.device, model.dtype)
    n_layers = model.config.num_hidden_layers
    if layers is not None:
        bad = [l for l in layers if not 0 <= l < n_layers]
        if bad:
            raise ValueError(f"capture_qk: layers {bad} out of range for a {n_layers}-layer model")
    with _capturing(model, layers) as out:
        model(**kw, use_cache=False)
    return dict(sorted(out.items()))


def capture_qk(model, input_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
               layers=None) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """Like :func:`capture_qkv` without the values: ``{layer: (q [Hq,T,D], k [Hkv,T,D])}``."""
    return {l: (q, k) for l, (q, k, _) in capture_qkv(model, input_ids, inputs_embeds, layers).items()}
