"""``rekv`` — ReKV's frame-block retrieval (Di et al., ICLR 2025; code: Becomebright/ReKV).

ReKV keeps one representative key per *block* (= one frame): the mean of the block's keys. What the reference
code does (``model/attention/kv_cache_manager.py``, ``ContextManager._calc_block_topk`` and
``get_retrieved_kv``; ``model/attention/rekv_attention.py``, ``rekv_attention_forward``; the QA driver
``model/llava_onevision_rekv.py``, ``question_answering``):

* **Pre-RoPE scoring.** The block keys and the query are taken *before* rotary embedding (``global_q``,
  ``global_k`` are the projections; RoPE is applied only to the local window). The score of block b is the
  unnormalised dot product of the query averaged over the question's tokens with the block's mean key, both
  GQA-expanded and concatenated over heads (one decision per layer, shared by all heads).
* **Once per question.** ``question_answering`` runs a question-only pass with retrieval switched on; each
  layer's top-k blocks are chosen there and the answer (prompt prefill and every generated token) attends
  to that same set (``retrieved_block_indices`` kept until ``reset_retrieval``).
* **Budget.** ``topk`` (``retrieve_size``) = 64 blocks; all blocks when there are no more than that.
* **Attention.** The initial tokens (``n_init``: the prompt before the video) plus the retrieved blocks, with
  positions re-assigned contiguously (RoPE applied over the concatenated window).
* **Video encoding** attends the initial tokens and a sliding local window (``n_local``), without retrieval.

Here (``mode="question"``, the default): keys and queries are un-rotated with the step's own RoPE
``(cos, sin)`` (exact, :func:`vrex_lib.runtime.capture.unrope`; the session binds the policy to the model). The
retrieval decision is made at the first text-stage step after the frames (in the live layout that step *is*
the question; in the COIN layout the question precedes the frames, so it is the ``]\\nAssistant:`` step whose
queries attend to the question and the frames) and reused for every later text step until a frame arrives.
Frame steps attend densely (the reference's local window holds a whole COIN span: ``n_local`` is tens of
thousands of tokens). Positions are *not* re-assigned: the runtime attends selected tokens at their original
positions (docs/DECISIONS.md D60 says why and what that changes).

``mode="frame"`` is the V-Rex paper's ReKV row (Table II marks ReKV as retrieving during frame processing):
the same pre-RoPE block scoring and budget, decided afresh at every step of both stages from that step's
queries. ``mode="legacy"`` is this artifact's earlier variant: post-RoPE scoring at every step with a
``ratio`` budget (``topk_blocks`` or ``floor(ratio × blocks)``).
"""
from __future__ import annotations

import torch

from ._common import Stopwatch
from .base import Selection, Stage

REKV_MODES: tuple[str, ...] = ("question", "frame", "legacy")
RETRIEVE_SIZE = 64  # Becomebright/ReKV load_model(topk=64): frames retrieved per question


class ReKV:
    name = "rekv"
    #: The default (reference) mode retrieves only for questions; ``mode='frame'``/``'legacy'`` instances set True.
    retrieves_at_frame = False

    def __init__(self, mode: str = "question", topk_blocks: int | None = None, ratio: float = 0.5):
        if mode not in REKV_MODES:
            raise ValueError(f"rekv: unknown mode {mode!r}: choose one of {', '.join(REKV_MODES)}")
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"rekv: ratio must be in (0, 1], got {ratio}")
        if topk_blocks is not None and topk_blocks < 1:
            raise ValueError(f"rekv: topk_blocks must be >= 1, got {topk_blocks}")
        self.mode, self.ratio = mode, float(ratio)
        self.topk_blocks = topk_blocks if (topk_blocks is not None or mode == "legacy") else RETRIEVE_SIZE
        self.retrieves_at_frame = mode != "question"
        self._inputs = None

    @property
    def config(self) -> dict:
        return dict(mode=self.mode, topk_blocks=self.topk_blocks, ratio=self.ratio)

    def bind(self, model) -> None:
        """Keep the model's per-layer attention inputs (RoPE cos/sin of each step) for pre-RoPE scoring."""
        if self.mode != "legacy":
            from ..runtime.capture import attach

            self._inputs = attach(model)

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.head_dim = head_dim
        # Per layer: block id of every cache position, and each block's mean key [Hkv, D].
        self._block_of = [torch.empty(0, dtype=torch.long) for _ in range(n_layers)]
        self._means: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]
        self._held: list[torch.Tensor | None] = [None] * n_layers  # question mode: the answer's retrieved set
        self._last_stage: list[Stage | None] = [None] * n_layers

    def _unrope(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """Post-RoPE [H, N, D] of this step -> pre-RoPE, with this step's (cos, sin) of ``layer``."""
        if self._inputs is None:
            raise ValueError(f"rekv mode {self.mode!r} scores pre-RoPE keys and needs the model's RoPE: run it in a "
                             "StreamingSession (which binds it), or call bind(model) first; mode='legacy' does not")
        entry = self._inputs[layer]
        if entry is None or entry[1] is None:
            raise ValueError(f"rekv: no RoPE (cos, sin) captured for layer {layer} in this step")
        from ..runtime.capture import unrope

        cos, sin = entry[1]
        cos, sin = cos[0, -x.shape[1]:].to(x.device, torch.float32), sin[0, -x.shape[1]:].to(x.device, torch.float32)
        return unrope(x.float(), cos, sin)

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        n = new_keys.shape[1]
        blocks = self._block_of[layer]
        if start != blocks.numel():
            raise ValueError(f"rekv: layer {layer} observed position {start}, expected {blocks.numel()} "
                             "(observe must see every appended token in order; call reset() per stream)")
        k = new_keys.detach().float() if self.mode == "legacy" else self._unrope(layer, new_keys.detach())
        bid = len(self._means[layer])
        self._block_of[layer] = torch.cat([blocks, torch.full((n,), bid, dtype=torch.long)])
        self._means[layer].append(k.mean(1).cpu())
        if stage == "frame":
            self._held[layer] = None  # a new frame ends the question's answer: the next question retrieves anew

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        hkv, n_c = keys.shape[0], int(candidates.numel())
        if n_c == 0:
            return None
        if self.mode == "question":
            if stage == "frame":
                return None  # video encoding: the local window covers the span, no retrieval
            held = self._held[layer]
            if held is not None:
                chosen = held[held < int(candidates.max()) + 1]
                chosen = chosen[torch.isin(chosen, candidates.cpu())].to(candidates.device)
                return Selection([chosen.clone() for _ in range(hkv)], n_c,
                                 dict(rows=0, scored=0, score_dims=self.head_dim, score_macs=0, blocks=0,
                                      blocks_selected=0, retrieved_now=0, select_s=0.0))
        sel = self._score_and_pick(layer, query, candidates, hkv, n_c)
        if self.mode == "question":
            self._held[layer] = sel.indices[0].detach().cpu()
        return sel

    def _score_and_pick(self, layer: int, query: torch.Tensor, candidates: torch.Tensor, hkv: int,
                        n_c: int) -> Selection:
        with Stopwatch() as sw:
            block_of = self._block_of[layer]
            if block_of.numel() < int(candidates.max()) + 1:
                raise ValueError(f"rekv: layer {layer} was asked about position {int(candidates.max())} it never "
                                 "observed (the runtime must call observe before select)")
            cand_block = block_of[candidates.cpu()]                          # [C]
            blocks = torch.unique(cand_block)                                 # sorted block ids
            means = torch.stack([self._means[layer][b] for b in blocks.tolist()])  # [B, Hkv, D]
            q = query.detach().float() if self.mode == "legacy" else self._unrope(layer, query.detach())
            hq = q.shape[0]
            q_mean = q.mean(1).cpu().reshape(hkv, hq // hkv, -1).sum(1)      # [Hkv, D]
            # Σ over query heads of q̄_h · k̄_{b, kv(h)}  ==  Σ_g (Σ_{h in g} q̄_h) · k̄_{b,g}
            score = torch.einsum("bgd,gd->b", means, q_mean)                   # [B]
            n_blocks = int(blocks.numel())
            if self.mode == "legacy" and self.topk_blocks is None:
                k = max(1, int(self.ratio * n_blocks))
            else:
                k = self.topk_blocks
            k = min(k, n_blocks)  # all blocks when there are no more than the budget
            top = torch.sort(score, descending=True, stable=True).indices[:k]
            keep = torch.isin(cand_block, blocks[top]).to(candidates.device)
            chosen = candidates[keep]
        stats = dict(rows=hq, scored=n_blocks, score_dims=self.head_dim, score_macs=hq * n_blocks * self.head_dim,
                     blocks=n_blocks, blocks_selected=k, retrieved_now=1, select_s=sw.seconds)
        return Selection([chosen.clone() for _ in range(hkv)], n_c, stats)
