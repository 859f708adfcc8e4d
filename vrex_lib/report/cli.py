"""``python -m vrex_lib.report``: rebuild REPORT.md, report.html and summary.csv; print the verdict counts per
cause; exit 1 when the results are incomplete (``--mark-stale`` instead marks an existing report stale)."""
from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path
from typing import TextIO

import pandas as pd

from .. import _io
from ..config import results_dir
from . import manifest, stale
from .content import totals_line
from .rows import CAUSES, FAIL, MISSING, UNEXPLAINED
from .render import REPORT_HTML, build_report, mark_stale
from .tables import SUMMARY_ID, damaged_tables, mixed_profiles

#: The results folder's run lock, held by `make reproduce` (scripts/locked.py) and by this command.
LOCK_FILE = ".lock"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m vrex_lib.report",
                                 description="Rebuild results/REPORT.md, results/report.html and "
                                             "results/tables/summary.csv from results/tables and results/figures")
    ap.add_argument("--results", default=None, help="results folder (default: ./results)")
    ap.add_argument("--notebooks", default=None, help="notebook folder (default: <repo>/notebooks)")
    ap.add_argument("--allow-missing", action="store_true",
                    help="exit 0 even when some notebooks' tables are absent (they are still listed)")
    ap.add_argument("--mark-stale", metavar="WHY", default=None,
                    help="only put a 'stale' banner on an existing REPORT.md / report.html (make reproduce does "
                         "this before rebuilding anything)")
    ap.add_argument("--force", action="store_true",
                    help="overwrite REPORT.md, report.html and tables/summary.csv even if they are not the report's")
    return ap


def print_counts(summary: pd.DataFrame, out: TextIO | None = None) -> None:
    """The verdict totals per distinct claim with the rows in parentheses, then the FAIL and NOT RUN counts per
    cause the same way (what `make reproduce` prints at its end; the README and REPORT count alike) to ``out``."""
    out = out or sys.stdout
    print(f"verdicts per distinct claim: {totals_line(summary, 'claims')}", file=out)
    print(f"  (rows, measured-workload twins and repeats included: {totals_line(summary, 'rows')})", file=out)
    for verdict in (FAIL, MISSING):
        sub = summary[(summary["verdict"] == verdict) & (summary["rows"] > 0)]
        order = {c: i for i, c in enumerate([*CAUSES, UNEXPLAINED])}
        by = sorted(zip(sub["cause"], sub["claims"], sub["rows"]), key=lambda cr: order.get(cr[0], len(order)))
        print(f"  {verdict} by cause, claims (rows): " + (", ".join(f"{c} {int(n)} ({int(r)})" for c, n, r in by)
                                                          or "none"), file=out)


def _incomplete(results: Path, notebooks: str | None) -> list[str]:
    lines = [f"  notebooks/{nb}: {', '.join(ids)}" for nb, ids in manifest.missing_tables(results, notebooks).items()]
    lines += [f"  notebooks/{nb}: figures {', '.join(ids)} absent"
              for nb, ids in manifest.missing_figures(results, notebooks).items()]
    lines += [f"  {f}: the last run of this notebook failed"
              for f in sorted((results / "executed").glob("*.FAILED.ipynb"))]
    lines += [f"  {results / 'tables' / name}: {why}" for name, why in damaged_tables(results).items()]
    lines += [f"  {results / 'executed' / nb[:-6]}.manifest.json: {why}"
              for nb, why in manifest.bad_manifests(results, notebooks).items()]
    lines += [f"  profile {p} produced {', '.join(ts)} (tables of several profiles are mixed)"
              for p, ts in mixed_profiles(results).items()]
    lines += [f"  notebooks/{nb}: stale ({why.replace('`', '')})"
              for nb, why in stale.stale_notebooks(results, notebooks).items()]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Write the report; exit 1 (after writing it) when the results are incomplete, unless --allow-missing."""
    args = _parser().parse_args(argv)
    if args.results and not Path(args.results).is_dir():
        what = "is not a folder" if Path(args.results).exists() else "does not exist"
        print(f"python -m vrex_lib.report: error: --results {args.results} {what}: no results to report; pass the "
              "folder `make reproduce` wrote (RESULTS=...), or run it first", file=sys.stderr)
        return 2
    try:
        results = results_dir(args.results)
        # one writer per results folder: not while a `make reproduce` there is rebuilding (docs/DECISIONS.md D325)
        with _io.run_lock(results / LOCK_FILE, "python -m vrex_lib.report (make report)"):
            if args.mark_stale is not None:
                marked = mark_stale(results, args.mark_stale)
                print(f"marked stale: {', '.join(map(str, marked))}" if marked else "no report to mark stale")
                return 0
            path = build_report(results, notebook_dir=args.notebooks, force=args.force)
            missing = _incomplete(results, args.notebooks)
    except _io.LockHeld as err:
        print(f"python -m vrex_lib.report: {err}; it rewrites the report when it ends (nothing was changed)",
              file=sys.stderr)
        return 75  # EX_TEMPFAIL, as scripts/locked.py
    except (OSError, ValueError) as err:
        if (isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
                and not str(err).startswith("cannot write")):
            err = _io.write_error(err.filename or args.results or results_dir(None), err)  # a bare "[Errno 28]"
        print(f"python -m vrex_lib.report: error: {err}", file=sys.stderr)
        return 2
    summary = pd.read_csv(results / "tables" / f"{SUMMARY_ID}.csv", keep_default_na=False)
    print(f"wrote {path} and {path.parent / REPORT_HTML}")
    print(f"per cause: {results / 'tables' / SUMMARY_ID}.csv")
    print_counts(summary)
    n_unexplained = int(summary[summary["cause"] == UNEXPLAINED]["rows"].sum())
    if n_unexplained:
        print(f"report: {n_unexplained} FAIL / NOT RUN rows name no cause (listed under 'Unexplained' in {path})",
              file=sys.stderr)
    if missing:
        print(f"report: INCOMPLETE -- {path} lacks what these notebooks write:", file=sys.stderr)
        print("\n".join(missing), file=sys.stderr)
        print("  run `make reproduce` to produce them" + ("" if args.allow_missing else
              " (or `python -m vrex_lib.report --allow-missing` to accept a partial report)"), file=sys.stderr)
        return 0 if args.allow_missing else 1
    return 0
