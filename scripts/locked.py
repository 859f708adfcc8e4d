"""Run a command while holding an exclusive lock on a file; refuse at once if another holder has it.

    python scripts/locked.py results/.lock "make reproduce" -- make _reproduce ...

Used by `make reproduce` so that two runs on one results folder cannot interleave (one `mv` failing, JSONL
lines appended twice) and both report "done". The lock is released when the command ends, however it ends.
"""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: locked.py LOCKFILE WHAT -- COMMAND ...", file=sys.stderr)
        return 2
    lock, what, cmd = argv[0], argv[1], argv[3:]
    try:
        os.makedirs(os.path.dirname(os.path.abspath(lock)), exist_ok=True)
        f = open(lock, "a+")
    except OSError as err:
        print(f"{what}: cannot create the lock file {lock} ({err.strerror or err}): its folder must be writable; "
              "choose another RESULTS=... or fix its permissions (nothing was run)", file=sys.stderr)
        return 73  # EX_CANTCREAT
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            print(f"{what}: refused -- {holder} is already running on this results folder (lock {lock}). "
                  "Wait for it to finish, or use another RESULTS=...", file=sys.stderr)
            return 75  # EX_TEMPFAIL
        f.seek(0)
        f.truncate()
        f.write(f"{what} (pid {os.getpid()})\n")
        f.flush()
        return subprocess.call(cmd)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
