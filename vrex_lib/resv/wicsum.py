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
  * integer: see the module docstring of :mod:`vrex_lib.resv.reference` (Q0.16 ratio, ``Acc·2^16 > ratio_q·Sum``).
"""
from __future__ import annotations

import numpy as np
import torch

from . import kernels

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
    """Step 4 (§IV.C, Eq. 1-3; ``reference.wicsum_select_ref``), in torch.

    WiCSum selection: ``weights [rows, C]``, ``counts [C]`` (or ``[rows, C]``) -> bool ``[rows, C]``.

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


def wicsum_rows(w: np.ndarray, counts: np.ndarray, ratio: float, n_valid: np.ndarray | None = None,
                early_exit: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Step 4 (§IV.C, Eq. 1-3; ``reference.wicsum_select_ref``), compiled.

    WiCSum on host arrays, all rows at once, compiled (:mod:`vrex_lib.resv.kernels`): ``w [rows, C]`` (float64
    weights, or int64 quantised weights: the integer rule), ``counts [C]`` or ``[rows, C]``, ``n_valid [rows]``
    (the row's real clusters are its first n_valid columns; the rest is padding and is never read; default C).

    Returns (selected bool ``[rows, C]``, clusters selected per row ``[rows]``), exactly those of
    :func:`wicsum_select` and ``reference.wicsum_select_ref``: σ = descending weight, ties -> lower index, Acc and
    Sum accumulated in σ order, first t with Acc(t) > Th. ``early_exit`` picks the float rule's stages (1: all,
    2: without the σ(0) shortcut, 0: the whole of σ in every row, the reference's procedure; see
    :func:`vrex_lib.resv.kernels._row_float`); the tests compare them.
    """
    if early_exit not in (0, 1, 2):
        raise ValueError(f"wicsum_rows: early_exit must be 0, 1 or 2 (the float rule's stages), got {early_exit!r}")
    w = np.asarray(w)
    rows, C = w.shape
    integer = w.dtype.kind in "iu"
    flat = np.ascontiguousarray(w, np.int64 if integer else np.float64).reshape(-1)
    counts = np.broadcast_to(np.asarray(counts, np.int64), (rows, C)).copy()  # writable C order: one compiled kernel
    n_valid = np.full(rows, C, np.int64) if n_valid is None else np.asarray(n_valid, np.int64).reshape(rows)
    if n_valid.size and (int(n_valid.min()) < 0 or int(n_valid.max()) > C):
        raise ValueError(f"wicsum_rows: n_valid must lie in [0, {C}] (the row's real clusters)")
    mask, n_sel = np.zeros((rows, C), bool), np.zeros(rows, np.int64)
    r = np.arange(rows, dtype=np.int64)
    blocks = (flat, r * C, np.ones(rows, np.int64), n_valid, r, counts, r)  # one block per row
    union = np.zeros((rows, C), bool)  # one block per row: its union is the row itself
    rule = (ratio_q(ratio), RATIO_FRAC_BITS) if integer else (float(ratio), None)
    kernels.wicsum_blocks(*blocks, rule[0], int(early_exit), rule[1], mask, n_sel, union)
    return mask, n_sel
