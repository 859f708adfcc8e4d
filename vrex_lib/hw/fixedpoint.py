"""Fixed-point formats of the DRE and the integer reference rules the MyHDL blocks must reproduce bit for bit.

Formats (paper Fig. 10 memory sizes; the paper gives no widths — these are ours, ``docs/DECISIONS.md D80``):

* hash codes: ``N_hp = 32`` bits, unsigned (bit i = hyperplane i), as :mod:`vrex_lib.resv.hashing` packs them.
* Hamming distance: ``ceil(log2(W + 1))`` bits (6 for W = 32); the "no candidate" sentinel is ``2**bits - 1``.
* WiCSum weights (scores): 16-bit unsigned, ``w_q = round(w * (2**16 - 1))`` for w in [0, 1] (the softmax
  numerators of ``docs/DECISIONS.md D1`` are in (0, 1]); 8 KB score memory = 4096 entries.
* token counts: 16-bit unsigned, saturating at 65535; 8 KB count memory = 4096 entries.
* products ``w·c``: 32 bits; accumulators (Sum, Acc): ``32 + ceil(log2(N_max))`` bits (44 for 4096 entries),
  so they cannot overflow even with every weight and count at its maximum (tested) — no saturation needed
  (``docs/DECISIONS.md D81``).
* ratio ``Th_r-wics``: unsigned Q0.16, ``r_q = round(ratio * 2**16)`` (0.3 -> 19661), 17-bit port (1.0 = 65536);
  ``Th = (Sum * r_q) >> 16`` (floor; equivalent to the software's ``Acc * 2**16 > r_q * Sum``).

Rules (the software ReSV reference, :mod:`vrex_lib.resv.reference`, HCU/WTU — the golden model):

* clustering: a token joins the nearest cluster if ``popcount(code ^ cluster_code) < th`` (strict), ties ->
  lowest cluster index; otherwise it opens a new cluster with its own code, which is a candidate for the
  later tokens of the same frame.
* WiCSum: walk clusters in descending weight, ties -> lower index; select the minimal prefix whose
  cumulative ``Σ w·c`` is ``> Th`` (strict). If no prefix exceeds Th (e.g. Sum = 0), every cluster is selected.
"""
from __future__ import annotations

import numpy as np

from ..resv import reference as _resv_ref
from ..resv.wicsum import quantize_weights, ratio_q

W_BITS = 16
C_BITS = 16
RATIO_FRAC_BITS = 16
W_MAX = (1 << W_BITS) - 1
C_MAX = (1 << C_BITS) - 1


def dist_bits(code_bits: int) -> int:
    """Bits of a Hamming-distance register able to hold 0..code_bits plus the all-ones 'no candidate' sentinel."""
    return int(code_bits + 1).bit_length()


def acc_bits(n_max: int) -> int:
    """Accumulator width for Σ w·c over ``n_max`` entries: never overflows."""
    return W_BITS + C_BITS + max(1, int(n_max - 1).bit_length())


def quantize_ratio(ratio: float) -> int:
    """``Th_r-wics`` as unsigned Q0.16 (0.3 -> 19661), exactly :func:`vrex_lib.resv.ratio_q`."""
    return ratio_q(ratio)


def threshold(total: int, r_q: int) -> int:
    """``Th_wics = floor(Sum * r_q / 2**16)``. For an integer Acc, ``Acc > floor(y)`` <=> ``Acc > y``, so the
    WTU's test ``Acc > Th_wics`` is exactly the software's ``Acc * 2**16 > r_q * Sum``."""
    return (int(total) * int(r_q)) >> RATIO_FRAC_BITS


# The golden models are the software ReSV references: vrex_lib.resv.reference.cluster_ref and
# vrex_lib.resv.reference.wicsum_select_ref (integer weights). These wrappers only adapt the shapes.
def cluster_ref(codes_new: np.ndarray, cluster_codes: np.ndarray, th: int) -> tuple[np.ndarray, np.ndarray]:
    """HCU golden model: ``resv.reference.cluster_ref`` -> (assignment [N], cluster codes after [C'])."""
    a, c = _resv_ref.cluster_ref([int(x) for x in np.ravel(codes_new)], [int(x) for x in np.ravel(cluster_codes)],
                                 int(th))
    return np.asarray(a, dtype=np.int64), np.asarray(c, dtype=np.int64)


def wicsum_select_ref(weights: np.ndarray, counts: np.ndarray, ratio: float) -> np.ndarray:
    """WTU golden model for one row: ``resv.reference.wicsum_select_ref`` on integer weights -> bool [C]."""
    w = np.asarray(weights, dtype=np.int64).reshape(1, -1)
    return _resv_ref.wicsum_select_ref(w, np.asarray(counts, dtype=np.int64), float(ratio))[0]
