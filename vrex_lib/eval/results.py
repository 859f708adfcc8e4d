"""Results files of the COIN evaluation: per-sample JSONL (durable appends, torn-line repair), the ``<stem>.run.json``
and ``<stem>.skips.csv`` sidecars, resume checks and the merge of shard files (docs/DECISIONS.md D70)."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .. import _io
from .plan import config_diff

TIMING_KEYS = ("timing_s",)


def read_jsonl(path: str | os.PathLike, repair: bool = False) -> list[dict]:
    """Lines of a results file. A torn last line (no newline / bad JSON) is ignored, or cut off if ``repair``."""
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    out, good_end, pos = [], 0, 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break  # no newline: an interrupted append
        line = data[pos:nl]
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                if nl + 1 < len(data):
                    raise ValueError(f"{p}: line {len(out) + 1} is not valid JSON and is not the last line; "
                                     "the file is damaged, delete it (or that line) and rerun") from None
                break
        good_end = pos = nl + 1
    if repair and good_end < len(data):
        with open(p, "r+b") as f:
            f.truncate(good_end)
            f.flush()
            os.fsync(f.fileno())
    return out


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    """Append one line durably (write + flush + fsync): a crash leaves at most a torn last line. A failed write
    (a full disk) is an OSError naming the file; the next run cuts the torn line and resumes after it."""
    line = json.dumps(record, ensure_ascii=False, default=_json_default) + "\n"
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        raise _io.write_error(path, err) from None


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def shard_path(out: str | os.PathLike, shard_index: int, num_shards: int) -> Path:
    out = Path(out)
    if num_shards <= 1:
        return out
    return out.with_name(f"{out.stem}.shard{shard_index}of{num_shards}{out.suffix}")


def run_file(results: str | os.PathLike) -> Path:
    """The run sidecar of a results file: ``<stem>.run.json`` (configuration, shard, skipped samples)."""
    p = Path(results)
    return p.with_name(p.stem + ".run.json")


def skips_file(results: str | os.PathLike) -> Path:
    """The human-readable skip log of a results file: ``<stem>.skips.csv`` (:class:`vrex_lib.coin.SkipLog`)."""
    p = Path(results)
    return p.with_name(p.stem + ".skips.csv")


def _read_run(path: Path) -> dict | None:
    rp = run_file(path)
    if not rp.exists():
        return None
    try:
        run = json.loads(rp.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{rp}: unreadable run record ({err}); delete it together with {path.name} and rerun "
                         "that shard") from None
    if not isinstance(run, dict) or "config_key" not in run:
        raise ValueError(f"{rp}: not a vrex run record (no config_key); delete it and rerun that shard")
    return run


def merge_shards(paths: Sequence[str | os.PathLike], out: str | os.PathLike, *, require_complete: bool = True) -> Path:
    """Merge shard files of ONE run into ``out`` ordered by sample index, atomically; returns ``out``.

    Refused (ValueError naming the files): a path that does not exist or is not a results file; shards of
    different runs (task, method, profile or configuration key differ -- e.g. a ``step`` and a ``next`` shard);
    two different samples at one index. With ``require_complete`` every index 0..n_total-1 must be present or
    listed as skipped in its shard's ``<stem>.run.json`` (a missing video or an undecodable span); the
    ``clamp`` notes of the skip log never excuse a missing sample. Next to ``out`` the merged
    ``<stem>.run.json`` and ``<stem>.skips.csv`` are written, so the merged file resumes and merges like a
    single-shard run.
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("merge: no shard files given; pass the shard JSONL files after --out")
    out = Path(out)
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"merge: {p} does not exist; pass the shard files the runs wrote "
                                    "(<out stem>.shard<k>of<K>.jsonl)")
        if not p.is_file():
            raise ValueError(f"merge: {p} is not a file; pass the shard JSONL files themselves")
    recs, by_index, runs = _collect_shards(paths)
    rows = sorted(recs.values(), key=lambda r: r["index"])
    n_totals = {int(r["n_total"]) for r in rows} | {int(run["n_total"]) for _, run in runs if "n_total" in run}
    n_total = max(n_totals) if n_totals else 0
    skipped: dict[int, dict] = {}
    for _, run in runs:
        for s in run.get("skipped", []):
            if int(s["index"]) not in by_index:
                skipped.setdefault(int(s["index"]), s)
    missing = [i for i in range(n_total) if i not in by_index and i not in skipped]
    if missing:
        msg = (f"merge: {len(missing)} of {n_total} samples missing: neither in the shards nor listed as skipped "
               f"(indices {', '.join(map(str, missing[:8]))}{' ...' if len(missing) > 8 else ''})")
        if require_complete:
            raise ValueError(msg + "; finish or resume the shard runs that hold them (shard k of K holds indices "
                             "k, k+K, ...), or pass --allow-partial to merge what is there")
        print(f"warning: {msg}; merged anyway (--allow-partial)", file=sys.stderr)
    if not rows:
        raise ValueError(f"merge: the shards {', '.join(map(str, paths))} hold no results"
                         + (f" (all {len(skipped)} samples were skipped; see their .skips.csv)" if skipped else ""))
    _check_merge_out(out, paths, rows, runs)
    base = None
    if runs:
        base = dict(runs[0][1])
        base.update(shard_index=0, num_shards=1, n_total=n_total, merged_from=[str(p) for p, _ in runs],
                    skipped=[skipped[i] for i in sorted(skipped)], complete=not missing)
    try:
        _io.write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        if base is not None:
            _io.write_json(run_file(out), base)
        _merge_skip_logs(paths, out)
    except OSError as err:  # never leave a merged file beside another run's record (or none)
        for f in (out, run_file(out), skips_file(out)):
            if f.resolve() not in {p.resolve() for p in paths}:
                f.unlink(missing_ok=True)
        raise type(err)(f"merge: {err}; nothing was merged (the shard files are untouched)") from None
    return out


def _check_merge_out(out: Path, paths: list[Path], rows: list[dict], runs: list) -> None:
    """Refuse an ``out`` that would overwrite something other than this run's merge: a folder, a file that is not
    a results file, the results (or run record) of another run, or results of this run the shards do not hold
    (docs/DECISIONS.md D70)."""
    row = rows[0]
    try:
        _io.check_output(out, None, flag="--out", example=f"--out {out}/{row['task']}.jsonl" if out.is_dir() else None)
    except _io.OutputRefused as err:
        raise ValueError(f"merge: {err}") from None
    if out.resolve() in {p.resolve() for p in paths}:
        return  # merging a single file onto itself: the same run by construction
    try:
        old_rows = read_jsonl(out)
    except ValueError:
        old_rows = None
    unreadable = old_rows is None or (not old_rows and out.exists() and out.stat().st_size > 0)
    if unreadable or any(not isinstance(r, dict) or "config_key" not in r for r in old_rows):
        raise ValueError(f"merge: --out {out} exists and is not a vrex results file; merging would overwrite it. "
                         "Pass another --out, or move that file away first")
    old_run = _read_run(out) if run_file(out).exists() else None
    keys = {r["config_key"] for r in old_rows} | ({old_run["config_key"]} if old_run else set())
    if keys and keys != {row["config_key"]}:
        diff = config_diff(old_run or _row_config(old_rows[0]), runs[0][1] if runs else _row_config(row))
        raise ValueError(f"merge: --out {out} holds {len(old_rows)} results of another run "
                         f"({'; '.join(diff) if diff else 'another configuration key'}); merging would replace them "
                         f"and {run_file(out).name}. Pass another --out, or delete that file (and its "
                         f"{run_file(out).name} / {skips_file(out).name}) first")
    lost = sorted({r["sample_id"] for r in old_rows} - {r["sample_id"] for r in rows})
    if lost:
        raise ValueError(f"merge: --out {out} holds {len(lost)} result(s) of this run that the shards do not (e.g. "
                         f"{lost[0]}); merging would drop them. Pass that file among the shards to keep them, or "
                         "another --out")


def _collect_shards(paths: list[Path]) -> tuple[dict, dict, list]:
    """({sample_id: record}, {index: (sample_id, shard)}, [(shard, run record)]) of the shards, refusing shards of
    different runs and two samples at one index."""
    recs: dict[str, dict] = {}
    by_index: dict[int, tuple[str, Path]] = {}
    origin: dict[str, Path] = {}
    runs: list[tuple[Path, dict]] = []
    seen: dict[str, tuple[object, Path]] = {}

    def agree(field_name: str, value, p: Path) -> None:
        v0, p0 = seen.setdefault(field_name, (value, p))
        if v0 != value:
            raise ValueError(f"merge: {p0} holds {field_name} {v0!r} but {p} holds {field_name} {value!r}: these are "
                             "shards of different runs; merge only the shards of one task/method/configuration")

    for p in paths:
        rows = read_jsonl(p)
        run = _read_run(p)
        if not rows and run is None:
            raise ValueError(f"merge: {p} holds no results and has no {run_file(p).name}: not a finished shard "
                             "(run or resume it first)")
        if run is not None:
            runs.append((p, run))
            for f in ("task", "method", "profile", "config_key"):
                agree(f, run.get(f), p)
        for r in rows:
            for f in ("task", "method", "profile", "config_key"):
                agree(f, r.get(f), p)
            sid, idx = r["sample_id"], int(r["index"])
            if sid in recs:
                if int(recs[sid]["index"]) != idx:
                    raise ValueError(f"merge: sample {sid} is index {recs[sid]['index']} in {origin[sid]} but {idx} "
                                     f"in {p}: shards of different sample lists")
                continue
            if idx in by_index:
                raise ValueError(f"merge: index {idx} is sample {by_index[idx][0]} in {by_index[idx][1]} but {sid} "
                                 f"in {p}: shards of different sample lists (split, --max-samples or COIN.json)")
            recs[sid], origin[sid], by_index[idx] = r, p, (sid, p)
    return recs, by_index, runs


def _merge_skip_logs(paths: list[Path], out: Path) -> None:
    """The shards' skip logs, each line once, as ``out``'s skip log."""
    skip_lines: list[str] = []
    for p in paths:
        sk = skips_file(p)
        if sk.exists():
            body = sk.read_text().splitlines()
            skip_lines += [ln for ln in body[1:] if ln not in skip_lines]
    _io.write_text(skips_file(out), "\n".join(["video_id,stage,action,reason", *skip_lines]) + "\n")


def _results_doc(path: Path) -> tuple[dict | None, str]:
    """({'rows': [...], 'run': run record or None}, '') or (None, why ``path`` is not a results file). A file whose
    first line is a result line (a JSON object with ``sample_id``), or an empty one, is a results file; a damaged
    later line is the ValueError of :func:`read_jsonl`."""
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError as err:
        return None, f"cannot be read: {err.strerror or err}"
    if first.strip() and first.endswith(b"\n"):  # a first line without newline is a torn append: no rows yet
        try:
            rec = json.loads(first)
        except (json.JSONDecodeError, UnicodeDecodeError):
            rec = None
        if not isinstance(rec, dict) or "sample_id" not in rec:
            return None, "its first line is not a result line, a JSON object with sample_id"
    return dict(rows=read_jsonl(path), run=_read_run(path)), ""


def _results_differ(doc: dict, cfg: dict) -> list[str]:
    """How the results ``doc`` holds differ from configuration ``cfg`` ([] when they are this configuration's)."""
    rows = doc["rows"]
    if not rows:
        return []
    keys = {r.get("config_key") for r in rows}
    if keys == {cfg["config_key"]}:
        return []
    old = doc["run"] or {}
    if not old and len(keys) == 1:  # no run record: compare what the rows carry
        old = _row_config(rows[0])
    diff = config_diff(old, cfg)
    return (diff if diff and len(keys) == 1 else
            ["its rows come from several configurations"] if len(keys) > 1 else
            ["its rows carry no configuration key (an older run)"] if keys == {None} else
            ["written under another configuration"])


#: An evaluation's results file, for :func:`vrex_lib._io.check_output` (docs/DECISIONS.md D70, D320).
RESULTS_KIND = _io.OutputKind("vrex results file", "results", _results_doc, differ=_results_differ)


def check_resume(out_path: Path, cfg: dict, *, replace: bool = False, force: bool = False) -> list[dict]:
    """The rows of ``out_path`` that this configuration may resume from. Results of another configuration are an
    :class:`~vrex_lib._io.OutputRefused` naming the differing fields; with ``replace`` they are emptied (and their
    run record and skip log removed) so the run starts afresh, and with ``force`` so is any other file."""
    doc = _io.check_output(out_path, RESULTS_KIND, flag="--out", requested=cfg, replace=replace, force=force)
    if doc is not None:
        return doc["rows"]
    if out_path.is_file() and out_path.stat().st_size:
        with open(out_path, "r+b") as f:  # emptied in place: the run's lock (_exclusive) is on this file
            f.truncate(0)
        for f in (run_file(out_path), skips_file(out_path)):
            f.unlink(missing_ok=True)
    return []


def _row_config(row: dict) -> dict:
    """The configuration fields a result line carries itself (for files without a run record)."""
    return {k: row[k] for k in ("task", "method", "method_kwargs", "profile", "runtime_config", "seed",
                                "prompt_layout") if k in row}


@contextlib.contextmanager
def _exclusive(out_path: Path):
    """Hold an exclusive lock on the results file for the whole run; refuse if another run holds it."""
    with open(out_path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{out_path}: another evaluation is writing this file now; wait for it to finish or "
                             "pass another --out") from None
        yield


def load_results(path: str | os.PathLike):
    """A results JSONL as a DataFrame (one row per sample; timing columns flattened as timing_<name>)."""
    rows = read_jsonl(path)
    df = pd.json_normalize(rows, sep="_") if rows else pd.DataFrame()
    return df
