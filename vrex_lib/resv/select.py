"""ReSV's KV prediction end to end: Q·Key_cluster^T -> weights -> WiCSum per row -> union -> token positions.

The work runs on host NumPy arrays (see :mod:`vrex_lib.resv.table`). Scores are computed per KV head with the
same float64 expression as the reference (``(rows @ Key_cluster^T) · scaling``, on the table's float64 copy of its
means), so the two paths see bit-identical weights; everything after the scores -- scaling and centring, WiCSum
on every row of every KV head, the union, the union's token positions -- is one compiled call each
(:mod:`vrex_lib.resv.kernels`, docs/DECISIONS.md D369), because at 1K tokens a step is ~100 tiny array ops per
layer whose cost is the per-op overhead, not the arithmetic (D360).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..config import ReSVConfig
from ..selection import Selection
from . import kernels
from .table import HashClusterTable, to_numpy
from .threads import single_thread
from .wicsum import RATIO_FRAC_BITS, quantize_weights, ratio_q

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
                  candidates: torch.Tensor | None = None, quant_bits: int | None = None) -> Selection:
    """ReSV selection for ``query [Hq, Nq, D]`` (post-RoPE) against the layer's HC ``table``.

    Rows of KV head g are (query head in g's group, query token), head-major (docs/DECISIONS.md D2). Per row:
    scores s = q·Key_cluster^T·scaling (default 1/√D, float64), weights by ``cfg.score`` (D1), WiCSum with
    ``ratio`` (default ``cfg.th_r_wics``). Granularity ``cfg.granularity``: 'kv_head' = union over the group's
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


_EARLY_EXIT = 1  # the float WiCSum's stages (kernels._row_float); tests force the others: the same selections


def _weights(q: np.ndarray, table: HashClusterTable, n_c: np.ndarray, scaling: float, softmax: bool,
             quant_bits: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Step 3 (§IV.C; ``reference.select_tokens_ref``).

    WiCSum weights of every KV head's rows ``q [Hkv, R, D]`` over its own ``n_c[h]`` clusters, held back to
    back: flat ``[Σ_h R·n_c[h]]`` (head h's ``[R, n_c[h]]`` row-major from ``off[h]``), softmax numerators (or
    raw scores) in float64, or int64 when quantised to ``quant_bits``; returns (weights, off).

    Scores are the reference's own expression, ``(rows @ Key_cluster^T) · scaling`` in float64 on the same
    operands (the table's float64 copy of its means; each product into a C-contiguous ``[R, n]``, as the
    reference's), and the softmax numerators ``exp(s − max s)``: the same float64 operations, ``np.exp`` included,
    so the weights are bit-identical to it.
    """
    Hkv, R, _ = q.shape
    size = R * n_c
    off = np.zeros(Hkv, np.int64)
    np.cumsum(size[:-1], out=off[1:])
    s = np.empty(int(size.sum()))
    for h in range(Hkv):
        if n_c[h]:
            np.matmul(q[h], table.head_centroids64_np(h).T, out=s[off[h]:off[h] + size[h]].reshape(R, -1))
    kernels.scale_center(s, off, np.full(Hkv, R, np.int64), n_c, scaling, softmax)
    w = np.exp(s) if softmax else s
    return (w if quant_bits is None else quantize_weights(w, quant_bits)), off


def _wicsum_heads(q, table, n_c, scaling, softmax, quant_bits, ratio):
    """Steps 3-4 (§IV.C, Eq. 1-3).

    WiCSum of every row of every KV head, in one compiled call over all heads
    (:func:`vrex_lib.resv.kernels.wicsum_blocks`) -> (selected bool ``[Hkv, R, C]`` padded to the largest
    cluster count, their union over each head's rows ``[Hkv, C]``, clusters selected per row ``[Hkv, R]``, rows
    whose Σ w·TC <= 0 (raw scores only; 0 for softmax))."""
    Hkv, R, _ = q.shape
    C = int(n_c.max())
    w, off = _weights(q, table, n_c, scaling, softmax, quant_bits)
    mask, union, n_sel = np.zeros((Hkv * R, C), bool), np.zeros((Hkv, C), bool), np.zeros(Hkv * R, np.int64)
    groups = np.zeros(Hkv, np.int64) if table.concat else np.arange(Hkv, dtype=np.int64)
    blocks = (w, off, np.full(Hkv, R, np.int64), n_c, groups, table._counts, np.arange(Hkv, dtype=np.int64) * R)
    rule = (ratio_q(ratio), RATIO_FRAC_BITS) if quant_bits is not None else (float(ratio), None)
    kernels.wicsum_blocks(*blocks, rule[0], _EARLY_EXIT, rule[1], mask, n_sel, union)
    nonpos = 0
    if not softmax:
        for h in range(Hkv):
            wh = w[off[h]:off[h] + R * n_c[h]].reshape(R, -1)
            nonpos += int(((wh * table.head_counts_np(h).astype(np.float64)).sum(-1) <= 0).sum())
    return mask.reshape(Hkv, R, C), union, n_sel.reshape(Hkv, R), nonpos


def _select_tokens(query, table, ratio, cfg, scaling, candidates, quant_bits) -> Selection:
    cfg = cfg or table.cfg
    ratio = cfg.th_r_wics if ratio is None else float(ratio)
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
        mask, head_mask, n_sel, nonpos = _wicsum_heads(q, table, n_c, scaling, cfg.score == "softmax", quant_bits,
                                                       ratio)
        prefix = float((n_sel / np.maximum(n_c, 1)[:, None]).mean())
    else:
        mask, head_mask = np.zeros((Hkv, R, 0), bool), np.zeros((Hkv, 0), bool)
        prefix = 0.0
    if cfg.granularity == "q_head":
        idx = _positions(table, mask.reshape(Hkv * grp, Nq, C).any(1), np.arange(Hkv * grp) // grp, candidates)
    else:
        idx = _positions(table, head_mask, np.arange(Hkv), candidates, union=cfg.granularity == "layer")
    if query.device.type != "cpu":
        idx = [i.to(query.device) for i in idx]
    n_cand = table.n_tokens if candidates is None else int(candidates.numel())
    sel = Selection(idx, n_cand, dict(rows=R * Hkv, clusters=n_c.tolist(),
                                          clusters_selected=head_mask.sum(1).tolist(), prefix_frac=prefix,
                                          sum_nonpos_rows=nonpos))
    sel.stats["ratio"] = sel.ratio()
    return sel


def _positions(table: HashClusterTable, cluster_mask: np.ndarray, head: np.ndarray, candidates,
               union: bool = False) -> list[torch.Tensor]:
    """Step 5.

    Sorted cache positions of the members of the clusters marked in ``cluster_mask [M, C]`` (set m belongs to
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
    groups = np.zeros(len(head), np.int64) if table.concat else np.asarray(head, np.int64)  # concat: one group
    flat, sizes = kernels.member_positions(cluster_mask, groups, table._assign, table._pos,
                                           a, b, np.zeros(0, bool) if in_cand is None else in_cand,
                                           in_cand is not None, union)
    if union:
        p = flat if table._monotonic else np.unique(flat)
        return [torch.from_numpy(p.copy()) for _ in range(len(head))]
    ends = np.cumsum(sizes).tolist()
    out = [flat[e - n:e] for e, n in zip(ends, sizes.tolist())]
    return [torch.from_numpy(p if table._monotonic else np.sort(p)) for p in out]
