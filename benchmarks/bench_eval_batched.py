"""Notebook 03's accuracy study, the methods one after another vs in lockstep (one batched forward per step,
:func:`vrex_lib.eval.run_eval_batch`, docs/DECISIONS.md D520), measured in one run on this machine.

The study of notebook 03's main cell (``accuracy.run_study(accuracy.STUDY_METHODS, ...)``: the profile's ``study``
sizes, ``RuntimeConfig(measure_attn_error=True)``, the profile's model) on ``--samples`` samples of ``--task``, once
with ``batched=False`` and once with ``batched=True``, each into its own empty folder. A warm-up study of ReSV alone
on the same samples first decodes and encodes their frames (cached per model, file and span, as in the notebook,
where the first method pays it) and compiles ReSV's kernels, so neither timed run pays them. With ``--reps`` > 1 the
order of the two alternates, so drifting machine load hits both alike.

Printed: the calibration line, per repetition the process CPU seconds and wall seconds of each, then the agreement
of the two runs per method (samples whose prediction, correct flag, retrieval ratios, answer tokens or next-token
argmaxes differ: D480's last-bit effect can flip a near-tie), and the last line ``batched_vs_sequential=<ratio>``
of process CPU time (steadier on a shared machine; the wall-clock ratio is printed beside it).

    VREX_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_eval_batched.py [--profile default]
        [--task step] [--samples 2] [--reps 1]

Cost on the shared 2-core machine (default profile, 1 thread, 2 samples): about 2 minutes.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from vrex_lib import accuracy
from vrex_lib import eval as ev
from vrex_lib.config import RuntimeConfig, profile_config
from vrex_lib.envcheck import calibration_line
from vrex_lib.runtime import build_model

#: What must not change between the two runs of a sample (timings and the agreement columns aside).
COMPARED = ("prediction", "correct", "correct_strict", "ratio_frame", "ratio_text", "answer_ids", "frame_argmax",
            "first_token", "host_bytes_frame", "host_bytes_text")


def _differences(a: Path, b: Path, methods: list[str], task: str) -> dict[str, dict[str, int]]:
    """{method: {field: samples whose field differs}} between the studies under ``a`` and ``b``."""
    out = {}
    for m in methods:
        ra, rb = (ev.read_jsonl(accuracy.method_dir(r, m) / f"{task}.jsonl") for r in (a, b))
        if [r["sample_id"] for r in ra] != [r["sample_id"] for r in rb]:
            raise SystemExit(f"{m}: the two runs evaluated different samples")
        out[m] = {f: sum(x.get(f) != y.get(f) for x, y in zip(ra, rb)) for f in COMPARED}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="default")
    ap.add_argument("--task", default="step")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("VREX_THREADS", "1")))
    print(calibration_line())
    sizes = accuracy.study_sizes(profile_config(a.profile).study)
    model = build_model(a.profile)
    methods = list(accuracy.STUDY_METHODS)
    kw = dict(model=model, max_samples=a.samples, runtime_cfg=RuntimeConfig(measure_attn_error=True),
              max_new_tokens=sizes["max_new_tokens"], max_frames=sizes["max_frames"])
    print(f"profile {a.profile}: {model.name}, task {a.task}, {a.samples} sample(s), methods {' '.join(methods)}, "
          f"max_frames {sizes['max_frames']}, max_new_tokens {sizes['max_new_tokens']}")
    cpu: dict[bool, list[float]] = {False: [], True: []}
    wall: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        accuracy.run_study(["resv"], [a.task], a.profile, Path(tmp) / "warm", **kw)  # frames cached, kernels built
        for rep in range(a.reps):
            for batched in ((False, True) if rep % 2 == 0 else (True, False)):
                root = Path(tmp) / f"{rep}-{batched}"
                t0, c0 = time.perf_counter(), time.process_time()
                accuracy.run_study(methods, [a.task], a.profile, root, batched=batched, **kw)
                cpu[batched].append(time.process_time() - c0)
                wall[batched].append(time.perf_counter() - t0)
            print(f"rep {rep}: sequential {cpu[False][-1]:.1f} CPU s / {wall[False][-1]:.1f} s wall, batched "
                  f"{cpu[True][-1]:.1f} CPU s / {wall[True][-1]:.1f} s wall")
        diff = _differences(Path(tmp) / "0-False", Path(tmp) / "0-True", methods, a.task)
    for m, d in diff.items():
        changed = {f: n for f, n in d.items() if n}
        print(f"{m}: {'identical' if not changed else changed} ({a.samples} samples)")
    n_pred = sum(d["prediction"] for d in diff.values())
    print(f"predictions_differ={n_pred} of {len(methods) * a.samples}")
    c_seq, c_bat = statistics.median(cpu[False]), statistics.median(cpu[True])
    w_seq, w_bat = statistics.median(wall[False]), statistics.median(wall[True])
    print(f"process_cpu_s_sequential={c_seq:.1f} process_cpu_s_batched={c_bat:.1f} wall_s_sequential={w_seq:.1f} "
          f"wall_s_batched={w_bat:.1f} (wall ratio {w_bat / w_seq:.3f})")
    print(f"batched_vs_sequential={c_bat / c_seq:.3f}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
