"""HCU — Hash-bit Cluster Unit (paper §V.B, Fig. 10) as a cycle-accurate MyHDL block.

Hardware (all widths/depths parameters; defaults = the paper's configuration, :class:`VRexCoreConfig`):

* current hash-bit memory: ``CUR_DEPTH`` x ``W``-bit codes (32 x 32 b = 128 B), written by the LXE;
* key-cache hash-bit memory (banking: ``docs/DECISIONS.md D84``): ``DEPTH`` x ``W``-bit cluster codes
  (1024 x 32 b = 4 KB) in ``LANES`` banks so one
  row of ``LANES`` codes is read per cycle; more clusters than ``DEPTH`` are tiled (analytic, see timing.py);
* a ``LANES``-wide (N_HCU-w = 16) XOR-popcount accumulator: 16 Hamming distances per cycle, SWAR popcount;
* a lowest-index minimum over the lanes, the running nearest cluster across rows (strict ``<``, so the lowest
  index wins ties), and the strict ``< Th_hd`` comparator;
* the HC-table updater: join the nearest cluster, or write the token's code as a new cluster at index
  ``n_clusters`` (which later tokens of the same frame then see as a candidate); one result per token on
  ``res_*`` (the write stream into the HC table in DRAM).

Schedule: token t scans ``max(1, ceil(n_t / LANES))`` rows (n_t = clusters before t) and decides in the
last scan cycle; one extra cycle for DONE. ``timing.hcu_cycles`` gives the same count.

Sub-blocks (``docs/DECISIONS.md D152``; testbenches in ``tests/test_hw_blocks.py``): :func:`key_bank` (x lanes),
:func:`xor_popcount`, :func:`decide`, :func:`key_write` (the HC-table updater) and :func:`hcu_control`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from myhdl import (ConcatSignal, ResetSignal, Signal, SignalType, StopSimulation, always_comb, always_seq, block,
                   instance, intbv)

from ..config import VRexCoreConfig
from ._sim import clock_driver, io_monitor, reset_pulse
from .fixedpoint import dist_bits
from .memories import ram

Sig = SignalType  # the type of a block port: a MyHDL signal

# 64-bit SWAR popcount masks: codes up to 64 bits; unused high bits are constant 0 and vanish in synthesis.
_M = [0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF,
      0x00000000FFFFFFFF]
IDLE, SCAN, FIN = 0, 1, 2


@dataclass(frozen=True)
class HCUParams:
    """Sizes of one HCU. ``from_core`` derives them from Fig. 10 / §VI.F."""

    code_bits: int = 32
    depth: int = 1024
    cur_depth: int = 32
    lanes: int = 16

    @classmethod
    def from_core(cls, cfg: VRexCoreConfig | None = None, code_bits: int = 32) -> "HCUParams":
        cfg = cfg or VRexCoreConfig()
        return cls(code_bits, cfg.hcu_key_hash_bytes * 8 // code_bits, cfg.hcu_cur_hash_bytes * 8 // code_bits,
                   cfg.n_hcu_w)

    @property
    def memory_bits(self) -> int:
        return (self.depth + self.cur_depth) * self.code_bits

    def check(self) -> None:
        if self.lanes & (self.lanes - 1) or self.depth % self.lanes or self.code_bits not in (8, 16, 32, 64):
            raise ValueError(f"HCUParams {self}: lanes must be a power of two dividing depth; code_bits in "
                             f"(8, 16, 32, 64) (SWAR popcount fields)")


@block
def key_bank(clk: Sig, we: Sig, wrow: Sig, wlane: Sig, wdata: Sig, rrow: Sig, rdata: Sig, lane: int, rows: int):
    """One lane of the key-cache hash-bit memory: ``rows`` codes, written when ``wlane == lane``, async read."""
    bank_we = Signal(bool(0))

    @always_comb
    def enable():
        bank_we.next = we and wlane == lane

    mem = ram(clk, bank_we, wrow, wdata, ((rrow, rdata),), rows)
    return enable, mem


def _swar_masks(W: int, L: int) -> tuple[list[int], list[int]]:
    """SWAR masks replicated over the ``L`` W-bit lanes of a row. A stage whose field width reaches W is the
    identity: keep-mask = the whole lane, shifted-term mask = 0 (so no bits cross into the neighbouring lane)."""
    maskw = (1 << W) - 1

    def rep(m: int) -> int:
        return sum((m & maskw) << (k * W) for k in range(L))

    keep = [rep(m) if (1 << i) < W else rep(maskw) for i, m in enumerate(_M)]
    shifted = [rep(m) if (1 << i) < W else 0 for i, m in enumerate(_M)]
    return keep, shifted


@block
def xor_popcount(row: Sig, code: Sig, ncl: Sig, g: Sig, g_d: Sig, g_k: Sig, p: HCUParams):
    """The ``lanes`` Hamming distances popcount(code ^ cluster) of one row of cluster codes at once, and their
    lowest-index minimum over the lanes that hold a cluster (``g_d`` distance, ``g_k`` lane)."""
    W, L = p.code_bits, p.lanes
    DB = dist_bits(W)
    SENT = (1 << DB) - 1
    LB = max(1, (L - 1).bit_length())
    CB = p.depth.bit_length()
    XB = W * L
    (A0, A1, A2, A3, A4, A5), (B0, B1, B2, B3, B4, B5) = _swar_masks(W, L)
    code_rep = ConcatSignal(*([code] * L)) if L > 1 else code

    @always_comb
    def lanes():
        # SWAR over the whole row: each lane's count stays inside its W-bit field (cross-field carries are
        # structurally 0 and vanish in synthesis), then the lowest-index minimum over the valid lanes.
        x = intbv(0)[XB:]
        d = intbv(0)[DB:]
        bd = intbv(SENT)[DB:]
        bk = intbv(0)[LB:]
        lim = intbv(0)[CB:]
        x[:] = row ^ code_rep
        x[:] = (x & A0) + ((x >> 1) & B0)
        x[:] = (x & A1) + ((x >> 2) & B1)
        x[:] = (x & A2) + ((x >> 4) & B2)
        x[:] = (x & A3) + ((x >> 8) & B3)
        x[:] = (x & A4) + ((x >> 16) & B4)
        x[:] = (x & A5) + ((x >> 32) & B5)
        if ncl > g * L:
            lim[:] = ncl - g * L
        for k in range(L):
            d[:] = (x >> (k * W)) & SENT
            if k < lim and d < bd:
                bd[:] = d
                bk[:] = k
        g_d.next = bd
        g_k.next = bk

    return lanes


@block
def decide(state: Sig, g: Sig, ncl: Sig, th: Sig, g_d: Sig, g_k: Sig, run_d: Sig, run_i: Sig, last: Sig, dec_open: Sig,
           dec_cl: Sig, p: HCUParams):
    """Last row of this token's scan (``last``)? Then the nearest cluster so far (strict ``<`` across rows,
    so the lowest index wins ties) is final: join it if its distance is < Th_hd, else open cluster ``ncl``."""
    L = p.lanes
    DB = dist_bits(p.code_bits)
    CB = p.depth.bit_length()

    @always_comb
    def nearest():
        fd = intbv((1 << DB) - 1)[DB:]
        fi = intbv(0)[CB:]
        if g_d < run_d:
            fd[:] = g_d
            fi[:] = g * L + g_k
        else:
            fd[:] = run_d
            fi[:] = run_i
        last.next = state == SCAN and (g + 1) * L >= ncl
        if fd < th:
            dec_open.next = 0
            dec_cl.next = fi
        else:
            dec_open.next = 1
            dec_cl.next = ncl

    return nearest


@block
def key_write(state: Sig, key_we: Sig, key_waddr: Sig, key_wdata: Sig, last: Sig, dec_open: Sig, ncl: Sig, code: Sig,
              kw_we: Sig, kw_row: Sig, kw_lane: Sig, kw_data: Sig, p: HCUParams):
    """The key memory's one write port: the preload while idle, else the HC-table updater writing a newly
    opened cluster's code at index ``ncl`` (row ``ncl // lanes``, lane ``ncl % lanes``)."""
    LB = (p.lanes - 1).bit_length()
    D = p.depth
    CB = D.bit_length()

    @always_comb
    def mux():
        if state == IDLE:
            kw_we.next = key_we
            kw_row.next = key_waddr[CB - 1:LB] if LB else key_waddr[CB - 1:]
            kw_lane.next = key_waddr[LB:] if LB else 0
            kw_data.next = key_wdata
        else:
            kw_we.next = last and dec_open and ncl < D
            kw_row.next = ncl[CB - 1:LB] if LB else ncl[CB - 1:]
            kw_lane.next = ncl[LB:] if LB else 0
            kw_data.next = code

    return mux


@block
def hcu_control(clk: Sig, rst: Sig, start: Sig, n_tok: Sig, n_cl_in: Sig, state: Sig, t: Sig, g: Sig, ncl: Sig,
                run_d: Sig, run_i: Sig, last: Sig, dec_open: Sig, dec_cl: Sig, g_d: Sig, g_k: Sig, done: Sig,
                res_valid: Sig, res_tok: Sig, res_cluster: Sig, res_new: Sig, p: HCUParams):
    """IDLE -> SCAN (token t scans rows g = 0.. of the clusters, keeping the running nearest one; its decision,
    in the last row, goes out on ``res_*``) -> FIN (``done``) -> IDLE."""
    L = p.lanes
    SENT = (1 << dist_bits(p.code_bits)) - 1

    @always_seq(clk.posedge, reset=rst)
    def fsm():
        res_valid.next = 0
        done.next = 0
        if state == IDLE:
            if start:
                state.next = SCAN
                t.next = 0
                g.next = 0
                ncl.next = n_cl_in
                run_d.next = SENT
                run_i.next = 0
        elif state == SCAN:
            if last:
                res_valid.next = 1
                res_tok.next = t
                res_cluster.next = dec_cl
                res_new.next = dec_open
                if dec_open:
                    ncl.next = ncl + 1
                g.next = 0
                run_d.next = SENT
                run_i.next = 0
                if t + 1 >= n_tok:
                    state.next = FIN
                else:
                    t.next = t + 1
            else:
                if g_d < run_d:
                    run_d.next = g_d
                    run_i.next = g * L + g_k
                g.next = g + 1
        else:
            done.next = 1
            state.next = IDLE

    return fsm


@block
def hcu(clk, rst, start, n_tok, n_cl_in, th, cur_we, cur_waddr, cur_wdata, key_we, key_waddr, key_wdata,
        busy, done, n_cl_out, res_valid, res_tok, res_cluster, res_new, p: HCUParams = HCUParams()):
    """The HCU. Ports (widths follow ``p``):

    start (1): begin a frame of ``n_tok`` (1..CUR_DEPTH) tokens against ``n_cl_in`` clusters already in memory.
    th: Th_hd. cur_*: LXE writes the frame's codes. key_*: preload of cluster codes (only while idle).
    busy/done: status; n_cl_out: clusters after the frame. res_*: one HC-table update per token.
    """
    p.check()
    W, L = p.code_bits, p.lanes
    DB = dist_bits(W)
    LB = max(1, (L - 1).bit_length())
    ROWS = p.depth // L
    RB = max(1, (ROWS - 1).bit_length())
    CB = p.depth.bit_length()  # cluster counts 0..depth
    state = Signal(intbv(0)[2:])
    t = Signal(intbv(0)[len(cur_waddr):])
    g, kw_row = (Signal(intbv(0)[RB:]) for _ in range(2))
    ncl, run_i, dec_cl = (Signal(intbv(0)[CB:]) for _ in range(3))
    run_d, g_d = (Signal(intbv((1 << DB) - 1)[DB:]) for _ in range(2))
    code, kw_data = (Signal(intbv(0)[W:]) for _ in range(2))
    g_k, kw_lane = (Signal(intbv(0)[LB:]) for _ in range(2))
    kw_we, last, dec_open = (Signal(bool(0)) for _ in range(3))
    rdatas = [Signal(intbv(0)[W:]) for _ in range(L)]
    row = ConcatSignal(*reversed(rdatas)) if L > 1 else rdatas[0]

    banks = [key_bank(clk, kw_we, kw_row, kw_lane, kw_data, g, rdatas[k], k, ROWS) for k in range(L)]
    cur = ram(clk, cur_we, cur_waddr, cur_wdata, ((t, code),), p.cur_depth)
    dist = xor_popcount(row, code, ncl, g, g_d, g_k, p)
    dec = decide(state, g, ncl, th, g_d, g_k, run_d, run_i, last, dec_open, dec_cl, p)
    wr = key_write(state, key_we, key_waddr, key_wdata, last, dec_open, ncl, code, kw_we, kw_row, kw_lane, kw_data,
                   p)
    ctrl = hcu_control(clk, rst, start, n_tok, n_cl_in, state, t, g, ncl, run_d, run_i, last, dec_open, dec_cl, g_d,
                       g_k, done, res_valid, res_tok, res_cluster, res_new, p)

    @always_comb
    def status():
        busy.next = state != IDLE
        n_cl_out.next = ncl

    return banks, cur, dist, dec, wr, ctrl, status


def hcu_ports(p: HCUParams) -> dict:
    """Fresh top-level signals for :func:`hcu` (also used for conversion)."""
    CB = p.depth.bit_length()
    return dict(
        clk=Signal(bool(0)), rst=ResetSignal(0, active=1, isasync=False), start=Signal(bool(0)),
        n_tok=Signal(intbv(0)[(p.cur_depth).bit_length():]), n_cl_in=Signal(intbv(0)[CB:]),
        th=Signal(intbv(0)[dist_bits(p.code_bits):]),
        cur_we=Signal(bool(0)), cur_waddr=Signal(intbv(0)[max(1, (p.cur_depth - 1).bit_length()):]),
        cur_wdata=Signal(intbv(0)[p.code_bits:]),
        key_we=Signal(bool(0)), key_waddr=Signal(intbv(0)[CB:]), key_wdata=Signal(intbv(0)[p.code_bits:]),
        busy=Signal(bool(0)), done=Signal(bool(0)), n_cl_out=Signal(intbv(0)[CB:]),
        res_valid=Signal(bool(0)), res_tok=Signal(intbv(0)[max(1, (p.cur_depth - 1).bit_length()):]),
        res_cluster=Signal(intbv(0)[CB:]), res_new=Signal(bool(0)))


@dataclass
class HCUFrameResult:
    assignment: np.ndarray  # [N] cluster index per token
    n_clusters: int  # clusters after the frame
    cycles: int  # cycles from start to done (busy cycles)


def simulate_hcu(frames: list[tuple[np.ndarray | None, np.ndarray]], th: int, p: HCUParams = HCUParams(),
                 record: list | None = None) -> list[HCUFrameResult]:
    """Run frames through one HCU instance.

    Each frame is ``(cluster_codes or None, new_codes [N <= cur_depth])``: with cluster codes, the key memory is
    preloaded with them (a fresh table); with None, the frame continues from the previous frame's clusters.
    """
    P = hcu_ports(p)
    mask = (1 << p.code_bits) - 1
    results: list[HCUFrameResult] = []

    @block
    def bench():
        dut = hcu(**P, p=p)

        clkgen = clock_driver(P["clk"])

        @instance
        def tb():
            clk = P["clk"]
            yield from reset_pulse(clk, P["rst"])
            ncl = 0
            for old, new in frames:
                new = np.asarray(new, dtype=np.int64).ravel()
                if old is not None:
                    old = np.asarray(old, dtype=np.int64).ravel()
                    for j, c in enumerate(old):
                        P["key_we"].next, P["key_waddr"].next, P["key_wdata"].next = 1, j, int(c) & mask
                        yield clk.negedge
                    P["key_we"].next = 0
                    ncl = old.size
                for j, c in enumerate(new):
                    P["cur_we"].next, P["cur_waddr"].next, P["cur_wdata"].next = 1, j, int(c) & mask
                    yield clk.negedge
                P["cur_we"].next = 0
                P["n_tok"].next, P["n_cl_in"].next, P["th"].next, P["start"].next = new.size, ncl, th, 1
                yield clk.negedge
                P["start"].next = 0
                assign = np.full(new.size, -1, dtype=np.int64)
                cycles = 0
                while True:
                    yield clk.negedge
                    cycles += 1
                    if P["res_valid"]:
                        assign[int(P["res_tok"])] = int(P["res_cluster"])
                    if P["done"]:
                        break
                ncl = int(P["n_cl_out"])
                results.append(HCUFrameResult(assign, ncl, cycles))
            raise StopSimulation()

        extra = [io_monitor(P, record)] if record is not None else []
        return dut, clkgen, tb, extra

    # Validate sizes before simulating (errors inside a generator are hard to read).
    ncl = 0
    for old, new in frames:
        n_new = np.asarray(new).size
        if not 1 <= n_new <= p.cur_depth:
            raise ValueError(f"a frame has {n_new} tokens; the current hash-bit memory holds 1..{p.cur_depth}")
        ncl = np.asarray(old).size if old is not None else ncl
        if ncl + n_new > p.depth:
            raise ValueError(f"{ncl}+{n_new} clusters exceed the key memory depth {p.depth}: tile the table")
        ncl += n_new  # upper bound
    bench().run_sim(quiet=1)
    return results
