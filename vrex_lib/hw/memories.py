"""On-chip memories of the DRE as MyHDL blocks (synchronous write, asynchronous reads).

Kept as plain signal lists so yosys sees them as ``$mem`` cells (the synthesis recipe keeps memories unmapped
with ``memory -nomap``; their full-size bit counts are reported analytically by ``verify``).
"""
from __future__ import annotations

from collections.abc import Sequence

from myhdl import Signal, SignalType, always, always_comb, block, intbv

Sig = SignalType  # the type of a block port: a MyHDL signal


@block
def read_port(mem: list, raddr: Sig, rdata: Sig):
    """One combinational read port of ``mem``: ``rdata = mem[raddr]``."""

    @always_comb
    def read():
        rdata.next = mem[raddr]

    return read


@block
def ram(clk: Sig, we: Sig, waddr: Sig, wdata: Sig, reads: Sequence[tuple[SignalType, SignalType]], depth: int):
    """``depth`` words of ``len(wdata)`` bits: one clocked write port and one combinational read port per
    ``(raddr, rdata)`` pair of ``reads`` (the WTU's aggregate has two: read-modify-write and the host read)."""
    mem = [Signal(intbv(0)[len(wdata):]) for _ in range(depth)]

    @always(clk.posedge)
    def write():
        if we:
            mem[waddr].next = wdata

    ports = [read_port(mem, a, d) for a, d in reads]
    return write, ports
