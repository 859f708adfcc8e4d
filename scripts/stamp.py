"""Rewrite one of make's stamps only when what it records changed (docs/DECISIONS.md D71, D441).

    python scripts/stamp.py STAMP MESSAGE [--param-file NAME DIR] [--stdin] [--dry | --check] -- TEXT

The stamp's content is TEXT, then stdin when ``--stdin``, then -- for ``--param-file NAME DIR`` when TEXT holds
``-p NAME VALUE`` (a papermill argument) -- the SHA-256 of the file VALUE (relative to DIR, the notebooks' working
folder; "missing" when absent): a workload file given by ``-p WORKLOAD_FILE`` joins the notebooks' parameters by
content. When the content differs from STAMP, MESSAGE is printed (if STAMP existed) and STAMP is rewritten
atomically. Under make's ``-n`` nothing may be written (docs/DECISIONS.md D441): ``--dry`` prints what a run would
rerun and writes nothing; ``--check`` prints ``changed`` when the stamp is not current, and nothing else (the
Makefile reads it while parsing, to show the stamp's dependents as rerunning). Exit status 0 (2: bad usage).
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from pathlib import Path


def content(text: str, param_files: list[tuple[str, str]], stdin: bool) -> str:
    out = text + "\n" if text else ""
    if stdin:
        out += sys.stdin.read()
    for name, folder in param_files:
        for v in re.findall(rf"(?:^|[\s=])(?:-p|--parameters)\s+{re.escape(name)}\s+(\S+)", text):
            p = Path(folder) / Path(v).expanduser()
            out += f"{name} {v} " + (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "missing") + "\n"
    return out


def write_atomic(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(data)
    mask = os.umask(0o022)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") < 2:
        print("usage: " + __doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    opts, text = argv[:argv.index("--")], " ".join(argv[argv.index("--") + 1:])
    stamp, message, rest = Path(opts[0]), opts[1], opts[2:]
    pf = [(rest[i + 1], rest[i + 2]) for i, a in enumerate(rest) if a == "--param-file" and i + 2 < len(rest)]
    new = content(text, pf, "--stdin" in rest)
    old = stamp.read_text() if stamp.is_file() else None
    if old == new:
        return 0
    if "--check" in rest:
        print("changed")
    elif "--dry" in rest:
        print(f"(make -n: nothing written) {message}" if old is not None else
              f"(make -n: nothing written) {stamp} would be written; what depends on it runs")
    else:
        if old is not None:
            print(message)
        write_atomic(stamp, new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
