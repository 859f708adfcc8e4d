"""WTU — WiCSum Threshold Unit with early-exit bucket sorting (paper §V.B, Fig. 10, Fig. 11), in MyHDL.

Hardware (N_WTU-w = ``lanes`` = 16 entries per cycle; all sizes parameters):

* score memory and token-count memory: ``n_max`` 16-bit entries each (4096 x 16 b = 8 KB each), stored as rows
  of ``lanes`` entries so one row is read per cycle;
* per lane: a 16x16 multiplier (w·c), the upper and lower bucket sorters (``w < hi``, ``w >= lo``) producing
  the bitmask of the entries in the current bucket, and max comparators; an adder tree over the lanes;
* the preprocess step (PRE): Sum = Σ w·c, min, max over the row, then Th_wics = (Sum·r_q) >> 16 (TH);
* the bucket walk (WALK, Fig. 11; bucket widths ``docs/DECISIONS.md D82``): buckets of width 2^s over [min, max],
  walked from the highest; one row
  scan per bucket accumulates the bucket's Σ w·c; if ``Acc + bucket > Th`` the walk exits from this bucket,
  else it is accumulated and the *bucket-range updater* jumps straight to the bucket holding the largest
  weight below it (tracked during the scan, so empty buckets are never scanned);
* exact resolution of the crossing bucket (``docs/DECISIONS.md D83``; the paper does not say how ties inside a
  bucket are resolved): a crossing bucket of width 2^s > 1 is refined into ``n_buckets`` sub-buckets (s -= log2
  n_buckets), again starting at the sub-bucket holding the bucket's maximum; a crossing bucket of width 1
  holds a single weight w*, whose entries are walked in index order — first a row at a time (RES_G), then
  lane by lane inside the crossing row (RES_L) — to find the last selected index j_cut. This reproduces the
  minimal-prefix rule (descending weight, ties -> lower index, stop at the first Acc > Th) bit for bit;
* MARK: one pass writes the row's selected bitmask ``w > w* or (w == w* and j <= j_cut)`` into the selection
  memory, and the aggregator ORs it into the selected-cluster bitmask of the frame (``first`` clears it).

If no prefix exceeds Th (possible only when Sum = 0 or r_q = 2^16), every valid entry is selected.
Cycle schedule per row (timing.wtu_row_cycles, tested equal): G (PRE) + 1 (TH) + scans·G (WALK) + RES_G rows
+ RES_L lanes + G (MARK) + 1 (FIN), with G = ceil(n / lanes); loading the row (LXE writes) is not counted.

Three modules (``docs/DECISIONS.md D152``): :mod:`vrex_lib.hw.wtu_blocks` holds the sub-blocks, each with its
testbench beside it -- ``valid_lanes``, ``row_reduce`` (the lanes), ``preprocess`` (PRE, TH), ``bucket_walk`` with
``walk_merge`` (WALK, the bucket-range updater, Acc), ``resolve`` (RES_G, RES_L), ``aggregate`` (MARK, the
aggregator) and ``control`` (state, row-group counter); this module is the top, :func:`wtu`, which wires them to the
memories, and its ports; :mod:`vrex_lib.hw.wtu_driver` runs rows through it
(:func:`~vrex_lib.hw.wtu_driver.simulate_wtu`).
"""
from __future__ import annotations

from myhdl import Signal, always_comb, block, intbv

from .memories import ram
from .wtu_blocks import (IDLE, WTUParams, aggregate, bucket_walk, control, preprocess, resolve, row_reduce,
                         signal_widths, valid_lanes, wtu_signal)

__all__ = ["WTUParams", "wtu", "wtu_ports"]


# ------------------------------------------------------------------------------------------------- top
@block
def wtu(clk, rst, start, first, n, ratio, s_we, c_we, w_addr, s_wdata, c_wdata, sel_raddr, sel_rdata, agg_rdata,
        busy, done, n_scans, p: WTUParams = WTUParams(), probe: dict | None = None):
    """One WTU core. Ports: ``start`` processes the row in the score memory (``n`` valid entries, 1..n_max) with
    ratio ``r_q`` (Q0.16); ``first`` (sampled with start) restarts the aggregate bitmask. ``s_we/c_we`` write one
    row of ``lanes`` scores/counts at ``w_addr`` (idle only). ``sel_raddr`` reads a row of the row's selection
    bitmask (``sel_rdata``) and of the aggregate (``agg_rdata``). ``n_scans`` counts WALK bucket scans.
    ``probe`` (simulation only) receives the internal signals for tracing the bucket walk.
    """
    p.check()
    bits = signal_widths(p, scan_bits=len(n_scans))  # one width table, shared with the sub-blocks' testbenches

    def wire(name: str) -> Signal:
        return Signal(bool(0)) if bits[name] == 1 else Signal(intbv(0)[bits[name]:])

    # Named locals (not a dict): the converted Verilog names its wires after them.
    state, g, gmax, raddr, lane, jcut = (wire(k) for k in ("state", "g", "gmax", "raddr", "lane", "jcut"))
    tsum, th, acc, bsum, r_sum = (wire(k) for k in ("tsum", "th", "acc", "bsum", "r_sum"))
    mn, mx, bmax, bmin, nxt, wstar = (wire(k) for k in ("mn", "mx", "bmax", "bmin", "nxt", "wstar"))
    r_min, r_max, r_bmax, r_bmin, r_nxt = (wire(k) for k in ("r_min", "r_max", "r_bmax", "r_bmin", "r_nxt"))
    nxt_v, r_nxt_v, all_sel, first_r = (wire(k) for k in ("nxt_v", "r_nxt_v", "all_sel", "first_r"))
    b_cross, single, more, g_cross, l_cross = (wire(k) for k in ("b_cross", "single", "more", "g_cross", "l_cross"))
    s, lo, hi, r_lane, scans = (wire(k) for k in ("s", "lo", "hi", "r_lane", "scans"))
    srow, crow, vmask = (wire(k) for k in ("srow", "crow", "vmask"))

    smem = ram(clk, s_we, w_addr, s_wdata, ((raddr, srow),), p.rows)
    cmem = ram(clk, c_we, w_addr, c_wdata, ((raddr, crow),), p.rows)

    @always_comb
    def addr_mux():
        if state == IDLE:
            raddr.next = w_addr
        else:
            raddr.next = g

    mask = valid_lanes(n, g, vmask, p)
    lanes = row_reduce(state, srow, crow, vmask, lo, hi, lane, r_sum, r_min, r_max, r_bmax, r_bmin, r_nxt, r_nxt_v,
                       r_lane, p)
    pre = preprocess(clk, rst, state, start, ratio, r_sum, r_min, r_max, tsum, mn, mx, th, p)
    walk = bucket_walk(clk, rst, state, start, g, gmax, mn, mx, th, r_sum, r_bmax, r_bmin, r_nxt, r_nxt_v, r_lane,
                       g_cross, l_cross, s, lo, hi, acc, bsum, bmax, bmin, nxt, nxt_v, wstar, all_sel, scans, b_cross,
                       single, more, p)
    res = resolve(clk, rst, state, g, acc, th, r_sum, r_lane, lane, jcut, g_cross, l_cross, p)
    agg = aggregate(clk, state, g, raddr, sel_raddr, srow, vmask, wstar, jcut, all_sel, first_r, sel_rdata,
                    agg_rdata, p)
    ctrl = control(clk, rst, start, first, n, state, g, gmax, first_r, done, b_cross, single, more, g_cross, l_cross,
                   p)

    @always_comb
    def status():
        busy.next = state != IDLE
        n_scans.next = scans

    if probe is not None:
        probe.update(state=state, g=g, s=s, lo=lo, hi=hi, acc=acc, bsum=bsum, th=th, tsum=tsum, mn=mn, mx=mx,
                     r_sum=r_sum, wstar=wstar, jcut=jcut, lane=lane, all_sel=all_sel)
    return smem, cmem, addr_mux, mask, lanes, pre, walk, res, agg, ctrl, status


#: The top's ports, in :func:`wtu`'s order.
PORTS: tuple[str, ...] = ("clk", "rst", "start", "first", "n", "ratio", "s_we", "c_we", "w_addr", "s_wdata", "c_wdata",
                          "sel_raddr", "sel_rdata", "agg_rdata", "busy", "done", "n_scans")


def wtu_ports(p: WTUParams) -> dict:
    """Fresh top-level signals for :func:`wtu` (also used for conversion), at :func:`signal_widths`' widths."""
    return {k: wtu_signal(p, k) for k in PORTS}
