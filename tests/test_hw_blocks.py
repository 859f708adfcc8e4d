"""The sub-blocks of the WTU, the HCU and the N-read-port RAM, each driven by its own small testbench and checked
against values worked out by hand (the whole blocks are checked against the reference in test_hw.py). The WTU's
testbenches sit beside its blocks (vrex_lib/hw/wtu_blocks.py); the others use the drivers of vrex_lib/hw/_sim.py."""
from __future__ import annotations

from myhdl import ResetSignal, Signal, block, intbv

from vrex_lib.hw import wtu_blocks as W
from vrex_lib.hw._sim import drive_clocked as clocked
from vrex_lib.hw._sim import drive_comb as comb
from vrex_lib.hw.fixedpoint import W_MAX
from vrex_lib.hw.hcu import HCUParams, decide, key_bank, key_write, xor_popcount
from vrex_lib.hw.memories import ram
from vrex_lib.hw.wtu import wtu_ports

P4 = W.WTUParams(n_max=16, lanes=4, n_buckets=16)  # 4 lanes, 4 row groups


def sig(bits: int = 1, init: int = 0) -> Signal:
    return Signal(bool(init)) if bits == 1 else Signal(intbv(init)[bits:])


def _rst() -> ResetSignal:
    return ResetSignal(0, active=1, isasync=False)


# --------------------------------------------------------------------------------------------- memory
def test_ram_two_read_ports_read_different_words():
    P = dict(clk=sig(), we=sig(), waddr=sig(2), wdata=sig(8), ra=sig(2), rd=sig(8), rb=sig(2), rdb=sig(8))
    args = (P["clk"], P["we"], P["waddr"], P["wdata"], ((P["ra"], P["rd"]), (P["rb"], P["rdb"])), 4)
    got = clocked(ram, args, P, [dict(we=1, waddr=1, wdata=0x5A), dict(we=1, waddr=2, wdata=0xC3),
                           dict(we=0, waddr=1, wdata=0xFF, ra=1, rb=2), dict(ra=2, rb=0)], ["rd", "rdb"])
    assert got[2] == dict(rd=0x5A, rdb=0xC3)  # both ports at once; we=0 wrote nothing
    assert got[3] == dict(rd=0xC3, rdb=0)


# ---------------------------------------------------------------------------------------------- WTU
# Each sub-block is driven by its testbench beside it in vrex_lib/hw/wtu_blocks.py (ports at the top's widths).
def _row(values: list[int], bits: int = 16) -> int:
    return sum(v << (k * bits) for k, v in enumerate(values))


def test_valid_lanes_by_hand():
    got = W.valid_lanes_bench(P4, [dict(n=10, g=0), dict(n=10, g=2), dict(n=8, g=2), dict(n=16, g=3)])
    assert [x["vmask"] for x in got] == [0b1111, 0b0011, 0, 0b1111]  # entries 8, 9 in group 2; none of 8..11


def test_row_reduce_by_hand():
    # weights 5, 9, 2, 7 with counts 1, 2, 3, 0; lane 3 is past the row's end (vmask 0b0111)
    row = dict(srow=_row([5, 9, 2, 7]), crow=_row([1, 2, 3, 0]), vmask=0b0111)
    got = W.row_reduce_bench(P4, [dict(row, state=W.PRE), dict(row, state=W.WALK, lo=4, hi=8, lane=0), dict(lane=1),
                                  dict(lo=9, hi=10)])
    assert got[0] | dict(r_bmax=0, r_bmin=0, r_nxt=0, r_nxt_v=0, r_lane=0) == \
        dict(r_sum=5 + 18 + 6, r_min=2, r_max=9, r_bmax=0, r_bmin=0, r_nxt=0, r_nxt_v=0, r_lane=0)
    # bucket [4, 8): only w=5 (w=7 is not valid); below it the largest is 2; lane 0 holds the product 5
    assert got[1] == dict(r_sum=5, r_min=2, r_max=9, r_bmax=5, r_bmin=5, r_nxt=2, r_nxt_v=1, r_lane=5)
    assert got[2]["r_lane"] == 0  # lane 1 (w=9) is outside the bucket
    assert got[3] | dict(r_lane=0) == dict(r_sum=18, r_min=2, r_max=9, r_bmax=9, r_bmin=9, r_nxt=5, r_nxt_v=1,
                                           r_lane=0)


def test_preprocess_by_hand():
    got = W.preprocess_bench(P4, [dict(state=W.IDLE, start=1), dict(state=W.PRE, start=0, r_sum=100, r_min=3, r_max=40),
                                  dict(r_sum=50, r_min=1, r_max=20), dict(state=W.TH, ratio=52429)])
    assert got[0] == dict(tsum=0, mn=W_MAX, mx=0, th=0)
    assert got[2] == dict(tsum=150, mn=1, mx=40, th=0)
    assert got[3]["th"] == 120  # floor(150 · 52429 / 2^16) = floor(120.0004)


def test_bucket_walk_steps_of_the_fig11_toy():
    # The Fig. 11 toy row (min 0, max 40, Th 800) in one row group (gmax = 0): TH puts the first bucket of width
    # 2^2 at 40; the scan of [40, 44) holds Σ w·c = 200 <= 800 and the largest weight below is 38 -> Acc = 200,
    # next bucket [36, 40). Then a crossing bucket with several weights (36..39) is refined: s = 0, lo = 39.
    scan = dict(state=W.WALK, g=0, gmax=0, th=800, r_sum=200, r_bmax=40, r_bmin=40, r_nxt=38, r_nxt_v=1)
    got = W.bucket_walk_bench(W.WTUParams(n_max=16, lanes=16),
                              [dict(state=W.TH, mn=0, mx=40), scan,
                               dict(scan, r_sum=700, r_bmax=39, r_bmin=36, r_nxt=35)],
                              ["s", "lo", "hi", "acc", "scans", "wstar", "all_sel"])
    assert got[0] | dict(scans=0) == dict(s=2, lo=40, hi=44, acc=0, scans=0, wstar=0, all_sel=0)
    assert got[1] == dict(s=2, lo=36, hi=40, acc=200, scans=1, wstar=0, all_sel=0)
    assert got[2] == dict(s=0, lo=39, hi=40, acc=200, scans=2, wstar=0, all_sel=0)  # 200 + 700 > 800: refine


def test_bucket_walk_fixes_wstar_or_selects_all():
    got = W.bucket_walk_bench(P4, [dict(state=W.TH, mn=10, mx=10),
                                   dict(state=W.WALK, gmax=0, th=5, r_sum=9, r_bmax=10, r_bmin=10),
                                   dict(state=W.TH), dict(state=W.WALK, th=50, r_sum=9, r_nxt_v=0)],
                              ["wstar", "all_sel", "acc"])
    assert got[1] == dict(wstar=10, all_sel=0, acc=0)  # crosses with one weight: w* = 10, Acc unchanged
    assert got[3] == dict(wstar=0, all_sel=1, acc=9)  # never crosses, nothing below: select all


def test_resolve_by_hand():
    # Acc 10, Th 20 (Acc is the walk's register, held at 10 here): group 2 holds 15 of w* (10 + 15 > 20) -> RES_L
    # from lane 0; lane 0's product 6 does not cross (16 <= 20), lane 1's 11 does (21 > 20) -> j_cut = 2·4 + 1 = 9
    got = W.resolve_bench(P4, [dict(state=W.RESG, g=2, acc=10, th=20, r_sum=15), dict(state=W.RESL, r_lane=6),
                               dict(r_lane=11)])
    assert got[0]["lane"] == 0 and got[0]["g_cross"] == 1
    assert got[1] == dict(lane=1, jcut=0, g_cross=1, l_cross=0)
    assert got[2] == dict(lane=1, jcut=9, g_cross=1, l_cross=1)


def test_aggregate_marks_and_ors_rows():
    # group 1 = entries 4..7 with weights 9, 7, 7, 3; w* = 7, j_cut = 5: select 9 (> w*) and 7 at j = 5 only
    row1 = dict(state=W.MARK, g=1, raddr=1, srow=_row([9, 7, 7, 3]), vmask=0b1111, wstar=7, jcut=5, first_r=1)
    got = W.aggregate_bench(P4, [row1, dict(state=W.IDLE, sel_raddr=1),
                                 dict(row1, srow=_row([1, 1, 8, 1]), first_r=0), dict(state=W.IDLE)])
    assert got[1] == dict(sel_rdata=0b0011, agg_rdata=0b0011)
    assert got[3] == dict(sel_rdata=0b0100, agg_rdata=0b0111)  # the next row ORed into the aggregate


def test_control_walks_every_state_once():
    steps = [dict(start=1, first=1, n=4), dict(start=0), dict(), dict(b_cross=1, single=1), dict(g_cross=1),
             dict(l_cross=1), dict(), dict(), dict()]
    got = W.control_bench(P4, steps)
    assert [W.STATE_NAMES[x["state"]] for x in got] == ["PRE", "TH", "WALK", "RES_G", "RES_L", "MARK", "FIN",
                                                        "IDLE", "IDLE"]
    assert got[0]["gmax"] == 0 and got[0]["first_r"] == 1  # 4 entries: one group of 4 lanes
    assert [x["done"] for x in got] == [0, 0, 0, 0, 0, 0, 0, 1, 0]


def test_every_wtu_port_has_the_width_the_table_gives():
    """wtu_ports and the sub-block testbenches read one width table: a port's width is that of the top."""
    widths = W.signal_widths(P4)
    for name, sig_ in wtu_ports(P4).items():
        assert (1 if isinstance(sig_.val, bool) else len(sig_)) == widths.get(name, 1), name


# ---------------------------------------------------------------------------------------------- HCU
H4 = HCUParams(code_bits=8, depth=16, cur_depth=4, lanes=4)


def test_xor_popcount_lowest_index_minimum():
    P = dict(row=sig(32), code=sig(8), ncl=sig(5), g=sig(2), g_d=sig(4, 15), g_k=sig(2))
    row = _row([0x0F, 0xF0, 0x0E, 0x0F], 8)  # distances to 0x0F: 0, 8, 1, 0
    got = comb(xor_popcount, (P["row"], P["code"], P["ncl"], P["g"], P["g_d"], P["g_k"], H4), P,
               [dict(row=row, code=0x0F, ncl=3), dict(code=0xF0), dict(code=0x0D, ncl=4), dict(ncl=0)],
               ["g_d", "g_k"])
    assert got[0] == dict(g_d=0, g_k=0)  # ties at distance 0 (lanes 0 and 3): lane 3 is not valid anyway
    assert got[1] == dict(g_d=0, g_k=1)
    assert got[2] == dict(g_d=1, g_k=0)  # 0x0D: distances 1, 7, 2, 1 -> the lowest index of the two 1s
    assert got[3] == dict(g_d=15, g_k=0)  # no cluster: the sentinel


def test_decide_join_or_open():
    names = ["state", "g", "ncl", "th", "g_d", "g_k", "run_d", "run_i", "last", "dec_open", "dec_cl"]
    P = dict(state=sig(2), g=sig(2), ncl=sig(5), th=sig(4), g_d=sig(4), g_k=sig(2), run_d=sig(4), run_i=sig(5),
             last=sig(), dec_open=sig(), dec_cl=sig(5))
    base = dict(state=1, g=1, ncl=6, g_d=2, g_k=1, run_d=3, run_i=0)  # row 1 of 2; this row's lane 1 is nearer
    got = comb(decide, (*(P[k] for k in names), H4), P,
               [dict(base, th=3), dict(base, th=2), dict(base, g_d=3, th=4), dict(base, g=0)],
               ["last", "dec_open", "dec_cl"])
    assert got[0] == dict(last=1, dec_open=0, dec_cl=5)  # distance 2 < 3: join cluster 1·4 + 1
    assert got[1] == dict(last=1, dec_open=1, dec_cl=6)  # 2 is not < 2: open cluster 6
    assert got[2] == dict(last=1, dec_open=0, dec_cl=0)  # equal distance: the earlier row (cluster 0) wins
    assert got[3]["last"] == 0  # row 0 of 2 is not the last


def test_key_write_preload_and_updater():
    names = ["state", "key_we", "key_waddr", "key_wdata", "last", "dec_open", "ncl", "code", "kw_we", "kw_row",
             "kw_lane", "kw_data"]
    P = dict(state=sig(2), key_we=sig(), key_waddr=sig(5), key_wdata=sig(8), last=sig(), dec_open=sig(),
             ncl=sig(5), code=sig(8), kw_we=sig(), kw_row=sig(2), kw_lane=sig(2), kw_data=sig(8))
    got = comb(key_write, (*(P[k] for k in names), H4), P,
               [dict(state=0, key_we=1, key_waddr=13, key_wdata=0xAB), dict(state=1, last=1, dec_open=1, ncl=6,
                                                                           code=0x3C),
                dict(dec_open=0), dict(dec_open=1, ncl=16)], ["kw_we", "kw_row", "kw_lane", "kw_data"])
    assert got[0] == dict(kw_we=1, kw_row=3, kw_lane=1, kw_data=0xAB)  # 13 = row 3, lane 1
    assert got[1] == dict(kw_we=1, kw_row=1, kw_lane=2, kw_data=0x3C)  # new cluster 6 = row 1, lane 2
    assert got[2]["kw_we"] == 0 and got[3]["kw_we"] == 0  # a join writes nothing; a full memory neither


# Writes to lane 2's bank: its own lane, then another lane's write to the same row, a write with we low, and a
# read of a row only other lanes wrote. A bank that ignores ``wlane`` (or ``we``) reads 0x11 / 0x33 / 0x44 instead.
_LANE_STEPS = [dict(we=1, wrow=1, wlane=2, wdata=0x22, rrow=1), dict(we=1, wrow=1, wlane=1, wdata=0x11, rrow=1),
               dict(we=0, wrow=1, wlane=2, wdata=0x33, rrow=1), dict(we=1, wrow=0, wlane=3, wdata=0x44, rrow=0),
               dict(we=0, rrow=0)]


def _lane_reads(blk) -> list[int]:
    P = dict(clk=Signal(bool(0)), we=sig(), wrow=sig(2), wlane=sig(2), wdata=sig(8), rrow=sig(2), rdata=sig(8))
    args = (P["clk"], P["we"], P["wrow"], P["wlane"], P["wdata"], P["rrow"], P["rdata"], 2, 4)
    return [g["rdata"] for g in clocked(blk, args, P, _LANE_STEPS, ["rdata"])]


def test_key_bank_writes_only_its_lane():
    assert _lane_reads(key_bank) == [0x22, 0x22, 0x22, 0x00, 0x00]

    @block
    def no_lane_filter(clk, we, wrow, wlane, wdata, rrow, rdata, lane, rows):  # the mutant: every lane's write lands
        return ram(clk, we, wrow, wdata, ((rrow, rdata),), rows)

    assert _lane_reads(no_lane_filter) != [0x22, 0x22, 0x22, 0x00, 0x00]  # the check above can fail
