"""The one stream driver (vrex_lib.runtime.driver), the session's step observers, and the one definition of the
step statistics (vrex_lib.runtime.trace: pooled_fraction, step_stats)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vrex_lib.config import RuntimeConfig
from vrex_lib.retrieval import make_policy
from vrex_lib.runtime import (AskAtEnd, AskAtTimes, Question, Schedule, StreamingSession, drive, pooled_fraction,
                              step_stats)


class Recorder:
    """A step observer that logs what it is told."""

    def __init__(self):
        self.log = []

    def begin_step(self, step):
        self.log.append(("begin", step.kind, step.start, step.store.get_seq_length()))

    def end_step(self, step, row):
        self.log.append(("end", row["kind"], row["start"], row["n_cache"]))


@pytest.fixture(scope="module")
def embeds(tiny):
    g = torch.Generator().manual_seed(0)
    return tiny.embed_frames(torch.randint(0, 256, (6, 64, 64, 3), generator=g, dtype=torch.uint8).numpy())


def test_observers_see_every_step_before_and_after_it(tiny, embeds):
    rec = Recorder()
    sess = StreamingSession(tiny, None, RuntimeConfig(), observers=[rec])
    drive(sess, ((e, i / 2) for i, e in enumerate(embeds[:3])), AskAtEnd([Question("q?", 2)]))
    rows = sess.stats
    begins = [e for e in rec.log if e[0] == "begin"]
    ends = [e for e in rec.log if e[0] == "end"]
    assert len(begins) == len(ends) == len(rows) and [e[0] for e in rec.log[:2]] == ["begin", "end"]
    # begin: before the model appends the step's tokens; end: after, with the step's own trace row
    assert [b[3] for b in begins] == [r["start"] for r in rows] == [b[2] for b in begins]
    assert [e[3] for e in ends] == [r["n_cache"] for r in rows]
    assert [b[1] for b in begins] == ["system", "frame", "frame", "frame", "question", "decode"]


def test_ask_at_times_asks_before_the_first_later_frame(tiny, embeds):
    sess = StreamingSession(tiny, None, RuntimeConfig())
    sched = AskAtTimes([Question("late?", 2, time_s=99.0), Question("a?", 2, time_s=1.0)])
    answers = drive(sess, ((e, i * 0.5) for i, e in enumerate(embeds)), sched)
    assert [a.question.text for a in answers] == ["a?", "late?"]
    first = answers[0]
    # asked after the frame at 1.0 s (the third), before the one at 1.5 s
    assert first.after_frame_s == 1.0 and first.kv_len == sess.stats[first.steps[0]]["start"]
    kinds = [sess.stats[i]["kind"] for i in first.steps]
    assert kinds[0] == "question" and set(kinds[1:]) <= {"decode"} and len(first.ids) >= 1
    assert sum(r["kind"] == "frame" for r in sess.stats[:first.steps[0]]) == 3
    assert answers[1].after_frame_s == 2.5 and sched.frame_wall_s > 0


def test_coin_layout_prefills_the_question_before_the_frames(tiny, embeds):
    sess = StreamingSession(tiny, None, RuntimeConfig())
    drive(sess, ((e, None) for e in embeds[:2]), AskAtEnd([Question("What?", 3)], layout="coin"))
    assert [r["kind"] for r in sess.stats][:4] == ["system", "question", "frame", "frame"]
    assert sess.prompt_layout == "coin"
    with pytest.raises(ValueError, match="one question"):
        AskAtEnd([Question("a"), Question("b")], layout="coin")
    with pytest.raises(ValueError, match="unknown prompt layout"):
        AskAtEnd([Question("a")], layout="chat")


def test_a_done_schedule_stops_before_taking_the_next_frame(tiny, embeds):
    taken = []

    def frames():
        for i, e in enumerate(embeds):
            taken.append(i)
            yield e, float(i)

    class TwoFrames(Schedule):
        @property
        def done(self):
            return len(self.seen) >= 2

        def __init__(self):
            super().__init__()
            self.seen = []

        def after_frame(self, sess, index, time_s, wall_s, cpu_s):
            self.seen.append((index, time_s))

    sched = TwoFrames()
    drive(StreamingSession(tiny, None, RuntimeConfig()), frames(), sched)
    assert sched.seen == [(0, 0.0), (1, 1.0)] and taken == [0, 1]


def test_pooled_fraction_is_token_weighted_not_a_mean_of_ratios():
    num = np.array([[1.0, 3.0], [5.0, 0.0]])
    den = np.array([[2.0, 10.0], [5.0, 0.0]])
    mask = np.array([[True, True], [False, True]])
    # (1 + 3 + 0) / (2 + 10 + 0); a mean of the cells' ratios would give 0.4
    assert pooled_fraction(num, den, mask) == pytest.approx(4 / 12)
    np.testing.assert_allclose(pooled_fraction(num, den, mask, axes=(0,)), [0.5, 0.3])
    per_row = pooled_fraction(num, den, mask, axes=(1,))
    assert per_row[0] == pytest.approx(4 / 12) and math.isnan(per_row[1])  # nothing counts in row 1
    assert math.isnan(pooled_fraction(num, den, np.zeros((2, 2), bool)))


def test_step_stats_of_one_hand_built_step():
    row = dict(applied=np.array([False, True, True]), n_candidates=20,
               selected=np.array([[20, 20], [5, 15], [2, 0]]),
               stats=dict(clusters=np.array([np.nan, 4.0, 10.0]), table_tokens=np.array([np.nan, 40.0, 40.0]),
                          prefix_frac=np.array([np.nan, 0.2, 0.4])))
    st = step_stats(row, n_kv_heads=2)
    assert st["selected_frac"] == pytest.approx(22 / 80)  # the dense layer 0 is not counted
    assert st["tokens_per_cluster"] == pytest.approx(np.mean([40 * 2 / 4, 40 * 2 / 10]))
    assert st["wics_exit_frac"] == pytest.approx(0.3)
    none = step_stats(dict(applied=np.zeros(3, bool), n_candidates=0, selected=np.zeros((3, 2)), stats={}), 2)
    assert all(math.isnan(v) for v in none.values())


def test_session_stats_and_trace_agree(tiny, embeds):
    sess = StreamingSession(tiny, make_policy("resv"), RuntimeConfig())
    drive(sess, ((e, float(i)) for i, e in enumerate(embeds)))
    tr = sess.trace()
    last = int(np.nonzero(tr.step_mask("frame"))[0][-1])
    st = step_stats(sess.stats[last], tiny.n_kv_heads)
    assert st["selected_frac"] == pytest.approx(tr.retrieval_ratio(tr.arrays["stage"][last], by="step")[-1])
    assert st["tokens_per_cluster"] == pytest.approx(tr.tokens_per_cluster(last)) and st["tokens_per_cluster"] >= 1
    assert 0 < tr.wics_exit_fraction("frame") <= 1
