"""The artifact's skeleton: environment pins, notebooks stored clean, paper registry, report writer, make reproduce."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from vrex_lib import _io, paper, report
from vrex_lib.config import VRexCoreConfig

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import env_to_requirements  # noqa: E402
from helpers import write_notebook


def test_requirements_derived_from_environment_yml():
    env = (REPO / "environment.yml").read_text()
    for fname, no_deps in [("requirements.txt", False), ("requirements-nodeps.txt", True)]:
        committed = [l for l in (REPO / fname).read_text().splitlines() if l and not l.startswith("#")]
        assert committed == env_to_requirements.pip_requirements(env, no_deps=no_deps), (
            f"{fname} drifted from environment.yml: run `python3 scripts/env_to_requirements.py "
            f"{'--no-deps ' if no_deps else ''}> {fname}`")


def test_every_pip_dependency_is_pinned_exactly_and_torch_is_the_cpu_pin():
    reqs = env_to_requirements.pip_requirements((REPO / "environment.yml").read_text())
    reqs += env_to_requirements.pip_requirements((REPO / "environment.yml").read_text(), no_deps=True)
    for r in reqs:
        assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[0-9][0-9A-Za-z.+\-]*", r), f"not an exact pin: {r}"
    assert "torch==2.13.0" in reqs
    assert "python=3.11" in (REPO / "environment.yml").read_text()


def test_env_parser_rejects_a_file_without_pip_section():
    with pytest.raises(ValueError, match="pip"):
        env_to_requirements.pip_requirements("name: x\ndependencies:\n  - python=3.11\n")


@pytest.mark.parametrize("nb", sorted((REPO / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_stored_clean_with_parameters_cell(nb: Path):
    assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", nb.name), "notebooks are named NN_name.ipynb"
    cells = json.loads(nb.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), f"{nb.name} has outputs"
    params = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, f"{nb.name}: exactly one cell tagged 'parameters'"
    src = "".join(params[0]["source"])
    assert "PROFILE" in src and "RESULTS_DIR" in src


def test_paper_registry_is_well_formed():
    assert len(paper.REGISTRY) > 20
    for key, v in paper.REGISTRY.items():
        assert key == v.key and v.where, f"{key}: every paper value says where it is printed"
        assert v.kind in ("result", "input", "derived")
    with pytest.raises(KeyError, match="close"):
        paper.get("table1.peak_tflops.vrex9")


def test_tolerance_semantics():
    rel = paper.Tolerance("rel", 0.25)
    assert rel.check(100, 125) and not rel.check(100, 126)
    ab = paper.Tolerance("abs", 1.0)
    assert ab.check(2.0, 2.9) and not ab.check(2.0, 3.1)
    assert paper.INFO.check(1, 1000) is None


def test_report_round_trip_and_verdicts(tmp_path):
    rows = [report.row("table1.peak_tflops.vrex8", VRexCoreConfig().peak_flops * 8 / 1e12),
            report.row("table1.peak_tflops.vrex48", 100.0),
            report.info_row("x.info", "a measured proxy", "%", 12.5),
            report.row("table1.peak_tflops.vrex8", None, quantity="not run")]
    df = report.write_table("roundtrip", rows, profile="smoke", title="Round trip", out=tmp_path)
    back = report.read_table("roundtrip", out=tmp_path)
    assert list(back.columns) == report.COLUMNS
    assert back.verdict.tolist() == ["PASS", "FAIL", "INFO", "NOT RUN"]
    pd.testing.assert_series_equal(back.reproduced, df.reproduced, check_names=False)
    md = report.build_report(tmp_path).read_text()
    assert "Round trip" in md and "**FAIL**" in md and "smoke" in md


def test_result_write_is_atomic_on_failure(tmp_path):
    target = tmp_path / "t.txt"
    _io.write_text(target, "old")

    class Boom:
        def encode(self):
            raise RuntimeError("half-finished")

    with pytest.raises(RuntimeError):
        _io.write_text(target, Boom())  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.txt"]


@pytest.mark.slow
def test_broken_notebook_fails_make_reproduce(tmp_path):
    nbdir, res = tmp_path / "nbs", tmp_path / "res"
    nbdir.mkdir()
    write_notebook(nbdir / "00_ok.ipynb", "print('fine', PROFILE)")
    write_notebook(nbdir / "01_broken.ipynb", "raise RuntimeError('deliberately broken')")
    proc = subprocess.run(["make", "-C", str(REPO), "reproduce", f"NOTEBOOK_DIR={nbdir}", f"RESULTS={res}",
                           "PROFILE=smoke"], capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert "01_broken.ipynb FAILED" in proc.stderr
    assert (res / "executed" / "00_ok.ipynb").exists()
    assert (res / "executed" / "01_broken.FAILED.ipynb").exists()
    assert not (res / "executed" / "01_broken.ipynb").exists(), "a failed run must not look done"


def test_cause_is_kept_only_where_a_row_fails_or_is_not_run():
    tol = paper.Tolerance("rel", 0.1)
    rows = [report.info_row("x.fail", "q", "", 2.0, cause="model", cause_detail="why"),
            report.Row("x.f", "q", "", 1.0, 3.0, tol, cause="model", cause_detail="why"),
            report.Row("x.p", "q", "", 1.0, 1.0, tol, cause="model", cause_detail="why"),
            report.Row("x.n", "q", "", 1.0, None, tol, cause="not-run", cause_detail="GPU")]
    df = report.to_frame(rows, profile="smoke")
    assert list(df["verdict"]) == ["INFO", "FAIL", "PASS", "NOT RUN"]
    assert list(df["cause"].fillna("")) == ["", "model", "", "not-run"]
    with pytest.raises(ValueError, match="cause 'typo'"):
        report.Row("x", "q", "", 1.0, 1.0, tol, cause="typo")
