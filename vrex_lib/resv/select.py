"""ReSV's KV prediction end to end: Q·Key_cluster^T -> weights -> WiCSum per row -> union -> token positions.

The work runs on host NumPy arrays (see :mod:`vrex_lib.resv.table`): per layer and step it is a handful of
small array ops, where NumPy's per-op cost (~1 µs) is far below torch's. Scores are computed per KV head with
the same float64 expression as the reference (``(rows @ Key_cluster^T) · scaling``), so the two paths see
bit-identical weights; WiCSum runs on all rows of all heads at once (:func:`vrex_lib.resv.wicsum.wicsum_rows`).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..config import ReSVConfig
from ..selection import Selection
from .table import HashClusterTable, single_thread, to_numpy
from .wicsum import quantize_weights, wicsum_rows

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


def _select_tokens(query, table, ratio, cfg, scaling, candidates, quant_bits) -> ReSVSelection:
    cfg = cfg or table.cfg
    ratio = cfg.ratio if ratio is None else float(ratio)
    if query.dim() != 3 or query.shape[-1] != table.head_dim:
        raise ValueError(f"query must be [Hq, Nq, D={table.head_dim}], got {tuple(query.shape)}")
    Hq, Nq, D = query.shape
    Hkv = table.n_kv_heads
    if Hq % Hkv:
        raise ValueError(f"{Hq} query heads are not a multiple of {Hkv} KV heads")
    if cfg.granularity not in ("kv_head", "q_head", "layer"):
        raise ValueError(f"granularity={cfg.granularity!r}: use 'kv_head', 'q_head' or 'layer'")
    if cfg.score not in ("softmax", "raw"):
        raise ValueError(f"score={cfg.score!r}: use 'softmax' or 'raw' (ReSVConfig.score)")
    grp, R = Hq // Hkv, Hq // Hkv * Nq
    scaling = 1.0 / math.sqrt(D) if scaling is None else scaling
    q = to_numpy(query, np.float32).astype(np.float64).reshape(Hkv, R, D)  # a group's query heads are adjacent
    n_c = np.array([table.head_counts_np(h).shape[0] for h in range(Hkv)], np.int64)  # clusters per head
    C = int(n_c.max()) if Hkv else 0
    valid = np.arange(C)[None, :] < n_c[:, None]  # [Hkv, C]
    nonpos = 0
    if C:
        softmax = cfg.score == "softmax"
        w = np.zeros((Hkv, R, C))
        counts = np.zeros((Hkv, C), np.int64)
        for h in range(Hkv):  # the reference's own expression per head: bit-identical scores
            c = int(n_c[h])
            if c == 0:
                continue
            s = (q[h] @ table.head_centroids_np(h).astype(np.float64).T) * scaling
            w[h, :, :c] = np.exp(s - s.max(1, keepdims=True)) if softmax else s
            counts[h, :c] = table.head_counts_np(h)
        if quant_bits is not None:
            w = quantize_weights(w, quant_bits)
        if not softmax:
            nonpos = int(((w * counts[:, None, :]).sum(-1) <= 0).sum())
        mask, n_sel = wicsum_rows(w.reshape(Hkv * R, C), np.repeat(counts, R, 0), ratio,
                                  np.repeat(valid, R, 0), np.repeat(n_c, R),
                                  nonneg=True if softmax else None)
        mask = mask.reshape(Hkv, R, C)
        prefix = float((n_sel.reshape(Hkv, R) / np.maximum(n_c, 1)[:, None]).mean())
    else:
        mask = np.zeros((Hkv, R, 0), bool)
        prefix = 0.0
    head_mask = mask.any(1)  # [Hkv, C]: union over the group's rows

    cand_arr, cand_range = (None, None) if candidates is None else _candidate_range(candidates)
    pos = table._pos[: table.n_tokens]
    in_cand = None
    if cand_range is not None:
        in_cand = (pos >= cand_range[0]) & (pos < cand_range[1])
    elif cand_arr is not None:
        in_cand = np.isin(pos, cand_arr)

    def positions(h: int, cluster_mask: np.ndarray) -> torch.Tensor:
        m = table.token_mask_np(h, cluster_mask)
        if in_cand is not None:
            m &= in_cand
        return torch.from_numpy(table.positions_of_np(m))

    if cfg.granularity == "kv_head":
        idx = [positions(h, head_mask[h]) for h in range(Hkv)]
    elif cfg.granularity == "q_head":
        qm = mask.reshape(Hkv, grp, Nq, C).any(2)  # [Hkv, grp, C]; query head h*grp + j
        idx = [positions(h, qm[h, j]) for h in range(Hkv) for j in range(grp)]
    else:
        union = np.unique(np.concatenate([positions(h, head_mask[h]).numpy() for h in range(Hkv)]))
        idx = [torch.from_numpy(union.copy()) for _ in range(Hkv)]
    if query.device.type != "cpu":
        idx = [i.to(query.device) for i in idx]
    n_cand = table.n_tokens if candidates is None else int(candidates.numel())
    sel = ReSVSelection(idx, n_cand, dict(rows=R * Hkv, clusters=n_c.tolist(),
                                          clusters_selected=head_mask.sum(1).tolist(), prefix_frac=prefix,
                                          sum_nonpos_rows=nonpos))
    sel.stats["ratio"] = sel.ratio()
    return sel
