"""Small helpers shared by the retrieval policies (GQA row grouping, scoring, bookkeeping).

Shapes follow :mod:`vrex_lib.retrieval.base`: ``query [Hq, Nq, D]``, ``keys [Hkv, S, D]``,
``candidates [C]`` sorted int64 cache positions.
"""
from __future__ import annotations

import math
import time

import torch

from .base import Selection


def kv_rows(query: torch.Tensor, n_kv_heads: int) -> torch.Tensor:
    """Regroup queries per KV head: [Hq, Nq, D] -> [Hkv, group*Nq, D].

    Query head h reads KV head h // group (transformers' ``repeat_kv`` layout), so the rows of KV
    head g are all (query head in g's group, query token) pairs.
    """
    hq, nq, d = query.shape
    if hq % n_kv_heads:
        raise ValueError(f"query heads ({hq}) must be a multiple of KV heads ({n_kv_heads})")
    return query.reshape(n_kv_heads, (hq // n_kv_heads) * nq, d)


def row_probs(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim, in float32 ([..., C] -> [..., C]); the attention each row would give."""
    return torch.softmax(logits.float(), dim=-1)


def scaled_scores(rows: torch.Tensor, keys: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Attention logits q·k/√D per KV head: rows [Hkv, R, d'], keys [Hkv, C, d'] -> [Hkv, R, C] (float32)."""
    return torch.matmul(rows.float(), keys.float().transpose(-1, -2)) / math.sqrt(head_dim)


def topk_sorted(candidates: torch.Tensor, score: torch.Tensor, k: int) -> torch.Tensor:
    """The k best-scoring candidates ([C] scores) as sorted cache positions; ties -> lower position."""
    k = max(0, min(int(k), int(candidates.numel())))
    if k == 0:
        return candidates[:0].clone()
    # A stable descending sort makes ties deterministic (lower candidate index wins).
    order = torch.sort(score, descending=True, stable=True).indices[:k]
    return candidates[torch.sort(order).values]


def all_of(candidates: torch.Tensor, n_kv_heads: int, stats: dict | None = None) -> Selection:
    """Every candidate for every KV head."""
    return Selection([candidates.clone() for _ in range(n_kv_heads)], int(candidates.numel()), stats or {})


class Stopwatch:
    """Wall time of a policy's prediction, reported as ``stats['select_s']`` (measured, not modelled)."""

    def __enter__(self) -> "Stopwatch":
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.t0
