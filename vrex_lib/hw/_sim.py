"""Simulation helpers shared by the block testbenches: an I/O recorder for the Verilog replay (verify.py)."""
from __future__ import annotations

from myhdl import block, instance


@block
def io_monitor(ports: dict, record: list):
    """Each falling clock edge, append the values of every port (dict order) to ``record``.

    The falling edge is mid-cycle: inputs applied at the previous falling edge and the outputs they and the
    last rising edge produce are both settled, in MyHDL and in the Verilog replay alike.
    """
    names = [k for k in ports if k != "clk"]

    @instance
    def monitor():
        while True:
            yield ports["clk"].negedge
            record.append(tuple(int(ports[k]) for k in names))

    return monitor
