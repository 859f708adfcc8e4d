"""ReSV's KV prediction end to end: Q·Key_cluster^T -> weights -> WiCSum per row -> union -> token positions.

The work runs on host NumPy arrays (see :mod:`vrex_lib.resv.table`): per layer and step it is a handful of
small array ops, where NumPy's per-op cost (~1 µs) is far below torch's, so every stage runs on all rows of
all KV heads at once (docs/DECISIONS.md D360). Scores are computed per KV head with the same float64 expression
as the reference (``(rows @ Key_cluster^T) · scaling``, on the table's float64 copy of its means), so the two
paths see bit-identical weights; WiCSum runs on all rows at once (:func:`vrex_lib.resv.wicsum.wicsum_sorted_rows`,
docs D361) and the union's positions are read from the table's token order in one gather (D362).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..config import ReSVConfig
from ..selection import Selection
from .table import HashClusterTable, single_thread, to_numpy
from .wicsum import quantize_weights, wicsum_sorted_rows

# ReSV returns the runtime's own selection type (per-KV-head positions + stats: rows, clusters /
# clusters_selected per KV head, prefix_frac, sum_nonpos_rows for raw scores, ratio).
ReSVSelection = Selection


def cluster_scores(query: torch.Tensor, table: HashClusterTable, head: int, scaling: float) -> torch.Tensor:
    """``Score_cluster`` of one KV head: its query rows ``[R, D]`` × ``Key_cluster^T`` · scaling -> ``[R, C]`` (float64)."""
    return (query.to(torch.float64) @ table.head_centroids(head).to(torch.float64).T) * scaling


def _candidate_range(candidates) -> tuple[np.ndarray | None, tuple[int, int] | None]:
    """Sorted unique candidate positions -> (array, None), or (None, (lo, hi)) when they are exactly [lo, hi)."""
    c = to_numpy(candidates, np.int64).reshape(-1)
    if c.size == 0:
        return None, (0, 0)
    lo, hi = int(c[0]), int(c[-1]) + 1
    if hi - lo == c.size and (c.size < 2 or bool((c[1:] > c[:-1]).all())):
        return None, (lo, hi)
    return c, None


def select_tokens(query: torch.Tensor, table: HashClusterTable, ratio: float | None = None,
                  cfg: ReSVConfig | None = None, scaling: float | None = None,
                  candidates: torch.Tensor | None = None, quant_bits: int | None = None) -> ReSVSelection:
    """ReSV selection for ``query [Hq, Nq, D]`` (post-RoPE) against the layer's HC ``table``.

    Rows of KV head g are (query head in g's group, query token), head-major (docs/DECISIONS.md D2). Per row:
    scores s = q·Key_cluster^T·scaling (default 1/√D, float64), weights by ``cfg.score`` (D1), WiCSum with
    ``ratio`` (default ``cfg.ratio``). Granularity ``cfg.granularity``: 'kv_head' = union over the group's
    rows; 'q_head' = one set per query head; 'layer' = union over all rows of all heads, same set for every
    head. ``candidates`` (sorted positions) restricts the returned sets and is the ratio's denominator.
    Returned index tensors are on the query's device.
    """
    with single_thread():
        return _select_tokens(query, table, ratio, cfg, scaling, candidates, quant_bits)


def _check_args(query, table, cfg) -> None:
    if query.dim() != 3 or query.shape[-1] != table.head_dim:
        raise ValueError(f"query must be [Hq, Nq, D={table.head_dim}], got {tuple(query.shape)}")
    if query.shape[0] % table.n_kv_heads:
        raise ValueError(f"{query.shape[0]} query heads are not a multiple of {table.n_kv_heads} KV heads")
    if cfg.granularity not in ("kv_head", "q_head", "layer"):
        raise ValueError(f"granularity={cfg.granularity!r}: use 'kv_head', 'q_head' or 'layer'")
    if cfg.score not in ("softmax", "raw"):
        raise ValueError(f"score={cfg.score!r}: use 'softmax' or 'raw' (ReSVConfig.score)")


def _weights(q: np.ndarray, table: HashClusterTable, n_c: np.ndarray, scaling: float, softmax: bool,
             quant_bits: int | None):
    """Weights of every row of every KV head, padded to the largest cluster count C: ``w, wc = w·TC, key``
    ``[Hkv, R, C]`` and the key's padding value (``key`` ascending = σ; see :func:`wicsum_sorted_rows`).

    Scores are the reference's own expression per head, ``(rows @ Key_cluster^T) · scaling`` in float64 on
    the same operands (the table's float64 copy of its means), so the weights are bit-identical to it.
    """
    Hkv, R, _ = q.shape
    C = int(n_c.max())
    s = np.full((Hkv, R, C), -np.inf if softmax else 0.0)  # padding: weight 0 either way
    for h in range(Hkv):
        s[h, :, :int(n_c[h])] = (q[h] @ table.head_centroids64_np(h).T) * scaling
    w = np.exp(s - s.max(2, keepdims=True)) if softmax else s  # every head has >= 1 cluster once C > 0
    counts = table._counts[:, :C] if not table.concat else np.broadcast_to(table._counts[:1, :C], (Hkv, C))
    if quant_bits is not None:
        w = quantize_weights(w, quant_bits)
        key, pad_key = ~w, np.iinfo(np.int64).max  # ~x = -x-1: ascending = descending weight, exactly
    else:
        counts = counts.astype(np.float64)  # exact, so w·TC is the same product; converted once, not per row
        key, pad_key = -w, np.inf
    wc = w * counts[:, None, :]
    for h in np.flatnonzero(n_c < C).tolist():
        key[h, :, int(n_c[h]):] = pad_key
    return w, wc, key, pad_key


def _select_tokens(query, table, ratio, cfg, scaling, candidates, quant_bits) -> ReSVSelection:
    cfg = cfg or table.cfg
    ratio = cfg.ratio if ratio is None else float(ratio)
    _check_args(query, table, cfg)
    Hq, Nq, D = query.shape
    Hkv = table.n_kv_heads
    grp, R = Hq // Hkv, Hq // Hkv * Nq
    scaling = 1.0 / math.sqrt(D) if scaling is None else scaling
    q = to_numpy(query, np.float32).astype(np.float64).reshape(Hkv, R, D)  # a group's query heads are adjacent
    n_c = np.repeat(table._ncl, Hkv) if table.concat else table._ncl.copy()  # clusters per KV head
    C = int(n_c.max()) if Hkv else 0
    nonpos = 0
    if C:
        softmax = cfg.score == "softmax"
        w, wc, key, pad_key = _weights(q, table, n_c, scaling, softmax, quant_bits)
        if not softmax:
            nonpos = int((wc.sum(-1) <= 0).sum())
        mask, n_sel = wicsum_sorted_rows(w.reshape(Hkv * R, C), wc.reshape(Hkv * R, C), key.reshape(Hkv * R, C),
                                         pad_key, ratio, np.repeat(n_c, R), nonneg=True if softmax else None)
        mask = mask.reshape(Hkv, R, C)
        prefix = float((n_sel.reshape(Hkv, R) / np.maximum(n_c, 1)[:, None]).mean())
    else:
        mask = np.zeros((Hkv, R, 0), bool)
        prefix = 0.0
    head_mask = mask.any(1)  # [Hkv, C]: union over the group's rows
    if cfg.granularity == "q_head":
        idx = _positions(table, mask.reshape(Hkv * grp, Nq, C).any(1), np.arange(Hkv * grp) // grp, candidates)
    else:
        idx = _positions(table, head_mask, np.arange(Hkv), candidates, union=cfg.granularity == "layer")
    if query.device.type != "cpu":
        idx = [i.to(query.device) for i in idx]
    n_cand = table.n_tokens if candidates is None else int(candidates.numel())
    sel = ReSVSelection(idx, n_cand, dict(rows=R * Hkv, clusters=n_c.tolist(),
                                          clusters_selected=head_mask.sum(1).tolist(), prefix_frac=prefix,
                                          sum_nonpos_rows=nonpos))
    sel.stats["ratio"] = sel.ratio()
    return sel


def _positions(table: HashClusterTable, cluster_mask: np.ndarray, head: np.ndarray, candidates,
               union: bool = False) -> list[torch.Tensor]:
    """Sorted cache positions of the members of the clusters marked in ``cluster_mask [M, C]`` (set m belongs to
    KV head ``head[m]``), restricted to ``candidates``; ``union``: one set (the union of all) repeated M times."""
    T = table.n_tokens
    a, b, in_cand = 0, T, None
    if candidates is not None:
        cand_arr, cand_range = _candidate_range(candidates)
        pos = table._pos[:T]
        if cand_range is not None and table._monotonic:  # a window of the token order
            a, b = (int(i) for i in np.searchsorted(pos, cand_range))
        elif cand_range is not None:
            in_cand = (pos >= cand_range[0]) & (pos < cand_range[1])
        else:
            in_cand = np.isin(pos, cand_arr)
    assign = table._assign[:, a:b]
    if table.concat or len(head) != assign.shape[0]:  # sets of several heads read the same group's assignment
        assign = assign[np.zeros_like(head) if table.concat else head]
    M, C = cluster_mask.shape
    tok = cluster_mask.ravel()[assign + (np.arange(M) * C)[:, None]]  # [M, b - a]: token in a marked cluster
    if in_cand is not None:
        tok &= in_cand
    if union:
        tok = tok.any(0, keepdims=True)
    pos = table._pos[a:b]
    out = [pos[np.flatnonzero(m)] for m in tok]  # ~10x faster than boolean indexing on long rows
    if not table._monotonic:
        out = [np.unique(p) if union else np.sort(p) for p in out]
    if union:
        return [torch.from_numpy(out[0].copy()) for _ in range(len(head))]
    return [torch.from_numpy(p) for p in out]
