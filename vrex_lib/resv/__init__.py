"""ReSV (paper §IV): hash-bit key clustering + WiCSum thresholding -- the one definition used by the runtime
policy, the MyHDL DRE model (bit-exact check) and the performance simulator.

Fast path (this package: host arrays and compiled Numba kernels for the runtime's per-layer steps,
:mod:`vrex_lib.resv.kernels`; torch for the standalone ``hash_bits`` / ``hamming`` / ``wicsum_select``;
docs/DECISIONS.md D50, D51, D369) and a plain loop/NumPy
reference (:mod:`vrex_lib.resv.reference`, functions suffixed ``_ref``) with identical semantics; tests check
they agree exactly (assignments, codes, counts, bit-exact running means, selected tokens).

    H = make_hyperplanes(n_hp, dim, seed)               # [n_hp, dim], N(0,1)
    codes = hash_bits(keys, H)                          # int64 [...]; bit i (2**i) set iff key·H[i] > 0
    hamming(a, b)                                       # popcount(a ^ b), broadcasting
    table = HashClusterTable(Hkv, D, cfg, layer)        # one per layer; per KV head groups inside
    table.add_frame(keys[Hkv, N, D], positions[N])      # -> cluster index per new token [Hkv, N]
    wicsum_select(weights[rows, C], counts[C], ratio)   # -> bool [rows, C]
    select_tokens(query[Hq, Nq, D], table, ratio, cfg)  # -> Selection (per-KV-head positions + stats)

Defaults (paper §VI.E and docs/DECISIONS.md D1-D4) live in :class:`vrex_lib.config.ReSVConfig`: N_hp=32, Th_hp=7
(strict <), Th_r-wics=0.3, softmax-numerator weights of q·Key_cluster/√d, per-layer × per-KV-head
selection, per-KV-head hashing, nearest-cluster join with the founder's code, running-mean Key_cluster.

FOR THE HARDWARE (DRE) MODEL -- the exact rules the MyHDL HCU/WTU must implement
--------------------------------------------------------------------------------
HCU (``reference.cluster_ref(codes_new, cluster_codes, th)``):
  for each new code in arrival order: d_j = popcount(code XOR cluster_code_j) over all clusters, including
  those opened earlier in this frame; if min_j d_j < th (strict) join argmin (ties -> lowest j), else append
  a new cluster whose code is the token's code. Cluster codes never change (founder rule).
WTU (``reference.wicsum_select_ref(weights, counts, ratio)`` with integer weights):
  * weights are quantised ``q = round(w · (2^16 − 1))`` (``quantize_weights``, w in [0, 1], half-to-even);
  * the ratio is Q0.16: ``ratio_q = round(Th_r-wics · 2^16)`` (0.3 -> 19661);
  * Sum = Σ_j q_j · TC_j (exact integer); walk clusters in descending q, ties -> lower cluster index;
    Acc(t) = running Σ q·TC; stop at the FIRST t with ``Acc(t) · 2^16 > ratio_q · Sum`` (strict) and select
    clusters σ(0..t); if no t qualifies (Sum == 0 or ratio_q >= 2^16) select every cluster.
  No division or floor is needed: both sides are exact integers (Acc·2^16 < 2^63 for Sum < 2^47).
  ``wicsum_select(..., quant_bits=16)`` / ``select_tokens(..., quant_bits=16)`` run the software with exactly
  this arithmetic.
"""
from .hashing import hamming, hash_bits, layer_seed, make_hyperplanes, pack_bits, popcount, projection_signs
from .reference import (HashClusterTableRef, cluster_ref, hamming_ref, hash_bits_ref, select_tokens_ref,
                        wicsum_select_ref)
from .select import select_tokens
from .table import HashClusterTable
from .wicsum import RATIO_FRAC_BITS, cluster_weights, quantize_weights, ratio_q, wicsum_select

__all__ = ["HashClusterTable", "HashClusterTableRef", "RATIO_FRAC_BITS", "cluster_ref",
           "cluster_weights", "hamming", "hamming_ref", "hash_bits", "hash_bits_ref", "layer_seed",
           "make_hyperplanes", "pack_bits", "popcount", "projection_signs", "quantize_weights", "ratio_q",
           "select_tokens", "select_tokens_ref", "wicsum_select", "wicsum_select_ref"]
