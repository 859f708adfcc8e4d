"""Convert a percent-format script to a clean .ipynb (no outputs, kernelspec python3) and back.

Cells: ``# %%`` starts a code cell, ``# %% [markdown]`` a markdown cell (lines prefixed ``# ``),
``# %% tags=["parameters"]`` a code cell tagged for papermill.

    python scripts/py2nb.py notebooks/src.py notebooks/NN_name.ipynb     # build
    python scripts/py2nb.py --to-py notebooks/NN_name.ipynb /tmp/src.py    # extract for editing
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HEADER = re.compile(r"^# %%(?P<md> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?\s*$")


def py_to_nb(src: str) -> dict:
    cells: list[dict] = []
    cur: dict | None = None
    for line in src.splitlines():
        m = HEADER.match(line)
        if m:
            cur = {"cell_type": "markdown" if m["md"] else "code", "metadata": {}, "source": []}
            if m["tags"]:
                cur["metadata"]["tags"] = json.loads(m["tags"])
            if not m["md"]:
                cur.update(execution_count=None, outputs=[])
            cells.append(cur)
            continue
        if cur is None:
            continue
        if cur["cell_type"] == "markdown":
            line = line[2:] if line.startswith("# ") else line.lstrip("#")
        cur["source"].append(line)
    for c in cells:
        while c["source"] and not c["source"][-1].strip():
            c["source"].pop()
        c["source"] = [s + "\n" for s in c["source"][:-1]] + c["source"][-1:]
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                          "name": "python3"},
                                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def nb_to_py(nb: dict) -> str:
    out = []
    for c in nb["cells"]:
        src = "".join(c["source"])
        tags = c.get("metadata", {}).get("tags")
        if c["cell_type"] == "markdown":
            out.append("# %% [markdown]")
            out += ["# " + l if l else "#" for l in src.splitlines()]
        else:
            out.append("# %%" + (f" tags={json.dumps(tags)}" if tags else ""))
            out += src.splitlines()
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if argv[1] == "--to-py":
        Path(argv[3]).write_text(nb_to_py(json.loads(Path(argv[2]).read_text())))
    else:
        nb = py_to_nb(Path(argv[1]).read_text())
        for i, c in enumerate(nb["cells"]):  # stable ids keep the stored notebook diff-friendly
            c["id"] = f"cell-{i:02d}"
        Path(argv[2]).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
