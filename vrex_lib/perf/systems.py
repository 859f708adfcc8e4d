"""The platforms of Table I as plain dataclasses: V-Rex8, V-Rex48, Jetson AGX Orin, A100 (+ Oaken for Fig. 15).

Peaks, bandwidths, capacities, PCIe links and GPU board powers are the paper's specifications, read with
:func:`vrex_lib.paper.spec` (kind 'input'); the V-Rex peak is derived from :class:`vrex_lib.config.VRexCoreConfig`
(never copied from Table I). What turns a peak into an achieved rate comes from the one constants table
:mod:`vrex_lib.perf.constants`: the DRAM's sustained efficiency per access stream from the one bank-level model of
its technology (:mod:`vrex_lib.perf.dram`, the same for every system on that memory), the GPU's compute efficiency
and its host software stack. Override any field with ``dataclasses.replace(get_system('vrex8'), pcie_bw=8e9)`` and
every figure moves.

* ``compute_eff``     achieved / peak FLOP/s on large dense GEMMs (GPUs; V-Rex's LXE model charges its own idle
                      cycles);
* ``mem_side_eff``    a GPU-side DRAM loss on top of the DRAM model (``gpu.mem_side_eff``; 1.0 for V-Rex);
* ``pcie_eff``        achieved / nominal PCIe bandwidth for large copies;
* ``host_op_s``       host time per framework call of an eager stack inside the decoder layers (0 for V-Rex's
                      static instruction stream); ``host_fixed_s``: the eager host's time per step outside them
                      (embedding, final norm, LM head, sampling, the decode loop's own work);
* ``staging_copies``  extra host-memory copies per fetched byte (FlexGen's pinned relay; 0 for V-Rex's KVMU);
* ``stack``           the GPU software stack whose kernel and call counts an op has (``model_ops.STACK_COUNTS``:
                      'compiled' = gpt-fast's torch.compile graph in CUDA graphs, 'eager' = eager PyTorch,
                      'hf_eager' = Hugging Face eager); ``kernel_dram_s`` / ``kernel_small_s``: the fixed time of one
                      kernel that streams DRAM / of one small kernel on activations (the launch mode's measured
                      start-up, docs/DECISIONS.md D240);
* ``core_port_bytes_per_cycle`` V-Rex: one core's DRAM/NoC port (docs/DECISIONS.md D101);
* ``idle_power_w`` / ``context_step_w`` a GPU board's bare idle and what a held CUDA context adds (its power while
                      it waits on the link, docs/DECISIONS.md D427); ``host_cpu_w``: the host CPU package while it
                      runs FlexGen's relay copies (D428; 0 on the Orin, whose CPU is inside the module's power).

The memory technology is a record (``memory``: :class:`vrex_lib.memtech.MemoryTech`; the offload tier's,
``offload_store``: the NVMe SSD record on the edge, host DDR4 on the server): its JEDEC timing feeds the DRAM model,
its energies the energy model.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from .. import memtech, paper
from ..config import VRexCoreConfig
from ..estimate.core import CorePowerModel
from . import dram as _dram
from .constants import const

GB = 1e9


@dataclass(frozen=True)
class System:
    """One platform. Units: FLOP/s, B/s, B, W, s.

    kind: 'vrex' (LXE + DRE accelerator) or 'gpu'. offload_tier: 'ssd' (edge) or 'cpu_dram' (server).
    offload_granule: bytes the offload tier moves per access (NVMe block 4 KiB; host DRAM 64 B cache line), so
    scattered small reads are amplified on SSD but not from host DRAM. memory / dram_bus_bits: the memory
    technology record and bus of the one DRAM model (:mod:`vrex_lib.perf.dram`); offload_store: the offload tier's
    record. unified_memory: the host's staging copies land in the GPU's own DRAM (Jetson). nvme_queue_depth: reads
    kept in flight to the SSD. host_copy_bytes_s: the host's memory-copy rate (FlexGen's pinned-buffer relay).
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
    pcie_eff: float
    mem_side_eff: float = 1.0
    host_op_s: float = 0.0
    host_fixed_s: float = 0.0
    staging_copies: int = 0
    unified_memory: bool = False
    power_w: float | None = None  # GPU board power (Table I); V-Rex power is computed by the energy model
    idle_power_w: float | None = None  # GPU board's bare idle (None: no cited idle; stalls keep power_w, D427)
    context_step_w: float = 0.0  # what a held CUDA context adds to the idle board (D427)
    host_cpu_w: float = 0.0  # host CPU package power while it runs the relay copies (D428; 0: inside power_w)
    memory: memtech.MemoryTech = memtech.LPDDR5
    offload_store: "memtech.MemoryTech | memtech.StorageTech" = memtech.NVME_SSD
    dram_bus_bits: int = 256
    offload_granule: int = 4096
    nvme_queue_depth: int = 64
    stack: str = "eager"
    kernel_dram_s: float = 0.0
    kernel_small_s: float = 0.0
    host_copy_bytes_s: float = 0.0
    core_port_bytes_per_cycle: float = 0.0
    dram_write_batch: float | None = None
    n_cores: int = 0
    core: VRexCoreConfig | None = None
    core_power: CorePowerModel | None = None  # V-Rex: one core's power model (vrex_lib.estimate.core)
    notes: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in ("compute_eff", "mem_side_eff", "pcie_eff"):
            v = getattr(self, f)
            if not 0 < v <= 1:
                raise ValueError(f"System {self.name}: {f}={v} must be in (0, 1]")
        for f in ("peak_flops", "dram_bw", "dram_capacity", "pcie_bw"):
            if not getattr(self, f) > 0:
                raise ValueError(f"System {self.name}: {f} must be > 0")
        if min(self.host_op_s, self.host_fixed_s, self.staging_copies) < 0 or self.nvme_queue_depth < 1:
            raise ValueError(f"System {self.name}: host_op_s, host_fixed_s and staging_copies must be >= 0, "
                             "nvme_queue_depth >= 1")
        if self.kind == "vrex" and (self.core is None or self.n_cores < 1 or self.core_port_bytes_per_cycle <= 0):
            raise ValueError(f"System {self.name}: a V-Rex system needs its core configuration, n_cores >= 1 and a "
                             "core port > 0 B/cycle")
        if min(self.kernel_dram_s, self.kernel_small_s, self.host_copy_bytes_s) < 0:
            raise ValueError(f"System {self.name}: kernel times and the host copy rate must be >= 0")
        if not isinstance(self.memory, memtech.MemoryTech):
            raise ValueError(f"System {self.name}: memory must be a vrex_lib.memtech.MemoryTech record, got "
                             f"{type(self.memory).__name__}")

    @property
    def dram_kind(self) -> str:
        """The memory technology's name ('lpddr5', 'hbm2e')."""
        return self.memory.name

    @property
    def flops(self) -> float:
        """Achieved FLOP/s on large GEMMs."""
        return self.peak_flops * self.compute_eff

    @property
    def dram_timing(self) -> _dram.DramTiming:
        return _dram.timing(self.memory, self.dram_bw, self.dram_bus_bits, self.dram_write_batch)

    @property
    def dram_eff(self) -> float:
        """Sustained share of the DRAM peak for a long read stream (weights): the DRAM model x mem_side_eff."""
        return _dram.stream_efficiency(self.dram_timing).total * self.mem_side_eff

    @property
    def dram(self) -> float:
        """Achieved DRAM B/s of a long read stream."""
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
    mem = memtech.LPDDR5 if side == "edge" else memtech.HBM2E
    return System(
        name=f"vrex{n_cores}", kind="vrex", peak_flops=n_cores * core.peak_flops,
        dram_bw=_v(f"table1.dram_bw_gbs.{side}") * GB, dram_capacity=_v(f"table1.dram_capacity_gb.{side}") * GB,
        pcie_bw=_v(f"table1.pcie_bw_gbs.{side}") * GB, pcie_lanes=int(_v(f"table1.pcie_lanes.{side}")),
        offload_tier="ssd" if side == "edge" else "cpu_dram", compute_eff=const("vrex.compute_eff"),
        pcie_eff=const(f"vrex.{side}_pcie_eff"), memory=mem, dram_bus_bits=int(mem.bus_bits),
        offload_store=memtech.NVME_SSD if side == "edge" else memtech.DDR4,
        offload_granule=int(const("ssd.granule_bytes" if side == "edge" else "host_dram.granule_bytes")),
        nvme_queue_depth=int(const("kvmu.queue_depth")), n_cores=n_cores, core=core,
        core_power=CorePowerModel.of(core), core_port_bytes_per_cycle=const("vrex.core_port_bytes_per_cycle"))


def eager_host_s(stack: str, host_slowdown: float = 1.0) -> tuple[float, float]:
    """(host time per framework call inside the decoder layers, host time per step outside them) of GPU software
    ``stack`` on a host ``host_slowdown`` times slower than the A100's.

    'eager' (gpt-fast uncompiled) is the measured starting point: ``stack.eager_host_op_s`` per call, and
    ``stack.eager_ops_fixed`` calls outside the layers. 'hf_eager' is that host time scaled by what Hugging Face's
    code costs the host beside gpt-fast's, measured on one CPU (``stack.hf_eager_host_layer_x`` per layer, spread
    over HF's own ``stack.hf_eager_ops_per_layer`` calls; ``stack.hf_eager_host_fixed_x`` outside them,
    docs/DECISIONS.md D247). 'compiled' issues no host calls."""
    if stack == "compiled":
        return 0.0, 0.0
    call = const("stack.eager_host_op_s") * host_slowdown
    fixed = call * const("stack.eager_ops_fixed")
    if stack == "hf_eager":
        layer = call * const("stack.eager_ops_per_layer") * const("stack.hf_eager_host_layer_x")
        return layer / const("stack.hf_eager_ops_per_layer"), fixed * const("stack.hf_eager_host_fixed_x")
    return call, fixed


def _gpu_stack(host_slowdown: float = 1.0, stack: str = "eager") -> dict:
    """A GPU software stack: eager PyTorch (host calls, stream-launched kernels; gpt-fast's or Hugging Face's,
    :func:`eager_host_s`) or gpt-fast's compiled graph in CUDA graphs (``stack='compiled'``: no host calls,
    graph-launched kernels), with FlexGen's staging copies; ``host_slowdown`` scales the host's speed."""
    graph = stack == "compiled"
    host_op_s, host_fixed_s = eager_host_s(stack, host_slowdown)
    return dict(host_op_s=host_op_s, host_fixed_s=host_fixed_s,
                staging_copies=int(const("stack.flexgen_staging_copies")), stack=stack,
                kernel_dram_s=const("gpu.kernel_dram_graph_s" if graph else "gpu.kernel_dram_stream_s"),
                kernel_small_s=const("gpu.kernel_small_graph_s" if graph else "gpu.kernel_small_stream_s"),
                host_copy_bytes_s=const("host.copy_bytes_s"), nvme_queue_depth=int(const("host.queue_depth")),
                dram_write_batch=const("gpu.write_batch"))


def agx_orin(dense_fraction: float | None = None, stack: str = "eager") -> System:
    """Jetson AGX Orin 32 GB (Table I), offloading to an M.2 NVMe SSD over PCIe 3.0 x4; the Cortex-A78AE host runs
    the eager stack (``stack.orin_host_slowdown``) and shares the LPDDR5 with the GPU (unified memory)."""
    dense_fraction = const("agx_orin.dense_fraction") if dense_fraction is None else dense_fraction
    return System(
        name="agx_orin", kind="gpu", peak_flops=_v("table1.peak_tflops.agx_orin") * 1e12 * dense_fraction,
        dram_bw=_v("table1.dram_bw_gbs.edge") * GB, dram_capacity=_v("table1.dram_capacity_gb.edge") * GB,
        pcie_bw=_v("table1.pcie_bw_gbs.edge") * GB, pcie_lanes=int(_v("table1.pcie_lanes.edge")), offload_tier="ssd",
        compute_eff=const("agx_orin.compute_eff"), pcie_eff=const("agx_orin.pcie_eff"),
        mem_side_eff=const("agx_orin.mem_side_eff"), **_gpu_stack(const("stack.orin_host_slowdown"), stack),
        unified_memory=True, power_w=_v("table1.power_w.agx_orin"), memory=memtech.LPDDR5,
        dram_bus_bits=int(memtech.LPDDR5.bus_bits), offload_store=memtech.NVME_SSD,
        offload_granule=int(const("ssd.granule_bytes")), notes=dict(dense_fraction=dense_fraction))


def a100(stack: str = "eager") -> System:
    """NVIDIA A100 80 GB (Table I), offloading to DDR4 CPU memory over PCIe 4.0 x16."""
    return System(
        name="a100", kind="gpu", peak_flops=_v("table1.peak_tflops.a100") * 1e12,
        dram_bw=_v("table1.dram_bw_gbs.server") * GB, dram_capacity=_v("table1.dram_capacity_gb.server") * GB,
        pcie_bw=_v("table1.pcie_bw_gbs.server") * GB, pcie_lanes=int(_v("table1.pcie_lanes.server")),
        offload_tier="cpu_dram", compute_eff=const("a100.compute_eff"), pcie_eff=const("a100.pcie_eff"),
        mem_side_eff=const("a100.mem_side_eff"), **_gpu_stack(stack=stack), power_w=_v("table1.power_w.a100"),
        idle_power_w=const("a100.idle_w"), context_step_w=const("a100.context_step_w"),
        host_cpu_w=const("host.cpu_package_w"),
        memory=memtech.HBM2E, dram_bus_bits=int(memtech.HBM2E.bus_bits), offload_store=memtech.DDR4,
        offload_granule=int(const("host_dram.granule_bytes")))


def oaken_edge() -> System:
    """Oaken (ISCA'25) for Fig. 15: modelled as an accelerator with V-Rex8's compute and the same edge memory
    system ("identical system parameters", §VI.A); its difference is the 4-bit KV of method ``oaken``."""
    return dataclasses.replace(vrex(8, "edge"), name="oaken")


_BUILDERS = {"vrex8": lambda: vrex(8, "edge"), "vrex48": lambda: vrex(48, "server"), "agx_orin": agx_orin,
             "a100": a100, "oaken": oaken_edge}


def systems() -> dict[str, System]:
    """Fresh instances of every named system."""
    return {k: b() for k, b in _BUILDERS.items()}


def get_system(system: str | System) -> System:
    """A fresh System for a name (or the System passed)."""
    if isinstance(system, System):
        return system
    if system not in _BUILDERS:
        raise ValueError(f"unknown system {system!r}: choose one of {', '.join(_BUILDERS)} or pass a System")
    return _BUILDERS[system]()


EDGE_PAIR = ("agx_orin", "vrex8")
SERVER_PAIR = ("a100", "vrex48")
