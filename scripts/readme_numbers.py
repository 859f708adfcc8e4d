"""Regenerate the README's numbers from a results folder, or check that they still match it.

    python scripts/readme_numbers.py [--results results] [--readme README.md] [--check]

Writes the blocks of :mod:`vrex_lib.report.readme` (the verdict counts per distinct claim, the headline table, each
notebook's wall time) between their marker comments in the README (an atomic rewrite); ``--check`` changes nothing
and exits 1 naming each block that drifted from the results. Exit 2 with one line naming the flag or file and the
fix on bad input.
"""
import sys

from vrex_lib.report.readme import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
