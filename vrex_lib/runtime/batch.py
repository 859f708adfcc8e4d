"""Several sessions on one model in lockstep: their forward steps run as one batch, one weight read per step.

    results = lockstep([(sess_a, lambda s: s.ask(q, 16)), (sess_b, lambda s: s.ask(q, 16))])

A forward of a small model over a few tokens costs about one read of its weights whatever the token count (a
SmolLM2-135M step in fp32 reads ~0.5 GB), so methods that see the same stream -- the methods of one long-context
trial, the steered runs of the workload measurement -- pay that read once per step when they step together.

Each job is ``(session, fn)``: ``fn(session)`` is ordinary session code (prefill, :meth:`ask`,
:func:`~vrex_lib.runtime.driver.drive` with any schedule) and runs in its own thread; every forward it makes is
handed to the caller's thread (:class:`Lockstep`), which waits until each unfinished job is waiting at a forward,
then runs the waiting rows with the smallest cache position (and token count) as one batch: ``inputs_embeds``
``[B, N, hidden]`` through the model, each row's K/V appended to its own :class:`~vrex_lib.runtime.kvstore.KVStore`
(:class:`RowsCache`) and its attention computed by :mod:`vrex_lib.runtime.attention` with its own policy,
candidates, selection and trace record (:class:`~vrex_lib.runtime.attention.BatchedStep`). Rows that diverge (an
answer that stops earlier) simply leave the batch; the batch a step runs in is decided by the jobs alone, not by
thread timing, so a run is deterministic. A job runs the model only through its own session: a forward of another
session from inside a job would run beside the batch and overwrite the model's shared capture lists.

What batching may change: the dense layers (projections, MLP, logits) of a row run inside a ``[B, N]`` matrix
product instead of a ``[1, N]`` one, so a row's activations can differ from its run alone in the last bits of fp32
(docs/DECISIONS.md D480); attention, policies and selections are computed per row exactly as alone. The trace's
``wall_s`` of a batched step is the whole batch's forward time.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch
from transformers.cache_utils import Cache

from .attention import BatchedStep
from .kvstore import KVStore

T = TypeVar("T")


class LockstepAborted(RuntimeError):
    """Raised in a row whose batch was abandoned because another row (or the batched forward) failed."""


class RowsCache(Cache):
    """The transformers Cache of one batched forward: row b's new K/V go to ``stores[b]``; what ``update`` returns
    is the step's new K/V only (the attention function reads each row's cache from its store). Sequence length and
    mask sizes are row 0's: every row of a batch holds the same number of tokens."""

    def __init__(self, stores: Sequence[KVStore]):
        super().__init__(layers=stores[0].layers)
        self.stores = list(stores)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        for b, store in enumerate(self.stores):
            store.layers[layer_idx].update(key_states[b:b + 1], value_states[b:b + 1])
        return key_states, value_states


class _Request:
    __slots__ = ("embeds", "step", "logits", "wall_s", "done")

    def __init__(self, embeds: torch.Tensor, step):
        self.embeds, self.step, self.logits, self.wall_s, self.done = embeds, step, None, 0.0, False


class Lockstep:
    """The meeting point of the jobs' forwards (see the module docstring). ``forwards``: batched forwards run;
    ``row_steps``: the row steps they carried (``row_steps / forwards`` is the mean batch size)."""

    def __init__(self, model, sessions: Sequence):
        self.model = model
        self.index = {id(s): i for i, s in enumerate(sessions)}
        if len(self.index) != len(sessions):
            raise ValueError("lockstep: a session is listed twice; give each job its own session (fork it)")
        if any(s.model is not model for s in sessions):
            raise ValueError("lockstep: every session must stream through the same model")
        self._cv = threading.Condition()
        self._waiting: dict[int, _Request] = {}
        self._live = len(sessions)
        self._abort = False
        self.forwards = self.row_steps = 0

    def __deepcopy__(self, memo):
        raise RuntimeError("a session in lockstep cannot be copied; fork it before lockstep()")

    def submit(self, sess, embeds: torch.Tensor, step) -> tuple[torch.Tensor, float]:
        """Called by a row's session for each forward: blocks until its batch ran; (last logits [vocab], wall s)."""
        req = _Request(embeds, step)
        with self._cv:
            if self._abort:
                raise LockstepAborted("another row of this lockstep failed")
            self._waiting[self.index[id(sess)]] = req
            self._cv.notify_all()
            self._cv.wait_for(lambda: req.done or self._abort)
            if not req.done:
                raise LockstepAborted("another row of this lockstep failed")
        return req.logits, req.wall_s

    def finished(self) -> None:
        with self._cv:
            self._live -= 1
            self._cv.notify_all()

    def abort(self) -> None:
        with self._cv:
            self._abort = True
            self._cv.notify_all()

    def serve(self) -> None:
        """Run batches until every job has finished (in the caller's thread)."""
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._abort or len(self._waiting) == self._live)
                if self._abort or self._live == 0:
                    return
                key = min((r.step.start, r.step.n_new) for r in self._waiting.values())
                rows = sorted((i, r) for i, r in self._waiting.items() if (r.step.start, r.step.n_new) == key)
            try:
                self._run([r for _, r in rows])
            except BaseException:
                self.abort()
                raise
            with self._cv:
                for i, r in rows:
                    r.done = True
                    del self._waiting[i]
                self._cv.notify_all()

    def _run(self, reqs: list[_Request]) -> None:
        m = self.model
        embeds = torch.stack([r.embeds.to(m.device) for r in reqs]).to(m.dtype)
        captures = tuple(c for c in (getattr(m, "_vrex_attn_inputs", None), getattr(m, "_vrex_pre_rope", None))
                         if c is not None)
        step = BatchedStep([r.step for r in reqs], captures)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = m.llm(inputs_embeds=embeds, cache=RowsCache([r.step.store for r in reqs]), use_cache=True,
                        logits_to_keep=1, vrex_step=step)
        wall = time.perf_counter() - t0
        for b, r in enumerate(reqs):
            r.logits, r.wall_s = out.logits[b, -1], wall
        self.forwards += 1
        self.row_steps += len(reqs)


def lockstep(jobs: Sequence[tuple[object, Callable[[object], T]]], *, batched: bool = True,
             stats: dict | None = None) -> list[T]:
    """Run ``jobs`` ((session, fn) pairs; ``fn(session)``'s value is returned, in order) with their forwards batched
    (see the module docstring). ``batched=False`` runs the jobs one after another (the reference the batched path is
    tested against). ``stats``, if given, receives ``forwards`` and ``row_steps``. The first error of a job is
    raised after every job has stopped."""
    jobs = list(jobs)
    if not batched or len(jobs) <= 1:
        return [fn(sess) for sess, fn in jobs]
    sessions = [s for s, _ in jobs]
    if any(s.lockstep is not None for s in sessions):
        raise RuntimeError("lockstep: a session is already in a lockstep")
    ls = Lockstep(sessions[0].model, sessions)
    results: list = [None] * len(jobs)
    errors: list[BaseException | None] = [None] * len(jobs)

    def work(i: int, sess, fn) -> None:
        try:
            results[i] = fn(sess)
        except BaseException as e:  # handed to the caller's thread
            errors[i] = e
            if not isinstance(e, LockstepAborted):
                ls.abort()
        finally:
            ls.finished()

    for s in sessions:
        s.lockstep = ls
    threads = [threading.Thread(target=work, args=(i, s, fn), daemon=True, name=f"lockstep-row{i}")
               for i, (s, fn) in enumerate(jobs)]
    try:
        for t in threads:
            t.start()
        ls.serve()
    except BaseException:
        ls.abort()
        raise
    finally:
        for t in threads:
            t.join()
        for s in sessions:
            s.lockstep = None
    first = next((e for e in errors if e is not None and not isinstance(e, LockstepAborted)), None)
    if first is None:
        first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    if stats is not None:
        stats.update(forwards=ls.forwards, row_steps=ls.row_steps)
    return results
