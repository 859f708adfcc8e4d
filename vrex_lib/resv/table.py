"""Step 2 of ReSV (paper §IV.B, Fig. 8): Hamming-distance clustering into the hash-cluster (HC) table.

One :class:`HashClusterTable` per layer. Inside it, one independent cluster set per *group*: every KV head
in ``hash_mode='per_head'`` (docs/DECISIONS.md D3 default), or a single group holding the concatenated per-layer
key in ``hash_mode='concat'``. Per cluster it keeps the paper's HC-table row: cluster code (hash bits),
``Key_cluster`` (running mean of the member keys), token count and member token positions.

Clustering rule (docs/DECISIONS.md D4): tokens are processed in arrival order; a token joins the *nearest*
cluster if its Hamming distance is < ``th_hp`` (strict), ties -> lowest cluster index; else it opens a new
cluster (code = its own code, Key_cluster = its key, count 1). Candidates are all clusters of the group,
including the ones opened earlier in the same frame (temporal + spatial clustering). The cluster code
stays the founder's (``code_rule='founder'``) or is re-hashed from the running mean (``'mean'``).

The founder rule runs as one compiled loop per frame (:func:`vrex_lib.resv.kernels.cluster_founder`,
docs/DECISIONS.md D369): tokens in arrival order, each against every cluster of its group (the ones opened
earlier in the frame included), running means with exactly the reference's float32 arithmetic
``c + (k − c)/TC``; a float64 copy of the means (the operand of the scores) is refreshed for the clusters a
frame touches. The hash bits stay a NumPy float64 matmul, the reference's own. ``code_rule='mean'`` keeps a plain
per-token loop.

State is kept on the host in NumPy buffers grown by doubling (the HC table is small, and the per-layer ops are
latency-bound: a NumPy op costs ~1 µs, a torch op several); the torch-facing attributes (``codes``,
``centroids``, ``counts``, ``n_clusters``, ``positions``, ``assignment``) are zero-copy views of them.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..config import ReSVConfig
from . import kernels
from .hashing import layer_seed, make_hyperplanes
from .threads import single_thread


def _popcount(x: np.ndarray) -> np.ndarray:
    """Set bits of each int64 (all 64, two's complement) -> uint8. ``np.bitwise_count`` counts the bits of the
    absolute value of a signed integer, hence the unsigned view."""
    return np.bitwise_count(x.view(np.uint64))


def to_numpy(x, dtype) -> np.ndarray:
    """A tensor or array on any device -> a host NumPy array of ``dtype`` (no copy when already so)."""
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        if x.dtype == torch.bfloat16 or x.dtype == torch.float16:
            x = x.to(torch.float32)
        x = x.numpy()
    return np.asarray(x, dtype=dtype)


class HashClusterTable:
    """The HC table of one layer.

    Args:
        n_kv_heads, head_dim: key shape per token ``[Hkv, D]``.
        cfg: :class:`ReSVConfig` (n_hp, th_hp, hash_mode, code_rule, seed).
        layer: layer index; selects the hyperplanes ``make_hyperplanes(n_hp, dim, layer_seed(seed, layer))``.
        hyperplanes: override ``[n_hp, dim]`` (dim = D per head, or Hkv*D in concat mode).
        device: the device of the returned assignments (the state itself lives in host memory).

    State (G groups, C = capacity >= max clusters of any group, T tokens added), as torch views:
        codes [G, C] int64, centroids [G, C, Dg] float32, counts [G, C] int64, n_clusters [G],
        positions [T] int64 (cache position of each added token), assignment [G, T] int64. The means are also
        kept in float64 (the operand of the scores, :meth:`head_centroids64_np`), refreshed by ``add_frame`` only:
        write the means through ``add_frame``, not through the ``centroids`` view.
    """

    def __init__(self, n_kv_heads: int, head_dim: int, cfg: ReSVConfig | None = None, layer: int = 0,
                 hyperplanes: torch.Tensor | None = None, device: str | torch.device = "cpu"):
        self.cfg = cfg or ReSVConfig()
        if self.cfg.hash_mode not in ("per_head", "concat"):
            raise ValueError(f"ReSVConfig.hash_mode={self.cfg.hash_mode!r}: use 'per_head' or 'concat'")
        if self.cfg.code_rule not in ("founder", "mean"):
            raise ValueError(f"ReSVConfig.code_rule={self.cfg.code_rule!r}: use 'founder' or 'mean'")
        self.n_kv_heads, self.head_dim, self.layer = int(n_kv_heads), int(head_dim), int(layer)
        self.concat = self.cfg.hash_mode == "concat"
        self.n_groups = 1 if self.concat else self.n_kv_heads
        self.group_dim = self.n_kv_heads * self.head_dim if self.concat else self.head_dim
        self.device = torch.device(device)
        if hyperplanes is None:
            hyperplanes = make_hyperplanes(self.cfg.n_hp, self.group_dim, layer_seed(self.cfg.seed, layer))
        if tuple(hyperplanes.shape) != (self.cfg.n_hp, self.group_dim):
            raise ValueError(f"hyperplanes shape {tuple(hyperplanes.shape)} != (n_hp, dim) = "
                             f"({self.cfg.n_hp}, {self.group_dim})")
        self.hyperplanes = torch.as_tensor(hyperplanes).detach().to("cpu", torch.float32)
        # float64 projection, as hashing.projection_signs and the reference: signs agree near zero.
        self._hp64_t = np.ascontiguousarray(self.hyperplanes.numpy().astype(np.float64).T)  # [Dg, n_hp]
        self._th = min(int(self.cfg.th_hp), 65)  # a distance is <= 64: any th > 64 joins everything alike
        G, cap, tcap = self.n_groups, 64, 256
        self._codes = np.zeros((G, cap), np.int64)
        self._cent = np.zeros((G, cap, self.group_dim), np.float32)
        self._cent64 = np.zeros((G, cap, self.group_dim), np.float64)  # float64 copy of _cent, for the scores
        self._counts = np.zeros((G, cap), np.int64)
        self._ncl = np.zeros(G, np.int64)
        self._pos = np.zeros(tcap, np.int64)
        self._assign = np.zeros((G, tcap), np.int64)
        self._n = 0
        self._monotonic = True  # positions strictly increasing so far

    # ------------------------------------------------------------------------------------- torch views
    @property
    def codes(self) -> torch.Tensor:
        return torch.from_numpy(self._codes)

    @property
    def centroids(self) -> torch.Tensor:
        return torch.from_numpy(self._cent)

    @property
    def counts(self) -> torch.Tensor:
        return torch.from_numpy(self._counts)

    @property
    def n_clusters(self) -> torch.Tensor:
        return torch.from_numpy(self._ncl)

    @property
    def positions(self) -> torch.Tensor:
        return torch.from_numpy(self._pos[: self._n])

    @property
    def assignment(self) -> torch.Tensor:
        return torch.from_numpy(self._assign[:, : self._n])

    # ----------------------------------------------------------------------------------------- building
    @property
    def n_tokens(self) -> int:
        return self._n

    def _grow(self, need_clusters: int, need_tokens: int) -> None:
        cap = self._codes.shape[1]
        if need_clusters > cap:
            new = max(need_clusters, 2 * cap)
            G = self.n_groups
            codes, counts = np.zeros((G, new), np.int64), np.zeros((G, new), np.int64)
            cent = np.zeros((G, new, self.group_dim), np.float32)
            cent64 = np.zeros((G, new, self.group_dim), np.float64)
            codes[:, :cap], counts[:, :cap], cent[:, :cap] = self._codes, self._counts, self._cent
            cent64[:, :cap] = self._cent64
            self._codes, self._counts, self._cent, self._cent64 = codes, counts, cent, cent64
        tcap = self._pos.shape[0]
        if need_tokens > tcap:
            new = max(need_tokens, 2 * tcap)
            pos, assign = np.zeros(new, np.int64), np.zeros((self.n_groups, new), np.int64)
            pos[: self._n], assign[:, : self._n] = self._pos[: self._n], self._assign[:, : self._n]
            self._pos, self._assign = pos, assign

    def group_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """``keys [Hkv, N, D]`` -> the vectors that are hashed and clustered, ``[G, N, Dg]`` (float32, host)."""
        if keys.dim() != 3 or keys.shape[0] != self.n_kv_heads or keys.shape[2] != self.head_dim:
            raise ValueError(f"keys must be [Hkv={self.n_kv_heads}, N, D={self.head_dim}], got {tuple(keys.shape)}")
        return torch.from_numpy(self._group_keys_np(keys))

    def _group_keys_np(self, keys) -> np.ndarray:
        x = to_numpy(keys, np.float32)
        if x.ndim != 3 or x.shape[0] != self.n_kv_heads or x.shape[2] != self.head_dim:
            raise ValueError(f"keys must be [Hkv={self.n_kv_heads}, N, D={self.head_dim}], got {tuple(x.shape)}")
        if self.concat:
            return np.ascontiguousarray(x.transpose(1, 0, 2).reshape(1, x.shape[1], self.group_dim))
        return x

    def _hash(self, x: np.ndarray) -> np.ndarray:
        """Step 1 (§IV.B, Fig. 8; ``reference.hash_bits_ref``).

        float32 ``[..., Dg]`` -> int64 codes ``[...]`` (bit i = [x·h_i > 0] in float64, bit 63 = sign bit)."""
        proj = x.astype(np.float64) @ self._hp64_t
        return kernels.pack_codes(proj.reshape(-1, *proj.shape[-2:])).reshape(proj.shape[:-1])

    def add_frame(self, keys: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Steps 1-2 (§IV.B; ``reference.HashClusterTableRef.add_frame``).

        Hash and cluster one frame's post-RoPE keys ``[Hkv, N, D]`` at cache ``positions [N]``.

        Returns the cluster index of every new token, ``[Hkv, N]`` int64 (equal rows in concat mode).
        """
        with single_thread():
            return self._add_frame(keys, positions)

    def _add_frame(self, keys: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
        x = self._group_keys_np(keys)
        G, N = x.shape[0], x.shape[1]
        if positions is None:
            pos = np.arange(self._n, self._n + N, dtype=np.int64)
        else:
            pos = to_numpy(positions, np.int64).reshape(-1)
        if pos.shape[0] != N:
            raise ValueError(f"{N} keys but {pos.shape[0]} positions")
        self._grow(int(self._ncl.max()) + N, self._n + N)
        new_codes = self._hash(x)  # [G, N]
        if self.cfg.code_rule == "founder":
            assign = self._cluster_founder(x, new_codes)
        else:
            assign = self._cluster_mean(x, new_codes)
        if self._monotonic and N:
            prev_last = int(self._pos[self._n - 1]) if self._n else -1
            inc = positions is None or N == 1 or bool((pos[1:] > pos[:-1]).all())  # the default is increasing
            self._monotonic = inc and int(pos[0]) > prev_last
        self._pos[self._n: self._n + N] = pos
        self._assign[:, self._n: self._n + N] = assign
        self._n += N
        out = torch.from_numpy(assign)
        if self.device.type != "cpu":
            out = out.to(self.device)
        return out.expand(self.n_kv_heads, N).clone() if self.concat else out

    def _cluster_founder(self, x: np.ndarray, new_codes: np.ndarray) -> np.ndarray:
        assign = np.empty(new_codes.shape, np.int64)
        x = np.ascontiguousarray(x)  # one layout, so one compiled specialisation (a frame's keys: a small copy)
        kernels.cluster_founder(new_codes, x, self._th, self._codes, self._counts, self._cent, self._cent64,
                                self._ncl, assign)
        return assign

    def _cluster_mean(self, x: np.ndarray, new_codes: np.ndarray) -> np.ndarray:
        """``code_rule='mean'``: the cluster code follows the running mean, so every token sees the codes as
        updated by the previous one -- a plain per-token loop."""
        G, N = new_codes.shape
        assign = np.empty((G, N), np.int64)
        for g in range(G):
            for t in range(N):
                n = int(self._ncl[g])
                if n:
                    d = _popcount(new_codes[g, t] ^ self._codes[g, :n])
                    j = int(d.argmin())
                    if int(d[j]) >= self._th:
                        j = n
                else:
                    j = 0
                if j == n:
                    self._ncl[g] = n + 1
                self._counts[g, j] += 1
                c = self._cent[g, j]
                self._cent[g, j] = c + (x[g, t] - c) / np.float32(self._counts[g, j])
                self._cent64[g, j] = self._cent[g, j]
                self._codes[g, j] = self._hash(self._cent[g, j][None])[0]
                assign[g, t] = j
        return assign

    # ------------------------------------------------------------------------------------------ reading
    def group_of(self, head: int) -> int:
        return 0 if self.concat else int(head)

    def head_centroids_np(self, head: int) -> np.ndarray:
        """``Key_cluster`` of KV head ``head``, ``[C, D]`` float32 NumPy view (its D-slice in concat mode)."""
        g = self.group_of(head)
        c = self._cent[g, : int(self._ncl[g])]
        if self.concat:
            return c[:, head * self.head_dim:(head + 1) * self.head_dim]
        return c

    def head_centroids64_np(self, head: int) -> np.ndarray:
        """``Key_cluster`` of KV head ``head`` in float64, ``[C, D]`` C-contiguous: the values of
        :meth:`head_centroids_np` (a view of the table's float64 copy, refreshed for the clusters each frame
        touches; a copy in concat mode)."""
        g = self.group_of(head)
        c = self._cent64[g, : int(self._ncl[g])]
        if self.concat:
            return np.ascontiguousarray(c[:, head * self.head_dim:(head + 1) * self.head_dim])
        return c

    def head_centroids(self, head: int) -> torch.Tensor:
        """``Key_cluster`` of KV head ``head``'s clusters, ``[C, D]`` (its D-slice in concat mode)."""
        return torch.from_numpy(self.head_centroids_np(head))

    def head_counts_np(self, head: int) -> np.ndarray:
        g = self.group_of(head)
        return self._counts[g, : int(self._ncl[g])]

    def padded_heads(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """All KV heads at once, padded to the largest cluster count C: ``Key_cluster [Hkv, C, D]``,
        counts ``[Hkv, C]`` (0 in padding) and valid ``[Hkv, C]``."""
        C = int(self._ncl.max())
        valid = torch.from_numpy(np.arange(C)[None, :] < self._ncl[:, None])  # [G, C]
        cent, counts = torch.from_numpy(self._cent[:, :C]), torch.from_numpy(self._counts[:, :C])
        if self.concat:
            cent = cent[0].view(C, self.n_kv_heads, self.head_dim).transpose(0, 1)
            return cent, counts.expand(self.n_kv_heads, C), valid.expand(self.n_kv_heads, C)
        return cent, counts, valid

    def token_mask_np(self, head: int, cluster_mask: np.ndarray) -> np.ndarray:
        """bool ``[T]``: which added tokens belong to a cluster marked in ``cluster_mask [C]`` for ``head``."""
        return cluster_mask[self._assign[self.group_of(head), : self._n]]

    def positions_of_np(self, token_mask: np.ndarray) -> np.ndarray:
        """Sorted cache positions of the added tokens where ``token_mask [T]`` is True."""
        p = self._pos[: self._n][token_mask]
        return p if self._monotonic else np.sort(p)

    def tokens_of_heads(self, cluster_mask: torch.Tensor) -> list[torch.Tensor]:
        """Per KV head, the sorted positions of the members of the clusters marked in ``cluster_mask [Hkv, C]``."""
        m = to_numpy(cluster_mask, bool)
        return [torch.from_numpy(self.positions_of_np(self.token_mask_np(h, m[h]))) for h in range(m.shape[0])]

    def head_counts(self, head: int) -> torch.Tensor:
        return torch.from_numpy(self.head_counts_np(head))

    def head_codes(self, head: int) -> torch.Tensor:
        g = self.group_of(head)
        return torch.from_numpy(self._codes[g, : int(self._ncl[g])])

    def tokens_of(self, head: int, cluster_mask: torch.Tensor) -> torch.Tensor:
        """Sorted cache positions of the member tokens of the clusters where ``cluster_mask [C]`` is True."""
        return torch.from_numpy(self.positions_of_np(self.token_mask_np(head, to_numpy(cluster_mask, bool))))

    def members(self, head: int, cluster: int) -> list[int]:
        """Member token positions of one cluster, in arrival order (the HC table's 'token idx')."""
        g = self.group_of(head)
        return self._pos[: self._n][self._assign[g, : self._n] == cluster].tolist()

    def rows(self, head: int = 0) -> list[dict]:
        """The HC table of one KV head as rows (cluster, code, count, token idx) -- for display."""
        return [dict(cluster=c, code=int(self._codes[self.group_of(head), c]), count=int(n),
                     tokens=self.members(head, c)) for c, n in enumerate(self.head_counts_np(head).tolist())]

    # ------------------------------------------------------------------------------------------- sizes
    def tokens_per_cluster(self) -> float:
        """Mean member tokens per cluster over all groups (paper: 32 on average)."""
        n = int(self._ncl.sum())
        return self.n_tokens * self.n_groups / n if n else float("nan")

    def nbytes(self, centroid_bytes: int = 2, count_bytes: int = 2, index_bytes: int = 4) -> int:
        """HC-table bytes: per cluster Key_cluster (BF16) + code + count; per member one token index."""
        n = int(self._ncl.sum())
        per_cluster = self.group_dim * centroid_bytes + math.ceil(self.cfg.n_hp / 8) + count_bytes
        return n * per_cluster + self.n_tokens * self.n_groups * index_bytes

    def kv_nbytes(self, elem_bytes: int = 2) -> int:
        """Bytes of the full K and V cache of the added tokens in this layer (BF16 by default)."""
        return self.n_tokens * self.n_kv_heads * self.head_dim * 2 * elem_bytes

    def overhead(self) -> float:
        """HC-table bytes as a fraction of the full KV cache (paper: 1.67%)."""
        return self.nbytes() / self.kv_nbytes() if self.n_tokens else float("nan")
