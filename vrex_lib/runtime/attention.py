"""The retrieval-aware attention function, registered with transformers' ``AttentionInterface``.

No model class is patched: :func:`register` adds the function under the name ``"vrex"`` (plus the standard SDPA
mask function under the same name in ``AttentionMaskInterface``) and :func:`~vrex_lib.runtime.model.build_model`
calls ``llm.set_attn_implementation("vrex")``. The session passes its per-step context to the model's forward
as the keyword ``vrex_step`` (transformers forwards unknown keywords down to the attention function). Without
it the function is exactly transformers' SDPA attention, so a plain ``llm(...)`` call is unaffected.

Per layer ℓ and forward step (docs/DECISIONS.md D5; the contract of :mod:`vrex_lib.retrieval.base`):

1. ``policy.observe(ℓ, new_keys [Hkv, N, D], start, stage, frame_id)`` with the step's post-RoPE keys;
2. if ℓ >= ``dense_layers`` (or the policy's own ``retrieval_from_layer`` when it sets one: ReKV's reference
   mode retrieves at layer 0 too) and there are candidates, ``sel = policy.select(ℓ, query [Hq, N, D],
   keys [Hkv, S, D], candidates, stage)``; candidates = positions [n_sink, window_start), i.e. all but the
   always-attended ones: the sinks [0, n_sink) (system prompt), the recent frame window and everything after
   it [window_start, start), and the step's own tokens [start, S) (causal among themselves);
3. ``sel is None`` -> attend to everything; else each KV head g attends to sinks ∪ sel.indices[g] ∪ recent ∪
   own, its K/V read through :meth:`KVStore.gather` (booked by tier); a per-row selection (``sel.rows``, InfiniGen
   on a multi-token step) fetches the union and masks each query token to its own set;
4. per (layer, KV head) counts land in the step's record (-> :mod:`vrex_lib.runtime.trace`), including
   ``reused``: how many of the selected positions the previous applied step of the same stage also selected in
   that (layer, KV head) -- what a "Retrieved KV" region (Fig. 12) holding the last selection would not refetch.

:func:`vrex_attention` runs these as named steps: :func:`_check_step`, the policy's ``observe``, :func:`_consult`,
:func:`_track_reuse`, then :func:`_attend_all` or :func:`_gather_selected` + :func:`_attend_selected`, and
:func:`_measure_error` when asked.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from ..keys import register_attention

ATTN_IMPL = "vrex"


@dataclass
class StepContext:
    """Everything the attention function needs about the current forward step (batch 1).

    start: cache position of the step's first token; n_new: its token count; n_sink: pinned prompt tokens;
    window_start: first always-attended recent position; candidates: int64 [C] = arange(n_sink, window_start).
    The ``[L, Hkv]`` arrays are filled per layer: selected (positions chosen among candidates), applied (policy
    consulted), attended (tokens each head attended), attn_err (relative error vs full attention, NaN if not
    measured), reused (selected positions also selected by the previous applied step of the same stage in this
    (layer, KV head); -1 = no previous step). ``stats`` maps a policy stat name to a float array [L] or [L, Hkv].
    ``prev_selection``: the session's memory {(stage, layer): per-head index tensors} of the last selection
    (None = do not track reuse).
    """

    policy: object | None
    store: object
    stage: str
    kind: str
    frame_id: int | None
    start: int
    n_new: int
    n_sink: int
    window_start: int
    dense_layers: int = 1
    measure_attn_error: bool = False
    strict: bool = False
    candidates: torch.Tensor = None
    selected: np.ndarray = None
    applied: np.ndarray = None
    attended: np.ndarray = None
    attn_err: np.ndarray = None
    reused: np.ndarray = None
    prev_selection: dict | None = None
    stats: dict = field(default_factory=dict)

    def __post_init__(self):
        L, H = self.store.n_layers, self.store.n_kv_heads
        self.selected = np.zeros((L, H), np.int64)
        self.applied = np.zeros((L,), bool)
        self.attended = np.zeros((L, H), np.int64)
        self.attn_err = np.full((L, H), np.nan, np.float32)
        self.reused = np.full((L, H), -1, np.int64)

    @property
    def n_candidates(self) -> int:
        return max(0, self.window_start - self.n_sink)

    def record_stats(self, layer: int, stats: dict) -> None:
        L, H = self.store.n_layers, self.store.n_kv_heads
        for k, v in stats.items():
            if isinstance(v, torch.Tensor):
                v = v.tolist()
            per_head = isinstance(v, (list, tuple, np.ndarray)) and len(v) == H
            if not per_head and not isinstance(v, (int, float, np.integer, np.floating, bool)):
                continue  # non-numeric stats (e.g. names) are not traced
            arr = self.stats.get(k)
            if arr is None:
                arr = self.stats[k] = np.full((L, H) if per_head else (L,), np.nan, np.float64)
            arr[layer] = np.asarray(v, np.float64) if per_head and arr.ndim == 2 else (
                float(np.mean(v)) if per_head else float(v))


def _dense(query, key, value, scaling, start):
    """Full causal attention: query [1, Hq, Lq, D], key/value [1, Hkv, S, D] -> [1, Hq, Lq, D]."""
    lq, s = query.shape[2], key.shape[2]
    mask = None
    if lq > 1:
        mask = torch.ones(lq, s, dtype=torch.bool, device=query.device).tril(diagonal=start)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling, enable_gqa=True)


@dataclass
class BatchedStep:
    """One forward step of several sessions in lockstep (:mod:`vrex_lib.runtime.batch`): batch row b is the session
    whose context is ``rows[b]`` -- its own KV store, policy, candidates and trace record. ``captures``: the model's
    capture lists (:mod:`vrex_lib.runtime.capture`) whose entries hold the whole batch; around row b's policy calls
    the entries of the current and the previous layer (the ones a policy reads: ReKV's pre-RoPE q/k of its layer,
    InfiniGen's previous-layer input) are replaced by row b's slice, so a policy sees batch 1 as when it runs alone."""

    rows: list[StepContext]
    captures: tuple = ()


def vrex_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask,
                   scaling: float | None = None, dropout: float = 0.0,
                   vrex_step: StepContext | BatchedStep | None = None, **kwargs):
    """The registered attention function; returns (attn_output [B, Lq, Hq, D], None). A :class:`BatchedStep`
    runs each batch row as its own stream (:func:`_attend` per row, on that row's store)."""
    if vrex_step is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    layer = int(module.layer_idx)
    if isinstance(vrex_step, BatchedStep):  # key/value are the step's new tokens; each row's cache is in its store
        outs = []
        for b, step in enumerate(vrex_step.rows):
            lay = step.store.layers[layer]
            with _row_captures(vrex_step.captures, layer, b):
                outs.append(_attend(layer, query[b:b + 1], lay.keys, lay.values, scaling, step))
        return torch.cat(outs, 0).transpose(1, 2), None
    return _attend(layer, query, key, value, scaling, vrex_step).transpose(1, 2), None


class _row_captures:
    """Context manager: the capture entries of ``layer`` and ``layer - 1`` narrowed to batch row ``b``."""

    def __init__(self, captures: tuple, layer: int, b: int):
        self.captures, self.layers, self.b, self.saved = captures, [x for x in (layer - 1, layer) if x >= 0], b, []

    def __enter__(self):
        b = self.b
        for lst in self.captures:
            for i in self.layers:
                e = lst[i]
                self.saved.append((lst, i, e))
                if isinstance(e, list):  # pre-RoPE [q, k]
                    lst[i] = [None if x is None else x[b:b + 1] for x in e]
                elif isinstance(e, tuple):  # (hidden_states, (cos, sin)); the rotary tables have batch 1
                    lst[i] = (None if e[0] is None else e[0][b:b + 1], e[1])
        return self

    def __exit__(self, *exc):
        for lst, i, e in reversed(self.saved):
            lst[i] = e
        self.saved = []
        return False


def _attend(layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling: float | None,
            step: StepContext) -> torch.Tensor:
    """One stream's attention at ``layer``: query [1, Hq, Lq, D], its cache key/value [1, Hkv, S, D] ->
    [1, Hq, Lq, D]. In the order of the module docstring: check the step, let the policy observe the new keys,
    consult it, count the reuse, then attend to everything or to the selection, and measure the error."""
    start = _check_step(step, layer, query, key)
    if step.policy is not None:
        step.policy.observe(layer, key[0, :, start:], start, step.stage, step.frame_id)
    sel = _consult(step, layer, query, key)
    if step.applied[layer]:
        _track_reuse(step, layer, key.shape[1], None if sel is None else sel.indices)
    if sel is None:
        return _attend_all(step, layer, query, key, value, scaling, start)
    out = _attend_selected(step, layer, sel, query, _gather_selected(step, layer, sel, key), scaling)
    if step.measure_attn_error:
        _measure_error(step, layer, out, query, key, value, scaling, start)
    return out


def _check_step(step: StepContext, layer: int, query: torch.Tensor, key: torch.Tensor) -> int:
    """The cache must hold what the session expects (``start`` + this step's tokens); returns ``start``."""
    lq, s = query.shape[2], key.shape[2]
    start = s - lq
    if start != step.start or lq != step.n_new:
        raise RuntimeError(f"layer {layer}: cache holds {s} tokens with {lq} new, the session expected "
                           f"start {step.start} and {step.n_new} new (was the KVStore shared or cropped?)")
    return start


def _consult(step: StepContext, layer: int, query: torch.Tensor, key: torch.Tensor):
    """Ask the policy for its selection when this layer is one it is consulted at (``retrieval_from_layer``, else
    the runtime's ``dense_layers``) and there are candidates; check it and record its stats. None = everything."""
    policy = step.policy
    if policy is None or step.n_candidates <= 0:
        return None
    first = policy.retrieval_from_layer
    if layer < (step.dense_layers if first is None else first):
        return None
    step.applied[layer] = True
    sel = policy.select(layer, query[0], key[0], step.candidates, step.stage)
    if sel is not None:
        _check(sel, step, layer, key.shape[1])
        if sel.stats:
            step.record_stats(layer, sel.stats)
    return sel


def _attend_all(step: StepContext, layer: int, query, key, value, scaling, start: int) -> torch.Tensor:
    """Full causal attention over the whole cache, every token booked as read ([1, Hq, Lq, D])."""
    out = _dense(query, key, value, scaling, start)
    step.store.account_all(layer)
    step.selected[layer] = step.n_candidates
    step.attended[layer] = key.shape[2]
    return out


def _gather_selected(step: StepContext, layer: int, sel, key: torch.Tensor) -> list:
    """Per KV head g, the K/V of sinks ∪ sel.indices[g] ∪ recent ∪ own, read through the KV store (booked by
    tier): [(k [n_g, D], v [n_g, D])]."""
    hkv, s = key.shape[1], key.shape[2]
    if key.device.type == "cpu" and all(ix.device.type == "cpu" for ix in sel.indices):  # NumPy: cheaper ops
        sinks, recent_own = np.arange(0, step.n_sink), np.arange(step.window_start, s)
        idx = [torch.from_numpy(np.concatenate([sinks, sel.indices[g].numpy(), recent_own])) for g in range(hkv)]
    else:
        sinks = torch.arange(0, step.n_sink, device=key.device)
        recent_own = torch.arange(step.window_start, s, device=key.device)
        idx = [torch.cat([sinks, sel.indices[g].to(key.device), recent_own]) for g in range(hkv)]
    return step.store.gather(layer, idx)


def _attend_selected(step: StepContext, layer: int, sel, query: torch.Tensor, kv: list, scaling) -> torch.Tensor:
    """Each KV head's query group attends to its gathered K/V ([1, Hq, Lq, D]); the step's own tokens (the last
    ``lq`` columns) causally, and on a per-row selection each query token only to its own set."""
    _, hq, lq, d = query.shape
    hkv = len(kv)
    group = hq // hkv
    out = query.new_empty(1, hq, lq, d)
    full_mask = None
    if lq > 1:  # context columns visible to every query row; the step's own tokens (last lq columns) causal
        n_max = max(k.shape[0] for k, _ in kv)
        full_mask = torch.ones(lq, n_max, dtype=torch.bool, device=query.device).tril(diagonal=n_max - lq)
    for g in range(hkv):
        kg, vg = kv[g]
        n = kg.shape[0]
        mask = None
        if lq > 1:
            mask = full_mask[:, n_max - n:]  # the same causal pattern for n columns: a view of the widest one
            if sel.rows is not None:
                mask = mask.clone()
                _restrict_rows(mask, sel.indices[g].to(query.device), sel.rows[g], step.n_sink)
        qg = query[:, g * group:(g + 1) * group]
        out[:, g * group:(g + 1) * group] = F.scaled_dot_product_attention(
            qg, kg[None, None], vg[None, None], attn_mask=mask, scale=scaling, enable_gqa=True)
        step.selected[layer, g] = int(sel.indices[g].numel())
        step.attended[layer, g] = n
    return out


def _measure_error(step: StepContext, layer: int, out, query, key, value, scaling, start: int) -> None:
    """Relative error of the selected attention vs full attention, per KV head (``attn_err``)."""
    _, hq, lq, d = query.shape
    hkv = key.shape[1]
    group = hq // hkv
    ref = _dense(query, key, value, scaling, start)
    diff = (out - ref).float().reshape(1, hkv, group * lq * d).norm(dim=-1)
    base = ref.float().reshape(1, hkv, group * lq * d).norm(dim=-1).clamp_min(1e-30)
    step.attn_err[layer] = (diff / base)[0].cpu().numpy()


def _restrict_rows(mask: torch.Tensor, union: torch.Tensor, rows: list[torch.Tensor], n_sink: int) -> None:
    """Per-row selection: query token t sees, of the selected columns ``[n_sink, n_sink + |union|)`` of ``mask``
    [lq, n], only those in its own set ``rows[t]`` (sinks, recent and own columns are left as they are)."""
    block = mask[:, n_sink:n_sink + union.numel()]
    block.zero_()
    for t, r in enumerate(rows):
        if r.numel():
            block[t, torch.searchsorted(union, r.to(union.device))] = True


def _track_reuse(step: StepContext, layer: int, hkv: int, indices) -> None:
    """Count, per KV head, the selected positions the previous applied step of this stage also selected in this
    layer (``indices`` None = the policy chose every candidate), then remember this selection.

    Host index sets are counted in NumPy (a layer's handful of torch ops cost more than the counting)."""
    if step.prev_selection is None:
        return
    cur = [step.candidates] * hkv if indices is None else list(indices)
    host = all(ix.device.type == "cpu" for ix in cur)
    if host:
        cur = [ix.detach().numpy().copy() for ix in cur]  # a copy: the policy's tensors are not ours to keep
    else:
        cur = [ix.detach().clone() for ix in cur]
    prev = step.prev_selection.get((step.stage, layer))
    if prev is not None:
        # A membership mask over the cache instead of an isin (which sorts both sides).
        n = step.start + step.n_new
        for g in range(hkv):
            p, c = prev[g], cur[g]
            if host and isinstance(p, np.ndarray):
                seen = np.zeros(n, bool)
                seen[p] = True
                step.reused[layer, g] = int(np.count_nonzero(seen[c]))
            elif len(c):
                seen = torch.zeros(n, dtype=torch.bool, device=c.device)
                seen[torch.as_tensor(p).to(seen.device)] = True
                step.reused[layer, g] = int(seen[c].sum())
            else:
                step.reused[layer, g] = 0
    step.prev_selection[(step.stage, layer)] = cur


def _check(sel, step: StepContext, layer: int, hkv: int) -> None:
    """Selections must name KV heads' positions among the candidates (always cheap checks; strict: exact)."""
    if len(sel.indices) != hkv:
        raise ValueError(f"{type(step.policy).__name__}.select returned {len(sel.indices)} index sets at layer "
                         f"{layer}; the model has {hkv} KV heads")
    host = all(ix.device.type == "cpu" for ix in sel.indices)
    if host:  # all heads at once in NumPy: a fraction of the cost of torch's min/max per head
        every = np.concatenate([ix.detach().numpy() for ix in sel.indices])
        inside = not len(every) or (int(every.min()) >= step.n_sink and int(every.max()) < step.window_start)
    for g, ix in enumerate(sel.indices):
        if host:
            ix = ix.detach().numpy()
        if (not host or not inside) and len(ix) and (int(ix.min()) < step.n_sink or
                                                     int(ix.max()) >= step.window_start):
            raise ValueError(f"{type(step.policy).__name__}.select chose positions outside the candidates "
                             f"[{step.n_sink}, {step.window_start}) at layer {layer}, KV head {g}")
        if step.strict and len(ix) > 1 and not bool((ix[1:] > ix[:-1]).all()):
            raise ValueError(f"{type(step.policy).__name__}.select: KV head {g} indices are not sorted unique")
    if sel.rows is not None and (len(sel.rows) != hkv or any(len(r) != step.n_new for r in sel.rows)):
        raise ValueError(f"{type(step.policy).__name__}.select returned per-row sets that are not one per KV head "
                         f"({hkv}) and query token ({step.n_new}) at layer {layer}")


def register() -> None:
    """Register the ``"vrex"`` attention (and its mask function: transformers' SDPA mask) once per process."""
    register_attention(ATTN_IMPL, vrex_attention)
