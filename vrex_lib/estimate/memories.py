"""Every on-chip memory of one core from CACTI (22 nm), scaled to 14 nm / 0.8 V with Stillmaker-Baas.

Memories (sizes from :class:`~vrex_lib.config.VRexCoreConfig`; banking and word widths below). Every array has one
read-write port, time-shared within the 800 MHz cycle: :func:`memory_table` refuses a bank whose accesses per cycle
do not fit in the clock period at CACTI's cycle time (docs/DECISIONS.md D121):

* LXE on-chip memory (Table III's "on-chip memory", 384 KB): ``lxe_banks`` banks of ``MicroArch.lxe_sram_bank_bytes``;
  word = the LXE's read traffic per cycle spread over the banks (:func:`lxe_word_bits`);
* HCU current hash-bit memory (Fig. 10: 128 B): N_hp-bit codes, one read per cycle;
* HCU key-cache hash-bit memory (Fig. 10: 4 KB; the on-chip buffer of the HC table's cluster codes): N_HCU-w banks
  of N_hp-bit codes, one code per bank per cycle (the RTL's banking, docs/DECISIONS.md D84);
* WTU score and token-count memories (Fig. 10: 8 KB each per WTU core): rows of N_WTU-w entries, one row per cycle.

CACTI gives, per array at 22 nm (its 0.8 V itrs-hp supply): read/write energy per access, leakage of the bank
(subthreshold + gate) and area. Energies and leakage are multiplied by the Stillmaker-Baas energy factor
(22 nm 0.8 V -> 14 nm 0.8 V), areas by their area factor -- the same scaling as every logic row (source
``stillmaker2017``: one set of fits for logic and SRAM, as Accelergy/hwcomponents scale CACTI). Power at an
activity = leakage + accesses per cycle x energy x f. Full activity (Table III's point) = the traffic of a fully
busy LXE / DRE: the DPE input vector and VPE operands (:func:`~vrex_lib.estimate.core.lxe_traffic_bits`), every
DRE lane reading every cycle.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import pandas as pd

from ..config import ReSVConfig, VRexCoreConfig
from .cacti import SramSpec, run_sram
from .core import MicroArch, lxe_banks, lxe_traffic_bits
from .library import Library
from .scaling import TARGET_NODE_NM, TARGET_VDD, area_factor, energy_factor


@dataclass(frozen=True)
class SramTech:
    """CACTI technology of every array: node (nm, a CACTI technology file), bit-cell and peripheral flavours,
    temperature (K). Defaults: 22 nm itrs-hp at 300 K (the cell library's 25 C corner); docs/DECISIONS.md D121."""

    node_nm: int = 22
    cell: str = "itrs-hp"
    periph: str = "itrs-hp"
    temperature_k: int = 300


@dataclass(frozen=True)
class Memory:
    """One kind of on-chip SRAM array: ``instances`` x ``size_bytes`` of ``width_bits`` words; accesses per cycle
    of one instance at full activity; ``activity``: the utilisation that scales them ('dpe+vpe' for the LXE)."""

    name: str
    block: str
    role: str
    size_bytes: int
    width_bits: int
    instances: int
    reads_per_cycle: float
    writes_per_cycle: float
    activity: str


def lxe_word_bits(cfg: VRexCoreConfig, ua: MicroArch) -> int:
    """Word of one LXE bank: the full-activity read bits per cycle over the banks, rounded up to a power of two
    (at least 64), unless ``ua.lxe_sram_word_bits`` sets it."""
    if ua.lxe_sram_word_bits:
        return int(ua.lxe_sram_word_bits)
    rd, _ = lxe_traffic_bits(cfg)
    return max(64, 2 ** math.ceil(math.log2(rd / lxe_banks(cfg, ua))))


def onchip_memories(cfg: VRexCoreConfig = VRexCoreConfig(), ua: MicroArch = MicroArch(),
                    n_hp: int = ReSVConfig().n_hp) -> list[Memory]:
    """The core's SRAM arrays with their full-activity traffic (module docstring)."""
    banks, word = lxe_banks(cfg, ua), lxe_word_bits(cfg, ua)
    rd, wr = lxe_traffic_bits(cfg)
    key_bank_bytes = cfg.hcu_key_hash_bytes // cfg.n_hcu_w
    row_bits = lambda entry_bits: cfg.n_wtu_w * entry_bits  # noqa: E731
    return [
        Memory("LXE on-chip memory", "On-chip memory", "activations and operands of the DPE/VPE",
               ua.lxe_sram_bank_bytes, word, banks, rd / word / banks, wr / word / banks, "dpe+vpe"),
        Memory("current hash-bit memory", "HCU", "the frame's key hash codes, written by the LXE",
               cfg.hcu_cur_hash_bytes, n_hp, cfg.n_hcu_h, 1.0, 0.0, "hcu"),
        Memory("key-cache hash-bit memory", "HCU", "cluster codes of the HC table (its on-chip buffer), one bank "
               "per lane", key_bank_bytes, n_hp, cfg.n_hcu_h * cfg.n_hcu_w, 1.0, 0.0, "hcu"),
        Memory("score memory", "WTU", "WiCSum scores of one query row", cfg.wtu_score_bytes, row_bits(ua.score_bits),
               cfg.n_wtu_h, 1.0, 0.0, "wtu"),
        Memory("token-count memory", "WTU", "tokens per cluster (HC table counts)", cfg.wtu_count_bytes,
               row_bits(ua.count_bits), cfg.n_wtu_h, 1.0, 0.0, "wtu"),
    ]


def memory_table(cfg: VRexCoreConfig = VRexCoreConfig(), ua: MicroArch = MicroArch(), *,
                 n_hp: int = ReSVConfig().n_hp, tech: SramTech = SramTech(), util: dict[str, float] | None = None,
                 cache_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per memory kind: CACTI at ``tech`` (``*_cacti`` columns, per instance), the same at 14 nm / 0.8 V
    for all instances (``read_pJ``, ``write_pJ`` per access; ``leakage_mW``, ``area_mm2``, ``dynamic_mW``,
    ``power_mW`` at ``cfg.freq_hz`` and the utilisations ``util`` (default 1: Table III's point)), and the
    component model's cross-check (``horowitz_read_pJ`` per access of the same width; ``cell_model_area_mm2``)."""
    util = util or {}
    af = area_factor(tech.node_nm, TARGET_NODE_NM)
    lib, f = Library(), cfg.freq_hz
    recs = []
    for m in onchip_memories(cfg, ua, n_hp):
        r = run_sram(SramSpec(m.size_bytes, m.width_bits, node_nm=tech.node_nm,
                              cell=tech.cell, periph=tech.periph, temperature_k=tech.temperature_k),
                     cache_dir=cache_dir)
        e = energy_factor(r.node_nm, r.vdd, TARGET_NODE_NM, TARGET_VDD)
        u, rd, wr = util.get(m.activity, 1.0), m.reads_per_cycle, m.writes_per_cycle
        if m.activity == "dpe+vpe":  # the LXE's traffic is the DPE's and the VPE's, at their own utilisations
            u = 1.0
            r_bits, w_bits = lxe_traffic_bits(cfg, util.get("dpe", 1.0), util.get("vpe", 1.0))
            rd, wr = r_bits / m.width_bits / m.instances, w_bits / m.width_bits / m.instances
        busy = (rd + wr) * u * r.cycle_time_ns * f * 1e-9
        if busy > 1.0:
            raise ValueError(f"{m.name}: {rd + wr:.2f} accesses per cycle x CACTI cycle time {r.cycle_time_ns:.3f} ns "
                             f"exceed the {1e9 / f:.2f} ns clock; use more banks (MicroArch.lxe_sram_bank_bytes) or "
                             "wider words (MicroArch.lxe_sram_word_bits)")
        dyn_mw = m.instances * u * (rd * r.read_energy_pj + wr * r.write_energy_pj) * e * f * 1e-9
        leak_mw = m.instances * r.leakage_mw * e
        recs.append(dict(memory=m.name, block=m.block, role=m.role, instances=m.instances, size_bytes=m.size_bytes,
                         width_bits=m.width_bits, reads_per_cycle=rd * u, writes_per_cycle=wr * u,
                         node_nm_cacti=r.node_nm, vdd_cacti=r.vdd, read_pJ_cacti=r.read_energy_pj,
                         write_pJ_cacti=r.write_energy_pj, leakage_mW_cacti=r.leakage_mw, area_mm2_cacti=r.area_mm2,
                         access_time_ns=r.access_time_ns, cycle_time_ns=r.cycle_time_ns, port_busy=busy,
                         area_efficiency_pct=r.area_efficiency_pct, energy_factor=e, area_factor=af,
                         read_pJ=r.read_energy_pj * e, write_pJ=r.write_energy_pj * e, leakage_mW=leak_mw,
                         area_mm2=m.instances * r.area_mm2 * af, dynamic_mW=dyn_mw, power_mW=dyn_mw + leak_mw,
                         horowitz_read_pJ=lib.sram_access(m.size_bytes, m.width_bits).energy_pj,
                         cell_model_area_mm2=m.instances * lib.sram_access(m.size_bytes).area_um2 * 1e-6,
                         cacti_key=r.key))
    return pd.DataFrame.from_records(recs)
