"""The README's numbers, generated from a results folder (issue 42: one count everywhere).

The README holds three generated blocks between marker comments, ``<!-- readme:NAME -->`` ... ``<!-- /readme:NAME
-->``: ``counts`` (the verdict totals per distinct claim, rows in parentheses -- what REPORT.md, summary.csv and the
console of ``make reproduce`` say), ``headline`` (the headline claims with both workload columns, their verdicts
and causes, as REPORT.md's first table) and ``times`` (each executed notebook's wall time, from papermill's record).
``scripts/readme_numbers.py`` (this module's :func:`main`) writes them; :func:`drift` says which block no longer matches a results folder.

    blocks = generate(Path("results"))
    text = apply(Path("README.md").read_text(), blocks)
    drift(Path("README.md").read_text(), blocks)        # [] when the README matches
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from ..config import REPO_ROOT
from . import content
from .tables import collect_tables

#: The generated blocks, in README order.
BLOCKS: tuple[str, ...] = ("counts", "headline", "times")
_LINK = re.compile(r"\s*\[\[\d+\]\]\(#note-\d+\)")


def _marks(name: str) -> tuple[str, str]:
    return f"<!-- readme:{name} -->", f"<!-- /readme:{name} -->"


def counts_block(results: Path) -> str:
    """The verdict totals per distinct claim with the FAIL / NOT RUN causes, then the rows."""
    s = content.summary_frame(collect_tables(results))
    return (f"Per distinct claim: {content.totals_line(s, 'claims')}.\n"
            f"(Rows, measured-workload twins and repeats included: {content.totals_line(s, 'rows')}.)")


def headline_block(results: Path) -> str:
    """REPORT.md's headline table with the note links dropped (the README has no cause details)."""
    lines = ["| claim | paper | paper-stated workload | verdict | measured workload | verdict | cause of a FAIL |",
             "|---|---|---|---|---|---|---|"]
    for g in content.headline(collect_tables(results)):
        lines.append(f"| **{g['name']}** | | | | | | |")
        for r in g["rows"]:
            cause = _LINK.sub("", r["cause"]).strip() or "—"
            lines.append(f"| {r['label']} | {r['paper']} | {r['ours']} | {r['verdict']} | {r['measured'] or ''} | "
                         f"{r['measured_verdict'] or ''} | {cause} |")
    return "\n".join(lines)


def times_block(results: Path) -> str:
    """Each executed notebook's wall time (papermill's ``metadata.papermill.duration``), in run order."""
    rows = ["| notebook | wall time |", "|---|---|"]
    for nb in sorted((results / "executed").glob("[0-9]*.ipynb")):
        if nb.name.endswith(".FAILED.ipynb"):
            continue
        try:
            dur = json.loads(nb.read_text()).get("metadata", {}).get("papermill", {}).get("duration")
        except (OSError, ValueError):
            dur = None
        rows.append(f"| `{nb.stem}` | {'–' if dur is None else f'{float(dur):.0f} s'} |")
    return "\n".join(rows)


def generate(results: Path) -> dict[str, str]:
    """{block name: its text} from the results folder ``results``."""
    results = Path(results)
    if not (results / "tables").is_dir():
        raise ValueError(f"{results} has no tables/ folder: pass the results folder `make reproduce` wrote")
    return dict(counts=counts_block(results), headline=headline_block(results), times=times_block(results))


def _span(text: str, name: str) -> tuple[int, int]:
    start, end = _marks(name)
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        raise ValueError(f"the README has no '{start}' ... '{end}' block: add the two marker lines where the "
                         f"{name} belong")
    return i + len(start), j


def apply(text: str, blocks: dict[str, str]) -> str:
    """``text`` with each block's content between its markers replaced."""
    for name, body in blocks.items():
        i, j = _span(text, name)
        text = text[:i] + "\n" + body.strip() + "\n" + text[j:]
    return text


def drift(text: str, blocks: dict[str, str]) -> list[str]:
    """The names of the blocks whose content differs from ``blocks``."""
    out = []
    for name, body in blocks.items():
        i, j = _span(text, name)
        if text[i:j].strip() != body.strip():
            out.append(name)
    return out


def check_line(results: Path, readme: Path | None = None) -> str:
    """One sentence: whether the README's counts and headline blocks match the results folder ``results`` (the
    times block is left out: a run still in progress has not timed its last notebook)."""
    readme = Path(readme) if readme is not None else REPO_ROOT / "README.md"
    blocks = {k: v for k, v in generate(Path(results)).items() if k != "times"}
    bad = drift(readme.read_text(), blocks)
    if not bad:
        return f"{readme.name}'s {' and '.join(blocks)} blocks match this run ({results})"
    return (f"{readme.name}'s {', '.join(bad)} block(s) differ from this run ({results}): the README quotes the "
            f"default profile's last full run; `python scripts/readme_numbers.py --results {results}` rewrites them")


__all__ = ["BLOCKS", "apply", "check_line", "counts_block", "drift", "generate", "headline_block", "times_block"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/readme_numbers.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results", help="the results folder `make reproduce` wrote")
    ap.add_argument("--readme", default="README.md", help="the README to rewrite or check")
    ap.add_argument("--check", action="store_true", help="only check; exit 1 when a block drifted")
    a = ap.parse_args(argv)

    path = Path(a.readme)
    if not path.is_file():
        print(f"readme_numbers: error: --readme {path} does not exist: pass the README to update", file=sys.stderr)
        return 2
    try:
        blocks = generate(Path(a.results))
        text = path.read_text()
        if a.check:
            bad = drift(text, blocks)
            if bad:
                print(f"readme_numbers: {path} drifted from {a.results} in: {', '.join(bad)}; run "
                      f"`python scripts/readme_numbers.py --results {a.results}` to regenerate", file=sys.stderr)
                return 1
            print(f"{path} matches {a.results}")
            return 0
        new = apply(text, blocks)
    except ValueError as err:
        print(f"readme_numbers: error: {err}", file=sys.stderr)
        return 2
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(new)
    os.replace(tmp, path)
    print(f"wrote {', '.join(blocks)} into {path} from {a.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
