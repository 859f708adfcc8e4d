"""The files of a workload measurement: the schema ``vrex.workload/1`` document at ``--out`` and its resumable
``<out>.partial.json``, checked before any work (docs/DECISIONS.md D200).

* :func:`check_out` -- before the model loads: ``--out`` must be a file in a writable folder; an existing file
  that is not a workload document, or one measured under another configuration (:func:`configuration`), is
  refused unless ``force`` (overwrite anything) or ``replace`` (replace a workload file of another configuration)
  allows it. A document of the same configuration whose ``inputs_key`` differs (other code, another checkpoint
  with the same name) is measured again and replaced: it describes this request, only out of date.
* :func:`resume_state` -- the checkpoints an interrupted run of the same inputs left in the partial file; a
  partial file that is damaged or another run's is announced on stderr and started afresh, never a crash.
* :func:`read_measurement` -- a workload file for its readers, every failure one line naming the file.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

from .. import _io
from ..config import WORKLOAD_SCHEMA as SCHEMA

#: The fields of a workload document that say what was requested (not what was measured, nor which code ran):
#: a file that differs in one of them is another configuration's measurement.
CONFIG_FIELDS: tuple[str, ...] = ("profile", "methods", "variants", "kv_points", "fidelity_kv", "kv_capacity",
                                  "recent_frames", "dense_layers", "resv", "frame_steps", "decode_tokens",
                                  "question", "stream_seed")
#: The same, known only once the model is built.
MODEL_FIELDS: tuple[str, ...] = ("model", "vision_encoder", "kv_bytes_per_elem")


def jsonable(x):
    """``x`` as plain JSON values: dataclasses as dicts, numpy scalars as numbers, non-finite floats as None."""
    if dataclasses.is_dataclass(x):
        return {k: jsonable(v) for k, v in dataclasses.asdict(x).items()}
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def write_json(path: Path, obj: dict) -> None:
    """Write ``obj`` atomically (a full disk is an OSError naming ``path``, :func:`vrex_lib._io.write_error`)."""
    _io.write_json(path, jsonable(obj))


def _load(path: Path) -> tuple[dict | None, str]:
    """(the workload document at ``path``, '') or (None, why it is not one)."""
    return _io.read_json_document(path, SCHEMA, "workload document")


def configuration(doc: dict) -> dict:
    """The :data:`CONFIG_FIELDS` and :data:`MODEL_FIELDS` a document holds (``stream_seed`` from its stream)."""
    out = {k: doc[k] for k in CONFIG_FIELDS + MODEL_FIELDS if k in doc}
    if isinstance(doc.get("stream"), dict) and "seed" in doc["stream"]:
        out["stream_seed"] = doc["stream"]["seed"]
    return out


#: A workload file, for :func:`vrex_lib._io.check_output` (every command that writes one: workload measure,
#: longctx run --workload).
KIND = _io.OutputKind("workload file", "workload", _load, configuration)


def check_out(out: Path, requested: dict, *, force: bool, replace: bool) -> dict | None:
    """Refuse an ``--out`` this measurement must not write (module docstring), before any work; returns the
    workload document already there (None if there is none or ``force`` overwrites it).

    ``requested``: this run's values of the :data:`CONFIG_FIELDS` (as JSON values)."""
    partial = partial_path(out)
    example = f"--out {out.parent / 'workload.json'}"
    _io.check_output(out, None, flag="--out", example=example)
    _io.check_output(partial, None, flag=f"--out's checkpoint file {partial.name}", example=example)
    doc = _io.check_output(out, KIND, flag="--out", force=force, example=example)
    if doc is not None:
        check_same(out, configuration(doc), requested, replace=replace)
    return doc


def check_same(out: Path, old: dict, new: dict, *, replace: bool) -> None:
    """Refuse (unless ``replace``) a document at ``out`` whose configuration ``old`` differs from ``new``."""
    diff = _io.config_diff(old, new)
    if diff and not replace:
        raise _io.OutputRefused(f"workload measure: --out {out} holds the workload of another configuration "
                                f"({'; '.join(diff)}); pass --replace to replace it, or another --out")


def cached(doc: dict | None, key: str) -> bool:
    """Whether ``doc`` is the measurement of exactly these inputs (reused as it is)."""
    return doc is not None and doc.get("inputs_key") == key


def partial_path(out: Path) -> Path:
    return out.with_name(out.name + ".partial.json")


def fresh_state(key: str) -> dict:
    return dict(inputs_key=key, checkpoints=[], answers={}, fidelity={}, shadow_done=False)


def resume_state(partial: Path, key: str) -> dict:
    """The progress kept in ``partial`` by an interrupted run with these inputs, else a fresh state. A partial
    file of other inputs, or one that is damaged (not JSON, a list, a field missing or of the wrong type), is
    announced on stderr and replaced as checkpoints complete."""
    if not partial.exists():
        return fresh_state(key)
    try:
        d = json.loads(partial.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return _restart(partial, key, f"unreadable: {err}")
    if not isinstance(d, dict):
        return _restart(partial, key, f"a JSON {type(d).__name__}, not a checkpoint record")
    if d.get("inputs_key") != key:
        return _restart(partial, key, "left by a run with other inputs")
    want = dict(checkpoints=list, answers=dict, fidelity=dict, shadow_done=bool)
    bad = [k for k, t in want.items() if not isinstance(d.get(k), t)]
    if bad or not all(isinstance(c, dict) for c in d["checkpoints"]):
        return _restart(partial, key, f"field(s) {', '.join(bad) or 'checkpoints'} missing or of the wrong type")
    return d


def _restart(partial: Path, key: str, why: str) -> dict:
    print(f"workload measure: {partial} is not a resumable checkpoint of this measurement ({why}); measuring "
          "afresh (the file is replaced as checkpoints complete)", file=sys.stderr)
    return fresh_state(key)


def read_measurement(path: str | os.PathLike) -> dict:
    """Load a workload file (schema ``vrex.workload/1``); a missing, unreadable or non-workload file is a one-line
    error naming it and the fix."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no workload measurement here; run "
                                "`python -m vrex_lib.workload measure --profile default` (or `make reproduce`)")
    d, why = _load(p)
    if d is None:
        raise ValueError(f"{p}: not a workload file ({why}); regenerate it with `python -m vrex_lib.workload "
                         f"measure --out {p} --force`")
    return d
