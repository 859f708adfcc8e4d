"""Refuse papermill parameters that no notebook declares (a typo would otherwise be ignored with a warning).

    python scripts/check_params.py NOTEBOOK_DIR [papermill arguments ...]

Reads each notebook's cell tagged ``parameters`` and checks every ``-p/--parameters NAME VALUE`` and
``-r/--parameters_raw NAME VALUE`` name against them. Exit 2 with the list of known parameters on a mismatch.
Used by `make reproduce` before it records the parameters (docs/DECISIONS.md D71).
"""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path


def declared(nb_dir: Path) -> dict[str, list[str]]:
    """Parameter name -> notebooks declaring it."""
    out: dict[str, list[str]] = {}
    for nb in sorted(nb_dir.glob("[0-9][0-9]_*.ipynb")):
        for c in json.loads(nb.read_text()).get("cells", []):
            if "parameters" in c.get("metadata", {}).get("tags", []):
                for node in ast.parse("".join(c["source"])).body:
                    for t in getattr(node, "targets", [getattr(node, "target", None)]):
                        if isinstance(t, ast.Name):
                            out.setdefault(t.id, []).append(nb.name)
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: check_params.py NOTEBOOK_DIR [papermill arguments ...]", file=sys.stderr)
        return 2
    known = declared(Path(argv[0]))
    args, bad, i = argv[1:], [], 0
    while i < len(args):
        if args[i] in ("-p", "--parameters", "-r", "--parameters_raw"):
            if i + 2 >= len(args):
                print(f"PAPERMILL_ARGS: {args[i]} needs a NAME and a VALUE", file=sys.stderr)
                return 2
            if args[i + 1] not in known:
                bad.append(args[i + 1])
            i += 3
        else:
            i += 1
    if bad:
        print(f"PAPERMILL_ARGS: no notebook in {argv[0]} has the parameter(s) {', '.join(bad)}; the notebooks' "
              f"parameters are {', '.join(sorted(known))} (nothing was run or changed)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
