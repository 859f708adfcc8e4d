"""ReSV as the paper states it (§IV.B–C, Fig. 8–9, Eq. 1–3): the specification to read first.

Plain Python loops and NumPy, written to be obviously correct, one function per step:

    Step 1  hash bits (§IV.B, Fig. 8)                  hash_bits_ref: bit i of a key's code = [key·H_i > 0]
    Step 2  Hamming clustering, the HC table (§IV.B)   cluster_ref (one frame), HashClusterTableRef (a layer)
    Step 3  cluster scores and weights (§IV.C)         select_tokens_ref: Score = q·Key_cluster^T/√d,
                                                       w = exp(Score − max Score) (softmax numerators, D1)
    Step 4  WiCSum (§IV.C, Eq. 1–3, Fig. 9)            wicsum_select_ref: Sum (Eq. 1), Th (Eq. 2), Acc (Eq. 3)
    Step 5  selected clusters -> token positions       select_tokens_ref (union over a KV head's rows, D2)

The fast path the runtime runs computes exactly the same (``tests/test_resv.py``, ``tests/test_resv_fastpath.py``
compare assignments, codes, counts, bit-exact running means and selected tokens); each of its functions names its
step: Step 1 ``table.HashClusterTable._hash`` with ``kernels.pack_codes``; Step 2 ``kernels.cluster_founder``
(``table.HashClusterTable.add_frame``); Step 3 ``select._weights`` with ``kernels.scale_center``; Step 4
``kernels.wicsum_blocks``, float or integer rule (``select._wicsum_heads``; ``wicsum.wicsum_rows`` for a
plain weight matrix); Step 5 ``kernels.member_positions`` (``select._positions``). ``select.select_tokens`` runs
Steps 3-5 for one layer; ``retrieval/resv_policy.py`` calls Step 2 per frame and Steps 3-5 per step.

It is also the golden model of the MyHDL DRE (``vrex_lib/hw``): the exact rules the HCU and WTU implement.

HCU (Step 2, ``cluster_ref(codes_new, cluster_codes, th)``):
  for each new code in arrival order: d_j = popcount(code XOR cluster_code_j) over all clusters, including
  those opened earlier in this frame; if min_j d_j < th (strict) join argmin (ties -> lowest j), else append
  a new cluster whose code is the token's code. Cluster codes never change (founder rule, D4).
WTU (Step 4, ``wicsum_select_ref(weights, counts, ratio)`` with integer weights):
  * weights are quantised ``q = round(w · (2^16 − 1))`` (``wicsum.quantize_weights``, w in [0, 1], half-to-even);
  * the ratio is Q0.16: ``ratio_q = round(Th_r-wics · 2^16)`` (0.3 -> 19661);
  * Sum = Σ_j q_j · TC_j (exact integer); walk clusters in descending q, ties -> lower cluster index;
    Acc(t) = running Σ q·TC; stop at the FIRST t with ``Acc(t) · 2^16 > ratio_q · Sum`` (strict) and select
    clusters σ(0..t); if no t qualifies (Sum == 0 or ratio_q >= 2^16) select every cluster.
  No division or floor is needed: both sides are exact integers (Acc·2^16 < 2^63 for Sum < 2^47).
  ``wicsum_select(..., quant_bits=16)`` / ``select_tokens(..., quant_bits=16)`` run the software with exactly
  this arithmetic.
"""
from __future__ import annotations

import math

import numpy as np

from ..config import ReSVConfig
from .hashing import layer_seed, make_hyperplanes
from .wicsum import RATIO_FRAC_BITS, quantize_weights, ratio_q

MASK64 = (1 << 64) - 1


# ------------------------------------------------------------------ Step 1: hash bits (§IV.B, Fig. 8)
def hash_bits_ref(keys: np.ndarray, hyperplanes: np.ndarray) -> list[int]:
    """Step 1. Codes of ``keys [N, D]``: bit i set iff the float64 dot product with hyperplane i is > 0.

    Returned as Python ints in int64 two's-complement range (bit 63 -> negative), like the fast path.
    """
    keys = np.asarray(keys, dtype=np.float64).reshape(-1, np.shape(hyperplanes)[1])
    hp = np.asarray(hyperplanes, dtype=np.float64)
    out = []
    for k in keys:
        code = 0
        for i, h in enumerate(hp):
            if float(np.dot(k, h)) > 0:
                code |= 1 << i
        out.append(code - (1 << 64) if code >= 1 << 63 else code)
    return out


def hamming_ref(a: int, b: int) -> int:
    """popcount(a XOR b) over 64 bits."""
    return bin((int(a) ^ int(b)) & MASK64).count("1")


# ------------------------------------------------------------------ Step 2: Hamming clustering (§IV.B)
def nearest_cluster_ref(code: int, cluster_codes: list[int], th: int) -> int | None:
    """Index of the nearest cluster with distance < th (lowest index on ties), or None."""
    best, best_d = None, None
    for j, c in enumerate(cluster_codes):
        d = hamming_ref(code, c)
        if d < th and (best_d is None or d < best_d):
            best, best_d = j, d
    return best


def cluster_ref(codes_new: list[int], cluster_codes: list[int], th: int) -> tuple[list[int], list[int]]:
    """Step 2 for one frame: its codes against the existing cluster codes (founder's-code rule, D4).

    Tokens in order: nearest cluster if Hamming < th (strict), ties -> lowest index; else a new cluster
    with the token's code, which later tokens of the same frame can join.
    Returns (assignment per new token, cluster codes after the frame).
    """
    codes = list(cluster_codes)
    assignment = []
    for code in codes_new:
        j = nearest_cluster_ref(code, codes, th)
        if j is None:
            codes.append(int(code))
            j = len(codes) - 1
        assignment.append(j)
    return assignment, codes


class HashClusterTableRef:
    """Step 2 for a layer, the HC table: per cluster its code, ``Key_cluster`` (running mean of the members' keys),
    token count TC and member positions. Loop version of :class:`vrex_lib.resv.HashClusterTable` (same
    constructor, same state, lists)."""

    def __init__(self, n_kv_heads: int, head_dim: int, cfg: ReSVConfig | None = None, layer: int = 0,
                 hyperplanes=None):
        self.cfg = cfg or ReSVConfig()
        self.n_kv_heads, self.head_dim = n_kv_heads, head_dim
        self.concat = self.cfg.hash_mode == "concat"
        self.n_groups = 1 if self.concat else n_kv_heads
        self.group_dim = n_kv_heads * head_dim if self.concat else head_dim
        if hyperplanes is None:
            hyperplanes = make_hyperplanes(self.cfg.n_hp, self.group_dim, layer_seed(self.cfg.seed, layer))
        self.hyperplanes = np.asarray(hyperplanes, dtype=np.float32)
        G = self.n_groups
        self.codes: list[list[int]] = [[] for _ in range(G)]
        self.centroids: list[list[np.ndarray]] = [[] for _ in range(G)]
        self.counts: list[list[int]] = [[] for _ in range(G)]
        self.members: list[list[list[int]]] = [[] for _ in range(G)]
        self.n_tokens = 0

    def add_frame(self, keys, positions=None) -> list[list[int]]:
        keys = np.asarray(keys, dtype=np.float32)
        Hkv, N, D = keys.shape
        if positions is None:
            positions = list(range(self.n_tokens, self.n_tokens + N))
        x = keys.transpose(1, 0, 2).reshape(1, N, Hkv * D) if self.concat else keys
        out = []
        for g in range(self.n_groups):
            new_codes = hash_bits_ref(x[g], self.hyperplanes)
            if self.cfg.code_rule == "founder":
                assign, self.codes[g] = cluster_ref(new_codes, self.codes[g], self.cfg.th_hp)
            else:
                assign = []
            for t in range(N):
                if self.cfg.code_rule == "founder":
                    j = assign[t]
                else:
                    j = nearest_cluster_ref(new_codes[t], self.codes[g], self.cfg.th_hp)
                    if j is None:
                        self.codes[g].append(new_codes[t])
                        j = len(self.codes[g]) - 1
                    assign.append(j)
                if j == len(self.counts[g]):  # a new cluster
                    self.counts[g].append(0)
                    self.centroids[g].append(np.zeros(self.group_dim, dtype=np.float32))
                    self.members[g].append([])
                self.counts[g][j] += 1
                c = self.centroids[g][j]
                self.centroids[g][j] = c + (x[g, t] - c) / np.float32(self.counts[g][j])  # running mean
                self.members[g][j].append(int(positions[t]))
                if self.cfg.code_rule == "mean":
                    self.codes[g][j] = hash_bits_ref(self.centroids[g][j][None], self.hyperplanes)[0]
            out.append(assign)
        self.n_tokens += N
        return out * Hkv if self.concat else out

    def head_centroids(self, head: int) -> np.ndarray:
        g = 0 if self.concat else head
        c = np.array(self.centroids[g], dtype=np.float32).reshape(-1, self.group_dim)
        return c.reshape(-1, self.n_kv_heads, self.head_dim)[:, head] if self.concat else c

    def head_counts(self, head: int) -> list[int]:
        return list(self.counts[0 if self.concat else head])

    def tokens_of(self, head: int, cluster_ids) -> list[int]:
        g = 0 if self.concat else head
        return sorted(p for j in cluster_ids for p in self.members[g][j])


# ------------------------------------------------------------------ Step 4: WiCSum (§IV.C, Eq. 1-3, Fig. 9)
def wicsum_select_ref(weights, counts, ratio: float, quant_bits: int | None = None) -> np.ndarray:
    """Step 4, Eq. (1)-(3) row by row with loops -> bool ``[rows, C]``.

    Integer weights (or float weights with ``quant_bits``): t* = first t with Acc(t)·2^16 > round(ratio·2^16)·Sum,
    exact integers. Float weights: float64, first t with Acc(t) > ratio·Sum. Order: descending weight,
    ties -> lower cluster index. No qualifying t -> all clusters. ``counts`` is ``[C]`` or ``[rows, C]``.
    """
    w = np.asarray(weights)
    if quant_bits is not None:
        w = quantize_weights(w, quant_bits)
    integer = np.issubdtype(w.dtype, np.integer)
    rows, C = w.shape
    cnt = np.broadcast_to(np.asarray(counts), (rows, C))
    rq = ratio_q(ratio)
    out = np.zeros((rows, C), dtype=bool)
    for i in range(rows):
        if integer:
            row = [int(v) for v in w[i]]
            tc = [int(v) for v in cnt[i]]
        else:
            row = [float(v) for v in w[i]]
            tc = [float(v) for v in cnt[i]]
        order = sorted(range(C), key=lambda j: (-row[j], j))  # σ: descending weight, ties -> lower index
        total = 0 if integer else 0.0
        for j in order:  # Eq. (1): Sum = Σ w·TC, in σ order (exact for integers; matches the fast path for floats)
            total += row[j] * tc[j]
        acc = 0 if integer else 0.0
        chosen = []
        stop = False
        for j in order:
            acc += row[j] * tc[j]  # Eq. (3): Acc(t) = Σ_{k<=t} w_σ(k)·TC_σ(k)
            chosen.append(j)
            # Eq. (2): Th = Th_r-wics·Sum; stop at the first t with Acc(t) > Th (integer: Q0.16 ratio, exact)
            stop = acc * (1 << RATIO_FRAC_BITS) > rq * total if integer else acc > ratio * total
            if stop:
                break
        for j in (chosen if stop else range(C)):
            out[i, j] = True
    return out


# ------------------------------------------------------------------ Steps 3-5: one layer's selection (§IV.C)
def select_tokens_ref(query, table: HashClusterTableRef, ratio: float | None = None, cfg: ReSVConfig | None = None,
                      scaling: float | None = None, quant_bits: int | None = None) -> list[list[int]]:
    """Steps 3-5 for one layer: scores and weights per KV head's rows, WiCSum per row, the union's member
    positions. Loop version of :func:`vrex_lib.resv.select_tokens`; returns the per-head (per-q-head) position
    lists."""
    cfg = cfg or table.cfg
    ratio = cfg.th_r_wics if ratio is None else ratio
    q = np.asarray(query, dtype=np.float32)
    Hq, Nq, D = q.shape
    Hkv = table.n_kv_heads
    grp = Hq // Hkv
    scaling = 1.0 / math.sqrt(D) if scaling is None else scaling
    head_sets, qhead_sets = [], []
    for h in range(Hkv):
        cent = table.head_centroids(h).astype(np.float64)
        rows = q[h * grp:(h + 1) * grp].reshape(grp * Nq, D).astype(np.float64)
        s = (rows @ cent.T) * scaling  # Step 3: Score_cluster = q·Key_cluster^T/√d
        w = np.exp(s - s.max(1, keepdims=True)) if cfg.score == "softmax" and s.shape[1] else s  # weights (D1)
        mask = wicsum_select_ref(w, table.head_counts(h), ratio, quant_bits) if s.shape[1] else \
            np.zeros((grp * Nq, 0), bool)  # Step 4, per row
        # Step 5: a KV head fetches the union of its rows' clusters (D2)
        head_sets.append([j for j in range(mask.shape[1]) if mask[:, j].any()])
        for a in range(grp):
            m = mask[a * Nq:(a + 1) * Nq]
            qhead_sets.append([j for j in range(m.shape[1]) if m[:, j].any()])
    if cfg.granularity == "kv_head":
        return [table.tokens_of(h, head_sets[h]) for h in range(Hkv)]
    if cfg.granularity == "q_head":
        return [table.tokens_of(i // grp, qhead_sets[i]) for i in range(Hq)]
    union = sorted({p for h in range(Hkv) for p in table.tokens_of(h, head_sets[h])})
    return [list(union) for _ in range(Hkv)]
