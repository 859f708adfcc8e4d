"""The one loop that streams a video through a :class:`~vrex_lib.runtime.StreamingSession`: :func:`drive`.

    sess = StreamingSession(model, policy, cfg)
    answers = drive(sess, zip(frame_embeds, times), AskAtEnd([Question("What is he doing?", 32)]))

``frames`` yields ``(frame, time_s)`` pairs: a frame is either pixels (uint8 [H, W, 3], which the session's vision
tower encodes inside the step) or precomputed frame tokens (tensor [10, hidden]). A :class:`Schedule` says when the
questions come and when the stream stops; its hooks run after the system prompt (``start``), before and after every
frame, and after the last frame (``finish``), and :meth:`Schedule.ask` asks one :class:`Question` and records its
:class:`Answer`. The schedules here: :class:`AskAtEnd` (every question after the last frame, in either prompt
layout) and :class:`AskAtTimes` (each question once the stream passes its time). The COIN evaluation, the design
space, the live CLI and the workload measurement all stream through :func:`drive`; what each step did is in the
session's trace, and per-step observers (:meth:`StreamingSession.add_observer`) see every forward pass.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from .session import DEFAULT_SYSTEM_PROMPT, StreamingSession

LAYOUTS: tuple[str, ...] = ("live", "coin")


@dataclass(frozen=True)
class Question:
    """One question. ``time_s``: when :class:`AskAtTimes` asks it (None: after the last frame); ``force_ids``:
    teacher-force these answer tokens (the argmax agreement is recorded); ``stop_strings`` end a free answer."""

    text: str
    max_new_tokens: int = 64
    time_s: float | None = None
    force_ids: Sequence[int] | None = None
    stop_strings: tuple[str, ...] = ()


@dataclass
class Answer:
    """What one question produced. ``kv_len``: cache tokens when it came; ``steps``: trace step indices of its
    prefill and generated tokens; ``ids``: the answer tokens fed (``StreamingSession.last_answer['ids']``);
    ``agreement``: per forced token, 1 if the argmax agreed (None when not forced); ``after_frame_s``: time of the
    last frame streamed before it (None: no frame yet); ``wall_s``: this machine's time for prefill + decode."""

    question: Question
    text: str
    kv_len: int
    steps: list[int]
    ids: list[int]
    agreement: list[int] | None
    first_argmax: int | None
    after_frame_s: float | None
    wall_s: float


class Schedule:
    """When questions come and when the stream stops (the base class asks nothing and streams every frame).

    ``layout``: 'live' (questions after frames, :meth:`StreamingSession.ask`) or 'coin' (one question prefilled
    before the frames, answered after them, :meth:`StreamingSession.answer`). ``answers`` collects every
    :class:`Answer`; ``frame_wall_s`` sums the frame steps' wall time; ``last_frame_s`` is the last frame's time.
    """

    layout = "live"

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.frame_wall_s = 0.0
        self.last_frame_s: float | None = None

    @property
    def done(self) -> bool:
        """True stops the stream before the next frame is taken from the iterator."""
        return False

    def start(self, sess: StreamingSession) -> None:
        """After the system prompt, before the first frame."""

    def before_frame(self, sess: StreamingSession, index: int, time_s: float | None) -> None:
        """Before frame ``index`` (at ``time_s`` in the video) is prefilled."""

    def after_frame(self, sess: StreamingSession, index: int, time_s: float | None, wall_s: float,
                    cpu_s: float) -> None:
        """After frame ``index``; ``wall_s`` / ``cpu_s``: this machine's wall and process CPU time of its step."""

    def finish(self, sess: StreamingSession) -> None:
        """After the last frame."""

    def on_answer(self, sess: StreamingSession, answer: Answer) -> None:
        """Right after :meth:`ask` recorded ``answer``."""

    def ask(self, sess: StreamingSession, q: Question) -> Answer:
        """Ask ``q`` in this schedule's layout; the answer is recorded in :attr:`answers` and returned."""
        n0, kv_len, t0 = len(sess.stats), sess.n_tokens, time.perf_counter()
        if self.layout == "coin":
            text = sess.answer(max_new_tokens=q.max_new_tokens, force_ids=q.force_ids, stop_strings=q.stop_strings)
        else:
            text = sess.ask(q.text, max_new_tokens=q.max_new_tokens, force_ids=q.force_ids,
                            stop_strings=q.stop_strings)
        wall = time.perf_counter() - t0
        last = sess.last_answer
        a = Answer(q, text, kv_len, list(range(n0, len(sess.stats))), [int(i) for i in last["ids"]],
                   last.get("agreement"), int(last["step_argmax"][0]) if last["step_argmax"] else None,
                   self.last_frame_s, wall)
        self.answers.append(a)
        self.on_answer(sess, a)
        return a


class AskAtEnd(Schedule):
    """Every question after the last frame. In the 'coin' layout there is exactly one: its text is the user
    prompt prefilled before the frames (VideoLLM-online's COIN benchmarks)."""

    def __init__(self, questions: Iterable[Question] = (), layout: str = "live"):
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"unknown prompt layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
        self.questions, self.layout = list(questions), layout
        if layout == "coin" and len(self.questions) != 1:
            raise ValueError(f"the coin prompt layout has one question per stream, got {len(self.questions)}")

    def start(self, sess: StreamingSession) -> None:
        if self.layout == "coin":
            sess.add_user_prompt(self.questions[0].text)

    def finish(self, sess: StreamingSession) -> None:
        for q in self.questions:
            self.ask(sess, q)


class AskAtTimes(Schedule):
    """Each question before the first frame later than its ``time_s`` (live layout); the rest after the stream."""

    def __init__(self, questions: Iterable[Question]):
        super().__init__()
        self.pending = sorted(questions, key=lambda q: float("inf") if q.time_s is None else q.time_s)

    def _ask_due(self, sess: StreamingSession, t_now: float | None) -> None:
        while self.pending and (t_now is None or (self.pending[0].time_s is not None
                                                  and self.pending[0].time_s <= t_now)):
            self.ask(sess, self.pending.pop(0))

    def before_frame(self, sess: StreamingSession, index: int, time_s: float | None) -> None:
        if time_s is not None:
            self._ask_due(sess, time_s - 1e-9)  # due strictly before this frame

    def finish(self, sess: StreamingSession) -> None:
        self._ask_due(sess, None)


def drive(sess: StreamingSession, frames: Iterable, schedule: Schedule | None = None, *,
          system_prompt: str | None = DEFAULT_SYSTEM_PROMPT) -> list[Answer]:
    """Stream ``frames`` ((frame, time_s) pairs, see the module docstring) through ``sess`` under ``schedule``
    (default: no questions), after ``system_prompt`` (None: the session already holds its prompt). Returns the
    schedule's answers."""
    schedule = schedule if schedule is not None else Schedule()
    if system_prompt is not None:
        sess.add_system_prompt(system_prompt)
    schedule.start(sess)
    it = iter(frames)
    index = 0
    while not schedule.done:
        try:
            frame, t = next(it)
        except StopIteration:
            break
        t = None if t is None else float(t)
        schedule.before_frame(sess, index, t)
        t0, c0 = time.perf_counter(), time.process_time()
        if isinstance(frame, torch.Tensor):
            sess.add_frame_embeds(frame, t)
        else:
            sess.add_frame(frame, t)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        schedule.frame_wall_s += wall
        schedule.last_frame_s = t
        schedule.after_frame(sess, index, t, wall, cpu)
        index += 1
    schedule.finish(sess)
    return schedule.answers
