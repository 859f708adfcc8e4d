"""COIN Top-1 (:func:`score`): VideoLLM-online's ``compute_metrics`` rule, quirks included, and a ``strict`` variant."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .tasks import PROCEDURE_TASKS, Sample, TASKS


METRICS: tuple[str, ...] = ("videollm-online", "strict")


def normalize(text: str) -> str:
    """Metric normalisation: lower case, strip spaces, a leading 'N. ' list prefix and trailing dots."""
    t = text.strip().lower()
    head, sep, rest = t.partition(". ")
    if sep and head.isdigit():
        t = rest.strip()
    return t.rstrip(".").strip()


def _nearest(preds: Sequence[str], cats: Sequence[str]) -> np.ndarray:
    """Index of the Levenshtein-nearest category for each normalised prediction (first on ties)."""
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cdist

    if not preds:
        return np.zeros(0, dtype=np.int64)
    d = cdist(list(preds), list(cats), scorer=Levenshtein.distance, dtype=np.int32, workers=1)
    return np.argmin(d, axis=1)


def nearest_label(text: str, vocab: Sequence[str]) -> str:
    """VideoLLM-online's ``COINBenchmark.fuzzy_match``: ``min((Levenshtein distance, label))[1]`` -- the nearest
    label, ties to the smallest label string (Python's str order). Unit-cost Levenshtein (rapidfuzz equals the
    ``Levenshtein`` package the reference imports)."""
    from rapidfuzz.distance import Levenshtein

    if not vocab:
        raise ValueError("nearest_label needs a non-empty vocabulary")
    return min((Levenshtein.distance(text, c), c) for c in vocab)[1]


def fuzzy_match(prediction: str, label: str, categories: Sequence[str]) -> bool:
    """Strict metric: True if the normalised prediction equals the label, or its Levenshtein-nearest category
    (first in ``categories`` order on ties) is the label."""
    p, lab = normalize(prediction), normalize(label)
    if p == lab:
        return True
    cats = [normalize(c) for c in categories]
    if not cats:
        raise ValueError("fuzzy_match needs a non-empty category vocabulary")
    return cats[int(_nearest([p], cats)[0])] == lab


def split_procedure(prediction: str) -> list[str]:
    """Strict metric: a procedure answer -> its step lines (blank lines dropped; 'N. ' removed by normalize)."""
    return [ln for ln in prediction.split("\n") if ln.strip()]


def _check_score_args(task: str, predictions: Sequence[str], samples: Sequence[Sample], metric: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown COIN task {task!r}: choose one of {', '.join(TASKS)}")
    if metric not in METRICS:
        raise ValueError(f"unknown COIN metric {metric!r}: choose one of {', '.join(METRICS)}")
    if len(predictions) != len(samples):
        raise ValueError(f"score({task!r}): {len(predictions)} predictions for {len(samples)} samples")
    if not samples:
        raise ValueError(f"score({task!r}): no samples to score")
    bad = [s.sample_id for s in samples if s.task != task]
    if bad:
        raise ValueError(f"score({task!r}): samples of another task, e.g. {bad[0]}")


def score_counts(task: str, predictions: Sequence[str], samples: Sequence[Sample],
                 metric: str = "videollm-online") -> tuple[int, int]:
    """(correct, counted) behind :func:`score`: samples for single-answer tasks, step positions for procedures."""
    _check_score_args(task, predictions, samples, metric)
    if metric == "strict":
        return _strict_counts(task, predictions, samples)
    memo: dict[tuple[int, str], str] = {}

    def near(text: str, vocab: tuple[str, ...]) -> str:
        key = (id(vocab), text)
        if key not in memo:
            memo[key] = nearest_label(text, vocab)
        return memo[key]

    correct = total = 0
    for pred, s in zip(predictions, samples):
        if not s.labels or not s.vocab:
            raise ValueError(f"score: sample {s.sample_id} has no labels/vocabulary (build it with build_task)")
        if task in PROCEDURE_TASKS:
            # COINProcedure.compute_metrics: zip(prediction.split('\n'), labels), line.split('. ')[-1]
            for line, lab in zip(str(pred).split("\n"), s.labels):
                step = line.split(". ")[-1]
                correct += int(step == lab or near(step, s.vocab) == lab)
                total += 1
        else:
            # COINBenchmark.compute_metrics: prediction.lower().rstrip('.')
            p, lab = str(pred).lower().rstrip("."), s.labels[0]
            correct += int(p == lab or near(p, s.vocab) == lab)
            total += 1
    return correct, total


def _strict_counts(task: str, predictions: Sequence[str], samples: Sequence[Sample]) -> tuple[int, int]:
    norm_cats: dict[int, list[str]] = {}
    correct = total = 0
    for pred, s in zip(predictions, samples):
        cats = norm_cats.setdefault(id(s.categories), [normalize(c) for c in s.categories])
        lines = split_procedure(pred) if task in PROCEDURE_TASKS else [pred]
        tgts = [normalize(t) for t in s.targets]
        preds = [normalize(x) for x in lines[:len(tgts)]]
        need = [k for k, x in enumerate(preds) if x != tgts[k]]
        near = _nearest([preds[k] for k in need], cats)
        ok = sum(1 for k, x in enumerate(preds) if x == tgts[k])
        ok += sum(1 for k, j in zip(need, near) if cats[int(j)] == tgts[k])
        correct += ok
        total += len(tgts)
    return correct, total


def score(task: str, predictions: Sequence[str], samples: Sequence[Sample],
          metric: str = "videollm-online") -> float:
    """Top-1 accuracy (%) of ``predictions`` (one string per sample, same order) under ``metric``.

    ``"videollm-online"`` (default; Table II) reproduces ``compute_metrics`` of showlab/videollm-online
    ``data/coin/benchmarks.py`` (``COINBenchmark`` for step/next/task, ``COINProcedure`` for the procedure
    tasks); ``"strict"`` is the normalised variant. See the module docstring for both rules.
    """
    correct, total = score_counts(task, predictions, samples, metric)
    return correct / total * 100
