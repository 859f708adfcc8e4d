"""Regenerate the README's numbers from a results folder, or check that they still match it.

    python scripts/readme_numbers.py [--results results] [--readme README.md] [--check]

Writes the blocks of :mod:`vrex_lib.report.readme` (the verdict counts per distinct claim, the headline table, each
notebook's wall time) between their marker comments in the README (an atomic rewrite); ``--check`` changes nothing
and exits 1 naming each block that drifted from the results. Exit 2 with one line naming the flag or file and the
fix on bad input.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/readme_numbers.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results", help="the results folder `make reproduce` wrote")
    ap.add_argument("--readme", default="README.md", help="the README to rewrite or check")
    ap.add_argument("--check", action="store_true", help="only check; exit 1 when a block drifted")
    a = ap.parse_args(argv)
    from vrex_lib.report import readme

    path = Path(a.readme)
    if not path.is_file():
        print(f"readme_numbers: error: --readme {path} does not exist: pass the README to update", file=sys.stderr)
        return 2
    try:
        blocks = readme.generate(Path(a.results))
        text = path.read_text()
        if a.check:
            bad = readme.drift(text, blocks)
            if bad:
                print(f"readme_numbers: {path} drifted from {a.results} in: {', '.join(bad)}; run "
                      f"`python scripts/readme_numbers.py --results {a.results}` to regenerate", file=sys.stderr)
                return 1
            print(f"{path} matches {a.results}")
            return 0
        new = readme.apply(text, blocks)
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
