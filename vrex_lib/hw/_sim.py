"""Simulation helpers shared by the block testbenches: clock, reset, an I/O recorder for the Verilog replay, and
the two step drivers of the sub-block testbenches (:func:`drive_comb`, :func:`drive_clocked`) and the streaming
testbench of a pipelined block (:func:`stream_pipeline`)."""
from __future__ import annotations

from myhdl import StopSimulation, always, block, delay, instance


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


def stream_pipeline(blk, kwargs: dict, ports: dict, n_inputs: int, latency: int, apply, out: str,
                    record: list | None = None) -> tuple[list[int], int]:
    """Testbench of a pipelined block with ``in_valid``/``out_valid``: after reset, input i on clock i (``apply(i)``
    sets its ports; ``apply(None)`` on the ``latency`` idle clocks after the last), ``ports[out]`` read at each
    falling edge where ``out_valid`` is high. ``blk(**kwargs)`` is the block (built inside the bench, as MyHDL
requires); ``record``: see :func:`io_monitor`.
    Returns (the outputs in order, clocks run)."""
    got: list[int] = []
    cycles = [0]

    @block
    def bench():
        dut = blk(**kwargs)
        clkgen = clock_driver(ports["clk"])

        @instance
        def tb():
            clk = ports["clk"]
            yield from reset_pulse(clk, ports["rst"])
            for i in range(n_inputs + latency):
                live = i < n_inputs
                ports["in_valid"].next = live
                apply(i if live else None)
                yield clk.negedge
                cycles[0] += 1
                if ports["out_valid"]:
                    got.append(int(ports[out]))
            raise StopSimulation()

        extra = [io_monitor(ports, record)] if record is not None else []
        return dut, clkgen, tb, extra

    bench().run_sim(quiet=1)
    return got, cycles[0]


def drive_comb(blk, args: tuple, ports: dict, steps: list[dict], outputs: list[str]) -> list[dict]:
    """Apply each step's inputs to the combinational block ``blk(*args)`` and read ``outputs`` once settled."""
    return _drive(blk, args, ports, steps, outputs, clocked=False)


def drive_clocked(blk, args: tuple, ports: dict, steps: list[dict], outputs: list[str]) -> list[dict]:
    """Per step: apply its inputs to the block ``blk(*args)``, give one rising clock edge (``ports["clk"]``), read
    ``outputs``."""
    return _drive(blk, args, ports, steps, outputs, clocked=True)


def _drive(blk, args: tuple, ports: dict, steps: list[dict], outputs: list[str], clocked: bool) -> list[dict]:
    """Per step: apply its inputs, settle (and, when ``clocked``, pulse ``ports["clk"]`` once), read ``outputs``."""
    got: list[dict] = []

    @block
    def bench():
        dut = blk(*args)

        @instance
        def tb():
            for step in steps:
                for k, v in step.items():
                    ports[k].next = v
                yield delay(1)
                if clocked:
                    ports["clk"].next = 1
                    yield delay(1)
                    ports["clk"].next = 0
                    yield delay(1)
                got.append({k: int(ports[k]) for k in outputs})
            raise StopSimulation()

        return dut, tb

    bench().run_sim(quiet=1)
    return got
