"""Compile ReSV's kernels into their on-disk cache: ``python -m vrex_lib.resv.warm`` (``make setup`` runs it).

Numba compiles :mod:`vrex_lib.resv.kernels` on first use (~10 s on a 2-core machine) and caches the machine code
beside the module; running every code path once here -- each WiCSum rule, granularity, hashing mode and
candidate form, with the argument types the runtime passes -- means no test or notebook process pays for it.
"""
from __future__ import annotations

import dataclasses
import time

import torch

from ..config import ReSVConfig
from .select import select_tokens
from .table import HashClusterTable


def warm_up() -> float:
    """Run every kernel once on a tiny table; returns the seconds taken (compile time when nothing was cached)."""
    t0 = time.perf_counter()
    g = torch.Generator().manual_seed(0)
    base = ReSVConfig()
    for cfg in (base, dataclasses.replace(base, score="raw"), dataclasses.replace(base, granularity="layer"),
                dataclasses.replace(base, granularity="q_head"), dataclasses.replace(base, hash_mode="concat"),
                dataclasses.replace(base, code_rule="mean")):
        table = HashClusterTable(2, 16, cfg)
        for _ in range(2):
            table.add_frame(torch.randn(2, 5, 16, generator=g))
        q = torch.randn(4, 3, 16, generator=g)
        select_tokens(q, table)
        if cfg.score == "softmax":  # the integer rule quantises softmax numerators in [0, 1]
            select_tokens(q, table, quant_bits=16)
        select_tokens(q, table, candidates=torch.arange(2, 8))
        select_tokens(q, table, candidates=torch.tensor([1, 4, 6]))
    return time.perf_counter() - t0


if __name__ == "__main__":
    print(f"vrex_lib.resv.warm: ReSV kernels ready ({warm_up():.1f} s)")
