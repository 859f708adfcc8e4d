"""On-chip memories of the DRE as MyHDL blocks (synchronous write, asynchronous read).

Kept as plain signal lists so yosys sees them as ``$mem`` cells (the synthesis recipe keeps memories unmapped
with ``memory -nomap``; their full-size bit counts are reported analytically by ``verify``).
"""
from __future__ import annotations

from myhdl import Signal, always, always_comb, block, intbv


@block
def ram_1w1r(clk, we, waddr, wdata, raddr, rdata, depth: int):
    """``depth`` words of ``len(wdata)`` bits: one write port (clocked), one read port (combinational)."""
    mem = [Signal(intbv(0)[len(wdata):]) for _ in range(depth)]

    @always(clk.posedge)
    def write():
        if we:
            mem[waddr].next = wdata

    @always_comb
    def read():
        rdata.next = mem[raddr]

    return write, read
