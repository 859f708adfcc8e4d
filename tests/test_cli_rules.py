"""The rules every command line follows (docs/DECISIONS.md D74, D321, D322): a flag the profile does not read is an
error naming the flag and the profile; an empty or malformed list flag is an error naming the flag and the value;
a damaged checkpoint file is named with its flag. Every case fails in well under a second, before any model."""
from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

from vrex_lib import config
from vrex_lib import eval as ev
from vrex_lib.live import main as live_main
from vrex_lib.longctx.__main__ import main as longctx_main
from vrex_lib.workload.__main__ import main as workload_main

REPO = Path(__file__).resolve().parent.parent
VIDEO = str(REPO / "data" / "coin_tiny" / "videos" / "tinyA-ssd01.mp4")


@pytest.fixture
def no_model(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a model was built although a flag was bad")
    for target in ("vrex_lib.runtime.build_model", "vrex_lib.eval.run.build_model", "vrex_lib.live.build_model"):
        monkeypatch.setattr(target, boom)
    monkeypatch.setattr(importlib.import_module("vrex_lib.workload.measure"), "build_model", boom)


def _one_line(capsys, *parts: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert all(p in err for p in parts), err
    return err


# --- D74: one rule, keyed on what a profile is ------------------------------------------------------------------
@pytest.mark.parametrize("profile, flag, used", [
    ("smoke", "coin_root", False), ("smoke", "llm_path", False), ("smoke", "vision_path", False),
    ("default", "coin_root", False), ("default", "llm_path", True), ("default", "vision_path", False),
    ("default", "connector_path", False), ("full", "coin_root", True), ("full", "vision_path", True),
    ("full", "connector_path", True), ("full", "llm_path", True)])
def test_one_rule_decides_which_inputs_a_profile_reads(profile, flag, used):
    if used:
        config.check_profile_inputs(profile, **{flag: "/somewhere"})
        return
    with pytest.raises(ValueError, match=rf"--{flag.replace('_', '-')} is used only by the .* profiles?, not "
                                         rf"{profile}"):
        config.check_profile_inputs(profile, **{flag: "/somewhere"})
    config.check_profile_inputs(profile, **{flag: ""})  # empty is not given


def test_the_rule_names_notebook_parameters_inside_a_notebook():
    config.use_notebook_arg_names(True)
    try:
        with pytest.raises(ValueError, match="the notebook parameter VISION_PATH is used only by the full profile"):
            config.check_profile_inputs("default", vision_path="/x")
    finally:
        config.use_notebook_arg_names(False)


@pytest.mark.parametrize("argv, flag, profile", [
    (lambda d: ["run", "--profile", "smoke", "--llm-path", "/nonexistent"], "--llm-path", "smoke"),
    (lambda d: ["run", "--profile", "default", "--connector-path", d], "--connector-path", "default"),
])
def test_longctx_refuses_a_flag_its_profile_ignores(tmp_path, capsys, no_model, argv, flag, profile):
    assert longctx_main(argv(str(tmp_path))) == 2
    _one_line(capsys, flag, f"not {profile}")


def test_workload_live_and_eval_refuse_a_flag_the_profile_ignores(tmp_path, capsys, no_model):
    d = str(tmp_path)
    assert workload_main(["measure", "--profile", "default", "--vision-path", d, "--out", f"{d}/w.json"]) == 2
    _one_line(capsys, "--vision-path", "not default")
    assert live_main([VIDEO, "--profile", "default", "--vision-path", d, "--no-progress"]) == 2
    _one_line(capsys, "--vision-path", "not default")
    assert ev.main(["--task", "step", "--method", "full", "--profile", "smoke", "--llm-path", d,
                    "--out", f"{d}/o.jsonl"]) == 2
    _one_line(capsys, "--llm-path", "not smoke")
    assert not list(tmp_path.iterdir())


# --- list flags ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag, value, says", [
    ("--seeds", ",", "gives no values"), ("--lengths", ",", "gives no values"), ("--depths", ",", "gives no values"),
    ("--tasks", ",", "gives no values"), ("--lengths", "1000,,2000", "an empty item is not"),
    ("--seeds", "0,x", "'x' is not a whole number"), ("--tasks", "passkey,pasky", "'pasky' is not a task"),
    ("--depths", "0.5,nan", "'nan' is not a depth in [0, 1]"), ("--methods", ",", "an empty method name"),
    ("--methods", "full,bogus", "unknown method 'bogus'")])
def test_longctx_refuses_empty_or_malformed_lists_naming_flag_and_value(tmp_path, capsys, no_model, flag, value,
                                                                         says):
    assert longctx_main(["run", "--profile", "smoke", flag, value, "--out", str(tmp_path / "s.json")]) == 2
    _one_line(capsys, f"{flag} {value!r}", says)


@pytest.mark.parametrize("flag, value", [("--methods", ","), ("--methods", "full,,resv"), ("--kv", ","),
                                         ("--kv", "1000,x")])
def test_workload_refuses_empty_or_malformed_lists(tmp_path, capsys, no_model, flag, value):
    assert workload_main(["measure", "--profile", "smoke", flag, value, "--out", str(tmp_path / "w.json")]) == 2
    _one_line(capsys, flag, repr(value) if flag == "--methods" else value)


def test_bad_vrex_threads_is_one_line_in_longctx(capsys, monkeypatch, no_model):
    monkeypatch.setenv("VREX_THREADS", "abc")
    assert longctx_main(["run", "--profile", "smoke"]) == 2
    _one_line(capsys, "VREX_THREADS='abc'")


# --- damaged checkpoint files ------------------------------------------------------------------------------------
def test_a_cut_weight_file_is_named_with_its_flag_before_any_weight_loads(tiny_videollm, tmp_path, capsys,
                                                                          no_model):
    llm = tmp_path / "llama"
    shutil.copytree(tiny_videollm.llm, llm)
    weights = llm / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])  # an interrupted download
    flags = ["--llm-path", str(llm), "--vision-path", str(tiny_videollm.vision), "--connector-path",
             str(tiny_videollm.connector)]
    assert ev.main(["--task", "step", "--method", "full", "--profile", "full", "--coin-root",
                    str(REPO / "data" / "coin_tiny"), "--out", str(tmp_path / "o.jsonl"), "--device", "cpu",
                    *flags]) == 2
    _one_line(capsys, str(weights), "cut short", "--llm-path")
    assert workload_main(["measure", "--profile", "full", "--device", "cpu", "--out", str(tmp_path / "w.json"),
                          *flags]) == 2
    _one_line(capsys, str(weights), "--llm-path")
