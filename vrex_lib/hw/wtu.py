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
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from myhdl import (ResetSignal, Signal, StopSimulation, always, always_comb, always_seq, block, downrange, instance,
                   intbv)

from ..config import VRexCoreConfig
from ._sim import clock_driver, io_monitor, reset_pulse
from .fixedpoint import C_BITS, RATIO_FRAC_BITS, W_BITS, acc_bits
from .memories import ram_1w1r


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

    def check(self) -> None:
        for name in ("lanes", "n_buckets"):
            v = getattr(self, name)
            if v < 2 or v & (v - 1):
                raise ValueError(f"WTUParams.{name}={v} must be a power of two >= 2")
        if self.n_max % self.lanes:
            raise ValueError(f"WTUParams.n_max={self.n_max} must be a multiple of lanes={self.lanes}")


IDLE, PRE, TH, WALK, RESG, RESL, MARK, FIN = range(8)
STATE_NAMES = ["IDLE", "PRE", "TH", "WALK", "RES_G", "RES_L", "MARK", "FIN"]


@block
def _rowmem2(clk, we, waddr, wdata, raddr_a, rdata_a, raddr_b, rdata_b, rows: int):
    """Row memory with two asynchronous read ports (the aggregate: read-modify-write + host read)."""
    mem = [Signal(intbv(0)[len(wdata):]) for _ in range(rows)]

    @always(clk.posedge)
    def write():
        if we:
            mem[waddr].next = wdata

    @always_comb
    def read():
        rdata_a.next = mem[raddr_a]
        rdata_b.next = mem[raddr_b]

    return write, read


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
    L, NB = p.lanes, p.n_buckets
    LB = (L - 1).bit_length()
    NBB = (NB - 1).bit_length()
    ROWS = p.n_max // L
    RB = max(1, (ROWS - 1).bit_length())
    NNB = p.n_max.bit_length()
    AB = acc_bits(p.n_max)
    WB = W_BITS
    WMASK = (1 << WB) - 1
    CMASK = (1 << C_BITS) - 1
    SB = (WB + 1).bit_length()  # shift amounts 0..16
    LOB = WB + 1  # bucket bounds up to 2^17

    state = Signal(intbv(0)[3:])
    g = Signal(intbv(0)[RB:])
    gmax = Signal(intbv(0)[RB:])
    lane = Signal(intbv(0)[max(1, LB):])
    tsum = Signal(intbv(0)[AB:])
    mn = Signal(intbv(0)[WB:])
    mx = Signal(intbv(0)[WB:])
    th = Signal(intbv(0)[AB:])
    acc = Signal(intbv(0)[AB:])
    bsum = Signal(intbv(0)[AB:])
    s = Signal(intbv(0)[SB:])
    lo = Signal(intbv(0)[LOB:])
    bmax = Signal(intbv(0)[WB:])  # max weight inside the bucket so far in this scan
    bmin = Signal(intbv(0)[WB:])  # min weight inside the bucket so far in this scan
    nxt = Signal(intbv(0)[WB:])  # max weight below the bucket so far
    nxt_v = Signal(bool(0))
    wstar = Signal(intbv(0)[WB:])
    jcut = Signal(intbv(0)[NNB:])
    all_sel = Signal(bool(0))
    first_r = Signal(bool(0))
    scans = Signal(intbv(0)[len(n_scans):])
    # datapath outputs for the current row
    r_sum = Signal(intbv(0)[AB:])
    r_min = Signal(intbv(0)[WB:])
    r_max = Signal(intbv(0)[WB:])
    r_bmax = Signal(intbv(0)[WB:])
    r_bmin = Signal(intbv(0)[WB:])
    r_nxt = Signal(intbv(0)[WB:])
    r_nxt_v = Signal(bool(0))
    r_lane = Signal(intbv(0)[2 * WB:])
    r_sel = Signal(intbv(0)[L:])
    srow = Signal(intbv(0)[L * WB:])
    crow = Signal(intbv(0)[L * C_BITS:])
    raddr = Signal(intbv(0)[RB:])
    hi = Signal(intbv(0)[LOB + 1:])
    # selection bitmask of this row and the aggregate (OR over rows), one L-bit word per memory row
    sel_we = Signal(bool(0))
    sel_w = Signal(intbv(0)[L:])
    agg_w = Signal(intbv(0)[L:])
    agg_cur = Signal(intbv(0)[L:])

    smem = ram_1w1r(clk, s_we, w_addr, s_wdata, raddr, srow, ROWS)
    cmem = ram_1w1r(clk, c_we, w_addr, c_wdata, raddr, crow, ROWS)
    selmem = ram_1w1r(clk, sel_we, g, sel_w, sel_raddr, sel_rdata, ROWS)
    aggmem = _rowmem2(clk, sel_we, g, agg_w, raddr, agg_cur, sel_raddr, agg_rdata, ROWS)

    @always_comb
    def addr_mux():
        if state == IDLE:
            raddr.next = w_addr
        else:
            raddr.next = g
        hi.next = lo + (1 << s)

    @always_comb
    def datapath():
        # 16 lanes: multipliers, bucket sorters, adder tree, min/max trees, MARK comparators.
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
        sel = intbv(0)[L:]
        lim = intbv(0)[NNB:]
        idx = intbv(0)[NNB:]
        if n > g * L:
            lim[:] = n - g * L
        for k in range(L):
            w[:] = (srow >> (k * WB)) & WMASK
            c[:] = (crow >> (k * C_BITS)) & CMASK
            pr[:] = w * c
            idx[:] = g * L + k
            if k < lim:
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
                if all_sel or w > wstar or (w == wstar and idx <= jcut):
                    sel[k] = 1
        r_sum.next = tot
        r_min.next = vmin
        r_max.next = vmax
        r_bmax.next = inmax
        r_bmin.next = inmin
        r_nxt.next = bl
        r_nxt_v.next = blv
        r_lane.next = lp
        r_sel.next = sel

    @always_comb
    def mark():
        sel_we.next = state == MARK
        sel_w.next = r_sel
        if first_r:
            agg_w.next = r_sel
        else:
            agg_w.next = agg_cur | r_sel

    @always_seq(clk.posedge, reset=rst)
    def fsm():
        # Bucket-range updater and control. Locals are wide enough for every intermediate.
        tot = intbv(0)[AB:]
        vmax = intbv(0)[WB:]
        vmin = intbv(0)[WB:]
        rng = intbv(0)[WB:]
        sh = intbv(0)[SB:]
        prod = intbv(0)[AB + RATIO_FRAC_BITS + 1:]
        done.next = 0
        if state == IDLE:
            if start:
                state.next = PRE
                g.next = 0
                gmax.next = (n - 1) >> LB
                tsum.next = 0
                mn.next = WMASK
                mx.next = 0
                first_r.next = first
                scans.next = 0
        elif state == PRE:
            tsum.next = tsum + r_sum
            if r_min < mn:
                mn.next = r_min
            if r_max > mx:
                mx.next = r_max
            if g == gmax:
                state.next = TH
            else:
                g.next = g + 1
        elif state == TH:
            prod[:] = tsum * ratio
            th.next = prod >> RATIO_FRAC_BITS
            rng[:] = mx - mn
            sh[:] = WB
            for i in downrange(WB + 1):  # smallest s with (max - min) >> s < n_buckets
                if (rng >> i) < NB:
                    sh[:] = i
            s.next = sh
            lo.next = mn + ((rng >> sh) << sh)
            acc.next = 0
            bsum.next = 0
            bmax.next = 0
            bmin.next = WMASK
            nxt.next = 0
            nxt_v.next = 0
            all_sel.next = 0
            wstar.next = 0
            jcut.next = 0
            g.next = 0
            state.next = WALK
        elif state == WALK:
            tot[:] = bsum + r_sum
            vmax[:] = bmax
            if r_bmax > bmax:
                vmax[:] = r_bmax
            vmin[:] = bmin
            if r_bmin < bmin:
                vmin[:] = r_bmin
            if g != gmax:
                bsum.next = tot
                bmax.next = vmax
                bmin.next = vmin
                if r_nxt_v and (not nxt_v or r_nxt > nxt):
                    nxt.next = r_nxt
                    nxt_v.next = 1
                g.next = g + 1
            else:
                scans.next = scans + 1
                g.next = 0
                bsum.next = 0
                bmax.next = 0
                bmin.next = WMASK
                nxt.next = 0
                nxt_v.next = 0
                if acc + tot > th:
                    if vmin == vmax:  # one distinct weight in the bucket (always so at width 1): by index
                        wstar.next = vmax
                        state.next = RESG
                    else:  # refine the crossing bucket, starting at the sub-bucket of its maximum
                        sh[:] = 0
                        if s > NBB:
                            sh[:] = s - NBB
                        s.next = sh
                        rng[:] = vmax - mn
                        lo.next = mn + ((rng >> sh) << sh)
                else:
                    acc.next = acc + tot
                    vmax[:] = nxt
                    if r_nxt_v and (not nxt_v or r_nxt > nxt):
                        vmax[:] = r_nxt
                    if nxt_v or r_nxt_v:  # next non-empty bucket below
                        rng[:] = vmax - mn
                        lo.next = mn + ((rng >> s) << s)
                    else:  # walked everything without exceeding Th: select all
                        all_sel.next = 1
                        state.next = MARK
        elif state == RESG:
            if acc + r_sum > th:
                lane.next = 0
                state.next = RESL
            elif g == gmax:  # unreachable when the bucket crossed; kept safe
                all_sel.next = 1
                g.next = 0
                state.next = MARK
            else:
                acc.next = acc + r_sum
                g.next = g + 1
        elif state == RESL:
            if acc + r_lane > th:
                jcut.next = g * L + lane
                g.next = 0
                state.next = MARK
            else:
                acc.next = acc + r_lane
                lane.next = lane + 1
        elif state == MARK:
            if g == gmax:
                state.next = FIN
            else:
                g.next = g + 1
        else:
            done.next = 1
            state.next = IDLE

    @always_comb
    def status():
        busy.next = state != IDLE
        n_scans.next = scans

    if probe is not None:
        probe.update(bmin=bmin, bmax=bmax, r_bmin=r_bmin, r_bmax=r_bmax, state=state, g=g, s=s, lo=lo, hi=hi, acc=acc, bsum=bsum, th=th, tsum=tsum, mn=mn, mx=mx,
                     r_sum=r_sum, wstar=wstar, jcut=jcut, lane=lane, all_sel=all_sel)

    return smem, cmem, selmem, aggmem, addr_mux, datapath, mark, fsm, status


def wtu_ports(p: WTUParams) -> dict:
    ROWS = p.n_max // p.lanes
    RB = max(1, (ROWS - 1).bit_length())
    return dict(
        clk=Signal(bool(0)), rst=ResetSignal(0, active=1, isasync=False), start=Signal(bool(0)),
        first=Signal(bool(0)), n=Signal(intbv(0)[p.n_max.bit_length():]),
        ratio=Signal(intbv(0)[RATIO_FRAC_BITS + 1:]),
        s_we=Signal(bool(0)), c_we=Signal(bool(0)), w_addr=Signal(intbv(0)[RB:]),
        s_wdata=Signal(intbv(0)[p.lanes * W_BITS:]), c_wdata=Signal(intbv(0)[p.lanes * C_BITS:]),
        sel_raddr=Signal(intbv(0)[RB:]), sel_rdata=Signal(intbv(0)[p.lanes:]), agg_rdata=Signal(intbv(0)[p.lanes:]),
        busy=Signal(bool(0)), done=Signal(bool(0)), n_scans=Signal(intbv(0)[8:]))


@dataclass
class WTURowResult:
    selected: np.ndarray  # bool [n]
    cycles: int  # start -> done
    scans: int  # WALK bucket scans
    walk: list = field(default_factory=list)  # per scan: dict(s, lo, hi, bucket_sum, acc_before, th, crossed)
    state_cycles: dict = field(default_factory=dict)  # cycles spent in each FSM state (PRE, WALK, RES_G, ...)


def _pack(vals: np.ndarray, bits: int) -> int:
    out = 0
    for k, v in enumerate(vals):
        out |= (int(v) & ((1 << bits) - 1)) << (k * bits)
    return out


def simulate_wtu(rows: list[tuple[np.ndarray, np.ndarray]], ratio_q: int, p: WTUParams = WTUParams(),
                 trace: bool = False, aggregate: bool = False,
                 record: list | None = None) -> tuple[list[WTURowResult], np.ndarray | None]:
    """Run rows ``(weights [n], counts [n])`` (16-bit integers) through one WTU core.

    Consecutive rows with the same counts array object keep the count memory (one frame's clusters).
    Returns per-row results and, with ``aggregate``, the final aggregate bitmask (OR over all rows, which must
    then share one n). ``trace`` records the bucket walk of every row (Fig. 11).
    """
    for w, c in rows:
        if not 1 <= len(w) <= p.n_max or len(w) != len(c):
            raise ValueError(f"a WTU row has {len(w)} weights / {len(c)} counts; 1..{p.n_max} equal lengths needed")
        if np.min(w) < 0 or np.max(w) >= 1 << W_BITS or np.min(c) < 0 or np.max(c) >= 1 << C_BITS:
            raise ValueError("WTU rows need 16-bit unsigned weights and counts (fixedpoint.quantize_weights / "
                             "saturate_counts)")
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
            clk = P["clk"]
            yield from reset_pulse(clk, P["rst"])
            last_c = None
            for i, (w, c) in enumerate(rows):
                nn = len(w)
                G = (nn + L - 1) // L
                wpad = np.zeros(G * L, dtype=np.int64)
                wpad[:nn] = w
                for r in range(G):
                    P["s_we"].next, P["w_addr"].next = 1, r
                    P["s_wdata"].next = _pack(wpad[r * L:(r + 1) * L], W_BITS)
                    if c is not last_c:
                        cpad = np.zeros(G * L, dtype=np.int64)
                        cpad[:nn] = c
                        P["c_we"].next, P["c_wdata"].next = 1, _pack(cpad[r * L:(r + 1) * L], C_BITS)
                    yield clk.negedge
                P["s_we"].next, P["c_we"].next = 0, 0
                last_c = c
                P["n"].next, P["ratio"].next, P["start"].next, P["first"].next = nn, ratio_q, 1, int(i == 0)
                yield clk.negedge
                P["start"].next = 0
                cycles, walk, sc = 0, [], {}
                while True:
                    st = STATE_NAMES[int(probe["state"])]
                    sc[st] = sc.get(st, 0) + 1
                    # sample the walk at the last row of each scan (before the clock edge that decides)
                    if trace and int(probe["state"]) == WALK and int(probe["g"]) == G - 1:
                        tot = int(probe["bsum"]) + int(probe["r_sum"])
                        walk.append(dict(s=int(probe["s"]), lo=int(probe["lo"]), hi=int(probe["hi"]),
                                         bucket_sum=tot, acc_before=int(probe["acc"]), th=int(probe["th"]),
                                         crossed=int(probe["acc"]) + tot > int(probe["th"])))
                    yield clk.negedge
                    cycles += 1
                    if P["done"]:
                        break
                sel = np.zeros(G * L, dtype=bool)
                for r in range(G):
                    P["sel_raddr"].next = r
                    yield clk.negedge
                    v = int(P["sel_rdata"])
                    sel[r * L:(r + 1) * L] = [(v >> k) & 1 for k in range(L)]
                results.append(WTURowResult(sel[:nn], cycles, int(P["n_scans"]), walk, sc))
            if aggregate:
                nn = len(rows[-1][0])
                G = (nn + L - 1) // L
                agg = np.zeros(G * L, dtype=bool)
                for r in range(G):
                    P["sel_raddr"].next = r
                    yield clk.negedge
                    v = int(P["agg_rdata"])
                    agg[r * L:(r + 1) * L] = [(v >> k) & 1 for k in range(L)]
                agg_out.append(agg[:nn])
            raise StopSimulation()

        extra = [io_monitor(P, record)] if record is not None else []
        return dut, clkgen, tb, extra

    bench().run_sim(quiet=1)
    return results, (agg_out[0] if aggregate else None)
