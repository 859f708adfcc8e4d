"""Paper-vs-reproduced comparison tables, figures and ``results/REPORT.md``.

Every notebook ends its figures/tables here:

    rows = [report.row("table3.area_mm2.dpe", ours_mm2), ...]          # paper value + tolerance looked up
    report.write_table("table3", rows, profile=PROFILE, title="Table III ...")
    report.write_figure("table3", fig)

A table lands in ``results/tables/<id>.csv`` (columns: claim, quantity, unit, paper, reproduced,
rel_error, tolerance, verdict, cause, cause_detail, where, profile, note), a figure in ``results/figures/<id>.png``; both
are written atomically (temp file + rename) so a half-finished run never leaves a torn file.
:func:`build_report` collects every table into ``results/REPORT.md``.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import _io, paper
from .config import REPO_ROOT, results_dir

COLUMNS = ["claim", "quantity", "unit", "paper", "reproduced", "rel_error", "tolerance", "verdict", "cause",
           "cause_detail", "where", "profile", "note"]
PASS, FAIL, INFO_V, MISSING = "PASS", "FAIL", "INFO", "NOT RUN"
#: Why a row FAILs or is NOT RUN, set by the library function that builds the row (``cause_detail`` says more).
CAUSES: dict[str, str] = {
    "paper-inconsistent": "the printed value lies outside what the paper's own stated inputs allow; cause_detail names "
                          "the implied-by-printed row that shows it",
    "stand-in-workload": "measured on this profile's stand-in (SmolLM2-135M, the stand-in vision encoder, the fixture "
                         "or composed streams), not the paper's VideoLLM-online 8B on COIN; cause_detail says what differs",
    "model": "our reconstruction (simulator, estimator, micro-architecture) differs; cause_detail gives the reason",
    "not-run": "needs what this machine lacks; cause_detail says what would run it (e.g. the full profile on a GPU)",
}


@dataclass
class Row:
    """One compared quantity. ``paper`` None -> informational (no printed value, e.g. held out)."""

    claim: str
    quantity: str
    unit: str
    paper: float | None
    reproduced: float | None
    tolerance: paper.Tolerance
    where: str = ""
    note: str = ""
    cause: str = ""
    cause_detail: str = ""

    def __post_init__(self) -> None:
        if self.cause and self.cause not in CAUSES:
            raise ValueError(f"row {self.claim}: cause {self.cause!r} is not one of {', '.join(CAUSES)}")

    def verdict(self) -> str:
        if self.reproduced is None or (isinstance(self.reproduced, float) and math.isnan(self.reproduced)):
            return MISSING
        if self.paper is None:
            return INFO_V
        ok = self.tolerance.check(self.paper, self.reproduced)
        return INFO_V if ok is None else (PASS if ok else FAIL)

    def rel_error(self) -> float | None:
        if self.paper is None or self.reproduced is None or self.paper == 0:
            return None
        return (self.reproduced - self.paper) / abs(self.paper)


def row(key: str, reproduced: float | None, *, quantity: str | None = None, tol: paper.Tolerance | None = None,
        note: str = "", cause: str = "", cause_detail: str = "") -> Row:
    """A row comparing ``reproduced`` with the registered paper value ``key`` (its unit, where, tolerance).

    ``cause``/``cause_detail`` (:data:`CAUSES`): why the row FAILs or is NOT RUN, when it does; the report shows
    them only for those verdicts, so a builder may set them before knowing the verdict."""
    pvv = paper.get(key)
    return Row(key, quantity or key, pvv.unit, pvv.value, None if reproduced is None else float(reproduced),
               tol or pvv.tol, pvv.where, note or pvv.note, cause, cause_detail)


def info_row(claim: str, quantity: str, unit: str, reproduced: float | None, note: str = "", *, cause: str = "",
             cause_detail: str = "") -> Row:
    """A measured quantity with no printed counterpart (held-out, fidelity proxy, sensitivity)."""
    return Row(claim, quantity, unit, None, None if reproduced is None else float(reproduced), paper.INFO,
               "", note, cause, cause_detail)


def to_frame(rows: Iterable[Row], profile: str) -> pd.DataFrame:
    recs = []
    for r in rows:
        v = r.verdict()
        explained = v in (FAIL, MISSING)
        recs.append(dict(claim=r.claim, quantity=r.quantity, unit=r.unit, paper=r.paper, reproduced=r.reproduced,
                         rel_error=r.rel_error(), tolerance=str(r.tolerance), verdict=v,
                         cause=r.cause if explained else "", cause_detail=r.cause_detail if explained else "",
                         where=r.where, profile=profile, note=r.note))
    return pd.DataFrame.from_records(recs, columns=COLUMNS)


def write_table(table_id: str, rows: Iterable[Row] | pd.DataFrame, *, profile: str, title: str = "",
                out: str | os.PathLike | None = None) -> pd.DataFrame:
    """Write ``results/tables/<table_id>.csv`` (+ a one-line title sidecar) and return the frame."""
    df = rows if isinstance(rows, pd.DataFrame) else to_frame(rows, profile)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"table {table_id}: missing columns {missing}")
    base = results_dir(out) / "tables"
    _io.write_bytes(base / f"{table_id}.csv", df[COLUMNS].to_csv(index=False).encode())
    _io.write_text(base / f"{table_id}.title", title or table_id)
    return df


def write_wide_table(table_id: str, df: pd.DataFrame, *, profile: str, title: str = "",
                     summary_columns: Iterable[str] = (), out: str | os.PathLike | None = None) -> Path:
    """Write an exploration table (one row per design point, any columns) to ``results/tables/<table_id>.csv``
    atomically, with its title sidecar. It has no paper column, so :func:`collect_tables` leaves it out of the
    verdict counts and :func:`build_report` lists it in its own section, showing ``summary_columns`` (sidecar
    ``<table_id>.columns``) of the rows flagged ``is_paper`` / ``pareto_*``. ``profile`` fills a missing column."""
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
    return path


def is_comparison(df: pd.DataFrame) -> bool:
    """A comparison table has every column of :data:`COLUMNS`; anything else is an exploration table."""
    return all(c in df.columns for c in COLUMNS)


def read_table(table_id: str, out: str | os.PathLike | None = None) -> pd.DataFrame:
    return pd.read_csv(results_dir(out) / "tables" / f"{table_id}.csv")


def write_figure(fig_id: str, fig, out: str | os.PathLike | None = None, dpi: int = 110) -> Path:
    """Save a matplotlib figure to ``results/figures/<fig_id>.png`` atomically."""
    import io

    buf = io.BytesIO()
    # Fixed metadata keeps the PNG byte-identical across reruns.
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    path = results_dir(out) / "figures" / f"{fig_id}.png"
    _io.write_bytes(path, buf.getvalue())
    return path


def write_frame(name: str, df: pd.DataFrame, out: str | os.PathLike | None = None) -> Path:
    """Save a raw (non-comparison) data table to ``results/data/<name>.csv`` for later notebooks."""
    path = results_dir(out) / "data" / f"{name}.csv"
    _io.write_bytes(path, df.to_csv(index=False).encode())
    return path


def collect_tables(out: str | os.PathLike | None = None) -> pd.DataFrame:
    """Every comparison table under ``results/tables`` stacked, with a ``table`` column naming its file (damaged
    tables are left out; :func:`damaged_tables` lists them)."""
    frames = []
    for t in sorted((results_dir(out) / "tables").glob("*.csv")):
        df = _load_table(t)
        if isinstance(df, str) or not is_comparison(df):
            continue  # damaged (listed by build_report / damaged_tables) or an exploration table
        df.insert(0, "table", t.stem)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["table", *COLUMNS])


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


_WRITE_TABLE = re.compile(r"""write_table\(\s*["']([A-Za-z0-9_.-]+)["']""")


def expected_tables(notebook_dir: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """Notebook file name -> the comparison table ids its code writes (``write_table("<id>", ...)`` calls).

    Read from the notebooks themselves, so a notebook that gains a table is expected to produce it; a table id
    computed at run time is not listed (it cannot be known without running the notebook).
    """
    import json

    nb_dir = Path(notebook_dir) if notebook_dir else REPO_ROOT / "notebooks"
    if not nb_dir.is_dir():
        raise FileNotFoundError(f"notebook folder {nb_dir} not found (--notebooks / NOTEBOOK_DIR)")
    out: dict[str, list[str]] = {}
    for nb in sorted(nb_dir.glob("[0-9][0-9]_*.ipynb")):
        try:
            cells = json.loads(nb.read_text()).get("cells", [])
        except (OSError, ValueError) as err:
            raise ValueError(f"{nb}: not a readable notebook ({err})") from None
        src = "\n".join("".join(c.get("source", "")) for c in cells if c.get("cell_type") == "code")
        out[nb.name] = list(dict.fromkeys(_WRITE_TABLE.findall(src)))
    return out


def missing_tables(out: str | os.PathLike | None = None,
                   notebook_dir: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """Notebook -> the tables it writes that are absent (or empty) under ``results/tables`` (only notebooks
    with something missing are listed)."""
    base = results_dir(out) / "tables"
    miss: dict[str, list[str]] = {}
    for nb, ids in expected_tables(notebook_dir).items():
        gone = [t for t in ids if not (base / f"{t}.csv").is_file() or (base / f"{t}.csv").stat().st_size == 0]
        if gone:
            miss[nb] = gone
    return miss


def _load_table(path: Path) -> pd.DataFrame | str:
    """A table under ``results/tables``, or why it cannot be used (unreadable, not CSV, no rows)."""
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as err:  # EmptyDataError is a ValueError
        return f"unreadable ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
    if df.empty:
        return "no rows"
    return df


def damaged_tables(out: str | os.PathLike | None = None) -> dict[str, str]:
    """``results/tables/<id>.csv`` -> why it cannot be reported (only damaged tables are listed)."""
    bad = {}
    for t in sorted((results_dir(out) / "tables").glob("*.csv")):
        got = _load_table(t)
        if isinstance(got, str):
            bad[t.name] = got
    return bad


def mixed_profiles(out: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """Profile -> the tables it produced, when the tables come from more than one profile (else {}): a table
    left over from an earlier run under another profile would otherwise be reported beside this run's."""
    by: dict[str, list[str]] = {}
    for t in sorted((results_dir(out) / "tables").glob("*.csv")):
        df = _load_table(t)
        if isinstance(df, str) or "profile" not in df.columns:
            continue
        for p in sorted(str(x) for x in df["profile"].dropna().unique()):
            by.setdefault(p, []).append(t.stem)
    return by if len(by) > 1 else {}


def build_report(out: str | os.PathLike | None = None, claims: Mapping[str, str] | None = None, *,
                 notebook_dir: str | os.PathLike | None = None) -> Path:
    """Collect every ``results/tables/*.csv`` into ``results/REPORT.md``: one row per claim with verdict.

    The report opens with the notebooks whose tables are absent (see :func:`missing_tables`) and those whose
    last run failed (``results/executed/<nb>.FAILED.ipynb``), so a partial results folder never reads as a
    complete one.
    """
    base = results_dir(out)
    tables = sorted((base / "tables").glob("*.csv"))
    n_cmp = sum(not isinstance(df, str) and is_comparison(df) for df in map(_load_table, tables))
    lines = ["# vrex reproduction report", "",
             f"Built by `vrex_lib.report.build_report` (`make report`) from the {n_cmp} comparison tables in "
             "`results/tables/`; figures are in `results/figures/`, executed notebooks in `results/executed/`.", ""]
    miss = missing_tables(base, notebook_dir)
    failed = sorted(p.name.replace(".FAILED.ipynb", ".ipynb") for p in (base / "executed").glob("*.FAILED.ipynb"))
    damaged = damaged_tables(base)
    mixed = mixed_profiles(base)
    if miss or failed or damaged or mixed:
        lines += ["## Incomplete: tables missing", "",
                  "These notebooks have not (successfully) written their tables; their claims are absent from this "
                  "report. Run `make reproduce` (it reruns only what is missing or out of date).", ""]
        lines += [f"- `notebooks/{nb}`: {', '.join(f'`{t}`' for t in ids)} absent" for nb, ids in miss.items()]
        lines += [f"- `notebooks/{nb}`: last run FAILED (see `results/executed/{nb[:-6]}.FAILED.ipynb`)"
                  for nb in failed]
        lines += [f"- `results/tables/{name}`: {why}; rerun the notebook that writes it" for name, why in
                  damaged.items()]
        if mixed:
            lines.append("- tables from several profiles (" + "; ".join(f"{p}: {', '.join(ts)}" for p, ts in
                                                                      mixed.items())
                         + "): tables of an earlier run are mixed in; rerun `make reproduce` into a clean RESULTS")
        lines.append("")
    summary: dict[str, int] = {}
    body: list[str] = []
    profiles: set[str] = set()
    explore: list[str] = []
    for t in tables:
        df = _load_table(t)
        if isinstance(df, str):
            continue  # listed above as damaged
        title_file = t.with_suffix(".title")
        title = title_file.read_text().strip() if title_file.exists() else t.stem
        if not is_comparison(df):
            explore += _wide_section(t, df, title)
            continue
        profiles.update(str(p) for p in df["profile"].dropna().unique())
        prof = ", ".join(sorted(str(p) for p in df["profile"].dropna().unique())) or "?"
        body += [f"## {title}", "", f"`results/tables/{t.name}` — produced by profile **{prof}**", "",
                 "| claim | quantity | unit | paper | reproduced | rel. error | tolerance | verdict |",
                 "|---|---|---|---|---|---|---|---|"]
        for r in df.itertuples(index=False):
            summary[r.verdict] = summary.get(r.verdict, 0) + 1
            rel = "–" if pd.isna(r.rel_error) else f"{r.rel_error:+.1%}"
            body.append(f"| {r.claim} | {r.quantity} | {_fmt(r.unit) if not pd.isna(r.unit) else ''} | "
                        f"{_fmt(r.paper)} | {_fmt(r.reproduced)} | {rel} | {r.tolerance} | **{r.verdict}** |")
        body.append("")
    lines.append("**Profiles that produced these results:** " + (", ".join(sorted(profiles)) or "none") + ". "
                 "`smoke` = tiny random models (CI); `default` = real SmolLM2-135M + a fixed patch-embedding stand-in "
                 "vision encoder on the real-footage COIN fixture and composed long streams, CPU; `full` = "
                 "VideoLLM-online 8B on the user's COIN, GPU.")
    lines.append("")
    lines.append("Verdicts: " + (", ".join(f"{k}: {v}" for k, v in sorted(summary.items())) or "none (no tables)")
                 + ".")
    lines.append("")
    if claims:
        lines += ["| headline claim | verdict |", "|---|---|"] + [f"| {k} | {v} |" for k, v in claims.items()] + [""]
    if explore:
        body += ["# Exploration beyond the paper", "", "Tables with no printed counterpart (no verdicts).", ""]
        body += explore
    path = base / "REPORT.md"
    _io.write_text(path, "\n".join(lines + body) + "\n")
    return path


def _wide_section(path: Path, df: pd.DataFrame, title: str) -> list[str]:
    """Markdown for an exploration table: its size and, when it marks them, the paper's and the Pareto rows."""
    prof = ", ".join(sorted(str(p) for p in df["profile"].dropna().unique())) if "profile" in df else "?"
    out = [f"## {title}", "", f"`results/tables/{path.name}` — {len(df)} rows, profile **{prof or '?'}**", ""]
    flags = [c for c in ("is_paper", "pareto_latency", "pareto_area") if c in df.columns]
    if flags:
        keep = df[df[flags].fillna(False).astype(bool).any(axis=1)]
        side = path.with_suffix(".columns")
        listed = side.read_text().strip().split(",") if side.exists() else []
        cols = [c for c in listed if c in df.columns and c not in flags] or \
            [c for c in df.columns if c not in ("profile", "model", "workload_source", *flags)][:12]
        out += ["| " + " | ".join(cols + flags) + " |", "|" + "---|" * (len(cols) + len(flags))]
        for r in keep.itertuples(index=False):
            d = r._asdict()
            out.append("| " + " | ".join(_fmt(d[c]) for c in cols + flags) + " |")
        out.append("")
    return out


def main(argv: list[str] | None = None) -> int:
    """Write REPORT.md; exit 1 (after writing it) when a notebook's tables are missing, unless --allow-missing."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m vrex_lib.report", description="Rebuild results/REPORT.md")
    ap.add_argument("--results", default=None, help="results folder (default: ./results)")
    ap.add_argument("--notebooks", default=None, help="notebook folder (default: <repo>/notebooks)")
    ap.add_argument("--allow-missing", action="store_true",
                    help="exit 0 even when some notebooks' tables are absent (they are still listed)")
    args = ap.parse_args(argv)
    if args.results and Path(args.results).exists() and not Path(args.results).is_dir():
        print(f"python -m vrex_lib.report: error: --results {args.results} is not a folder", file=sys.stderr)
        return 2
    try:
        path = build_report(args.results, notebook_dir=args.notebooks)
    except OSError as err:
        print(f"python -m vrex_lib.report: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    miss = missing_tables(args.results, args.notebooks)
    failed = sorted((path.parent / "executed").glob("*.FAILED.ipynb"))
    damaged = damaged_tables(args.results)
    mixed = mixed_profiles(args.results)
    if miss or failed or damaged or mixed:
        print(f"report: INCOMPLETE -- {path} lacks the tables of {len(miss)} notebook(s):", file=sys.stderr)
        for nb, ids in miss.items():
            print(f"  notebooks/{nb}: {', '.join(ids)}", file=sys.stderr)
        for f in failed:
            print(f"  {f}: the last run of this notebook failed", file=sys.stderr)
        for name, why in damaged.items():
            print(f"  {path.parent / 'tables' / name}: {why}", file=sys.stderr)
        for p, ts in mixed.items():
            print(f"  profile {p} produced {', '.join(ts)} (tables of several profiles are mixed)", file=sys.stderr)
        print("  run `make reproduce` to produce them" + ("" if args.allow_missing else
              " (or `python -m vrex_lib.report --allow-missing` to accept a partial report)"), file=sys.stderr)
        return 0 if args.allow_missing else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
