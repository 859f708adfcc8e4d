"""One bank-level DRAM model per memory technology, shared by every system on that memory (docs/PERF_MODEL.md).

LPDDR5 x256 (V-Rex8 and the Jetson AGX Orin) and HBM2e x5120 (V-Rex48 and the A100) get their JEDEC timing from
their :mod:`vrex_lib.memtech` record (listed in :mod:`vrex_lib.perf.constants`); the peak data rate is Table I's bandwidth over the bus width. For one *access stream*
-- contiguous runs of ``run_bytes`` starting at random addresses, all reads or all writes -- the sustained share of
the peak is the product of three losses, each from the timing:

* **refresh**: all-bank refresh blocks the channel for tRFC every tREFI: ``1 - tRFC / tREFI``;
* **row activations**: addresses map column-first (DRAMsim3's ``rorabgbachco``), so a run fills one channel's row
  before moving on; a run of R bytes at a random offset opens ``1 + (R - burst) / page`` rows, each delivering
  ``bytes_per_act`` in ``bytes_per_act / channel rate``; activations are spaced by at least
  ``max(tRRD, tFAW / 4, tRC / banks_busy)``. ``banks_busy`` is every bank for a long run (consecutive rows go to
  consecutive banks) and, for short random runs, the expected number of distinct banks among the controller's
  ``queue_depth`` requests, ``B (1 - (1 - 1/B)^Q)`` (bank conflicts);
* **read/write turnaround** (write streams): the controller drains ``write_batch`` bursts at a time between reads
  and pays ``tRTW + tWTR`` per batch (Ramulator2's rules: RD->WR = CL + BL + 2 tCK - CWL, WR->RD = CWL + BL + tWTR);
  an unbounded batch (a GPU's write-back L2 in front of the controllers, docs/DECISIONS.md D240) pays none.

Bank-group tCCD_L is taken as hidden by interleaving bursts over bank groups (docs/DECISIONS.md D100).

    t = timing("lpddr5", peak_bytes_s=204.8e9)
    stream_efficiency(t).total                          # 0.928: long weight stream
    stream_efficiency(t, run_bytes=256, write=True)     # a scattered KV write
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from .. import memtech
from .constants import const

#: The DRAM technologies with JEDEC timing (a :class:`~vrex_lib.memtech.MemoryTech` record each).
TECHS: tuple[str, ...] = tuple(n for n in memtech.DRAM if memtech.dram(n).timing is not None)


@dataclass(frozen=True)
class DramTiming:
    """One memory system: ``n_channels`` channels of the technology's ``jedec`` channel (organisation and timing in
    seconds: the :class:`~vrex_lib.memtech.JedecTiming` of its record), each controller's queue and write batch."""

    tech: str
    peak_bytes_s: float
    n_channels: int
    jedec: memtech.JedecTiming
    queue_depth: int
    write_batch: float

    @property
    def channel_bytes_s(self) -> float:
        return self.peak_bytes_s / self.n_channels


def timing(tech: "str | memtech.MemoryTech", peak_bytes_s: float, bus_bits: int,
           write_batch: float | None = None) -> DramTiming:
    """The DRAM of ``bus_bits`` of technology ``tech`` (a record or its name) at Table I's ``peak_bytes_s``;
    ``write_batch``: bursts the controller drains per read/write turnaround (None: DRAMsim3's, ``dram_ctrl``)."""
    rec = memtech.dram(tech) if not isinstance(tech, memtech.MemoryTech) else tech
    if rec.timing is None:
        raise ValueError(f"DRAM {rec.name} has no JEDEC timing ({rec.timing_none}); choose one of {', '.join(TECHS)}")
    if peak_bytes_s <= 0 or bus_bits <= 0:
        raise ValueError(f"DRAM {rec.name}: peak_bytes_s and bus_bits must be > 0 (got {peak_bytes_s}, {bus_bits})")
    t = rec.timing
    if bus_bits % t.channel_bits:
        raise ValueError(f"DRAM {rec.name}: a {bus_bits}-bit bus is not a whole number of {t.channel_bits}-bit channels")
    return DramTiming(rec.name, peak_bytes_s, bus_bits // t.channel_bits, t,
                      queue_depth=int(const("dram_ctrl.queue_depth")),
                      write_batch=const("dram_ctrl.write_batch") if write_batch is None else write_batch)


@dataclass(frozen=True)
class StreamEff:
    """Sustained share of the peak for one stream and its factors (``total`` = their product)."""

    refresh: float
    row: float
    turnaround: float
    bytes_per_act: float
    act_interval_s: float

    @property
    def total(self) -> float:
        return self.refresh * self.row * self.turnaround


def busy_banks(banks: int, queue_depth: int) -> float:
    """Expected distinct banks among ``queue_depth`` requests to uniformly random banks: B (1 - (1 - 1/B)^Q)."""
    return banks * (1.0 - (1.0 - 1.0 / banks) ** queue_depth)


def stream_efficiency(t: DramTiming, run_bytes: float = math.inf, write: bool = False) -> StreamEff:
    """Sustained efficiency of a stream of contiguous ``run_bytes`` runs (reads, or writes when ``write``)."""
    if not run_bytes > 0:
        raise ValueError(f"run_bytes must be > 0, got {run_bytes}")
    j = t.jedec
    refresh = 1.0 - j.tRFC_s / j.tREFI_s
    b, page = j.burst_bytes, j.page_bytes
    run = max(float(run_bytes), float(b))
    per_act = page if math.isinf(run) else run / (1.0 + (run - b) / page)
    banks = j.banks if run >= page else busy_banks(j.banks, t.queue_depth)
    act_s = max(j.tRRD_s, j.tFAW_s / 4.0, j.tRC_s / banks)
    row = min(1.0, per_act / t.channel_bytes_s / act_s)
    turn = 1.0
    if write and math.isfinite(t.write_batch):
        batch_s = t.write_batch * b / t.channel_bytes_s
        turn = batch_s / (batch_s + j.turnaround_s)
    return StreamEff(refresh, row, turn, per_act, act_s)


def copy_efficiency(t: DramTiming) -> float:
    """A copy kernel (a[i] = b[i]: one long read stream + one long write stream of equal bytes), as counted by a
    copy benchmark (bytes read + bytes written over the time): the harmonic mean of the two streams."""
    r = stream_efficiency(t).total
    w = stream_efficiency(t, write=True).total
    return 2.0 / (1.0 / r + 1.0 / w)


class StreamRates:
    """Achieved B/s per (run bytes, write) for one system's DRAM, computed once per stream within one step
    (a per-call object: no module state). ``side_eff`` is a system-side factor on top (the GPU's mem_side_eff)."""

    def __init__(self, t: DramTiming, side_eff: float = 1.0) -> None:
        self.timing, self.side_eff = t, side_eff
        self._memo: dict[tuple[float, bool], float] = {}

    def rate(self, run_bytes: float = math.inf, write: bool = False) -> float:
        key = (run_bytes, write)
        if key not in self._memo:
            self._memo[key] = self.timing.peak_bytes_s * stream_efficiency(self.timing, run_bytes, write).total \
                * self.side_eff
        return self._memo[key]
