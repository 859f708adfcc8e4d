"""Per-method step cost of the long-context study's question and answer: the methods one after another vs in lockstep
(one batched forward per step, :func:`vrex_lib.runtime.lockstep`), measured in one run on this machine.

One passkey trial of ``--context`` tokens is prefilled once with full attention (the shared dense prefill of the
study, docs/DECISIONS.md D162) and forked per method; then each method asks the question and teacher-forces an
answer of ``--answer-tokens`` tokens (so every method runs the same 1 question + ``answer-tokens - 1`` decode steps).
``sequential``: the methods' sessions answer one after another; ``batched``: they answer as one lockstep batch. Each
repetition forks fresh copies, and the order of the two alternates, so drifting machine load hits both alike.

Printed: the calibration line, per repetition the seconds of each, then ``per_method_step_s_sequential``,
``per_method_step_s_batched`` (median seconds of one method's step) and the last line
``batched_vs_sequential=<ratio>`` by the wall clock (the target of issue 44: <= 0.35 for 8 methods at 1K; the process
CPU-time ratio is printed beside it, steadier on a shared machine). It also checks that the
batched answers' greedy tokens and every selection record equal the sequential ones and prints ``identical=True``.

    .venv/bin/python benchmarks/bench_batched.py [--profile default] [--context 1000] [--reps 3]
        [--methods full flexgen infinigen rekv resv@text resv_noclust@text exact@k0.01 streamingllm]

Cost on the shared 2-core machine (default profile, 1 thread): ~1-2 min.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

from vrex_lib import longctx
from vrex_lib.config import ReSVConfig
from vrex_lib.envcheck import calibration_line
from vrex_lib.longctx.policy import StudyPolicy, fork
from vrex_lib.longctx.run import DOC_PREFIX, encodes_densely, prefill_document, study_setup, system_tokens
from vrex_lib.longctx.task import make_trial
from vrex_lib.runtime import StreamingSession, build_model, lockstep

METHODS = ("full", "flexgen", "infinigen", "rekv", "resv@text", "resv_noclust@text", "exact@k0.01", "streamingllm")


def _forks(base, sp, names: list[str]) -> list[tuple]:
    out = []
    for name in names:
        sess, sp_s = fork(base, sp)
        sp_s.route = name
        sp_s.recording = True
        out.append((sess, sp_s))
    return out


def _answer(force: list[int], question: str):
    def fn(sess):
        sess.ask(question, max_new_tokens=len(force), force_ids=force)
        return sess
    return fn


def _records(rows: list[tuple]) -> list:
    """(greedy tokens, per step (selected, attended, host tokens)) of each method: what must not change."""
    out = []
    for sess, sp in rows:
        sp.end_step()
        t = sess.stats[-len(sess.last_answer["step_argmax"]):]
        out.append((list(sess.last_answer["step_argmax"]),
                    [(r["selected"].tolist(), r["attended"].tolist(), r["host_tokens"].tolist()) for r in t],
                    [(rec.sel.tolist(), rec.sel_off.tolist()) for rec in sp.records]))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="default")
    ap.add_argument("--context", type=int, default=1000, help="cache tokens when the question comes (default 1000)")
    ap.add_argument("--answer-tokens", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    a = ap.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("VREX_THREADS", "1")))
    print(calibration_line())
    grid, specs, resv, cfg = study_setup(a.profile, "profile", a.methods, ReSVConfig())
    model = build_model(grid.model_profile)
    pols = {s.name: s.build(resv) for s in specs}
    alone = [s.name for s in specs if not encodes_densely(s, pols[s.name])]
    if alone:
        raise SystemExit(f"--methods: {alone} stream the document themselves; this benchmark forks one dense prefill "
                         "(use the methods that encode the document densely, e.g. resv@text)")
    trial = make_trial(model, "passkey", a.context - system_tokens(model, grid.system_prompt), 0.5, 0,
                       prefix=DOC_PREFIX)
    sp = StudyPolicy(pols, cfg.dense_layers)
    base = StreamingSession(model, sp, cfg)
    sp.store = base.store
    prefill_document(base, model, trial, grid)
    force = model.encode(" The pass key is 12345. It is the key to remember.")[:a.answer_tokens]
    names = [s.name for s in specs]
    _run_timed(base, sp, names, force, trial.question)  # warm-up: compiled kernels, calibrations, caches
    seq_t, bat_t, cpu, same = [], [], {"seq": [], "bat": []}, True
    for rep in range(a.reps):
        order = ("seq", "bat") if rep % 2 == 0 else ("bat", "seq")
        got = {}
        for kind in order:
            rows = _forks(base, sp, names)
            jobs = [(s, _answer(force, trial.question)) for s, _ in rows]
            t0, c0 = time.perf_counter(), time.process_time()
            lockstep(jobs, batched=kind == "bat")
            dt = time.perf_counter() - t0
            cpu[kind].append(time.process_time() - c0)
            (bat_t if kind == "bat" else seq_t).append(dt)
            got[kind] = _records(rows)
        same = same and got["seq"] == got["bat"]
        print(f"rep {rep}: sequential {seq_t[-1]:.3f} s, batched {bat_t[-1]:.3f} s ({len(names)} methods x "
              f"{len(force)} steps)")
    steps = len(names) * len(force)
    s_seq, s_bat = statistics.median(seq_t) / steps, statistics.median(bat_t) / steps
    print(f"methods={' '.join(names)} context={a.context} steps_per_method={len(force)}")
    print(f"per_method_step_s_sequential={s_seq:.4f}")
    print(f"per_method_step_s_batched={s_bat:.4f}")
    c_seq, c_bat = statistics.median(cpu["seq"]), statistics.median(cpu["bat"])
    print(f"process_cpu_s_sequential={c_seq:.2f} process_cpu_s_batched={c_bat:.2f} (ratio {c_bat / c_seq:.3f}: "
          "the wall clock is the target's measure, CPU time is steadier on a shared machine)")
    print(f"identical={same}")
    print(f"batched_vs_sequential={s_bat / s_seq:.3f}")


def _run_timed(base, sp, names, force, question) -> None:
    rows = _forks(base, sp, names)
    lockstep([(s, _answer(force, question)) for s, _ in rows])


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
