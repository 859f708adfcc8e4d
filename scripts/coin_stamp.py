"""Print what the COIN-reading notebooks read besides their parameters, so `make reproduce` reruns them when it
changes (docs/DECISIONS.md D71).

    python scripts/coin_stamp.py PROFILE [papermill arguments ...]   # -> stdout, two lines

The COIN folder is the one notebook 01 and 03 use: ``vrex_lib.coin.dataset_paths(PROFILE, COIN_ROOT)``, with
``COIN_ROOT`` as papermill will pass it. The lines are the SHA-256 of ``COIN.json``'s bytes and the SHA-256 of the
listing of its videos folder (every entry's name, size and modification time in ns, sorted by name): a new,
removed, replaced or touched video changes it, without reading the videos (COIN holds hundreds of hours). A folder
that cannot be resolved (e.g. ``full`` without ``COIN_ROOT``) prints its error as the stamp: the notebooks then
fail with their own message.
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_params import ParamError, final_values  # noqa: E402  (a sibling script, not a package)

from vrex_lib.coin import dataset_paths  # noqa: E402


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def listing_sha256(folder: Path) -> tuple[int, str]:
    """(entries, SHA-256 of 'name<TAB>size<TAB>mtime_ns' lines sorted by name) of ``folder``, not recursive."""
    rows = []
    with os.scandir(folder) as it:
        for e in it:
            st = e.stat()
            rows.append(f"{e.name}\t{st.st_size}\t{st.st_mtime_ns}")
    rows.sort()
    return len(rows), hashlib.sha256("\n".join(rows).encode("utf-8", "surrogateescape")).hexdigest()


def stamp(profile: str, args: list[str]) -> str:
    root = final_values(args).get("COIN_ROOT") or None
    try:
        js, videos = dataset_paths(profile, root)
        n, listing = listing_sha256(videos)
        return f"COIN.json {js} sha256={file_sha256(js)}\nvideos {videos} entries={n} listing-sha256={listing}\n"
    except (OSError, ValueError) as err:
        return f"COIN data unavailable ({type(err).__name__}: {err})\n"


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: coin_stamp.py PROFILE [papermill arguments ...]", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(stamp(argv[0], argv[1:]))
    except ParamError as err:
        print(err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
