"""COIN annotations, the five VideoLLM-online benchmark tasks, and their Top-1 metric.

V-Rex evaluates on COIN with VideoLLM-online's five tasks (paper §VI.A, Table II). This module reads the
official ``COIN.json``, builds the samples exactly as VideoLLM-online's ``data/coin/benchmarks.py`` does, and
scores predictions the same way. It works on annotations alone; video files are only touched by
:mod:`vrex_lib.video` when frames are read.

    ann = load_annotations("COIN.json")                 # {video_id: VideoAnnotation}
    samples = build_task(ann, "procedure", "testing")   # list[Sample]
    acc = score("procedure", predictions, samples)      # Top-1 accuracy in %

Task construction (VideoLLM-online, one stream span and one answer per sample):

| task            | samples per video        | span shown          | target                                   |
|-----------------|--------------------------|---------------------|------------------------------------------|
| ``step``        | one per step i           | step i's segment    | step i's label                           |
| ``next``        | one per step i < n-1     | step i's segment    | step i+1's label                         |
| ``task``        | one                      | ROI [start, end]    | the task name (CamelCase -> words)       |
| ``procedure``   | one per step i < n-1     | step i's segment    | the next <= 5 step labels (numbered list)|
| ``taskprocedure``| as ``procedure``        | step i's segment    | as ``procedure``; the prompt names the task |

Span times are snapped up to the 2 fps frame grid and clamped to [0, duration]
(``ceil_time_by_fps``); the frames shown are indices ``ceil(start·fps) .. ceil(end·fps)`` inclusive. Steps keep
the order of the file (VideoLLM-online never sorts them). Only the split's videos count, and with
``available=`` only those whose video file exists (VideoLLM-online keeps ``video_uid in self.metadata``): both
the samples and the vocabulary follow that set.

Metric, two variants (``score(..., metric=...)``):

* ``"videollm-online"`` (default, Table II): VideoLLM-online's ``COINBenchmark.compute_metrics`` and
  ``COINProcedure.compute_metrics`` (showlab/videollm-online, ``data/coin/benchmarks.py``), quirks included.
  Labels are the step / task texts lower-cased; the vocabulary (``categories``) is the *split's own* labels;
  ``fuzzy_match`` returns ``min((Levenshtein distance, label))`` -- ties go to the smallest (distance, label).
  Single-answer tasks: ``p = prediction.lower().rstrip('.')``, correct if ``p == label`` or its nearest label is
  the label; accuracy = correct / samples × 100. Procedure tasks: the prediction is split on ``'\n'`` (blank
  lines kept), each line reduced with ``.split('. ')[-1]`` (neither lower-cased nor stripped of '.'), and zipped
  with the targets, so a sample counts ``min(#lines, #targets)`` steps; accuracy = Σ correct / Σ counted × 100.
  A perfect answer in the checkpoint's own format ("1. Take out the cd drive.") is therefore matched only
  through the nearest label, and a one-line answer to a five-step target counts one step.
* ``"strict"``: both sides normalised (lower case, surrounding spaces, a leading ``"N. "`` and trailing ``"."``
  removed); procedure lines split on new lines with blank lines dropped and scored against every target step
  (denominator = all target steps); ties to the first category in sorted order.

Bad input: a malformed file raises :class:`CoinFormatError` naming the file and the fix. A bad *entry*
(missing field, segment outside the video) raises too, unless a :class:`SkipLog` is passed: then the video is
skipped, counted and listed, and the log is written next to the results (``SkipLog.write``). Never silent.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _io
from .config import REPO_ROOT

TASKS: tuple[str, ...] = ("step", "next", "task", "procedure", "taskprocedure")
PROCEDURE_TASKS: frozenset[str] = frozenset({"procedure", "taskprocedure"})
MAX_PROCEDURE_STEPS = 5  # VideoLLM-online's COINProcedure.max_num_steps
FRAME_FPS = 2.0  # VideoLLM-online's COIN frame rate (frames pre-extracted at 2 fps)
#: Live1+'s ``max_num_frames`` (showlab/videollm-online models/arguments_live.py, LiveOnePlusTrainingArguments).
MAX_NUM_FRAMES = 1200
METRICS: tuple[str, ...] = ("videollm-online", "strict")
#: What happens to a span longer than ``max_frames`` (docs/DECISIONS.md D57):
#: 'videollm-online' -- StreamMixIn.max_frames_clip: the whole stream is cut, the question is asked with no
#: frames (the sample still counts); 'skip' -- the sample is not run (listed in the skip log);
#: 'clamp' -- keep the last ``max_frames`` frames before the question.
FRAMES_POLICIES: tuple[str, ...] = ("videollm-online", "skip", "clamp")

# Accepted split names -> the subset name in the official file. The README of COIN says "validation"
# while the real COIN.json uses "testing" (videollm-online #26): accept it, with a warning.
_SPLITS = {"training": "training", "train": "training", "testing": "testing", "test": "testing",
           "validation": "testing", "val": "testing"}
_VIDEO_EXTS = (".mp4", ".webm", ".mkv", ".avi", ".mov")

# Prompts of VideoLLM-online's COIN benchmarks (data/coin/benchmarks.py), verbatim: they fix the question tokens.
PROMPT_STEP = "What is the action in the video? Format your answer concisely. No extra text output."
PROMPT_NEXT = "What is the next action for the video? Format your answer concisely. No extra text output."
PROMPT_TASK = "What is the overall activity in the video? Format your answer concisely. No extra text output."
_LIST_FMT = ("Format your answer concisely, listing each action on a new line with a number prefix. "
             "No extra text output.")


def prompt_procedure(num_steps: int) -> str:
    """Procedure prompt for ``num_steps`` > 1 (a single next step uses :data:`PROMPT_NEXT`)."""
    return f"What is the next {num_steps} actions for the video? {_LIST_FMT}"


def prompt_taskprocedure(task: str, num_steps: int) -> str:
    """Procedure+ prompt: names the task (already cleaned to words, e.g. 'replace CD drive with SSD')."""
    if num_steps == 1:
        return f"To {task}, what is the next action for the video? Format your answer concisely. No extra text output."
    return f"To {task}, what is the next {num_steps} actions for the video? {_LIST_FMT}"


# Step-label fixes VideoLLM-online applies (COIN._clean_step).
STEP_LABEL_FIXES: dict[str, str] = {
    "process (crop, fold) paper": "crop and fold paper",
    "try to press gun head, spray residual old grease": "try to press gun head to spray residual old grease",
}
# Acronyms that the CamelCase split breaks apart, restored afterwards (COIN._clean_task). Order matters
# only in that each pattern is applied once, in this order, as VideoLLM-online does.
TASK_NAME_FIXES: tuple[tuple[str, str], ...] = (
    (" t v", " TV"), (" c d", " CD"), ("s i m", "SIM"), ("n b a", "NBA"), ("s s d", "SSD"), ("r j45", "RJ45"),
)


class CoinFormatError(ValueError):
    """COIN.json (or one of its entries) is not in the official format."""


class MissingVideoError(FileNotFoundError):
    """An annotated video has no file in the videos folder."""


def clean_task_name(camel: str) -> str:
    """COIN class -> words: 'PutOnHair' -> 'put on hair', 'ReplaceCDDriveWithSSD' -> 'replace CD drive with SSD'."""
    words = "".join(" " + c.lower() if c.isupper() else c for c in camel)
    for old, new in TASK_NAME_FIXES:
        words = words.replace(old, new)
    return words.strip()


def clean_step_label(label: str) -> str:
    return STEP_LABEL_FIXES.get(label, label)


def as_category(text: str) -> str:
    """The answer form of a label, as VideoLLM-online writes it: ``text.capitalize() + '.'``."""
    return text.capitalize() + "."


def normalize(text: str) -> str:
    """Metric normalisation: lower case, strip spaces, a leading 'N. ' list prefix and trailing dots."""
    t = text.strip().lower()
    head, sep, rest = t.partition(". ")
    if sep and head.isdigit():
        t = rest.strip()
    return t.rstrip(".").strip()


def ceil_time_by_fps(t: float, fps: float, min_time: float, max_time: float) -> float:
    """Snap ``t`` up to the ``fps`` frame grid, clamped to [min_time, max_time] (VideoLLM-online's
    ``ceil_time_by_fps``, data/utils.py; no tolerance, so the float products agree with it bit for bit)."""
    return min(max(math.ceil(t * fps) / fps, min_time), max_time)


def span_frame_range(start: float, end: float, duration: float, fps: float = FRAME_FPS) -> range:
    """Indices of the ``fps`` frames shown for the span [start, end] of a video of ``duration`` seconds:
    ``int(start_time·fps) .. int(end_time·fps)`` inclusive, truncating as the COIN benchmarks do (a span clamped
    to a duration off the frame grid ends at the last whole frame)."""
    s = ceil_time_by_fps(start, fps, 0.0, duration)
    e = ceil_time_by_fps(end, fps, 0.0, duration)
    return range(int(s * fps), int(e * fps) + 1)


@dataclass(frozen=True, slots=True)
class StepAnnotation:
    """One annotated step: segment [start, end] in seconds and its (cleaned) label."""

    start: float
    end: float
    label: str
    step_id: str = ""


@dataclass(frozen=True, slots=True)
class VideoAnnotation:
    """One COIN video. ``task_class`` is the CamelCase class, ``task`` its words; steps in file order."""

    video_id: str
    task_class: str
    task: str
    recipe_type: int
    subset: str  # 'training' | 'testing'
    start: float  # ROI
    end: float
    duration: float
    steps: tuple[StepAnnotation, ...]


@dataclass(frozen=True, slots=True)
class Sample:
    """One benchmark question: the video span shown, the prompt, and the expected answer.

    start, end: seconds of the span shown (clamped to the video); ``frame_range(fps)`` gives the frames.
    prompt:     the user message (VideoLLM-online's wording).
    target:     the category the answer must match: ``'Take out the cd drive.'``, or for procedure tasks
                the list of the next <= 5 step categories.
    answer:     the full assistant reply VideoLLM-online trains on (numbered lines for procedures).
    categories: the vocabulary ``fuzzy_match`` maps predictions onto (steps, or tasks for ``task``), as answers
                (``as_category``), from this split's own videos.
    labels:     VideoLLM-online's labels: the target texts lower-cased, without the final '.'.
    vocab:      VideoLLM-online's ``categories``: the split's labels lower-cased (sorted; the metric's tie rule
                makes the order irrelevant).
    """

    sample_id: str
    video_id: str
    task: str
    split: str
    start: float
    end: float
    duration: float
    prompt: str
    target: str | tuple[str, ...]
    answer: str
    categories: tuple[str, ...] = field(repr=False)
    task_name: str = ""
    step_index: int = -1
    labels: tuple[str, ...] = ()
    vocab: tuple[str, ...] = field(default=(), repr=False)

    def frame_range(self, fps: float = FRAME_FPS) -> range:
        return span_frame_range(self.start, self.end, self.duration, fps)

    def num_frames(self, fps: float = FRAME_FPS) -> int:
        return len(self.frame_range(fps))

    @property
    def targets(self) -> tuple[str, ...]:
        """The target as a tuple (one element for the single-answer tasks)."""
        return self.target if isinstance(self.target, tuple) else (self.target,)


@dataclass
class SkipLog:
    """Counted list of what a run over many videos skipped (or clamped), with the reason. Never silent.

    ``write(path)`` stores it as CSV (columns video_id, stage, action, reason) next to the results.
    """

    entries: list[tuple[str, str, str, str]] = field(default_factory=list)

    def add(self, video_id: str, stage: str, reason: str, action: str = "skip") -> None:
        self.entries.append((str(video_id), stage, action, reason))

    def __len__(self) -> int:
        return len(self.entries)

    def count(self, action: str = "skip") -> int:
        return sum(1 for e in self.entries if e[2] == action)

    def summary(self) -> str:
        if not self.entries:
            return "no videos skipped"
        by: dict[tuple[str, str], int] = {}
        for _, stage, action, _ in self.entries:
            by[(stage, action)] = by.get((stage, action), 0) + 1
        verb = {"skip": "skipped", "clamp": "clamped", "cut": "cut (no frames)", "short": "short (fewer frames)"}
        return "; ".join(f"{n} {verb.get(action, action)} at {stage}" for (stage, action), n in sorted(by.items()))

    def write(self, path: str | os.PathLike) -> Path:
        """Write the log atomically as CSV (header even when empty, so 'nothing skipped' is visible)."""
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["video_id", "stage", "action", "reason"])
        w.writerows(self.entries)
        p = _io.write_text(path, buf.getvalue())
        return p


# ---------------------------------------------------------------------------------------------- loading

_FIX_FORMAT = ("Expected the official COIN annotation file: {\"database\": {video_id: {\"class\", \"recipe_type\", "
               "\"subset\", \"start\", \"end\", \"duration\", \"annotation\": [{\"id\", \"segment\": [s, e], "
               "\"label\"}]}}} (github.com/coin-dataset/annotations).")


def normalize_split(split: str) -> str:
    """'train'/'training' -> 'training', 'test'/'testing'/'validation' -> 'testing' (the last with a warning)."""
    key = str(split).strip().lower()
    if key not in _SPLITS:
        raise ValueError(f"unknown COIN split {split!r}: use 'training' or 'testing' "
                         f"(aliases: {', '.join(sorted(_SPLITS))})")
    if key in ("validation", "val"):
        warnings.warn(f"COIN split {split!r}: the official COIN.json calls the evaluation split 'testing'; "
                      "treating it as 'testing'.", stacklevel=3)
    return _SPLITS[key]


def _parse_entry(video_id: str, e: Mapping, *, seg_tol: float) -> tuple[VideoAnnotation, list[str]]:
    """One database entry -> VideoAnnotation; returns notes of clamped segments. Raises CoinFormatError."""
    if not isinstance(e, Mapping):
        raise CoinFormatError(f"video {video_id!r}: entry is {type(e).__name__}, not an object")
    missing = [k for k in ("class", "subset", "duration", "annotation") if k not in e]
    if missing:
        raise CoinFormatError(f"video {video_id!r}: missing field(s) {missing}")
    try:
        duration = float(e["duration"])
        start = float(e.get("start", 0.0))
        end = float(e.get("end", duration))
    except (TypeError, ValueError) as err:
        raise CoinFormatError(f"video {video_id!r}: non-numeric duration/start/end ({err})") from None
    if not duration > 0:
        raise CoinFormatError(f"video {video_id!r}: duration {duration} is not positive")
    sub = str(e["subset"]).strip().lower()
    subset = _SPLITS.get(sub)
    if subset is None:
        raise CoinFormatError(f"video {video_id!r}: unknown subset {e['subset']!r} (expected training/testing)")
    notes: list[str] = []
    steps = []
    anns = e["annotation"]
    if not isinstance(anns, list):
        raise CoinFormatError(f"video {video_id!r}: 'annotation' must be a list")
    for a in anns:
        try:
            s, t = (float(x) for x in a["segment"])
            label = str(a["label"])
        except (KeyError, TypeError, ValueError) as err:
            raise CoinFormatError(f"video {video_id!r}: step {a!r} needs 'segment': [start, end] and 'label' "
                                  f"({err!r})") from None
        if not (0 <= s <= t) or s >= duration + seg_tol:
            raise CoinFormatError(f"video {video_id!r}: step {label!r} segment [{s}, {t}] lies outside the video "
                                  f"[0, {duration}] or is reversed")
        if t > duration:
            notes.append(f"step {label!r} end {t} > duration {duration}: clamped when frames are picked")
        steps.append(StepAnnotation(s, t, clean_step_label(label), str(a.get("id", ""))))
    cls = str(e["class"])
    return VideoAnnotation(str(video_id), cls, clean_task_name(cls), int(e.get("recipe_type", -1)), subset,
                           start, end, duration, tuple(steps)), notes


def _pairs_hook(dups: list[str]):
    """``json.load`` object hook that keeps JSON's last-copy-wins rule but records every repeated key.

    A repeated key whose value is a video entry is reported as ``video id '<id>'``, any other as ``key '<k>'``."""
    def hook(pairs):
        out: dict = {}
        for k, v in pairs:
            if k in out:
                is_video = isinstance(v, dict) and "annotation" in v
                dups.append(f"video id {k!r}" if is_video else f"key {k!r}")
            out[k] = v
        return out
    return hook


def load_annotations(path: str | os.PathLike, skip_log: SkipLog | None = None, *,
                     seg_tol: float = 0.0) -> dict[str, VideoAnnotation]:
    """Read the official ``COIN.json`` -> {video_id: VideoAnnotation} (insertion order of the file).

    A malformed file raises :class:`CoinFormatError` naming the file. A malformed *entry* raises too unless
    ``skip_log`` is given, in which case that video is skipped and recorded there. A step that ends after the
    video's duration is kept and clamped later (as VideoLLM-online does); with ``skip_log`` that is noted.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "COIN.json"
    if not p.exists():
        raise FileNotFoundError(f"COIN annotations not found: {p}. Point coin_root at the folder holding COIN.json "
                                "(the default profile's fixture is built by `make data`).")
    dups: list[str] = []
    try:
        with open(p, "rb") as f:
            raw = json.load(f, object_pairs_hook=_pairs_hook(dups))
    except json.JSONDecodeError as err:
        raise CoinFormatError(f"{p}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg}). "
                              f"Re-download it; {_FIX_FORMAT}") from None
    db = raw.get("database") if isinstance(raw, dict) else None
    if not isinstance(db, dict):
        raise CoinFormatError(f"{p}: no top-level 'database' object. {_FIX_FORMAT}")
    if dups:
        # A JSON object keeps the last copy of a repeated key; which copy is right cannot be known, and either
        # choice changes the samples, so it is an error naming the ids (docs/DECISIONS.md D56).
        raise CoinFormatError(f"{p}: duplicate {', '.join(dups[:5])}"
                              f"{' ...' if len(dups) > 5 else ''} ({len(dups)} in all): each video id must appear "
                              "once in 'database' (and each field once per entry). Remove or rename the extra "
                              "copies.")
    n_val = sum(1 for e in db.values() if isinstance(e, Mapping) and str(e.get("subset", "")).strip().lower()
                in ("validation", "val"))
    if n_val:
        warnings.warn(f"{p}: {n_val} video(s) have subset 'validation'; the official COIN.json calls the "
                      "evaluation split 'testing', so they are treated as 'testing'.", stacklevel=2)
    out: dict[str, VideoAnnotation] = {}
    for vid, entry in db.items():
        try:
            ann, notes = _parse_entry(vid, entry, seg_tol=seg_tol)
        except CoinFormatError as err:
            if skip_log is None:
                raise CoinFormatError(f"{p}: {err}. Fix or remove that entry, or pass a SkipLog to skip it.") from None
            skip_log.add(vid, "annotations", str(err))
            continue
        if skip_log is not None:
            for n in notes:
                skip_log.add(vid, "annotations", n, action="clamp")
        out[ann.video_id] = ann
    return out


# ---------------------------------------------------------------------------------------------- tasks

def _labels(annotations: Mapping[str, VideoAnnotation], kind: str) -> set[str]:
    if kind == "step":
        return {st.label for a in annotations.values() for st in a.steps}
    if kind == "task":
        return {a.task for a in annotations.values()}
    raise ValueError(f"unknown vocabulary {kind!r}: 'step' or 'task'")


def split_videos(annotations: Mapping[str, VideoAnnotation], split: str,
                 available: Collection[str] | None = None) -> dict[str, VideoAnnotation]:
    """The videos of one split (file order), restricted to ``available`` ids when given."""
    subset = normalize_split(split)
    return {v: a for v, a in annotations.items()
            if a.subset == subset and (available is None or v in available)}


def categories(annotations: Mapping[str, VideoAnnotation], kind: str) -> tuple[str, ...]:
    """Vocabulary of ``annotations`` (pass one split's videos, :func:`split_videos`): kind 'step' (step labels) or
    'task' (task names), as answers (``as_category``), sorted."""
    return tuple(sorted({as_category(x) for x in _labels(annotations, kind)}))


def vocabulary(annotations: Mapping[str, VideoAnnotation], kind: str) -> tuple[str, ...]:
    """VideoLLM-online's ``step_categories`` / ``task_categories`` (``COIN.__init__``, data/coin/coin.py): the
    labels of ``annotations`` lower-cased, sorted."""
    return tuple(sorted({x.lower() for x in _labels(annotations, kind)}))


def build_task(annotations: Mapping[str, VideoAnnotation], task: str, split: str,
               available: Collection[str] | None = None) -> list[Sample]:
    """Samples of one VideoLLM-online COIN benchmark for one split, in file order (see module docstring).

    ``available``: ids of the videos that can be read; the others give no samples and no vocabulary, as in
    VideoLLM-online (``video_uid in self.metadata``). The vocabulary is this split's own (``COIN.__init__``).
    """
    if task not in TASKS:
        raise ValueError(f"unknown COIN task {task!r}: choose one of {', '.join(TASKS)}")
    subset = normalize_split(split)
    videos = split_videos(annotations, subset, available)
    kind = "task" if task == "task" else "step"
    cats, vocab = categories(videos, kind), vocabulary(videos, kind)
    out: list[Sample] = []
    for a in videos.values():
        vid, dur, steps = a.video_id, a.duration, a.steps
        if task == "task":
            tgt = as_category(a.task)
            out.append(Sample(f"task/{vid}", vid, task, subset, min(a.start, dur), min(a.end, dur), dur,
                              PROMPT_TASK, tgt, tgt, cats, a.task, -1, (a.task.lower(),), vocab))
            continue
        n = len(steps)
        for i in range(n if task == "step" else n - 1):
            st = steps[i]
            s, e = min(st.start, dur), min(st.end, dur)
            if task == "step":
                tgt = as_category(st.label)
                prompt, target, answer, labels = PROMPT_STEP, tgt, tgt, (st.label.lower(),)
            elif task == "next":
                tgt = as_category(steps[i + 1].label)
                prompt, target, answer, labels = PROMPT_NEXT, tgt, tgt, (steps[i + 1].label.lower(),)
            else:
                nxt_steps = steps[i + 1:i + 1 + MAX_PROCEDURE_STEPS]
                nxt = tuple(as_category(x.label) for x in nxt_steps)
                labels = tuple(x.label.lower() for x in nxt_steps)
                if task == "procedure":
                    prompt = PROMPT_NEXT if len(nxt) == 1 else prompt_procedure(len(nxt))
                else:
                    prompt = prompt_taskprocedure(a.task, len(nxt))
                answer = nxt[0] if len(nxt) == 1 else "\n".join(f"{k + 1}. {c}" for k, c in enumerate(nxt))
                target = nxt
            out.append(Sample(f"{task}/{vid}/{i}", vid, task, subset, s, e, dur, prompt, target, answer, cats,
                              a.task, i, labels, vocab))
    return out


def build_all(annotations: Mapping[str, VideoAnnotation], split: str,
              available: Collection[str] | None = None) -> dict[str, list[Sample]]:
    """All five tasks for one split."""
    return {t: build_task(annotations, t, split, available) for t in TASKS}


# ---------------------------------------------------------------------------------------------- metric

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


# ---------------------------------------------------------------------------------------------- files

def video_path(videos_dir: str | os.PathLike, video_id: str) -> Path:
    """``videos_dir/<video_id>.mp4`` (or .webm/.mkv/.avi/.mov); a clear error when none exists."""
    d = Path(videos_dir)
    for ext in _VIDEO_EXTS:
        p = d / f"{video_id}{ext}"
        if p.exists():
            return p
    raise MissingVideoError(f"video {video_id!r}: no file {d}/{video_id}{{{','.join(_VIDEO_EXTS)}}}. Download it "
                            "(VideoLLM-online data/coin/download_videos.py) or drop it from the run; "
                            "filter_available(...) skips and counts such videos.")


def available_ids(annotations: Mapping[str, VideoAnnotation], videos_dir: str | os.PathLike,
                  skip_log: SkipLog | None = None, split: str | None = None) -> set[str]:
    """Ids (of ``split``, or all) whose video file exists; each missing one is recorded once in ``skip_log``."""
    vids = annotations if split is None else split_videos(annotations, split)
    out = set()
    for v in vids:
        try:
            video_path(videos_dir, v)
            out.add(v)
        except MissingVideoError as err:
            if skip_log is not None:
                skip_log.add(v, "video file", str(err))
    return out


def filter_available(samples: Sequence[Sample], videos_dir: str | os.PathLike,
                     skip_log: SkipLog) -> list[Sample]:
    """Keep samples whose video file exists; record each missing video once in ``skip_log``."""
    seen: dict[str, bool] = {}
    out = []
    for s in samples:
        if s.video_id not in seen:
            try:
                video_path(videos_dir, s.video_id)
                seen[s.video_id] = True
            except MissingVideoError as err:
                seen[s.video_id] = False
                skip_log.add(s.video_id, "video file", str(err))
        if seen[s.video_id]:
            out.append(s)
    return out


def dataset_paths(profile: str, coin_root: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """(COIN.json, videos folder) of a profile.

    smoke:   ``data/coin_tiny`` (hand-written JSON, tiny real-footage videos committed with it).
    default: ``data/coin_mini`` built by ``make data`` (``python data/make_coin_mini.py``).
    full:    the user's folder ``coin_root`` laid out as ``COIN.json`` (the official file, any name
             matching ``COIN.json``/``coin.json``) and ``videos/<youtube_id>.mp4``.
    """
    if profile == "smoke":
        root = REPO_ROOT / "data" / "coin_tiny"
        if not (root / "videos").is_dir():
            raise FileNotFoundError(f"{root}/videos is missing: run `python data/make_coin_mini.py --tiny`.")
    elif profile == "default":
        root = REPO_ROOT / "data" / "coin_mini"
        if not (root / "COIN.json").exists():
            raise FileNotFoundError(f"{root}/COIN.json is missing: the COIN fixture is built by `make data` "
                                    "(python data/make_coin_mini.py, < 1 min).")
    elif profile == "full":
        if not coin_root:
            raise ValueError("profile 'full' needs coin_root: a folder holding COIN.json and videos/<id>.mp4")
        root = Path(coin_root).expanduser()
        if not root.is_dir():
            raise FileNotFoundError(f"coin_root {root} is not a folder (expected COIN.json + videos/)")
    else:
        raise ValueError(f"unknown profile {profile!r}: smoke, default or full")
    js = next((root / n for n in ("COIN.json", "coin.json") if (root / n).exists()), root / "COIN.json")
    if not js.exists():
        raise FileNotFoundError(f"{js} not found: put the official COIN.json in {root}")
    vids = root / "videos"
    if not vids.is_dir():
        raise FileNotFoundError(f"{vids} not found: put the videos as {vids}/<youtube_id>.mp4")
    return js, vids


# ---------------------------------------------------------------------------------------------- statistics

WORDS_PER_TOKEN_APPROX = 1.3  # smoke profile: tokens ~ words x 1.3 (a common rule of thumb for BPE on English)


def approx_token_count(text: str) -> int:
    """Tokenizer-free estimate used by the smoke profile: ceil(words x 1.3)."""
    return int(math.ceil(len(text.split()) * WORDS_PER_TOKEN_APPROX))


def task_stats(samples_by_task: Mapping[str, Sequence[Sample]], count_tokens, tokenizer_name: str,
               fps: float = FRAME_FPS) -> "pandas.DataFrame":  # noqa: F821
    """Per task (and 'all' = every sample of every task pooled): the workload the latency model needs.

    Columns: task, n_samples, avg_frames_2fps (frames shown at ``fps``), avg_question_tokens (the prompt),
    avg_answer_tokens (the full reply, numbered lines for procedures), tokenizer. ``count_tokens(text) -> int``
    counts tokens without special tokens or chat template.
    """
    import pandas as pd

    recs, pooled = [], {"f": [], "q": [], "a": []}
    cache: dict[str, int] = {}

    def n_tok(t: str) -> int:
        if t not in cache:
            cache[t] = int(count_tokens(t))
        return cache[t]

    for task, samples in samples_by_task.items():
        if not samples:
            continue
        f = [s.num_frames(fps) for s in samples]
        q = [n_tok(s.prompt) for s in samples]
        a = [n_tok(s.answer) for s in samples]
        pooled["f"] += f
        pooled["q"] += q
        pooled["a"] += a
        recs.append(dict(task=task, n_samples=len(samples), avg_frames_2fps=float(np.mean(f)),
                         avg_question_tokens=float(np.mean(q)), avg_answer_tokens=float(np.mean(a)),
                         tokenizer=tokenizer_name))
    if pooled["f"]:
        recs.append(dict(task="all", n_samples=len(pooled["f"]), avg_frames_2fps=float(np.mean(pooled["f"])),
                         avg_question_tokens=float(np.mean(pooled["q"])),
                         avg_answer_tokens=float(np.mean(pooled["a"])), tokenizer=tokenizer_name))
    return pd.DataFrame.from_records(recs, columns=["task", "n_samples", "avg_frames_2fps", "avg_question_tokens",
                                                    "avg_answer_tokens", "tokenizer"])


def token_counter(profile: str, tokenizer_path: str | os.PathLike | None = None):
    """``(count_tokens(text) -> int, name)`` for :func:`task_stats`.

    smoke: :func:`approx_token_count` (no tokenizer load, keeps CI fast). default: the SmolLM2-135M tokenizer
    (the runtime's model; loaded alone, without the weights). full: the tokenizer at ``tokenizer_path``
    (e.g. the VideoLLM-online checkpoint's Llama-3 tokenizer), else SmolLM2 with a warning.
    Special tokens and chat templates are not counted.
    """
    if profile == "smoke":
        return approx_token_count, f"approx: ceil(words x {WORDS_PER_TOKEN_APPROX})"
    from transformers import AutoTokenizer

    if profile == "full" and tokenizer_path:
        tok = AutoTokenizer.from_pretrained(str(tokenizer_path))
        name = str(tokenizer_path)
    else:
        if profile == "full":
            warnings.warn("full profile without tokenizer_path: counting tokens with SmolLM2's tokenizer, not "
                          "the checkpoint's (Llama-3 for VideoLLM-online).", stacklevel=2)
        from .llm_weights import GGUF_NAME, smollm2_dir

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        tok = AutoTokenizer.from_pretrained(smollm2_dir(), gguf_file=GGUF_NAME)
        name = "SmolLM2-135M-Instruct"
    return (lambda text: len(tok(text, add_special_tokens=False)["input_ids"])), name
