"""The platforms of Table I as plain dataclasses: V-Rex8, V-Rex48, Jetson AGX Orin, A100 (+ Oaken for Fig. 15).

Peaks, bandwidths, capacities, PCIe links and GPU board powers are the paper's specifications, read with
:func:`vrex_lib.paper.spec` (kind 'input'); the V-Rex peak is derived from :class:`vrex_lib.config.VRexCoreConfig`
(never copied from Table I). What turns a peak into an achieved rate -- one fraction per device per resource,
the same for every method on that device -- comes from the one constants table :mod:`vrex_lib.perf.constants`
(source, device, node and derivation per row). Override any field with
``dataclasses.replace(get_system('vrex8'), pcie_bw=8e9)`` and every figure moves.

* ``compute_eff``  achieved / peak FLOP/s on large dense GEMMs;
* ``dram_eff``     achieved / peak DRAM bandwidth on streaming reads;
* ``pcie_eff``     achieved / nominal PCIe bandwidth for large host->device (or SSD->device) copies;
* ``kernel_launch_s`` per-kernel launch overhead on GPUs (0 for V-Rex's static instruction stream).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from .. import paper
from ..config import VRexCoreConfig
from ..estimate.core import CorePowerModel
from .constants import const

GB = 1e9


@dataclass(frozen=True)
class System:
    """One platform. Units: FLOP/s, B/s, B, W, s.

    kind: 'vrex' (LXE + DRE accelerator) or 'gpu'. offload_tier: 'ssd' (edge) or 'cpu_dram' (server).
    offload_granule: bytes the offload tier moves per access (NVMe page 4 KiB; host DRAM 64 B cache line), so
    scattered small reads are amplified on SSD but not from host DRAM.
    """

    name: str
    kind: Literal["vrex", "gpu"]
    peak_flops: float
    dram_bw: float
    dram_capacity: float
    pcie_bw: float
    pcie_lanes: int
    offload_tier: Literal["ssd", "cpu_dram"]
    compute_eff: float
    dram_eff: float
    pcie_eff: float
    kernel_launch_s: float = 0.0
    power_w: float | None = None  # GPU board power (Table I); V-Rex power is computed by the energy model
    dram_kind: str = "lpddr5"
    offload_granule: int = 4096
    n_cores: int = 0
    core: VRexCoreConfig | None = None
    core_power: CorePowerModel | None = None  # V-Rex: one core's power model (vrex_lib.estimate.core)
    notes: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in ("compute_eff", "dram_eff", "pcie_eff"):
            v = getattr(self, f)
            if not 0 < v <= 1:
                raise ValueError(f"System {self.name}: {f}={v} must be in (0, 1]")
        for f in ("peak_flops", "dram_bw", "dram_capacity", "pcie_bw"):
            if getattr(self, f) <= 0:
                raise ValueError(f"System {self.name}: {f} must be > 0")

    @property
    def flops(self) -> float:
        """Achieved FLOP/s."""
        return self.peak_flops * self.compute_eff

    @property
    def dram(self) -> float:
        """Achieved DRAM B/s."""
        return self.dram_bw * self.dram_eff

    @property
    def pcie(self) -> float:
        """Achieved PCIe B/s."""
        return self.pcie_bw * self.pcie_eff

    @property
    def freq_hz(self) -> float:
        return self.core.freq_hz if self.core else 0.0

    def replace(self, **changes) -> "System":
        return dataclasses.replace(self, **changes)


def _v(key: str) -> float:
    return paper.spec(key)


def vrex(n_cores: int, side: Literal["edge", "server"], core: VRexCoreConfig | None = None) -> System:
    """V-Rex with ``n_cores`` cores on the edge (LPDDR5, SSD) or server (HBM2e, CPU DDR4) memory system."""
    core = core or VRexCoreConfig()
    return System(
        name=f"vrex{n_cores}", kind="vrex", peak_flops=n_cores * core.peak_flops,
        dram_bw=_v(f"table1.dram_bw_gbs.{side}") * GB, dram_capacity=_v(f"table1.dram_capacity_gb.{side}") * GB,
        pcie_bw=_v(f"table1.pcie_bw_gbs.{side}") * GB, pcie_lanes=int(_v(f"table1.pcie_lanes.{side}")),
        offload_tier="ssd" if side == "edge" else "cpu_dram", compute_eff=const("vrex.compute_eff"),
        dram_eff=const("vrex.lpddr5_dram_eff" if side == "edge" else "vrex.hbm2e_dram_eff"),
        pcie_eff=const(f"vrex.{side}_pcie_eff"), dram_kind="lpddr5" if side == "edge" else "hbm2e",
        offload_granule=int(const("ssd.granule_bytes" if side == "edge" else "host_dram.granule_bytes")),
        n_cores=n_cores, core=core, core_power=CorePowerModel.of(core))


def agx_orin(dense_fraction: float | None = None) -> System:
    """Jetson AGX Orin 32 GB (Table I), offloading to an M.2 NVMe SSD over PCIe 3.0 x4."""
    dense_fraction = const("agx_orin.dense_fraction") if dense_fraction is None else dense_fraction
    return System(
        name="agx_orin", kind="gpu", peak_flops=_v("table1.peak_tflops.agx_orin") * 1e12 * dense_fraction,
        dram_bw=_v("table1.dram_bw_gbs.edge") * GB, dram_capacity=_v("table1.dram_capacity_gb.edge") * GB,
        pcie_bw=_v("table1.pcie_bw_gbs.edge") * GB, pcie_lanes=int(_v("table1.pcie_lanes.edge")), offload_tier="ssd",
        compute_eff=const("agx_orin.compute_eff"), dram_eff=const("agx_orin.dram_eff"),
        pcie_eff=const("agx_orin.pcie_eff"), kernel_launch_s=const("agx_orin.kernel_launch_s"),
        power_w=_v("table1.power_w.agx_orin"), dram_kind="lpddr5", offload_granule=int(const("ssd.granule_bytes")),
        notes=dict(dense_fraction=dense_fraction))


def a100() -> System:
    """NVIDIA A100 80 GB (Table I), offloading to DDR4 CPU memory over PCIe 4.0 x16."""
    return System(
        name="a100", kind="gpu", peak_flops=_v("table1.peak_tflops.a100") * 1e12,
        dram_bw=_v("table1.dram_bw_gbs.server") * GB, dram_capacity=_v("table1.dram_capacity_gb.server") * GB,
        pcie_bw=_v("table1.pcie_bw_gbs.server") * GB, pcie_lanes=int(_v("table1.pcie_lanes.server")),
        offload_tier="cpu_dram", compute_eff=const("a100.compute_eff"), dram_eff=const("a100.dram_eff"),
        pcie_eff=const("a100.pcie_eff"), kernel_launch_s=const("a100.kernel_launch_s"),
        power_w=_v("table1.power_w.a100"), dram_kind="hbm2e", offload_granule=int(const("host_dram.granule_bytes")))


def oaken_edge() -> System:
    """Oaken (ISCA'25) for Fig. 15: modelled as an accelerator with V-Rex8's compute and the same edge memory
    system ("identical system parameters", §VI.A); its difference is the 4-bit KV of method ``oaken``."""
    return dataclasses.replace(vrex(8, "edge"), name="oaken")


def systems() -> dict[str, System]:
    """Fresh instances of every named system."""
    return {"vrex8": vrex(8, "edge"), "vrex48": vrex(48, "server"), "agx_orin": agx_orin(), "a100": a100(),
            "oaken": oaken_edge()}


_BUILDERS = {"vrex8": lambda: vrex(8, "edge"), "vrex48": lambda: vrex(48, "server"), "agx_orin": agx_orin,
             "a100": a100, "oaken": oaken_edge}


def get_system(system: str | System) -> System:
    """A fresh System for a name (or the System passed)."""
    if isinstance(system, System):
        return system
    if system not in _BUILDERS:
        raise ValueError(f"unknown system {system!r}: choose one of {', '.join(_BUILDERS)} or pass a System")
    return _BUILDERS[system]()


EDGE_PAIR = ("agx_orin", "vrex8")
SERVER_PAIR = ("a100", "vrex48")
