"""Every notebook executes end to end in the smoke profile (what CI runs), stores its figures as images, and
every FAIL / NOT RUN row it writes names its cause."""
from __future__ import annotations

import json
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
    cells = json.loads((tmp_path / nb.name).read_text())["cells"]
    _check_outputs(nb.name, cells)
    # a FAIL or NOT RUN row must say why (report.CAUSES): the library function that builds it sets the cause
    why = report.unexplained(report.collect_tables(res))
    ids = list(why["table"] + ":" + why["claim"])
    assert not ids, f"{nb.name}: {len(ids)} FAIL / NOT RUN rows without a cause, e.g. {ids[:8]}"
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
        assert (res / report.REPORT_HTML).is_file() and (res / "tables" / "summary.csv").is_file()


def _check_outputs(name: str, cells: list[dict]) -> None:
    """Figures are stored as images, widgets never as their text repr, progress bars never as a frozen frame."""
    for c in cells:
        for o in c.get("outputs", []):
            text = json.dumps(o.get("data", {}).get("text/plain", "")) + json.dumps(o.get("text", ""))
            assert "interactive(children" not in text, f"{name}: a widget stored as text: {text[:120]}"
            assert "%|" not in text, f"{name}: a progress bar stored in the notebook: {text[:120]}"
    if name.startswith("08_"):  # the design-space panel, drawn as static images under papermill
        src = next(c for c in cells if "panel(draw" in "".join(c.get("source", "")))
        n_img = sum("image/png" in o.get("data", {}) for o in src["outputs"])
        assert n_img == 4, f"{name}: the design-space panel shows {n_img} images, not its 4 settings once each"
