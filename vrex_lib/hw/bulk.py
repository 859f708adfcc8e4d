"""Bulk verification of the converted Verilog: many vectors, driven from a file, checked against the reference.

MyHDL simulates the DRE blocks at a few hundred cycles per second, too slow for ten thousand vectors per block
inside notebook 04. Here the Verilog that MyHDL converted (``<block>.v``) runs under a compiled simulator —
Verilator, or Icarus Verilog when Verilator is absent (:func:`vrex_lib.hw.harness.pick_simulator`) — in the one
stimulus-file testbench of :mod:`vrex_lib.hw.harness`, driven the way the block's MyHDL testbench drives it, and
every vector is decoded and checked by the block's record (:mod:`vrex_lib.hw.blocks`). ``docs/DECISIONS.md D86``
records why this path exists beside the MyHDL check.
"""
from __future__ import annotations

from pathlib import Path

from .blocks import BlockSpec, OperatingPoint, spec
from .harness import simulate, simulate_runs

# A WAIT that sees no ``done`` within this many times the longest expected cycle count (plus a margin) ends as a
# timeout: that vector mismatches, and a hung block cannot stall the run.
WAIT_LIMIT_FACTOR, WAIT_LIMIT_MARGIN = 4, 64


def check_vectors(b: BlockSpec, vectors: list, ctx: OperatingPoint, p, vfile: Path, work: Path, simulator: str,
                  vcd: Path | None = None) -> dict:
    """Build the stimulus of ``vectors`` for block ``b``, simulate ``vfile`` with ``simulator`` and check every
    vector against the reference.

    Returns ``dict(simulator, vectors, mismatches, cycles, compile_s, run_s, cycles_per_s)`` and, under
    ``"_results"``, one result per input as the Verilog produced it: :class:`~vrex_lib.hw.hcu.HCUFrameResult`
    per HCU frame, :class:`~vrex_lib.hw.wtu_driver.WTURowResult` per WTU row (selection, cycles, scans; no state
    trace), ``(requests, cycles)`` per KVMU selection. ``vcd`` dumps the block's signals there.
    """
    stim, meta = b.stimulus(vectors, ctx, p)
    run = simulate(vfile, b.name, b.ports(p), b.protocol, stim, work, simulator,
                   WAIT_LIMIT_FACTOR * b.longest(meta) + WAIT_LIMIT_MARGIN, vcd)
    chk = b.check_log(run, meta, p)
    return dict(simulator=simulator, vectors=chk["vectors"], mismatches=chk["mismatches"], cycles=run.cycles,
                compile_s=run.compile_s, run_s=run.run_s, cycles_per_s=round(run.cycles_per_s, 1),
                _results=chk["results"])


def check_runs(b: BlockSpec, runs: list[tuple[list, Path | None]], ctx: OperatingPoint, p, vfile: Path, work: Path,
               simulator: str) -> list[dict]:
    """:func:`check_vectors` for several vector sets ``(vectors, vcd or None)`` on one compiled testbench (one
    compile, one run each: e.g. a short run of real vectors with a VCD and the long bulk run without)."""
    built = [b.stimulus(v, ctx, p) for v, _ in runs]
    limit = max(WAIT_LIMIT_FACTOR * b.longest(meta) + WAIT_LIMIT_MARGIN for _, meta in built)
    sims = simulate_runs(vfile, b.name, b.ports(p), b.protocol, [(s, vcd) for (s, _), (_, vcd) in zip(built, runs)],
                         work, simulator, limit)
    out = []
    for run, (_, meta) in zip(sims, built):
        chk = b.check_log(run, meta, p)
        out.append(dict(simulator=simulator, vectors=chk["vectors"], mismatches=chk["mismatches"], cycles=run.cycles,
                        compile_s=run.compile_s, run_s=run.run_s, cycles_per_s=round(run.cycles_per_s, 1),
                        _results=chk["results"]))
    return out


def run_block(block_name: str, vectors: list, vfile: Path, work: Path, simulator: str, *, th: int = 0,
              ratio_q: int = 0, bytes_per_token: int = 0, p=None) -> dict:
    """:func:`check_vectors` for the block named ``block_name`` at Th_hd ``th``, Th_r-wics ``ratio_q`` (Q0.16)
    and ``bytes_per_token``; ``p`` its parameters (None for the KVMU)."""
    ctx = OperatingPoint(th=th, ratio=ratio_q / 2 ** 16, bytes_per_token=bytes_per_token)  # exact: r_q / 2^16 in binary
    return check_vectors(spec(block_name), vectors, ctx, p, vfile, work, simulator)
