"""Step 2 of ReSV (paper §IV.B, Fig. 8): Hamming-distance clustering into the hash-cluster (HC) table.

One :class:`HashClusterTable` per layer. Inside it, one independent cluster set per *group*: every KV head
in ``hash_mode='per_head'`` (digest §10c default), or a single group holding the concatenated per-layer key
in ``hash_mode='concat'``. Per cluster it keeps the paper's HC-table row: cluster code (hash bits),
``Key_cluster`` (running mean of the member keys), token count and member token positions.

Clustering rule (digest §10d): tokens are processed in arrival order; a token joins the *nearest* cluster
if its Hamming distance is < ``th_hp`` (strict), ties -> lowest cluster index; else it opens a new
cluster (code = its own code, Key_cluster = its key, count 1). Candidates are all clusters of the group,
including the ones opened earlier in the same frame (temporal + spatial clustering). The cluster code
stays the founder's (``code_rule='founder'``) or is re-hashed from the running mean (``'mean'``).
"""
from __future__ import annotations

import contextlib
import math

import torch

from ..config import ReSVConfig
from .hashing import hamming, hash_bits, layer_seed, make_hyperplanes

_FAR = 1 << 20  # distance given to empty table slots: never < th


@contextlib.contextmanager
def single_thread():
    """Run tiny, latency-bound tensor ops on one thread: on a busy CPU, waking torch's intra-op pool costs
    milliseconds per op (measured ~9 ms for a 1600-element min on the shared 2-core box, 4 µs on one thread)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


class HashClusterTable:
    """The HC table of one layer.

    Args:
        n_kv_heads, head_dim: key shape per token ``[Hkv, D]``.
        cfg: :class:`ReSVConfig` (n_hp, th_hp, hash_mode, code_rule, seed).
        layer: layer index; selects the hyperplanes ``make_hyperplanes(n_hp, dim, layer_seed(seed, layer))``.
        hyperplanes: override ``[n_hp, dim]`` (dim = D per head, or Hkv*D in concat mode).

    State (G groups, C = max clusters of any group, T tokens added):
        codes [G, C] int64, centroids [G, C, Dg] float32, counts [G, C] int64, n_clusters [G],
        positions [T] int64 (cache position of each added token), assignment [G, T] int64.
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
        self.hyperplanes = hyperplanes.to(self.device, torch.float32)
        G, cap = self.n_groups, 64
        self.codes = torch.zeros(G, cap, dtype=torch.int64, device=self.device)
        self.centroids = torch.zeros(G, cap, self.group_dim, dtype=torch.float32, device=self.device)
        self.counts = torch.zeros(G, cap, dtype=torch.int64, device=self.device)
        self.n_clusters = torch.zeros(G, dtype=torch.int64, device=self.device)
        self.positions = torch.zeros(0, dtype=torch.int64, device=self.device)
        self.assignment = torch.zeros(G, 0, dtype=torch.int64, device=self.device)
        self._garange = torch.arange(G, device=self.device)
        self._monotonic = True  # positions strictly increasing so far

    # ----------------------------------------------------------------------------------------- building
    @property
    def n_tokens(self) -> int:
        return int(self.positions.numel())

    def _grow(self, need: int) -> None:
        cap = self.codes.shape[1]
        if need <= cap:
            return
        new = max(need, 2 * cap)
        pad = new - cap
        G = self.n_groups
        self.codes = torch.cat([self.codes, self.codes.new_zeros(G, pad)], 1)
        self.counts = torch.cat([self.counts, self.counts.new_zeros(G, pad)], 1)
        self.centroids = torch.cat([self.centroids, self.centroids.new_zeros(G, pad, self.group_dim)], 1)

    def group_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """``keys [Hkv, N, D]`` -> the vectors that are hashed and clustered, ``[G, N, Dg]``."""
        if keys.dim() != 3 or keys.shape[0] != self.n_kv_heads or keys.shape[2] != self.head_dim:
            raise ValueError(f"keys must be [Hkv={self.n_kv_heads}, N, D={self.head_dim}], got {tuple(keys.shape)}")
        keys = keys.to(self.device, torch.float32)
        if self.concat:
            return keys.permute(1, 0, 2).reshape(1, keys.shape[1], self.group_dim)
        return keys

    def add_frame(self, keys: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Hash and cluster one frame's post-RoPE keys ``[Hkv, N, D]`` at cache ``positions [N]``.

        Returns the cluster index of every new token, ``[Hkv, N]`` int64 (equal rows in concat mode).
        """
        with single_thread():
            return self._add_frame(keys, positions)

    def _add_frame(self, keys: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
        x = self.group_keys(keys)
        G, N = x.shape[0], x.shape[1]
        if positions is None:
            positions = torch.arange(self.n_tokens, self.n_tokens + N)
        positions = torch.as_tensor(positions, dtype=torch.int64, device=self.device).reshape(-1)
        if positions.numel() != N:
            raise ValueError(f"{N} keys but {positions.numel()} positions")
        new_codes = hash_bits(x, self.hyperplanes)  # [G, N]
        th, nb = self.cfg.th_hp, self.cfg.n_hp
        n0 = self.n_clusters.clone()
        self._grow(int(n0.max()) + N)
        C0 = int(n0.max())
        founder = self.cfg.code_rule == "founder"
        cols = torch.arange(C0, device=self.device)
        if founder:
            # Distances to the clusters that existed before this frame (their codes do not change).
            d_old = hamming(new_codes[:, :, None], self.codes[:, None, :C0], nb)  # [G, N, C0]
            d_old = d_old.masked_fill((cols[None, :] >= n0[:, None])[:, None, :], _FAR)
            d_new = hamming(new_codes[:, :, None], new_codes[:, None, :], nb)  # [G, N, N]
            opened = torch.zeros(G, N, dtype=torch.bool, device=self.device)
        assign = torch.empty(G, N, dtype=torch.int64, device=self.device)
        g = self._garange
        for t in range(N):
            if founder:
                # Clusters opened earlier in this frame have indices n0 + k, above every old one, so the
                # first minimum of [old | new-in-frame] is the lowest-index nearest cluster.
                d = torch.cat([d_old[:, t], d_new[:, t, :t].masked_fill(~opened[:, :t], _FAR)], 1)
            else:
                n = int(self.n_clusters.max())
                d = hamming(new_codes[:, t, None], self.codes[:, :n], nb)
                d = d.masked_fill(torch.arange(n, device=self.device)[None, :] >= self.n_clusters[:, None], _FAR)
            if d.shape[1] == 0:  # empty table, first token
                dmin = torch.full((G,), _FAR, dtype=torch.int64, device=self.device)
                cid = torch.zeros(G, dtype=torch.int64, device=self.device)
            else:
                dmin, cid = d.min(1)  # torch returns the first (lowest-index) minimum
                if founder and t:
                    # a column >= C0 is the cluster opened by in-frame token (col - C0)
                    cid = torch.where(cid < C0, cid, assign[g, (cid - C0).clamp(min=0)])
            join = dmin < th
            cid = torch.where(join, cid, self.n_clusters)
            if not bool(join.all()):
                fresh = ~join
                self.codes[g[fresh], cid[fresh]] = new_codes[fresh, t]
                self.n_clusters += fresh.to(torch.int64)
                if founder:
                    opened[:, t] = fresh
            assign[:, t] = cid
            # Running mean: a fresh slot has count 0 and centroid 0, so c + (k - c)/1 = k exactly.
            self.counts[g, cid] += 1
            c = self.centroids[g, cid]
            self.centroids[g, cid] = c + (x[:, t] - c) / self.counts[g, cid][:, None].to(torch.float32)
            if not founder:
                self.codes[g, cid] = hash_bits(self.centroids[g, cid], self.hyperplanes)
        if self._monotonic and N:
            prev_last = int(self.positions[-1]) if self.n_tokens else -1
            self._monotonic = bool((positions[1:] > positions[:-1]).all()) and int(positions[0]) > prev_last
        self.positions = torch.cat([self.positions, positions])
        self.assignment = torch.cat([self.assignment, assign], 1)
        return assign.expand(self.n_kv_heads, N).clone() if self.concat else assign

    # ------------------------------------------------------------------------------------------ reading
    def group_of(self, head: int) -> int:
        return 0 if self.concat else int(head)

    def head_centroids(self, head: int) -> torch.Tensor:
        """``Key_cluster`` of KV head ``head``'s clusters, ``[C, D]`` (its D-slice in concat mode)."""
        g = self.group_of(head)
        c = self.centroids[g, : int(self.n_clusters[g])]
        if self.concat:
            return c.view(-1, self.n_kv_heads, self.head_dim)[:, head]
        return c

    def padded_heads(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """All KV heads at once, padded to the largest cluster count C: ``Key_cluster [Hkv, C, D]``,
        counts ``[Hkv, C]`` (0 in padding) and valid ``[Hkv, C]`` -- the batched form used by ``select_tokens``."""
        C = int(self.n_clusters.max())
        valid = torch.arange(C, device=self.device)[None, :] < self.n_clusters[:, None]  # [G, C]
        if self.concat:
            cent = self.centroids[0, :C].view(C, self.n_kv_heads, self.head_dim).transpose(0, 1)
            return cent, self.counts[:, :C].expand(self.n_kv_heads, C), valid.expand(self.n_kv_heads, C)
        return self.centroids[:, :C], self.counts[:, :C], valid

    def tokens_of_heads(self, cluster_mask: torch.Tensor) -> list[torch.Tensor]:
        """Per KV head, the sorted positions of the members of the clusters marked in ``cluster_mask [Hkv, C]``."""
        if self.concat:
            tok = cluster_mask[:, self.assignment[0]]  # [Hkv, T]
        else:
            tok = torch.gather(cluster_mask, 1, self.assignment)
        if self._monotonic:  # streamed positions are already increasing: no sort needed
            return [self.positions[m] for m in tok]
        return [torch.sort(self.positions[m]).values for m in tok]

    def head_counts(self, head: int) -> torch.Tensor:
        g = self.group_of(head)
        return self.counts[g, : int(self.n_clusters[g])]

    def head_codes(self, head: int) -> torch.Tensor:
        g = self.group_of(head)
        return self.codes[g, : int(self.n_clusters[g])]

    def tokens_of(self, head: int, cluster_mask: torch.Tensor) -> torch.Tensor:
        """Sorted cache positions of the member tokens of the clusters where ``cluster_mask [C]`` is True."""
        g = self.group_of(head)
        sel = cluster_mask.to(self.device)[self.assignment[g]]
        return self.positions[sel] if self._monotonic else torch.sort(self.positions[sel]).values

    def members(self, head: int, cluster: int) -> list[int]:
        """Member token positions of one cluster, in arrival order (the HC table's 'token idx')."""
        g = self.group_of(head)
        return self.positions[self.assignment[g] == cluster].tolist()

    def rows(self, head: int = 0) -> list[dict]:
        """The HC table of one KV head as rows (cluster, code, count, token idx) -- for display."""
        return [dict(cluster=c, code=int(self.codes[self.group_of(head), c]), count=int(n),
                     tokens=self.members(head, c)) for c, n in enumerate(self.head_counts(head).tolist())]

    # ------------------------------------------------------------------------------------------- sizes
    def tokens_per_cluster(self) -> float:
        """Mean member tokens per cluster over all groups (paper: 32 on average)."""
        n = int(self.n_clusters.sum())
        return self.n_tokens * self.n_groups / n if n else float("nan")

    def nbytes(self, centroid_bytes: int = 2, count_bytes: int = 2, index_bytes: int = 4) -> int:
        """HC-table bytes: per cluster Key_cluster (BF16) + code + count; per member one token index."""
        n = int(self.n_clusters.sum())
        per_cluster = self.group_dim * centroid_bytes + math.ceil(self.cfg.n_hp / 8) + count_bytes
        return n * per_cluster + self.n_tokens * self.n_groups * index_bytes

    def kv_nbytes(self, elem_bytes: int = 2) -> int:
        """Bytes of the full K and V cache of the added tokens in this layer (BF16 by default)."""
        return self.n_tokens * self.n_kv_heads * self.head_dim * 2 * elem_bytes

    def overhead(self) -> float:
        """HC-table bytes as a fraction of the full KV cache (paper: 1.67%)."""
        return self.nbytes() / self.kv_nbytes() if self.n_tokens else float("nan")
