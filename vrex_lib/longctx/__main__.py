"""``python -m vrex_lib.longctx run --profile P [--grid profile|full] [--methods a,b] [--tasks t] [--lengths n,m]
[--depths d,e] [--seeds s] [--out F] [--workload W]``.

``--tasks/--lengths/--depths/--seeds`` replace the grid's trials by every combination of the given values (each
defaults to the values of the grid's first block). Bad input ends with one line naming the flag or file (exit 2),
checked before the model loads: the list flags, the flags the profile does not use, ``VREX_THREADS``, ``--device``,
and the files: ``--out`` must be a study file of this configuration and ``--workload`` a workload file of this
study (else ``--force`` / ``--replace``, docs/DECISIONS.md D320)."""
from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from ..config import PROFILES, STUDY_GRIDS, builds_from_folders, check_profile_inputs, torch_threads
from ..runtime import resolve_device, validate_full_paths
from ..runtime.checkpoint import add_model_path_flags
from .export import check_workload_out, write_workload
from .grid import Block, StudyGrid, method_specs, study_grid
from .run import default_out, run
from .task import TASKS


def _whole(x: str) -> int:
    v = float(x)
    if not (math.isfinite(v) and v.is_integer()):
        raise ValueError(x)
    return int(v)


#: Per list flag: how an item is read, which items are allowed, and an example.
_LISTS: dict[str, tuple[Callable[[str], object], Callable[[object], bool], str, str]] = {
    "--tasks": (str, lambda t: t in TASKS, f"a task ({', '.join(TASKS)})", "passkey,needle"),
    "--lengths": (_whole, lambda n: n >= 1, "a whole token count >= 1", "1000,2000"),
    "--depths": (float, lambda d: 0.0 <= d <= 1.0, "a depth in [0, 1]", "0,0.5,1"),
    "--seeds": (_whole, lambda s: s >= 0, "a whole number >= 0", "0,1,2"),
}


def _values(text: str | None, flag: str) -> tuple | None:
    """The comma-separated values of a list flag (None when it is not given); an empty list, an empty item or an
    item of the wrong kind is a one-line ValueError naming the flag and the value."""
    if text is None:
        return None
    parse, ok, what, example = _LISTS[flag]
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        raise ValueError(f"{flag} {text!r} gives no values; give comma-separated values, e.g. {flag} {example} "
                         "(or leave the flag out for the grid's values)")
    out = []
    for x in items:
        try:
            v = parse(x) if x else None
        except ValueError:
            v = None
        if v is None or not ok(v):
            shown = repr(x) if x else "an empty item"
            raise ValueError(f"{flag} {text!r}: {shown} is not {what}; give comma-separated values, e.g. "
                             f"{flag} {example}")
        out.append(v)
    return tuple(out)


def _grid(a: argparse.Namespace) -> StudyGrid:
    """The profile's grid, its trials replaced by the --tasks/--lengths/--depths/--seeds combinations if given."""
    g = study_grid(a.profile, a.grid)
    over = {f: _values(getattr(a, f[2:]), f) for f in _LISTS}
    if all(v is None for v in over.values()):
        return g
    b0 = g.blocks[0]
    tasks = over["--tasks"] or tuple(dict.fromkeys(b.task for b in g.blocks))
    lengths = over["--lengths"] or b0.lengths
    if min(lengths) <= g.kv_capacity:
        raise ValueError(f"--lengths {a.lengths}: {min(lengths)} tokens do not exceed the grid's KV capacity "
                         f"{g.kv_capacity}, so nothing would be offloaded; give longer contexts")
    blocks = tuple(Block(t, lengths, over["--depths"] or b0.depths, over["--seeds"] or b0.seeds) for t in tasks)
    return g.replace(name=f"{g.name}-custom", blocks=blocks)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m vrex_lib.longctx", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the long-context retrieval study (resumable, cached by its inputs)")
    r.add_argument("--profile", default="default", choices=PROFILES)
    r.add_argument("--grid", default="profile", choices=STUDY_GRIDS,
                   help="profile: the profile's share of make reproduce (default: 40 trials per cell at 1K-2K for the "
                        "compared methods); full: adds 4K with 80 per cell and 1K-8K x 5 depths x 4 seeds")
    r.add_argument("--methods", default=None, help="comma-separated method names (default: the grid's)")
    r.add_argument("--tasks", default=None, help="comma-separated tasks: passkey,needle")
    r.add_argument("--lengths", default=None, help="context lengths in tokens, e.g. 4000,8000")
    r.add_argument("--depths", default=None, help="needle depths in [0, 1], e.g. 0,0.5,1")
    r.add_argument("--seeds", default=None, help="seeds, e.g. 0,1,2")
    r.add_argument("--out", type=Path, default=None,
                   help="results file (default results/data/retrieval_demand_<profile>[_<grid>].json)")
    r.add_argument("--workload", type=Path, default=None,
                   help="also write the text-stage workload file (schema vrex.workload/1) here")
    r.add_argument("--replace", action="store_true",
                   help="replace a study (or workload) file of another configuration at --out (--workload)")
    r.add_argument("--force", action="store_true",
                   help="recompute even if the file's inputs_key matches, and overwrite --out / --workload even "
                        "if they are not files of this kind")
    r.add_argument("--no-progress", action="store_true")
    add_model_path_flags(r)
    r.add_argument("--device", default=None, help="e.g. cuda (full profile default: cuda)")
    return ap


def _methods(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [x.strip() for x in text.split(",")]
    if not all(names):
        raise ValueError(f"--methods {text!r}: an empty method name; give comma-separated names, e.g. "
                         "--methods full,resv (or leave the flag out for the grid's methods)")
    try:
        method_specs(names)
    except ValueError as err:
        raise ValueError(f"--methods {text!r}: {str(err).removeprefix('long-context study: ')}") from None
    return names


def _model_kwargs(a: argparse.Namespace) -> dict:
    """The model's build arguments, every flag the profile does not read refused first (docs/DECISIONS.md D74)."""
    check_profile_inputs(a.profile, llm_path=a.llm_path, vision_path=a.vision_path, connector_path=a.connector_path)
    if builds_from_folders(a.profile):
        validate_full_paths(a.llm_path, a.vision_path, a.connector_path)
    kw = dict(llm_path=a.llm_path, vision_path=a.vision_path, connector_path=a.connector_path)
    return {k: v for k, v in kw.items() if v} | dict(device=resolve_device(a.profile, a.device))


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; bad input ends with one line naming the flag or file (exit 2), never a traceback. Set
    VREX_DEBUG=1 to see the traceback instead."""
    a = _parser().parse_args(argv)
    try:
        torch.set_num_threads(torch_threads(torch.get_num_threads()))
        kw = _model_kwargs(a)
        g = _grid(a)
        methods = _methods(a.methods)
        tag = a.grid if g.name == study_grid(a.profile, a.grid).name else g.name
        out_path = a.out or default_out(a.profile, tag)
        if a.workload and a.workload.expanduser().resolve() == out_path.expanduser().resolve():
            raise ValueError(f"long-context study: --out and --workload are the same file ({out_path}): the study "
                             "and its workload file are two files; give --workload another name, e.g. "
                             f"{out_path.with_name('workload_retrieval_' + a.profile + '.json')}")
        if a.workload:
            check_workload_out(a.workload, a.profile, g, methods, force=a.force, replace=a.replace)
        path = run(a.profile, g, out=out_path, methods=methods,
                   progress=not a.no_progress, force=a.force, replace=a.replace, model_kwargs=kw)
        print(f"long-context study: {path}")
        if a.workload:
            out = write_workload(path, a.workload, force=a.force, replace=a.replace)
            print(f"long-context study: workload {out}")
    except (ValueError, OSError) as err:
        if os.environ.get("VREX_DEBUG"):
            raise
        msg = str(err)
        print(msg if msg.startswith("long-context study") else f"long-context study: {msg}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
