"""Capture the post-RoPE queries/keys (and values) of an HF Llama-family model, for analysis.

Uses transformers' own extension point (its documented ``AttentionInterface``): an attention function registered with
``AttentionInterface`` (plus the sdpa mask via ``AttentionMaskInterface``) records what each layer's
attention receives -- queries ``[B, Hq, T, D]`` and keys/values ``[B, Hkv, T, D]``, after RoPE -- and then
calls the stock sdpa attention, so outputs are unchanged. No model class is patched. The runtime's
serving hook is separate (``vrex_lib.runtime``); this one is for Fig. 7(b), notebook 02, DRE traces and the
selection view of notebook 08 (:func:`capture_stream_qkv`: one layer of a streaming model over a prompt and frames).
"""
from __future__ import annotations

import contextlib
import threading

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

ATTN_NAME = "vrex_capture_qk"
_state = threading.local()
_REGISTERED: set[str] = set()


def _capture_attention(module, query, key, value, attention_mask, **kwargs):
    rec = getattr(_state, "record", None)
    layer = getattr(module, "layer_idx", None)
    if rec is not None and (rec["layers"] is None or layer in rec["layers"]):
        # batch 0 only; float32 CPU copies (analysis runs on CPU; later cache updates cannot alter them)
        rec["out"][layer] = tuple(x[0].detach().to("cpu", torch.float32, copy=True) for x in (query, key, value))
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def register_attention(name: str, fn) -> None:
    """Register ``fn`` as the transformers attention implementation ``name``, with transformers' SDPA mask function
    (without a mask function the attention gets no mask), once per process. The runtime's serving attention
    (:func:`vrex_lib.runtime.attention.register`) and this module's capture attention both register through it."""
    if name in _REGISTERED:
        return
    # imported here, not at the top: the registries load transformers.modeling_utils (~4 s on 2 cores)
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(name, fn)
    AttentionMaskInterface.register(name, sdpa_mask)
    _REGISTERED.add(name)


@contextlib.contextmanager
def _capturing(model, layers):
    register_attention(ATTN_NAME, _capture_attention)
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


def capture_stream_qkv(model, frames, prefix: str, layer: int | None = None) -> dict:
    """Post-RoPE q [Hq, T, D], k, v [Hkv, T, D] of one layer of a streaming video LLM
    (:class:`~vrex_lib.runtime.StreamingVideoLLM`) for ``<bos> prefix`` followed by the frame tokens of ``frames``
    (uint8 [F, H, W, 3]) in one plain prefill (no interval tokens, no cache). ``layer`` defaults to the middle one.
    Returns dict(q, k, v, n_sink = prefix tokens, frame_len = tokens per frame, layer)."""
    layer = model.n_layers // 2 if layer is None else int(layer)
    ids = ([] if model.bos_token_id is None else [model.bos_token_id]) + model.encode(prefix)
    frame_tokens = model.embed_frames(frames)                                   # [F, frame_len, hidden]
    emb = torch.cat([model.embed_text(ids), frame_tokens.reshape(-1, model.hidden_size)], 0)
    q, k, v = capture_qkv(model.llm, inputs_embeds=emb, layers=[layer])[layer]
    return dict(q=q, k=k, v=v, n_sink=len(ids), frame_len=int(frame_tokens.shape[1]), layer=layer)
