"""The V-Rex LXE per core: the DPE's 64 x 64 MAC trees, the 64-lane VPE and the core's DRAM/NoC port
(docs/PERF_MODEL.md, docs/DECISIONS.md D101-D102).

**GEMM on the DPE.** A MAC tree takes 64 inputs per cycle; the 64 trees of a core hold one 64 (K) x 64 (N) weight
tile (8 KiB in BF16) and consume one input row per cycle, so a tile is used for ``rows`` cycles while the next tile
streams in through the core's port (double-buffered): a tile costs ``max(rows, tile_bytes / port_bytes_per_cycle)``
cycles. Tiles ``ceil(K/64) x ceil(N/64)`` are dealt to the cores in turn (partial sums reduced over the NoC), so the
busiest core holds ``ceil(tiles / cores)``. The MAC utilisation of the DPE follows from the tile shape: a 10-token
frame keeps each tile for 10 of the 128 cycles its load takes at 64 B/cycle (7.8 %).

**Vector work on the VPE.** Softmax, RMSNorm/LayerNorm, SiLU-gate, GELU, RoPE and residual adds cost lane-ops per
element (:mod:`vrex_lib.perf.constants`, ``vrex.vpe_ops.*``) on ``n_vpe_w`` lanes per core, all cores in parallel.

An op's time is ``max(DRAM time, DPE time, VPE time)``: the LXE streams tiles through the DPE and its results
through the VPE (pipelined, as in the LPU), the DRAM time comes from :mod:`vrex_lib.perf.dram`.

    gemm_core_cycles(Gemm(10, 4096, 4096), n_cores=8, port_bytes_per_cycle=64)   # (65536 cycles, 0.078)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import VRexCoreConfig
from .constants import const
from .model_ops import BF16, Gemm

VPE_KINDS: tuple[str, ...] = ("softmax", "rmsnorm", "layernorm", "silu_mul", "gelu", "rope", "residual")


def vpe_lane_ops(elems: dict[str, float]) -> float:
    """Lane-ops of ``elems`` ({kind: elements}) at the cited per-element costs; unknown kinds are an error."""
    bad = sorted(set(elems) - set(VPE_KINDS))
    if bad:
        raise ValueError(f"unknown VPE op kind(s) {bad}: choose from {', '.join(VPE_KINDS)}")
    return sum(n * const(f"vrex.vpe_ops.{k}") for k, n in elems.items())


def tile_cycles(rows: int, port_bytes_per_cycle: float, tile: int = 64) -> float:
    """Cycles one weight tile occupies the DPE: ``max(rows, tile^2 x 2 B / port)`` (double-buffered load)."""
    if rows < 1 or port_bytes_per_cycle <= 0:
        raise ValueError(f"tile_cycles: rows >= 1 and port > 0 (got {rows}, {port_bytes_per_cycle})")
    return max(float(rows), tile * tile * BF16 / port_bytes_per_cycle)


@dataclass(frozen=True)
class GemmCost:
    """One GEMM on the LXE: the busiest core's cycles, its MAC utilisation, tiles per core and weight bytes it
    pulls through its port."""

    cycles: float
    utilisation: float
    tiles_busiest: int
    port_bytes_busiest: float


def gemm_core_cycles(g: Gemm, n_cores: int, port_bytes_per_cycle: float, tile: int = 64) -> GemmCost:
    """Cost of ``g.count`` independent GEMMs ``[rows, k] x [k, n]`` on ``n_cores`` cores (see the module docstring).

    Utilisation = useful MACs / (busiest core's cycles x tile^2 MAC trees x cores)."""
    if n_cores < 1:
        raise ValueError(f"gemm_core_cycles: n_cores must be >= 1, got {n_cores}")
    tiles = math.ceil(g.k / tile) * math.ceil(g.n / tile) * g.count
    busiest = math.ceil(tiles / n_cores)
    cyc = busiest * tile_cycles(g.rows, port_bytes_per_cycle, tile)
    useful = float(g.rows) * g.k * g.n * g.count
    util = useful / (cyc * tile * tile * n_cores) if cyc > 0 else 0.0
    return GemmCost(cyc, util, busiest, busiest * tile * tile * BF16)


@dataclass(frozen=True)
class LxeTime:
    """Seconds of one op on the LXE by resource, the op's time (their max) and what limits it."""

    dram_s: float
    dpe_s: float
    vpe_s: float

    @property
    def time_s(self) -> float:
        return max(self.dram_s, self.dpe_s, self.vpe_s)

    @property
    def limit(self) -> str:
        return max((("dram", self.dram_s), ("dpe", self.dpe_s), ("vpe", self.vpe_s)), key=lambda x: x[1])[0]


def lxe_time(gemms: tuple[Gemm, ...], vpe: dict[str, float], dram_s: float, core: VRexCoreConfig,
             n_cores: int, port_bytes_per_cycle: float) -> LxeTime:
    """One op: its GEMMs on the DPE (one after another on every core, each core's weight tiles through its
    ``port_bytes_per_cycle`` port), its vector work on the VPE, and its DRAM time (given, from
    :mod:`vrex_lib.perf.dram`)."""
    port = port_bytes_per_cycle
    dpe_cyc = sum(gemm_core_cycles(g, n_cores, port).cycles for g in gemms)
    lanes = core.n_vpe_h * core.n_vpe_w * n_cores
    vpe_cyc = vpe_lane_ops(vpe) / lanes if vpe else 0.0
    return LxeTime(dram_s, dpe_cyc / core.freq_hz, vpe_cyc / core.freq_hz)
