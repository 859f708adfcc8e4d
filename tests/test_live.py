"""python -m vrex_lib.live: input checks before the model loads, and a smoke-profile run end to end."""
from __future__ import annotations

import io
import math
import subprocess

import numpy as np
import pytest

from vrex_lib import live
from vrex_lib.runtime import load_trace

CLIP = "data/coin_tiny/videos/tinyA-ssd01.mp4"


def test_parse_ask():
    q = live.parse_ask("What is at 12@noon?@12.5")
    assert (q.text, q.time_s) == ("What is at 12@noon?", 12.5)
    for bad in ("no time", "q@x", "@3", "q@-1"):
        with pytest.raises(live.StreamInputError):
            live.parse_ask(bad)


def test_plan_rejects_bad_input(repo, tmp_path):
    with pytest.raises(live.StreamInputError, match="no such video"):
        live.plan_stream(tmp_path / "missing.mp4", 2.0, [])
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all")
    with pytest.raises(live.StreamInputError, match="not a video container"):
        live.plan_stream(junk, 2.0, [])
    clip = repo / CLIP
    with pytest.raises(live.StreamInputError, match="more than --max-frames 3"):
        live.plan_stream(clip, 2.0, [], max_frames=3)
    with pytest.raises(live.StreamInputError, match="--end"):
        live.plan_stream(clip, 2.0, [], end_s=0)
    with pytest.raises(live.StreamInputError, match="ends at"):
        live.plan_stream(clip, 2.0, ["late?@9999"])
    with pytest.raises(live.StreamInputError, match="--fps"):
        live.plan_stream(clip, 0.0, [])
    plan = live.plan_stream(clip, 1.0, ["b@2", "a@1"])
    assert [q.text for q in plan.questions] == ["a", "b"]
    assert np.all(np.diff(plan.times) > 0) and plan.times[0] == 0.0


def test_cli_error_exits_before_loading_model(repo, python_exe, tmp_path):
    """An unreadable video is a one-line error and exit code 2, fast (no model build, no traceback)."""
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00" * 64)
    p = subprocess.run([python_exe, "-m", "vrex_lib.live", str(junk), "--profile", "smoke"], cwd=repo,
                       capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin"})
    assert p.returncode == 2
    assert "vrex_lib.live: error:" in p.stderr and "Traceback" not in p.stderr
    assert "model" not in p.stdout  # the model-ready line never printed


def test_smoke_stream_end_to_end(repo, tiny, tmp_path):
    plan = live.plan_stream(repo / CLIP, 2.0, ["What is this?@1.0", "And now?@2.5"], max_frames=8, end_s=3.5)
    buf = io.StringIO()
    res = live.run_stream(plan, tiny, "resv", fps=2.0, max_new_tokens=4, progress=False, out=buf,
                            trace_path=tmp_path / "t.npz")
    rows = res["rows"]
    assert len(rows) == 8
    assert [r["frame"] for r in rows] == list(range(8))
    kv = [r["kv_len"] for r in rows]
    assert all(b > a for a, b in zip(kv, kv[1:]))  # the cache grows every frame
    # ReSV selects once there are candidates beyond the recent frame; the fraction is a fraction.
    fr = [r["sel_frac"] for r in rows if not math.isnan(r["sel_frac"])]
    assert fr and all(0.0 <= f <= 1.0 for f in fr)
    assert all(r["tokens_per_cluster"] >= 1.0 for r in rows[2:])
    # Simulated steps of the paper's model: V-Rex8 is faster than the AGX Orin at the same kv and selection.
    assert all(0 < r["vrex8_ms"] < r["agx_orin_ms"] for r in rows)
    assert [a["question"] for a in res["answers"]] == ["What is this?", "And now?"]
    # Each question is asked right after the last frame at or before its time.
    assert [a["after_frame_s"] for a in res["answers"]] == [1.0, 2.5]
    text = buf.getvalue()
    assert live.HEADER in text and "Q@1s: What is this?" in text and text.count("\n") >= 8 + 2 * 2 + 2
    tr = load_trace(res["trace"])
    assert int((tr["kind"] == "frame").sum()) == 8 and int((tr["kind"] == "question").sum()) == 2


def test_tier_sizes_follow_kv_capacity(repo, tiny):
    from vrex_lib.config import RuntimeConfig

    plan = live.plan_stream(repo / CLIP, 2.0, [], end_s=2.5)
    assert len(plan.times) == 6
    res = live.run_stream(plan, tiny, "full", runtime=RuntimeConfig(kv_capacity=40), progress=False,
                            out=io.StringIO(), simulate=False)
    rows = res["rows"]
    # Once the cache passes sinks + capacity, the device tier stays at that size and the host tier grows by
    # exactly one frame step's tokens per frame.
    per_tok = (rows[-1]["dev_mib"] + rows[-1]["host_mib"]) / rows[-1]["kv_len"]
    off = [r for r in rows if r["host_mib"] > 0]
    assert len(off) >= 2
    assert {round(r["dev_mib"] / per_tok) for r in off} == {round(off[0]["dev_mib"] / per_tok)}
    steps = {round((b["host_mib"] - a["host_mib"]) / per_tok) for a, b in zip(off, off[1:])}
    assert steps == {off[1]["kv_len"] - off[0]["kv_len"]}
    assert math.isnan(rows[-1]["sel_frac"])  # full attention selects nothing


def _no_model(*a, **k):
    raise AssertionError("the model was built although the input was bad")


def test_huge_fps_is_refused_by_the_frame_limit_without_allocating(repo):
    import tracemalloc

    tracemalloc.start()
    with pytest.raises(live.StreamInputError, match=r"at --fps 1e\+09 is 14000000001 frames, more than --max-frames"):
        live.plan_stream(repo / CLIP, 1e9, [])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20  # the 14e9-frame grid (112 GB of float64) was never built


def test_trace_path_is_checked_before_the_model_loads(repo, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(live, "build_model", _no_model)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "d.npz").mkdir()
    for trace, named in ((tmp_path / "afile" / "t.npz", f"--trace: cannot write in {tmp_path / 'afile'}"),
                         (tmp_path / "d.npz", "is a folder"), (tmp_path / "t.txt", "ending in .npz")):
        assert live.main([str(repo / CLIP), "--profile", "smoke", "--trace", str(trace), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("vrex_lib.live: error: --trace") and named in err and err.count("\n") == 1, err


def test_a_full_disk_at_the_trace_names_it(repo, tmp_path, capsys, monkeypatch, tiny):
    import errno
    import os
    from pathlib import Path

    monkeypatch.setattr(live, "build_model", lambda *a, **k: tiny)
    real = os.fsync

    def fsync(fd):
        if Path(os.readlink(f"/proc/self/fd/{fd}")).name.startswith(".t.npz."):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    trace = tmp_path / "t.npz"
    assert live.main([str(repo / CLIP), "--profile", "smoke", "--end", "1", "--trace", str(trace),
                      "--no-progress"]) == 2
    cap = capsys.readouterr()
    assert f"cannot write {trace}: No space left on device" in cap.err and "table above is complete" in cap.err
    assert live.HEADER in cap.out and not trace.exists()


def test_a_fifo_is_refused_not_read(python_exe, repo, tmp_path):
    """A FIFO would block the decoder until a writer appears: refused at once (exit 2), never opened."""
    import os

    fifo = tmp_path / "pipe.mp4"
    os.mkfifo(fifo)
    p = subprocess.run([python_exe, "-m", "vrex_lib.live", str(fifo), "--profile", "smoke"], cwd=repo,
                       capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin"})
    assert p.returncode == 2 and "not a regular file" in p.stderr and "Traceback" not in p.stderr
