"""VideoLLM-online's five COIN benchmark tasks as :class:`Sample` lists (:func:`build_task`): prompts verbatim, span
times snapped up to the 2 fps grid and clamped to the video's duration, frames ``int()`` of those times
(:func:`span_frame_range`), targets and vocabularies from the split's own videos.

Which duration clamps a span: VideoLLM-online's, the decoded length of the video, ``(len(frames) - 1) / fps`` of
its 2 fps frames (``COIN.get_metadata`` in ``data/coin/coin.py``; COIN.json's ``duration`` is never read there).
:func:`build_task` takes those lengths as ``durations`` (:func:`vrex_lib.coin.decoded_duration` probes them);
without it the annotation's ``duration`` stands in, for statistics over the annotations alone
(docs/DECISIONS.md D59).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from .annotations import VideoAnnotation, as_category, categories, normalize_split, split_videos, vocabulary


TASKS: tuple[str, ...] = ("step", "next", "task", "procedure", "taskprocedure")

PROCEDURE_TASKS: frozenset[str] = frozenset({"procedure", "taskprocedure"})

MAX_PROCEDURE_STEPS = 5  # VideoLLM-online's COINProcedure.max_num_steps

FRAME_FPS = 2.0  # VideoLLM-online's COIN frame rate (frames pre-extracted at 2 fps)

#: How the 2 fps frames are taken from a COIN video (:data:`vrex_lib.video.SAMPLINGS`): as ffmpeg's ``-r 2`` writes
#: them, VideoLLM-online's preprocessing (``ffmpeg_once``); 'grid' = the nearest source frame to k / 2 s (D59).
FRAME_SAMPLING = "ffmpeg"

#: Live1+'s ``max_num_frames`` (showlab/videollm-online models/arguments_live.py, LiveOnePlusTrainingArguments).
MAX_NUM_FRAMES = 1200

#: What happens to a span longer than ``max_frames`` (docs/DECISIONS.md D57):
#: 'videollm-online' -- StreamMixIn.max_frames_clip: the whole stream is cut, the question is asked with no
#: frames (the sample still counts); 'skip' -- the sample is not run (listed in the skip log);
#: 'clamp' -- keep the last ``max_frames`` frames before the question.
FRAMES_POLICIES: tuple[str, ...] = ("videollm-online", "skip", "clamp")

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


def ceil_time_by_fps(t: float, fps: float, min_time: float, max_time: float) -> float:
    """Snap ``t`` up to the ``fps`` frame grid, clamped to [min_time, max_time] (VideoLLM-online's
    ``ceil_time_by_fps``, data/utils.py; no tolerance, so the float products agree with it bit for bit)."""
    return min(max(math.ceil(t * fps) / fps, min_time), max_time)


def span_frame_range(start: float, end: float, duration: float, fps: float = FRAME_FPS) -> range:
    """Indices of the ``fps`` frames shown for the span [start, end] of a video of ``duration`` seconds:
    ``int(start_time·fps) .. int(end_time·fps)`` inclusive, where ``start_time``/``end_time`` are ``start``/``end``
    snapped up to the grid and clamped to [0, duration] (:func:`ceil_time_by_fps`). The frames are ``int()`` of
    the clamped times, as VideoLLM-online's COIN benchmarks compute them (``data/coin/benchmarks.py``), not
    ``ceil()`` of the raw ones: a span clamped to a duration off the grid ends at the last whole frame."""
    s = ceil_time_by_fps(start, fps, 0.0, duration)
    e = ceil_time_by_fps(end, fps, 0.0, duration)
    return range(int(s * fps), int(e * fps) + 1)


@dataclass(frozen=True, slots=True)
class Sample:
    """One benchmark question: the video span shown, the prompt, and the expected answer.

    start, end: the annotated span in seconds as COIN.json gives it; ``frame_range(fps)`` snaps them to the frame
                grid, clamps them to ``duration`` and gives the frames (:func:`span_frame_range`).
    duration:   the length spans are clamped to: the decoded video's (``build_task(durations=...)``,
                :meth:`with_duration`) or, for annotation-only statistics, COIN.json's.
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

    def with_duration(self, duration_s: float) -> "Sample":
        """This sample with its span clamped to ``duration_s`` (the decoded video's length) instead."""
        if not (isinstance(duration_s, (int, float)) and math.isfinite(duration_s) and duration_s >= 0):
            raise ValueError(f"sample {self.sample_id}: duration {duration_s!r} is not a length in seconds")
        return dataclasses.replace(self, duration=float(duration_s))

    def num_frames(self, fps: float = FRAME_FPS) -> int:
        return len(self.frame_range(fps))

    @property
    def targets(self) -> tuple[str, ...]:
        """The target as a tuple (one element for the single-answer tasks)."""
        return self.target if isinstance(self.target, tuple) else (self.target,)


def build_task(annotations: Mapping[str, VideoAnnotation], task: str, split: str,
               available: Collection[str] | None = None,
               durations: Mapping[str, float] | None = None) -> list[Sample]:
    """Samples of one VideoLLM-online COIN benchmark for one split, in file order (see module docstring).

    ``available``: ids of the videos that can be read; the others give no samples and no vocabulary, as in
    VideoLLM-online (``video_uid in self.metadata``). The vocabulary is this split's own (``COIN.__init__``).
    ``durations``: {video id: decoded length in seconds} (:func:`vrex_lib.coin.decoded_duration`), the length
    VideoLLM-online clamps spans to; every video kept must have one. None: COIN.json's ``duration``.
    """
    if task not in TASKS:
        raise ValueError(f"unknown COIN task {task!r}: choose one of {', '.join(TASKS)}")
    subset = normalize_split(split)
    videos = split_videos(annotations, subset, available)
    if durations is not None and (gone := [v for v in videos if v not in durations]):
        raise ValueError(f"build_task: no decoded duration for video(s) {', '.join(gone[:5])}"
                         f"{' ...' if len(gone) > 5 else ''}; probe them (coin.decoded_duration) or leave them out "
                         "with available=")
    kind = "task" if task == "task" else "step"
    cats, vocab = categories(videos, kind), vocabulary(videos, kind)
    out: list[Sample] = []
    for a in videos.values():
        vid, steps = a.video_id, a.steps
        dur = a.duration if durations is None else float(durations[vid])
        if task == "task":
            tgt = as_category(a.task)
            out.append(Sample(f"task/{vid}", vid, task, subset, a.start, a.end, dur,
                              PROMPT_TASK, tgt, tgt, cats, a.task, -1, (a.task.lower(),), vocab))
            continue
        n = len(steps)
        for i in range(n if task == "step" else n - 1):
            st = steps[i]
            s, e = st.start, st.end
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
