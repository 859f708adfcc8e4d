"""``python -m vrex_lib.eval plan``: samples, methods, expected GPU-hours and the sampling error of a Top-1 difference
for a COIN evaluation, before it runs (the formulas: :mod:`vrex_lib.eval.stats`, docs/DECISIONS.md D340)."""
from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from .. import coin, methods
from ..config import PROFILES
from .stats import (Z95, discordance, paired_half_width, pooled_counts, samples_for, seconds_per_frame,
                    wilson)

#: Discordance rates shown when no pilot pair measures one (the share of samples two methods disagree on).
ASSUMED_DELTAS: tuple[float, ...] = (0.05, 0.10, 0.20)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m vrex_lib.eval plan", description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="full", choices=PROFILES)
    p.add_argument("--coin-root", default=None)
    p.add_argument("--split", default="testing")
    p.add_argument("--tasks", default=",".join(coin.TASKS))
    p.add_argument("--methods", default=",".join(methods.TABLE2), help="comma-separated methods (default: Table II's)")
    p.add_argument("--max-samples", type=int, default=None, help="samples per task (default: all)")
    p.add_argument("--timing", nargs="+", default=None, help="results JSONL files whose timing_s measures the "
                   "seconds per frame on the machine that will run (e.g. scripts/gpu_check.sh's eval)")
    p.add_argument("--seconds-per-frame", type=float, default=None, help="instead of --timing: a figure you measured")
    p.add_argument("--pilot", nargs=2, default=None, metavar=("FULL_JSONL", "METHOD_JSONL"),
                   help="a pilot run of full and a method on the same samples: measures the discordance")
    p.add_argument("--tolerance", type=float, default=1.0, help="points: the claim's tolerance (Fig. 19: 1.0)")
    p.add_argument("--gpus", type=int, default=1)
    return p


def _cost_source(a) -> tuple[float, str]:
    if (a.timing is None) == (a.seconds_per_frame is None):
        raise ValueError("plan needs the measured cost: --timing RESULTS.jsonl ... (results of a run on the GPU that "
                         "will run the evaluation) or --seconds-per-frame S")
    if a.timing:
        spf, n = seconds_per_frame(a.timing)
        return spf, f"{spf:.4g} s per frame, measured over {n} samples ({', '.join(a.timing)})"
    if not a.seconds_per_frame > 0:
        raise ValueError(f"--seconds-per-frame must be > 0, got {a.seconds_per_frame}")
    return a.seconds_per_frame, f"{a.seconds_per_frame:.4g} s per frame (given with --seconds-per-frame)"


def _pilot_delta(a) -> tuple[tuple[float], str]:
    """(δ,), its source: the pilot pair's discordance; with no differing pair the Wilson 95 % upper bound of 0 of
    n shared samples stands in (docs/DECISIONS.md D340), never δ = 0 (a ±0.00 interval and '0 samples needed')."""
    ref, other = (pooled_counts(f, a.profile, a.coin_root, a.split) for f in a.pilot)
    delta = discordance(ref, other)
    src = f"measured on the pilot pair {a.pilot[0]} / {a.pilot[1]}"
    if delta > 0:
        return (delta,), src
    n = len(set(ref) & set(other))
    return (wilson(0, n)[1],), (f"the Wilson 95 % upper bound of 0 differing of the {n} samples of the pilot pair "
                                f"{a.pilot[0]} / {a.pilot[1]} (no pair differs there; D340)")


def main(argv: Sequence[str]) -> int:
    """Print the plan; bad input raises ValueError / OSError (the CLI prints one line)."""
    a = _parser().parse_args(list(argv))
    tasks, ms = a.tasks.split(","), a.methods.split(",")
    for t in tasks:
        if t not in coin.TASKS:
            raise ValueError(f"--tasks: unknown task {t!r}: choose from {', '.join(coin.TASKS)}")
    for m in ms:
        methods.get(m)
    if a.gpus < 1 or (a.max_samples is not None and a.max_samples < 1):
        raise ValueError("--gpus and --max-samples must be >= 1")
    if not (math.isfinite(a.tolerance) and a.tolerance > 0):
        raise ValueError(f"--tolerance must be a number of points > 0 (the claim's tolerance, e.g. 1.0 for Fig. 19), "
                         f"got {a.tolerance:g}")
    spf, cost_src = _cost_source(a)
    deltas, delta_src = ASSUMED_DELTAS, "assumed (no --pilot)"
    if a.pilot:
        deltas, delta_src = _pilot_delta(a)
    js, videos = coin.dataset_paths(a.profile, a.coin_root)
    ann = coin.load_annotations(js, coin.SkipLog())
    avail = coin.available_ids(ann, videos, None, a.split)
    print(f"plan: {js} split {a.split!r}: {len(avail)} videos present; methods {', '.join(ms)} ({len(ms)}); {cost_src}")
    print(f"{'task':14s} {'samples':>8s} {'frames':>9s} {'GPU-h':>8s}  " +
          "  ".join(f"±pt@δ={d:.3g}" for d in deltas) + f"  samples for ±{a.tolerance:g} pt")
    total_h = 0.0
    for t in tasks:
        ss = coin.build_task(ann, t, a.split, available=avail)[:a.max_samples]
        frames = sum(max(min(s.num_frames(), coin.MAX_NUM_FRAMES), 1) for s in ss)
        hours = frames * spf * len(ms) / 3600
        total_h += hours
        hw = "  ".join(f"{paired_half_width(len(ss), d):>10.2f}" for d in deltas)
        need = "/".join(str(samples_for(a.tolerance, d)) for d in deltas)
        print(f"{t:14s} {len(ss):>8d} {frames:>9d} {hours:>8.3f}  {hw}  {need}")
    print(f"total {total_h:.2f} GPU-hours; {total_h / a.gpus:.2f} h on {a.gpus} GPU(s) (torchrun, one shard each)")
    print(f"GPU-hours = Σ_samples max(frames, 1) × seconds per frame × methods / 3600 (frames of the annotated spans "
          f"at 2 fps, at most {coin.MAX_NUM_FRAMES}; COIN.json durations, the videos are not probed). Half-width of "
          f"the 95 % interval of a paired Top-1 difference: {Z95:.2f} × sqrt(δ / n) × 100 points, the normal "
          f"approximation of a paired difference of proportions at its largest variance; δ = share of samples the "
          f"two methods' correctness differs on, {delta_src}; samples for ±tol: ceil(1.96² δ / tol²).")
    return 0
