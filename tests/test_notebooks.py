"""Every notebook executes end to end in the smoke profile (what CI runs)."""
from __future__ import annotations

from pathlib import Path

import pytest

from vrex_lib import report

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_smoke_profile(nb: Path, tmp_path):
    papermill = pytest.importorskip("papermill")
    res = tmp_path / "results"
    papermill.execute_notebook(str(nb), str(tmp_path / nb.name), parameters=dict(PROFILE="smoke", RESULTS_DIR=str(res)),
                               kernel_name="python3", cwd=str(REPO / "notebooks"), progress_bar=False)
    # every comparison table the notebook's code writes is there, complete, from this profile, with verdicts
    expected = report.expected_tables(nb.parent)[nb.name]
    for tid in expected:
        df = report.read_table(tid, res)
        assert len(df) > 0, f"{nb.name}: table {tid} is empty"
        assert list(df.columns) == report.COLUMNS, f"{nb.name}: table {tid} has columns {list(df.columns)}"
        assert set(df["profile"]) == {"smoke"}, f"{nb.name}: table {tid} was not written by this run"
        assert set(df["verdict"]) <= {report.PASS, report.FAIL, report.INFO_V, report.MISSING}
        assert (res / "tables" / f"{tid}.title").read_text().strip(), f"{nb.name}: table {tid} has no title"
    if nb.name.startswith("08_"):  # the exploration notebook writes a wide table, not claims
        df = report.read_table("design_space", res)
        assert len(df) > 0 and set(df["profile"]) == {"smoke"}, f"{nb.name}: design_space.csv not from this run"
        assert {"pareto_latency", "pareto_area", "is_paper"} <= set(df.columns) and df["is_paper"].any()
    elif not expected:  # the summary notebook: the report itself
        text = (res / "REPORT.md").read_text()
        assert text.startswith("# vrex reproduction report") and "Verdicts:" in text, f"{nb.name}: no REPORT.md"
