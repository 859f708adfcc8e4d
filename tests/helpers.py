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


def full_adder_netlist() -> dict:
    """A hand-made module of yosys's ``write_json``: s = a ^ b ^ c, co = majority(a, b, c) as XOR/AND/OR cells."""
    cell = lambda t, **c: dict(type=t, connections={k: [v] for k, v in c.items()})  # noqa: E731
    return dict(ports=dict(a=dict(direction="input", bits=[2]), b=dict(direction="input", bits=[3]),
                           c=dict(direction="input", bits=[4]), s=dict(direction="output", bits=[6]),
                           co=dict(direction="output", bits=[9])),
                cells={"x1": cell("$_XOR_", A=2, B=3, Y=5), "x2": cell("$_XOR_", A=5, B=4, Y=6),
                       "a1": cell("$_AND_", A=2, B=3, Y=7), "a2": cell("$_AND_", A=5, B=4, Y=8),
                       "o1": cell("$_OR_", A=7, B=8, Y=9)})
