"""Energy of one simulated step: the estimator's per-action energies × the simulator's action counts, plus
DRAM pJ/bit × bytes, DRAM background power × time, PCIe W/lane × time and SSD power × time.

* V-Rex: core power from :func:`vrex_lib.estimate.core.core_breakdown` at the utilisations the simulator
  measured (:meth:`Activity.from_counts`), × cores × step time; DRAM = device pJ/bit + accelerator-side
  interface (PHY) pJ/bit, × bits; DRAM background (standby + refresh, per GB of the system's capacity) × time,
  drawn even when idle.
* GPUs: the board power of Table I (~40 W Orin, ~300 W A100; measured by the paper with tegrastats /
  nvidia-smi, including its DRAM, DRAM PHY and standby) × step time. No per-method GPU power: the same for
  every method, so no DRAM terms are added for GPUs.
* Both: PCIe 3 W per lane (paper §VI.A) while the link moves KV and the L0-idle fraction of it otherwise; SSD
  active power while reading, idle power otherwise (edge); host DDR4 pJ/bit × bytes (server; the host's DDR4
  background belongs to the host CPU, present for both systems, and is left out of both).
  Not modelled: on-chip SRAM leakage beyond the estimator's rows (Horowitz gives none; order of mW for the
  ~3 MB of SRAM in V-Rex8, negligible next to the terms above).

Constants come from ``vrex_lib.estimate`` (the estimator helper's table); if a constant is missing there the
fallback below is used and :data:`SOURCE` says so.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import paper
from ..estimate import offchip as _offchip
from .systems import System

# Fallbacks, used only if vrex_lib.estimate lacks the row (then SOURCE says 'fallback').
_FALLBACK = dict(dram_lpddr5=5.0, dram_hbm2e=3.9, dram_ddr4=15.0, ssd_active_w=4.0, ssd_idle_w=0.05,
                 core_w_full=2.6, core_w_idle_frac=0.05)
SOURCE = "vrex_lib.estimate"


@dataclass
class Activity:
    """What a step did: counts for the per-action energies, busy times for the powered devices."""

    seconds: float
    macs: float
    dram_bytes: float
    pcie_bytes: float
    pcie_busy_s: float
    hcu_compares: float = 0.0
    wtu_elems: float = 0.0
    dre_busy_s: float = 0.0


def _const(component: str, action: str, field: str, fallback: float) -> float:
    global SOURCE
    try:
        from ..estimate import constants as C

        v = getattr(C.rows(component, action)[0], field)
        if v == v:  # not NaN
            return float(v)
    except (ImportError, KeyError, AttributeError, IndexError):
        pass
    SOURCE = "vrex_lib.estimate + fallback constants (perf.energy._FALLBACK)"
    return fallback


def dram_pj_per_bit(kind: str) -> float:
    try:
        from ..estimate import dram_pj_per_bit as f  # type: ignore[attr-defined]

        return float(f(kind))
    except (ImportError, AttributeError, KeyError, TypeError):
        return _const(f"dram_{kind}", "transfer", "energy_pJ", _FALLBACK[f"dram_{kind}"])


def pcie_w_per_lane() -> float:
    try:
        from ..estimate import PCIE_W_PER_LANE  # type: ignore[attr-defined]

        return float(PCIE_W_PER_LANE)
    except ImportError:
        return paper.value("system.pcie_w_per_lane")


def ssd_power_w(state: str) -> float:
    try:
        from ..estimate import ssd_power_w as f  # type: ignore[attr-defined]

        return float(f(state))
    except (ImportError, AttributeError, KeyError, TypeError):
        return _const("ssd", state, "leakage_uW", _FALLBACK[f"ssd_{state}_w"] * 1e6) * 1e-6


_CORE_CACHE: dict = {}


def vrex_core_power_w(sys: System, act: Activity) -> float:
    """Power of all cores at the step's utilisations (estimator's core model)."""
    cfg = sys.core
    cycles = act.seconds * cfg.freq_hz
    per = sys.n_cores
    key = (cfg, round(act.macs / per / cycles, 4), round(act.hcu_compares / per / cycles, 6),
           round(act.wtu_elems / per / cycles, 6))
    if key in _CORE_CACHE:
        return _CORE_CACHE[key] * per
    try:
        from ..estimate.core import Activity as CoreActivity
        from ..estimate.core import core_breakdown

        # Operand traffic: each MAC-tree input vector (n_dpe_w BF16) read once per cycle of DPE work. VPE work
        # (norms, softmax, SiLU, residuals) is ~2 % of the MACs for this workload (elementwise vs matmul).
        busy = act.macs / per / (cfg.n_dpe_h * cfg.n_dpe_w)
        ca = CoreActivity.from_counts(cycles, cfg, dpe_macs=act.macs / per, vpe_ops=0.02 * act.macs / per,
                                      sram_read_bits=busy * cfg.n_dpe_w * 16,
                                      sram_write_bits=busy * cfg.n_dpe_w * 16 / 8,
                                      hcu_compares=act.hcu_compares / per, wtu_elements=act.wtu_elems / per,
                                      kvmu_requests=act.pcie_bytes / 4096 / per)
        w = float(core_breakdown(cfg, ca)["power_mW"].sum()) * 1e-3
    except (ImportError, AttributeError, TypeError, ValueError):
        global SOURCE
        SOURCE = "fallback core power (perf.energy._FALLBACK)"
        util = min(1.0, act.macs / per / (cycles * cfg.macs_per_cycle))
        w = _FALLBACK["core_w_full"] * (_FALLBACK["core_w_idle_frac"] + (1 - _FALLBACK["core_w_idle_frac"]) * util)
    _CORE_CACHE[key] = w
    return w * per


def step_energy(sys: System, act: Activity) -> tuple[float, dict]:
    """(joules, parts) for one step on ``sys``."""
    parts: dict[str, float] = {}
    t = act.seconds
    busy = min(act.pcie_busy_s, t)
    if sys.kind == "vrex":
        parts["core"] = vrex_core_power_w(sys, act) * t
        parts["dram"] = act.dram_bytes * 8 * dram_pj_per_bit(sys.dram_kind) * 1e-12
        parts["dram_phy"] = act.dram_bytes * 8 * _offchip.dram_phy_pj_per_bit(sys.dram_kind) * 1e-12
        parts["dram_background"] = _offchip.dram_background_w(sys.dram_kind, sys.dram_capacity) * t
    else:
        parts["gpu_board"] = sys.power_w * t
    lane_w = pcie_w_per_lane() * sys.pcie_lanes
    parts["pcie"] = lane_w * busy
    parts["pcie_idle"] = lane_w * _offchip.pcie_idle_fraction() * (t - busy)
    if sys.offload_tier == "ssd":
        parts["ssd"] = ssd_power_w("active") * busy + ssd_power_w("idle") * (t - busy)
    else:
        parts["host_dram"] = act.pcie_bytes * 8 * dram_pj_per_bit("ddr4") * 1e-12
    return sum(parts.values()), parts
