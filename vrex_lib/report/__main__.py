"""``python -m vrex_lib.report``: rebuild results/REPORT.md and results/report.html (see :mod:`.cli`)."""
from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
