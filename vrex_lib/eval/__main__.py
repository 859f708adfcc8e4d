"""``python -m vrex_lib.eval``: see :mod:`vrex_lib.eval.cli`."""
from .cli import main

raise SystemExit(main())
