"""Off-chip energy and power: DRAM pJ/bit, PCIe W/lane, SSD power (rows of :mod:`.constants`).

These are not technology-scaled: DRAM and link energy is dominated by the memory array and I/O of
the device itself, not by the accelerator's logic node.
"""
from __future__ import annotations

from .. import paper
from . import constants as C

_DRAM = {"lpddr5": "dram_lpddr5", "hbm2e": "dram_hbm2e", "ddr4": "dram_ddr4"}

#: PCIe link power per lane (W), the V-Rex paper's own modelling input (§VI.A).
PCIE_W_PER_LANE: float = paper.value("system.pcie_w_per_lane")


def dram_pj_per_bit(kind: str) -> float:
    """Energy per bit transferred for 'lpddr5' | 'hbm2e' | 'ddr4' (see constants rows for sources/caveats)."""
    try:
        return C.rows(_DRAM[kind.lower()], "transfer")[0].energy_pJ
    except KeyError:
        raise ValueError(f"unknown DRAM kind {kind!r}: choose one of {sorted(_DRAM)}") from None


def ssd_power_w(state: str) -> float:
    """Power of the M.2 NVMe SSD (Kioxia BG6) in 'active' or 'idle' state, W."""
    if state not in ("active", "idle"):
        raise ValueError(f"unknown SSD state {state!r}: choose 'active' or 'idle'")
    return C.rows("ssd", state)[0].leakage_uW * 1e-6


def pcie_power_w(lanes: int) -> float:
    """Power of an active PCIe link of ``lanes`` lanes at the paper's 3 W per lane."""
    return lanes * PCIE_W_PER_LANE
