"""Why ReSV's cluster estimate loses a unique key: instruments on one (layer, KV head) HC table and its query rows
(docs/DECISIONS.md D261).

ReSV weighs cluster j by ``TC_j · exp(q·c̄_j/√d)`` (Eq. 1–3 on softmax numerators, D1). The attention the cluster's
members really hold is ``Σ_{k∈j} exp(q·k/√d)``; by convexity of exp (Jensen) that sum is ≥ the estimate, with
equality only when every member scores like the centroid. The ratio is the **dilution factor**

    dilution_j = Σ_{k∈j} exp(q·k/√d) / (TC_j · exp(q·c̄_j/√d))       (1.0 for a singleton; > 1 for a spread cluster)

:func:`token_report` gives, per target token (e.g. the key's digits), its cluster's size, its own score against the
centroid's and the dilution of its cluster, per query row. :func:`always_attended_share` compares the share of a
row's attention that the always-attended tokens (sinks, recent window, own tokens) hold, exactly and as ReSV
estimates it, and counts the rows whose WiCSum stops at its first cluster.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .table import HashClusterTable, to_numpy
from .wicsum import wicsum_select


def _rows(query, head: int, n_kv_heads: int) -> np.ndarray:
    q = to_numpy(query, np.float32).astype(np.float64)
    d = q.shape[-1]
    return q.reshape(n_kv_heads, -1, d)[head]


def _head(table: HashClusterTable, keys, head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(table-order keys [T, D], positions [T], assignment [T], centroids [C, D]) of one KV head."""
    T = table.n_tokens
    pos = table._pos[:T]
    k = to_numpy(keys, np.float32).astype(np.float64)[head]
    return k[pos], pos, table._assign[table.group_of(head), :T], table.head_centroids64_np(head)


def dilution(query, keys, table: HashClusterTable, head: int, scaling: float | None = None) -> np.ndarray:
    """Dilution factor of every cluster of KV ``head`` for each of its query rows, ``[R, C]`` (see the module
    docstring). ``query [Hq, Nq, D]``, ``keys [Hkv, S, D]`` (every position the table holds)."""
    k, _, a, cen = _head(table, keys, head)
    q = _rows(query, head, table.n_kv_heads)
    sc = 1.0 / math.sqrt(q.shape[-1]) if scaling is None else scaling
    s_tok = q @ k.T * sc                                  # [R, T]
    s_cen = q @ cen.T * sc                                # [R, C]
    m = np.maximum(s_tok.max(1, keepdims=True), s_cen.max(1, keepdims=True))  # one shift for both sides
    exact = np.zeros_like(s_cen)
    np.add.at(exact.T, a, np.exp(s_tok - m).T)
    counts = np.bincount(a, minlength=cen.shape[0]).astype(np.float64)
    est = counts[None, :] * np.exp(s_cen - m)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(counts[None, :] > 0, exact / est, np.nan)


@dataclass(frozen=True)
class TokenRow:
    """One target token of one KV head: its cluster, cluster size, and per query row (arrays [R]) its own score,
    its centroid's score (both q·k/√d) and its cluster's dilution factor."""

    position: int
    cluster: int
    cluster_size: int
    own_score: np.ndarray
    centroid_score: np.ndarray
    dilution: np.ndarray


def token_report(query, keys, table: HashClusterTable, head: int, positions) -> list[TokenRow]:
    """Per cache position in ``positions`` (held by the table), a :class:`TokenRow` for KV ``head``."""
    k, pos, a, cen = _head(table, keys, head)
    q = _rows(query, head, table.n_kv_heads)
    sc = 1.0 / math.sqrt(q.shape[-1])
    dil = dilution(query, keys, table, head)
    counts = np.bincount(a, minlength=cen.shape[0])
    where = {int(p): i for i, p in enumerate(pos.tolist())}
    out = []
    for p in to_numpy(torch.as_tensor(positions), np.int64).reshape(-1).tolist():
        if p not in where:
            raise ValueError(f"token_report: position {p} is not in the HC table (it holds {len(pos)} tokens)")
        i = where[p]
        c = int(a[i])
        out.append(TokenRow(p, c, int(counts[c]), q @ k[i] * sc, q @ cen[c] * sc, dil[:, c]))
    return out


def always_attended_share(query, keys, table: HashClusterTable, head: int, candidates,
                          ratio: float) -> dict[str, np.ndarray]:
    """Per query row of KV ``head``: ``exact`` -- the softmax share of the always-attended tokens (every table
    position not in ``candidates``); ``estimated`` -- their share of ReSV's WiCSum total (a cluster's estimate
    split over its members, so a cluster mixing both kinds counts for each by its member count); ``one_cluster``
    -- whether the row's WiCSum at ``ratio`` stops at its first cluster (bool)."""
    k, pos, a, cen = _head(table, keys, head)
    q = _rows(query, head, table.n_kv_heads)
    sc = 1.0 / math.sqrt(q.shape[-1])
    always = ~np.isin(pos, to_numpy(torch.as_tensor(candidates), np.int64).reshape(-1))
    s_tok = q @ k.T * sc
    p_tok = np.exp(s_tok - s_tok.max(1, keepdims=True))
    exact = (p_tok * always).sum(1) / p_tok.sum(1)
    s_cen = q @ cen.T * sc
    w = np.exp(s_cen - s_cen.max(1, keepdims=True))                          # [R, C]
    counts = np.bincount(a, minlength=cen.shape[0]).astype(np.float64)
    n_always = np.bincount(a, weights=always.astype(np.float64), minlength=cen.shape[0])
    estimated = (w * n_always).sum(1) / (w * counts).sum(1)
    _, n_sel = wicsum_select(torch.from_numpy(w), torch.from_numpy(counts), ratio, return_prefix=True)
    return dict(exact=exact, estimated=estimated, one_cluster=n_sel.numpy() == 1)
