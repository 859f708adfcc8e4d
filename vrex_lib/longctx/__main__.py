"""``python -m vrex_lib.longctx run --profile P [--grid profile|full] [--methods a,b] [--tasks t] [--lengths n,m]
[--depths d,e] [--seeds s] [--out F] [--workload W]``.

``--tasks/--lengths/--depths/--seeds`` replace the grid's trials by every combination of the given values (each
defaults to the values of the grid's first block)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from ..config import PROFILES, profile_config
from .export import write_workload
from .grid import Block, StudyGrid, study_grid
from .run import default_out, run


def _values(text: str | None, kind, flag: str) -> tuple | None:
    if text is None:
        return None
    try:
        return tuple(kind(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{flag} expects comma-separated {kind.__name__} values, got {text!r}") from None


def _grid(a: argparse.Namespace) -> StudyGrid:
    """The profile's grid, its trials replaced by the --tasks/--lengths/--depths/--seeds combinations if given."""
    g = study_grid(a.profile, a.grid)
    over = dict(tasks=_values(a.tasks, str, "--tasks"), lengths=_values(a.lengths, int, "--lengths"),
                depths=_values(a.depths, float, "--depths"), seeds=_values(a.seeds, int, "--seeds"))
    if all(v is None for v in over.values()):
        return g
    b0 = g.blocks[0]
    tasks = over["tasks"] or tuple(dict.fromkeys(b.task for b in g.blocks))
    blocks = tuple(Block(t, over["lengths"] or b0.lengths, over["depths"] or b0.depths, over["seeds"] or b0.seeds)
                   for t in tasks)
    return g.replace(name=f"{g.name}-custom", blocks=blocks)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m vrex_lib.longctx", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the long-context retrieval study (resumable, cached by its inputs)")
    r.add_argument("--profile", default="default", choices=PROFILES)
    r.add_argument("--grid", default="profile", choices=["profile", "full"],
                   help="profile: the profile's share of make reproduce; full: 1K-8K x 5 depths x 3 seeds x 2 tasks")
    r.add_argument("--methods", default=None, help="comma-separated method names (default: the grid's)")
    r.add_argument("--tasks", default=None, help="comma-separated tasks: passkey,needle")
    r.add_argument("--lengths", default=None, help="context lengths in tokens, e.g. 4000,8000")
    r.add_argument("--depths", default=None, help="needle depths in [0, 1], e.g. 0,0.5,1")
    r.add_argument("--seeds", default=None, help="seeds, e.g. 0,1,2")
    r.add_argument("--out", type=Path, default=None,
                   help="results file (default results/data/retrieval_demand_<profile>[_<grid>].json)")
    r.add_argument("--workload", type=Path, default=None,
                   help="also write the text-stage workload file (schema vrex.workload/1) here")
    r.add_argument("--force", action="store_true", help="recompute even if the file's inputs_key matches")
    r.add_argument("--no-progress", action="store_true")
    r.add_argument("--llm-path", help="full profile: Llama-3-8B-Instruct HF folder")
    r.add_argument("--vision-path", help="full profile: siglip-large-patch16-384 HF folder")
    r.add_argument("--connector-path", help="full profile: VideoLLM-online checkpoint folder")
    r.add_argument("--device", default=None, help="e.g. cuda (full profile default: cuda)")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if os.environ.get("VREX_THREADS"):
        torch.set_num_threads(int(os.environ["VREX_THREADS"]))
    kw = {}
    prof = profile_config(a.profile)
    if prof.model.requires_paths:
        kw = dict(llm_path=a.llm_path, vision_path=a.vision_path, connector_path=a.connector_path,
                  device=a.device or prof.model.device)
    elif a.device:
        kw = dict(device=a.device)
    try:
        g = _grid(a)
        tag = a.grid if g.name == study_grid(a.profile, a.grid).name else g.name
        path = run(a.profile, g, out=a.out or default_out(a.profile, tag),
                   methods=a.methods.split(",") if a.methods else None, progress=not a.no_progress, force=a.force,
                   model_kwargs=kw)
        print(f"long-context study: {path}")
        if a.workload:
            print(f"long-context study: workload {write_workload(path, a.workload)}")
    except (ValueError, FileNotFoundError) as err:
        print(f"long-context study: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
