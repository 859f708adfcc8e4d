"""Write the outputs of an executed notebook without this machine's absolute paths.

    python scripts/scrub_outputs.py EXECUTED.ipynb RESULTS_FOLDER

`make reproduce` runs it on every executed copy before storing it (docs/DECISIONS.md D329): the outputs (printed
text, tracebacks, reprs) name files as the library built them -- absolute, from ``RESULTS_DIR`` and the checkout --
which would carry the user's folders into a notebook meant to be shared. Every path under the results folder is
written ``RESULTS_DIR/...`` (the notebook parameter it came from), every path under the repository relative to it,
and the home folder ``~``. Sources (the cells and the injected parameters) are kept as they ran.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def replacements(results: str) -> list[tuple[str, str]]:
    """(absolute prefix, what it becomes), longest first, for the results folder, the repository and home."""
    pairs: dict[str, str] = {}
    for form in {os.path.abspath(results), os.path.realpath(results)}:
        rel = os.path.relpath(form, REPO) if Path(os.path.realpath(form)).is_relative_to(REPO) else None
        pairs[form] = rel if rel and not rel.startswith("..") else "RESULTS_DIR"
    for form in {str(REPO), os.path.abspath(REPO)}:
        pairs.setdefault(form, ".")
    home = os.path.expanduser("~")
    if home not in ("", "/", "~"):
        pairs.setdefault(home, "~")
    return sorted(pairs.items(), key=lambda kv: -len(kv[0]))


def scrub_text(text: str, pairs: list[tuple[str, str]]) -> str:
    """``text`` with each absolute prefix replaced where it is a whole path component ('/root' not in '/rootfs')."""
    for old, new in pairs:
        text = text.replace(old + "/", "" if new == "." else new + "/")
        text = re.sub(re.escape(old) + r"(?![\w.-])", new, text)
    return text


def _scrub(x, pairs):
    if isinstance(x, str):
        return scrub_text(x, pairs)
    if isinstance(x, list):
        return [_scrub(v, pairs) for v in x]
    if isinstance(x, dict):
        return {k: _scrub(v, pairs) for k, v in x.items()}
    return x


def scrub_notebook(nb: dict, results: str) -> dict:
    """``nb`` with every output's text (streams, text/* data, tracebacks) free of the absolute prefixes."""
    pairs = replacements(results)
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            for key in ("text", "traceback", "evalue"):
                if key in out:
                    out[key] = _scrub(out[key], pairs)
            data = out.get("data", {})
            for mime in [m for m in data if m.startswith("text/")]:
                data[mime] = _scrub(data[mime], pairs)
    return nb


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: scrub_outputs.py EXECUTED.ipynb RESULTS_FOLDER", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        print(f"scrub_outputs: {path}: not a readable notebook ({err})", file=sys.stderr)
        return 2
    tmp = path.with_name(path.name + ".scrub")
    tmp.write_text(json.dumps(scrub_notebook(nb, argv[1]), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
