"""Which notebooks' results no longer describe their inputs (docs/DECISIONS.md D327).

A notebook's results are stale when its executed copy (``results/executed/<notebook>.ipynb``, written by ``make``
when the run completes) is older than one of its inputs (:func:`notebook_inputs`: the notebook, the library files
it imports as ``notebooks/deps.mk`` lists them, the results folder's parameter stamp ``.params``, rewritten only
when ``PROFILE`` / ``PAPERMILL_ARGS`` change, and the other outputs it reads -- the workload file, the COIN stamp,
other notebooks' executed copies: the prerequisites of the Makefile's rule), when one of those outputs is missing,
when its manifest is missing (docs/DECISIONS.md D443), or when a run of it was stopped without cleaning up (its
``.<notebook>.running.ipynb`` is left). A ``make reproduce`` interrupted after it touched a notebook or changed
the parameters thus leaves the notebooks it did not rerun stale.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..config import REPO_ROOT, results_dir, workload_path
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


#: What each notebook reads from other outputs, as the Makefile's rules name it (tests/test_sturdy.py compares the
#: two): notebook-number pattern -> 'workload' (``data/workload_<PROFILE>.json``), 'coin' (the ``.coin`` stamp),
#: 'executed:<NN>' (another notebook's executed copy) or 'executed:*' (every other notebook's).
MAKE_INPUTS: dict[str, tuple[str, ...]] = {"0[268]": ("workload",), "09": ("workload",), "0[13]": ("coin",),
                                           "05": ("executed:04",), "07": ("executed:*",)}


def profile_of(results: Path) -> str | None:
    """The PROFILE of the folder's last `make reproduce` (its ``.params`` stamp), or None."""
    stamp = results / PARAMS_FILE
    m = re.match(r"PROFILE=(\S+)", stamp.read_text()) if stamp.is_file() else None
    return m.group(1) if m else None


def output_inputs(nb: Path, results: Path) -> list[Path]:
    """The other outputs a notebook's rule depends on (:data:`MAKE_INPUTS`); present or not (a missing one makes
    it stale, as make would rebuild it and rerun the notebook)."""
    out: list[Path] = []
    profile = profile_of(results)
    for pat, kinds in MAKE_INPUTS.items():
        if not re.fullmatch(pat, nb.stem[:2]):
            continue
        for k in kinds:
            if k == "workload" and profile:
                out.append(workload_path(profile, results))
            elif k == "coin" and (results / PARAMS_FILE).is_file():
                out.append(results / ".coin")
            elif k == "executed:*":
                out += [p for p in sorted((results / "executed").glob("[0-9][0-9]_*.ipynb")) if p.stem != nb.stem]
            elif k.startswith("executed:"):
                nbs = sorted(nb.parent.glob(f"{k.split(':')[1]}_*.ipynb"))
                out += [results / "executed" / p.name for p in nbs]
    return out


def notebook_inputs(nb: Path, results: Path, libs: dict[str, list[Path]] | None = None) -> list[Path]:
    """What a notebook's results depend on, as the Makefile's rule names it: the notebook, the library files it
    imports (``libs``, default :func:`library_inputs`; a notebook it does not list depends on every library source),
    the parameter stamp (when the folder has one) and the other outputs it reads (:func:`output_inputs`)."""
    libs = library_inputs() if libs is None else libs
    lib = libs.get(nb.stem) or sorted((REPO_ROOT / "vrex_lib").rglob("*.py"))
    stamp = results / PARAMS_FILE
    return [nb, *lib, *([stamp] if stamp.is_file() else []), *output_inputs(nb, results)]


def _shown(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(p)


def _why(nb: Path, executed: Path, results: Path, libs: dict[str, list[Path]]) -> str | None:
    running = executed.with_name(f".{nb.stem}.running.ipynb")
    if running.is_file():
        return f"a run of it was stopped before it finished (`results/executed/{running.name}` is left)"
    man = executed.with_name(f"{nb.stem}.manifest.json")
    if not man.is_file():
        return (f"its manifest `results/executed/{man.name}` is missing: what its last run wrote cannot be checked "
                "(a cut or edited table would pass)")
    t = executed.stat().st_mtime_ns
    inputs = notebook_inputs(nb, results, libs)
    gone = next((p for p in output_inputs(nb, results) if not p.is_file()), None)
    if gone is not None:
        return f"its input `{_shown(gone)}` is missing (make would rebuild it and rerun the notebook)"
    newer = next((p for p in inputs if p.is_file() and p.stat().st_mtime_ns > t), None)
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
