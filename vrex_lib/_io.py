"""Atomic file writes that honour the umask: readers see the old file or the whole new one, never a torn one.

    write_bytes(path, data); write_text(path, text); write_json(path, obj)
    check_output(path, kind, flag="--out", requested=..., force=..., replace=...)   # before any work
    with run_lock(results / ".lock", "make report"): ...                              # one writer per folder
    reuse_key(model=..., code=[entry modules], inputs=[files], args=...)          # the one key of every cache

``tempfile.mkstemp`` creates its file with mode 0600 whatever the umask; a result shared with a group (or
read by a web server) would then be unreadable. The temp file is therefore chmod-ed to ``0666 & ~umask``
-- the mode ``open(path, "w")`` would give -- before it replaces ``path``.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import errno
import functools
import hashlib
import fcntl
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
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


# ---------------------------------------------------------------------------------------------------------------
# What a command may overwrite (docs/DECISIONS.md D320)
# ---------------------------------------------------------------------------------------------------------------
class OutputRefused(ValueError):
    """An output path a command must not write; the message is the one line to print (flag, file, fix)."""


def _no_configuration(doc: Any) -> dict:
    return {}


@dataclass(frozen=True)
class OutputKind:
    """What a command writes at one path, for :func:`check_output`.

    name: what such a file is, in messages ("workload file"); holds: what it holds ("workload");
    read: ``path -> (document, '')`` or ``(None, why it is not one)``; configuration: the fields of a document
    that say what was requested (compared with the request); differ: ``(document, requested) -> [difference]``
    when the comparison is not field by field (default :func:`config_diff` of the configuration)."""

    name: str
    holds: str
    read: Callable[[Path], tuple[Any, str]]
    configuration: Callable[[Any], Mapping] = _no_configuration
    differ: Callable[[Any, Mapping], list[str]] | None = None

    def diff(self, doc: Any, requested: Mapping) -> list[str]:
        if self.differ is not None:
            return self.differ(doc, requested)
        return config_diff(self.configuration(doc), requested)


def config_diff(old: Mapping, new: Mapping, prefix: str = "") -> list[str]:
    """The fields two configurations disagree on, as ``"name <old> there, <new> now"``; fields absent from either
    side are left out, and two mappings are compared field by field (``"study.max_new_tokens 6 there, 4 now"``)."""
    out = []
    for k in new:
        if k not in old or old[k] == new[k]:
            continue
        if isinstance(old[k], Mapping) and isinstance(new[k], Mapping):
            out += config_diff(old[k], new[k], f"{prefix}{k}.") or [f"{prefix}{k} differs"]
        else:
            out.append(f"{prefix}{k} {old[k]!r} there, {new[k]!r} now")
    return out


def read_json_document(path: Path, schema: str | None = None, what: str = "") -> tuple[dict | None, str]:
    """(the JSON object at ``path``, '') or (None, why it is not one: unreadable, not JSON, not an object, another
    ``schema``); ``what`` names such a document in the reason ("workload document")."""
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        return None, f"cannot be read: {getattr(err, 'strerror', None) or err}"
    except json.JSONDecodeError as err:
        return None, f"not JSON: {err.msg} at line {err.lineno}"
    if not isinstance(d, dict):
        return None, f"a JSON {type(d).__name__}, not a {what or (schema or 'JSON') + ' document'}"
    if schema is not None and d.get("schema") != schema:
        return None, f"schema {d.get('schema')!r}, not {schema!r}"
    return d, ""


def json_kind(name: str, holds: str, schema: str,
              configuration: Callable[[Any], Mapping] = _no_configuration) -> OutputKind:
    """The :class:`OutputKind` of a JSON document carrying ``"schema": schema``."""
    return OutputKind(name, holds, lambda p: read_json_document(p, schema, name), configuration)


def check_output(path: str | os.PathLike, kind: OutputKind | None, *, flag: str, requested: Mapping | None = None,
                 force: bool = False, replace: bool = False, example: str | None = None) -> Any:
    """Refuse, before any work, a path a command must not write; returns the document already there when it may
    be reused or resumed (of ``kind`` and, if ``requested`` is given, of that configuration), else None.

    Refused (:class:`OutputRefused` naming ``flag``, the file and the fix): a folder, a FIFO or device, a file or
    folder that cannot be written; with a ``kind``, an existing file that is not one (unless ``force``) or one
    whose configuration differs from ``requested`` (unless ``replace`` or ``force``). ``example``: what to pass
    instead of a folder or a device, e.g. ``"--out results/x.json"``."""
    p = Path(path)
    eg = f", e.g. {example}" if example else ""
    if p.is_dir():
        raise OutputRefused(f"{flag} {p} is a folder; pass the path of a file{eg}")
    if p.exists() and not p.is_file():
        raise OutputRefused(f"{flag} {p} is not a regular file (a FIFO, a device or a socket); pass the path of "
                            f"a file{eg}")
    if p.is_file() and not os.access(p, os.W_OK):
        raise PermissionError(f"{flag} {p} exists and is not writable; fix its permissions or pass another {flag}")
    check_writable_dir(p.parent, flag)
    if kind is None or not p.exists() or force:
        return None
    doc, why = kind.read(p)
    if doc is None:
        raise OutputRefused(f"{flag} {p} exists and is not a {kind.name} ({why}); pass --force to overwrite it, "
                            f"or another {flag}")
    diff = kind.diff(doc, requested) if requested is not None else []
    if diff and not replace:
        raise OutputRefused(f"{flag} {p} holds the {kind.holds} of another configuration ({'; '.join(diff)}); "
                            f"pass --replace to replace it, or another {flag}")
    return None if diff else doc


# ---------------------------------------------------------------------------------------------------------------
# The run lock of a results folder (docs/DECISIONS.md D71, D325)
# ---------------------------------------------------------------------------------------------------------------
#: Set by scripts/locked.py for the command it runs: the lock file that command's ancestor already holds.
RUN_LOCK_ENV = "VREX_RUN_LOCK"


class LockHeld(RuntimeError):
    """Another process holds a results folder's run lock; the message names it and the fix."""


@contextlib.contextmanager
def run_lock(lock: str | os.PathLike, what: str) -> Iterator[None]:
    """Hold ``lock`` (``RESULTS/.lock``, the file ``make reproduce`` holds through scripts/locked.py) exclusively
    for the block, writing ``what`` into it; :class:`LockHeld` naming the holder if another process has it. A
    process whose ancestor holds this very lock (``$VREX_RUN_LOCK``, set by scripts/locked.py) runs as part of
    that holder's work. A folder where no lock file can be created (read-only) is left to the writes to report."""
    path = Path(lock)
    if os.environ.get(RUN_LOCK_ENV) == str(path.resolve()):
        yield
        return
    try:
        f = open(path, "a+")
    except OSError:
        yield
        return
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            raise LockHeld(f"refused: {holder} is running on this results folder (lock {path}); wait for it to "
                           "finish, or use another results folder") from None
        f.seek(0)
        f.truncate()
        f.write(f"{what} (pid {os.getpid()})\n")
        f.flush()
        try:
            yield
        finally:
            f.seek(0)
            f.truncate()


# ---------------------------------------------------------------------------------------------------------------
# The one rule for reuse (docs/DECISIONS.md D440): a cached or resumable result carries a key over everything that
# made it -- the model (full config, weight file contents), the code it ran, its input files' contents, arguments
# ---------------------------------------------------------------------------------------------------------------
_PKG = Path(__file__).resolve().parent
_DIGESTS: dict[tuple, str] = {}
_DIGEST_LOCK = threading.Lock()


#: Files at least this large (weights) have their digest remembered across processes in :func:`digest_cache_path`.
_PERSIST_BYTES = 16 << 20


def digest_cache_path() -> Path | None:
    """Where the digests of large files are remembered between runs: ``$VREX_DIGEST_CACHE`` (empty: nowhere), else
    ``$XDG_CACHE_HOME/vrex/file_sha256.json`` (``~/.cache`` by default)."""
    env = os.environ.get("VREX_DIGEST_CACHE")
    if env is not None:
        return Path(env) if env.strip() else None
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vrex" / "file_sha256.json"


def _persisted(key: str, value: str | None = None) -> str | None:
    """Read (or, with ``value``, add) one digest of the on-disk cache; any failure only costs a re-read."""
    path = digest_cache_path()
    if path is None:
        return None
    try:
        d = json.loads(path.read_text()) if path.is_file() else {}
        d = d if isinstance(d, dict) else {}
        if value is None:
            return d.get(key) if isinstance(d.get(key), str) else None
        d[key] = value
        write_json(path, d, indent=None, fsync=False)
    except (OSError, ValueError):
        return None
    return value


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of the whole file, remembered by (path, size, mtime, ctime, inode) -- for the process, and for large
    files (weights) across runs (:func:`digest_cache_path`): a weight file is read once, and any rewrite (even of the
    same size, or with its mtime set back: the ctime moves) is read again."""
    p = Path(path).resolve()
    st = p.stat()
    stamp = (str(p), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    key = "|".join(map(str, stamp))
    with _DIGEST_LOCK:
        hit = _DIGESTS.get(stamp)
    if hit is None and st.st_size >= _PERSIST_BYTES:
        hit = _persisted(key)
    if hit is not None:
        with _DIGEST_LOCK:
            _DIGESTS[stamp] = hit
        return hit
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for blk in iter(lambda: f.read(1 << 22), b""):
            h.update(blk)
    with _DIGEST_LOCK:
        _DIGESTS[stamp] = h.hexdigest()
    if st.st_size >= _PERSIST_BYTES:
        _persisted(key, h.hexdigest())
    return h.hexdigest()


def files_digest(paths: Iterable[str | os.PathLike]) -> dict[str, str]:
    """{name: SHA-256} of the files ``paths`` name; a folder stands for every visible file directly in it (a model
    folder: config, tokenizer, weights). Names are relative to each path's folder, so a moved copy keys the same."""
    out: dict[str, str] = {}
    for i, p in enumerate(Path(x).expanduser() for x in paths):
        files = [p] if not p.is_dir() else sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
        for f in files:
            out[f"{i}/{f.name}"] = file_sha256(f)
    return out


def _module_path(name: str) -> Path | None:
    """The source file of ``vrex_lib.<...>`` (package: its ``__init__.py``), or None outside the package."""
    parts = name.split(".")
    if parts[0] != "vrex_lib":
        return None
    base = _PKG.joinpath(*parts[1:])
    for p in (base / "__init__.py", base.with_suffix(".py")):
        if p.is_file():
            return p
    return None


def _imported_modules(path: Path) -> set[str]:
    """vrex_lib modules that ``path`` imports anywhere (also inside functions), as dotted names; ``from .x import
    y`` names both ``x`` and ``x.y`` (``y`` may be a submodule)."""
    pkg = ["vrex_lib", *path.relative_to(_PKG).parts[:-1]]  # level 1 is the file's folder (also for __init__)
    out: set[str] = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom):
            base = pkg[:len(pkg) - (n.level - 1)] if n.level else []
            mod = ".".join(base + (n.module.split(".") if n.module else []))
            out |= {mod} | {f"{mod}.{a.name}" for a in n.names}
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
    return {m for m in out if m.startswith("vrex_lib")}


@functools.lru_cache(maxsize=64)
def code_files(*modules: str) -> tuple[Path, ...]:
    """Every vrex_lib source file the ``modules`` (dotted names) run: the modules, the packages above them and,
    transitively, every vrex_lib module they import -- so a key over them follows ``llm_weights.py`` as much as
    the entry module. Cached per process (the files' contents are hashed afresh by :func:`code_digest`)."""
    missing = [m for m in modules if _module_path(m) is None]
    if missing:
        raise ValueError(f"code_files: {', '.join(missing)} is not a vrex_lib module")
    seen: set[Path] = set()
    todo = list(modules)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__ too
            p = _module_path(".".join(parts[:i]))
            if p is not None and p not in seen:
                seen.add(p)
                todo.extend(_imported_modules(p))  # "x.y" with y a name, not a module, finds no file
    return tuple(sorted(seen))


def code_digest(*modules: str) -> str:
    """SHA-256 (16 hex digits) of the source of every file :func:`code_files` lists for ``modules``."""
    h = hashlib.sha256()
    for f in code_files(*modules):
        h.update(f.relative_to(_PKG.parent).as_posix().encode() + b"\0" + file_sha256(f).encode() + b"\n")
    return h.hexdigest()[:16]


def _key_default(o: Any):
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, (set, frozenset)):
        return sorted(map(str, o))
    return str(o)


def reuse_key(*, model: Mapping | None = None, code: Iterable[str] = (), inputs: Iterable[str | os.PathLike] = (),
              args: Any = None, **parts: Any) -> str:
    """The key a cached or resumable result is stored under and reused by only when it matches (20 hex digits).

    ``model``: the model's record (``StreamingVideoLLM.reuse_record()``: full config, weight file digests, seed);
    ``code``: the entry modules, hashed with everything they import (:func:`code_digest`); ``inputs``: input files
    (and folders), by content; ``args``: the command's arguments; ``parts``: anything else that decides the
    result (schema, version, grid...). A change to any of them gives another key, so the result is recomputed."""
    doc = dict(model=model, code=code_digest(*code) if code else None, inputs=files_digest(inputs), args=args,
               parts=parts)
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=_key_default).encode()).hexdigest()[:20]
