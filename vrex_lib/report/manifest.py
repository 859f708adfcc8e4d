"""What each notebook wrote in its last run, and what is therefore expected under ``results/``.

A notebook run by ``make`` gets ``$VREX_MANIFEST`` = ``results/executed/<notebook>.manifest.json``:
:func:`start` (called by ``vrex_lib.notebook.setup``) empties it, and every ``report.write_table`` /
``write_wide_table`` / ``write_figure`` adds its id. Table ids computed at run time (notebook 06's
``write_table(tid, ...)``) are thus known to :func:`missing_tables` as well as the literal
``write_table("<id>", ...)`` calls read from the notebook's code (:func:`expected_tables`). A manifest also
records each table's row count: the report refuses a table that no longer has them, cut or edited
(docs/DECISIONS.md D326).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .. import _io
from ..config import REPO_ROOT, results_dir

MANIFEST_ENV = "VREX_MANIFEST"
SCHEMA = "vrex.manifest/1"
KINDS = ("tables", "figures")
_WRITE_TABLE = re.compile(r"""write_table\(\s*["']([A-Za-z0-9_.-]+)["']""")
_WRITE_FIGURE = re.compile(r"""write_figure\(\s*["']([A-Za-z0-9_.-]+)["']""")


def manifest_path() -> Path | None:
    """The manifest of the notebook running in this process (``$VREX_MANIFEST``), or None outside ``make``."""
    p = os.environ.get(MANIFEST_ENV, "").strip()
    return Path(p) if p else None


def start() -> Path | None:
    """Empty this run's manifest (a table the notebook no longer writes is then no longer expected)."""
    path = manifest_path()
    if path is not None:
        _io.write_json(path, _empty(path))
    return path


def _empty(path: Path) -> dict:
    return {"schema": SCHEMA, "notebook": _notebook_of(path), "tables": [], "figures": [], "rows": {}}


def record(kind: str, item_id: str, rows: int | None = None) -> None:
    """Add ``item_id`` to this run's manifest under ``kind`` ('tables' or 'figures'), with a table's number of
    ``rows``; no-op outside ``make``."""
    if kind not in KINDS:
        raise ValueError(f"manifest kind {kind!r} is not one of {', '.join(KINDS)}")
    path = manifest_path()
    if path is None:
        return
    got = _read(path)
    man = got if isinstance(got, dict) else _empty(path)
    old = (list(man[kind]), dict(man.get("rows", {})))
    if item_id not in man[kind]:
        man[kind].append(item_id)
    if rows is not None:
        man.setdefault("rows", {})[item_id] = int(rows)
    if (man[kind], man.get("rows", {})) != old:
        _io.write_json(path, man)


def _notebook_of(path: Path) -> str:
    return path.name.removesuffix(".manifest.json") + ".ipynb"


def _read(path: Path) -> dict | str:
    """A manifest, or why it cannot be used."""
    try:
        man = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return f"unreadable ({type(err).__name__})"
    if not isinstance(man, dict) or man.get("schema") != SCHEMA or not all(
            isinstance(man.get(k), list) for k in KINDS):
        return f"not a {SCHEMA} manifest"
    return man


def notebook_files(notebook_dir: str | os.PathLike | None) -> list[Path]:
    """The numbered notebooks ``NN_*.ipynb`` of ``notebook_dir`` (default ``<repo>/notebooks``), sorted."""
    nb_dir = Path(notebook_dir) if notebook_dir else REPO_ROOT / "notebooks"
    if not nb_dir.is_dir():
        raise FileNotFoundError(f"notebook folder {nb_dir} not found (--notebooks / NOTEBOOK_DIR)")
    return sorted(nb_dir.glob("[0-9][0-9]_*.ipynb"))


def manifests(out: str | os.PathLike | None = None, notebook_dir: str | os.PathLike | None = None
              ) -> dict[str, dict | str]:
    """Notebook file name -> its last run's manifest (or why it is unusable), for the notebooks that have one."""
    executed = results_dir(out) / "executed"
    found: dict[str, dict | str] = {}
    for nb in notebook_files(notebook_dir):
        p = executed / f"{nb.stem}.manifest.json"
        if p.is_file():
            found[nb.name] = _read(p)
    return found


def _code_ids(notebook_dir: str | os.PathLike | None, pattern: re.Pattern) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for nb in notebook_files(notebook_dir):
        try:
            cells = json.loads(nb.read_text()).get("cells", [])
        except (OSError, ValueError) as err:
            raise ValueError(f"{nb}: not a readable notebook ({err})") from None
        src = "\n".join("".join(c.get("source", "")) for c in cells if c.get("cell_type") == "code")
        out[nb.name] = list(dict.fromkeys(pattern.findall(src)))
    return out


def expected_tables(notebook_dir: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """Notebook file name -> the comparison table ids its code writes (``write_table("<id>", ...)`` calls).

    Read from the notebooks themselves, so a notebook that gains a table is expected to produce it; an id
    computed at run time is known only from the notebook's manifest (:func:`expected_outputs`).
    """
    return _code_ids(notebook_dir, _WRITE_TABLE)


def expected_outputs(out: str | os.PathLike | None = None, notebook_dir: str | os.PathLike | None = None
                     ) -> dict[str, dict[str, list[str]]]:
    """Notebook -> {'tables': [...], 'figures': [...]}. Tables: the literal ids in its code and those its last run's
    manifest lists. Figures: those its manifest lists, or without a usable manifest the literal ids in its code (a
    notebook may draw a figure only in some profiles, which the manifest knows and the code does not)."""
    tables, figures = expected_tables(notebook_dir), _code_ids(notebook_dir, _WRITE_FIGURE)
    mans = manifests(out, notebook_dir)
    got: dict[str, dict[str, list[str]]] = {}
    for nb in tables:
        man = mans.get(nb)
        if isinstance(man, dict):
            got[nb] = {"tables": list(dict.fromkeys(tables[nb] + man["tables"])), "figures": list(man["figures"])}
        else:
            got[nb] = {"tables": tables[nb], "figures": figures[nb]}
    return got


def missing_tables(out: str | os.PathLike | None = None,
                   notebook_dir: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """Notebook -> the tables it writes (code or manifest) that are absent or empty under ``results/tables``
    (only notebooks with something missing are listed)."""
    base = results_dir(out) / "tables"
    miss: dict[str, list[str]] = {}
    for nb, ids in expected_outputs(out, notebook_dir).items():
        gone = [t for t in ids["tables"] if not (base / f"{t}.csv").is_file()
                or (base / f"{t}.csv").stat().st_size == 0]
        if gone:
            miss[nb] = gone
    return miss


def missing_figures(out: str | os.PathLike | None = None,
                    notebook_dir: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """Notebook -> the figures it writes (:func:`expected_outputs`) that are absent."""
    base = results_dir(out) / "figures"
    miss: dict[str, list[str]] = {}
    for nb, ids in expected_outputs(out, notebook_dir).items():
        gone = [f for f in ids["figures"] if not (base / f"{f}.png").is_file()]
        if gone:
            miss[nb] = gone
    return miss


def bad_manifests(out: str | os.PathLike | None = None,
                  notebook_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """Notebook -> why its manifest cannot be used (only those listed)."""
    return {nb: m for nb, m in manifests(out, notebook_dir).items() if isinstance(m, str)}


def recorded_rows(out: str | os.PathLike | None = None) -> dict[str, int]:
    """Table id -> the rows the last run of its notebook wrote, from every usable manifest under
    ``results/executed`` (a table no manifest counts is not listed)."""
    rows: dict[str, int] = {}
    for p in sorted((results_dir(out) / "executed").glob("*.manifest.json")):
        man = _read(p)
        if isinstance(man, dict) and isinstance(man.get("rows"), dict):
            rows.update({str(k): v for k, v in man["rows"].items() if isinstance(v, int)})
    return rows


def running_notebook() -> str | None:
    """The notebook file name this process runs under ``make`` (its manifest's), else None."""
    path = manifest_path()
    return _notebook_of(path) if path is not None else None


def writers(out: str | os.PathLike | None = None, notebook_dir: str | os.PathLike | None = None
            ) -> dict[str, str]:
    """Table or figure id -> the notebook that writes it (manifest first, then the notebook's code)."""
    who: dict[str, str] = {}
    for nb, ids in expected_outputs(out, notebook_dir).items():
        for i in ids["tables"] + ids["figures"]:
            who.setdefault(i, nb)
    return who
