"""Benchmark: simulate the whole Fig. 13 grid (edge b1/b4, server b1/b8; 5 methods; 1K-40K; frame + text).

Target (issue 8): < 60 s on one core. Prints the grid size and, last, ``fig13_grid_seconds=<s>``.

    .venv/bin/python benchmarks/bench_perf_grid.py
"""
from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from vrex_lib.perf.experiments import fig13_grid  # noqa: E402


def main() -> None:
    t = time.perf_counter()
    grid = fig13_grid()
    dt = time.perf_counter() - t
    print(f"points={len(grid)} per_point_ms={1e3 * dt / len(grid):.2f}")
    print(f"fig13_grid_seconds={dt:.3f}")


if __name__ == "__main__":
    main()
