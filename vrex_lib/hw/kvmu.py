"""KVMU — KV cache Management Unit (paper §V.C, Fig. 12): cluster-contiguous mapping and the prefetch stream.

Offloaded KV of one (layer, KV head) is stored *cluster-contiguous*: the tokens of cluster j occupy
``[base_j, base_j + count_j · bytes_per_token)`` with ``base_j = Σ_{i<j} count_i · bytes_per_token`` (the
KVMU reorders each frame's KV as it is offloaded; §V.C). A selection (the WTU's selected-cluster bitmask)
becomes a prefetch request stream: one transaction per maximal run of selected clusters with no unselected
byte between them (unselected empty clusters do not break a run; empty runs are not issued). The baseline is
the token-scattered layout (tokens in arrival order): one transaction per maximal run of consecutive
selected tokens. The layout and the merge rule are ``docs/DECISIONS.md D85``.

:func:`kvmu` is the MyHDL block (one cluster per cycle in, at most one request per cycle out);
:func:`prefetch_requests` / :func:`scattered_requests` are the software references.
"""
from __future__ import annotations

import numpy as np
from myhdl import ResetSignal, Signal, StopSimulation, always_comb, always_seq, block, instance, intbv

from ._sim import clock_driver, io_monitor, reset_pulse
from .fixedpoint import C_BITS


# ----------------------------------------------------------------------------------------- references
def prefetch_requests(selected: np.ndarray, counts: np.ndarray, bytes_per_token: int) -> list[tuple[int, int]]:
    """(address, bytes) transactions fetching the selected clusters from the cluster-contiguous layout."""
    sel = np.asarray(selected, dtype=bool)
    c = np.asarray(counts, dtype=np.int64)
    reqs: list[tuple[int, int]] = []
    base, run_addr, run_len, open_ = 0, 0, 0, False
    for s, n in zip(sel, c):
        nb = int(n) * int(bytes_per_token)
        if s:
            if not open_:
                run_addr, run_len, open_ = base, 0, True
            run_len += nb
        elif nb and open_:
            if run_len:
                reqs.append((run_addr, run_len))
            open_ = False
        base += nb
    if open_ and run_len:
        reqs.append((run_addr, run_len))
    return reqs


def scattered_requests(assignment: np.ndarray, selected: np.ndarray, bytes_per_token: int) -> list[tuple[int, int]]:
    """Transactions for the token-scattered layout: tokens stored in arrival order, ``assignment [T]`` = cluster."""
    tok_sel = np.asarray(selected, dtype=bool)[np.asarray(assignment, dtype=np.int64)]
    reqs, t, T = [], 0, tok_sel.size
    while t < T:
        if tok_sel[t]:
            u = t
            while u < T and tok_sel[u]:
                u += 1
            reqs.append((t * int(bytes_per_token), (u - t) * int(bytes_per_token)))
            t = u
        else:
            t += 1
    return reqs


def transfer_time_s(reqs: list[tuple[int, int]], bandwidth_bps: float, per_txn_s: float) -> float:
    """Link time of a request stream: a fixed cost per transaction plus bytes / bandwidth."""
    return len(reqs) * per_txn_s + sum(n for _, n in reqs) / bandwidth_bps


# ------------------------------------------------------------------------------------------------ MyHDL
@block
def kvmu(clk, rst, in_valid, in_last, in_sel, in_count, bpt, req_valid, req_addr, req_len, busy_out,
         addr_bits: int = 40):
    """Stream one cluster per cycle (``in_sel``, ``in_count``; ``in_last`` on the final one, bytes per token
    ``bpt``); emits ``req_valid/req_addr/req_len`` for each merged run. ``busy_out``: a run is open."""
    base = Signal(intbv(0)[addr_bits:])
    run_addr = Signal(intbv(0)[addr_bits:])
    run_len = Signal(intbv(0)[addr_bits:])
    run_open = Signal(bool(0))
    nbytes = Signal(intbv(0)[addr_bits:])

    @always_comb
    def mult():
        nbytes.next = in_count * bpt

    @always_seq(clk.posedge, reset=rst)
    def seq():
        ln = intbv(0)[addr_bits:]
        req_valid.next = 0
        if in_valid:
            if in_sel:
                if run_open:
                    ln[:] = run_len + nbytes
                    run_len.next = ln
                else:
                    ln[:] = nbytes
                    run_addr.next = base
                    run_len.next = ln
                    run_open.next = 1
                if in_last:
                    if ln != 0:
                        req_valid.next = 1
                        req_len.next = ln
                        if run_open:
                            req_addr.next = run_addr
                        else:
                            req_addr.next = base
                    run_open.next = 0
            elif run_open and (nbytes != 0 or in_last):
                if run_len != 0:
                    req_valid.next = 1
                    req_addr.next = run_addr
                    req_len.next = run_len
                run_open.next = 0
            if in_last:
                base.next = 0
            else:
                base.next = base + nbytes

    @always_comb
    def status():
        busy_out.next = run_open

    return mult, seq, status


def kvmu_ports(addr_bits: int = 40) -> dict:
    return dict(clk=Signal(bool(0)), rst=ResetSignal(0, active=1, isasync=False), in_valid=Signal(bool(0)),
                in_last=Signal(bool(0)), in_sel=Signal(bool(0)), in_count=Signal(intbv(0)[C_BITS:]),
                bpt=Signal(intbv(0)[16:]), req_valid=Signal(bool(0)), req_addr=Signal(intbv(0)[addr_bits:]),
                req_len=Signal(intbv(0)[addr_bits:]), busy_out=Signal(bool(0)))


def simulate_kvmu(selections: list[tuple[np.ndarray, np.ndarray]], bytes_per_token: int,
                  record: list | None = None) -> list[tuple[list[tuple[int, int]], int]]:
    """Stream ``(selected [C], counts [C])`` selections; returns per selection (requests, cycles)."""
    P = kvmu_ports()
    out: list = []

    @block
    def bench():
        dut = kvmu(**P)

        clkgen = clock_driver(P["clk"])

        @instance
        def tb():
            clk = P["clk"]
            yield from reset_pulse(clk, P["rst"])
            P["bpt"].next = bytes_per_token
            for sel, cnt in selections:
                reqs, cycles = [], 0
                C = len(cnt)
                for j in range(C + 1):
                    if j < C:
                        P["in_valid"].next, P["in_sel"].next = 1, bool(sel[j])
                        P["in_count"].next, P["in_last"].next = int(cnt[j]), j == C - 1
                    else:
                        P["in_valid"].next, P["in_last"].next = 0, 0
                    yield clk.negedge
                    cycles += 1
                    if P["req_valid"]:
                        reqs.append((int(P["req_addr"]), int(P["req_len"])))
                out.append((reqs, cycles))
            raise StopSimulation()

        extra = [io_monitor(P, record)] if record is not None else []
        return dut, clkgen, tb, extra

    bench().run_sim(quiet=1)
    return out
