"""Several methods on one COIN task, every sample streamed by all of them at once (:func:`run_eval_batch`).

Each method's results file, traces, run record and skip log are exactly :func:`~vrex_lib.eval.run_eval`'s (the same
checks, resume and configuration keys, every file locked for the whole batch); only the streaming differs: the
methods still to run a sample step through it in one :func:`~vrex_lib.runtime.lockstep`, one batched forward per
step (one weight read for all of them), so a line's activations can differ from a lone run in the last fp32 bits
(docs/DECISIONS.md D480, D520). A sample's lines and traces are written only once every method finished it: an error
in one method's row leaves no line of that sample in any file (and every run record incomplete, as a failed
``run_eval`` leaves its own).
"""
from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from .. import video
from ..retrieval import make_policy
from .run import _finish, _Open, _open_run, _skip_undecodable, _write, run_eval
from .sample import Row, evaluate_rows, reference_agreement

#: ``MethodRun.reference`` for "the full method's run in this batch": its finished lines, and for the samples it
#: evaluates in the batch its new records (what a sequential run after it would read from its file).
BATCH_REFERENCE = "batch"
#: run_eval's keywords every run of a batch shares, with run_eval's defaults.
_SHARED = {k: p.default for k, p in inspect.signature(run_eval).parameters.items()
           if p.kind is p.KEYWORD_ONLY and k not in ("method_kwargs", "reference", "trace_dir", "model", "progress")}


@dataclass
class MethodRun:
    """One method's part of a batch: run_eval's ``method``, ``out``, ``method_kwargs``, ``reference`` (or
    :data:`BATCH_REFERENCE`) and ``trace_dir``."""

    method: str
    out: str | os.PathLike
    method_kwargs: dict | None = None
    reference: str | os.PathLike | None = "auto"
    trace_dir: str | os.PathLike | None = None


def run_eval_batch(task: str, runs: Sequence[MethodRun], profile: str, *, model, progress: bool = True,
                   **kw) -> list[Path]:
    """Run (or resume) every method of ``runs`` on ``task`` together (see the module docstring); ``kw`` are
    run_eval's other keywords, shared by every run. Returns each run's JSONL path, in the order of ``runs``.
    ``model`` must be prebuilt (:func:`~vrex_lib.runtime.build_model`): every row streams through it."""
    if model is None:
        raise ValueError("run_eval_batch: pass a prebuilt model (build_model(...)); every method streams through it")
    unknown = set(kw) - set(_SHARED)
    if unknown:
        raise TypeError(f"run_eval_batch: unknown or per-run keyword(s) {sorted(unknown)}; per-run options go in "
                        "MethodRun")
    outs = [Path(r.out) for r in runs]
    if len(set(outs)) != len(outs):
        raise ValueError(f"run_eval_batch: two runs write the same file ({outs}); give each its own out")
    args = {**_SHARED, **kw}
    order = sorted(range(len(runs)), key=lambda k: runs[k].method != "full")  # full first: the others' reference
    runs = [runs[k] for k in order]
    with ExitStack() as stack:
        ops: list[_Open] = []
        for r in runs:
            ref = _batch_reference(ops, r) if r.reference == BATCH_REFERENCE else r.reference
            ops.append(_open_run(stack, task, r.method, profile, r.out, method_kwargs=r.method_kwargs, reference=ref,
                                 trace_dir=r.trace_dir, model=model, **args)[0])
            if r.reference == BATCH_REFERENCE and ops[-1].cfg["reference_key"] != ops[0].cfg["reference_key"]:
                raise ValueError(f"run_eval_batch: {r.method}'s configuration differs from the full run's in more "
                                 "than the method and its options; the full run cannot be its reference")
        from_batch = [r.reference == BATCH_REFERENCE for r in runs]
        n_written = _evaluate_batch(ops, from_batch, model, progress)
        paths = [_finish(op.run, op.run_record, n_mine=op.n_mine, n_done=op.n_done, n_written=n)
                 for op, n in zip(ops, n_written)]
    return [paths[order.index(k)] for k in range(len(runs))]


def _batch_reference(opened: list[_Open], r: MethodRun) -> dict:
    """{sample id: the full run's finished line, or None where the batch makes it} of a run whose reference is the
    batch's full run; _open_run checks the run's finished lines against these ids as against a file."""
    if not opened or opened[0].run.method != "full" or r.method == "full":
        raise ValueError(f"run_eval_batch: {r.method}'s reference is {BATCH_REFERENCE!r} but the batch has no full "
                         "run to compare with; add a MethodRun('full', ...) or pass its results file")
    full = opened[0]
    return {**{s.sample_id: None for _, s in full.todo}, **{row["sample_id"]: row for row in full.done_rows}}


def _evaluate_batch(ops: list[_Open], from_batch: list[bool], model, progress: bool) -> list[int]:
    """Evaluate every sample any run still has to do, the runs that need it as the rows of one batch; append each
    row's line (agreement with the batch's full record where its reference is the batch). Lines written per run."""
    policies = [make_policy(op.run.method, **(op.run.method_kwargs or {})) for op in ops]
    samples: dict[int, object] = {}
    for op in ops:
        for i, s in op.todo:
            samples.setdefault(i, s)
    todo_ids = [{i for i, _ in op.todo} for op in ops]
    it = sorted(samples.items())
    if progress:
        it = tqdm(it, desc=f"{len(ops)} methods/{ops[0].run.task} batched", unit="sample")
    r0, n_written = ops[0].run, [0] * len(ops)
    for i, s in it:
        ks = [k for k in range(len(ops)) if i in todo_ids[k]]
        rows = [Row(policies[k], ops[k].run.method, ops[k].run.method_kwargs, ops[k].ref.get(s.sample_id),
                    ops[k].run.trace_dir, ops[k].run.n_total) for k in ks]
        try:
            recs = evaluate_rows(model, rows, s, i, r0.videos_dir, profile=r0.profile, runtime_cfg=r0.runtime_cfg,
                                 max_new_tokens=r0.max_new_tokens, max_frames=r0.max_frames, seed=r0.seed,
                                 prompt_layout=r0.prompt_layout, frames_policy=r0.frames_policy,
                                 frame_sampling=r0.frame_sampling)
        except (video.VideoDecodeError, video.VideoSpanError) as err:
            for k in ks:
                _skip_undecodable(ops[k].run, i, s, err)
            continue
        full = next((rec for k, rec in zip(ks, recs) if ops[k].run.method == "full"), None)
        for k, rec in zip(ks, recs):
            if from_batch[k] and ops[k].ref.get(s.sample_id) is None and full is not None:
                rec.update(reference_agreement(rec, full))
            _write(ops[k].run, rec, ops[k].cfg, model)
            n_written[k] += 1
    return n_written
