"""Analytic cycle models of the DRE blocks, equal to the MyHDL simulations' cycle counts (tests check it).

The performance simulator takes DRE latency from here (cycles / ``VRexCoreConfig.freq_hz``, 800 MHz).

* HCU (hcu.py): token t scans ``max(1, ceil(n_t / N_HCU-w))`` rows of the key-cache hash-bit memory, n_t being
  the clusters that exist before t (old ones plus those opened earlier in the frame); +1 cycle to finish.
  Exact given the n_t sequence (:func:`hcu_cycles_trace`). Beyond the 4 KB memory (1024 codes) the table is
  tiled: each tile is loaded once per 32-token batch (tile-outer order keeps the per-token nearest cluster in
  registers), costing ``depth·code_bytes / dma_width_bytes`` cycles per tile — analytic only, the MyHDL
  model holds one tile.
* WTU (wtu.py), per row of n clusters, G = ceil(n / N_WTU-w):
  ``G (PRE) + 1 (TH) + scans·G (WALK) + resolve_rows (RES_G) + resolve_lanes (RES_L) + G (MARK) + 1 (FIN)``,
  exact given the data-dependent scans / resolve counts (:func:`wtu_row_cycles`).
* KVMU (kvmu.py): one cluster per cycle + 1.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from ..config import VRexCoreConfig


def _ceil(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def hcu_cycles_trace(n_before: Sequence[int], cfg: VRexCoreConfig | None = None) -> int:
    """Exact HCU cycles of one frame (<= one tile) from the cluster count before each token."""
    lanes = (cfg or VRexCoreConfig()).n_hcu_w
    return sum(max(1, _ceil(n, lanes)) for n in n_before) + 1


def hcu_cycles(n_new_tokens: int, n_clusters: int, cfg: VRexCoreConfig | None = None, n_opened: int = 0,
               code_bits: int = 32, dma_width_bytes: int = 64) -> int:
    """HCU cycles for a frame of ``n_new_tokens`` against ``n_clusters`` existing clusters.

    Exact when ``n_opened`` = 0 (no new cluster) and the table fits one tile. With ``n_opened`` new clusters
    it is an upper bound (as if they were opened by the first tokens); tiles add their load cycles.
    """
    cfg = cfg or VRexCoreConfig()
    if n_new_tokens <= 0:
        return 0
    n_before = [n_clusters + min(t, n_opened) for t in range(n_new_tokens)]
    cyc = sum(max(1, _ceil(n, cfg.n_hcu_w)) for n in n_before)
    depth = cfg.hcu_key_hash_bytes * 8 // code_bits
    tiles = _ceil(n_clusters + n_opened, depth)
    batch = cfg.hcu_cur_hash_bytes * 8 // code_bits
    if tiles > 1:
        tile_load = _ceil(depth * code_bits // 8, dma_width_bytes)
        cyc += tiles * tile_load * _ceil(n_new_tokens, batch)
    return cyc + 1


def wtu_row_cycles(n_clusters: int, scans: int, resolve_rows: int, resolve_lanes: int,
                   cfg: VRexCoreConfig | None = None) -> int:
    """Exact WTU cycles of one row (see module docstring)."""
    G = _ceil(n_clusters, (cfg or VRexCoreConfig()).n_wtu_w)
    return G * (2 + int(scans)) + 2 + int(resolve_rows) + int(resolve_lanes)


# Mean WALK bucket scans per row of the WTU on the recorded real rows (SmolLM2-135M keys/queries,
# data/traces/dre_traces.npz, 810 text rows, Th_r-wics = 0.3, 16 buckets), measured by simulating the MyHDL WTU;
# tests/test_hw.py recomputes both means with the RTL-free walk model vrex_lib.hw.walk.wtu_walk_ref (and checks
# the RTL against that model). Notebook 04 reports the distribution; bucket rules: docs/DECISIONS.md D82-D83.
MEASURED_SCANS_PER_ROW = 1.3975  # 1132 scans / 810 text rows
MEASURED_RESOLVE_PER_ROW = 3.7531  # 3040 RES_G + RES_L cycles / 810 text rows (upper bound per row: G + N_WTU-w)


def wtu_cycles(n_rows: int, n_clusters: int, n_scans: float = MEASURED_SCANS_PER_ROW,
               cfg: VRexCoreConfig | None = None, resolve: float | None = MEASURED_RESOLVE_PER_ROW) -> int:
    """WTU cycles of ``n_rows`` rows of ``n_clusters`` clusters with ``n_scans`` bucket scans per row on average.

    The early exit shows up as few scans (the walk stops at the bucket that crosses Th_wics). ``resolve`` (RES_G +
    RES_L cycles per row) defaults to the measured mean; None gives its upper bound G + N_WTU-w. ``n_wtu_h`` cores
    share the rows.
    (Parameter names avoid 'tok'/'row'/'cl' substrings except the first two, for vrex_lib.perf's name mapping.)
    """
    cfg = cfg or VRexCoreConfig()
    if n_rows <= 0 or n_clusters <= 0:
        return 0
    G = _ceil(n_clusters, cfg.n_wtu_w)
    res = G + cfg.n_wtu_w if resolve is None else resolve
    per_row = G * (2 + n_scans) + 2 + res
    return int(math.ceil(_ceil(n_rows, cfg.n_wtu_h) * per_row))


def kvmu_cycles(n_clusters: int) -> int:
    """KVMU cycles to turn one selection of ``n_clusters`` into its request stream."""
    return int(n_clusters) + 1 if n_clusters > 0 else 0


def cycles_to_us(cycles: float, cfg: VRexCoreConfig | None = None) -> float:
    return float(cycles) / (cfg or VRexCoreConfig()).freq_hz * 1e6
