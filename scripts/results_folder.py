"""Guard the results folder that `make reproduce` writes and `make clean` empties (docs/DECISIONS.md D170).

    python scripts/results_folder.py prepare RESULTS   # make reproduce: refuse a bad folder, create it, mark it
    python scripts/results_folder.py clean RESULTS     # make clean: empty it only if it is a results folder

A results folder is the repository's own ``results/`` (or a folder below it), or a folder holding the marker
file :data:`MARKER`, which ``prepare`` writes. ``prepare`` marks only a folder that is new, empty, already
marked or under ``results/``, so a marker never lands in a folder holding anything else (a home folder, the
checkout, ``notebooks/``), and ``clean`` therefore never deletes what the project did not write. Never a
results folder: an empty name, a name with whitespace (make cannot name its files), ``/``, the repository
root or any folder above it, anything inside ``.git``, an existing file. Every refusal is one line on stderr
naming RESULTS and the fix, exit 2, before anything is written or deleted.
"""
from __future__ import annotations

import fcntl
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Written by ``prepare`` into every results folder of `make reproduce`; ``clean`` keeps it.
MARKER = ".vrex-results"
MARKER_TEXT = ("This folder holds results written by `make reproduce` of vrex; `make clean RESULTS=<this folder>` "
               "empties it (keeping README.md files and this marker).\n")
#: Kept by ``clean`` wherever they are (the repository's results/README.md is tracked).
KEEP_NAMES = ("README.md",)


class FolderError(ValueError):
    """RESULTS names a folder this project must not write into or delete; the message is the line to print."""


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _refusal(raw: str) -> tuple[Path, str | None]:
    """(resolved folder, reason it can never be a results folder or None)."""
    if not raw.strip():
        return Path(), "is empty"
    if any(c.isspace() for c in raw):
        return Path(raw), "contains whitespace, which make cannot name files with"
    real = Path(os.path.realpath(os.path.expanduser(raw)))
    if real == Path(real.anchor):
        return real, "is the file-system root"
    if _inside(REPO, real):
        what = "the repository root" if real == REPO else f"a folder holding the repository {REPO}"
        return real, f"is {what}"
    if _inside(real, REPO / ".git"):
        return real, "is inside the repository's .git"
    if real.exists() and not real.is_dir():
        return real, "is an existing file, not a folder"
    return real, None


def is_results_folder(real: Path) -> bool:
    """The repository's results/ (or below it), or a folder that :func:`prepare` marked."""
    return _inside(real, REPO / "results") or (real / MARKER).is_file()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def prepare(raw: str) -> Path:
    """Create and mark the results folder ``raw``; raise :class:`FolderError` (one line) if it cannot be one."""
    real, why = _refusal(raw)
    if why:
        raise FolderError(f"make: RESULTS={raw} {why}; give a results folder, e.g. RESULTS=results (the default) "
                          "or a new folder outside the checkout (nothing was run)")
    if real.is_dir() and not is_results_folder(real) and any(real.iterdir()):
        raise FolderError(f"make: RESULTS={raw} ({real}) already holds files and is not a vrex results folder (no "
                          f"{MARKER} marker): use a new or empty folder; if it does hold this project's results, "
                          f"mark it with `touch {real / MARKER}` (nothing was run)")
    try:
        real.mkdir(parents=True, exist_ok=True)
        if not (real / MARKER).is_file():
            fd, tmp = tempfile.mkstemp(dir=real, prefix=f".{MARKER}.")
            with os.fdopen(fd, "w") as f:
                f.write(MARKER_TEXT)
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, real / MARKER)
        probe_fd, probe = tempfile.mkstemp(dir=real, prefix=".write-probe.")
        os.close(probe_fd)
        os.unlink(probe)
    except OSError as err:
        raise FolderError(f"make: RESULTS={raw} ({real}) cannot be written ({err.strerror or err}): choose a folder "
                          "you can write, e.g. RESULTS=$HOME/vrex-results, or fix its permissions (nothing was run)"
                          ) from None
    return real


def clean(raw: str) -> int:
    """Empty the results folder ``raw`` (README.md files and the marker stay); returns the entries deleted."""
    real, why = _refusal(raw)
    if why:
        raise FolderError(f"make clean: RESULTS={raw} {why}; nothing was deleted")
    if not real.exists():
        return 0
    if not is_results_folder(real):
        raise FolderError(f"make clean: RESULTS={raw} ({real}) is not a vrex results folder (neither the "
                          f"repository's results/ nor marked with {MARKER} by `make reproduce`); nothing was deleted")
    _refuse_if_running(raw, real)
    n = 0
    for top, dirs, files in os.walk(real, topdown=False):
        here = Path(top)
        for name in files:
            if name in KEEP_NAMES or (here == real and name == MARKER):
                continue
            (here / name).unlink()
            n += 1
        for name in dirs:
            d = here / name
            if d.is_symlink():  # os.walk lists a link to a folder among dirs without entering it: drop the link
                d.unlink()
                n += 1
            elif not any(d.iterdir()):
                d.rmdir()
                n += 1
    return n


def _refuse_if_running(raw: str, real: Path) -> None:
    """A `make reproduce` holding ``RESULTS/.lock`` (scripts/locked.py) is still writing there."""
    lock = real / ".lock"
    if not lock.is_file():
        return
    try:
        with open(lock) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = f.read().strip() or "another process"
                raise FolderError(f"make clean: {holder} is running on RESULTS={raw}; wait for it to finish "
                                  "(nothing was deleted)") from None
    except OSError:
        return  # an unreadable lock file holds no lock this process could see


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("prepare", "clean"):
        print("usage: results_folder.py prepare|clean RESULTS", file=sys.stderr)
        return 2
    try:
        if argv[0] == "prepare":
            prepare(argv[1])
        else:
            print(f"clean: {clean(argv[1])} entries deleted under {argv[1]}")
    except FolderError as err:
        print(err, file=sys.stderr)
        return 2
    except OSError as err:
        print(f"make {argv[0]}: RESULTS={argv[1]}: {err.strerror or err} on {err.filename}; fix its permissions "
              "and rerun", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
