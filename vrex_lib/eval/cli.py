"""COIN evaluation runner: one method × one task, resumable, shardable, mergeable.

``python -m vrex_lib.eval`` (usage in :mod:`vrex_lib.eval`); bad input ends with one line naming the flag or file
(exit 2).
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from collections.abc import Sequence

import numpy as np
import torch

from .. import coin, methods, video
from ..config import PROFILES, RuntimeConfig
from ..retrieval import check_policy_kwargs
from ..runtime.checkpoint import DEVICE_HELP, DTYPE_HELP, add_model_path_flags
from .plan import NoSamplesEvaluated
from .results import merge_shards, read_jsonl
from .run import run_eval, score_results


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m vrex_lib.eval", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help="step | next | task | procedure | taskprocedure")
    p.add_argument("--method", required=True, help=f"one of {', '.join(methods.NAMES)} (vrex_lib.methods)")
    p.add_argument("--profile", default="default", choices=PROFILES)
    p.add_argument("--out", required=True, help="results JSONL, e.g. results/eval/<profile>/<method>/<task>.jsonl")
    p.add_argument("--coin-root", default=None, help="full profile: folder with COIN.json and videos/")
    p.add_argument("--split", default="testing")
    add_model_path_flags(p)
    p.add_argument("--device", default=None, help=DEVICE_HELP)
    p.add_argument("--dtype", default=None, help=DTYPE_HELP)
    p.add_argument("--max-samples", type=int, default=None)
    p.add_argument("--max-frames", type=int, default=None, help="frames per span above which --frames-policy "
                   "applies (default: run_eval's, Live1+'s max_num_frames 1,200)")
    p.add_argument("--frames-policy", default="videollm-online", choices=("videollm-online", "skip", "clamp"),
                   help="a longer span: 'videollm-online' answers without frames (max_frames_clip), 'skip' leaves "
                   "the sample out, 'clamp' keeps its last --max-frames frames")
    p.add_argument("--prompt-layout", default="coin", choices=("coin", "live"),
                   help="'coin': question, frames, answer (as the checkpoint was trained); 'live': question after "
                   "the frames")
    p.add_argument("--frame-sampling", default=coin.FRAME_SAMPLING, choices=video.SAMPLINGS,
                   help="'ffmpeg': the frames ffmpeg's -r 2 writes, as VideoLLM-online's preprocessing (default); "
                   "'grid': the source frame nearest each k/2 s (docs/DECISIONS.md D59)")
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.add_argument("--num-shards", type=int, default=None)
    p.add_argument("--shard-index", type=int, default=None)
    p.add_argument("--method-kwargs", default="{}",
                   help="JSON dict of the policy's config, e.g. '{\"th_r_wics\": 0.3}' for resv")
    p.add_argument("--kv-capacity", type=int, default=RuntimeConfig.kv_capacity)
    p.add_argument("--recent-frames", type=int, default=RuntimeConfig.recent_frames)
    p.add_argument("--reference", default="auto", help="full-method JSONL for agreement columns ('none' to skip)")
    p.add_argument("--trace-dir", default=None, help="save one retrieval trace .npz per sample here")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (CPU; 1 is fastest on a "
                   "busy 2-core machine)")
    p.add_argument("--replace", action="store_true",
                   help="--out holds results of another configuration: replace them (they are deleted)")
    p.add_argument("--force", action="store_true", help="overwrite --out even if it is not a results file")
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; bad input ends with one line naming the file or flag (exit 2), never a traceback.

    Set VREX_DEBUG=1 to see the traceback instead.
    """
    try:
        return _main(argv)
    except (ValueError, OSError, NoSamplesEvaluated) as err:
        if os.environ.get("VREX_DEBUG"):
            raise
        print(f"python -m vrex_lib.eval: error: {err}", file=sys.stderr)
        return 2


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "merge":
        mp = argparse.ArgumentParser(prog="python -m vrex_lib.eval merge",
                                     description="Merge the shard files of one run into one results file")
        mp.add_argument("--out", required=True)
        mp.add_argument("--allow-partial", action="store_true",
                        help="merge even if samples are missing (warned on stderr)")
        mp.add_argument("shards", nargs="+")
        a = mp.parse_args(argv[1:])
        print(merge_shards(a.shards, a.out, require_complete=not a.allow_partial))
        return 0
    if argv and argv[0] == "plan":
        from .budget import main as plan_main

        return plan_main(argv[1:])
    if argv and argv[0] == "run":
        argv = argv[1:]
    a = _parser().parse_args(argv)
    try:
        kwargs = json.loads(a.method_kwargs)
    except json.JSONDecodeError as err:
        raise ValueError(f"--method-kwargs is not valid JSON ({err}); e.g. '{{\"th_r_wics\": 0.3}}'") from None
    if not isinstance(kwargs, dict):
        raise ValueError(f"--method-kwargs must be a JSON object, got {a.method_kwargs!r}; "
                         "e.g. '{\"th_r_wics\": 0.3}'")
    if a.threads is not None:
        if a.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {a.threads}")
        torch.set_num_threads(a.threads)
    for flag, v, lo in (("--kv-capacity", a.kv_capacity, 1), ("--recent-frames", a.recent_frames, 1)):
        if v < lo:
            raise ValueError(f"{flag} must be >= {lo}, got {v}")
    cfg = RuntimeConfig(kv_capacity=a.kv_capacity, recent_frames=a.recent_frames)
    if a.method in methods.METHODS:  # an unknown method is named by run_eval
        check_policy_kwargs(a.method, kwargs)  # every option's name, type and range, before any file is written
    path = run_eval(a.task, a.method, a.profile, a.out, coin_root=a.coin_root, split=a.split,
                    max_samples=a.max_samples, num_shards=a.num_shards,
                    max_frames=_default("max_frames") if a.max_frames is None else a.max_frames,
                    shard_index=a.shard_index, max_new_tokens=a.max_new_tokens, method_kwargs=kwargs,
                    runtime_cfg=cfg, reference=None if a.reference == "none" else a.reference,
                    trace_dir=a.trace_dir, llm_path=a.llm_path, vision_path=a.vision_path,
                    connector_path=a.connector_path, progress=not a.no_progress, prompt_layout=a.prompt_layout,
                    frames_policy=a.frames_policy, device=a.device, dtype=a.dtype, frame_sampling=a.frame_sampling,
                    replace=a.replace, force=a.force)
    rows = read_jsonl(path)
    if rows:
        acc = score_results(path, a.profile, a.coin_root, a.split)
        rf = [r["ratio_frame"] for r in rows if r["ratio_frame"] is not None]
        rt = [r["ratio_text"] for r in rows if r["ratio_text"] is not None]
        print(f"{path}: {len(rows)} samples, COIN Top-1 {acc:.1f}%, retrieval ratio frame "
              f"{np.mean(rf) if rf else float('nan'):.3f} text {np.mean(rt) if rt else float('nan'):.3f}")
    return 0


def _default(name: str):
    """run_eval's default for a keyword (the CLI leaves unset flags to it)."""
    return inspect.signature(run_eval).parameters[name].default

