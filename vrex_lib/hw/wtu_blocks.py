"""The WTU's sub-blocks (paper §V.B, Fig. 10-11; docs/DECISIONS.md D152), in MyHDL, each with its testbench beside it.

:func:`valid_lanes`, :func:`row_reduce` (the lanes: multipliers, bucket sorters, adder and min/max trees),
:func:`preprocess` (PRE, TH), :func:`bucket_walk` with :func:`walk_merge` (WALK, the bucket-range updater, Acc),
:func:`resolve` (RES_G, RES_L), :func:`aggregate` (MARK, the aggregator) and :func:`control` (state, row-group
counter). :mod:`vrex_lib.hw.wtu` wires them to the memories (the top); :mod:`vrex_lib.hw.wtu_driver` runs rows
through the top. The unit's behaviour, cycle schedule and the bucket-walk rules are described in
:mod:`vrex_lib.hw.wtu`.

Every block ``X`` has a testbench ``X_bench(p, steps)`` right after it: it builds the block's ports at the widths
the top gives them (:func:`signal_widths`), applies each step's inputs (a combinational block settles, a clocked
one gets one rising edge) and returns the named outputs per step; tests/test_hw_blocks.py checks them against
values worked out by hand.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

from myhdl import ResetSignal, Signal, SignalType, always_comb, always_seq, block, downrange, intbv

from ..config import VRexCoreConfig
from ._sim import drive_clocked, drive_comb
from .fixedpoint import C_BITS, RATIO_FRAC_BITS, W_BITS, acc_bits
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


# ------------------------------------------------------------------------------------------- signal widths
#: The one-bit signals of the WTU (the top's ports and internal wires).
_BOOLS = ("clk", "start", "first", "done", "busy", "s_we", "c_we", "nxt_v", "r_nxt_v", "all_sel", "first_r",
          "b_cross", "single", "more", "g_cross", "l_cross")


def signal_widths(p: WTUParams, scan_bits: int = 8) -> dict[str, int]:
    """Bits of every named WTU signal (1 for a bool), as the top :func:`vrex_lib.hw.wtu.wtu` declares them; the
    block testbenches build their ports from it. ``scan_bits``: the width of the bucket-scan counter."""
    L, WB, AB = p.lanes, W_BITS, acc_bits(p.n_max)
    w = {k: 1 for k in _BOOLS}
    w.update(state=3, g=p.row_bits, gmax=p.row_bits, raddr=p.row_bits, w_addr=p.row_bits, sel_raddr=p.row_bits,
             lane=p.lane_bits, jcut=p.n_max.bit_length(), n=p.n_max.bit_length(), ratio=RATIO_FRAC_BITS + 1,
             s=SHIFT_BITS, lo=LO_BITS, hi=LO_BITS + 1, r_lane=2 * WB, scans=scan_bits, n_scans=scan_bits,
             srow=L * WB, s_wdata=L * WB, crow=L * C_BITS, c_wdata=L * C_BITS, vmask=L, sel_rdata=L, agg_rdata=L)
    w.update({k: AB for k in ("tsum", "th", "acc", "bsum", "r_sum")})
    w.update({k: WB for k in ("mn", "mx", "bmax", "bmin", "nxt", "wstar", "r_min", "r_max", "r_bmax", "r_bmin",
                              "r_nxt")})
    return w


def wtu_signal(p: WTUParams, name: str, scan_bits: int = 8) -> SignalType:
    """A fresh signal ``name`` of the WTU at its width (``rst``: the synchronous active-high reset)."""
    if name == "rst":
        return ResetSignal(0, active=1, isasync=False)
    bits = signal_widths(p, scan_bits)[name]
    return Signal(bool(0)) if bits == 1 else Signal(intbv(0)[bits:])


def _bench(blk, p: WTUParams, steps: list[dict], outputs: list[str], clocked: bool) -> list[dict]:
    """Drive ``blk``'s ports (named as its parameters, built by :func:`wtu_signal`) with ``steps``; per step the
    values of ``outputs`` once settled (combinational) or after one rising clock edge (clocked)."""
    names = [n for n in inspect.signature(blk.func).parameters if n != "p"]
    ports = {n: wtu_signal(p, n) for n in names}
    drive = drive_clocked if clocked else drive_comb
    return drive(blk, (*(ports[n] for n in names), p), ports, steps, outputs)


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


def valid_lanes_bench(p: WTUParams, steps: list[dict]) -> list[dict]:
    """Testbench of :func:`valid_lanes`: per step (``n``, ``g``) the settled ``vmask``."""
    return _bench(valid_lanes, p, steps, ["vmask"], clocked=False)


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


def row_reduce_bench(p: WTUParams, steps: list[dict]) -> list[dict]:
    """Testbench of :func:`row_reduce`: per step (``state``, a row group ``srow``/``crow``/``vmask``, a bucket
    ``lo``/``hi``, ``lane``) its settled reductions."""
    return _bench(row_reduce, p, steps, ["r_sum", "r_min", "r_max", "r_bmax", "r_bmin", "r_nxt", "r_nxt_v", "r_lane"],
                  clocked=False)


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


def preprocess_bench(p: WTUParams, steps: list[dict]) -> list[dict]:
    """Testbench of :func:`preprocess`: per clock (``state``, ``start``, ``ratio``, the lanes' ``r_sum``/``r_min``/
    ``r_max``) the registers ``tsum``, ``mn``, ``mx``, ``th``."""
    return _bench(preprocess, p, steps, ["tsum", "mn", "mx", "th"], clocked=True)


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


def bucket_walk_bench(p: WTUParams, steps: list[dict], outputs: list[str]) -> list[dict]:
    """Testbench of :func:`bucket_walk` (with :func:`walk_merge`): per clock (``state``, row group ``g``/``gmax``,
    the row's ``mn``/``mx``/``th``, the lanes' bucket reductions) the walk registers named in ``outputs``."""
    return _bench(bucket_walk, p, steps, outputs, clocked=True)


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


def resolve_bench(p: WTUParams, steps: list[dict]) -> list[dict]:
    """Testbench of :func:`resolve`: per clock (``state``, ``g``, ``acc``, ``th``, the lanes' ``r_sum``/``r_lane``)
    ``lane``, ``jcut``, ``g_cross``, ``l_cross``."""
    return _bench(resolve, p, steps, ["lane", "jcut", "g_cross", "l_cross"], clocked=True)


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


def aggregate_bench(p: WTUParams, steps: list[dict]) -> list[dict]:
    """Testbench of :func:`aggregate`: per clock (``state``, ``g``, the row group, ``wstar``/``jcut``/``all_sel``,
    ``first_r``, read address ``sel_raddr``) the selection and aggregate read ports."""
    return _bench(aggregate, p, steps, ["sel_rdata", "agg_rdata"], clocked=True)


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


def control_bench(p: WTUParams, steps: list[dict]) -> list[dict]:
    """Testbench of :func:`control`: per clock (``start``, ``first``, ``n`` and the walk's crossing flags)
    ``state``, ``gmax``, ``done``, ``first_r``."""
    return _bench(control, p, steps, ["state", "gmax", "done", "first_r"], clocked=True)
