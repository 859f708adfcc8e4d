"""Steps 3-4 of ReSV (paper §IV.C, Eq. 1-3, Fig. 9): cluster scores -> weights -> WiCSum selection.

For every row i (one query vector of one head) with weights w_ij >= 0 and token counts TC_j:

    Sum_i   = Σ_j w_ij · TC_j                       (1)
    Th_i    = Th_r-wics · Sum_i                     (2)
    Acc_i(t)= Σ_{k<=t} w_iσ(k) · TC_σ(k)            (3)  σ: descending weight, ties -> lower cluster index

and the selection is σ(0..t*) with t* the *first* t where Acc_i(t) > Th_i (strict). If no t qualifies
(Th_r-wics >= 1, or Sum_i <= 0) every cluster of the row is selected. Sum_i is accumulated in σ order
(= Acc_i(last)); in integer mode the order does not matter, in float mode both paths use it so they agree.

Two arithmetics, the same in :func:`wicsum_select` (torch) and ``reference.wicsum_select_ref`` (loops):
  * float:   float64 accumulation, test ``Acc > ratio · Sum``.
  * integer: see the module docstring of :mod:`vrex_lib.resv` (Q0.16 ratio, ``Acc·2^16 > ratio_q·Sum``).
"""
from __future__ import annotations

import numpy as np
import torch

RATIO_FRAC_BITS = 16  # Th_r-wics is held in Q0.16 by the integer rule


def ratio_q(ratio: float) -> int:
    """Th_r-wics in Q0.16: ``round(ratio · 2^16)`` (0 <= ratio <= 1 -> 0..65536)."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"Th_r-wics ratio {ratio} must lie in [0, 1]")
    return int(round(ratio * (1 << RATIO_FRAC_BITS)))


def quantize_weights(w, bits: int = 16):
    """WiCSum weights in [0, 1] (softmax numerators are in (0, 1]) -> unsigned integers ``round(w · (2^bits − 1))``.

    Rounding is half-to-even (numpy/torch ``round``). Returns int64 of the input's kind (torch or numpy);
    weights outside [0, 1] (e.g. raw scores) raise ValueError.
    """
    scale = float((1 << bits) - 1)
    if isinstance(w, torch.Tensor):
        wd = w.to(torch.float64)
        if wd.numel() and (bool((wd < 0).any()) or bool((wd > 1).any())):
            raise ValueError("quantize_weights: weights must lie in [0, 1] (use score='softmax', not raw scores)")
        return torch.round(wd * scale).to(torch.int64)
    wd = np.asarray(w, dtype=np.float64)
    if wd.size and (wd.min() < 0 or wd.max() > 1):
        raise ValueError("quantize_weights: weights must lie in [0, 1] (use score='softmax', not raw scores)")
    return np.round(wd * scale).astype(np.int64)


def cluster_weights(scores: torch.Tensor, score: str = "softmax") -> torch.Tensor:
    """Scaled scores ``s = q·Key_cluster/√d`` ``[rows, C]`` -> WiCSum weights (docs/DECISIONS.md D1).

    'softmax': softmax numerators exp(s − max_row s) in (0, 1]; 'raw': the scores themselves.
    """
    if score == "softmax":
        if scores.shape[-1] == 0:
            return scores.to(torch.float64)
        s = scores.to(torch.float64)
        return torch.exp(s - s.max(-1, keepdim=True).values)
    if score == "raw":
        return scores.to(torch.float64)
    raise ValueError(f"score={score!r}: use 'softmax' or 'raw' (ReSVConfig.score)")


def descending_order(key: torch.Tensor) -> torch.Tensor:
    """Per row, column indices in descending ``key`` order, ties -> lower index first (exactly a stable sort).

    A stable sort is ~3x slower than NumPy's quicksort on CPU, and ties are rare in real weights, so: quicksort,
    then redo only the rows that contain equal keys with a stable sort.
    """
    if key.device.type != "cpu":
        return torch.sort(key, dim=1, descending=True, stable=True).indices
    k = key.numpy()
    order = np.argsort(-k if k.dtype.kind == "f" else ~k, axis=1)  # ~x = -x-1: exact descending for int64
    vals = np.take_along_axis(k, order, 1)
    low = -np.inf if k.dtype.kind == "f" else np.iinfo(np.int64).min  # padding (see ``valid``): order irrelevant
    tied = ((vals[:, 1:] == vals[:, :-1]) & (vals[:, 1:] != low)).any(1)
    if tied.any():
        order[tied] = np.argsort(-k[tied] if k.dtype.kind == "f" else ~k[tied], axis=1, kind="stable")
    return torch.from_numpy(order)


def wicsum_select(weights: torch.Tensor, counts: torch.Tensor, ratio: float, quant_bits: int | None = None,
                  return_prefix: bool = False, valid: torch.Tensor | None = None):
    """WiCSum selection: ``weights [rows, C]``, ``counts [C]`` (or ``[rows, C]``) -> bool ``[rows, C]``.

    Integer ``weights`` use the integer rule; float weights the float rule, or, with ``quant_bits``, are first
    quantised by :func:`quantize_weights` (exactly the hardware's arithmetic). With ``return_prefix`` also
    returns the number of clusters selected per row ``[rows]``. ``valid [rows, C]`` marks padding columns
    (False) of a batch of rows with different cluster counts: they sort last, add nothing, are never selected,
    so each row's result equals that of the row without padding.
    """
    if weights.dim() != 2:
        raise ValueError(f"weights must be [rows, C], got {tuple(weights.shape)}")
    rows, C = weights.shape
    if valid is not None:
        valid = valid.expand(rows, C)
        weights = weights.masked_fill(~valid, 0)
    if quant_bits is not None:
        weights = quantize_weights(weights, quant_bits)
    integer = not weights.is_floating_point()
    counts = torch.as_tensor(counts, device=weights.device)
    if C == 0:
        out = torch.zeros(rows, 0, dtype=torch.bool, device=weights.device)
        return (out, torch.zeros(rows, dtype=torch.int64)) if return_prefix else out
    acc_t = torch.int64 if integer else torch.float64
    w = weights.to(acc_t)
    key = w
    if valid is not None:  # padding sorts after every real cluster (real ones may be 0 or negative)
        low = torch.iinfo(torch.int64).min if integer else float("-inf")
        key = w.masked_fill(~valid, low)
    order = descending_order(key)  # ties keep the lower index first
    wc = w * counts.to(acc_t).expand(rows, C)
    if valid is not None:
        wc = wc.masked_fill(~valid, 0)
    acc = torch.cumsum(torch.gather(wc, 1, order), 1)
    total = acc[:, -1:]
    if integer:
        exceed = acc * (1 << RATIO_FRAC_BITS) > ratio_q(ratio) * total
    else:
        exceed = acc > float(ratio) * total
    n_sel = torch.where(exceed.any(1), exceed.to(torch.int8).argmax(1) + 1, torch.full_like(total[:, 0], C)).long()
    in_prefix = torch.arange(C, device=weights.device)[None, :] < n_sel[:, None]
    out = torch.zeros(rows, C, dtype=torch.bool, device=weights.device).scatter_(1, order, in_prefix)
    if valid is not None:
        out &= valid
        n_sel = out.sum(1)
    return (out, n_sel) if return_prefix else out


_WALK_STEPS = 6  # σ positions taken one by one before any sort (most rows of real keys exit by then)
_PARTIAL_MIN_CLUSTERS = 128  # below this a whole-row sort is as cheap (measured on the 2-core machine)
_LEVELS_MIN_ENTRIES = 8192  # rows x clusters left after the walk from which the levels beat a whole-row sort
_LEVELS = (4, 6, 8, 12)  # S = {w >= max_w · 2^-l} for these l in turn (docs/DECISIONS.md D361); then the whole row


def wicsum_rows(w: np.ndarray, counts: np.ndarray, ratio: float, valid: np.ndarray,
                n_valid: np.ndarray, nonneg: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """WiCSum on host arrays, all rows at once: ``w [rows, C]`` (float64 weights, or int64 quantised weights),
    ``counts [rows, C]`` int64, ``valid [rows, C]`` (False = padding: weight and count 0), ``n_valid [rows]``.

    Returns (selected bool ``[rows, C]``, clusters selected per row ``[rows]``), exactly those of
    :func:`wicsum_select` and ``reference.wicsum_select_ref``: σ = descending weight, ties -> lower index,
    Acc and Sum accumulated in σ order, first t with Acc(t) > Th (docs/DECISIONS.md D51 and D361 for how the
    sort is limited to the top of each row without changing any result). ``nonneg``: the caller knows every
    weight is >= 0 (softmax numerators); None = check.
    """
    integer = w.dtype.kind in "iu"
    wc = w * counts
    if integer:
        key, pad_key = ~w, np.iinfo(np.int64).max  # ~x = -x-1: ascending key = descending weight, exactly
    else:
        key, pad_key = -w, np.inf
    if not valid.all():
        key = np.where(valid, key, pad_key)  # padding sorts after every real cluster
    return wicsum_sorted_rows(w, wc, key, pad_key, ratio, n_valid, nonneg)


def wicsum_sorted_rows(w: np.ndarray, wc: np.ndarray, key: np.ndarray, pad_key, ratio: float,
                       n_valid: np.ndarray, nonneg: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`wicsum_rows` given ``wc = w·TC [rows, C]`` and the sort ``key [rows, C]`` (ascending = σ: −w for
    float weights, ~w for integer ones) holding ``pad_key`` (+inf / int64 max) exactly at the padding, whose
    ``wc`` is 0. The runtime's selection builds these for all heads at once (:mod:`vrex_lib.resv.select`).

    Rows are resolved in stages, each exact for the rows it accepts (docs/DECISIONS.md D361): the first
    ``_WALK_STEPS`` clusters of σ one by one (most rows stop there), then -- with many clusters -- the top
    levels of the weight, then the whole-row rule for the rest.
    """
    rows, C = key.shape
    integer = key.dtype.kind in "iu"
    if nonneg is None:
        nonneg = bool((w >= 0).all())
    if not (ratio < 1.0 and nonneg and rows and C):
        return _wicsum_full(key, wc, ratio, pad_key, n_valid, integer)
    mask = np.zeros((rows, C), bool)
    n_sel = np.zeros(rows, np.int64)
    total = wc.sum(1)
    if integer:
        lo = hi = ratio_q(ratio) * total  # compared with Acc·2^16: exact
    else:
        lo, hi = _float_bounds(total, ratio, C)
    todo = np.flatnonzero(~_wicsum_walk(key, wc, lo, hi, pad_key, n_valid, integer, mask, n_sel))
    if todo.size and C >= _PARTIAL_MIN_CLUSTERS and todo.size * C >= _LEVELS_MIN_ENTRIES:
        todo = todo[~_wicsum_levels(key[todo], wc[todo], lo[todo], hi[todo], integer, mask, n_sel, todo)]
    if todo.size:
        mask[todo], n_sel[todo] = _wicsum_full(key[todo], wc[todo], ratio, pad_key, n_valid[todo], integer)
    return mask, n_sel


def _first_certain_exceed(acc: np.ndarray, lo: np.ndarray, hi: np.ndarray, integer: bool):
    """Prefix sums ``acc [rows, K]`` (the reference's Acc(0..K-1)) against Th in [lo, hi] -> (t, ok): the first
    t with Acc(t) > Th, where ``ok`` says it is certain (Acc(t) > hi and no earlier Acc above lo)."""
    if integer:
        ex = acc * (1 << RATIO_FRAC_BITS) > hi[:, None]
        t = ex.argmax(1)
        return t, ex[np.arange(acc.shape[0]), t]
    ex_hi = acc > hi[:, None]
    t = ex_hi.argmax(1)
    return t, ex_hi[np.arange(acc.shape[0]), t] & ((acc > lo[:, None]).argmax(1) == t)


def _wicsum_walk(key, wc, lo, hi, pad_key, n_valid, integer, mask, n_sel) -> np.ndarray:
    """The WTU's early exit in software: σ(0), σ(1), ... by repeated argmin (first minimum = lower index on
    ties, exactly the stable order), ``_WALK_STEPS`` of them; Acc over them is the reference's. Writes the rows
    whose exit is certain within those steps and within the row's ``n_valid`` real clusters (a row walked past
    them picks a taken column again); returns bool [rows] done."""
    rows, C = key.shape
    steps = min(_WALK_STEPS, C)
    off = np.arange(rows) * C
    k = key.copy()
    kf = k.ravel()
    picked = np.empty((rows, steps), np.int64)
    for t in range(steps):
        j = k.argmin(1)
        picked[:, t] = j
        if t + 1 < steps:
            kf[off + j] = pad_key
    flat = picked + off[:, None]
    acc = _cumsum_rows(np.ascontiguousarray(wc).ravel()[flat])
    t, ok = _first_certain_exceed(acc, lo, hi, integer)
    ok &= t < n_valid
    n_sel[ok] = t[ok] + 1
    mask.ravel()[flat[np.arange(steps)[None, :] < np.where(ok, t + 1, 0)[:, None]]] = True
    return ok


def _take(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``np.take_along_axis(a, idx, 1)`` for 2-D arrays, without its per-call index bookkeeping."""
    return a[np.arange(a.shape[0])[:, None], idx]


def sigma_order(key: np.ndarray, pad_key=None) -> np.ndarray:
    """Per row, the column order of ascending ``key`` with ties -> lower index first: exactly a stable sort.

    NumPy's SIMD quicksort is several times faster than its stable sort and ties are rare in real weights, so:
    quicksort, then redo with a stable sort only the rows where equal keys meet (``pad_key`` entries, the
    padding, may meet in any order: they sort last and are never selected)."""
    order = np.argsort(key, axis=1)
    if key.shape[1] < 2:
        return order
    vals = _take(key, order)
    tied = vals[:, 1:] == vals[:, :-1]
    if pad_key is not None:
        tied &= vals[:, 1:] != pad_key
    tied = tied.any(1)
    if tied.any():
        order[tied] = np.argsort(key[tied], axis=1, kind="stable")
    return order


def _exceed(acc: np.ndarray, ratio: float, total: np.ndarray, integer: bool) -> np.ndarray:
    """The exit test ``Acc(t) > Th_r-wics·Sum`` of every prefix (``total [rows, 1]``)."""
    if integer:
        return acc * (1 << RATIO_FRAC_BITS) > ratio_q(ratio) * total
    return acc > float(ratio) * total


def _cumsum_rows(a: np.ndarray) -> np.ndarray:
    """Prefix sums along each row of ``a [rows, K]``, added in order (``torch.cumsum``'s CPU kernel is the same
    sequential sum as ``np.cumsum``, ~4x faster on short rows)."""
    return torch.cumsum(torch.from_numpy(np.ascontiguousarray(a)), 1).numpy()


def _wicsum_full(key, wc, ratio, pad_key, n_valid, integer):
    """The whole-row rule: every row in σ order (the reference's), cumulative sums, first exceed."""
    rows, C = key.shape
    if C >= _PARTIAL_MIN_CLUSTERS:
        order = sigma_order(key, pad_key)
    else:  # on short rows NumPy's stable sort is the faster one
        order = np.argsort(key, axis=1, kind="stable")
    flat = order + (np.arange(rows) * C)[:, None]  # into the row-major ravel
    acc = _cumsum_rows(np.ascontiguousarray(wc).ravel()[flat])
    exceed = _exceed(acc, ratio, acc[:, -1:], integer)  # padding adds exact zeros: acc[-1] is Sum in σ order
    first = exceed.argmax(1)
    n_sel = np.where(exceed[np.arange(rows), first], first + 1, n_valid)
    mask = np.zeros(rows * C, bool)
    mask[flat[np.arange(C)[None, :] < n_sel[:, None]]] = True
    return mask.reshape(rows, C), n_sel


def _float_bounds(total: np.ndarray, ratio: float, C: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounds [lo, hi] on the reference's Th = Th_r-wics·Sum when Sum is added in σ order and ``total`` pairwise
    (weights >= 0): they differ by at most (C+2)·2^-51·Σ w·TC, ~4x the recursive-summation error bound."""
    err = (C + 2) * 2.0 ** -51 * total
    margin = ratio * err * (1 + 2.0 ** -50) + 2.0 ** -51 * ratio * (total + err) + 1e-300
    return ratio * total - margin, ratio * total + margin


def _wicsum_levels(key, wc, lo, hi, integer, mask, n_sel, rows_out) -> np.ndarray:
    """Rows ``rows_out`` whose WiCSum prefix lies in the top of the row; returns bool [rows] done (docs D361).

    For l in ``_LEVELS``: S = the clusters with weight >= (the row's largest) · 2^-l, i.e. key <= a per-row
    threshold. S is closed under ties, so it is exactly σ(0..|S|-1); :func:`_resolve_top` sorts only S and
    accepts a row when the first exceed lies inside S and is certain. Rows not accepted try the next, larger S,
    and after the last level go to the whole-row rule (the caller).
    """
    w_max = ~key.min(1) if integer else -key.min(1)
    done = np.zeros(key.shape[0], bool)
    todo = np.arange(key.shape[0])
    for level in _LEVELS:
        kt = ~(w_max[todo] >> level) if integer else -(w_max[todo] * 2.0 ** -level)
        done[todo] = _resolve_top(key[todo], wc[todo], kt, lo[todo], hi[todo], integer, mask, n_sel,
                                  rows_out[todo])
        todo = todo[~done[todo]]
        if not todo.size:
            break
    return done


def _segment_order(k: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Order of flat entries (given row-major: ``row`` ascending, columns ascending within a row) by (row,
    ascending ``k``, column): σ within each row. SIMD quicksort on ``k``, then a stable radix sort on the row;
    if equal keys meet inside a row (their order from the quicksort is arbitrary), a stable lexsort instead."""
    if row.size and int(row[-1]) >= 1 << 15:
        return np.lexsort((k, row))
    o = np.argsort(k)
    o = o[np.argsort(row[o].astype(np.int16), kind="stable")]
    ks, rs = k[o], row[o]
    if bool(((ks[1:] == ks[:-1]) & (rs[1:] == rs[:-1])).any()):
        return np.lexsort((k, row))
    return o


def _resolve_top(key, wc, tau, lo, hi, integer, mask, n_sel, rows_out) -> np.ndarray:
    """Rows ``rows_out`` of the batch restricted to S = {key <= tau}: σ-sort S, find the first exceed, write the
    accepted rows' selection into ``mask`` / ``n_sel``. Returns bool [len(rows_out)] accepted."""
    rows, C = key.shape
    flat = np.flatnonzero(key <= tau[:, None])  # row-major: columns ascending within a row
    rr = flat // C
    o = _segment_order(key.ravel()[flat], rr)
    flat, rr = flat[o], rr[o]  # σ order within each row
    k = np.bincount(rr, minlength=rows)
    slot = np.arange(flat.size) - (np.cumsum(k) - k)[rr]  # σ position within the row
    wk = np.zeros((rows, int(k.max())), wc.dtype)
    wk[rr, slot] = np.ascontiguousarray(wc).ravel()[flat]
    t, ok = _first_certain_exceed(_cumsum_rows(wk), lo, hi, integer)
    pick = ok[rr] & (slot <= t[rr])
    mask[rows_out[rr[pick]], flat[pick] - rr[pick] * C] = True
    n_sel[rows_out[ok]] = t[ok] + 1
    return ok
