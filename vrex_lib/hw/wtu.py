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

Sub-blocks (``docs/DECISIONS.md D152``; each with its own testbench in ``tests/test_hw_blocks.py``):
:func:`valid_lanes`, :func:`row_reduce` (the lanes), :func:`preprocess` (PRE, TH), :func:`bucket_walk` with
:func:`walk_merge` (WALK, the bucket-range updater, Acc), :func:`resolve` (RES_G, RES_L), :func:`aggregate` (MARK,
the aggregator) and :func:`control` (state, row-group counter); :func:`wtu` wires them to the memories.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from myhdl import (ResetSignal, Signal, SignalType, StopSimulation, always_comb, always_seq, block, downrange,
                   instance, intbv)

from ..config import VRexCoreConfig
from ._sim import clock_driver, io_monitor, reset_pulse
from .fixedpoint import C_BITS, RATIO_FRAC_BITS, W_BITS, acc_bits
from .harness import pack_lanes
from .memories import ram

Sig = SignalType  # the type of a block port: a MyHDL signal


@dataclass(frozen=True)
class WTUParams:
    """Sizes of one WTU core. ``n_buckets`` must be a power of two (bucket widths are powers of two)."""

    n_max: int = 4096
    lanes: int = 16
    n_buckets: int = 16

    @classmethod
    def from_core(cls, cfg: VRexCoreConfig | None = None, n_buckets: int = 16) -> "WTUParams":
        cfg = cfg or VRexCoreConfig()
        return cls(cfg.wtu_score_bytes * 8 // W_BITS, cfg.n_wtu_w, n_buckets)

    @property
    def memory_bits(self) -> int:
        """Score + count memories (the selection/aggregate bitmasks are registers, counted as flip-flops)."""
        return self.n_max * (W_BITS + C_BITS)

    @property
    def rows(self) -> int:
        """Memory rows of ``lanes`` entries."""
        return self.n_max // self.lanes

    @property
    def row_bits(self) -> int:
        """Width of a row address."""
        return max(1, (self.rows - 1).bit_length())

    @property
    def lane_bits(self) -> int:
        return max(1, (self.lanes - 1).bit_length())

    def check(self) -> None:
        for name in ("lanes", "n_buckets"):
            v = getattr(self, name)
            if v < 2 or v & (v - 1):
                raise ValueError(f"WTUParams.{name}={v} must be a power of two >= 2")
        if self.n_max % self.lanes:
            raise ValueError(f"WTUParams.n_max={self.n_max} must be a multiple of lanes={self.lanes}")


IDLE, PRE, TH, WALK, RESG, RESL, MARK, FIN = range(8)
STATE_NAMES = ["IDLE", "PRE", "TH", "WALK", "RES_G", "RES_L", "MARK", "FIN"]
WMASK = (1 << W_BITS) - 1
SHIFT_BITS = (W_BITS + 1).bit_length()  # bucket width exponents s = 0..16
LO_BITS = W_BITS + 1  # bucket bounds up to 2^17


# ---------------------------------------------------------------------------------------------- lanes
@block
def valid_lanes(n: Sig, g: Sig, vmask: Sig, p: WTUParams):
    """``vmask[k]``: entry ``g·lanes + k`` of the row group ``g`` is one of the row's ``n`` entries."""
    L = p.lanes
    NNB = p.n_max.bit_length()

    @always_comb
    def mask():
        lim = intbv(0)[NNB:]
        m = intbv(0)[L:]
        if n > g * L:
            lim[:] = n - g * L
        for k in range(L):
            if k < lim:
                m[k] = 1
        vmask.next = m

    return mask


@block
def row_reduce(state: Sig, srow: Sig, crow: Sig, vmask: Sig, lo: Sig, hi: Sig, lane: Sig, r_sum: Sig, r_min: Sig,
               r_max: Sig, r_bmax: Sig, r_bmin: Sig, r_nxt: Sig, r_nxt_v: Sig, r_lane: Sig, p: WTUParams):
    """The ``lanes`` entries of one row group (scores ``srow``, counts ``crow``, valid ``vmask``): per lane a
    16x16 multiplier and the upper/lower bucket sorters ``lo <= w < hi``; an adder tree and min/max trees.

    In PRE ``r_sum`` = Σ w·c over the valid lanes; otherwise Σ w·c of the lanes inside the bucket, with the
    bucket's max/min weight (``r_bmax``/``r_bmin``), the largest weight below it (``r_nxt``, valid
    ``r_nxt_v``) and the product of lane ``lane`` (``r_lane``, for RES_L). ``r_min``/``r_max``: over the
    valid lanes.
    """
    L, WB, AB = p.lanes, W_BITS, acc_bits(p.n_max)
    CMASK = (1 << C_BITS) - 1

    @always_comb
    def lanes():
        w = intbv(0)[WB:]
        c = intbv(0)[C_BITS:]
        pr = intbv(0)[2 * WB:]
        tot = intbv(0)[AB:]
        vmin = intbv(WMASK)[WB:]
        vmax = intbv(0)[WB:]
        inmax = intbv(0)[WB:]
        inmin = intbv(WMASK)[WB:]
        bl = intbv(0)[WB:]
        blv = False
        lp = intbv(0)[2 * WB:]
        for k in range(L):
            w[:] = (srow >> (k * WB)) & WMASK
            c[:] = (crow >> (k * C_BITS)) & CMASK
            pr[:] = w * c
            if vmask[k]:
                if w < vmin:
                    vmin[:] = w
                if w > vmax:
                    vmax[:] = w
                if state == PRE:
                    tot[:] = tot + pr
                elif w >= lo and w < hi:  # upper and lower bucket sorters
                    tot[:] = tot + pr
                    if w > inmax:
                        inmax[:] = w
                    if w < inmin:
                        inmin[:] = w
                    if k == lane:
                        lp[:] = pr
                elif w < lo:
                    if not blv or w > bl:
                        bl[:] = w
                    blv = True
        r_sum.next = tot
        r_min.next = vmin
        r_max.next = vmax
        r_bmax.next = inmax
        r_bmin.next = inmin
        r_nxt.next = bl
        r_nxt_v.next = blv
        r_lane.next = lp

    return lanes


# ------------------------------------------------------------------------------------- sequential parts
@block
def preprocess(clk: Sig, rst: Sig, state: Sig, start: Sig, ratio: Sig, r_sum: Sig, r_min: Sig, r_max: Sig, tsum: Sig,
               mn: Sig, mx: Sig, th: Sig, p: WTUParams):
    """PRE: Sum = Σ w·c, min and max over the row, one row group per cycle; TH: Th_wics = (Sum · r_q) >> 16."""
    AB = acc_bits(p.n_max)

    @always_seq(clk.posedge, reset=rst)
    def seq():
        prod = intbv(0)[AB + RATIO_FRAC_BITS + 1:]
        if state == IDLE:
            if start:
                tsum.next = 0
                mn.next = WMASK
                mx.next = 0
        elif state == PRE:
            tsum.next = tsum + r_sum
            if r_min < mn:
                mn.next = r_min
            if r_max > mx:
                mx.next = r_max
        elif state == TH:
            prod[:] = tsum * ratio
            th.next = prod >> RATIO_FRAC_BITS

    return seq


@block
def walk_merge(s: Sig, lo: Sig, hi: Sig, bsum: Sig, bmax: Sig, bmin: Sig, nxt: Sig, nxt_v: Sig, acc: Sig, th: Sig,
               r_sum: Sig, r_bmax: Sig, r_bmin: Sig, r_nxt: Sig, r_nxt_v: Sig, t_sum: Sig, t_max: Sig, t_min: Sig,
               t_nxt: Sig, t_nxt_v: Sig, b_cross: Sig, single: Sig):
    """The bucket ``[lo, hi = lo + 2^s)`` and its scan so far merged with the current row group: its Σ w·c
    (``t_sum``), the max/min weight inside the bucket, the largest weight below it (``t_nxt``; ``t_nxt_v``: a
    non-empty bucket lies below); ``b_cross``: Acc + bucket > Th_wics; ``single``: the bucket holds one distinct
    weight."""
    AB = len(bsum)

    @always_comb
    def bounds():
        hi.next = lo + (1 << s)

    @always_comb
    def merge():
        tot = intbv(0)[AB:]
        vmax = intbv(0)[W_BITS:]
        vmin = intbv(0)[W_BITS:]
        tot[:] = bsum + r_sum
        vmax[:] = bmax
        if r_bmax > bmax:
            vmax[:] = r_bmax
        vmin[:] = bmin
        if r_bmin < bmin:
            vmin[:] = r_bmin
        t_sum.next = tot
        t_max.next = vmax
        t_min.next = vmin
        b_cross.next = acc + tot > th
        single.next = vmin == vmax
        if r_nxt_v and (not nxt_v or r_nxt > nxt):
            t_nxt.next = r_nxt
        else:
            t_nxt.next = nxt
        t_nxt_v.next = nxt_v or r_nxt_v

    return bounds, merge


@block
def bucket_walk(clk: Sig, rst: Sig, state: Sig, start: Sig, g: Sig, gmax: Sig, mn: Sig, mx: Sig, th: Sig, r_sum: Sig,
                r_bmax: Sig, r_bmin: Sig, r_nxt: Sig, r_nxt_v: Sig, r_lane: Sig, g_cross: Sig, l_cross: Sig, s: Sig,
                lo: Sig, hi: Sig, acc: Sig, bsum: Sig, bmax: Sig, bmin: Sig, nxt: Sig, nxt_v: Sig, wstar: Sig,
                all_sel: Sig, scans: Sig, b_cross: Sig, single: Sig, more: Sig, p: WTUParams):
    """The bucket walk of Fig. 11 and the bucket-range updater (``docs/DECISIONS.md D82``). TH: buckets of
    width 2^s over [min, max], the first at the maximum. WALK, one scan of the row per bucket: a crossing bucket
    with one distinct weight fixes w* (then RES_G); one with several is refined into ``n_buckets`` sub-buckets
    from its maximum; a bucket that does not cross is accumulated into Acc and the walk jumps to the bucket of
    the largest weight below it, or, with none below, selects every entry. Acc keeps accumulating in RES_G and
    RES_L (``resolve``) until its crossing entry."""
    NB, WB = p.n_buckets, W_BITS
    NBB = (NB - 1).bit_length()
    t_sum = Signal(intbv(0)[len(bsum):])
    t_max, t_min, t_nxt = (Signal(intbv(0)[WB:]) for _ in range(3))
    merge = walk_merge(s, lo, hi, bsum, bmax, bmin, nxt, nxt_v, acc, th, r_sum, r_bmax, r_bmin, r_nxt, r_nxt_v,
                       t_sum, t_max, t_min, t_nxt, more, b_cross, single)

    @always_seq(clk.posedge, reset=rst)
    def seq():
        rng = intbv(0)[WB:]
        sh = intbv(0)[SHIFT_BITS:]
        if state == IDLE:
            if start:
                scans.next = 0
        elif state == TH:
            rng[:] = mx - mn
            sh[:] = WB
            for i in downrange(WB + 1):  # smallest s with (max - min) >> s < n_buckets
                if (rng >> i) < NB:
                    sh[:] = i
            s.next = sh
            lo.next = mn + ((rng >> sh) << sh)
            acc.next = 0
            all_sel.next = 0
            wstar.next = 0
        elif state == WALK:
            if g != gmax:
                bsum.next = t_sum
                bmax.next = t_max
                bmin.next = t_min
                nxt.next = t_nxt
                nxt_v.next = more
            else:
                scans.next = scans + 1
                if b_cross:
                    if single:  # one distinct weight in the bucket (always so at width 1): by index
                        wstar.next = t_max
                    else:  # refine the crossing bucket, starting at the sub-bucket of its maximum
                        sh[:] = 0
                        if s > NBB:
                            sh[:] = s - NBB
                        s.next = sh
                        rng[:] = t_max - mn
                        lo.next = mn + ((rng >> sh) << sh)
                else:
                    acc.next = acc + t_sum
                    if more:  # next non-empty bucket below
                        rng[:] = t_nxt - mn
                        lo.next = mn + ((rng >> s) << s)
                    else:  # walked everything without exceeding Th: select all
                        all_sel.next = 1
        elif state == RESG:
            if not g_cross:
                if g == gmax:  # unreachable when the bucket crossed; kept safe
                    all_sel.next = 1
                else:
                    acc.next = acc + r_sum
        elif state == RESL:
            if not l_cross:
                acc.next = acc + r_lane
        if state == TH or (state == WALK and g == gmax):  # a fresh scan starts
            bsum.next = 0
            bmax.next = 0
            bmin.next = WMASK
            nxt.next = 0
            nxt_v.next = 0

    return merge, seq


@block
def resolve(clk: Sig, rst: Sig, state: Sig, g: Sig, acc: Sig, th: Sig, r_sum: Sig, r_lane: Sig, lane: Sig, jcut: Sig,
            g_cross: Sig, l_cross: Sig, p: WTUParams):
    """Exact resolution of a crossing bucket that holds one weight w* (``docs/DECISIONS.md D83``): RES_G walks
    whole row groups in index order until one takes Acc above Th_wics (``g_cross``), RES_L then walks that
    group lane by lane until the crossing entry (``l_cross``): its index is ``j_cut``."""
    L = p.lanes

    @always_comb
    def compare():
        g_cross.next = acc + r_sum > th
        l_cross.next = acc + r_lane > th

    @always_seq(clk.posedge, reset=rst)
    def seq():
        if state == TH:
            jcut.next = 0
        elif state == RESG:
            if g_cross:
                lane.next = 0
        elif state == RESL:
            if l_cross:
                jcut.next = g * L + lane
            else:
                lane.next = lane + 1

    return compare, seq


@block
def aggregate(clk: Sig, state: Sig, g: Sig, raddr: Sig, sel_raddr: Sig, srow: Sig, vmask: Sig, wstar: Sig, jcut: Sig,
              all_sel: Sig, first_r: Sig, sel_rdata: Sig, agg_rdata: Sig, p: WTUParams):
    """MARK, one row group per cycle: the row's selection ``w > w* or (w == w* and j <= j_cut)`` (every valid
    entry when ``all_sel``) into the selection memory, and ORed into the frame's aggregate bitmask (the
    aggregator; ``first_r`` restarts it). ``sel_raddr`` reads both memories (``sel_rdata``, ``agg_rdata``)."""
    L, WB = p.lanes, W_BITS
    NNB = p.n_max.bit_length()
    r_sel, agg_w, agg_cur = (Signal(intbv(0)[L:]) for _ in range(3))
    sel_we = Signal(bool(0))

    @always_comb
    def compare():
        w = intbv(0)[WB:]
        idx = intbv(0)[NNB:]
        sel = intbv(0)[L:]
        for k in range(L):
            w[:] = (srow >> (k * WB)) & WMASK
            idx[:] = g * L + k
            if vmask[k]:
                if all_sel or w > wstar or (w == wstar and idx <= jcut):
                    sel[k] = 1
        r_sel.next = sel

    @always_comb
    def mark():
        sel_we.next = state == MARK
        if first_r:
            agg_w.next = r_sel
        else:
            agg_w.next = agg_cur | r_sel

    selmem = ram(clk, sel_we, g, r_sel, ((sel_raddr, sel_rdata),), p.rows)
    aggmem = ram(clk, sel_we, g, agg_w, ((raddr, agg_cur), (sel_raddr, agg_rdata)), p.rows)
    return compare, mark, selmem, aggmem


@block
def control(clk: Sig, rst: Sig, start: Sig, first: Sig, n: Sig, state: Sig, g: Sig, gmax: Sig, first_r: Sig, done: Sig,
            b_cross: Sig, single: Sig, more: Sig, g_cross: Sig, l_cross: Sig, p: WTUParams):
    """The WTU's state and row-group counter ``g`` (0..``gmax`` = ⌈n / lanes⌉ - 1): IDLE -> PRE -> TH -> WALK
    (one pass over the groups per bucket) -> [RES_G -> RES_L] -> MARK -> FIN (``done``) -> IDLE."""
    LB = (p.lanes - 1).bit_length()

    @always_seq(clk.posedge, reset=rst)
    def fsm():
        done.next = 0
        if state == IDLE:
            if start:
                state.next = PRE
                g.next = 0
                gmax.next = (n - 1) >> LB
                first_r.next = first
        elif state == PRE:
            if g == gmax:
                state.next = TH
            else:
                g.next = g + 1
        elif state == TH:
            g.next = 0
            state.next = WALK
        elif state == WALK:
            if g != gmax:
                g.next = g + 1
            else:
                g.next = 0
                if b_cross and single:
                    state.next = RESG
                elif not b_cross and not more:
                    state.next = MARK
        elif state == RESG:
            if g_cross:
                state.next = RESL
            elif g == gmax:
                g.next = 0
                state.next = MARK
            else:
                g.next = g + 1
        elif state == RESL:
            if l_cross:
                g.next = 0
                state.next = MARK
        elif state == MARK:
            if g == gmax:
                state.next = FIN
            else:
                g.next = g + 1
        else:
            done.next = 1
            state.next = IDLE

    return fsm


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
    L, WB, AB = p.lanes, W_BITS, acc_bits(p.n_max)
    state = Signal(intbv(0)[3:])
    g, gmax, raddr = (Signal(intbv(0)[p.row_bits:]) for _ in range(3))
    lane = Signal(intbv(0)[p.lane_bits:])
    jcut = Signal(intbv(0)[p.n_max.bit_length():])
    tsum, th, acc, bsum, r_sum = (Signal(intbv(0)[AB:]) for _ in range(5))
    mn, mx, bmax, bmin, nxt, wstar = (Signal(intbv(0)[WB:]) for _ in range(6))
    r_min, r_max, r_bmax, r_bmin, r_nxt = (Signal(intbv(0)[WB:]) for _ in range(5))
    nxt_v, r_nxt_v, all_sel, first_r = (Signal(bool(0)) for _ in range(4))
    b_cross, single, more, g_cross, l_cross = (Signal(bool(0)) for _ in range(5))
    s = Signal(intbv(0)[SHIFT_BITS:])
    lo = Signal(intbv(0)[LO_BITS:])
    hi = Signal(intbv(0)[LO_BITS + 1:])
    r_lane = Signal(intbv(0)[2 * WB:])
    scans = Signal(intbv(0)[len(n_scans):])
    srow = Signal(intbv(0)[L * WB:])
    crow = Signal(intbv(0)[L * C_BITS:])
    vmask = Signal(intbv(0)[L:])

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


def wtu_ports(p: WTUParams) -> dict:
    """Fresh top-level signals for :func:`wtu` (also used for conversion)."""
    RB = p.row_bits
    return dict(
        clk=Signal(bool(0)), rst=ResetSignal(0, active=1, isasync=False), start=Signal(bool(0)),
        first=Signal(bool(0)), n=Signal(intbv(0)[p.n_max.bit_length():]),
        ratio=Signal(intbv(0)[RATIO_FRAC_BITS + 1:]),
        s_we=Signal(bool(0)), c_we=Signal(bool(0)), w_addr=Signal(intbv(0)[RB:]),
        s_wdata=Signal(intbv(0)[p.lanes * W_BITS:]), c_wdata=Signal(intbv(0)[p.lanes * C_BITS:]),
        sel_raddr=Signal(intbv(0)[RB:]), sel_rdata=Signal(intbv(0)[p.lanes:]), agg_rdata=Signal(intbv(0)[p.lanes:]),
        busy=Signal(bool(0)), done=Signal(bool(0)), n_scans=Signal(intbv(0)[8:]))


# ---------------------------------------------------------------------------------------- simulation
@dataclass
class WTURowResult:
    selected: np.ndarray  # bool [n]
    cycles: int  # start -> done
    scans: int  # WALK bucket scans
    walk: list = field(default_factory=list)  # per scan: dict(s, lo, hi, bucket_sum, acc_before, th, crossed)
    state_cycles: dict = field(default_factory=dict)  # cycles spent in each FSM state (PRE, WALK, RES_G, ...)


def check_rows(rows: list[tuple[np.ndarray, np.ndarray]], p: WTUParams) -> None:
    """A ValueError for a row the WTU cannot hold: 1..n_max 16-bit weights and as many 16-bit counts."""
    for w, c in rows:
        if not 1 <= len(w) <= p.n_max or len(w) != len(c):
            raise ValueError(f"a WTU row has {len(w)} weights / {len(c)} counts; 1..{p.n_max} equal lengths needed")
        if np.min(w) < 0 or np.max(w) >= 1 << W_BITS or np.min(c) < 0 or np.max(c) >= 1 << C_BITS:
            raise ValueError("WTU rows need 16-bit unsigned weights and counts (fixedpoint.quantize_weights; counts "
                             "clipped to fixedpoint.C_MAX)")


def _padded(v: np.ndarray, groups: int, lanes: int) -> np.ndarray:
    out = np.zeros(groups * lanes, dtype=np.int64)
    out[:len(v)] = v
    return out


def _load_row(P: dict, w: np.ndarray, c: np.ndarray | None, L: int):
    """Testbench step: write one row's scores (and, unless ``c`` is None, its counts) a row group per cycle."""
    G = -(-len(w) // L)
    wpad = _padded(w, G, L)
    cpad = _padded(c, G, L) if c is not None else None
    for r in range(G):
        P["s_we"].next, P["w_addr"].next = 1, r
        P["s_wdata"].next = pack_lanes(wpad[r * L:(r + 1) * L], W_BITS)
        if cpad is not None:
            P["c_we"].next, P["c_wdata"].next = 1, pack_lanes(cpad[r * L:(r + 1) * L], C_BITS)
        yield P["clk"].negedge
    P["s_we"].next, P["c_we"].next = 0, 0


def _read_bits(P: dict, port: str, n: int, L: int, out: list):
    """Testbench step: read ``n`` bits of the selection (``sel_rdata``) or aggregate (``agg_rdata``) memory."""
    G = -(-n // L)
    bits = np.zeros(G * L, dtype=bool)
    for r in range(G):
        P["sel_raddr"].next = r
        yield P["clk"].negedge
        v = int(P[port])
        bits[r * L:(r + 1) * L] = [(v >> k) & 1 for k in range(L)]
    out.append(bits[:n])


def _run_row(P: dict, probe: dict, G: int, trace: bool, out: dict):
    """Testbench step: clock until ``done``; count the cycles per state and, with ``trace``, sample each bucket
    scan at its last row group (before the clock edge that decides it)."""
    cycles, walk, sc = 0, [], {}
    while True:
        st = STATE_NAMES[int(probe["state"])]
        sc[st] = sc.get(st, 0) + 1
        if trace and int(probe["state"]) == WALK and int(probe["g"]) == G - 1:
            tot = int(probe["bsum"]) + int(probe["r_sum"])
            walk.append(dict(s=int(probe["s"]), lo=int(probe["lo"]), hi=int(probe["hi"]), bucket_sum=tot,
                             acc_before=int(probe["acc"]), th=int(probe["th"]),
                             crossed=int(probe["acc"]) + tot > int(probe["th"])))
        yield P["clk"].negedge
        cycles += 1
        if P["done"]:
            break
    out.update(cycles=cycles, walk=walk, state_cycles=sc)


def simulate_wtu(rows: list[tuple[np.ndarray, np.ndarray]], ratio_q: int, p: WTUParams = WTUParams(),
                 trace: bool = False, aggregate: bool = False,
                 record: list | None = None) -> tuple[list[WTURowResult], np.ndarray | None]:
    """Run rows ``(weights [n], counts [n])`` (16-bit integers) through one WTU core.

    Consecutive rows with the same counts array object keep the count memory (one frame's clusters).
    Returns per-row results and, with ``aggregate``, the final aggregate bitmask (OR over all rows, which must
    then share one n). ``trace`` records the bucket walk of every row (Fig. 11); ``record`` receives the port
    values of every cycle (:func:`vrex_lib.hw._sim.io_monitor`).
    """
    check_rows(rows, p)
    P = wtu_ports(p)
    probe: dict = {}
    L = p.lanes
    results: list[WTURowResult] = []
    agg_out: list = []

    @block
    def bench():
        dut = wtu(**P, p=p, probe=probe)
        clkgen = clock_driver(P["clk"])

        @instance
        def tb():
            yield from reset_pulse(P["clk"], P["rst"])
            last_c = None
            for i, (w, c) in enumerate(rows):
                yield from _load_row(P, w, None if c is last_c else c, L)
                last_c = c
                P["n"].next, P["ratio"].next, P["start"].next, P["first"].next = len(w), ratio_q, 1, int(i == 0)
                yield P["clk"].negedge
                P["start"].next = 0
                run, sel = {}, []
                yield from _run_row(P, probe, -(-len(w) // L), trace, run)
                yield from _read_bits(P, "sel_rdata", len(w), L, sel)
                results.append(WTURowResult(sel[0], run["cycles"], int(P["n_scans"]), run["walk"],
                                            run["state_cycles"]))
            if aggregate:
                yield from _read_bits(P, "agg_rdata", len(rows[-1][0]), L, agg_out)
            raise StopSimulation()

        extra = [io_monitor(P, record)] if record is not None else []
        return dut, clkgen, tb, extra

    bench().run_sim(quiet=1)
    return results, (agg_out[0] if aggregate else None)
