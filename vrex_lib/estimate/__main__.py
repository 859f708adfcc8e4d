"""``python -m vrex_lib.estimate cacti check|dir|rebuild``: is CACTI usable here; where it lives; rebuild it."""
from __future__ import annotations

import sys

from . import cacti


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "cacti":
        print("usage: python -m vrex_lib.estimate cacti check|dir|rebuild", file=sys.stderr)
        return 2
    return cacti.main(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
