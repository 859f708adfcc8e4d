"""Energy and power of one simulated step, from the estimator's cited constants (docs/PERF_MODEL.md, "Power").

* **V-Rex cores**: :class:`vrex_lib.estimate.core.CorePowerModel` (leakage + clock network + utilisation x
  dynamic, 14 nm / 0.8 V) at the step's utilisations (:func:`core_utilisation`), x cores x step time.
* **DRAM** (V-Rex): device pJ/bit + the accelerator's DRAM-interface (PHY) pJ/bit, x bits moved; background
  (standby + refresh per GB of the system's capacity) x time, drawn even when idle.
* **GPUs**: Table I's measured board power (tegrastats / nvidia-smi, §VI.A; GPU DRAM included) x the time the GPU
  works. The paper measured it running these workloads, so it is the board's power while busy; it is the same for
  every method. While the GPU waits on the link (the step's exposed retrieval stall) the board draws its stall power
  (:func:`gpu_stall_power_w`, docs/DECISIONS.md D427): its bare idle, that plus a held CUDA context's step, or the
  busy power; a board with no cited idle keeps the busy power.
* **Host CPU** (server GPU): the host package power (``System.host_cpu_w``) x the time it runs FlexGen's relay
  copies (D428); the Orin's CPU is inside its module power.
* **PCIe** (both): the paper's 3 W per lane at full load (§VI.A) while the link moves data; while it is idle, the
  L0-equivalent idle time of its ASPM states (:func:`vrex_lib.perf.link.idle_power_frac`: L0, then L0s, then
  L1.2 over each idle gap of the step's timeline); without that time given, the estimator's L0-idle fraction.
  One rule for every system (:func:`link_share`, docs/DECISIONS.md D425): the link's power is its two ends' PHYs,
  half each; an end inside a measured board power (a GPU's: nvidia-smi and tegrastats report the whole board or
  module, its PCIe interface included) is not charged again, so a GPU pays the far end only and V-Rex (built up
  from parts) both.
* **Offload tier**: SSD active power while the link moves data, idle power otherwise (edge; the NVMe SSD record,
  Kioxia BG6 class);
  host DDR4 pJ/bit x bytes over the link plus the host's staging copies (server; the host's DDR4 background
  belongs to the host CPU, present for both systems).

Peak system power (compared with Table I) is :func:`peak_power_w`: every V-Rex unit at full utilisation, DRAM
streaming at its achieved bandwidth, the PCIe link and the SSD active.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..estimate import offchip as _offchip
from .systems import System


@dataclass(frozen=True)
class StepCounts:
    """What a step did: counts for the per-action energies, busy times for the powered devices.

    seconds: step time; macs: main-engine multiply-accumulates (LXE on V-Rex); vpe_ops: vector-lane operations;
    dram_bytes / pcie_bytes: traffic; pcie_busy_s: link busy time; pcie_idle_l0_s: the link's idle time weighted
    by its ASPM states' power (None: the estimator's L0-idle fraction of the idle time); hcu_compares / wtu_elems:
    DRE lane-cycles; kvmu_requests: NVMe reads the KVMU issued; host_copy_bytes: host-DRAM bytes of staging copies;
    stall_s: time the main engine waits on the link (a GPU board draws its stall power then); host_copy_s: time the
    host CPU runs relay copies.
    """

    seconds: float
    macs: float
    dram_bytes: float
    pcie_bytes: float
    pcie_busy_s: float
    vpe_ops: float = 0.0
    hcu_compares: float = 0.0
    wtu_elems: float = 0.0
    kvmu_requests: float = 0.0
    pcie_idle_l0_s: float | None = None
    host_copy_bytes: float = 0.0
    stall_s: float = 0.0
    host_copy_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise ValueError(f"StepCounts.seconds must be > 0, got {self.seconds}")
        if not 0.0 <= self.stall_s <= self.seconds or self.host_copy_s < 0:
            raise ValueError(f"StepCounts: stall_s must lie in [0, seconds] and host_copy_s be >= 0, got "
                             f"{self.stall_s}, {self.host_copy_s}")


def core_utilisation(sys: System, act: StepCounts) -> dict[str, float]:
    """Per-core utilisation of each activity source over the step (work spread evenly over the cores)."""
    cfg = sys.core
    cycles = act.seconds * cfg.freq_hz * sys.n_cores
    cap = lambda x: min(1.0, max(0.0, x))  # noqa: E731
    return dict(dpe=cap(act.macs / (cycles * cfg.n_dpe_h * cfg.n_dpe_w)),
                vpe=cap(act.vpe_ops / (cycles * cfg.n_vpe_h * cfg.n_vpe_w)),
                hcu=cap(act.hcu_compares / (cycles * cfg.n_hcu_h * cfg.n_hcu_w)),
                wtu=cap(act.wtu_elems / (cycles * cfg.n_wtu_h * cfg.n_wtu_w)),
                kvmu=cap(act.kvmu_requests / cycles))


def pcie_power_w(sys: System, busy_frac: float) -> float:
    """PCIe link power at ``busy_frac`` of the step moving data: 3 W/lane (§VI.A) x (busy + L0-idle share x idle)."""
    if not 0.0 <= busy_frac <= 1.0:
        raise ValueError(f"busy_frac {busy_frac} must be in [0, 1]")
    full_w = _offchip.pcie_power_w(sys.pcie_lanes, "active")
    return full_w * (busy_frac + _offchip.pcie_idle_fraction() * (1.0 - busy_frac))


def link_share(sys: System) -> float:
    """Share of the link's power charged beside ``sys``'s own: 1 where the system's power is built up from parts
    (V-Rex), 1/2 where a measured board power already holds its end of the link (a GPU with Table I power)."""
    return 0.5 if sys.power_w is not None else 1.0


#: The GPU board's power while it waits on the link (docs/DECISIONS.md D427): its bare idle, the idle with a CUDA
#: context held, or Table I's busy power.
STALL_POWER_LEVELS: tuple[str, ...] = ("idle", "context", "board")


def gpu_stall_power_w(sys: System, level: str = "context") -> float:
    """A GPU board's power while the GPU waits on the link, at ``level`` (:data:`STALL_POWER_LEVELS`); Table I's
    power where the board has no cited idle (``idle_power_w`` None), never more than it."""
    if level not in STALL_POWER_LEVELS:
        raise ValueError(f"gpu_stall_power {level!r}: choose one of {', '.join(STALL_POWER_LEVELS)}")
    if sys.power_w is None:
        raise ValueError(f"System {sys.name}: a stall power needs a measured board power (a GPU)")
    if level == "board" or sys.idle_power_w is None:
        return sys.power_w
    return min(sys.power_w, sys.idle_power_w + (sys.context_step_w if level == "context" else 0.0))


def step_energy(sys: System, act: StepCounts, stall_power: str = "context") -> tuple[float, dict]:
    """(joules, parts in J) for one step on ``sys``; ``stall_power``: the GPU board's level while it waits on the
    link (:func:`gpu_stall_power_w`)."""
    parts: dict[str, float] = {}
    t = act.seconds
    busy = min(act.pcie_busy_s, t)
    if sys.kind == "vrex":
        if sys.core_power is None:
            raise ValueError(f"System {sys.name}: a V-Rex system needs core_power (build it with systems.vrex)")
        parts["core"] = sys.core_power.power_w(**core_utilisation(sys, act)) * sys.n_cores * t
        parts["dram"] = act.dram_bytes * 8 * _offchip.dram_pj_per_bit(sys.memory) * 1e-12
        parts["dram_phy"] = act.dram_bytes * 8 * _offchip.dram_phy_pj_per_bit(sys.memory) * 1e-12
        parts["dram_background"] = _offchip.dram_background_w(sys.memory, sys.dram_capacity) * t
    else:
        parts["gpu_board"] = sys.power_w * (t - act.stall_s)
        parts["gpu_board_stall"] = gpu_stall_power_w(sys, stall_power) * act.stall_s
        if sys.offload_tier == "cpu_dram":  # a server host's CPU; the Orin's is inside its module power
            parts["host_cpu_copy"] = sys.host_cpu_w * act.host_copy_s
    lane_w = _offchip.pcie_power_w(sys.pcie_lanes, "active") * link_share(sys)
    parts["pcie"] = lane_w * busy
    idle_l0_s = (_offchip.pcie_idle_fraction() * (t - busy) if act.pcie_idle_l0_s is None
                 else min(act.pcie_idle_l0_s, t - busy))
    parts["pcie_idle"] = lane_w * idle_l0_s
    if sys.offload_tier == "ssd":
        parts["ssd"] = ssd_active_j(sys, busy) + sys.offload_store.idle_w * (t - busy)
    else:
        parts["host_dram"] = ((act.pcie_bytes + act.host_copy_bytes) * 8
                              * _offchip.dram_pj_per_bit(sys.offload_store) * 1e-12)
    return sum(parts.values()), parts


def ssd_active_j(sys: System, busy_s: float) -> float:
    """The SSD's energy while the link moves data for ``busy_s`` (its record's active power; the rest of a step is
    idle)."""
    return sys.offload_store.active_w * busy_s


def peak_power_w(sys: System) -> dict[str, float]:
    """System power with everything at full load (W, by part): the number Table I's system power compares with.

    V-Rex: every core unit fully utilised, DRAM streaming at the achieved bandwidth (device + PHY energy) plus its
    background, the PCIe link busy, the SSD active (edge) or host DDR4 at the achieved link rate (server).
    GPUs: Table I's board power plus the same link terms.
    """
    parts: dict[str, float] = {}
    if sys.kind == "vrex":
        parts["core"] = sys.core_power.peak_w * sys.n_cores
        bits_per_s = sys.dram * 8
        parts["dram"] = bits_per_s * _offchip.dram_pj_per_bit(sys.memory) * 1e-12
        parts["dram_phy"] = bits_per_s * _offchip.dram_phy_pj_per_bit(sys.memory) * 1e-12
        parts["dram_background"] = _offchip.dram_background_w(sys.memory, sys.dram_capacity)
    else:
        parts["gpu_board"] = sys.power_w
    parts["pcie"] = pcie_power_w(sys, 1.0) * link_share(sys)
    if sys.offload_tier == "ssd":
        parts["ssd"] = sys.offload_store.active_w
    else:
        parts["host_dram"] = sys.pcie * 8 * _offchip.dram_pj_per_bit(sys.offload_store) * 1e-12
    parts["total"] = sum(parts.values())
    return parts
