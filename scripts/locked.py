"""Run a command while holding an exclusive lock on a file; refuse at once if another holder has it.

    python scripts/locked.py results/.lock "make reproduce" [--interrupted NOTE] -- make _reproduce ...

Used by `make reproduce` so that two runs on one results folder cannot interleave (one `mv` failing, JSONL
lines appended twice) and both report "done". The lock is released when the command ends, however it ends. The
command learns which lock it runs under from ``$VREX_RUN_LOCK`` (``vrex_lib._io.run_lock``: the report it builds
takes no second lock).

Ctrl-C is an interrupt, not a failure (docs/DECISIONS.md D328): the command's stderr is passed through until the
interrupt, and after it nothing of it is shown (make's "Interrupt" lines, papermill's and ZMQ's tracebacks);
one line says the run was interrupted (and ``NOTE``), and this script exits 0 so that make, interrupted itself,
ends on the signal without an "Error" line.
"""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading

#: What the command is told about the lock it runs under (vrex_lib._io.RUN_LOCK_ENV).
RUN_LOCK_ENV = "VREX_RUN_LOCK"


def _forward(stream, interrupted: list) -> None:
    """Copy the command's stderr to ours, line by line, until an interrupt; then drop the rest."""
    for line in iter(stream.readline, b""):
        if not interrupted:
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()
    stream.close()


def run(cmd: list[str], lock: str, what: str, note: str) -> int:
    """Run ``cmd`` (the lock is held); its exit status, or 0 after an interrupt that ended it."""
    interrupted: list[int] = []
    signal.signal(signal.SIGINT, lambda sig, frame: interrupted.append(sig))
    try:
        p = subprocess.Popen(cmd, env={**os.environ, RUN_LOCK_ENV: os.path.realpath(lock)}, stderr=subprocess.PIPE)
    except OSError as err:
        print(f"{what}: cannot run {cmd[0]} ({err.strerror or err}) (nothing was run)", file=sys.stderr)
        return 127
    t = threading.Thread(target=_forward, args=(p.stderr, interrupted), daemon=True)
    t.start()
    rc = p.wait()
    t.join(timeout=5)
    if interrupted and rc != 0:
        print(f"{what}: interrupted{'; ' + note if note else ''}", file=sys.stderr, flush=True)
        return 0
    return rc


def main(argv: list[str]) -> int:
    note = ""
    if len(argv) >= 4 and argv[2] == "--interrupted":
        note, argv = argv[3], argv[:2] + argv[4:]
    if len(argv) < 4 or argv[2] != "--":
        print("usage: locked.py LOCKFILE WHAT [--interrupted NOTE] -- COMMAND ...", file=sys.stderr)
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
        return run(cmd, lock, what, note)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
