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

How the founder rule is computed without a per-token pass over the table (docs/DECISIONS.md D50, D363): the
distances of a frame's N new codes to the clusters that existed before the frame do not depend on the order
(founder codes never change), so they are one vectorised popcount ``[G, N, C0]`` (empty slots of a group with
fewer clusters carry a distance penalty) reduced to (min, first argmin) per token. The only sequential dependency
is on clusters opened earlier *in the same frame*: their indices are above every old one, so token t's nearest
cluster is the old minimum unless an in-frame cluster is strictly nearer (ties keep the lower, i.e. older,
index). A frame in which every token has an old cluster within th has no such dependency at all. Otherwise
only the tokens with no old cluster within th can open one, and only those with an earlier such token within
th need an ordered decision (a short loop); every token then takes the nearest opened in-frame cluster when
it is strictly nearer than its old one. Running-mean updates are applied in rounds (round r = the r-th joiner
of each cluster in this frame), so each cluster sees its members in arrival order with exactly the
reference's float32 arithmetic ``c + (k − c)/TC``; a float64 copy of the means (the operand of the scores) is
refreshed for the clusters a frame touches.

State is kept on the host in NumPy buffers grown by doubling (the HC table is small, and the per-layer ops are
latency-bound: a NumPy op costs ~1 µs, a torch op several); the torch-facing attributes (``codes``,
``centroids``, ``counts``, ``n_clusters``, ``positions``, ``assignment``) are zero-copy views of them.
"""
from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
import torch

from ..config import ReSVConfig
from .hashing import layer_seed, make_hyperplanes

_FAR = 255  # a distance no code has (uint8 popcounts are <= 64): never < th (th is capped at 65)
_EMPTY = 128  # added to the distance of an empty table slot: >= 128 > any th, and 64 + 128 fits in uint8


def _popcount(x: np.ndarray) -> np.ndarray:
    """Set bits of each int64 (all 64, two's complement) -> uint8. ``np.bitwise_count`` counts the bits of the
    absolute value of a signed integer, hence the unsigned view."""
    return np.bitwise_count(x.view(np.uint64))


@functools.lru_cache(maxsize=64)
def _strictly_lower(n: int) -> np.ndarray:
    """bool ``[n, n]``, True where column s < row t (read-only, cached per frame length)."""
    m = np.tri(n, n, -1, dtype=bool)
    m.flags.writeable = False
    return m


def _opened(cand: np.ndarray, close: np.ndarray, earlier: np.ndarray) -> np.ndarray:
    """Which tokens open a cluster, ``[G, N]`` bool: the candidates (best old distance >= th) with no earlier
    *opening* token within th. ``close [G, N, N]``: in-frame distance < th; ``earlier [N, N]``: s < t.

    Only candidates with an earlier close candidate depend on the order; they are resolved one by one in arrival
    order (every earlier decision is final by then)."""
    conflict = close & cand[:, None, :] & earlier
    conflict &= cand[:, :, None]
    opened = cand.copy()
    g_c, t_c = np.nonzero(conflict.any(2))
    for g, t in zip(g_c.tolist(), t_c.tolist()):
        if (conflict[g, t] & opened[g]).any():
            opened[g, t] = False
    return opened


def _find_openblas_threads():
    """(get, set) of the OpenBLAS bundled with NumPy (the wheels' ``scipy_openblas``), or None if not found."""
    import ctypes
    import glob
    import os

    libdir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libdir, "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""), ("openblas", "64_"),
                               ("openblas", "")):
            get, set_ = (getattr(lib, f"{prefix}_{n}_num_threads{suffix}", None) for n in ("get", "set"))
            if get is not None and set_ is not None:
                return get, set_
    return None


_OPENBLAS = _find_openblas_threads()


@contextlib.contextmanager
def single_thread():
    """Run tiny, latency-bound array ops on one thread, torch's and NumPy's BLAS alike: on a busy CPU, waking a
    thread pool costs milliseconds per op (measured on the shared 2-core box: ~9 ms for a 1600-element torch
    min, 60-80 ms for a [33, 64] x [64, 690] NumPy matmul with OpenBLAS's 2 threads, 0.3 ms on one)."""
    n = torch.get_num_threads()
    nb = int(_OPENBLAS[0]()) if _OPENBLAS is not None else 1
    if n != 1:
        torch.set_num_threads(1)
    if nb != 1:
        _OPENBLAS[1](1)
    try:
        yield
    finally:
        if n != 1:
            torch.set_num_threads(n)
        if nb != 1:
            _OPENBLAS[1](nb)


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
        self._bit_values = np.left_shift(np.uint64(1), np.arange(self.cfg.n_hp, dtype=np.uint64))
        self._th = min(int(self.cfg.th_hp), 65)  # a distance is <= 64: any th > 64 joins everything alike
        G, cap, tcap = self.n_groups, 64, 256
        self._codes = np.zeros((G, cap), np.int64)
        self._cent = np.zeros((G, cap, self.group_dim), np.float32)
        self._cent64 = np.zeros((G, cap, self.group_dim), np.float64)  # float64 copy of _cent, for the scores
        self._pen = np.full((G, cap), _EMPTY, np.uint8)  # added to distances: 0 for a used slot, _EMPTY if empty
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
            pen = np.full((G, new), _EMPTY, np.uint8)
            pen[:, :cap] = self._pen
            self._pen = pen
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
        """float32 ``[..., Dg]`` -> int64 codes ``[...]`` (bit i = [x·h_i > 0] in float64, bit 63 = sign bit)."""
        bits = (x.astype(np.float64) @ self._hp64_t) > 0
        return (bits * self._bit_values).sum(-1, dtype=np.uint64).view(np.int64)

    def add_frame(self, keys: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Hash and cluster one frame's post-RoPE keys ``[Hkv, N, D]`` at cache ``positions [N]``.

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
        th = self._th
        best_c, best_d = self._nearest_old(new_codes)
        cand = best_d >= th  # tokens that open a cluster unless an earlier one of this frame is within th
        if cand.any():
            assign = self._open_in_frame(new_codes, best_c, best_d, cand)
        else:  # every token joins an old cluster: no in-frame dependency
            assign = best_c
        self._update_means(x, assign)
        return assign

    def _open_in_frame(self, new_codes: np.ndarray, best_c: np.ndarray, best_d: np.ndarray,
                       cand: np.ndarray) -> np.ndarray:
        """Assignment of a frame in which some tokens open clusters: the in-frame part of the D4 rule."""
        G, N = new_codes.shape
        th = self._th
        n0 = self._ncl.copy()
        d_new = _popcount(new_codes[:, :, None] ^ new_codes[:, None, :])  # [G, N, N] in-frame distances
        earlier = _strictly_lower(N)  # [N, N]: s < t
        opened = _opened(cand, d_new < th, earlier)
        own = n0[:, None] + np.cumsum(opened, 1) - 1  # cluster index of each opening token
        # Nearest *opened* earlier token of each token (first minimum = lowest cluster index); it wins only when
        # strictly nearer than the best old cluster (an old cluster has the lower index) and nearer than th.
        d_in = np.where(opened[:, None, :] & earlier, d_new, _FAR)
        s_star = d_in.argmin(2)
        d_star = d_in.min(2)
        use_in = (d_star < best_d) & (d_star < th)
        assign = np.where(opened, own, np.where(use_in, np.take_along_axis(own, s_star, 1), best_c))
        g_o, t_o = np.nonzero(opened)
        c_o = own[g_o, t_o]
        self._codes[g_o, c_o] = new_codes[g_o, t_o]
        self._pen[g_o, c_o] = 0
        self._ncl += opened.sum(1)
        return assign

    def _nearest_old(self, new_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per new code, the nearest cluster that existed before the frame (first minimum) and its distance."""
        G, N = new_codes.shape
        C0 = int(self._ncl.max())
        if C0 == 0:
            return np.zeros((G, N), np.int64), np.full((G, N), _FAR, np.uint8)
        d_old = _popcount(new_codes[:, :, None] ^ self._codes[:, None, :C0])  # uint8 [G, N, C0]
        d_old += self._pen[:, None, :C0]  # empty slots of the groups with fewer clusters: never nearest
        return d_old.argmin(2), d_old.min(2)

    def _update_means(self, x: np.ndarray, assign: np.ndarray) -> None:
        """Counts and running means of the frame's clusters, each cluster's members in arrival order.

        Round r takes the r-th joiner of every cluster in this frame (so no cluster appears twice in a round) and
        applies the reference's float32 step ``c + (k − c)/TC``: bit-identical means.
        """
        G, N = assign.shape
        cap = self._codes.shape[1]
        flat = (assign + (np.arange(G) * cap)[:, None]).ravel()  # into [G * cap]
        same = assign[:, :, None] == assign[:, None, :]
        rank = (same & _strictly_lower(N)).sum(2).ravel()  # earlier joiners of the same cluster in this frame
        counts, cent = self._counts.reshape(-1), self._cent.reshape(-1, self.group_dim)  # views
        n_after = counts[flat] + rank + 1  # TC after each token joins
        np.add.at(counts, flat, 1)
        n_after = n_after.astype(np.float32)
        xf = x.reshape(G * N, -1)
        n_rounds = int(rank.max()) + 1 if rank.size else 0
        if n_rounds == 1:
            c_old = cent[flat]
            cent[flat] = c_old + (xf - c_old) / n_after[:, None]
        elif n_rounds > 1:
            by_round = np.argsort(rank, kind="stable")
            bounds = np.searchsorted(rank[by_round], np.arange(n_rounds + 1))
            f_r, x_r, n_r = flat[by_round], xf[by_round], n_after[by_round, None]
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
                f = f_r[a:b]
                c_old = cent[f]
                cent[f] = c_old + (x_r[a:b] - c_old) / n_r[a:b]
        self._cent64.reshape(-1, self.group_dim)[flat] = cent[flat]

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
                    self._pen[g, j] = 0
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
