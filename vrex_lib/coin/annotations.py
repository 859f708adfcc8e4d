"""The official ``COIN.json``: its entries as :class:`VideoAnnotation` (steps in file order), the split and the label
vocabularies VideoLLM-online builds from it, and the :class:`SkipLog` of what a run skipped. Never silent: a
malformed file raises :class:`CoinFormatError` naming the file and the fix."""
from __future__ import annotations

import json
import os
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import _io


# Accepted split names -> the subset name in the official file. The README of COIN says "validation"
# while the real COIN.json uses "testing" (videollm-online #26): accept it, with a warning.
_SPLITS = {"training": "training", "train": "training", "testing": "testing", "test": "testing",
           "validation": "testing", "val": "testing"}

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
    except UnicodeDecodeError as err:
        # JSON is UTF-8 (RFC 8259): a Latin-1 or damaged file would otherwise fail with no file name.
        raise CoinFormatError(f"{p}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start} "
                              f"cannot be decoded as {err.encoding}). Re-download it, or save it as UTF-8; "
                              f"{_FIX_FORMAT}") from None
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
