"""Energy and area estimator for V-Rex: cited constants -> 14 nm / 0.8 V -> blocks -> Table III.

    constants.py  ONE table of component-action energies/areas at their native node, each with a source
    scaling.py    Stillmaker-Baas node/Vdd scaling (energy, area)
    library.py    derived components at 14 nm / 0.8 V (BF16 MAC, adders, multipliers, SRAM, ...)
    core.py       per-block area/power of one core from VRexCoreConfig counts x Activity
    offchip.py    DRAM pJ/bit, PCIe W/lane, SSD power
    synth.py      cross-check of DRE logic area against yosys cell counts

Public API used by vrex_lib.perf: CorePowerModel (leakage + clock + activity x dynamic of one core),
dram_pj_per_bit, PCIE_W_PER_LANE, pcie_power_w, ssd_power_w, core_breakdown, chip_area_mm2, Activity.
"""
from __future__ import annotations

from .core import (DRE_BLOCKS, TABLE3_BLOCKS, Activity, CorePowerModel, MicroArch, block_table, chip_area_mm2,
                   core_area_mm2, core_breakdown, dre_share)
from .library import Library, part
from .offchip import PCIE_W_PER_LANE, dram_pj_per_bit, pcie_power_w, ssd_power_w

_ACTIONS = {"mac": ("mac",), "adder": ("add",), "multiplier": ("multiply",), "comparator": ("compare",),
            "counter": ("count",), "popcount": ("count",), "xor": ("xor",), "register": ("clock", "read", "write"),
            "sram": ("read", "write")}


def action_energy_pj(component: str, action: str, arith: str = "horowitz") -> float:
    """Energy (pJ) of one ``action`` of ``component`` at 14 nm / 0.8 V.

    Components: 'bf16_mac' (mac), 'bf16_multiplier'/'fp32_multiplier'/'int16_multiplier' (multiply),
    'bf16_adder'/'fp32_adder'/'int32_adder' (add), 'comparator16' (compare), 'counter32' (count),
    'popcount32' (count), 'xor32' (xor), 'register' (clock/read/write, per bit), 'sram_32kb'
    (read/write, per 64-bit word).
    """
    kind = next((k for k in _ACTIONS if k in component), None)
    if kind is None or action not in _ACTIONS[kind]:
        allowed = _ACTIONS.get(kind, ())
        raise ValueError(f"action {action!r} not defined for component {component!r}"
                         + (f"; use one of {allowed}" if allowed else ""))
    return part(component, arith).energy_pj


__all__ = ["Activity", "CorePowerModel", "DRE_BLOCKS", "Library", "MicroArch", "PCIE_W_PER_LANE", "TABLE3_BLOCKS",
           "action_energy_pj",
           "block_table", "chip_area_mm2", "core_area_mm2", "core_breakdown", "dram_pj_per_bit", "dre_share", "part",
           "pcie_power_w", "ssd_power_w"]
