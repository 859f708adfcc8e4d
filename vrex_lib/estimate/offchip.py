"""Off-chip energy and power: DRAM pJ/bit, DRAM background power, DRAM-interface (PHY) pJ/bit, PCIe W/lane
busy and idle, SSD power (rows of :mod:`.constants`).

These are not technology-scaled: DRAM and link energy is dominated by the memory array and I/O of
the device itself, not by the accelerator's logic node.
"""
from __future__ import annotations

import math
import numbers

from functools import lru_cache

from .. import memtech, paper
from . import constants as C
from .dram import dram_energy

#: DRAM kinds whose energy per bit the tools give: the IDD core of a cited device + CACTI-IO's interface, PHY
#: included (:func:`vrex_lib.estimate.dram.dram_energy`, docs/DECISIONS.md D124) -- the records with
#: ``tools_energy``. The others keep their cited rows; a record says why it has no CACTI-IO model (``cacti_io_none``),
#: and LPDDR5's CACTI-IO channel (its LPDDR2 model at LPDDR5 rates) is an upper-bound cross-check, not an input.
TOOL_KINDS: tuple[str, ...] = tuple(n for n in memtech.DRAM if memtech.dram(n).tools_energy)

#: PCIe link power per lane (W), the V-Rex paper's own modelling input (§VI.A).
PCIE_W_PER_LANE: float = paper.spec("system.pcie_w_per_lane")


def _record(kind: "str | memtech.MemoryTech") -> memtech.MemoryTech:
    try:
        return memtech.dram(kind)
    except ValueError as e:
        raise ValueError(f"unknown DRAM kind {kind!r}: {e}") from None


def dram_pj_per_bit(kind: "str | memtech.MemoryTech") -> float:
    """Energy per bit transferred for a DRAM record or its name ('lpddr5' | 'hbm2e' | 'ddr4'): from the tools for
    :data:`TOOL_KINDS` (device and PHY together), else the record's cited row (see the constants rows for sources
    and caveats)."""
    m = _record(kind)
    if m.tools_energy:
        return _tool_pj_per_bit(m.name)
    return m.device_pj_per_bit * C.perturbation(f"dram_{m.name}", "energy_pJ")


@lru_cache(maxsize=None)
def _tool_pj_per_bit(kind: str) -> float:
    # The simulator asks once per step; CACTI-IO's result is cached on disk too, keyed by its configuration.
    return dram_energy(kind).total_pj_per_bit


def dram_phy_pj_per_bit(kind: "str | memtech.MemoryTech") -> float:
    """Accelerator-side DRAM interface (controller PHY) energy per bit moved, for a record with one ('lpddr5' |
    'hbm2e'); the record's reason where it has none."""
    m = _record(kind)
    if m.phy_pj_per_bit is None:
        raise ValueError(f"no PHY energy for DRAM kind {m.name!r}: {m.phy_note}")
    return m.phy_pj_per_bit * C.perturbation(f"dram_phy_{m.name}", "energy_pJ")


def dram_background_w(kind: "str | memtech.MemoryTech", capacity_bytes: float) -> float:
    """Standby + refresh power (W) of ``capacity_bytes`` of DRAM of a record with a background row ('lpddr5' |
    'hbm2e'), drawn whether or not the memory is accessed: the cited device's power x (capacity / device
    capacity)."""
    if capacity_bytes < 0:
        raise ValueError(f"capacity_bytes must be >= 0, got {capacity_bytes}")
    m = _record(kind)
    if m.background_w is None:
        raise ValueError(f"no background power for DRAM kind {m.name!r}: {m.background_note}")
    device_bytes = m.background_device_gbit * 1e9 / 8
    return m.background_w * C.perturbation(f"dram_{m.name}", "leakage_uW") * capacity_bytes / device_bytes


def pcie_idle_fraction() -> float:
    """Power of a PCIe link in L0 with no traffic, as a fraction of its full-load power."""
    return C.rows("pcie_lane", "idle_fraction")[0].energy_pJ


def ssd_power_w(state: str) -> float:
    """Power of the M.2 NVMe SSD (Kioxia BG6) in 'active' or 'idle' state, W."""
    if state not in ("active", "idle"):
        raise ValueError(f"unknown SSD state {state!r}: choose 'active' or 'idle'")
    return C.rows("ssd", state)[0].leakage_uW * 1e-6


def pcie_power_w(lanes: int, state: str = "active") -> float:
    """Power of a PCIe link of ``lanes`` lanes at the paper's 3 W per lane: 'active' (moving data) or 'idle'
    (L0, no traffic: :func:`pcie_idle_fraction` of it)."""
    if state not in ("active", "idle"):
        raise ValueError(f"unknown PCIe state {state!r}: choose 'active' or 'idle'")
    if (isinstance(lanes, bool) or not isinstance(lanes, numbers.Real) or not math.isfinite(lanes) or lanes < 0
            or lanes != int(lanes)):
        raise ValueError(f"pcie_power_w: lanes must be a whole number >= 0 (a PCIe link has 1, 2, 4, 8 or 16), got "
                         f"{lanes!r}")
    return lanes * PCIE_W_PER_LANE * (1.0 if state == "active" else pcie_idle_fraction())
