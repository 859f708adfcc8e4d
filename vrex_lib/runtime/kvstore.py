"""The hierarchical KV store: the KVMU's software twin, as a transformers ``Cache``.

All K/V stay in memory (the runtime must be able to attend anywhere), but every cache position has a *tier*:

* ``device``: the pinned sink tokens (system prompt) and the most recent ``capacity`` positions (docs/DECISIONS.md
  D6: the KVMU keeps the recent KV on the accelerator's DRAM; ``RuntimeConfig.kv_capacity`` by default);
* ``host``: everything older, i.e. offloaded to CPU memory / SSD and fetched over PCIe when selected.

:meth:`KVStore.gather` returns the K/V of chosen positions per KV head and books the tokens and bytes it
read into the current step's :class:`Ledger`, split by tier; the attention function books whole-cache reads
with :meth:`KVStore.account_all`. Bytes are in the model's KV element size; ``paper_bytes_per_elem`` gives the
BF16 figure the paper's model would move.

Shapes: per layer keys/values ``[1, Hkv, S, D]`` (batch 1), stored in a buffer grown by doubling so a long
stream does not re-copy the whole cache every step (``DynamicLayer`` concatenates).
"""
from __future__ import annotations

import numpy as np
import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from ..config import RuntimeConfig


_NUMPY_DTYPES = (torch.float32, torch.float64, torch.float16)  # K/V dtypes NumPy can view (not bfloat16)


class KVStoreLayer(CacheLayerMixin):
    """One layer's K/V [1, Hkv, S, D] in a doubling buffer."""

    is_compileable = False
    is_croppable = False

    def __init__(self, **kwargs):
        super().__init__()
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None
        self.n = 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        b, h, _, d = key_states.shape
        if b != 1:
            raise ValueError(f"KVStore holds one stream (batch 1), got batch {b}")
        self.device, self.dtype = key_states.device, key_states.dtype
        self._k = key_states.new_empty((1, h, 256, d))
        self._v = value_states.new_empty((1, h, 256, value_states.shape[-1]))
        self.is_initialized = True

    def _grow(self, need: int) -> None:
        cap = self._k.shape[2]
        if need <= cap:
            return
        while cap < need:
            cap *= 2
        k = self._k.new_empty((*self._k.shape[:2], cap, self._k.shape[3]))
        v = self._v.new_empty((*self._v.shape[:2], cap, self._v.shape[3]))
        k[:, :, : self.n] = self._k[:, :, : self.n]
        v[:, :, : self.n] = self._v[:, :, : self.n]
        self._k, self._v = k, v

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        m = key_states.shape[2]
        self._grow(self.n + m)
        self._k[:, :, self.n : self.n + m] = key_states
        self._v[:, :, self.n : self.n + m] = value_states
        self.n += m
        self.keys, self.values = self._k[:, :, : self.n], self._v[:, :, : self.n]
        return self.keys, self.values

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.n + query_length, 0

    def get_seq_length(self) -> int:
        return self.n

    def get_max_length(self) -> int:
        return -1

    def reset(self) -> None:
        self._k = self._v = self.keys = self.values = None
        self.n = 0
        self.is_initialized = False


class Ledger:
    """Tokens read per (layer, KV head) in one step, by tier. ``int64 [L, Hkv]`` arrays."""

    def __init__(self, n_layers: int, n_kv_heads: int):
        self.device_tokens = np.zeros((n_layers, n_kv_heads), np.int64)
        self.host_tokens = np.zeros((n_layers, n_kv_heads), np.int64)


class KVStore(Cache):
    """A transformers Cache (one :class:`KVStoreLayer` per decoder layer) with tiers and byte accounting.

    n_layers, n_kv_heads, head_dim: the model's KV shape; capacity: recent positions kept on device;
    bytes_per_elem: the KV dtype's element size; paper_bytes_per_elem: the paper model's (BF16 = 2).
    ``n_sink`` (set by the session after the system prompt) positions are pinned on device.
    """

    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int, *, capacity: int | None = None,
                 bytes_per_elem: int = 4, paper_bytes_per_elem: int = 2):
        super().__init__(layers=[KVStoreLayer() for _ in range(n_layers)])
        self.n_layers, self.n_kv_heads, self.head_dim = n_layers, n_kv_heads, head_dim
        # One source for the default: RuntimeConfig.kv_capacity (docs/DECISIONS.md D6).
        self.capacity = int(RuntimeConfig.kv_capacity if capacity is None else capacity)
        self.bytes_per_elem = int(bytes_per_elem)
        self.paper_bytes_per_elem = int(paper_bytes_per_elem)
        self.n_sink = 0
        self.ledger = Ledger(n_layers, n_kv_heads)

    # ---- tiers ---------------------------------------------------------------------------------------------
    @property
    def bytes_per_token_head(self) -> int:
        """K + V bytes of one token in one KV head."""
        return 2 * self.head_dim * self.bytes_per_elem

    def host_boundary(self, seq_len: int) -> int:
        """Positions in [n_sink, host_boundary) are offloaded (host tier) when the cache holds seq_len tokens."""
        return max(self.n_sink, seq_len - self.capacity)

    def n_host(self, seq_len: int) -> int:
        return self.host_boundary(seq_len) - self.n_sink

    def tier(self, positions: torch.Tensor, seq_len: int) -> torch.Tensor:
        """Bool [...] True where a position is in the host tier."""
        return (positions >= self.n_sink) & (positions < self.host_boundary(seq_len))

    # ---- reads ---------------------------------------------------------------------------------------------
    def new_step(self) -> Ledger:
        self.ledger = Ledger(self.n_layers, self.n_kv_heads)
        return self.ledger

    def gather(self, layer: int, indices: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """K/V of ``indices[g]`` (cache positions) for each KV head g -> [(K [n_g, D], V [n_g, D])]; booked.

        All heads are read with one ``index_select`` of K and one of V over the layer's buffer seen as
        ``[Hkv·cap, D]`` (head g's position p is row g·cap + p); the per-head results are views of them."""
        lay = self.layers[layer]
        hb = self.host_boundary(lay.n)
        host = all(ix.device.type == "cpu" for ix in indices)
        sizes = [int(ix.numel()) for ix in indices]
        for g, idx in enumerate(indices):
            i = idx.numpy() if host else idx  # NumPy: a fraction of torch's per-op cost on small host tensors
            n_host = int(((i >= self.n_sink) & (i < hb)).sum())
            self.ledger.host_tokens[layer, g] += n_host
            self.ledger.device_tokens[layer, g] += sizes[g] - n_host
        h, cap = lay._k.shape[1], lay._k.shape[2]
        k_all, v_all = lay._k.view(h * cap, -1), lay._v.view(h * cap, -1)
        if host and k_all.device.type == "cpu" and k_all.dtype in _NUMPY_DTYPES:  # NumPy's take: no per-op cost
            flat = np.concatenate([ix.numpy() + g * cap for g, ix in enumerate(indices)])
            k, v = k_all.numpy().take(flat, 0), v_all.numpy().take(flat, 0)
            ends = np.cumsum(sizes).tolist()
            return [(torch.from_numpy(k[e - n:e]), torch.from_numpy(v[e - n:e])) for e, n in zip(ends, sizes)]
        flat = torch.cat([ix.to(k_all.device) + g * cap for g, ix in enumerate(indices)])
        k, v = k_all.index_select(0, flat), v_all.index_select(0, flat)
        return list(zip(k.split(sizes), v.split(sizes)))

    def account_all(self, layer: int) -> None:
        """Book a read of the whole cache of ``layer`` by every KV head (full attention)."""
        s = self.layers[layer].n
        host = self.n_host(s)
        self.ledger.host_tokens[layer] += host
        self.ledger.device_tokens[layer] += s - host

    def nbytes(self) -> int:
        """Bytes the cache holds (all layers, K and V)."""
        return sum(l.n for l in self.layers) * self.n_kv_heads * self.bytes_per_token_head
