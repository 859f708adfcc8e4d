"""One guard for every file a command writes (vrex_lib._io.check_output, docs/DECISIONS.md D320): a folder, a FIFO or
a device is refused by name; a file that is not the command's own kind needs --force; one of another configuration
needs --replace. Each command's case fails before any model loads and leaves the file as it was."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from vrex_lib import _io
from vrex_lib import eval as ev
from vrex_lib import report
from vrex_lib.live import main as live_main
from vrex_lib.longctx.__main__ import main as longctx_main

REPO = Path(__file__).resolve().parent.parent
VIDEO = REPO / "data" / "coin_tiny" / "videos" / "tinyA-ssd01.mp4"
KIND = _io.json_kind("demo file", "demo", "vrex.demo/1", lambda d: {"n": d.get("n")})


@pytest.fixture
def no_model(monkeypatch):
    """Any model build fails the test: every refusal here comes before the weights."""
    def boom(*a, **k):
        raise AssertionError("a model was built although the output was refused")
    for target in ("vrex_lib.runtime.build_model", "vrex_lib.eval.run.build_model", "vrex_lib.live.build_model"):
        monkeypatch.setattr(target, boom)


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return err


# --- the helper ---------------------------------------------------------------------------------------------
def test_check_output_refuses_each_wrong_target_and_returns_a_reusable_document(tmp_path):
    (tmp_path / "dir").mkdir()
    with pytest.raises(_io.OutputRefused, match=r"--out .*dir is a folder; pass the path of a file, e\.g\. --out x"):
        _io.check_output(tmp_path / "dir", KIND, flag="--out", example="--out x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for dev in (fifo, Path(os.devnull)):
        with pytest.raises(_io.OutputRefused, match="is not a regular file"):
            _io.check_output(dev, KIND, flag="--out")
    other = tmp_path / "notes.json"
    other.write_text("# not json\n")
    with pytest.raises(_io.OutputRefused, match=r"exists and is not a demo file \(not JSON.*--force"):
        _io.check_output(other, KIND, flag="--out")
    assert _io.check_output(other, KIND, flag="--out", force=True) is None  # --force: overwrite anything
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"schema": "vrex.demo/1", "n": 1}))
    with pytest.raises(_io.OutputRefused, match=r"holds the demo of another configuration \(n 1 there, 2 now\).*"
                                                 r"--replace"):
        _io.check_output(mine, KIND, flag="--out", requested={"n": 2})
    assert _io.check_output(mine, KIND, flag="--out", requested={"n": 2}, replace=True) is None
    assert _io.check_output(mine, KIND, flag="--out", requested={"n": 1}) == {"schema": "vrex.demo/1", "n": 1}
    assert _io.check_output(tmp_path / "new.json", KIND, flag="--out") is None and not (tmp_path / "new.json").exists()


# --- longctx ------------------------------------------------------------------------------------------------
def test_longctx_out_onto_a_file_that_is_no_study_is_refused(tmp_path, capsys, no_model):
    readme = tmp_path / "README.md"
    readme.write_text("# the project\n")
    assert longctx_main(["run", "--profile", "smoke", "--out", str(readme)]) == 2
    e = _err(capsys)
    assert f"--out {readme} exists and is not a long-context study file" in e and "--force" in e
    assert readme.read_text() == "# the project\n"
    (tmp_path / "d").mkdir()
    assert longctx_main(["run", "--profile", "smoke", "--out", str(tmp_path / "d")]) == 2
    assert "is a folder" in _err(capsys)


def _workload_of_measure(path: Path) -> bytes:
    """A workload file as `workload measure --profile smoke` writes it (its configuration fields)."""
    doc = dict(schema="vrex.workload/1", profile="smoke", methods=["full", "resv"], variants={"resv": {}},
               kv_points=[500, 1000], fidelity_kv=[], kv_capacity=4096, recent_frames=1, dense_layers=1, resv={},
               frame_steps=12, decode_tokens=4, question="What is happening?", stream=dict(seed=0),
               inputs_key="k", checkpoints=[])
    path.write_text(json.dumps(doc))
    return path.read_bytes()


def test_longctx_workload_of_another_configuration_is_not_overwritten(tmp_path, capsys, no_model):
    wl = tmp_path / "workload_smoke.json"
    before = _workload_of_measure(wl)
    assert longctx_main(["run", "--profile", "smoke", "--out", str(tmp_path / "s.json"), "--workload", str(wl)]) == 2
    e = _err(capsys)
    assert f"--workload {wl} holds the workload of another configuration" in e and "frame_steps 12 there" in e
    assert "--replace" in e and wl.read_bytes() == before and not (tmp_path / "s.json").exists()


def test_longctx_study_of_another_configuration_needs_replace(tiny, tmp_path):
    from vrex_lib import longctx

    g = longctx.study_grid("smoke").replace(blocks=(longctx.Block("passkey", (384,), (0.5,)),), methods=("full",))
    out = longctx.run("smoke", g, out=tmp_path / "s.json", model=tiny, progress=False)
    before = out.read_bytes()
    with pytest.raises(_io.OutputRefused, match=r"holds the study of another configuration \(.*study"):
        longctx.run("smoke", g.replace(max_new_tokens=4), out=out, model=tiny, progress=False)
    assert out.read_bytes() == before
    wl = longctx.write_workload(out, tmp_path / "w.json")
    with pytest.raises(_io.OutputRefused, match="is not a workload file"):
        longctx.write_workload(out, tmp_path / "s.json")  # a study file is not a workload file
    assert longctx.write_workload(out, wl) == wl  # its own workload file is rewritten


# --- eval ---------------------------------------------------------------------------------------------------
def _eval(out, *extra) -> list[str]:
    return ["--task", "step", "--method", "full", "--profile", "smoke", "--out", str(out), "--no-progress", *extra]


def test_eval_out_onto_a_fifo_or_a_device_names_what_it_is(tmp_path, capsys, no_model):
    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    for dev in (fifo, Path(os.devnull)):
        assert ev.main(_eval(dev)) == 2
        e = _err(capsys)
        assert f"--out {dev} is not a regular file (a FIFO, a device or a socket)" in e and "is a folder" not in e


def test_eval_out_onto_another_file_needs_force_and_other_results_need_replace(tiny, tmp_path, capsys, no_model):
    readme = tmp_path / "README.md"
    readme.write_text("# notes\nnot json\n")
    assert ev.main(_eval(readme)) == 2
    assert "exists and is not a vrex results file" in (e := _err(capsys)) and "--force" in e
    assert readme.read_text() == "# notes\nnot json\n"
    kw = dict(model=tiny, max_samples=1, max_new_tokens=2, progress=False, reference=None)
    ev.run_eval("step", "full", "smoke", readme, force=True, **kw)  # --force: the notes are replaced by results
    assert {r["method"] for r in ev.read_jsonl(readme)} == {"full"}
    with pytest.raises(_io.OutputRefused, match="holds the results of another configuration"):
        ev.run_eval("step", "resv", "smoke", readme, **kw)
    ev.run_eval("step", "resv", "smoke", readme, replace=True, **kw)
    assert {r["method"] for r in ev.read_jsonl(readme)} == {"resv"}
    assert json.loads(ev.run_file(readme).read_text())["method"] == "resv"
    fifo = tmp_path / "merged.fifo"
    os.mkfifo(fifo)
    assert ev.main(["merge", "--out", str(fifo), str(readme)]) == 2  # merge names a FIFO as one, too
    assert f"--out {fifo} is not a regular file" in _err(capsys)


# --- live traces --------------------------------------------------------------------------------------------
def _live(trace, *extra) -> list[str]:
    return [str(VIDEO), "--profile", "smoke", "--trace", str(trace), "--no-progress", *extra]


def test_live_trace_is_never_written_over_another_file_or_another_request(tmp_path, capsys, no_model):
    notes = tmp_path / "notes.npz"
    notes.write_bytes(b"not a zip")
    assert live_main(_live(notes)) == 2
    assert "exists and is not a retrieval trace" in (e := _err(capsys)) and "--force" in e
    other = tmp_path / "other.npz"
    np.savez(other, meta_json=np.array(json.dumps({"live_request": {"video": "x.mp4", "method": "full"}})))
    before = other.read_bytes()
    assert live_main(_live(other)) == 2
    e = _err(capsys)
    assert "holds the trace of another configuration (video 'x.mp4' there, 'tinyA-ssd01.mp4' now" in e
    assert "--replace" in e and other.read_bytes() == before and notes.read_bytes() == b"not a zip"


# --- the report ---------------------------------------------------------------------------------------------
def test_report_never_overwrites_a_report_md_that_is_not_its_own(tmp_path, capsys):
    res = tmp_path / "notes"
    res.mkdir()
    (res / "REPORT.md").write_text("# My thesis notes\n")
    assert report.main(["--results", str(res), "--notebooks", str(tmp_path)]) == 2
    assert "REPORT.md exists and is not a vrex report" in (e := _err(capsys)) and "--force" in e
    assert (res / "REPORT.md").read_text() == "# My thesis notes\n" and not (res / "report.html").exists()
    shutil.rmtree(res / "tables", ignore_errors=True)
    (tmp_path / "nbs").mkdir()
    assert report.main(["--results", str(res), "--notebooks", str(tmp_path / "nbs"), "--force"]) == 0
    assert (res / "REPORT.md").read_text().startswith("# vrex reproduction report")
