"""Every notebook executes end to end in the smoke profile (what CI runs)."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_smoke_profile(nb: Path, tmp_path):
    papermill = pytest.importorskip("papermill")
    res = tmp_path / "results"
    papermill.execute_notebook(str(nb), str(tmp_path / nb.name), parameters=dict(PROFILE="smoke", RESULTS_DIR=str(res)),
                               kernel_name="python3", cwd=str(REPO / "notebooks"), progress_bar=False)
    written = [p for sub in ("tables", "data", "figures") for p in (res / sub).glob("*")]
    assert written or (res / "REPORT.md").exists(), f"{nb.name} wrote no table, data file, figure or report"
