"""Runs rows through the WTU top (:func:`vrex_lib.hw.wtu.wtu`) in MyHDL: load a row's scores and counts a row group
per cycle, start, clock to ``done``, read the selection (and the aggregate) back -- :func:`simulate_wtu`, the
testbench of the whole unit, checked against the integer reference in tests/test_hw.py and by ``hw.blocks``."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from myhdl import StopSimulation, block, instance

from ._sim import clock_driver, io_monitor, reset_pulse
from .fixedpoint import C_BITS, W_BITS
from .harness import pack_lanes
from .wtu import wtu, wtu_ports
from .wtu_blocks import STATE_NAMES, WALK, WTUParams


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
