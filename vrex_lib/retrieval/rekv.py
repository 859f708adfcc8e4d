"""``rekv`` — ReKV's frame-block retrieval (Di et al., ICLR 2025; code: Becomebright/ReKV).

ReKV keeps one representative key per *block* (= one frame): the mean of the block's keys. What the reference
code does (``model/attention/kv_cache_manager.py``, ``ContextManager._calc_block_topk`` and
``get_retrieved_kv``; ``model/attention/rekv_attention.py``, ``rekv_attention_forward``; the QA driver
``model/llava_onevision_rekv.py``, ``question_answering``; defaults in ``video_qa/base.py``):

* **Pre-RoPE scoring.** The block keys and the query are the projections *before* rotary embedding
  (``global_q``, ``global_k`` = ``project_q/k`` outputs; RoPE is applied only to the local window). A block's
  mean key is taken and kept in the model's dtype; the score of block b is the dot product of the question's
  query averaged over its tokens (model dtype) with the block's mean key, both GQA-expanded to every query head
  and concatenated over heads (one decision per layer, shared by all heads), in fp32 for offloaded blocks
  (``get_cosine_similarity``) and in the model's dtype while every frame is still in the local window.
* **Every layer.** ``patch_hf`` replaces the attention of every decoder layer, layer 0 included.
* **Once per question.** ``question_answering`` runs a question-only pass with retrieval switched on
  (``set_retrieval``): each layer's ``get_retrieved_kv(global_q)`` chooses its top-k blocks and returns the
  initial tokens plus those blocks as a plain KV cache; the question's own keys are not added to it
  (``updata_kv_cache = False``). ``reset_retrieval`` then clears the indices, and the answer -- its prompt, which
  repeats the question, and every generated token -- runs on that plain cache: it attends to the same retrieved
  set throughout, its own KV is appended there and dropped after the answer, and the video cache never holds it.
* **Budget.** ``topk`` (``--retrieve_size``) = 64 blocks; all blocks when there are no more than that.
* **Attention.** The initial tokens (``n_init``: the prompt before the video) plus the retrieved blocks, with
  positions re-assigned contiguously (RoPE applied over the concatenated window).
* **Video encoding** attends the initial tokens and a sliding local window of ``n_local`` tokens
  (``--n_local`` = 15,000), without retrieval.

Here (``mode="question"``, the default): the pre-RoPE queries and keys are the outputs of the model's own
``q_proj``/``k_proj`` (:func:`vrex_lib.runtime.capture.attach_pre_rope`; the session binds the policy to the
model), block means and the question's mean query are taken in the model's dtype and the scores in fp32 (the
offloaded-block path); ties go to the earlier frame (the reference leaves them to ``torch.topk``). The
policy is consulted from layer 0 (:attr:`ReKV.retrieval_from_layer`), overriding the runtime's dense layer 0.
The retrieval decision is made at the first text-stage step after the frames (in the live layout that step
*is* the question; in the COIN layout the question precedes the frames, so it is the ``]\\nAssistant:`` step
whose queries attend to the question and the frames) and held for every later text step until a frame
arrives, when the next question retrieves anew; the question and answer tokens stay in the one cache this
runtime keeps, always attended as recent tokens. Frame steps attend densely: 15,000 tokens hold about 1,360
frames of this runtime's 10 tokens plus an interval token, more than the 1,200-frame limit of a COIN sample.
Positions are *not* re-assigned: the runtime attends selected tokens at their original positions
(docs/DECISIONS.md D60 says why and what that changes).

``mode="frame"`` is the V-Rex paper's ReKV row (Table II marks ReKV as retrieving during frame processing):
the same pre-RoPE block scoring and budget, decided afresh at every step of both stages from that step's
queries, from the runtime's first retrieving layer (layer 0 dense, as for every method the paper compares).
``mode="legacy"``, kept for comparison, scores post-RoPE keys at every step with a ``topk_frac`` budget
(``topk_blocks`` or ``floor(topk_frac × blocks)``), means and scores in fp32.
"""
from __future__ import annotations

import torch

from ..config import check_int, check_real
from ..runtime.capture import attach_pre_rope
from ._common import Stopwatch
from .base import PolicyBase, Selection, Stage

REKV_MODES: tuple[str, ...] = ("question", "frame", "legacy")
RETRIEVE_SIZE = 64  # Becomebright/ReKV video_qa/base.py --retrieve_size (load_model(topk=64)): frames per question


class ReKV(PolicyBase):
    name = "rekv"
    #: The default (reference) mode retrieves only for questions; ``mode='frame'``/``'legacy'`` instances set True.
    retrieves_at_frame = False
    #: Old keyword -> the option that holds its meaning (docs/DECISIONS.md D371).
    renamed_options = {"ratio": "topk_frac"}

    def __init__(self, mode: str = "question", topk_blocks: int | None = None, topk_frac: float = 0.5):
        if mode not in REKV_MODES:
            raise ValueError(f"rekv: unknown mode {mode!r}: choose one of {', '.join(REKV_MODES)}")
        topk_frac = check_real("rekv", "topk_frac (fraction of blocks kept)", topk_frac, 0.0, 1.0, lo_open=True)
        if topk_blocks is not None:
            topk_blocks = check_int("rekv", "topk_blocks", topk_blocks, 1)
        self.mode, self.topk_frac = mode, float(topk_frac)
        self.topk_blocks = topk_blocks if (topk_blocks is not None or mode == "legacy") else RETRIEVE_SIZE
        self.retrieves_at_frame = mode != "question"
        #: First layer the runtime consults this policy at (None: ``RuntimeConfig.dense_layers``). The reference
        #: patches every layer's attention, layer 0 included; the other modes keep the runtime's dense layer 0.
        self.retrieval_from_layer: int | None = 0 if mode == "question" else None
        self._pre = None

    @property
    def config(self) -> dict:
        return dict(mode=self.mode, topk_blocks=self.topk_blocks, topk_frac=self.topk_frac)

    def bind(self, model) -> None:
        """Keep the model's per-layer q/k projection outputs (the pre-RoPE tensors) for pre-RoPE scoring."""
        if self.mode != "legacy":
            self._pre = attach_pre_rope(model)

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.head_dim = head_dim
        # Per layer: block id of every cache position, and each block's mean key [Hkv, D] (the keys' dtype).
        self._block_of = [torch.empty(0, dtype=torch.long) for _ in range(n_layers)]
        self._means: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]
        self._held: list[torch.Tensor | None] = [None] * n_layers  # question mode: the answer's retrieved set

    def _pre_rope(self, layer: int, which: int, n: int, n_heads: int) -> torch.Tensor:
        """This step's pre-RoPE queries (``which`` 0) or keys (1) of ``layer`` as [H, N, D], in the model's dtype."""
        if self._pre is None:
            raise ValueError(f"rekv mode {self.mode!r} scores pre-RoPE keys and needs the model's q/k projections: run "
                             "it in a StreamingSession (which binds it), or call bind(model) first; mode='legacy' "
                             "does not")
        x = self._pre[layer][which]
        if x is None or x.shape[1] != n:
            got, what = "nothing" if x is None else f"{x.shape[1]} tokens", "queries" if which == 0 else "keys"
            raise ValueError(f"rekv: layer {layer}'s captured pre-RoPE {what} hold {got}, the step has {n} (the "
                             "policy must be bound to the model that runs the step)")
        return x[0].detach().reshape(n, n_heads, self.head_dim).transpose(0, 1)

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        hkv, n = new_keys.shape[0], new_keys.shape[1]
        blocks = self._block_of[layer]
        if start != blocks.numel():
            raise ValueError(f"rekv: layer {layer} observed position {start}, expected {blocks.numel()} "
                             "(observe must see every appended token in order; call reset() per stream)")
        # The reference keeps each block's mean in the model's dtype (global_block_k.mean(dim=-2)); legacy: fp32.
        k = new_keys.detach().float() if self.mode == "legacy" else self._pre_rope(layer, 1, n, hkv)
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

    def block_scores(self, layer: int, query: torch.Tensor, blocks: torch.Tensor, hkv: int) -> torch.Tensor:
        """Scores [B] (fp32) of ``blocks`` (block ids) of ``layer`` for this step's ``query`` [Hq, N, D].

        Σ over query heads h of q̄_h · k̄_{b, kv(h)}: the query mean (over the step's tokens, model dtype) and the
        block means GQA-expanded to every query head and concatenated, one fp32 dot product per block, as the
        reference's ``get_cosine_similarity`` computes it.
        """
        hq = query.shape[0]
        q = query.detach().float() if self.mode == "legacy" else self._pre_rope(layer, 0, query.shape[1], hq)
        q_mean = q.mean(1).cpu().float().reshape(-1)                                    # [Hq*D]
        means = torch.stack([self._means[layer][b] for b in blocks.tolist()])           # [B, Hkv, D]
        expanded = means.repeat_interleave(hq // hkv, dim=1).float().reshape(len(blocks), -1)  # [B, Hq*D]
        return expanded @ q_mean

    def _score_and_pick(self, layer: int, query: torch.Tensor, candidates: torch.Tensor, hkv: int,
                        n_c: int) -> Selection:
        with Stopwatch() as sw:
            block_of = self._block_of[layer]
            if block_of.numel() < int(candidates.max()) + 1:
                raise ValueError(f"rekv: layer {layer} was asked about position {int(candidates.max())} it never "
                                 "observed (the runtime must call observe before select)")
            cand_block = block_of[candidates.cpu()]                          # [C]
            blocks = torch.unique(cand_block)                                 # sorted block ids
            score = self.block_scores(layer, query, blocks, hkv)              # [B]
            n_blocks, hq = int(blocks.numel()), query.shape[0]
            if self.mode == "legacy" and self.topk_blocks is None:
                k = max(1, int(self.topk_frac * n_blocks))
            else:
                k = self.topk_blocks
            k = min(k, n_blocks)  # all blocks when there are no more than the budget
            top = torch.sort(score, descending=True, stable=True).indices[:k]
            keep = torch.isin(cand_block, blocks[top]).to(candidates.device)
            chosen = candidates[keep]
        stats = dict(rows=hq, scored=n_blocks, score_dims=self.head_dim, score_macs=hq * n_blocks * self.head_dim,
                     blocks=n_blocks, blocks_selected=k, retrieved_now=1, select_s=sw.seconds)
        return Selection([chosen.clone() for _ in range(hkv)], n_c, stats)
