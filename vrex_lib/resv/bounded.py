"""Beyond the paper: a ReSV that retrieves -- capped hash clusters, a bounded per-cluster score and a token-budget
stop (docs/DECISIONS.md D490-D494). The paper's ReSV (:mod:`vrex_lib.resv.select`) is untouched; this module
reuses its hashing (:mod:`vrex_lib.resv.hashing`) and its clustering rule, adding a cap.

Why: ReSV ranks a cluster by ``TC · exp(q·c̄)`` and stops at Th_r-wics of that estimated mass. At 1-2K tokens a
unique key (a passkey digit) shares a cluster of ~15-30 tokens with filler; the centroid's score sits logits under
the digit's own, and the stop rule ends inside the always-attended tokens. ArkVale (NeurIPS'24, §6.2, Fig. 7)
measured the same failure for pages ranked by their centroid and fixed it with a bounding summary; Quest (ICML'24)
scores a page by the channel-wise bound ``Σ_i max(q_i·m_i, q_i·M_i)``; Twilight (NeurIPS'25) prunes with 4-bit
per-token keys; all of them stop at a token budget, not at a share of an estimated mass.

Three steps, each with its source:

1. **Capped hash clustering** (ReSV §IV.B, Fig. 8, with a cap): random-hyperplane codes (N_hp bits,
   :func:`~vrex_lib.resv.hashing.make_hyperplanes` of the layer's seed, per KV head), tokens in arrival order, a
   token joins the nearest cluster whose Hamming distance is < Th_hp (ties -> lowest index) -- among the clusters
   that hold fewer than ``cap`` tokens. A full cluster is closed; a token with no open cluster in reach founds one
   (code = its own code, the founder rule of docs/DECISIONS.md D4). The cap bounds a cluster to the anchors' page
   size (Quest, ArkVale: 16-32 tokens at 10K-128K; 8 here at 1-2K, D491) so one unique key fetches at most
   ``cap - 1`` bystanders.
2. **A per-cluster score that does not dilute** (one of):
   ``'best'`` -- a low-bit copy of every key (``bits`` = 2-4, symmetric, one scale per token stored as an 8-bit
   mantissa and a 4-bit exponent, :func:`quantize_keys`; Twilight §4's INT4 estimate) scores each shortlisted
   cluster by its best candidate member, per query row, in integers (:func:`best_member_scores`);
   ``'cuboid'`` -- ArkVale's cuboid-mean: the centre ``c̄`` plus the per-channel mean absolute deviation ``a``,
   ``q·c̄ + Σ_i |q_i|·a_i`` (a box around the centre, ArkVale §4.2; Quest's min/max bound is the same form with the
   half-range); ``'centroid'`` -- ReSV's own ``q·c̄`` (the cheapest: only the cap and the stop change).
   Across a KV head's query rows a cluster's priority is ``Σ_rows exp(score − max_row score)`` (the softmax
   numerator the DRE's VPE computes, summed over rows as ReSV's union over rows).
3. **A token-budget stop** (Quest, ArkVale, ShadowKV, ClusterKV): clusters in descending priority (ties -> lower
   index, the WTU's walk order) until their candidate members reach ``budget`` of the candidates; the cluster that
   crosses the budget is taken whole (:func:`budget_stop_ref`). ``shortlist`` < 1 scores only the clusters the
   centroid ranks first until their members reach that share of the candidates (fewer low-bit keys read).

Everything integer here (:func:`quantize_keys`, :func:`quantize_query`, :func:`best_member_ref`,
:func:`capped_nearest_ref`, :func:`budget_stop_ref`) is the bit-exact reference of the MyHDL blocks of
:mod:`vrex_lib.hw.bounded`.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from numba import njit

from ..config import ReSVConfig, check_choice, check_int, check_real
from .hashing import layer_seed, make_hyperplanes

SUMMARIES: tuple[str, ...] = ("best", "cuboid", "centroid")
#: Per-token key scale = mantissa · 2^(exponent − SCALE_BIAS), mantissa 8 bits (in [128, 255] unless the exponent
#: is at its floor 0), exponent in [0, 15] (4 bits): scales from 2^-15 to ~2^8 cover post-RoPE keys of the models
#: here (|k| up to ~20).
SCALE_MANT_BITS, SCALE_EXP_BITS, SCALE_BIAS = 8, 4, 15
#: The query rows as signed 8-bit integers (one scale per row; a common factor of a row's scores, so it never
#: changes which member of a row is best).
QUERY_BITS = 8


@dataclass(frozen=True)
class BoundedConfig:
    """The knobs of the bounded ReSV variants (docs/DECISIONS.md D491).

    summary: 'best' (low-bit per-token keys, best member), 'cuboid' (ArkVale's cuboid-mean) or 'centroid';
    cap: most tokens per cluster (a full cluster takes no new member; 1 = every token its own cluster);
    budget: the stop, a share of the candidates (0.015 = 1.5 %, docs/DECISIONS.md D501; whole clusters, so at most
    cap − 1 over);
    bits: bits per element of the key copy ('best' only; 2-8);
    shortlist: share of the candidates whose clusters (centroid-ranked) are scored by the summary (1.0 = all).
    """

    summary: Literal["best", "cuboid", "centroid"] = "best"
    cap: int = 8
    budget: float = 0.015
    bits: int = 4
    shortlist: float = 1.0

    def __post_init__(self) -> None:
        who = "BoundedConfig"
        check_choice(who, "summary", self.summary, SUMMARIES)
        check_int(who, "cap (tokens per cluster)", self.cap, 1, 1 << 16)
        check_real(who, "budget (share of the candidates)", self.budget, 0.0, 1.0, lo_open=True)
        check_int(who, "bits (key copy)", self.bits, 2, 8)
        check_real(who, "shortlist (share of the candidates)", self.shortlist, 0.0, 1.0, lo_open=True)

    def replace(self, **changes) -> "BoundedConfig":
        return dataclasses.replace(self, **changes)


# ------------------------------------------------------------------------------------ integer references
def quantize_keys(keys: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Symmetric per-token quantisation of ``keys [T, D]``: (codes int8 [T, D] in [−(2^(b−1)−1), 2^(b−1)−1],
    mantissa int64 [T] in [1, 255], exponent int64 [T] in [0, 15]); the key is ≈ codes · m · 2^(e − 15)."""
    qmax = (1 << (bits - 1)) - 1
    k = np.asarray(keys, dtype=np.float64)
    s = np.maximum(np.abs(k).max(axis=1), 1e-30) / qmax
    e = np.clip(np.floor(np.log2(s)).astype(np.int64) + SCALE_BIAS - (SCALE_MANT_BITS - 1), 0, 15)
    m = np.rint(s * np.exp2(SCALE_BIAS - e)).astype(np.int64)
    bump = (m > 255) & (e < 15)                      # rounding overflowed the mantissa: one exponent up
    e = np.where(bump, e + 1, e)
    m = np.clip(np.rint(s * np.exp2(SCALE_BIAS - e)).astype(np.int64), 1, 255)
    scale = m * np.exp2(e - SCALE_BIAS)
    codes = np.clip(np.rint(k / scale[:, None]), -qmax, qmax).astype(np.int8)
    return codes, m, e


def quantize_query(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row symmetric INT8 query: (codes int64 [R, D] in [−127, 127], scale float64 [R])."""
    r = np.asarray(rows, dtype=np.float64)
    qmax = (1 << (QUERY_BITS - 1)) - 1
    s = np.maximum(np.abs(r).max(axis=1), 1e-30) / qmax
    return np.clip(np.rint(r / s[:, None]), -qmax, qmax).astype(np.int64), s


def member_scores_int(q_codes: np.ndarray, k_codes: np.ndarray, mant: np.ndarray, exp: np.ndarray) -> np.ndarray:
    """Integer scores of query rows ``[R, D]`` against low-bit keys ``[T, D]``: ``(q·k) · m << e`` -> int64
    [R, T] (what the best-member block computes per token; a row's real score is this · its scale · 2^-15)."""
    dot = q_codes.astype(np.int64) @ k_codes.astype(np.int64).T
    return (dot * mant[None, :]) << exp[None, :]


def best_member_ref(q_codes: np.ndarray, k_codes: np.ndarray, mant: np.ndarray, exp: np.ndarray,
                    first: np.ndarray) -> np.ndarray:
    """The best-member block's stream: one token a cycle, ``first[t]`` opens a new cluster; the output after each
    token is the running maximum of the integer score within the current cluster (one query row)."""
    s = member_scores_int(q_codes[None, :], k_codes, mant, exp)[0]
    out = np.empty_like(s)
    best = 0
    for t in range(s.size):
        best = s[t] if (first[t] or t == 0) else max(best, s[t])
        out[t] = best
    return out


def capped_nearest_ref(code: int, codes: np.ndarray, counts: np.ndarray, cap: int, th: int) -> tuple[int, int, bool]:
    """The capped HCU compare (step 1): among the clusters with count < cap, the nearest by Hamming distance (ties
    -> lowest index) -> (index, distance, join = distance < th). No open cluster -> (−1, 64+1, False)."""
    d = np.array([bin((int(code) ^ int(c)) & ((1 << 64) - 1)).count("1") for c in codes], dtype=np.int64)
    d = np.where(np.asarray(counts) < cap, d, 65)
    if d.size == 0 or d.min() == 65:
        return -1, 65, False
    j = int(np.argmin(d))
    return j, int(d[j]), bool(d[j] < th)


def budget_stop_ref(counts_in_order: np.ndarray, budget_tokens: int) -> np.ndarray:
    """The WTU's budgeted stop (step 3): clusters arrive in the walk's order with their candidate counts; a cluster
    is selected while the tokens selected before it are below ``budget_tokens`` -> bool [C]."""
    c = np.asarray(counts_in_order, dtype=np.int64)
    before = np.concatenate([[0], np.cumsum(c)[:-1]])
    return before < int(budget_tokens)


# ------------------------------------------------------------------------------------------ the table
class CappedClusterTable:
    """Per layer: capped founder-rule clusters per KV head (step 1), with the per-token low-bit key copy.

    State per head: ``assign[h] [T]`` cluster of each token (table order = cache position order), cluster codes,
    counts and float32 running means (ReSV's ``c + (k − c)/TC``). ``n_clusters`` (a torch [H]
    tensor) and ``n_tokens`` mirror :class:`~vrex_lib.resv.HashClusterTable`'s so a study records tokens per cluster.
    """

    def __init__(self, n_kv_heads: int, head_dim: int, resv: ReSVConfig, cfg: BoundedConfig, layer: int):
        self.H, self.D, self.cfg, self.th = n_kv_heads, head_dim, cfg, resv.th_hp
        self.planes = make_hyperplanes(resv.n_hp, head_dim, layer_seed(resv.seed, layer)).double().numpy()
        self.n_tokens = 0
        self.assign = [np.zeros(0, np.int64) for _ in range(n_kv_heads)]
        # growable buffers per head (codes, counts, float32 means) and their live views (counts, means)
        self._codes = [np.zeros(0, np.int64) for _ in range(n_kv_heads)]
        self._counts = [np.zeros(0, np.int64) for _ in range(n_kv_heads)]
        self._means = [np.zeros((0, head_dim), np.float32) for _ in range(n_kv_heads)]
        self.counts = [c[:0] for c in self._counts]
        self.means = [m[:0] for m in self._means]
        self.lowbit = [(np.zeros((0, head_dim), np.int8), np.zeros(0, np.int64), np.zeros(0, np.int64))
                       for _ in range(n_kv_heads)]

    @property
    def n_clusters(self) -> torch.Tensor:
        return torch.tensor([len(c) for c in self.counts], dtype=torch.float64)

    def nbytes(self) -> int:
        """HC-table bytes as ReSV's (code + Key_cluster fp16 + count) per cluster, summed over heads."""
        return int(sum(len(c) for c in self.counts) * (4 + 2 * self.D + 2))

    def add(self, keys: np.ndarray) -> None:
        """Append ``keys [H, N, D]`` (the next N cache positions) to every head's clusters."""
        n = keys.shape[1]
        weights = 1 << np.arange(self.planes.shape[0], dtype=np.int64)
        for h in range(self.H):
            k32 = np.ascontiguousarray(keys[h], dtype=np.float32)
            codes = ((k32.astype(np.float64) @ self.planes.T) > 0).astype(np.int64) @ weights
            need = len(self.counts[h]) + n
            if self._codes[h].size < need:                 # grow by doubling
                size = max(need, 2 * self._codes[h].size, 64)
                self._codes[h] = np.resize(self._codes[h], size)
                self._counts[h] = np.resize(self._counts[h], size)
                self._means[h] = np.resize(self._means[h], (size, self.D)).astype(np.float32)
            new, n_cl = capped_cluster(codes, k32, self._codes[h], self._counts[h], self._means[h],
                                       len(self.counts[h]), self.cfg.cap, self.th)
            self.counts[h] = self._counts[h][:n_cl]
            self.means[h] = self._means[h][:n_cl]
            self.assign[h] = np.concatenate([self.assign[h], new])
            if self.cfg.summary == "best":   # the low-bit copy is written as the key arrives
                self.lowbit[h] = tuple(np.concatenate([a, b]) for a, b in
                                       zip(self.lowbit[h], quantize_keys(keys[h], self.cfg.bits)))
        self.n_tokens += n


@njit(cache=True)
def capped_cluster(new_codes, new_keys, codes, counts, means, n_cl, cap, th):  # pragma: no cover - compiled
    """Step 1 for one head and one frame, in arrival order (the rule of :func:`capped_nearest_ref`): each token
    joins the nearest open cluster (count < cap) at Hamming distance < th, ties -> lowest index, updating the
    float32 running mean ``c + (k − c)/TC``; else it founds a cluster. Buffers are updated in place; returns
    (cluster of each new token, clusters after the frame)."""
    out = np.empty(new_codes.size, np.int64)
    for t in range(new_codes.size):
        best, best_d = -1, 65
        for j in range(n_cl):
            if counts[j] >= cap:
                continue
            x = np.uint64(new_codes[t] ^ codes[j])
            d = 0
            while x:
                x &= x - np.uint64(1)
                d += 1
            if d < best_d:
                best, best_d = j, d
        if best >= 0 and best_d < th:
            counts[best] += 1
            tc = np.float32(counts[best])
            for i in range(means.shape[1]):
                means[best, i] = means[best, i] + (new_keys[t, i] - means[best, i]) / tc
            out[t] = best
        else:
            codes[n_cl] = new_codes[t]
            counts[n_cl] = 1
            means[n_cl, :] = new_keys[t, :]
            out[t] = n_cl
            n_cl += 1
    return out, n_cl


# ------------------------------------------------------------------------------------------- selection
def _priority(scores: np.ndarray) -> np.ndarray:
    """Σ over rows of exp(score − the row's max) for ``scores [R, C]`` (−inf = not scored) -> [C]."""
    m = scores.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(np.exp(scores - m), nan=0.0).sum(axis=0)


def _per_cluster(values: np.ndarray, owner: np.ndarray, n_clusters: int, ufunc: np.ufunc) -> np.ndarray:
    """``ufunc``-reduce the columns of ``values [R, N]`` by cluster (``owner [N]``) -> [R, n_clusters]; clusters
    with no column get the reduction's identity (−inf for maximum, 0 for add)."""
    order = np.argsort(owner, kind="stable")
    o = owner[order]
    starts = np.flatnonzero(np.r_[True, o[1:] != o[:-1]]) if o.size else np.zeros(0, np.int64)
    fill = -np.inf if ufunc is np.maximum else 0.0
    out = np.full((values.shape[0], n_clusters), fill)
    if o.size:
        out[:, o[starts]] = ufunc.reduceat(values[:, order], starts, axis=1)
    return out


def cluster_summary_scores(cfg: BoundedConfig, rows: np.ndarray, keys_h: np.ndarray, cand: np.ndarray,
                           owner: np.ndarray, means: np.ndarray, lowbit: tuple | None = None) -> np.ndarray:
    """Per query row and cluster the summary score /√D -> [R, C] (−inf for a cluster without a candidate member in
    ``cand``). ``rows [R, D]``; ``keys_h [S, D]`` the head's cache keys; ``owner [N]`` the cluster of each of
    ``cand [N]``; ``means [C, D]`` the running means; ``lowbit`` (codes, mantissa, exponent) of every cache
    position ('best': the key copy kept at insertion; None quantises ``keys_h`` here)."""
    R, D = rows.shape
    C = means.shape[0]
    if cfg.summary == "centroid":
        out = rows @ means.T
    elif cfg.summary == "cuboid":                  # ArkVale's cuboid-mean: centre + per-channel mean |k − c̄|
        dev = np.abs(keys_h[cand].astype(np.float64) - means[owner])
        n = np.maximum(np.bincount(owner, minlength=C), 1)[:, None]
        mad = _per_cluster(dev.T, owner, C, np.add).T / n                        # [C, D]
        out = rows @ means.T + np.abs(rows) @ mad.T
    else:                                          # the best member under the low-bit copy (integer scores)
        kc, m, e = lowbit if lowbit is not None else quantize_keys(keys_h, cfg.bits)
        qc, qs = quantize_query(rows)
        s = member_scores_int(qc, kc[cand], m[cand], e[cand]).astype(np.float64)
        out = _per_cluster(s, owner, C, np.maximum) * qs[:, None] * 2.0 ** -SCALE_BIAS
    live = np.bincount(owner, minlength=C) > 0
    return np.where(live[None, :], out, -np.inf) / math.sqrt(D)


def bounded_select_head(cfg: BoundedConfig, rows: np.ndarray, keys_h: np.ndarray, assign: np.ndarray,
                        means: np.ndarray, candidates: np.ndarray, lowbit: tuple | None = None
                        ) -> tuple[np.ndarray, dict]:
    """One (layer, KV head): the candidate positions to fetch (sorted) and counters. ``assign [T]`` is the cluster
    of each clustered cache position; every candidate must be clustered (observe before select)."""
    C = means.shape[0]
    if candidates.size and candidates.max() >= assign.size:
        raise ValueError(f"bounded ReSV: candidate {int(candidates.max())} is not clustered ({assign.size} tokens)")
    owner = assign[candidates]
    cnt = np.bincount(owner, minlength=C)
    live = cnt > 0
    keep = np.ones(candidates.size, bool)
    if cfg.shortlist < 1.0:                        # centroid-ranked shortlist (step 2's cheaper front end)
        pri = np.where(live, _priority(rows @ means.T / math.sqrt(rows.shape[1])), -1.0)
        order = np.argsort(-pri, kind="stable")
        order = order[live[order]]
        take = int(np.searchsorted(np.cumsum(cnt[order]), math.ceil(cfg.shortlist * candidates.size)) + 1)
        scored = np.zeros(C, bool)
        scored[order[:take]] = True
        keep = scored[owner]
    s = cluster_summary_scores(cfg, rows, keys_h, candidates[keep], owner[keep], means, lowbit)
    scored = np.isfinite(s[0])
    pri = np.where(scored, _priority(s), -1.0)
    order = np.argsort(-pri, kind="stable")
    order = order[scored[order]]
    budget = max(1, math.ceil(cfg.budget * candidates.size))
    chosen = np.zeros(C, bool)
    chosen[order[budget_stop_ref(cnt[order], budget)]] = True
    sel = candidates[chosen[owner]]
    lowbit_keys = int(keep.sum()) if cfg.summary == "best" else 0
    return np.sort(sel), dict(clusters=int(live.sum()), clusters_scored=int(scored.sum()),
                              clusters_selected=int(chosen.sum()), lowbit_keys=lowbit_keys)


__all__ = ["BoundedConfig", "CappedClusterTable", "QUERY_BITS", "SCALE_BIAS", "SCALE_EXP_BITS", "SCALE_MANT_BITS",
           "SUMMARIES", "best_member_ref", "bounded_select_head", "budget_stop_ref", "capped_nearest_ref",
           "cluster_summary_scores", "member_scores_int", "quantize_keys", "quantize_query"]
