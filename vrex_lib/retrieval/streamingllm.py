"""``streamingllm`` — attention sinks + a recent window (StreamingLLM: Xiao et al., "Efficient Streaming Language
Models with Attention Sinks", ICLR 2024): everything older than the window is evicted, nothing is ever fetched.

The runtime already attends to the sinks (the system prompt, as StreamingLLM's ``start_size`` initial tokens) and
to the recent frame window; this policy keeps, among the candidates, the ``window`` newest positions of the cache --
by default every candidate still on the device (the KV store's device tier, D6), so the method uses the same device
memory as every other and drops what the others offload, at every layer (layer 0 included: the policy sets
``retrieval_from_layer = 0``, so the runtime's dense layers do not apply to it; D380). Positions keep their original
RoPE angles (the cache holds post-RoPE keys; StreamingLLM's re-indexing of positions inside the cache is not
reproduced, docs/DECISIONS.md D300).
"""
from __future__ import annotations

import torch

from ..config import check_int
from .base import PolicyBase, Selection, Stage


class StreamingLLM(PolicyBase):
    name = "streamingllm"
    #: It never fetches the offloaded tier: dropped tokens are gone (Table II's "Retrieval @ frame": no).
    retrieves_at_frame = False
    #: Consulted from layer 0, whatever ``RuntimeConfig.dense_layers`` says: StreamingLLM evicts at every layer
    #: (its cache holds only sinks and the window), so a dense layer would attend tokens it has dropped (D300).
    retrieval_from_layer = 0

    def __init__(self, window: int | None = None):
        self.window = None if window is None else check_int("streamingllm", "window", window, 1)
        self._store = None

    def bind_store(self, store) -> None:
        self._store = store

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.n_kv_heads = n_kv_heads

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        pass

    def _first_kept(self, seq_len: int) -> int:
        if self.window is not None:
            return seq_len - self.window
        if self._store is None:
            raise ValueError("streamingllm with window=None keeps what the KV store holds on the device: run it in a "
                             "StreamingSession (which binds its store) or pass window=<tokens>")
        return self._store.host_boundary(seq_len)

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection:
        keep = candidates[candidates >= self._first_kept(int(keys.shape[1]))]
        # No prediction work: nothing is scored.
        return Selection([keep.clone() for _ in range(self.n_kv_heads)], int(candidates.numel()),
                         dict(rows=0, scored=0, score_dims=0, score_macs=0, select_s=0.0))
