"""Sampling error and cost of a COIN evaluation (docs/DECISIONS.md D340): the bootstrap and normal-approximation
intervals on constructed cases, the claim rows' interval notes, and ``python -m vrex_lib.eval plan``."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from vrex_lib import coin
from vrex_lib import eval as ev
from vrex_lib.claims.accuracy import interval_note
from vrex_lib.eval import stats


def _counts(correct: list[int], counted: list[int] | None = None) -> dict[str, tuple[int, int]]:
    counted = counted or [1] * len(correct)
    return {f"s{i}": (c, n) for i, (c, n) in enumerate(zip(correct, counted))}


def test_top1_interval_has_the_binomial_width():
    iv = stats.top1_interval(_counts([1, 0] * 200))  # 400 samples at 50 %: sd 2.5 pt, 95 % half-width 4.9 pt
    assert iv.value == 50.0 and iv.n == 400 and iv.lo < 50 < iv.hi
    assert iv.half_width == pytest.approx(100 * 1.96 * math.sqrt(0.25 / 400), rel=0.02)
    # procedure samples count their steps: pooled 3/10, not the mean of per-sample fractions
    assert stats.top1_interval(_counts([3, 0], [5, 5])).value == 30.0
    # 0 of 2: Wilson's [0, 65.8] %, not a point
    zero = stats.top1_interval(_counts([0, 0]))
    assert (zero.lo, round(zero.hi, 1)) == (0.0, 65.8)


def test_paired_drop_interval_uses_the_pairs():
    ref = _counts([1] * 90 + [0] * 10)
    same = stats.drop_interval([ref], [ref])
    # the same answers on 100 samples: no pair differs, yet 0 of 100 bounds the discordance only below 3.7 %
    assert same.value == 0.0 and same.lo < 0 < same.hi
    assert same.half_width == pytest.approx(stats.paired_half_width(100, stats.wilson(0, 100)[1]), rel=0.1)
    # the method loses 5 samples the reference got and gains 1: drop 4 pt; discordance 6 %
    other = dict(ref, **{f"s{i}": (0, 1) for i in range(5)}, s95=(1, 1))
    d = stats.drop_interval([ref], [other])
    assert d.value == pytest.approx(4.0) and d.lo < 4.0 < d.hi and d.lo >= 0
    assert stats.discordance(ref, other) == pytest.approx(0.06)
    # about the normal approximation's 1.96 sqrt(0.06 / 100) = 4.8 pt; two unpaired 90 % proportions give 8.3 pt
    assert d.half_width == pytest.approx(stats.paired_half_width(100, 0.06), rel=0.25)
    assert d.half_width < 0.7 * 100 * 1.96 * math.sqrt(2 * 0.09 / 100)
    mx = stats.drop_interval([ref, ref], [other, ref], reduce="max")
    assert mx.value == pytest.approx(4.0) and mx.n == 200
    with pytest.raises(ValueError, match="share no sample"):
        stats.drop_interval([ref], [{"x": (1, 1)}])


def test_sample_size_for_fig19s_one_point_tolerance():
    # discordance 10 %: +-1 pt needs ceil(1.96^2 * 0.1 / 0.01^2) = 3,842 samples; that many give +-1.0 pt
    assert stats.samples_for(1.0, 0.10) == 3842
    assert stats.paired_half_width(3842, 0.10) == pytest.approx(1.0, abs=1e-3)
    assert stats.paired_half_width(200, 0.10) == pytest.approx(4.38, abs=0.01)


def test_interval_note_says_when_the_tolerance_is_below_the_sampling_error():
    small = stats.Interval(0.8, -3.0, 4.6, 120, "paired bootstrap")
    note = interval_note("fig19.acc_drop.resv", {"fig19.acc_drop.resv": small}, "x")
    assert note.startswith("x; 95 % CI [-3.0, 4.6] pt") and "±1-point tolerance is below the sampling error" in note
    big = stats.Interval(0.8, 0.3, 1.3, 9000, "paired bootstrap")
    assert "below the sampling error" not in interval_note("fig19.acc_drop.resv", {"fig19.acc_drop.resv": big})
    assert interval_note("fig19.acc_drop.resv", None, "x") == "x"


def _timing_file(path, n_frames: list[int], total_s: list[float]):
    path.write_text("".join(json.dumps(dict(sample_id=f"s{i}", n_frames=f, timing_s=dict(total=t))) + "\n"
                            for i, (f, t) in enumerate(zip(n_frames, total_s))))
    return path


def test_plan_prints_gpu_hours_from_the_measured_seconds_per_frame(tmp_path, capsys):
    t = _timing_file(tmp_path / "t.jsonl", [10, 30], [2.0, 6.0])  # 8 s over 40 frames: 0.2 s per frame
    assert ev.main(["plan", "--profile", "smoke", "--tasks", "step,task", "--methods", "full,resv", "--timing", str(t),
                    "--gpus", "2"]) == 0
    out = capsys.readouterr().out
    js, vids = coin.dataset_paths("smoke")
    ann = coin.load_annotations(js, coin.SkipLog())
    avail = coin.available_ids(ann, vids, None, "testing")
    total = 0.0
    for task in ("step", "task"):
        ss = coin.build_task(ann, task, "testing", available=avail)
        frames = sum(max(min(s.num_frames(), coin.MAX_NUM_FRAMES), 1) for s in ss)
        hours = frames * 0.2 * 2 / 3600
        total += hours
        line = next(x for x in out.splitlines() if x.split()[:2] == [task, str(len(ss))])
        assert line.split()[2:4] == [str(frames), f"{hours:.3f}"]
        assert f"{stats.paired_half_width(len(ss), 0.10):.2f}" in line
    assert f"total {total:.2f} GPU-hours; {total / 2:.2f} h on 2 GPU(s)" in out
    assert "0.2 s per frame, measured over 2 samples" in out and "assumed (no --pilot)" in out


@pytest.mark.parametrize("args, says", [
    ([], "plan needs the measured cost"),
    (["--seconds-per-frame", "0"], "--seconds-per-frame must be > 0"),
    (["--seconds-per-frame", "1", "--tasks", "steps"], "unknown task 'steps'"),
])
def test_plan_refuses_what_it_cannot_estimate(capsys, args, says):
    assert ev.main(["plan", "--profile", "smoke", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_plan_measures_the_discordance_of_a_pilot_pair(tiny, tmp_path, capsys):
    kw = dict(model=tiny, max_samples=3, progress=False, reference=None, max_new_tokens=2)
    a = ev.run_eval("step", "full", "smoke", tmp_path / "full" / "step.jsonl", **kw)
    b = ev.run_eval("step", "resv", "smoke", tmp_path / "resv" / "step.jsonl", **kw)
    assert ev.main(["plan", "--profile", "smoke", "--tasks", "step", "--timing", str(a), "--pilot", str(a),
                    str(b)]) == 0
    out = capsys.readouterr().out
    delta = stats.discordance(stats.pooled_counts(a, "smoke"), stats.pooled_counts(b, "smoke"))
    if delta == 0:  # no differing pair: the Wilson upper bound stands in (D340; tests/test_sturdy.py)
        delta = stats.wilson(0, len(stats.pooled_counts(a, "smoke")))[1]
    assert f"δ={delta:.3g}" in out and "pilot pair" in out
    assert np.isfinite(delta)
