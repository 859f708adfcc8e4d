"""``python -m vrex_lib.workload measure --profile P [--methods a,b] [--kv 1000,5000] [--long] [--out F]``."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from ..config import results_dir
from ..runtime import resolve_device, resolve_dtype, validate_full_paths
from ..runtime.checkpoint import DEVICE_HELP, DTYPE_HELP
from .measure import ALL_METHODS, measure


def _ints(s: str) -> list[int]:
    try:
        return [int(float(x)) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--kv expects comma-separated token counts like 1000,5000, got {s!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrex_lib.workload", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="measure the retrieval workload into a schema vrex.workload/1 file")
    m.add_argument("--profile", default="default", choices=["smoke", "default", "full"])
    m.add_argument("--methods", default=",".join(ALL_METHODS),
                   help="comma-separated method names (default: every method with a simulator model, "
                        "vrex_lib.methods.SIMULATED)")
    m.add_argument("--kv", type=_ints, default=None, help="checkpoint kv lengths, e.g. 1000,5000,10000")
    m.add_argument("--long", action="store_true", help="add the profile's long points (default: 20000,40000)")
    m.add_argument("--fidelity-kv", type=_ints, default=None, help="kv points with steered fidelity runs")
    m.add_argument("--out", type=Path, default=None, help="output file (default results/data/workload_<profile>.json)")
    m.add_argument("--force", action="store_true", help="recompute even if the file's inputs_key matches")
    m.add_argument("--no-progress", action="store_true")
    m.add_argument("--llm-path", help="full profile: Llama-3-8B-Instruct HF folder")
    m.add_argument("--vision-path", help="full profile: siglip-large-patch16-384 HF folder")
    m.add_argument("--connector-path", help="full profile: VideoLLM-online checkpoint folder (PEFT adapter)")
    m.add_argument("--device", default=None, help=DEVICE_HELP)
    m.add_argument("--dtype", default=None, help=DTYPE_HELP)
    a = ap.parse_args(argv)
    try:
        kw = dict(device=resolve_device(a.profile, a.device), dtype=resolve_dtype(a.profile, a.dtype))
        if a.profile == "full":
            kw.update(llm_path=a.llm_path, vision_path=a.vision_path, connector_path=a.connector_path)
            validate_full_paths(a.llm_path, a.vision_path, a.connector_path)
    except (ValueError, FileNotFoundError) as err:
        print(f"workload measure: {err}", file=sys.stderr)
        return 2
    out = a.out or results_dir() / "data" / f"workload_{a.profile}.json"
    if os.environ.get("VREX_THREADS"):
        torch.set_num_threads(int(os.environ["VREX_THREADS"]))
    before = out.stat().st_mtime_ns if out.exists() else None
    try:
        path = measure(a.profile, [x for x in a.methods.split(",") if x], a.kv, out, long=a.long,
                       fidelity_kv=a.fidelity_kv, model_kwargs=kw, progress=not a.no_progress, force=a.force)
    except (ValueError, FileNotFoundError) as err:
        msg = str(err)
        print(msg if msg.startswith("workload measure") else f"workload measure: {msg}", file=sys.stderr)
        return 2
    reused = before is not None and path.stat().st_mtime_ns == before
    print(f"workload measure: {'reused (inputs_key matches)' if reused else 'wrote'} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
