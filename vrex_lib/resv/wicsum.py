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


_NB = 256  # histogram buckets of the pre-selection in :func:`wicsum_rows`
_TOP_MIN_CLUSTERS = 64  # below this a whole-row sort is as cheap (measured on the 2-core machine)


def wicsum_rows(w: np.ndarray, counts: np.ndarray, ratio: float, valid: np.ndarray,
                n_valid: np.ndarray, nonneg: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """WiCSum on host arrays, all rows at once: ``w [rows, C]`` (float64 weights, or int64 quantised weights),
    ``counts [rows, C]`` int64, ``valid [rows, C]`` (False = padding: weight and count 0), ``n_valid [rows]``.

    Returns (selected bool ``[rows, C]``, clusters selected per row ``[rows]``), exactly those of
    :func:`wicsum_select` and ``reference.wicsum_select_ref``: σ = descending weight, ties -> lower index,
    Acc and Sum accumulated in σ order, first t with Acc(t) > Th (docs/DECISIONS.md D51 for how the sort is
    limited to the top of each row without changing any result). ``nonneg``: the caller knows every weight is
    >= 0 (softmax numerators); None = check.
    """
    rows, C = w.shape
    integer = w.dtype.kind in "iu"
    wc = w * counts
    mask = np.zeros((rows, C), bool)
    n_sel = np.zeros(rows, np.int64)
    todo = np.arange(rows)
    if nonneg is None:
        nonneg = bool((w >= 0).all())
    if C > _TOP_MIN_CLUSTERS and ratio < 1.0 and nonneg:
        done = _wicsum_top(w, wc, ratio, valid, integer, mask, n_sel)
        todo = todo[~done]
    if todo.size:
        m, n = _wicsum_full(w[todo], wc[todo], ratio, valid[todo], n_valid[todo], integer)
        mask[todo], n_sel[todo] = m, n
    return mask, n_sel


def _wicsum_full(w, wc, ratio, valid, n_valid, integer):
    """The whole-row rule: a stable sort of every row (the reference's order), cumulative sums, first exceed."""
    rows, C = w.shape
    if integer:
        neg = ~np.where(valid, w, np.iinfo(np.int64).min)  # ~x = -x-1: exact descending, padding last
    else:
        neg = -np.where(valid, w, -np.inf)
    order = np.argsort(neg, axis=1, kind="stable")
    acc = np.cumsum(np.take_along_axis(wc, order, 1), 1)
    total = acc[:, -1:]
    if integer:
        exceed = acc * (1 << RATIO_FRAC_BITS) > ratio_q(ratio) * total
    else:
        exceed = acc > float(ratio) * total
    first = exceed.argmax(1)
    n_sel = np.where(exceed[np.arange(rows), first], first + 1, n_valid)
    mask = np.zeros((rows, C), bool)
    np.put_along_axis(mask, order, np.arange(C)[None, :] < n_sel[:, None], 1)
    return mask, n_sel


def _wicsum_top(w, wc, ratio, valid, integer, mask, n_sel) -> np.ndarray:
    """Resolve the rows whose WiCSum prefix is decided by the top of the row alone; returns bool [rows] done.

    1. Monotone buckets of the weight (256, finest at the top): larger weight -> lower bucket, equal weights ->
       the same bucket. Per row the mass Σ w·TC per bucket (``np.bincount``) gives the first bucket J whose
       cumulative mass passes the threshold: σ(0..t*) lies in buckets <= J (every weight there is >= every
       weight outside, and ties never straddle the cut).
    2. Only those entries are stably sorted (descending weight, ties -> lower index): they are exactly
       σ(0..|S|-1), so their cumulative sums are the reference's Acc(t), added in the same order.
    3. Integer weights: Sum is exact in any order, so the first exceed is exact. Float weights: Sum in σ order
       is not computed; the pairwise sum differs from it by at most (C+2)·2^-51·Σ|w·TC| (a bound ~4x the
       recursive-summation error), so a row is accepted only if the first Acc above the upper bound of
       Th_r-wics·Sum is also the first above its lower bound; any other row (Acc within ~1e-13 relative of the
       threshold, e.g. the exact dyadic sums of the tests) goes to the whole-row rule.
    """
    rows, C = w.shape
    if integer:  # 16-bit quantised weights (larger ones share the top bucket)
        b = (65535 - np.clip(w, 0, 65535)) >> 8
    else:
        bits = w.view(np.int64) >> 49  # 11 exponent + 3 mantissa bits: monotone in w >= 0
        b = bits.max(1, keepdims=True) - bits
        np.minimum(b, _NB - 1, out=b)
    all_valid = bool(valid.all())
    if not all_valid:
        b[~valid] = _NB - 1
    offset = np.arange(rows) * _NB
    b += offset[:, None]  # row-major bucket ids for one bincount over all rows
    hist = np.bincount(b.ravel(), weights=wc.ravel().astype(np.float64, copy=False),
                       minlength=rows * _NB).reshape(rows, _NB)
    if integer:
        total = wc.sum(1)
        thr_i = ratio_q(ratio) * total
        cum = np.cumsum(hist, 1)
        J = (cum * float(1 << RATIO_FRAC_BITS) > thr_i[:, None] * (1 + 1e-12)).argmax(1)
    else:
        total = wc.sum(1)
        err = (C + 2) * 2.0 ** -51 * total
        margin = ratio * err * (1 + 2.0 ** -50) + 2.0 ** -51 * ratio * (total + err) + 1e-300
        hi, lo = ratio * total + margin, ratio * total - margin
        cum = np.cumsum(hist, 1)
        J = (cum > hi[:, None] * (1 + 1e-9)).argmax(1)
    in_s = b <= (J + offset)[:, None]
    if not all_valid:
        in_s &= valid
    rr, cc = np.nonzero(in_s)  # row-major: columns ascending within a row
    k = np.bincount(rr, minlength=rows)
    K = int(k.max()) if rows else 0
    if K == 0:
        return np.zeros(rows, bool)
    slot = np.arange(rr.shape[0]) - (np.cumsum(k) - k)[rr]  # position of each entry within its row
    cols = np.zeros((rows, K), np.int64)
    cols[rr, slot] = cc
    key = np.full((rows, K), np.inf)
    key[rr, slot] = -w[rr, cc]  # exact negation; padding sorts last
    order = np.argsort(key, axis=1, kind="stable")
    sig = np.take_along_axis(cols, order, 1)  # σ(0..K-1) per row (garbage beyond k)
    filled = np.arange(K)[None, :] < k[:, None]
    acc = np.cumsum(np.where(filled, np.take_along_axis(wc, sig, 1), 0), 1)
    if integer:
        ex = acc * (1 << RATIO_FRAC_BITS) > thr_i[:, None]
        t = ex.argmax(1)
        done = ex[np.arange(rows), t]
    else:
        ex_hi, ex_lo = acc > hi[:, None], acc > lo[:, None]
        t = ex_hi.argmax(1)
        done = ex_hi[np.arange(rows), t] & (ex_lo.argmax(1) == t)
    n = t + 1
    pick = (np.arange(K)[None, :] < n[:, None]) & done[:, None]
    r2 = np.nonzero(pick)
    mask[r2[0], sig[r2]] = True
    n_sel[done] = n[done]
    return done
