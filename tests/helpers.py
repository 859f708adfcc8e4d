"""Small helpers several test files share (the tests folder is on sys.path under pytest)."""
from __future__ import annotations

import json
from pathlib import Path


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
