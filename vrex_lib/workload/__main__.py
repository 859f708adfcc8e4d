"""``python -m vrex_lib.workload measure --profile P [--methods a,b] [--kv 1000,5000] [--long] [--out F]``.

Bad input ends with one line naming the flag or file (exit 2), checked before the model loads: the token counts,
``VREX_THREADS``, the flags the profile does not read, the full profile's paths, and ``--out`` (a file in a writable folder; an existing file that is
not a workload document, or one of another configuration, is refused unless ``--force`` / ``--replace``).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import torch

from ..config import PROFILES, builds_from_folders, check_profile_inputs, torch_threads, workload_path
from ..runtime import resolve_device, resolve_dtype, validate_full_paths
from ..runtime.checkpoint import DEVICE_HELP, DTYPE_HELP, add_model_path_flags
from .measure import ALL_METHODS, measure


def _parse_counts(flag: str, s: str | None, allow_empty: bool = False) -> list[int] | None:
    """Comma-separated whole token counts (1000,5e3) -> [int] (None stays None; ``''`` -> [] if ``allow_empty``);
    anything else is a one-line ValueError naming ``flag``."""
    if s is None:
        return None
    out = []
    for x in (x.strip() for x in s.split(",") if x.strip()):
        try:
            v = float(x)
        except ValueError:
            v = math.nan
        if not (math.isfinite(v) and v.is_integer() and v >= 1):
            raise ValueError(f"workload measure: {flag} expects comma-separated whole token counts >= 1 like "
                             f"1000,5000; {x!r} in {s!r} is not one")
        out.append(int(v))
    if not out and not allow_empty:
        raise ValueError(f"workload measure: {flag} expects comma-separated token counts like 1000,5000, got {s!r}")
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m vrex_lib.workload", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="measure the retrieval workload into a schema vrex.workload/1 file")
    m.add_argument("--profile", default="default", choices=PROFILES)
    m.add_argument("--methods", default=",".join(ALL_METHODS),
                   help="comma-separated method names (default: every method with a simulator model, "
                        "vrex_lib.methods.SIMULATED)")
    m.add_argument("--kv", default=None,
                   help="checkpoint kv lengths, e.g. 1000,5000,10000")
    m.add_argument("--long", action="store_true", help="add the profile's long points (default: 20000,40000)")
    m.add_argument("--fidelity-kv", default=None,
                   help="kv points with steered fidelity runs ('' for none)")
    m.add_argument("--out", type=Path, default=None, help="output file (default results/data/workload_<profile>.json)")
    m.add_argument("--replace", action="store_true",
                   help="replace a workload file of another configuration at --out (one whose inputs_key matches "
                        "is still reused)")
    m.add_argument("--force", action="store_true",
                   help="recompute and overwrite whatever --out holds, even a matching workload file or a file "
                        "that is not one")
    m.add_argument("--no-progress", action="store_true")
    add_model_path_flags(m)
    m.add_argument("--device", default=None, help=DEVICE_HELP)
    m.add_argument("--dtype", default=None, help=DTYPE_HELP)
    return ap


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; bad input, an unwritable or full disk end with one line (exit 2), never a traceback.
    Set VREX_DEBUG=1 to see the traceback instead."""
    a = _parser().parse_args(argv)
    try:
        return _measure(a)
    except (ValueError, OSError) as err:  # ContextTooLarge is a ValueError
        if os.environ.get("VREX_DEBUG"):
            raise
        msg = str(err)
        print(msg if msg.startswith("workload measure") else f"workload measure: {msg}", file=sys.stderr)
        return 2


def _measure(a: argparse.Namespace) -> int:
    kv, fid = _parse_counts("--kv", a.kv), _parse_counts("--fidelity-kv", a.fidelity_kv, allow_empty=True)
    paths = dict(llm_path=a.llm_path, vision_path=a.vision_path, connector_path=a.connector_path)
    check_profile_inputs(a.profile, **paths)  # a flag the profile does not read is an error (D74)
    kw = dict(device=resolve_device(a.profile, a.device), dtype=resolve_dtype(a.profile, a.dtype))
    if builds_from_folders(a.profile):
        validate_full_paths(a.llm_path, a.vision_path, a.connector_path)
    kw.update({k: v for k, v in paths.items() if v})
    out = a.out or workload_path(a.profile)
    torch.set_num_threads(torch_threads(torch.get_num_threads()))
    before = out.stat().st_mtime_ns if out.is_file() else None
    methods = [x.strip() for x in a.methods.split(",")]
    if not all(methods):
        raise ValueError(f"workload measure: --methods {a.methods!r} has an empty method name; give comma-separated "
                         "names, e.g. --methods full,resv (or leave the flag out for every simulated method)")
    path = measure(a.profile, methods, kv, out, long=a.long,
                   fidelity_kv=fid, model_kwargs=kw, progress=not a.no_progress, force=a.force,
                   replace=a.replace)
    reused = before is not None and path.stat().st_mtime_ns == before
    print(f"workload measure: {'reused (inputs_key matches)' if reused else 'wrote'} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
