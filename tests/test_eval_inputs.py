"""Bad input and partial output for the COIN evaluation runner: every case is an error naming the file or flag
(or a logged skip), never a silent merge, a reused result or an empty success."""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from vrex_lib import eval as ev

KW = dict(max_new_tokens=2, progress=False, reference=None)


@pytest.fixture
def coin_copy(tmp_path, repo) -> Path:
    """A private copy of the smoke fixture (COIN.json + videos/) that a test may damage."""
    root = tmp_path / "coin"
    shutil.copytree(repo / "data" / "coin_tiny", root)
    return root


def _clamp_fixture(root: Path) -> None:
    """One annotated step ends after the video's duration: load_annotations logs a 'clamp' row for it."""
    js = root / "COIN.json"
    d = json.loads(js.read_text())
    v = d["database"]["tinyA-ssd01"]
    v["annotation"][-1]["segment"][1] = v["duration"] + 5.0
    js.write_text(json.dumps(d))


def _no_model(*a, **k):
    raise AssertionError("the model was built although the input was bad")


# ------------------------------------------------------------------------------------------------ merge

def test_merge_with_clamp_rows_still_refuses_a_deleted_line(tiny, tmp_path, coin_copy):
    _clamp_fixture(coin_copy)
    out = tmp_path / "r" / "task.jsonl"
    parts = [ev.run_eval("task", "full", "full", out, coin_root=str(coin_copy), model=tiny, num_shards=2,
                         shard_index=i, **KW) for i in range(2)]
    assert "clamp" in ev.skips_file(parts[0]).read_text()  # the skip log carries the clamp note...
    n_rows = sum(len(ev.read_jsonl(p)) for p in parts)
    lines = parts[1].read_text().splitlines(keepends=True)
    parts[1].write_text("".join(lines[1:]))  # ...and a healthy sample's line is deleted by hand
    with pytest.raises(ValueError, match=r"1 of \d+ samples missing.*indices 1\b"):
        ev.merge_shards(parts, out)
    assert not out.exists()
    # the CLI says the same and exits non-zero
    assert ev.main(["merge", "--out", str(out), *map(str, parts)]) == 2
    # --allow-partial merges what is there, and says so
    ev.merge_shards(parts, out, require_complete=False)
    assert len(ev.read_jsonl(out)) == n_rows - 1


def test_merge_accepts_a_logged_skip_and_keeps_it(tiny, tmp_path, coin_copy):
    (coin_copy / "videos" / "tinyB-ssd02.mp4").write_bytes(b"\x00not a video" * 100)
    out = tmp_path / "r" / "task.jsonl"
    parts = [ev.run_eval("task", "full", "full", out, coin_root=str(coin_copy), model=tiny, num_shards=2,
                         shard_index=i, **KW) for i in range(2)]
    merged = ev.merge_shards(parts, out)
    rows = ev.read_jsonl(merged)
    run = json.loads(ev.run_file(merged).read_text())
    assert [s["video_id"] for s in run["skipped"]] == ["tinyB-ssd02"] and run["complete"] is True
    assert sorted([r["index"] for r in rows] + [s["index"] for s in run["skipped"]]) == list(range(run["n_total"]))
    assert "tinyB-ssd02" in ev.skips_file(merged).read_text()
    # the merged file merges again as a single shard
    ev.merge_shards([merged], tmp_path / "again.jsonl")


def test_merge_refuses_mixed_methods(tiny, tmp_path):
    a = ev.run_eval("step", "resv", "smoke", tmp_path / "resv" / "step.jsonl", model=tiny, max_samples=2,
                    num_shards=2, shard_index=0, **KW)
    b = ev.run_eval("step", "full", "smoke", tmp_path / "full" / "step.jsonl", model=tiny, max_samples=2,
                    num_shards=2, shard_index=1, **KW)
    with pytest.raises(ValueError, match=r"method 'resv'.*method 'full'") as e:
        ev.merge_shards([a, b], tmp_path / "m.jsonl")
    assert str(a) in str(e.value) and str(b) in str(e.value)
    assert not (tmp_path / "m.jsonl").exists()


def test_merge_reports_the_task_mismatch_of_step_and_next_shards(tiny, tmp_path):
    a = ev.run_eval("step", "full", "smoke", tmp_path / "x" / "step.jsonl", model=tiny, max_samples=2,
                    num_shards=2, shard_index=0, **KW)
    b = ev.run_eval("next", "full", "smoke", tmp_path / "x" / "next.jsonl", model=tiny, max_samples=2,
                    num_shards=2, shard_index=1, **KW)
    with pytest.raises(ValueError, match=r"task 'step'.*task 'next'.*different runs"):
        ev.merge_shards([a, b], tmp_path / "m.jsonl")


def test_merge_of_a_nonexistent_or_empty_path_is_an_error(tmp_path, capsys):
    out = tmp_path / "m.jsonl"
    assert ev.main(["merge", "--out", str(out), str(tmp_path / "nope.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "nope.jsonl does not exist" in err and not out.exists()
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="empty.jsonl holds no results"):
        ev.merge_shards([tmp_path / "empty.jsonl"], out)
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(ValueError, match="dir.jsonl is not a file"):
        ev.merge_shards([tmp_path / "dir.jsonl"], out)
    with pytest.raises(ValueError, match="no shard files"):
        ev.merge_shards([], out)


# ------------------------------------------------------------------------------------------------ resume

@pytest.mark.parametrize("change", [
    dict(method="flexgen"),
    dict(method_kwargs={"ratio": 0.5}),
    dict(max_new_tokens=3),
    dict(max_frames=2),
])
def test_resume_under_another_configuration_is_an_error(tiny, tmp_path, change):
    out = tmp_path / "e" / "step.jsonl"
    base = dict(method="resv", method_kwargs=None, max_new_tokens=2)
    ev.run_eval("step", base["method"], "smoke", out, model=tiny, max_samples=1, progress=False, reference=None,
                method_kwargs=base["method_kwargs"], max_new_tokens=base["max_new_tokens"])
    before = out.read_bytes()
    kw = {**base, **change}
    with pytest.raises(ValueError, match="another run") as e:
        ev.run_eval("step", kw.pop("method"), "smoke", out, model=tiny, max_samples=2, progress=False,
                    reference=None, **kw)
    assert str(out) in str(e.value) and "--out" in str(e.value)
    assert out.read_bytes() == before  # nothing appended to the old run's file
    # the same configuration resumes (adds the second sample, keeps the first line)
    ev.run_eval("step", "resv", "smoke", out, model=tiny, max_samples=2, progress=False, reference=None,
                max_new_tokens=2)
    assert out.read_bytes().startswith(before) and len(ev.read_jsonl(out)) == 2


def test_resume_after_the_data_file_changed_is_an_error(tiny, tmp_path, coin_copy):
    out = tmp_path / "e" / "task.jsonl"
    ev.run_eval("task", "full", "full", out, coin_root=str(coin_copy), model=tiny, max_samples=1, **KW)
    js = coin_copy / "COIN.json"
    js.write_text(js.read_text().replace("ReplaceCDDriveWithSSD", "ReplaceSSD"))
    with pytest.raises(ValueError, match="data_sha256"):
        ev.run_eval("task", "full", "full", out, coin_root=str(coin_copy), model=tiny, max_samples=2, **KW)


def test_rows_without_configuration_key_are_not_resumed(tiny, tmp_path):
    out = tmp_path / "step.jsonl"
    out.write_text(json.dumps({"sample_id": "x", "index": 0, "task": "step", "method": "resv"}) + "\n")
    with pytest.raises(ValueError, match=r"another run \(method: 'resv' there, 'full' now"):
        ev.run_eval("step", "full", "smoke", out, model=tiny, max_samples=1, **KW)


# ------------------------------------------------------------------------------------------------ flags

def test_coin_root_is_not_ignored_outside_the_full_profile(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("vrex_lib.eval.run.build_model", _no_model)
    rc = ev.main(["--task", "step", "--method", "full", "--profile", "default", "--coin-root", "/nonexistent",
                  "--out", str(tmp_path / "o.jsonl"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "--coin-root" in err and "full profile" in err
    assert not (tmp_path / "o.jsonl").exists()
    with pytest.raises(ValueError, match="--vision-path"):
        ev.run_eval("step", "full", "smoke", tmp_path / "o.jsonl", vision_path="/x", progress=False)


def test_num_shards_zero_names_num_shards(tmp_path, capsys):
    rc = ev.main(["--task", "step", "--method", "full", "--profile", "smoke", "--num-shards", "0",
                  "--out", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert rc == 2 and "--num-shards must be >= 1" in err and "--shard-index" not in err
    with pytest.raises(ValueError, match="--shard-index 3 must be in"):
        ev.shard_from_env(2, 3)


@pytest.mark.parametrize("args, flag", [
    (["--max-samples", "0"], "--max-samples"),
    (["--max-new-tokens", "-1"], "--max-new-tokens"),
    (["--max-frames", "0"], "--max-frames"),
    (["--kv-capacity", "0"], "--kv-capacity"),
    (["--threads", "0"], "--threads"),
    (["--method-kwargs", "[1]"], "--method-kwargs"),
    (["--method-kwargs", "{bad"], "--method-kwargs"),
    (["--reference", "/nonexistent/full.jsonl"], "--reference"),
    (["--split", "nosuch"], "--split"),
])
def test_bad_flags_name_the_flag_before_the_model_loads(tmp_path, capsys, monkeypatch, args, flag):
    monkeypatch.setattr("vrex_lib.eval.run.build_model", _no_model)
    rc = ev.main(["--task", "step", "--method", "full", "--profile", "smoke", "--out", str(tmp_path / "o.jsonl"),
                  "--no-progress", *args])
    err = capsys.readouterr().err
    assert rc == 2 and flag in err and "Traceback" not in err


def test_unwritable_output_is_detected_before_the_model_loads(tmp_path, monkeypatch):
    monkeypatch.setattr("vrex_lib.eval.run.build_model", _no_model)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    if os.access(ro, os.W_OK):  # root ignores the mode: use a folder that is read-only for everyone
        ro = Path("/sys/fs")
        if not ro.is_dir():
            pytest.skip("no read-only folder available as root")
    try:
        with pytest.raises(PermissionError, match=f"--out: cannot write in {ro}"):
            ev.run_eval("step", "full", "smoke", ro / "sub" / "step.jsonl", progress=False)
        with pytest.raises(PermissionError, match=f"--out: cannot write in {ro}"):
            ev.run_eval("step", "full", "smoke", ro / "step.jsonl", progress=False)
        with pytest.raises(PermissionError, match="--trace-dir"):
            ev.run_eval("step", "full", "smoke", tmp_path / "ok.jsonl", trace_dir=ro / "t", progress=False)
    finally:
        (tmp_path / "ro").chmod(0o755)
    # an --out that is a folder
    (tmp_path / "d.jsonl").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        ev.run_eval("step", "full", "smoke", tmp_path / "d.jsonl", progress=False)


def test_every_video_unreadable_is_a_nonzero_exit(tmp_path, coin_copy, capsys, monkeypatch):
    for v in (coin_copy / "videos").glob("*.mp4"):
        v.write_bytes(b"\x00not a video" * 100)
    out = tmp_path / "o" / "task.jsonl"
    args = ["--task", "task", "--method", "full", "--profile", "full", "--coin-root", str(coin_copy),
            "--out", str(out), "--no-progress", "--max-new-tokens", "2", "--device", "cpu"]
    from vrex_lib.runtime import build_model

    tiny = build_model("smoke")
    monkeypatch.setattr("vrex_lib.eval.run.build_model", lambda *a, **k: tiny)
    monkeypatch.setattr("vrex_lib.eval.run.validate_full_paths", lambda *a: {"llm": {}})
    monkeypatch.setattr("vrex_lib.eval.run.model_identity", lambda *a: tiny.identity)
    monkeypatch.setattr("vrex_lib.eval.run._check_all", lambda *a: None)
    monkeypatch.setattr("vrex_lib.eval.run._shape_from_config", lambda *a: None)
    assert ev.main(args) == 2
    err = capsys.readouterr().err
    assert "every one of the 2 samples" in err and "task.skips.csv" in err and "not a video container" in err
    # no video file at all: refused before the model loads
    for v in (coin_copy / "videos").glob("*.mp4"):
        v.unlink()
    monkeypatch.setattr("vrex_lib.eval.run.build_model", _no_model)
    assert ev.main(args) == 2
    assert "none of the 2 videos" in capsys.readouterr().err


def test_results_respect_the_umask(tiny, tmp_path):
    old = os.umask(0o027)
    try:
        out = ev.run_eval("step", "full", "smoke", tmp_path / "u" / "step.jsonl", model=tiny, max_samples=1,
                          num_shards=1, trace_dir=tmp_path / "u" / "traces", **KW)
        merged = ev.merge_shards([out], tmp_path / "u" / "merged.jsonl")
        traces = list((tmp_path / "u" / "traces").glob("*.npz"))
        assert traces
        for p in (out, ev.skips_file(out), ev.run_file(out), merged, ev.skips_file(merged),
                  ev.run_file(merged), *traces):
            assert stat.S_IMODE(p.stat().st_mode) == 0o640, p
    finally:
        os.umask(old)


def test_two_runs_on_one_results_file_cannot_interleave(tiny, tmp_path):
    import fcntl

    out = tmp_path / "e" / "step.jsonl"
    out.parent.mkdir()
    with open(out, "a") as held:  # another evaluation is appending to this file
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ValueError, match="another evaluation is writing this file"):
            ev.run_eval("step", "full", "smoke", out, model=tiny, max_samples=1, **KW)
    ev.run_eval("step", "full", "smoke", out, model=tiny, max_samples=1, **KW)  # released: runs
    assert len(ev.read_jsonl(out)) == 1


def test_reference_of_another_task_or_method_is_an_error(tiny, tmp_path):
    nxt = ev.run_eval("next", "full", "smoke", tmp_path / "full" / "next.jsonl", model=tiny, max_samples=1, **KW)
    with pytest.raises(ValueError, match=r"--reference .*'full' results of task 'next'.*task 'step'"):
        ev.run_eval("step", "resv", "smoke", tmp_path / "resv" / "step.jsonl", model=tiny, max_samples=1,
                    max_new_tokens=2, progress=False, reference=nxt)
    rv = ev.run_eval("next", "resv", "smoke", tmp_path / "resv" / "next.jsonl", model=tiny, max_samples=1, **KW)
    with pytest.raises(ValueError, match=r"holds 'resv' results"):
        ev.run_eval("next", "flexgen", "smoke", tmp_path / "flexgen" / "next.jsonl", model=tiny, max_samples=1,
                    max_new_tokens=2, progress=False, reference=rv)


def test_samples_left_out_by_frames_policy_skip_are_logged_skips_for_merge(tiny, tmp_path):
    out = tmp_path / "s" / "step.jsonl"
    parts = [ev.run_eval("step", "full", "smoke", out, model=tiny, max_samples=4, max_frames=7, frames_policy="skip",
                         num_shards=2, shard_index=i, **KW) for i in range(2)]
    runs = [json.loads(ev.run_file(p).read_text()) for p in parts]
    left_out = [s for r in runs for s in r["skipped"] if s["stage"] == "max_frames"]
    assert left_out, "the fixture has spans longer than 7 frames"
    merged = ev.merge_shards(parts, out)
    n = len(ev.read_jsonl(merged))
    assert n + len(left_out) == runs[0]["n_total"]
    # another frames policy is another configuration: no resume across it
    with pytest.raises(ValueError, match="frames_policy"):
        ev.run_eval("step", "full", "smoke", parts[0], model=tiny, max_samples=4, max_frames=7,
                    frames_policy="clamp", num_shards=1, **KW)


def test_cli_leaves_max_frames_to_run_eval_default(tmp_path, monkeypatch):
    import inspect

    want = inspect.signature(ev.run_eval).parameters["max_frames"].default
    seen = {}

    def fake(*a, **k):
        seen.update(k)
        return tmp_path / "none.jsonl"

    monkeypatch.setattr("vrex_lib.eval.cli.run_eval", fake)
    monkeypatch.setattr("vrex_lib.eval.cli._default", lambda name: want)
    assert ev.main(["--task", "step", "--method", "full", "--profile", "smoke", "--out", str(tmp_path / "o.jsonl")]) == 0
    assert seen["max_frames"] == want
    assert ev.main(["--task", "step", "--method", "full", "--profile", "smoke", "--out", str(tmp_path / "o.jsonl"),
                    "--max-frames", "5"]) == 0
    assert seen["max_frames"] == 5
