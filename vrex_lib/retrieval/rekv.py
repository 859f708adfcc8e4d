"""``rekv`` — ReKV's frame-level retrieval (Di et al., ICLR 2025; Becomebright/ReKV, PEERS.md §2).

ReKV keeps one representative key per *block* (= one frame): the mean of the block's keys. To
retrieve, it averages the step's queries, scores every block by the unnormalised dot product of the
mean query with the block's mean key (per-head products summed, i.e. GQA-expanded and concatenated),
and keeps a fixed top-k of blocks -- one decision per layer, shared by all heads. No threshold.

Here a block is what one ``observe`` call appended: a frame's tokens at the frame stage, or one text
step (question prefill, one generated token). Budget: ``topk_blocks`` blocks if given (ReKV's
``retrieve_size``), else ``floor(ratio × candidate blocks)`` (at least one) -- the paper's accuracy
runs use "up to 50 %" for every baseline.
"""
from __future__ import annotations

import torch

from ._common import Stopwatch
from .base import Selection, Stage


class ReKV:
    name = "rekv"
    retrieves_at_frame = True

    def __init__(self, ratio: float = 0.5, topk_blocks: int | None = None):
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"rekv: ratio must be in (0, 1], got {ratio}")
        if topk_blocks is not None and topk_blocks < 1:
            raise ValueError(f"rekv: topk_blocks must be >= 1, got {topk_blocks}")
        self.ratio, self.topk_blocks = float(ratio), topk_blocks

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.head_dim = head_dim
        # Per layer: block id of every cache position, and each block's mean key [Hkv, D].
        self._block_of = [torch.empty(0, dtype=torch.long) for _ in range(n_layers)]
        self._means: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        n = new_keys.shape[1]
        blocks = self._block_of[layer]
        if start != blocks.numel():
            raise ValueError(f"rekv: layer {layer} observed position {start}, expected {blocks.numel()} "
                             "(observe must see every appended token in order; call reset() per stream)")
        bid = len(self._means[layer])
        self._block_of[layer] = torch.cat([blocks, torch.full((n,), bid, dtype=torch.long)])
        self._means[layer].append(new_keys.detach().float().mean(1).cpu())

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        hkv, n_c = keys.shape[0], int(candidates.numel())
        if n_c == 0:
            return None
        with Stopwatch() as sw:
            block_of = self._block_of[layer]
            if block_of.numel() < int(candidates.max()) + 1:
                raise ValueError(f"rekv: layer {layer} was asked about position {int(candidates.max())} it never "
                                 "observed (the runtime must call observe before select)")
            cand_block = block_of[candidates.cpu()]                          # [C]
            blocks = torch.unique(cand_block)                                 # sorted block ids
            means = torch.stack([self._means[layer][b] for b in blocks.tolist()])  # [B, Hkv, D]
            hq = query.shape[0]
            q_mean = query.detach().float().mean(1).cpu().reshape(hkv, hq // hkv, -1).sum(1)  # [Hkv, D]
            # Σ over query heads of q̄_h · k̄_{b, kv(h)}  ==  Σ_g (Σ_{h in g} q̄_h) · k̄_{b,g}
            score = torch.einsum("bgd,gd->b", means, q_mean)                   # [B]
            n_blocks = int(blocks.numel())
            k = self.topk_blocks if self.topk_blocks is not None else max(1, int(self.ratio * n_blocks))
            k = min(k, n_blocks)
            top = torch.sort(score, descending=True, stable=True).indices[:k]
            keep = torch.isin(cand_block, blocks[top]).to(candidates.device)
            chosen = candidates[keep]
        stats = dict(rows=hq, scored=n_blocks, score_dims=self.head_dim, score_macs=hq * n_blocks * self.head_dim,
                     blocks=n_blocks, blocks_selected=k, select_s=sw.seconds)
        return Selection([chosen.clone() for _ in range(hkv)], n_c, stats)
