"""The policy seam of the study: route the runtime to one method's policy and record what it selected.

:class:`StudyPolicy` is a :class:`~vrex_lib.retrieval.base.RetrievalPolicy` holding one or more member policies
({method name: policy, None = full attention}). Two routes:

* ``route = None`` (the shared document prefill of the methods that attend densely to the document, D162): every
  member observes every step, ``select`` returns None, so the document is encoded with full attention -- exactly
  what each of these methods does at its own frame steps;
* ``route = name``: only that member observes and selects, and its selection is what the runtime attends to.

While :attr:`recording` (the question and answer), each text-stage step becomes a
:class:`~vrex_lib.workload.shadow.StepRecord` (the workload measurement's record, so
:func:`vrex_lib.workload.measure.summarize` gives the same statistics) plus the **recall** of each target span
(:attr:`targets`, absolute cache positions): per consulted (layer, KV head), the share of the target's positions
that the head attends to -- a position among the candidates counts only if the returned selection holds it;
sinks, the recent window and the step's own tokens are attended anyway (D163).

:class:`TextStageOnly` turns a method's frame-stage retrieval off (dense document encoding, retrieval at the
question and answer only), the way InfiniGen and ReKV's reference retrieve. :class:`ExactTopK` is a reference
(exact attention scores, fixed budget), not a method of the paper.

:func:`fork` copies a session (KV store, policies, trace) after the shared prefill, sharing the model and its
capture hooks, so each method answers from the same encoded document.
"""
from __future__ import annotations

import copy
import math

import numpy as np
import torch

from ..retrieval.base import PolicyBase
from ..selection import Selection
from ..workload.shadow import StepRecord


class TextStageOnly(PolicyBase):
    """``policy`` with its frame-stage selection replaced by full attention; everything else forwarded
    (``observe`` still sees every token, so HC tables and block means are built as usual)."""

    retrieves_at_frame = False

    def __init__(self, policy: PolicyBase):
        self.inner = policy
        self.name = f"{policy.name}@text"

    def __getattr__(self, item):  # cfg, config, table(), ... of the wrapped policy (the hooks are forwarded below)
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    # ---- the hooks, forwarded explicitly (PolicyBase's defaults would otherwise hide the wrapped policy's) -----
    @property
    def retrieval_from_layer(self) -> int | None:
        return self.inner.retrieval_from_layer

    @property
    def tables(self) -> list | None:
        return self.inner.tables

    @property
    def policies(self):
        return self.inner.policies

    def bind(self, model) -> None:
        self.inner.bind(model)

    def bind_store(self, store) -> None:
        self.inner.bind_store(store)

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.inner.reset(n_layers, n_kv_heads, head_dim)

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: str, frame_id: int | None) -> None:
        self.inner.observe(layer, new_keys, start, stage, frame_id)

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: str) -> Selection | None:
        return None if stage == "frame" else self.inner.select(layer, query, keys, candidates, stage)


class ExactTopK(PolicyBase):
    """A reference, not a method of the paper: at the question and answer each KV head keeps the ``frac`` of the
    candidates with the largest exact attention (softmax of q·k/√d over the whole cache, summed over the head's
    query rows); frame steps attend densely. It shows how little the task needs when the scores are exact
    (docs/DECISIONS.md D166)."""

    name = "exact"
    retrieves_at_frame = False

    def __init__(self, frac: float = 0.01):
        if not 0.0 < frac <= 1.0:
            raise ValueError(f"exact top-k: frac must be in (0, 1], got {frac}")
        self.frac = float(frac)

    @property
    def config(self) -> dict:
        return dict(frac=self.frac)

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.head_dim = head_dim

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: str, frame_id: int | None) -> None:
        pass

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: str) -> Selection | None:
        if stage == "frame" or candidates.numel() == 0:
            return None
        hkv = keys.shape[0]
        rows = query.detach().float().reshape(hkv, -1, self.head_dim)  # query head h reads KV head h // group
        logits = torch.matmul(rows, keys.detach().float().transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = torch.softmax(logits, -1)[:, :, candidates].sum(1)      # [Hkv, C]
        k = max(1, int(self.frac * candidates.numel()))
        # stable descending sort: ties go to the lower position
        top = [torch.sort(torch.sort(probs[g], descending=True, stable=True).indices[:k]).values for g in range(hkv)]
        return Selection([candidates[t] for t in top], int(candidates.numel()), dict(k=k))


def _per_head(n_clusters: torch.Tensor, n_heads: int) -> np.ndarray:
    v = n_clusters.detach().cpu().numpy().astype(np.float64)
    return np.broadcast_to(v, (n_heads,)).copy() if v.size == 1 else v


class StudyPolicy(PolicyBase):
    """Routes to member policies and records the text-stage selections (see the module docstring).

    members: {method: policy or None (full attention)}; set :attr:`store` to the session's KV store, :attr:`route`,
    :attr:`targets` ({name: int64 [n] cache positions}) and :attr:`recording`; read :attr:`records` and
    :attr:`recall` ({name: [L, H] per recorded step}) after :meth:`end_step`.
    """

    name = "longctx"
    retrieves_at_frame = True

    def __init__(self, members: dict, dense_layers: int):
        self.members = dict(members)
        self.policies = {m: p for m, p in self.members.items() if p is not None}  # bound by the session
        self.dense_layers = int(dense_layers)
        self.route: str | None = None
        self.store = None
        self.targets: dict[str, torch.Tensor] = {}
        self.recording = False
        self.records: list[StepRecord] = []
        self.recall: list[dict[str, np.ndarray]] = []
        self._cur: StepRecord | None = None
        self._cur_recall: dict[str, np.ndarray] = {}
        self._prev: dict[int, list[np.ndarray]] = {}

    # ---- the RetrievalPolicy protocol ----------------------------------------------------------------------
    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.L, self.H = n_layers, n_kv_heads
        for p in self.policies.values():
            p.reset(n_layers, n_kv_heads, head_dim)
        self.records, self.recall, self._prev, self._cur = [], [], {}, None

    def _active(self) -> dict:
        return self.members if self.route is None else {self.route: self.members[self.route]}

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: str, frame_id: int | None) -> None:
        if layer == 0:  # the first layer of a forward: a new step begins
            self.end_step()
            if self.recording and stage == "text":
                self._begin(int(start), int(new_keys.shape[1]))
        for m, p in self._active().items():
            if p is None:
                continue
            if self._cur is not None and m == self.route and p.tables is not None:
                t = p.tables[layer]
                self._cur.clusters_before[layer] = np.zeros(self.H) if t is None else _per_head(t.n_clusters, self.H)
            p.observe(layer, new_keys, start, stage, frame_id)

    @property
    def retrieval_from_layer(self) -> int:
        """The first layer the runtime consults this policy at: the routed member's own (StreamingLLM and ReKV's
        reference mode set 0), as the runtime would consult that member alone; ``dense_layers`` otherwise."""
        p = None if self.route is None else self.members[self.route]
        first = None if p is None else p.retrieval_from_layer
        return self.dense_layers if first is None else int(first)

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: str) -> Selection | None:
        if self.route is None:
            return None  # shared dense prefill: attend to everything
        p = self.members[self.route]
        sel = None if p is None else p.select(layer, query, keys, candidates, stage)
        if self._cur is not None:
            self._record(layer, p, sel, keys, candidates)
        return sel

    # ---- recording -----------------------------------------------------------------------------------------
    def _begin(self, start: int, n_new: int) -> None:
        L, H = self.L, self.H
        rec = StepRecord("text", "decode" if n_new == 1 else "question", start, n_new, np.zeros(L), np.zeros(L),
                         np.zeros((L, H)), np.zeros((L, H)), np.full((L, H), -1.0), np.zeros(L, bool),
                         np.full((L, H), -1.0))
        routed = self.members.get(self.route)
        if routed is not None and routed.tables is not None:
            for f in ("clusters", "clusters_before"):
                setattr(rec, f, np.full((L, H), np.nan))
            for f in ("table_tokens", "prefix_frac", "hc_bytes", "rows"):
                setattr(rec, f, np.full(L, np.nan))
        self._cur = rec
        self._cur_recall = {k: np.full((L, H), np.nan) for k in self.targets}

    def end_step(self) -> None:
        """Close the step being recorded (the session has no end-of-step call; the next step's layer 0 or the
        driver calls this)."""
        if self._cur is not None:
            self.records.append(self._cur)
            self.recall.append(self._cur_recall)
        self._cur, self._cur_recall = None, {}

    def _record(self, layer: int, p, sel, keys: torch.Tensor, candidates: torch.Tensor) -> None:
        rec, H, s = self._cur, self.H, int(keys.shape[1])
        hb = self.store.host_boundary(s)
        # Host NumPy copies: membership masks over the cache cost a fraction of torch.isin's sorts (same counts).
        cand = candidates.detach().cpu().numpy()
        idx = [cand] * H if sel is None else [i.detach().cpu().numpy() for i in sel.indices]
        rec.consulted[layer] = True
        rec.n_cand[layer] = int(cand.size)
        rec.n_off_cand[layer] = int(np.count_nonzero(cand < hb))
        prev = self._prev.get(layer)
        for g in range(H):
            ix = idx[g]
            rec.sel[layer, g] = int(ix.size)
            rec.sel_off[layer, g] = int(np.count_nonzero(ix < hb))
            if prev is not None:  # selected now and by the previous recorded step (reuse, as the shadow counts it)
                hit = _member(ix, prev[g], s)
                rec.reused_all[layer, g] = int(np.count_nonzero(hit))
                rec.reused_off[layer, g] = int(np.count_nonzero(hit[ix < hb]))
        self._prev[layer] = [ix.copy() for ix in idx]
        for name, pos in self.targets.items():
            self._cur_recall[name][layer] = _recall_np(pos.detach().cpu().numpy(), cand, idx, s)
        if p is not None and p.tables is not None:
            t = p.tables[layer]
            rec.clusters[layer] = _per_head(t.n_clusters, H)
            rec.table_tokens[layer] = t.n_tokens
            rec.hc_bytes[layer] = t.nbytes()
            if sel is not None:
                rec.prefix_frac[layer] = float(sel.stats.get("prefix_frac", np.nan))
                rec.rows[layer] = float(sel.stats.get("rows", np.nan)) / H


def _member(x: np.ndarray, of: np.ndarray, n: int) -> np.ndarray:
    """Bool [len(x)]: which of the cache positions ``x`` are in ``of`` (both < ``n``, or ``of`` may reach past)."""
    seen = np.zeros(max(n, int(of.max()) + 1 if of.size else 0, int(x.max()) + 1 if x.size else 0), bool)
    seen[of] = True
    return seen[x]


def _recall_np(pos: np.ndarray, candidates: np.ndarray, selected: list[np.ndarray], n: int) -> np.ndarray:
    """:func:`target_recall` on host arrays (the same values)."""
    if pos.size == 0:
        return np.full(len(selected), np.nan)
    not_cand = ~_member(pos, candidates, n)
    return np.array([float(np.mean(not_cand | _member(pos, ix, n))) for ix in selected])


def target_recall(positions: torch.Tensor, candidates: torch.Tensor, selected: list[torch.Tensor]) -> np.ndarray:
    """Per KV head, the share of ``positions`` [n] attended when head g selects ``selected[g]`` among
    ``candidates`` [C]: a candidate position counts only if selected; a non-candidate (sink, recent window, the
    step's own tokens) is attended anyway. Returns float [H] (NaN for an empty target)."""
    pos = positions.to(candidates.device).long()
    if pos.numel() == 0:
        return np.full(len(selected), np.nan)
    is_cand = torch.isin(pos, candidates)
    out = np.empty(len(selected))
    for g, ix in enumerate(selected):
        hit = ~is_cand | torch.isin(pos, ix.to(pos.device))
        out[g] = float(hit.float().mean())
    return out


def fork(sess, *others) -> tuple:
    """Copies of ``sess`` (a StreamingSession) and of ``others`` (e.g. its policy), made together so references
    between them are kept: the copy continues independently (KV store, policy state and trace are copied), while
    the model, its modules and the capture lists (:func:`vrex_lib.runtime.capture.attach`, ``attach_pre_rope``) are
    shared, so a policy bound to the model keeps reading the live capture. Returns ``(sess_copy, *others_copies)``."""
    model = sess.model
    memo = {id(model): model}
    for obj in (model.llm, model.vision, model.connector, model.tokenizer,
                getattr(model, "_vrex_attn_inputs", None), getattr(model, "_vrex_pre_rope", None)):
        if obj is not None:
            memo[id(obj)] = obj
    for net in (model.llm, model.vision, model.connector):
        for mod in net.modules():
            memo[id(mod)] = mod
        for prm in net.parameters():
            memo[id(prm)] = prm
    with torch.inference_mode():
        return copy.deepcopy((sess, *others), memo)
