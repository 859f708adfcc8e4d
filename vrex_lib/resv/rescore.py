"""Beyond the paper: ReSV with its clusters as a shortlist and the shortlisted members re-scored exactly
(docs/DECISIONS.md D262).

ReSV scores a cluster by ``TC · exp(q·c̄)``; exp is convex, so a cluster whose members spread around the centroid
holds more attention than that (centroid dilution, :mod:`vrex_lib.resv.mechanism`), and a unique key inside a large
cluster of filler is underestimated by its cluster. Here the HC table keeps one more number per cluster, its radius
``r_c = max_j ||k_j − c̄_c||``, so ``q·c̄ + ||q||·r_c`` bounds every member's score (Cauchy–Schwarz), and:

1. shortlist: per KV head, clusters in descending ``Σ_rows exp(bound − max_row bound)`` until their candidate
   members reach ``shortlist`` of the candidates (a whole cluster at a time);
2. re-score: the keys of the shortlisted candidates and of the always-attended tokens (sinks, recent window, own
   tokens: on the device already) are scored exactly, and WiCSum (Eq. 1–3, count 1 per token, Th_r-wics) picks
   tokens per row; the union over the head's rows, restricted to the candidates, is fetched.

The radius here is exact (computed from the keys); an HCU keeping it incrementally would hold an upper bound
(``max(r + ||Δc̄||, ||k − c̄'||)`` on each join), which only widens the bound. The cost of step 2 is the keys of the
shortlist read from the offload tier (``shortlist_keys``) and their scores -- what the simulator charges.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .table import HashClusterTable, to_numpy
from .wicsum import wicsum_select


RANKS: tuple[str, ...] = ("bound", "centroid", "mass")


def cluster_radius(keys_h: np.ndarray, centroids: np.ndarray, assign: np.ndarray) -> np.ndarray:
    """Per cluster, the largest member distance to its centroid: ``keys_h [T, D]`` (table order), ``centroids
    [C, D]``, ``assign [T]`` (cluster of each token) -> ``[C]`` float64 (0 for an empty cluster)."""
    d = np.linalg.norm(keys_h.astype(np.float64) - centroids[assign], axis=1)
    r = np.zeros(centroids.shape[0])
    np.maximum.at(r, assign, d)
    return r


def rescore_select(query: torch.Tensor, keys: torch.Tensor, table: HashClusterTable, candidates: torch.Tensor,
                   ratio: float, shortlist: float, rank: str = "bound") -> tuple[list[torch.Tensor], dict]:
    """Per KV head the selected candidate positions (sorted int64) and stats (shortlist_keys: candidate keys
    re-scored; clusters, clusters_shortlisted per head; rows). ``query [Hq, Nq, D]``, ``keys [Hkv, S, D]``
    (the whole cache, post-RoPE), ``candidates`` sorted positions; ``shortlist`` in (0, 1]; ``rank``: 'bound'
    (``q·c̄ + ||q||·r_c``), 'centroid' (``q·c̄`` alone, the count left out) or 'mass' (ReSV's estimate
    ``TC_cand · exp(q·c̄)`` over the candidate members: the always-attended tokens out of the ranking)."""
    if rank not in RANKS:
        raise ValueError(f"rescore: rank={rank!r}: use one of {', '.join(RANKS)}")
    if not 0.0 < shortlist <= 1.0:
        raise ValueError(f"rescore: shortlist must be in (0, 1] (a fraction of the candidates), got {shortlist}")
    hkv, s_len, d = keys.shape
    q = to_numpy(query, np.float32).astype(np.float64).reshape(hkv, -1, d)
    k = to_numpy(keys, np.float32).astype(np.float64)
    cand = to_numpy(candidates, np.int64).reshape(-1)
    is_cand = np.zeros(s_len, bool)
    is_cand[cand] = True
    always = np.flatnonzero(~is_cand)
    T = table.n_tokens
    pos = table._pos[:T]
    inside = pos < s_len
    scaling = 1.0 / math.sqrt(d)
    budget = max(1, math.ceil(shortlist * cand.size))
    out, n_short, n_cl, n_cl_short = [], 0, [], []
    for h in range(hkv):
        cen = table.head_centroids64_np(h)
        a = table._assign[table.group_of(h), :T][inside]
        p = pos[inside]
        r = cluster_radius(k[h, p], cen, a)
        qh = q[h]
        bound = qh @ cen.T * scaling                                                       # [R, C]
        if rank == "bound":
            bound = bound + np.linalg.norm(qh, axis=1)[:, None] * r[None, :] * scaling
        cand_members = np.bincount(a[is_cand[p]], minlength=cen.shape[0])
        if rank == "mass":
            with np.errstate(divide="ignore"):
                bound = bound + np.log(cand_members)[None, :]
        prio = np.exp(bound - bound.max(1, keepdims=True)).sum(0)
        order = np.argsort(-prio, kind="stable")
        order = order[cand_members[order] > 0]
        n_take = int(np.searchsorted(np.cumsum(cand_members[order]), budget) + 1)
        short_c = np.zeros(cen.shape[0], bool)
        short_c[order[:n_take]] = True
        short = np.sort(p[short_c[a] & is_cand[p]])
        tok = np.concatenate([always, short])
        s = (qh @ k[h, tok].T) * scaling
        w = torch.from_numpy(np.exp(s - s.max(1, keepdims=True)))
        mask = wicsum_select(w, torch.ones(tok.size, dtype=torch.int64), ratio).any(0).numpy()
        chosen = tok[mask]
        out.append(torch.from_numpy(np.sort(chosen[is_cand[chosen]])))
        n_short += int(short.size)
        n_cl.append(int(cen.shape[0]))
        n_cl_short.append(int(short_c.sum()))
    return out, dict(shortlist_keys=n_short, clusters=n_cl, clusters_shortlisted=n_cl_short, rows=hkv * q.shape[1])
