"""ReSV (paper §IV): hash-bit key clustering + WiCSum thresholding -- the one definition used by the runtime
policy, the MyHDL DRE model (bit-exact check) and the performance simulator.

Reading order:

1. :mod:`~vrex_lib.resv.reference` -- the paper's algorithm in plain loops, one function per step, each naming its
   section and equation (§IV.B hash bits and Hamming clustering; §IV.C weights and WiCSum, Eq. 1–3), and the exact
   rules the DRE hardware implements. Start here.
2. The fast path the runtime runs, step for step the same (tests compare them exactly): :mod:`.hashing` (Step 1),
   :mod:`.table` (Step 2, the HC table), :mod:`.select` (Steps 3–5 of one layer), :mod:`.wicsum` (Step 4's
   arithmetic), :mod:`.kernels` (their loops compiled with Numba, D369), :mod:`.threads` (one-thread sections).
3. The runtime's policy: :mod:`vrex_lib.retrieval.resv_policy` (Step 2 per frame, Steps 3–5 per step).
4. Beyond the algorithm: :mod:`.analysis` (Fig. 7(b), HC-table statistics), :mod:`.mechanism` (why a passkey is
   missed, D261), :mod:`.rescore` (clusters as a shortlist, D262), :mod:`.warm` (compiling the kernels).

Defaults (paper §VI.E, docs/DECISIONS.md D1-D4) live in :class:`vrex_lib.config.ReSVConfig`: N_hp=32, Th_hp=7
(strict <), Th_r-wics=0.3, softmax-numerator weights of q·Key_cluster/√d, per-layer × per-KV-head selection,
per-KV-head hashing, nearest-cluster join with the founder's code, running-mean Key_cluster.
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
