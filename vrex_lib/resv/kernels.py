"""Compiled (Numba) kernels of ReSV's per-layer step: the founder clustering of a frame, WiCSum per row, the
selected clusters' token positions.

A ReSV step at 1K tokens is ~100 tiny array ops per layer, so its cost in NumPy is the per-op overhead, not the
arithmetic (docs/DECISIONS.md D360, D369); these loops do the same work in one call. They compute exactly what
:mod:`vrex_lib.resv.reference` computes -- the same comparisons, the same float64/float32 operations in the same
order -- and the tests compare them with it (``tests/test_resv_fastpath.py``). What stays in NumPy is what must
be bit-identical to the reference's own NumPy calls: the float64 score matmuls, ``np.exp`` and the hash matmul.

Compiled on first use and cached beside this file (``cache=True``); no threads, no fastmath.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

_LEVELS = 64  # binary orders of the weight below the row's largest; the last holds everything smaller
_LEVEL_TRIES = 3  # orders tried from the one the histogram picks, before the whole of σ

# ------------------------------------------------------------------------------------ HC-table update
_M1, _M2, _M4 = np.uint64(0x5555555555555555), np.uint64(0x3333333333333333), np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@njit(inline="always", cache=True)
def _popcount(x) -> int:
    """Set bits of an int64 code (all 64, two's complement), SWAR."""
    v = np.uint64(x)
    v = v - ((v >> np.uint64(1)) & _M1)
    v = (v & _M2) + ((v >> np.uint64(2)) & _M2)
    v = (v + (v >> np.uint64(4))) & _M4
    return int((v * _H01) >> np.uint64(56))


@njit(cache=True)
def pack_codes(proj):
    """Step 1 (§IV.B, Fig. 8; ``reference.hash_bits_ref``).

    Hash codes from the hyperplane projections ``proj [G, N, n_hp]`` (float64, n_hp <= 64): bit i set iff
    proj[..., i] > 0 (bit 63 is the int64 sign bit) -> int64 ``[G, N]``."""
    G, N, n_hp = proj.shape
    codes = np.zeros((G, N), np.int64)
    for g in range(G):
        for t in range(N):
            c = np.uint64(0)
            for i in range(n_hp):
                if proj[g, t, i] > 0:
                    c |= np.uint64(1) << np.uint64(i)
            codes[g, t] = np.int64(c)
    return codes


@njit(cache=True)
def cluster_founder(new_codes, x, th, codes, counts, cent, cent64, ncl, assign) -> None:
    """Step 2 (§IV.B; ``reference.cluster_ref`` and the running means of ``HashClusterTableRef``).

    One frame into the HC table, founder rule (docs/DECISIONS.md D4), in place: per group g and token t in
    arrival order, the nearest cluster by Hamming distance of the codes (ties -> the lowest index; clusters
    opened earlier in the frame included) is joined when the distance is < ``th``, else t opens cluster
    ``ncl[g]`` with its own code. The joined cluster's count grows by one and its mean takes the reference's
    float32 step ``c + (k − c)/TC`` (a new slot's mean is 0, so it becomes the key); ``cent64`` gets the float64
    copy. ``new_codes [G, N]`` int64, ``x [G, N, Dg]`` float32; table arrays ``[G, cap(, Dg)]`` with room for N
    more clusters; writes ``assign [G, N]``."""
    G, N, Dg = x.shape
    for g in range(G):
        n = ncl[g]
        for t in range(N):
            c = new_codes[g, t]
            best, best_d = -1, 1 << 30
            for j in range(n):
                d = _popcount(c ^ codes[g, j])
                if d < best_d:
                    best, best_d = j, d
            if best < 0 or best_d >= th:
                best = n
                codes[g, n] = c
                n += 1
            counts[g, best] += 1
            tc = np.float32(counts[g, best])
            for k in range(Dg):
                m = cent[g, best, k] + (x[g, t, k] - cent[g, best, k]) / tc
                cent[g, best, k] = m
                cent64[g, best, k] = m
            assign[g, t] = best
        ncl[g] = n


# ----------------------------------------------------------------------------------------------- WiCSum
# σ (paper Eq. 3): descending weight, ties -> lower cluster index. A binary heap of column indices ordered by σ
# yields σ(0), σ(1), ... one at a time (the WTU's early exit), exactly the stable order of the reference's sort.


@njit(inline="always", cache=True)
def _before(w, a, b) -> bool:
    """Column a precedes column b in σ."""
    return w[a] > w[b] or (w[a] == w[b] and a < b)


@njit(inline="always", cache=True)
def _sift_down(heap, size, pos, w) -> None:
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        if child + 1 < size and _before(w, heap[child + 1], heap[child]):
            child += 1
        if not _before(w, heap[child], heap[pos]):
            return
        heap[pos], heap[child] = heap[child], heap[pos]
        pos = child


@njit(inline="always", cache=True)
def _heapify(heap, n, w) -> None:
    for j in range(n):
        heap[j] = j
    for pos in range(n // 2 - 1, -1, -1):
        _sift_down(heap, n, pos, w)


@njit(inline="always", cache=True)
def _pop(heap, size, w) -> int:
    top = heap[0]
    heap[0] = heap[size - 1]
    _sift_down(heap, size - 1, 0, w)
    return top


@njit(cache=True)
def _sigma_prefix(wi, ci, idx, k, order, acc, key, lo, hi, certain):
    """σ-order the columns ``idx[:k]`` (ascending; a set closed under ties: all of σ's first k), add Acc in that
    order into ``acc``, write σ into ``order``. With ``certain``: return t+1 for the first Acc(t) > hi when
    Acc(t−1) <= lo (then t is t* whatever Sum is), −1 when an Acc lands within [lo, hi] or none exceeds hi."""
    for t in range(k):
        key[t] = -wi[idx[t]]
    o = np.argsort(key[:k], kind="mergesort")  # stable: equal weights keep ascending column order
    a = 0.0
    for t in range(k):
        j = idx[o[t]]
        order[t] = j
        a += wi[j] * float(ci[j])
        acc[t] = a
        if certain and a > hi:
            return t + 1 if t == 0 or acc[t - 1] <= lo else -1
    return -1


@njit(cache=True)
def _row_float(wi, bi, ci, n, ratio, early_exit, order, acc, idx, key, mass) -> int:
    """Step 4 (§IV.C, Eq. 1-3; ``reference.wicsum_select_ref``, float weights).

    Clusters selected in one row (σ's first ones, written to ``order``). ``early_exit``: 1 = σ(0) alone, then
    the top binary orders of the weight, then the whole of σ; 2 = the same without the σ(0) shortcut; 0 = the
    whole of σ at once (the reference's procedure). Every stage is exact for the rows it decides:

    Per row, as ``reference.wicsum_select_ref``: Acc(t) = Σ_{k<=t} w_σ(k)·TC_σ(k) added in σ order, Sum = Acc(last),
    the first t with Acc(t) > ratio·Sum, else every cluster. Sum needs the whole of σ, so with weights >= 0 a row
    is decided on the top of σ alone when that is certain: Acc(t) above the upper bound of ratio·Sum and Acc(t−1)
    below its lower bound (docs/DECISIONS.md D51: bounds from Sum added in index order, ± (C+2)·2⁻⁵¹·Sum) -- then
    t is the reference's t* whatever Sum's exact value. The top is σ(0) alone, else the clusters within a few
    binary orders of the largest weight, as many as a histogram of w·TC per order says reach the bound (D369). A
    row with a negative weight, or an Acc within the bounds, takes the whole of σ.
    """
    total, nonneg, jmax = 0.0, True, 0
    for j in range(n):
        x = wi[j]
        if x < 0:
            nonneg = False
        if x > wi[jmax]:
            jmax = j  # the first maximum: σ(0)
        total += x * float(ci[j])
    if early_exit > 0 and nonneg and total > 0:
        err = (n + 2) * 2.0 ** -51 * total
        margin = ratio * err * (1 + 2.0 ** -50) + 2.0 ** -51 * ratio * (total + err) + 1e-300
        lo, hi = ratio * total - margin, ratio * total + margin
        a0 = wi[jmax] * float(ci[jmax])
        if early_exit == 1 and a0 > hi:  # Acc(0) > Th for every Sum in the bounds
            order[0] = jmax
            return 1
        # Mass per binary order below the largest weight, read off the float64 exponent bits ``bi`` (w >= 0);
        # S_l = {w >= 2^(e_top-l)} is a weight threshold, so closed under ties.
        e_top = bi[jmax] >> 52
        mass[:] = 0.0
        for j in range(n):
            lvl = min(e_top - (bi[j] >> 52), _LEVELS - 1)
            mass[lvl] += wi[j] * float(ci[j])
        level, cum = _LEVELS - 1, 0.0
        for lv in range(_LEVELS):
            cum += mass[lv]
            if cum > hi * (1 + 2.0 ** -40):
                level = lv
                break
        for _ in range(_LEVEL_TRIES):
            tau = math.ldexp(1.0, e_top - 1023 - level)
            k = 0
            for j in range(n):
                if wi[j] >= tau:
                    idx[k] = j
                    k += 1
            got = _sigma_prefix(wi, ci, idx, k, order, acc, key, lo, hi, True)
            if got > 0:
                return got
            if k and acc[k - 1] > lo:  # an Acc within the bounds: only the exact Sum decides
                break
            level += 1
    for j in range(n):  # the reference's procedure: the whole of σ, Sum = Acc(n-1) in σ order
        idx[j] = j
    _sigma_prefix(wi, ci, idx, n, order, acc, key, 0.0, 0.0, False)
    th = ratio * acc[n - 1]
    for t in range(n):
        if acc[t] > th:
            return t + 1
    return n


@njit(cache=True)
def _row_int(wi, ci, n, ratio_q, frac_bits, heap, order) -> int:
    """Step 4 (§IV.C, Eq. 1-3; ``reference.wicsum_select_ref``, integer weights: the WTU's rule).

    Clusters selected in one row under the integer rule (σ's first ones, written to ``order``)."""
    total = 0
    for j in range(n):
        total += wi[j] * ci[j]
    th = ratio_q * total
    _heapify(heap, n, wi)
    a = 0
    for t in range(n):
        j = _pop(heap, n - t, wi)
        order[t] = j
        a += wi[j] * ci[j]
        if (a << frac_bits) > th:
            return t + 1
    return n


@njit(inline="always", cache=True)
def _mark(order, k, row, block, mask, n_sel, union) -> None:
    """Record a row's selection (its first k clusters of σ) in the output arrays."""
    for t in range(k):
        mask[row, order[t]] = True
        union[block, order[t]] = True
    n_sel[row] = k


@njit(cache=True)
def _workspace(width):
    C = 1
    for b in range(width.shape[0]):
        C = max(C, width[b])
    return (np.empty(C, np.int64), np.empty(C, np.int64), np.empty(C, np.float64), np.empty(C, np.float64),
            np.empty(_LEVELS, np.float64))


@njit(cache=True)
def wicsum_blocks(w, off, n_rows, width, crow, counts, row0, ratio, early_exit, frac_bits, mask, n_sel,
                  union) -> None:
    """WiCSum of blocks of rows held back to back in the flat ``w``: block b has ``n_rows[b]`` rows of ``width[b]``
    weights from ``w[off[b]:]`` (row-major), their token counts ``counts[crow[b], :width[b]]`` (int64), and writes
    rows ``row0[b]..`` of ``mask [rows_out, >= width]`` (selected; all False beforehand), ``n_sel [rows_out]``
    (clusters selected) and ``union [n_blocks, >= width]`` (selected by any row of the block; all False beforehand).

    ``frac_bits`` None: float64 ``w`` under the float rule (:func:`_row_float` with ``ratio`` and ``early_exit``);
    an int: int64 quantised ``w`` under the integer rule (:func:`_row_int`, ``ratio`` the quantised ratio with
    ``frac_bits`` fraction bits). Numba compiles the two rules apart (the ``is None`` test is resolved from the
    argument's type at compile time). Per row: exactly ``reference.wicsum_select_ref``.
    """
    order, idx, acc, key, mass = _workspace(width)
    wbits = w.view(np.int64)
    for b in range(width.shape[0]):
        n = width[b]
        if n <= 0:
            continue
        ci = counts[crow[b]]
        for r in range(n_rows[b]):
            start = off[b] + r * n
            if frac_bits is None:
                k = _row_float(w[start:start + n], wbits[start:start + n], ci, n, ratio, early_exit, order, acc, idx,
                               key, mass)
            else:  # idx is the integer rule's heap
                k = _row_int(w[start:start + n], ci, n, ratio, frac_bits, idx, order)
            _mark(order, k, row0[b] + r, b, mask, n_sel, union)


@njit(cache=True)
def scale_center(s, off, n_rows, width, scaling, center) -> None:
    """Step 3 (§IV.C; the weights of ``reference.select_tokens_ref``).

    In place over the blocks of :func:`wicsum_blocks`: ``s · scaling``, then, with ``center``, each row minus
    its maximum -- the reference's ``(q·K^T)·scaling`` and ``s − max s`` (the same float64 operations)."""
    for b in range(width.shape[0]):
        n = width[b]
        for r in range(n_rows[b]):
            start = off[b] + r * n
            m = -np.inf
            for j in range(start, start + n):
                s[j] = s[j] * scaling
                if s[j] > m:
                    m = s[j]
            if center:
                for j in range(start, start + n):
                    s[j] = s[j] - m


# ------------------------------------------------------------------------------------------- positions
@njit(cache=True)
def member_positions(cluster_mask, groups, assign, pos, a, b, in_cand, use_cand, union):
    """Step 5 (the member positions of ``reference.select_tokens_ref``).

    Cache positions of the tokens ``a..b-1`` of the table's order whose cluster is marked: set m reads
    ``cluster_mask[m, assign[groups[m], t]]``; with ``use_cand`` only tokens with ``in_cand[t]``; ``union``: one
    set, the tokens marked in any. Returns (positions of every set back to back, their sizes ``[M]``), each set
    in token order (ascending when the table's positions increase)."""
    M = cluster_mask.shape[0]
    out = np.empty((1 if union else M) * max(b - a, 0) + 1, np.int64)  # +1: the branch-free loop's last write
    sizes = np.zeros(M, np.int64)
    k = 0
    if union:
        for t in range(a, b):
            if use_cand and not in_cand[t]:
                continue
            for m in range(M):
                if cluster_mask[m, assign[groups[m], t]]:
                    out[k] = pos[t]
                    k += 1
                    break
        sizes[0] = k
        return out[:k], sizes
    for m in range(M):
        mm, g, k0 = cluster_mask[m], assign[groups[m]], k
        if use_cand:
            for t in range(a, b):
                out[k] = pos[t]
                k += np.int64(mm[g[t]] & in_cand[t])
        else:
            for t in range(a, b):  # branch-free: write always, advance when marked (~1/3 of tokens, unpredictable)
                out[k] = pos[t]
                k += np.int64(mm[g[t]])
        sizes[m] = k - k0
    return out[:k], sizes
