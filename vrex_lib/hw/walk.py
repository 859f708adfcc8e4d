"""The WTU's early-exit bucket walk (Fig. 11) as plain Python over one row: the reference of the selection, the
bucket scans and the cycles that the RTL of ``wtu.py`` must reproduce (no RTL involved).

Bucket rules: ``docs/DECISIONS.md D82`` (widths, the walk) and D83 (exact resolution of the crossing bucket).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import VRexCoreConfig
from . import fixedpoint as fx
from . import timing
from .wtu import WTUParams


@dataclass
class WalkRef:
    """What the WTU's FSM does on one row, computed from its algorithm (no RTL): the selection, the WALK bucket
    scans and the RES_G / RES_L cycles that resolve the crossing bucket."""

    selected: np.ndarray
    scans: int
    resolve_rows: int
    resolve_lanes: int
    cycles: int
    buckets: list = field(default_factory=list)  # (s, lo, bucket Σ w·c, crossed) per scan


def _resolve(w: list[int], prod: list[int], lo: int, s: int, acc: int, th: int, lanes: int) -> tuple[int, int, int]:
    """RES_G (whole rows of the crossing weight) then RES_L (lane by lane): (rows, lanes, j_cut)."""
    n, hi = len(w), lo + (1 << s)
    res_rows = res_lanes = 0
    for g in range(-(-n // lanes)):
        res_rows += 1
        rs = sum(prod[j] for j in range(g * lanes, min(n, (g + 1) * lanes)) if lo <= w[j] < hi)
        if acc + rs > th:
            for k in range(lanes):
                res_lanes += 1
                j = g * lanes + k
                lp = prod[j] if j < n and lo <= w[j] < hi else 0
                if acc + lp > th:
                    return res_rows, res_lanes, j
                acc += lp
            break
        acc += rs
    return res_rows, res_lanes, -1


def wtu_walk_ref(weights: np.ndarray, counts: np.ndarray, ratio_q: int, p: WTUParams = WTUParams()) -> WalkRef:
    """The early-exit bucket walk of ``wtu.py`` (Fig. 11; refinement and index resolution as in
    ``docs/DECISIONS.md D82``) written as plain Python over one row ``(weights [n], counts [n])``."""
    w = [int(x) for x in weights]
    c = [int(x) for x in counts]
    n, NB = len(w), p.n_buckets
    nbb = (NB - 1).bit_length()
    prod = [a * b for a, b in zip(w, c)]
    total, mn, mx = sum(prod), min(w), max(w)
    th = fx.threshold(total, ratio_q)
    rng = mx - mn
    s = next(i for i in range(fx.W_BITS + 1) if (rng >> i) < NB)
    lo = mn + ((rng >> s) << s)
    acc, scans, buckets = 0, 0, []
    wstar, all_sel = None, False
    while True:
        hi = lo + (1 << s)
        inb = [j for j in range(n) if lo <= w[j] < hi]
        tot = sum(prod[j] for j in inb)
        scans += 1
        crossed = acc + tot > th
        buckets.append((s, lo, tot, crossed))
        if crossed:
            vmax, vmin = max(w[j] for j in inb), min(w[j] for j in inb)
            if vmin == vmax:
                wstar = vmax
                break
            s = max(0, s - nbb)
            lo = mn + (((vmax - mn) >> s) << s)
        else:
            acc += tot
            below = [w[j] for j in range(n) if w[j] < lo]
            if not below:
                all_sel = True
                break
            lo = mn + (((max(below) - mn) >> s) << s)
    res_rows, res_lanes, jcut = (0, 0, -1) if all_sel else _resolve(w, prod, lo, s, acc, th, p.lanes)
    sel = np.array([all_sel or w[j] > wstar or (w[j] == wstar and j <= jcut) for j in range(n)], dtype=bool)
    cyc = timing.wtu_row_cycles(n, scans, res_rows, res_lanes, VRexCoreConfig(n_wtu_w=p.lanes))
    return WalkRef(sel, scans, res_rows, res_lanes, cyc, buckets)
