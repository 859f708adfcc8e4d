"""Atomic file writes that honour the umask: readers see the old file or the whole new one, never a torn one.

    write_bytes(path, data); write_text(path, text); write_json(path, obj)

``tempfile.mkstemp`` creates its file with mode 0600 whatever the umask; a result shared with a group (or
read by a web server) would then be unreadable. The temp file is therefore chmod-ed to ``0666 & ~umask``
-- the mode ``open(path, "w")`` would give -- before it replaces ``path``.
"""
from __future__ import annotations

import errno
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

_UMASK_LOCK = threading.Lock()


def umask_mode(base: int = 0o666) -> int:
    """``base`` with the process umask applied (what a plain ``open(..., 'w')`` creates)."""
    with _UMASK_LOCK:  # os.umask can only be read by setting it
        mask = os.umask(0o022)
        os.umask(mask)
    return base & ~mask


def write_bytes(path: str | os.PathLike, data: bytes, *, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, fsync, rename); returns the path."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as err:
        raise type(err)(err.errno, f"cannot write {p}: {err.strerror or err} in {p.parent}; choose a writable "
                        "folder or fix its permissions") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.chmod(tmp, umask_mode())
        os.replace(tmp, p)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise write_error(p, err) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def write_error(path: str | os.PathLike, err: OSError) -> OSError:
    """``err`` (raised while writing ``path``) as an OSError of the same errno whose message names the file and the
    fix: the bare ``[Errno 28] No space left on device`` says neither. The file itself is untouched (the write was
    atomic) or, for an append, ends at most in a torn last line."""
    fixes = {errno.ENOSPC: "free space on that disk (or choose another folder) and run again",
             errno.EDQUOT: "free space within your disk quota (or choose another folder) and run again",
             errno.EROFS: "that file system is read-only: choose a writable folder",
             errno.EACCES: "fix its permissions or choose a writable folder",
             errno.EPERM: "fix its permissions or choose a writable folder"}
    fix = fixes.get(err.errno, "check the disk and the folder, then run again")
    out = type(err)(f"cannot write {path}: {err.strerror or err}; {fix}")
    out.errno = err.errno  # kept for callers that test it (str(out) stays the message)
    return out


def write_text(path: str | os.PathLike, text: str, *, fsync: bool = True) -> Path:
    """Write UTF-8 ``text`` atomically (see :func:`write_bytes`)."""
    return write_bytes(path, text.encode(), fsync=fsync)  # str.encode: UTF-8


def _json_default(o: Any):
    if hasattr(o, "tolist"):  # numpy scalars and arrays
        return o.tolist()
    return str(o)


def write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 1, fsync: bool = True) -> Path:
    """Write ``obj`` as JSON atomically; numpy values become lists/numbers, anything else its ``str``."""
    return write_text(path, json.dumps(obj, indent=indent, default=_json_default) + "\n", fsync=fsync)


def check_writable_dir(folder: str | os.PathLike, what: str) -> Path:
    """Create ``folder`` if needed and prove a file can be created in it; else a PermissionError naming it.

    ``what`` names the flag or parameter the folder came from (e.g. ``--out``), so the message says what to fix.
    """
    d = Path(folder)
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".vrex_write_test.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as err:
        blocker = next((a for a in (d, *d.parents) if a.exists() and not a.is_dir()), None)
        if blocker is not None:  # e.g. --out results/README.md/x.json: mkdir says only "File exists"
            raise PermissionError(f"{what}: cannot write in {d}: {blocker} is a file, not a folder; choose "
                                  "another folder") from None
        raise PermissionError(f"{what}: cannot write in {d} ({err.strerror or err}); choose a writable folder "
                              "or fix its permissions") from None
    return d
