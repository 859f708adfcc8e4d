"""The two lines every notebook starts with: validate the profile, seed, pick the results folder.

    ctx = vrex_lib.notebook.setup(PROFILE, RESULTS_DIR)
    ctx.profile, ctx.cfg, ctx.out   # 'default', ProfileConfig, Path to results/
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import _io
from .config import (REPO_ROOT, ProfileConfig, arg_name, profile_config, results_dir, seed_everything,
                     torch_threads, use_notebook_arg_names)


@dataclass(frozen=True)
class Context:
    profile: str
    cfg: ProfileConfig
    out: Path


def setup(profile: str, results: str | None = None, seed: int | None = None) -> Context:
    use_notebook_arg_names()  # error messages name PROFILE, VISION_PATH, ... rather than CLI flags
    cfg = profile_config(profile)
    # Checked before any expensive cell runs, not at the first table write.
    _io.check_writable_dir(results or os.environ.get("VREX_RESULTS_DIR") or REPO_ROOT / "results",
                           arg_name("--results-dir"))
    out = results_dir(results or None)
    # Later report.* calls default to this folder too.
    os.environ["VREX_RESULTS_DIR"] = str(out)
    seed_everything(cfg.seed if seed is None else seed)
    _set_threads()
    try:
        import matplotlib

        matplotlib.use("Agg") if not _interactive() else None
        import seaborn as sns

        sns.set_theme(context="notebook", style="whitegrid")
    except ImportError:  # pragma: no cover
        pass
    return Context(profile, cfg, out)


def _set_threads() -> None:
    """One torch thread unless $VREX_THREADS says otherwise.

    The default/smoke models are small (SmolLM2-135M, hidden 576): on a 2-core machine a second thread buys
    little and costs a lot under any background load (measured 8-10x slower per step), and a fixed thread
    count keeps floating-point reductions -- hence the tables -- identical from run to run.
    """
    n = torch_threads()
    try:
        import torch
    except ImportError:  # pragma: no cover
        return
    torch.set_num_threads(n)


def _interactive() -> bool:
    try:
        from IPython import get_ipython

        ip = get_ipython()
        return ip is not None and "IPKernelApp" in ip.config and not os.environ.get("PAPERMILL_EXECUTION")
    except Exception:  # pragma: no cover
        return False
