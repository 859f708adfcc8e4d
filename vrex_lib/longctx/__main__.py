"""``python -m vrex_lib.longctx run --profile P [--grid profile|full] [--methods a,b] [--out F] [--workload W]``."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrex_lib.longctx", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the long-context retrieval study (resumable, cached by its inputs)")
    r.add_argument("--profile", default="default", choices=["smoke", "default", "full"])
    r.add_argument("--grid", default="profile", choices=["profile", "full"],
                   help="profile: the profile's share of make reproduce; full: 1K-8K x 5 depths x 3 seeds x 2 tasks")
    r.add_argument("--methods", default=None, help="comma-separated method names (default: the grid's)")
    r.add_argument("--out", type=Path, default=None,
                   help="results file (default results/data/retrieval_demand_<profile>[_full].json)")
    r.add_argument("--workload", type=Path, default=None,
                   help="also write the text-stage workload file (schema vrex.workload/1) here")
    r.add_argument("--force", action="store_true", help="recompute even if the file's inputs_key matches")
    r.add_argument("--no-progress", action="store_true")
    r.add_argument("--llm-path", help="full profile: Llama-3-8B-Instruct HF folder")
    r.add_argument("--vision-path", help="full profile: siglip-large-patch16-384 HF folder")
    r.add_argument("--connector-path", help="full profile: VideoLLM-online checkpoint folder")
    r.add_argument("--device", default=None, help="e.g. cuda (full profile default: cuda)")
    a = ap.parse_args(argv)
    if os.environ.get("VREX_THREADS"):
        import torch

        torch.set_num_threads(int(os.environ["VREX_THREADS"]))
    from .export import write_workload
    from .run import run

    kw = {}
    if a.profile == "full":
        kw = dict(llm_path=a.llm_path, vision_path=a.vision_path, connector_path=a.connector_path,
                  device=a.device or "cuda")
    elif a.device:
        kw = dict(device=a.device)
    try:
        path = run(a.profile, a.grid, out=a.out, methods=a.methods.split(",") if a.methods else None,
                   progress=not a.no_progress, force=a.force, model_kwargs=kw)
        print(f"long-context study: {path}")
        if a.workload:
            print(f"long-context study: workload {write_workload(path, a.workload)}")
    except (ValueError, FileNotFoundError) as err:
        print(f"long-context study: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
