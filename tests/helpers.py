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
