"""The seam between the runtime and every KV-retrieval method: :class:`RetrievalPolicy`.

The runtime (``vrex_lib.runtime``) never knows which method it runs. For every layer and every
forward step (one frame prefill, a question prefill, one generated token) its attention function

1. calls ``policy.observe(layer, new_keys, start, stage, frame_id)`` with the step's new post-RoPE
   keys, which now sit in the cache at positions ``start .. start+N-1``;
2. calls ``policy.select(layer, query, keys, candidates, stage)`` where ``candidates`` are the cache
   positions the policy may choose from: everything except the always-attended tokens (prompt/system
   sinks, the recent frame window, the step's own new tokens), which are the runtime's business;
3. attends over always-attended ∪ selected positions (per KV head), and counts the bytes of the
   selected positions by tier in the KV store.

A policy may also define ``bind(model)``: :class:`~vrex_lib.runtime.StreamingSession` calls it once, before
``reset``, with its model, for what post-RoPE tensors do not carry (ReKV's pre-RoPE scoring needs the q/k
projections, InfiniGen its calibration, ``W_q`` and the previous layer's attention input; see
:mod:`vrex_lib.runtime.capture`). Such policies used without a session raise an error naming the fix. A policy
may set ``retrieval_from_layer`` (an int) to be consulted from that layer instead of ``RuntimeConfig.dense_layers``
(ReKV's reference mode: layer 0, as its patch replaces every layer's attention). A policy that decides by tier may
define ``bind_store(store)``: the session passes its :class:`~vrex_lib.runtime.KVStore` after every ``reset``, so
``store.host_boundary(seq_len)`` tells which candidates are on the device (StreamingLLM keeps those and drops the
offloaded ones).

Shapes (batch 1; the runtime loops over batch if ever needed):
    new_keys   [Hkv, N, D]      keys:  [Hkv, S, D] (whole cache, post-RoPE, this step included)
    query      [Hq, Nq, D]      post-RoPE queries of this step (Hq = Hkv * group)
    candidates [C] int64        sorted cache positions
"""
from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

import torch

from ..selection import Selection

Stage = Literal["frame", "text"]


@runtime_checkable
class RetrievalPolicy(Protocol):
    """One KV-retrieval method. Implementations live in ``vrex_lib/retrieval/<name>.py``."""

    name: str
    #: True if the method also retrieves during frame prefill (Table II "Retrieval @ frame").
    retrieves_at_frame: bool

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        """Forget everything (a new video stream)."""

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        """New tokens' post-RoPE keys [Hkv, N, D] were appended at cache positions start..start+N-1."""

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        """Positions each KV head attends to among ``candidates``; ``None`` means all of them."""
