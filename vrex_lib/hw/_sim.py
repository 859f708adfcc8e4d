"""Simulation helpers shared by the block testbenches: clock, reset, and an I/O recorder for the Verilog replay."""
from __future__ import annotations

from myhdl import always, block, delay, instance


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


@block
def clock_driver(clk, half_period: int = 5):
    """A free-running testbench clock with period ``2 * half_period`` time units."""

    @always(delay(half_period))
    def gen():
        clk.next = not clk

    return gen


def reset_pulse(clk, rst):
    """Testbench generator step: hold ``rst`` high until the first falling clock edge, then release it."""
    rst.next = 1
    yield clk.negedge
    rst.next = 0
