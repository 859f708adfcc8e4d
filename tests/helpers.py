"""Small helpers several test files share (the tests folder is on sys.path under pytest)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def make_ready() -> bool:
    """make is installed and the venv and fixture are up to date for it (else a test calling make would run
    `make setup`, i.e. pip install)."""
    ok, coin = REPO / ".venv" / ".ok", REPO / "data" / "coin_mini" / "COIN.json"
    if shutil.which("make") is None or not ok.exists() or not coin.exists():
        return False
    deps = ("environment.yml", "requirements.txt", "requirements-nodeps.txt", "pyproject.toml")
    return (all((REPO / d).stat().st_mtime <= ok.stat().st_mtime for d in deps if (REPO / d).exists())
            and (REPO / "data" / "make_coin_mini.py").stat().st_mtime <= coin.stat().st_mtime)


def write_notebook(path: Path, code: str) -> None:
    """A two-cell notebook: a ``parameters`` cell (PROFILE, RESULTS_DIR) and ``code``."""
    nb = {"cells": [
        {"cell_type": "code", "id": "p", "metadata": {"tags": ["parameters"]}, "execution_count": None, "outputs": [],
         "source": 'PROFILE = "default"\nRESULTS_DIR = ""'},
        {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": None, "outputs": [], "source": code}],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))
