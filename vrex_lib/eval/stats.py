"""Sampling error of COIN Top-1 and of its drops, and the cost of an evaluation (``python -m vrex_lib.eval plan``).

Intervals (docs/DECISIONS.md D340):

* a method's Top-1 on a task: the Wilson score interval of VideoLLM-online's pooled metric
  ``100 · Σ correct / Σ counted`` (:func:`pooled_counts`: per sample, correct and counted steps -- 0/1 and 1 for the
  single-answer tasks; a procedure's steps count as trials, which understates the error where one sample's steps
  fail together);
* a drop (``full`` − method, the two runs on the same samples): a percentile bootstrap over the *pairs* (each
  sample with both methods' answers, so the correlation of the two methods' errors enters), 2,000 resamples,
  seeded; where no pair differs the bootstrap has no spread, and the normal approximation below with δ at its
  Wilson upper bound (0 discordant of n) stands in. An average drop over tasks resamples each task independently
  and averages the tasks' drops;
* for planning, before any answer exists: the normal approximation of a paired difference of proportions,
  half-width ``z · sqrt(δ / n)`` points × 100 (δ: the share of samples on which the two methods' correctness
  differs; the variance ``δ − Δ²`` at its largest, Δ = 0), so ``n ≥ z² δ / tol²`` samples make the half-width at most
  ``tol``.
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .. import coin
from .results import read_jsonl

Z95 = 1.959963984540054  # two-sided 95 % normal quantile
N_BOOT = 2000


@dataclass(frozen=True)
class Interval:
    """A 95 % interval ``[lo, hi]`` (points) around ``value`` over ``n`` samples, and how it was made."""

    value: float
    lo: float
    hi: float
    n: int
    method: str

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2

    def text(self, unit: str = "pt") -> str:
        return f"95 % CI [{self.lo:.1f}, {self.hi:.1f}] {unit} ({self.method}, n = {self.n})"


def scored_samples(path: str | os.PathLike, profile: str, coin_root: str | None = None,
                   split: str = "testing") -> tuple[str, list[dict], list]:
    """(task, result rows, the COIN sample of each row) of a results file, the samples and their vocabulary built as
    the run built them (the split's videos whose files exist); an empty file or a sample the profile's annotations
    do not hold is a ValueError naming the file."""
    rows = read_jsonl(path)
    if not rows:
        raise ValueError(f"{path}: no results to score")
    task = rows[0]["task"]
    js, videos_dir = coin.dataset_paths(profile, coin_root)
    ann = coin.load_annotations(js, coin.SkipLog())
    by_id = {s.sample_id: s for s in coin.build_task(ann, task, split,
                                                     available=coin.available_ids(ann, videos_dir, None, split))}
    missing = [r["sample_id"] for r in rows if r["sample_id"] not in by_id]
    if missing:
        raise ValueError(f"{path}: sample {missing[0]} is not in {js} ({split}); wrong profile or --coin-root?")
    return task, rows, [by_id[r["sample_id"]] for r in rows]


def pooled_counts(path: str | os.PathLike, profile: str, coin_root: str | None = None, split: str = "testing",
                  metric: str = "videollm-online") -> dict[str, tuple[int, int]]:
    """{sample id: (correct, counted)} of a results file under VideoLLM-online's metric (counted: 1 per
    single-answer sample, the scored step positions of a procedure sample), samples built as the run built them."""
    task, rows, samples = scored_samples(path, profile, coin_root, split)
    return {r["sample_id"]: coin.score_counts(task, [r["prediction"]], [s], metric=metric)
            for r, s in zip(rows, samples)}


def _pooled(c: np.ndarray, n: np.ndarray) -> np.ndarray:
    """100 · Σ c / Σ n along the last axis (resamples × samples)."""
    return 100.0 * c.sum(-1) / np.maximum(n.sum(-1), 1)


def _draws(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(N_BOOT, n))


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n, as fractions."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    mid, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (
        1 + z * z / n)
    return max(0.0, mid - half), min(1.0, mid + half)


def top1_interval(counts: Mapping[str, tuple[int, int]]) -> Interval:
    """Wilson interval of one method's pooled Top-1 (%) over its samples' counted answers."""
    arr = np.asarray(list(counts.values()), dtype=np.float64).reshape(-1, 2)
    c, n = float(arr[:, 0].sum()), float(arr[:, 1].sum())
    lo, hi = wilson(c, n)
    return Interval(100 * c / max(n, 1), 100 * lo, 100 * hi, len(arr), "Wilson score interval")


def _drop_boot(ref: Mapping[str, tuple[int, int]], other: Mapping[str, tuple[int, int]], seed: int
               ) -> tuple[float, np.ndarray, int]:
    ids = sorted(set(ref) & set(other))
    if not ids:
        raise ValueError("paired drop: the two runs share no sample")
    a = np.asarray([ref[i] for i in ids], dtype=np.float64)
    b = np.asarray([other[i] for i in ids], dtype=np.float64)
    idx = _draws(len(ids), seed)
    drop = float(_pooled(a[:, 0], a[:, 1]) - _pooled(b[:, 0], b[:, 1]))
    boot = _pooled(a[idx, 0], a[idx, 1]) - _pooled(b[idx, 0], b[idx, 1])
    if np.ptp(boot) == 0:  # no pair differs: the spread of an unseen discordance, at its Wilson upper bound
        sd = paired_half_width(len(ids), wilson(0, len(ids))[1]) / Z95
        boot = drop + sd * np.random.default_rng(seed).standard_normal(N_BOOT)
    return drop, boot, len(ids)


def drop_interval(ref: Sequence[Mapping[str, tuple[int, int]]], other: Sequence[Mapping[str, tuple[int, int]]],
                  reduce: str = "mean", seed: int = 0) -> Interval:
    """Paired-bootstrap interval of ``full`` − method over tasks (``ref[i]`` / ``other[i]``: task i's counts),
    combined by ``reduce`` ('mean': the average drop, 'max': the largest), each task resampled independently."""
    if reduce not in ("mean", "max"):
        raise ValueError(f"reduce must be 'mean' or 'max', got {reduce!r}")
    parts = [_drop_boot(r, o, seed + i) for i, (r, o) in enumerate(zip(ref, other))]
    f = np.mean if reduce == "mean" else np.max
    value = float(f([p[0] for p in parts]))
    boot = f(np.stack([p[1] for p in parts]), axis=0)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    n = sum(p[2] for p in parts)
    return Interval(value, float(lo), float(hi), n, f"paired bootstrap over samples, {reduce} of {len(parts)} task(s)")


def discordance(ref: Mapping[str, tuple[int, int]], other: Mapping[str, tuple[int, int]]) -> float:
    """The variance per sample of the paired difference of correctness (fractions), ``δ`` of the module docstring for
    single-answer tasks (the share of samples the two methods disagree on when both are 0/1)."""
    ids = sorted(set(ref) & set(other))
    if not ids:
        raise ValueError("discordance: the two runs share no sample")
    d = np.asarray([ref[i][0] / max(ref[i][1], 1) - other[i][0] / max(other[i][1], 1) for i in ids])
    return float(np.mean(d ** 2))


def paired_half_width(n: int, delta: float, z: float = Z95) -> float:
    """Half-width (points) of the normal-approximation interval of a paired Top-1 difference over ``n`` samples."""
    return 100.0 * z * math.sqrt(delta / n) if n > 0 else float("inf")


def samples_for(tol_pt: float, delta: float, z: float = Z95) -> int:
    """Samples for a paired Top-1 difference half-width ≤ ``tol_pt`` points."""
    return math.ceil(z * z * delta / (tol_pt / 100.0) ** 2)


def seconds_per_frame(paths: Sequence[str | os.PathLike]) -> tuple[float, int]:
    """(measured seconds per frame, samples measured): Σ timing_s.total / Σ max(n_frames, 1) over results files."""
    t = f = n = 0
    for p in paths:
        for r in read_jsonl(p):
            t += float(r["timing_s"]["total"])
            f += max(int(r["n_frames"]), 1)
            n += 1
    if not n:
        raise ValueError(f"--timing {', '.join(map(str, paths))}: no results lines to measure seconds per frame from")
    return t / f, n
