import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENV_PY = REPO / ".venv" / "bin" / "python"


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def python_exe() -> str:
    """The interpreter the Makefile uses (the venv's), falling back to this one."""
    return str(VENV_PY if VENV_PY.exists() else Path(sys.executable))


@pytest.fixture(autouse=True)
def _isolated_results(tmp_path, monkeypatch):
    """No test may write into the user's results/: point the default results folder at a temp dir."""
    monkeypatch.setenv("VREX_RESULTS_DIR", str(tmp_path / "results"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
