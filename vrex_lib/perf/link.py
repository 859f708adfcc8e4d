"""The offload link and tier: NVMe commands to the SSD (edge), PCIe link power in its ASPM states.

**A fetch** of ``bytes_`` issued as ``n_commands`` reads takes the longest of (docs/DECISIONS.md D105):

* the link: ``(bytes_ + n_commands x command overhead) / achieved link rate`` -- every NVMe command costs a 64-B
  submission entry, a 16-B completion entry, two doorbells and an MSI-X write, each a TLP with its own overhead;
* the SSD: ``n_commands / read IOPS`` (the drive's random-read rating, 4 KiB commands);
* the queue: ``n_commands x read latency / queue depth`` (Little's law with that many commands in flight).

The host-DRAM tier (server) moves cache lines by DMA with no command overhead.

**Link power** (ASPM, docs/DECISIONS.md D106): during an idle gap the link stays in L0 for ``pcie.l0s_entry_s``, then
in L0s until ``pcie.l1_entry_s``, then in L1.2; ``aspm='off'`` keeps L0 (the upper bound), ``'l0s'`` stops at L0s.

    fetch_time_s(1e6, 122, link_bytes_s=3.6e9, ssd=True, queue_depth=64)
    idle_power_frac([0.5e-3, 1e-6], "l1")
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from .constants import const

ASPM_POLICIES: tuple[str, ...] = ("l1", "l0s", "off")


def command_overhead_bytes() -> float:
    """Link bytes one NVMe read command costs besides its data (5 TLPs: SQE fetch, CQE, 2 doorbells, MSI-X)."""
    return const("nvme.command_bytes") + 5 * const("pcie.tlp_overhead_bytes")


def fetch_time_s(bytes_: float, n_commands: float, *, link_bytes_s: float, ssd: bool, queue_depth: int,
                 read_iops: float | None = None, read_latency_s: float | None = None) -> float:
    """Seconds to fetch ``bytes_`` in ``n_commands`` reads (see the module docstring); the SSD's IOPS and QD1 read
    latency default to the table's (the NVMe SSD record's)."""
    if bytes_ < 0 or n_commands < 0 or link_bytes_s <= 0:
        raise ValueError(f"fetch_time_s: bytes_ and n_commands >= 0, link > 0 (got {bytes_}, {n_commands}, "
                         f"{link_bytes_s})")
    if bytes_ == 0:
        return 0.0
    if not ssd:
        return bytes_ / link_bytes_s
    if queue_depth < 1:
        raise ValueError(f"fetch_time_s: queue_depth must be >= 1, got {queue_depth}")
    t_link = (bytes_ + n_commands * command_overhead_bytes()) / link_bytes_s
    t_iops = n_commands / (const("ssd.read_iops") if read_iops is None else read_iops)
    t_queue = n_commands * (const("ssd.read_latency_s") if read_latency_s is None else read_latency_s) / queue_depth
    return max(t_link, t_iops, t_queue)


def command_bytes(layout: str, run_bytes: float, chunk_bytes: float, granule: float) -> float:
    """Mean bytes one read command moves: the whole granules one selected run spans, as
    :func:`vrex_lib.perf.methods.moved_fraction` counts them (``cluster``: runs aligned by the KVMU span
    ``run/g + 1/2`` granules; ``token``/``block``: ``(g + run - chunk)/g``), or ``nvme.seq_command_bytes`` for a
    sequential read of the whole tier (``all``)."""
    if layout == "all":
        return const("nvme.seq_command_bytes")
    if run_bytes <= 0 or chunk_bytes <= 0 or granule <= 0:
        raise ValueError(f"command_bytes: run, chunk and granule bytes must be > 0 (got {run_bytes}, {chunk_bytes}, "
                         f"{granule})")
    g = max(granule, chunk_bytes)
    span = run_bytes / g + 0.5 if layout == "cluster" else (g + run_bytes - chunk_bytes) / g
    return g * max(1.0, span)


def idle_power_frac(gaps_s: Sequence[float], aspm: str) -> tuple[float, float]:
    """(idle seconds, L0-equivalent seconds) over the link's idle ``gaps_s`` under ``aspm``: the energy of the idle
    time is ``L0-equivalent seconds x full link power``."""
    if aspm not in ASPM_POLICIES:
        raise ValueError(f"aspm {aspm!r}: choose one of {', '.join(ASPM_POLICIES)}")
    e0s, e1 = const("pcie.l0s_entry_s"), const("pcie.l1_entry_s")
    f0s, f1 = const("pcie.l0s_power_frac"), const("pcie.l1_power_frac")
    total = eq = 0.0
    for g in gaps_s:
        if g < 0 or math.isnan(g):
            raise ValueError(f"idle_power_frac: gaps must be >= 0, got {g}")
        total += g
        if aspm == "off" or g <= e0s:
            eq += g
        elif aspm == "l0s" or g <= e1:
            eq += e0s + (g - e0s) * f0s
        else:
            eq += e0s + (e1 - e0s) * f0s + (g - e1) * f1
    return total, eq
