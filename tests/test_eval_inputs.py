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
    dict(method_kwargs={"th_r_wics": 0.5}),
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
    with pytest.raises(ValueError, match="another configuration") as e:
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
    with pytest.raises(ValueError, match=r"another configuration \(method: 'resv' there, 'full' now"):
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


# ------------------------------------------------------------------------------------------------ sturdiness (#23)

def _one_line_error(capsys, *parts: str) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("python -m vrex_lib.eval: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert all(p in lines[0] for p in parts), lines[0]
    return lines[0]


def test_merge_onto_another_runs_results_is_refused(tiny, tmp_path, capsys):
    resv = ev.run_eval("step", "resv", "smoke", tmp_path / "resv" / "step.jsonl", model=tiny, max_samples=1, **KW)
    full = ev.run_eval("step", "full", "smoke", tmp_path / "full" / "step.jsonl", model=tiny, max_samples=1, **KW)
    before = (full.read_bytes(), ev.run_file(full).read_bytes())
    assert ev.main(["merge", "--out", str(full), str(resv)]) == 2
    _one_line_error(capsys, str(full), "another run", "method: 'full' there, 'resv' now", "another --out")
    assert (full.read_bytes(), ev.run_file(full).read_bytes()) == before  # nothing replaced
    # a file that is not a results file (a README copy) is not overwritten either
    readme = tmp_path / "README.md"
    readme.write_text("# notes\nnot json\nat all\n")
    with pytest.raises(ValueError, match="README.md exists and is not a vrex results file"):
        ev.merge_shards([resv], readme)
    assert readme.read_text().startswith("# notes")
    # the same run merges again onto its own earlier merge
    merged = ev.merge_shards([resv], tmp_path / "m.jsonl")
    assert ev.merge_shards([resv], merged) == merged and len(ev.read_jsonl(merged)) == 1
    # but never drops results of the same configuration the shards do not hold (a 2-sample file, a 1-sample shard)
    two = ev.run_eval("step", "resv", "smoke", tmp_path / "two" / "step.jsonl", model=tiny, max_samples=2, **KW)
    with pytest.raises(ValueError, match=r"holds 1 result\(s\) of this run that the shards do not"):
        ev.merge_shards([resv], two)
    assert len(ev.read_jsonl(two)) == 2
    assert len(ev.read_jsonl(ev.merge_shards([resv, two], two))) == 2  # passed among the shards: kept


def test_reference_of_another_configuration_is_refused(tiny, tmp_path):
    ref = ev.run_eval("step", "full", "smoke", tmp_path / "full" / "step.jsonl", model=tiny, max_samples=1,
                      max_new_tokens=2, progress=False, reference=None)
    out = tmp_path / "resv" / "step.jsonl"
    with pytest.raises(ValueError, match=r"--reference .* another configuration \(max_new_tokens: 2 there, 3 now\)"):
        ev.run_eval("step", "resv", "smoke", out, model=tiny, max_samples=1, max_new_tokens=3, progress=False,
                    reference=ref)
    assert not out.exists() and not ev.run_file(out).exists()  # refused before anything was written
    with pytest.raises(ValueError, match="prompt_layout"):
        ev.run_eval("step", "resv", "smoke", out, model=tiny, max_samples=1, max_new_tokens=2, progress=False,
                    reference=ref, prompt_layout="live")
    # the same configuration (another method and options) is accepted and compared sample by sample
    rows = ev.read_jsonl(ev.run_eval("step", "flexgen", "smoke", out, model=tiny, max_samples=1, max_new_tokens=2,
                                     progress=False, reference=ref))
    assert rows[0]["ref_answer_match"] is True and rows[0]["reference_key"] == ev.read_jsonl(ref)[0]["reference_key"]
    # a reference whose lines carry no configuration and that has no run record cannot be checked: refused
    ev.run_file(ref).unlink()
    ref.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "reference_key"}) + "\n"
                           for r in ev.read_jsonl(ref)))
    with pytest.raises(ValueError, match="carry no configuration key"):
        ev.run_eval("step", "rekv", "smoke", tmp_path / "rekv" / "step.jsonl", model=tiny, max_samples=1,
                    max_new_tokens=2, progress=False, reference=ref)


@pytest.mark.parametrize("kwargs, named", [
    ('{"th_r_wics": 7}', "th_r_wics (Th_r-wics) must be a number in [0, 1], got 7"),
    ('{"ratio": 0.3}', "'ratio' is not an option; use th_r_wics (its options are cfg, quant_bits, n_hp, th_hp, "
                       "th_r_wics"),
    ('{"n_hp": 0}', "n_hp (N_hp, hash bits) must be an integer in [1, 64], got 0"),
    ('{"n_hp": "32"}', "must be an integer in [1, 64], got '32'"),
    ('{"th_hp": 1.5}', "th_hp (Th_hp, Hamming threshold) must be an integer >= 0, got 1.5"),
    ('{"score": "max"}', "score must be one of 'softmax', 'raw'"),
    ('{"quant_bits": 0}', "quant_bits must be an integer in [1, 32]"),
    ('{"ratios": 0.3}', "unknown option(s) ratios"),
    ('{"cfg": {"ratio": 0.3}}', "cfg must be a ReSVConfig"),
])
def test_method_kwargs_are_checked_when_the_flag_is_parsed(tmp_path, capsys, monkeypatch, kwargs, named):
    monkeypatch.setattr("vrex_lib.eval.run.build_model", _no_model)
    out = tmp_path / "o" / "step.jsonl"
    rc = ev.main(["--task", "step", "--method", "resv", "--profile", "smoke", "--out", str(out), "--no-progress",
                  "--method-kwargs", kwargs])
    assert rc == 2
    _one_line_error(capsys, "--method-kwargs", "'resv'", named)
    assert not out.parent.exists() or not any(out.parent.iterdir())  # no jsonl, no run.json
    # the library entry point checks the same, before any file is written
    with pytest.raises(ValueError, match=r"method_kwargs \(--method-kwargs\)"):
        ev.run_eval("step", "resv", "smoke", out, method_kwargs=json.loads(kwargs), progress=False)
    assert not out.exists()


@pytest.mark.parametrize("method, kwargs, named", [
    ("rekv", {"topk_blocks": 2.5}, "topk_blocks must be an integer >= 1"),
    ("rekv", {"topk_frac": 0}, "topk_frac (fraction of blocks kept) must be a number in (0, 1]"),
    ("rekv", {"ratio": 0.5}, "'ratio' is not an option; use topk_frac (its options are mode, topk_blocks, topk_frac)"),
    ("streamingllm", {"windows": 8}, "unknown option(s) windows; its options are window"),
    ("infinigen", {"cap": True}, "cap must be a number in (0, 1], got True"),
    ("infinigen_p", {"dense_layers": 0}, "dense_layers must be an integer >= 1"),
    ("infinigen", {"alpha": float("nan")}, "alpha (logit margin) must be a number"),
    ("infinigen", {"calibration_text": "/nonexistent.txt"}, "calibration_text must name an existing text file"),
    ("full", {"ratio": 0.3}, "does not fit method 'full'"),
    ("resv_candwics", {"hash_mode": "concat"}, "resv_candwics supports hash_mode='per_head'"),
])
def test_every_policy_checks_its_options(method, kwargs, named):
    from vrex_lib.retrieval import check_policy_kwargs

    with pytest.raises(ValueError) as e:
        check_policy_kwargs(method, kwargs)
    assert named in str(e.value) and "--method-kwargs" in str(e.value) and "\n" not in str(e.value)
    check_policy_kwargs(method, {})  # the defaults are valid


def test_a_smaller_max_samples_keeps_the_file_and_its_record_in_agreement(tiny, tmp_path, capsys, monkeypatch):
    out = tmp_path / "e" / "step.jsonl"
    monkeypatch.setattr("vrex_lib.eval.run.build_model", lambda *a, **k: tiny)
    args = ["--task", "step", "--method", "full", "--profile", "smoke", "--out", str(out), "--no-progress",
            "--max-new-tokens", "2", "--reference", "none"]
    assert ev.main(args + ["--max-samples", "3"]) == 0
    capsys.readouterr()
    monkeypatch.setattr("vrex_lib.eval.run.build_model", _no_model)  # nothing left to evaluate: no model
    assert ev.main(args + ["--max-samples", "2"]) == 0
    cap = capsys.readouterr()
    run = json.loads(ev.run_file(out).read_text())
    assert f"{out}: 3 samples" in cap.out and run["n_total"] == 3 and run["indices"] == 3 and run["complete"]
    assert "holds 3 samples, more than the 2" in cap.err
    # the file still merges as one complete run
    assert len(ev.read_jsonl(ev.merge_shards([out], tmp_path / "m.jsonl"))) == 3


def _enospc_on(monkeypatch, suffix: str):
    """Make fsync fail with ENOSPC (a full disk) for the files whose name ends with ``suffix`` (temp files of an
    atomic write end with ``.tmp``: their name holds the target's)."""
    import errno

    real = os.fsync

    def fsync(fd):
        name = os.readlink(f"/proc/self/fd/{fd}")
        if suffix in Path(name).name:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_a_full_disk_names_the_file_and_a_rerun_completes_the_record(tiny, tmp_path, capsys, monkeypatch):
    out = tmp_path / "e" / "step.jsonl"
    monkeypatch.setattr("vrex_lib.eval.run.build_model", lambda *a, **k: tiny)
    args = ["--task", "step", "--method", "full", "--profile", "smoke", "--out", str(out), "--no-progress",
            "--max-new-tokens", "2", "--max-samples", "2", "--reference", "none"]
    real_write = ev.run._io.write_json

    def write_json(path, obj, **kw):  # the disk fills up after the last sample's line
        if str(path).endswith(".run.json") and obj.get("complete"):
            _enospc_on(monkeypatch, "step.run.json")
        return real_write(path, obj, **kw)

    monkeypatch.setattr(ev.run._io, "write_json", write_json)
    assert ev.main(args) == 2
    line = _one_line_error(capsys, f"cannot write {ev.run_file(out)}", "No space left on device",
                           f"Every evaluated sample is in {out}", "rerun the same command")
    assert len(ev.read_jsonl(out)) == 2 and json.loads(ev.run_file(out).read_text())["complete"] is False
    assert "\n" not in line
    monkeypatch.undo()
    monkeypatch.setattr("vrex_lib.eval.run.build_model", _no_model)  # the rerun evaluates nothing again
    assert ev.main(args) == 0
    assert json.loads(ev.run_file(out).read_text())["complete"] is True and len(ev.read_jsonl(out)) == 2


def test_a_full_disk_during_append_or_merge_names_the_file(tiny, tmp_path, monkeypatch):
    import errno

    with pytest.raises(OSError, match="cannot write /dev/full: No space left on device") as e:
        ev.append_jsonl("/dev/full", {"sample_id": "x"})  # a real ENOSPC
    assert e.value.errno == errno.ENOSPC
    part = ev.run_eval("step", "full", "smoke", tmp_path / "e" / "step.jsonl", model=tiny, max_samples=1, **KW)
    _enospc_on(monkeypatch, "merged.run.json")
    out = tmp_path / "merged.jsonl"
    with pytest.raises(OSError, match=r"merge: cannot write .*merged.run.json: No space left on device.*nothing was "
                                      r"merged"):
        ev.merge_shards([part], out)
    assert not out.exists() and not ev.run_file(out).exists()  # never a merged file without its record


def test_decoded_length_clamps_the_span_and_a_fifo_is_not_a_video(tiny, tmp_path, coin_copy):
    # tinyC's file (8 fps, last frame at 12 s) resamples to 26 frames at 2 fps (ffmpeg -r 2, D59): 12.5 s; COIN.json
    # claims 30 s with its last step reaching 20 s
    js = coin_copy / "COIN.json"
    d = json.loads(js.read_text())
    d["database"]["tinyC-plane1"]["duration"] = 30.0
    d["database"]["tinyC-plane1"]["annotation"][2]["segment"] = [8.5, 20.0]
    js.write_text(json.dumps(d))
    out = ev.run_eval("step", "full", "full", tmp_path / "r" / "step.jsonl", coin_root=str(coin_copy), model=tiny,
                      **KW)
    r = {x["sample_id"]: x for x in ev.read_jsonl(out)}["step/tinyC-plane1/2"]
    # VideoLLM-online: duration = (len(frames) - 1) / 2 = 12.5; start ceil(17) / 2 = 8.5, end min(20, 12.5) = 12.5
    # -> frames int(17) .. int(25): 9 frames, expected and decoded alike
    assert (r["n_frames"], r["n_frames_expected"]) == (9, 9)
    skips = ev.skips_file(out).read_text()
    assert "9 of 24 annotated frames" in skips and "decodes to 12.5 s, COIN.json says 30 s" in skips
    # a FIFO in the videos folder would block the decoder forever: it is no video file, refused by name
    fifo = coin_copy / "videos" / "tinyB-ssd02.mp4"
    fifo.unlink()
    os.mkfifo(fifo)
    out2 = ev.run_eval("task", "full", "full", tmp_path / "f" / "task.jsonl", coin_root=str(coin_copy), model=tiny,
                       **KW)
    # like a missing file, it leaves the video out of the split (VideoLLM-online's `video_uid in metadata`), logged
    assert {r["video_id"] for r in ev.read_jsonl(out2)} == {"tinyC-plane1"}
    assert "tinyB-ssd02.mp4 is not a regular file" in ev.skips_file(out2).read_text()
