"""Writing and reading ``results/tables/<id>.csv`` (+ ``<id>.title``) and ``results/figures/<id>.png``.

Every write is atomic (``vrex_lib._io``) and is recorded in the running notebook's manifest
(:mod:`.manifest`). ``results/tables/summary.csv`` is the report's own verdict count (:data:`SUMMARY_ID`): no
notebook may write a table of that name, and it is never read back as a table.
"""
from __future__ import annotations

import io
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .. import _io
from ..config import results_dir
from . import manifest
from .rows import COLUMNS, VERDICTS, Row, to_frame

if TYPE_CHECKING:  # matplotlib is imported only by those that draw
    from matplotlib.figure import Figure

#: The verdict counts :func:`vrex_lib.report.build_report` writes to ``results/tables/summary.csv``.
SUMMARY_ID = "summary"


def _check_id(table_id: str) -> None:
    if table_id == SUMMARY_ID:
        raise ValueError(f"table id {SUMMARY_ID!r} is reserved for the report's verdict counts "
                         f"(results/tables/{SUMMARY_ID}.csv); name the table otherwise")


def write_table(table_id: str, rows: Iterable[Row] | pd.DataFrame, *, profile: str, title: str = "",
                out: str | os.PathLike | None = None) -> pd.DataFrame:
    """Write ``results/tables/<table_id>.csv`` (+ a one-line title sidecar) and return the frame."""
    _check_id(table_id)
    df = rows if isinstance(rows, pd.DataFrame) else to_frame(rows, profile)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"table {table_id}: missing columns {missing}")
    base = results_dir(out) / "tables"
    _io.write_bytes(base / f"{table_id}.csv", df[COLUMNS].to_csv(index=False).encode())
    _io.write_text(base / f"{table_id}.title", title or table_id)
    manifest.record("tables", table_id, rows=len(df))
    return df


def write_wide_table(table_id: str, df: pd.DataFrame, *, profile: str, title: str = "",
                     summary_columns: Iterable[str] = (), out: str | os.PathLike | None = None) -> Path:
    """Write an exploration table (one row per design point, any columns) to ``results/tables/<table_id>.csv``
    atomically, with its title sidecar. It has no paper column, so :func:`collect_tables` leaves it out of the
    verdict counts and the report lists it in its appendix, showing ``summary_columns`` (sidecar
    ``<table_id>.columns``) of the rows flagged ``is_paper`` / ``pareto_*``. ``profile`` fills a missing column."""
    _check_id(table_id)
    if "profile" not in df.columns:
        df = df.assign(profile=profile)
    cols = [c for c in summary_columns]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"table {table_id}: summary columns {missing} are not in the table")
    base = results_dir(out) / "tables"
    path = base / f"{table_id}.csv"
    _io.write_bytes(path, df.to_csv(index=False).encode())
    _io.write_text(base / f"{table_id}.title", title or table_id)
    if cols:
        _io.write_text(base / f"{table_id}.columns", ",".join(cols))
    manifest.record("tables", table_id, rows=len(df))
    return path


def is_comparison(df: pd.DataFrame) -> bool:
    """A comparison table has every column of :data:`COLUMNS`; anything else is an exploration table."""
    return all(c in df.columns for c in COLUMNS)


def read_table(table_id: str, out: str | os.PathLike | None = None) -> pd.DataFrame:
    return pd.read_csv(results_dir(out) / "tables" / f"{table_id}.csv")


def write_figure(fig_id: str, fig: "Figure", out: str | os.PathLike | None = None, dpi: int = 110) -> None:
    """Save a matplotlib figure to ``results/figures/<fig_id>.png`` atomically. Returns nothing, so a notebook
    cell that ends with it shows no path (:func:`figure_path` names the file)."""
    buf = io.BytesIO()
    # Fixed metadata keeps the PNG byte-identical across reruns.
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    _io.write_bytes(figure_path(fig_id, out), buf.getvalue())
    manifest.record("figures", fig_id)


def figure_path(fig_id: str, out: str | os.PathLike | None = None) -> Path:
    """``results/figures/<fig_id>.png``: where :func:`write_figure` saves figure ``fig_id``."""
    return results_dir(out) / "figures" / f"{fig_id}.png"


def write_frame(name: str, df: pd.DataFrame, out: str | os.PathLike | None = None) -> Path:
    """Save a raw (non-comparison) data table to ``results/data/<name>.csv`` for later notebooks."""
    path = results_dir(out) / "data" / f"{name}.csv"
    _io.write_bytes(path, df.to_csv(index=False).encode())
    return path


def table_paths(out: str | os.PathLike | None = None) -> list[Path]:
    """Every ``results/tables/*.csv`` a notebook wrote (the report's ``summary.csv`` left out), sorted."""
    return [t for t in sorted((results_dir(out) / "tables").glob("*.csv")) if t.stem != SUMMARY_ID]


def load_table(path: Path, rows: int | None = None) -> pd.DataFrame | str:
    """A table under ``results/tables``, or why it cannot be used (docs/DECISIONS.md D326): unreadable, not CSV,
    no rows, cut (its last line unfinished, or fewer or more rows than the ``rows`` its notebook's last run wrote),
    a comparison table of another schema, or a row whose verdict is not a verdict."""
    try:
        if path.stat().st_size == 0:
            return ("unreadable (empty: 0 bytes; its notebook's write did not complete -- a full disk? -- rerun the "
                    "notebook that writes it)")
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            ends_whole = f.read(1) == b"\n"
        df = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as err:  # EmptyDataError is a ValueError
        return f"unreadable ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
    if df.empty:
        return "no rows"
    if not ends_whole:
        return "cut: its last line is unfinished (a write that did not complete, or a truncated copy)"
    if rows is not None and len(df) != rows:
        return f"{len(df)} rows, but the last run of its notebook wrote {rows} (cut or edited since)"
    gone = [c for c in COLUMNS if c not in df.columns]
    if "verdict" in df.columns and gone:  # a comparison table of another schema, not an exploration table
        return f"a comparison table without the columns {', '.join(gone)} (written by another version of vrex)"
    if "verdict" in df.columns:
        bad = df.index[~df["verdict"].isin(VERDICTS)]
        if len(bad):
            return f"row {int(bad[0]) + 1} has verdict {df['verdict'].iloc[bad[0]]!r}, not one of {', '.join(VERDICTS)}"
    return df


def table_title(path: Path) -> str:
    """The one-line title sidecar of a table (its id when there is none)."""
    side = path.with_suffix(".title")
    try:
        return side.read_text().strip() or path.stem
    except OSError:
        return path.stem


def collect_tables(out: str | os.PathLike | None = None) -> pd.DataFrame:
    """Every comparison table under ``results/tables`` stacked, with a ``table`` column naming its file (damaged
    tables, exploration tables and the report's ``summary.csv`` are left out; :func:`damaged_tables` lists the
    damaged ones)."""
    frames = []
    counts = manifest.recorded_rows(out)
    for t in table_paths(out):
        df = load_table(t, counts.get(t.stem))
        if isinstance(df, str) or not is_comparison(df):
            continue
        df.insert(0, "table", t.stem)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["table", *COLUMNS])


def damaged_tables(out: str | os.PathLike | None = None) -> dict[str, str]:
    """``results/tables/<id>.csv`` -> why it cannot be reported (only damaged tables are listed)."""
    bad = {}
    counts = manifest.recorded_rows(out)
    for t in table_paths(out):
        got = load_table(t, counts.get(t.stem))
        if isinstance(got, str):
            bad[t.name] = got
    return bad


def mixed_profiles(out: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """Profile -> the tables it produced, when the tables come from more than one profile (else {}): a table
    left over from an earlier run under another profile would otherwise be reported beside this run's."""
    by: dict[str, list[str]] = {}
    counts = manifest.recorded_rows(out)
    for t in table_paths(out):
        df = load_table(t, counts.get(t.stem))
        if isinstance(df, str) or "profile" not in df.columns:
            continue
        for p in sorted(str(x) for x in df["profile"].dropna().unique()):
            by.setdefault(p, []).append(t.stem)
    return by if len(by) > 1 else {}
