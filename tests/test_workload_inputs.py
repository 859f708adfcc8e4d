"""Bad input and damaged files for ``python -m vrex_lib.workload measure``: every case is one line naming the flag
or file and the fix, before any work; a workload file is never overwritten by another configuration's run unless
asked; a damaged checkpoint file never crashes a resume; the shadow path consults ReKV where ReKV itself would."""
from __future__ import annotations

import errno
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from vrex_lib import workload
from vrex_lib.workload.__main__ import main
from vrex_lib.workload.files import partial_path

MEASURE = sys.modules["vrex_lib.workload.measure"]  # the module (the package's `measure` is the function)
SMOKE = ["measure", "--profile", "smoke", "--methods", "full", "--kv", "200", "--fidelity-kv", "", "--no-progress"]


def _no_model(*a, **k):
    raise AssertionError("the model was built although the input was bad")


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and err.count("\n") == 0, err
    return err


@pytest.fixture
def no_model(monkeypatch):
    monkeypatch.setattr(MEASURE, "build_model", _no_model)


@pytest.mark.parametrize("flag, value", [("--kv", "inf"), ("--kv", "nan"), ("--kv", "1.5"), ("--kv", "300,abc"),
                                         ("--kv", "-5"), ("--fidelity-kv", "1e999")])
def test_token_counts_are_whole_finite_numbers(capsys, no_model, flag, value):
    assert main(["measure", "--profile", "smoke", flag, value]) == 2
    assert f"workload measure: {flag} expects comma-separated whole token counts" in _err(capsys)
    # the library refuses the same values by name
    with pytest.raises(ValueError, match="--kv must be whole positive token counts"):
        workload.measure("smoke", ["full"], [float("inf")], "unused.json", progress=False)


def test_vrex_threads_is_checked(tmp_path, capsys, monkeypatch, no_model):
    monkeypatch.setenv("VREX_THREADS", "abc")
    assert main(SMOKE + ["--out", str(tmp_path / "w.json")]) == 2
    assert "VREX_THREADS='abc' is not a torch thread count" in _err(capsys)


def test_out_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys, no_model):
    (tmp_path / "dir.json").mkdir()
    assert main(SMOKE + ["--out", str(tmp_path / "dir.json")]) == 2
    assert "--out" in (e := _err(capsys)) and "dir.json is a folder" in e
    (tmp_path / "afile").write_text("x")
    assert main(SMOKE + ["--out", str(tmp_path / "afile" / "w.json")]) == 2
    assert f"--out: cannot write in {tmp_path / 'afile'}: {tmp_path / 'afile'} is a file, not a folder" in _err(capsys)
    (tmp_path / "w.json.partial.json").mkdir()  # the checkpoint file's place is taken by a folder
    assert main(SMOKE + ["--out", str(tmp_path / "w.json")]) == 2
    assert "w.json.partial.json is a folder" in _err(capsys)


def test_a_file_that_is_not_a_workload_is_not_overwritten(tmp_path, capsys, repo, no_model):
    readme = tmp_path / "README.md"
    shutil.copy(repo / "README.md", readme)
    before = readme.read_bytes()
    assert main(SMOKE + ["--out", str(readme)]) == 2
    e = _err(capsys)
    assert f"--out {readme} exists and is not a workload file (not JSON" in e and "--force" in e
    lst = tmp_path / "list.json"
    lst.write_text("[1, 2]")
    assert main(SMOKE + ["--out", str(lst)]) == 2
    assert "a JSON list, not a workload document" in _err(capsys)
    assert readme.read_bytes() == before and lst.read_text() == "[1, 2]"
    with pytest.raises(ValueError, match=r"list.json: not a workload file \(a JSON list"):
        workload.read_measurement(lst)


def test_a_workload_of_another_configuration_is_not_replaced(tmp_path, capsys, repo, no_model):
    other = tmp_path / "workload_default.json"
    doc = dict(schema="vrex.workload/1", profile="default", methods=["full", "resv"], kv_points=[1000, 2000],
               kv_capacity=4096, inputs_key="x", checkpoints=[])
    main_file = Path("/work/main/results/data/workload_default.json")  # a real one when the checkout has it
    other.write_text(main_file.read_text() if main_file.is_file() else json.dumps(doc))
    before = other.read_bytes()
    assert main(SMOKE + ["--out", str(other)]) == 2
    e = _err(capsys)
    assert "holds the workload of another configuration (profile 'default' there, 'smoke' now" in e
    assert "kv_points" in e and "--replace" in e
    assert other.read_bytes() == before


def test_replace_and_force(tmp_path, tiny, capsys):
    out = tmp_path / "w.json"
    out.write_text(json.dumps(dict(schema="vrex.workload/1", profile="smoke", methods=["full"], kv_points=[320])))
    workload.measure("smoke", ["full"], [200], out, model=tiny, progress=False, fidelity_kv=(), replace=True)
    d = workload.read_measurement(out)
    assert d["kv_points"] == [200] and d["methods"] == ["full"]
    mtime = out.stat().st_mtime_ns
    workload.measure("smoke", ["full"], [200], out, model=tiny, progress=False, fidelity_kv=(), replace=True)
    assert out.stat().st_mtime_ns == mtime  # the same inputs: reused, replace or not
    other = tmp_path / "notes.txt"
    other.write_text("notes")
    with pytest.raises(ValueError, match="not a workload file"):
        workload.measure("smoke", ["full"], [200], other, model=tiny, progress=False, fidelity_kv=(), replace=True)
    workload.measure("smoke", ["full"], [200], other, model=tiny, progress=False, fidelity_kv=(), force=True)
    assert workload.read_measurement(other)["kv_points"] == [200]


@pytest.mark.parametrize("content", ["[1, 2]", "{not json", "KEY_ONLY", '{"inputs_key": "KEY", "checkpoints": 5, '
                                     '"answers": {}, "fidelity": {}, "shadow_done": true}'])
def test_a_damaged_checkpoint_file_restarts_the_measurement(tmp_path, tiny, capsys, content):
    from vrex_lib.workload.measure import _plan

    out = tmp_path / "w.json"
    kw = dict(resv=None, runtime=None, variants=None, model=tiny, long=False, fidelity_kv=(), stream_seed=None,
              model_kwargs=None)
    key = _plan("smoke", ["full"], [200], out, **kw).key
    text = json.dumps({"inputs_key": key}) if content == "KEY_ONLY" else content.replace("KEY", key)
    partial_path(out).write_text(text)
    workload.measure("smoke", ["full"], [200], out, model=tiny, progress=False, fidelity_kv=())
    err = capsys.readouterr().err
    assert f"{partial_path(out)} is not a resumable checkpoint of this measurement" in err and "afresh" in err
    assert workload.read_measurement(out)["inputs_key"] == key and not partial_path(out).exists()


def test_a_full_disk_names_the_workload_file(tmp_path, capsys, monkeypatch, tiny):
    monkeypatch.setattr(MEASURE, "build_model", lambda *a, **k: tiny)
    real = os.fsync

    def fsync(fd):
        name = Path(os.readlink(f"/proc/self/fd/{fd}")).name
        if name.startswith(".w.json.") and "partial" not in name:  # the finished file, not a checkpoint
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    out = tmp_path / "w.json"
    assert main(SMOKE + ["--out", str(out)]) == 2
    e = _err(capsys)
    assert f"cannot write {out}: No space left on device; free space" in e
    assert not out.exists() and partial_path(out).exists()  # the finished checkpoints are kept for the rerun


def test_shadow_consults_rekv_from_layer_0_as_rekv_itself(tmp_path, tiny):
    """The measured ReKV rows against an in-session ReKV run on the tiny model: ReKV's reference mode retrieves
    at layer 0 (retrieval_from_layer); up to layer 0's attention both runs see the same inputs (frames attend
    densely, the answer is teacher-forced), so layer 0's selected fraction must be equal, and the other methods
    must still start at the runtime's first retrieving layer."""
    from vrex_lib.runtime import StreamingSession
    from vrex_lib.workload.measure import _make, _plan, _stream

    out = tmp_path / "w.json"
    variants = {"rekv@k2": ("rekv", {"topk_blocks": 2})}  # 2 of ~17 frame blocks: a real choice at layer 0
    doc = workload.read_measurement(workload.measure("smoke", ["rekv", "resv"], [200], out, model=tiny,
                                                     progress=False, fidelity_kv=(), variants=variants))
    ck = {(c["method"], c["stage"]): c for c in doc["checkpoints"]}
    for m in ("rekv", "rekv@k2"):
        assert ck[(m, "text")]["per_layer"]["selected_frac"][0] is not None, m  # layer 0 consulted
    for m in ("resv", "rekv@frame"):
        assert ck[(m, "text")]["per_layer"]["selected_frac"][0] is None, m  # layer 0 dense for them
    assert ck[("rekv", "text")]["selected_frac"] == 1.0  # 64 frames: every block of this short stream
    # the same stream and schedule, steered by ReKV (top 2 blocks); the set layer 0 chooses at the question is held
    # for the answer, so the answer's tokens do not change layer 0's fraction
    kw = dict(resv=None, runtime=None, variants=variants, model=tiny, long=False, fidelity_kv=(), stream_seed=None,
              model_kwargs=None)
    plan = _plan("smoke", ["rekv"], [200], tmp_path / "x.json", **kw)
    sess = StreamingSession(tiny, _make("rekv", {"topk_blocks": 2}, plan.resv), plan.cfg)
    res = _stream(plan, sess, [200], lambda p, ph: None)
    steps = res[200]["text_steps"]
    sel = np.array([sess.stats[i]["selected"][0].sum() for i in steps], float)
    cand = np.array([sess.stats[i]["applied"][0] * sess.stats[i]["n_candidates"] * tiny.n_kv_heads
                     for i in steps], float)
    assert all(sess.stats[i]["applied"][0] for i in steps)  # ReKV alone: consulted at layer 0 too
    assert ck[("rekv@k2", "text")]["per_layer"]["selected_frac"][0] == pytest.approx(sel.sum() / cand.sum())
    assert 0 < sel.sum() / cand.sum() < 1


def test_an_atomic_write_that_fails_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    from vrex_lib import _io

    target = tmp_path / "table.csv"
    target.write_text("old\n")

    def fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError) as e:
        _io.write_text(target, "new\n")
    assert str(e.value) == (f"cannot write {target}: No space left on device; free space on that disk (or choose "
                            "another folder) and run again") and e.value.errno == errno.ENOSPC
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["table.csv"]  # no temp left
