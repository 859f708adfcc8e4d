"""Which notebooks' results no longer describe their inputs (docs/DECISIONS.md D327).

A notebook's results are stale when its executed copy (``results/executed/<notebook>.ipynb``, written by ``make``
when the run completes) is older than one of its inputs (:func:`notebook_inputs`: the notebook, the library files
it imports as ``notebooks/deps.mk`` lists them, and the results folder's parameter stamp ``.params``, rewritten only
when ``PROFILE`` / ``PAPERMILL_ARGS`` change -- the prerequisites of the Makefile's rule), or when a run of it was stopped without cleaning up (its
``.<notebook>.running.ipynb`` is left). A ``make reproduce`` interrupted after it touched a notebook or changed
the parameters thus leaves the notebooks it did not rerun stale.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..config import REPO_ROOT, results_dir
from . import manifest

#: The results folder's record of the parameters of its last `make reproduce` (the Makefile's PARAMS_STAMP).
PARAMS_FILE = ".params"


#: The Makefile's per-notebook library dependencies (scripts/nb_deps.py writes it; docs/DECISIONS.md D301).
DEPS_FILE = REPO_ROOT / "notebooks" / "deps.mk"
_DEPS_BLOCK = re.compile(r"^\$\(EXEC_DIR\)/(?P<nb>[^/\s]+)\.ipynb:(?P<files>(?:[^\n]*\\\n)*[^\n]*)", re.M)


def library_inputs() -> dict[str, list[Path]]:
    """Notebook stem -> the library files it imports, as ``notebooks/deps.mk`` lists them (make's own list)."""
    text = DEPS_FILE.read_text() if DEPS_FILE.is_file() else ""
    return {m["nb"]: [REPO_ROOT / f for f in re.findall(r"vrex_lib/\S+\.py", m["files"])]
            for m in _DEPS_BLOCK.finditer(text)}


def notebook_inputs(nb: Path, results: Path, libs: dict[str, list[Path]] | None = None) -> list[Path]:
    """What a notebook's results depend on, as the Makefile's rule names it: the notebook, the library files it
    imports (``libs``, default :func:`library_inputs`; a notebook it does not list depends on every library source)
    and the parameter stamp (when the folder has one)."""
    libs = library_inputs() if libs is None else libs
    lib = libs.get(nb.stem) or sorted((REPO_ROOT / "vrex_lib").rglob("*.py"))
    stamp = results / PARAMS_FILE
    return [nb, *lib, *([stamp] if stamp.is_file() else [])]


def _shown(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(p)


def _why(nb: Path, executed: Path, results: Path, libs: dict[str, list[Path]]) -> str | None:
    running = executed.with_name(f".{nb.stem}.running.ipynb")
    if running.is_file():
        return f"a run of it was stopped before it finished (`results/executed/{running.name}` is left)"
    t = executed.stat().st_mtime_ns
    newer = next((p for p in notebook_inputs(nb, results, libs) if p.is_file() and p.stat().st_mtime_ns > t), None)
    if newer is None:
        return None
    if newer.name == PARAMS_FILE and newer.parent == results:
        return (f"its results were made before the parameters changed to `{newer.read_text().strip()}` "
                "(results/.params)")
    return f"its results are older than `{_shown(newer)}` (changed after the notebook last ran)"


def stale_notebooks(out: str | os.PathLike | None = None,
                    notebook_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """Notebook file name -> why its results are stale, for every notebook with an executed copy (the notebook
    running in this process is left out: it is producing its results now)."""
    base = results_dir(out)
    me = manifest.running_notebook()
    libs = library_inputs()
    stale = {}
    for nb in manifest.notebook_files(notebook_dir):
        executed = base / "executed" / nb.name
        if nb.name == me or not executed.is_file():
            continue
        why = _why(nb, executed, base, libs)
        if why:
            stale[nb.name] = why
    return stale
