"""Off-chip energy and power: DRAM pJ/bit, DRAM background power, DRAM-interface (PHY) pJ/bit, PCIe W/lane
busy and idle, SSD power (rows of :mod:`.constants`).

These are not technology-scaled: DRAM and link energy is dominated by the memory array and I/O of
the device itself, not by the accelerator's logic node.
"""
from __future__ import annotations

from functools import lru_cache

from .. import paper
from . import constants as C
from .dram import dram_energy

_DRAM = {"lpddr5": "dram_lpddr5", "hbm2e": "dram_hbm2e", "ddr4": "dram_ddr4"}
#: DRAM kinds whose energy per bit the tools give: the IDD core of a cited device + CACTI-IO's interface, PHY
#: included (:func:`vrex_lib.estimate.dram.dram_energy`, docs/DECISIONS.md D124). CACTI-IO has an electrical model
#: for neither LPDDR5 nor HBM2e: those keep their cited rows (its LPDDR2 model run at LPDDR5 rates is an upper-bound
#: cross-check in notebook 05, not an input).
TOOL_KINDS: tuple[str, ...] = ("ddr4",)
_PHY = {"lpddr5": "dram_phy_lpddr5", "hbm2e": "dram_phy_hbm2e"}
_BG = {"lpddr5": "dram_lpddr5", "hbm2e": "dram_hbm2e"}

#: PCIe link power per lane (W), the V-Rex paper's own modelling input (§VI.A).
PCIE_W_PER_LANE: float = paper.spec("system.pcie_w_per_lane")


def dram_pj_per_bit(kind: str) -> float:
    """Energy per bit transferred for 'lpddr5' | 'hbm2e' | 'ddr4': from the tools for :data:`TOOL_KINDS` (device
    and PHY together), else the cited row (see the constants rows for sources and caveats)."""
    k = kind.lower()
    if k in TOOL_KINDS:
        return _tool_pj_per_bit(k)
    try:
        return C.rows(_DRAM[k], "transfer")[0].energy_pJ
    except KeyError:
        raise ValueError(f"unknown DRAM kind {kind!r}: choose one of {sorted(_DRAM)}") from None


@lru_cache(maxsize=None)
def _tool_pj_per_bit(kind: str) -> float:
    # The simulator asks once per step; CACTI-IO's result is cached on disk too, keyed by its configuration.
    return dram_energy(kind).total_pj_per_bit


def _kind(table: dict[str, str], kind: str, what: str) -> str:
    try:
        return table[kind.lower()]
    except KeyError:
        raise ValueError(f"no {what} for DRAM kind {kind!r}: choose one of {sorted(table)}") from None


def dram_phy_pj_per_bit(kind: str) -> float:
    """Accelerator-side DRAM interface (controller PHY) energy per bit moved, 'lpddr5' | 'hbm2e'."""
    return C.rows(_kind(_PHY, kind, "PHY energy"), "transfer")[0].energy_pJ


def dram_background_w(kind: str, capacity_bytes: float) -> float:
    """Standby + refresh power (W) of ``capacity_bytes`` of 'lpddr5' | 'hbm2e' DRAM, drawn whether or not the
    memory is accessed: the cited device's power x (capacity / device capacity)."""
    if capacity_bytes < 0:
        raise ValueError(f"capacity_bytes must be >= 0, got {capacity_bytes}")
    row = C.rows(_kind(_BG, kind, "background power"), "background")[0]
    device_bytes = row.width * 1e9 / 8  # width holds the device capacity in Gbit
    return row.leakage_uW * 1e-6 * capacity_bytes / device_bytes


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
    return lanes * PCIE_W_PER_LANE * (1.0 if state == "active" else pcie_idle_fraction())
