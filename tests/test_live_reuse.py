"""A live session (JupyterLab) reuses what `make reproduce` computed, read only, and writes under ``results/live/``;
`make lab` keeps Jupyter's checkpoints out of ``results/`` (docs/DECISIONS.md D462)."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from vrex_lib import _io, notebook

REPO = Path(__file__).resolve().parent.parent


class _LiveShell:
    config = {"IPKernelApp": {}}

    class history_manager:  # noqa: N801 -- the attribute IPython's shell has
        hist_file = "/home/u/.ipython/history.sqlite"


def _reproduced(tmp_path: Path) -> Path:
    res = tmp_path / "results"
    for rel, text in (("data/workload_default.json", "{\"w\": 1}"), ("data/retrieval_demand_default.json", "{}"),
                      ("cache/cacti/ab.json", "{}"), ("hdl/summary.json", "{}"), ("tables/t.csv", "a\n1\n")):
        (res / rel).parent.mkdir(parents=True, exist_ok=True)
        (res / rel).write_text(text)
    (res / ".params").write_text("PROFILE=default PAPERMILL_ARGS=\n")
    return res


def test_a_live_session_reads_reproduce_caches_and_never_writes_through_them(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(notebook.HEADLESS_ENV, raising=False)
    monkeypatch.setattr(notebook, "_ipython", lambda: _LiveShell())
    res = _reproduced(tmp_path)
    live = notebook.results_folder(str(res))
    assert live == res / notebook.LIVE_SUBDIR
    said = capsys.readouterr().out
    assert "4 of its inputs and caches are read from there" in said and str(tmp_path) not in said
    wl = live / "data" / "workload_default.json"
    assert wl.is_symlink() and wl.read_text() == "{\"w\": 1}"  # the workload file make measured
    assert (live / "cache" / "cacti" / "ab.json").is_symlink() and (live / "hdl" / "summary.json").is_symlink()
    assert not (live / "tables").exists()  # results are the session's own, never make's
    _io.write_text(wl, "{\"w\": 2}")  # a live run recomputing the cache
    assert not wl.is_symlink() and wl.read_text() == "{\"w\": 2}"
    assert (res / "data" / "workload_default.json").read_text() == "{\"w\": 1}"  # make's copy untouched
    assert notebook.link_reproduce_inputs(res, live) == 0  # the session's own file is kept on the next start


def test_make_lab_keeps_checkpoints_out_of_the_notebooks_folders(tmp_path):
    spec = importlib.util.spec_from_file_location("lab_config", REPO / "scripts" / "lab_config.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cp = mod.CheckpointsOutside(root_dir=str(tmp_path))
    path = Path(cp.checkpoint_path("checkpoint", "results/executed/09_retrieval_demand.ipynb"))
    assert path == tmp_path / mod.CHECKPOINT_ROOT / "results" / "executed" / "09_retrieval_demand-checkpoint.ipynb"
    other = Path(cp.checkpoint_path("checkpoint", "notebooks/09_retrieval_demand.ipynb"))
    assert other != path and not (tmp_path / "results" / ".ipynb_checkpoints").exists()
    assert "--config=scripts/lab_config.py" in (REPO / "Makefile").read_text()
    assert f"/{mod.CHECKPOINT_ROOT}/" in (REPO / ".gitignore").read_text()
    assert os.path.isdir(path.parent)
