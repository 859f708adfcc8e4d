"""ReSV's KV prediction end to end: Q·Key_cluster^T -> weights -> WiCSum per row -> union -> token positions."""
from __future__ import annotations

import math

import torch

from ..config import ReSVConfig
from ..selection import Selection
from .table import HashClusterTable, single_thread
from .wicsum import cluster_weights, wicsum_select


# ReSV returns the runtime's own selection type (per-KV-head positions + stats: rows, clusters /
# clusters_selected per KV head, prefix_frac, sum_nonpos_rows for raw scores, ratio).
ReSVSelection = Selection


def cluster_scores(query: torch.Tensor, table: HashClusterTable, head: int, scaling: float) -> torch.Tensor:
    """``Score_cluster`` of one KV head: its query rows ``[R, D]`` × ``Key_cluster^T`` · scaling -> ``[R, C]`` (float64)."""
    return (query.to(torch.float64) @ table.head_centroids(head).to(torch.float64).T) * scaling


def select_tokens(query: torch.Tensor, table: HashClusterTable, ratio: float | None = None,
                  cfg: ReSVConfig | None = None, scaling: float | None = None,
                  candidates: torch.Tensor | None = None, quant_bits: int | None = None) -> ReSVSelection:
    """ReSV selection for ``query [Hq, Nq, D]`` (post-RoPE) against the layer's HC ``table``.

    Rows of KV head g are (query head in g's group, query token), head-major (digest §10b). Per row:
    scores s = q·Key_cluster^T·scaling (default 1/√D, float64), weights by ``cfg.score``, WiCSum with
    ``ratio`` (default ``cfg.ratio``). Granularity ``cfg.granularity``: 'kv_head' = union over the group's
    rows; 'q_head' = one set per query head; 'layer' = union over all rows of all heads, same set for every
    head. ``candidates`` (positions) restricts the returned sets and is the ratio's denominator.
    All KV heads are processed in one batch (clusters padded to the largest head; see ``wicsum_select``).
    CPU ops run on one thread (see ``table.single_thread``: they are small and latency-bound).
    """
    with single_thread():
        return _select_tokens(query, table, ratio, cfg, scaling, candidates, quant_bits)


def _select_tokens(query, table, ratio, cfg, scaling, candidates, quant_bits) -> ReSVSelection:
    cfg = cfg or table.cfg
    ratio = cfg.ratio if ratio is None else float(ratio)
    if query.dim() != 3 or query.shape[-1] != table.head_dim:
        raise ValueError(f"query must be [Hq, Nq, D={table.head_dim}], got {tuple(query.shape)}")
    Hq, Nq, D = query.shape
    Hkv = table.n_kv_heads
    if Hq % Hkv:
        raise ValueError(f"{Hq} query heads are not a multiple of {Hkv} KV heads")
    grp, R = Hq // Hkv, Hq // Hkv * Nq
    scaling = 1.0 / math.sqrt(D) if scaling is None else scaling
    cent, counts, valid = table.padded_heads()  # [Hkv, C, D], [Hkv, C], [Hkv, C]
    C = cent.shape[1]
    rows = query.reshape(Hkv, R, D).to(table.device, torch.float64)  # a group's query heads are adjacent
    s = (rows @ cent.to(torch.float64).transpose(1, 2)) * scaling  # Score_cluster [Hkv, R, C]
    vr = valid[:, None, :].expand(Hkv, R, C)
    nonpos = 0
    if C:
        w = cluster_weights(s.masked_fill(~vr, float("-inf")), cfg.score) if cfg.score == "softmax" else \
            cluster_weights(s, cfg.score)
        if cfg.score == "raw":
            nonpos = int(((w * counts[:, None, :]).masked_fill(~vr, 0).sum(-1) <= 0).sum())
        mask = wicsum_select(w.reshape(Hkv * R, C), counts[:, None, :].expand(Hkv, R, C).reshape(Hkv * R, C),
                             ratio, quant_bits, valid=vr.reshape(Hkv * R, C)).view(Hkv, R, C)
    else:
        mask = torch.zeros(Hkv, R, 0, dtype=torch.bool, device=table.device)
    n_c = valid.sum(1)  # clusters per head
    head_mask = mask.any(1)  # [Hkv, C]: union over the group's rows
    prefix = (mask.sum(2).double() / n_c.clamp(min=1)[:, None].double()).mean().item()
    if cfg.granularity == "kv_head":
        idx = table.tokens_of_heads(head_mask)
    elif cfg.granularity == "q_head":
        qm = mask.view(Hkv, grp, Nq, C).any(2)  # [Hkv, grp, C]
        idx = [t for j in range(grp) for t in table.tokens_of_heads(qm[:, j])]
        idx = [idx[j * Hkv + h] for h in range(Hkv) for j in range(grp)]  # order: query head h*grp + j
    elif cfg.granularity == "layer":
        union = torch.unique(torch.cat(table.tokens_of_heads(head_mask)))
        idx = [union.clone() for _ in range(Hkv)]
    else:
        raise ValueError(f"granularity={cfg.granularity!r}: use 'kv_head', 'q_head' or 'layer'")
    n_cand = table.n_tokens
    if candidates is not None:
        candidates = torch.as_tensor(candidates, dtype=torch.int64, device=table.device)
        idx = [i[torch.isin(i, candidates)] for i in idx]
        n_cand = int(candidates.numel())
    sel = ReSVSelection(idx, n_cand, dict(rows=R * Hkv, clusters=n_c.tolist(),
                                          clusters_selected=head_mask.sum(1).tolist(), prefix_frac=prefix,
                                          sum_nonpos_rows=nonpos))
    sel.stats["ratio"] = sel.ratio()
    return sel
