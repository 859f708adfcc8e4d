"""ONE table of the performance model's device constants: DRAM timing per memory technology, the V-Rex core's
ports and vector-unit costs, GPU software-stack overheads, link protocol and power states, the offload SSD --
each with its source, the device/node it was measured on and how it was obtained.

``how``: 'measured' (a published measurement on that device or the same silicon), 'derived' (arithmetic on a
standard, a datasheet, a published measurement or source code, the derivation in the note), 'spec' (a vendor's
or a standard's specification) or 'choice' (a modelling decision where no source fixes the value; its
docs/DECISIONS.md entry is named). ``unverified`` marks a row whose value could not be checked against its primary
source. Nothing here is fitted to a V-Rex paper result. Table I's peaks, bandwidths, capacities and powers are read
from :func:`vrex_lib.paper.spec` (kind 'input'); this table holds what turns a peak into an achieved rate.

    from vrex_lib.perf.constants import const, table
    const("a100.pcie_eff")        # 0.785
    table()                       # DataFrame: key, value, unit, device, node, how, source, note, unverified
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd


@dataclass(frozen=True)
class DeviceConstant:
    key: str
    value: float
    unit: str
    device: str
    node: str
    how: str
    source: str
    note: str = ""
    unverified: bool = False


# PCIe Gen3/Gen4 link efficiency, derived from the PCIe Base Specification (rev. 4.0): 128b/130b line encoding
# (0.985) and a 256-B maximum TLP payload carrying ~24 B of framing + sequence number + 16-B header + LCRC
# (256 / 280 = 0.914): 0.985 x 0.914 = 0.90 of the signalling rate at best.
_TLP_OVERHEAD_B = 24.0
_PCIE_DERIVED = 0.985 * 256.0 / (256.0 + _TLP_OVERHEAD_B)

_RAMULATOR_LP5 = ("JEDEC JESD209-5 LPDDR5-6400 as tabulated in CMU-SAFARI/ramulator2 src/dram/impl/LPDDR5.cpp "
                  "(timing preset LPDDR5_6400 in CK cycles at its listed tCK 1250 ps)")
_DRAMSIM3_HBM = ("umd-memsys/DRAMsim3 configs/HBM2_8Gb_x128.ini (the DRAM simulator the paper names for HBM2e, "
                 "§VI.A), timing in cycles at its tCK = 1 ns")
_GPTFAST = "pytorch-labs/gpt-fast @32971d3"


def _lp5(key: str, cycles: float, what: str, unverified: bool = False) -> DeviceConstant:
    return DeviceConstant(f"lpddr5.{key}", cycles * 1.25e-9, "s", "LPDDR5-6400 x16 channel, 16 Gb die", "-",
                          "spec", _RAMULATOR_LP5, f"{what}: {cycles:g} nCK x 1.25 ns", unverified)


def _hbm(key: str, cycles: float, what: str) -> DeviceConstant:
    return DeviceConstant(f"hbm2e.{key}", cycles * 1e-9, "s", "HBM2 8 Gb x128 channel", "-", "spec", _DRAMSIM3_HBM,
                          f"{what}: {cycles:g} tCK x 1 ns (DRAM core timings are set in ns; HBM2e keeps them)")


_DRAM_ROWS: tuple[DeviceConstant, ...] = (
    # --- LPDDR5 x256 (edge: V-Rex8 and AGX Orin) --------------------------------------------------------------
    DeviceConstant("lpddr5.bus_bits", 256, "bit", "edge DRAM (V-Rex8, AGX Orin)", "-", "spec",
                   "V-Rex paper §VI.A: LPDDR5 on a 256-bit bus", "Table I: 204.8 GB/s = 6400 MT/s x 32 B"),
    DeviceConstant("lpddr5.channel_bits", 16, "bit", "LPDDR5 channel", "-", "spec",
                   "JEDEC JESD209-5: an LPDDR5 channel is 16 bits wide", "a 256-bit bus (§VI.A) is 16 channels"),
    DeviceConstant("lpddr5.burst_length", 16, "beats", "LPDDR5 channel", "-", "spec",
                   "JEDEC JESD209-5: BL16 (32 B on x16)", "bank-group mode above 3200 Mbps"),
    DeviceConstant("lpddr5.banks", 16, "banks", "LPDDR5 16 Gb die", "-", "spec", _RAMULATOR_LP5,
                   "org preset LPDDR5_16Gb_x16: 4 bank groups x 4 banks"),
    DeviceConstant("lpddr5.page_bytes", 2048, "B", "LPDDR5 16 Gb x16 die", "-", "spec", _RAMULATOR_LP5,
                   "1024 columns x 16 bit"),
    _lp5("tRCD_s", 15, "ACT to RD"),
    _lp5("tRP_s", 15, "per-bank precharge tRPpb"),
    _lp5("tRAS_s", 34, "ACT to PRE"),
    _lp5("tRRD_s", 4, "ACT to ACT, any bank"),
    _lp5("tFAW_s", 16, "four-activate window"),
    _lp5("tWTR_s", 5, "write to read, other bank group (nWTRS)"),
    _lp5("tCL_s", 20, "read latency"),
    _lp5("tCWL_s", 11, "write latency"),
    _lp5("tBUS_s", 4, "burst slot used by the controller's turnaround rule (nBL16)"),
    _lp5("tCK_s", 1, "command clock"),
    DeviceConstant("lpddr5.tRFC_s", 280e-9, "s", "LPDDR5 16 Gb die", "-", "spec", _RAMULATOR_LP5,
                   "all-bank refresh tRFCab table (ns), 16 Gb"),
    DeviceConstant("lpddr5.tREFI_s", 3906e-9, "s", "LPDDR5 16 Gb die", "-", "spec", _RAMULATOR_LP5,
                   "tREFI base 3906 ns (<= 85 C)"),
    # --- HBM2e 5120-bit (server: V-Rex48 and A100) --------------------------------------------------------------
    DeviceConstant("hbm2e.bus_bits", 5120, "bit", "server DRAM (V-Rex48, A100)", "-", "spec",
                   "V-Rex paper §VI.A: HBM2e on a 5120-bit bus", "Table I: 1935 GB/s = 3.02 GT/s per pin"),
    DeviceConstant("hbm2e.channel_bits", 128, "bit", "HBM2 channel", "-", "spec", _DRAMSIM3_HBM,
                   "bus_width = 128; 5120 bits (§VI.A) = 40 channels"),
    DeviceConstant("hbm2e.burst_length", 4, "beats", "HBM2 channel", "-", "spec", _DRAMSIM3_HBM, "BL = 4 (64 B)"),
    DeviceConstant("hbm2e.banks", 16, "banks", "HBM2 channel", "-", "spec", _DRAMSIM3_HBM,
                   "bankgroups = 4 x banks_per_group = 4"),
    DeviceConstant("hbm2e.page_bytes", 1024, "B", "HBM2 channel", "-", "spec", _DRAMSIM3_HBM,
                   "columns = 64 x device_width 128 bit"),
    _hbm("tRCD_s", 14, "tRCDRD"),
    _hbm("tRP_s", 14, "tRP"),
    _hbm("tRAS_s", 34, "tRAS"),
    _hbm("tRRD_s", 4, "tRRD_S (other bank group)"),
    _hbm("tFAW_s", 30, "tFAW"),
    _hbm("tWTR_s", 6, "tWTR_S"),
    _hbm("tCL_s", 14, "CL"),
    _hbm("tCWL_s", 4, "CWL"),
    _hbm("tBUS_s", 2, "BL/2 burst cycles"),
    _hbm("tCK_s", 1, "command clock"),
    _hbm("tRFC_s", 260, "tRFC"),
    _hbm("tREFI_s", 3900, "tREFI"),
    # --- memory controller (both technologies) ------------------------------------------------------------------
    DeviceConstant("dram_ctrl.queue_depth", 32, "requests", "DRAM controller, per channel", "-", "spec",
                   _DRAMSIM3_HBM, "cmd_queue_size = 32: requests the scheduler can reorder over banks"),
    DeviceConstant("dram_ctrl.write_batch", 16, "bursts", "DRAM controller, per channel", "-", "derived",
                   "umd-memsys/DRAMsim3 src/controller.cc ScheduleTransaction + configs/HBM2_8Gb_x128.ini",
                   "writes drain when the write buffer (trans_queue_size = 16) is full: 16 bursts per read/write "
                   "turnaround pair"),
)

_VREX_ROWS: tuple[DeviceConstant, ...] = (
    DeviceConstant("vrex.compute_eff", 1.0, "fraction", "V-Rex LXE (64 x 64 MAC trees)", "14 nm", "derived",
                   "the per-core LXE model (vrex_lib/perf/lxe.py) charges idle MAC-tree cycles itself (tile shape, "
                   "weight-tile loads, core imbalance)", "1.0: no further derating"),
    DeviceConstant("vrex.core_port_bytes_per_cycle", 64, "B/cycle", "V-Rex core DRAM/NoC port", "14 nm", "choice",
                   "docs/DECISIONS.md D101: one core design serves V-Rex8 and V-Rex48; its port must carry the "
                   "larger per-core DRAM share, 1935/48 = 40.3 GB/s = 50.4 B/cycle at 800 MHz",
                   "next power of two: 64 B/cycle = 51.2 GB/s per core", True),
    DeviceConstant("vrex.vpe_ops.softmax", 5, "lane-ops/element", "V-Rex VPE (1 x 64 lanes)", "14 nm", "derived",
                   "operation count: max, subtract, exp, sum, scale by the reciprocal",
                   "exp/reciprocal/rsqrt taken as one pipelined lane-op each (LPU-style SFU; docs/DECISIONS.md D102)",
                   True),
    DeviceConstant("vrex.vpe_ops.rmsnorm", 4, "lane-ops/element", "V-Rex VPE", "14 nm", "derived",
                   "operation count: square, accumulate, scale by rsqrt, multiply by the norm weight", "", True),
    DeviceConstant("vrex.vpe_ops.layernorm", 6, "lane-ops/element", "V-Rex VPE", "14 nm", "derived",
                   "operation count: mean, subtract, square, accumulate, scale, affine (SigLIP)", "", True),
    DeviceConstant("vrex.vpe_ops.silu_mul", 5, "lane-ops/element", "V-Rex VPE", "14 nm", "derived",
                   "operation count: exp, add, reciprocal, multiply x, multiply by the up projection", "", True),
    DeviceConstant("vrex.vpe_ops.gelu", 8, "lane-ops/element", "V-Rex VPE", "14 nm", "derived",
                   "operation count of the tanh GELU: cube, 2 multiply-adds, tanh, add, 2 multiplies, "
                   "(SigLIP's gelu_pytorch_tanh)", "", True),
    DeviceConstant("vrex.vpe_ops.rope", 3, "lane-ops/element", "V-Rex VPE", "14 nm", "derived",
                   "operation count: x*cos + rotate(x)*sin = 2 multiplies + 1 add per element", ""),
    DeviceConstant("vrex.vpe_ops.residual", 1, "lane-ops/element", "V-Rex VPE", "14 nm", "derived",
                   "one add per element", ""),
)

_GPU_ROWS: tuple[DeviceConstant, ...] = (
    # --- A100 80 GB (HBM2e 1935 GB/s, BF16 312 TFLOPS dense, PCIe 4.0 x16) ---------------------------------
    DeviceConstant("a100.compute_eff", 215.3 / 312.0, "fraction", "A100/A800 80GB PCIe (GA100)", "TSMC 7 nm",
                   "measured", "github.com/mli/transformers-benchmarks issue #4 (2023): torch.float16 matmul "
                   "n=8192 on an A800 80GB PCIe (same GA100 die and clocks as the A100 80GB): 215.3 TFLOPS",
                   "215.3 / 312 = 0.69"),
    DeviceConstant("a100.pcie_eff", 25.13 / 32.0, "fraction", "A100-SXM4 (PCIe 4.0 x16)", "PCIe Gen4",
                   "measured", "github.com/NVIDIA/nvbandwidth issue #42 (2025): host_to_device_memcpy_sm, 512 MiB "
                   "and 1 GiB buffers: 25.13 GB/s; the BaM paper (Qureshi et al., ASPLOS 2023) likewise measures a "
                   "25 GB/s peak for x16 Gen4", "25.13 / 32 = 0.785"),
    # --- Jetson AGX Orin 32 GB (LPDDR5 204.8 GB/s; Table I 54 TFLOPS FP16 with 2:4 sparsity) -----------------
    DeviceConstant("agx_orin.dense_fraction", 0.5, "fraction", "Jetson AGX Orin", "Samsung 8 nm", "spec",
                   "NVIDIA Ampere architecture whitepaper: 2:4 structured sparsity doubles tensor-core peak; "
                   "docs/DECISIONS.md D21", "Table I's 54 TFLOPS is a sparse figure: dense = 27 TFLOPS"),
    DeviceConstant("agx_orin.compute_eff", 215.3 / 312.0, "fraction", "Jetson AGX Orin (Ampere GA10B)",
                   "Samsung 8 nm", "derived", "same Ampere tensor-core GEMM efficiency as a100.compute_eff (no "
                   "published dense GEMM measurement on the AGX Orin 32 GB found)", "0.69 of the dense peak", True),
    DeviceConstant("agx_orin.pcie_eff", _PCIE_DERIVED, "fraction", "PCIe 3.0 x4 to an M.2 NVMe SSD", "PCIe Gen3",
                   "derived", "PCIe Base Specification: 128b/130b encoding x 256-B payload / 280-B TLP",
                   "0.985 x 0.914 = 0.90; the Kioxia BG6 (PCIe 4.0 x4 drive) reads faster than this Gen3 x4 link"),
    DeviceConstant("gpu.mem_side_eff", 1.0, "fraction", "A100 and AGX Orin memory path", "-", "choice",
                   "docs/DECISIONS.md D100: no published measurement separates a GPU-side loss from the DRAM's own "
                   "timing losses, so the GPUs get the shared DRAM model alone; the validation rows (A800 copy, "
                   "gpt-fast decode, Jetson MLC/HF decode) show the difference", "1.0", True),
    # --- GPU software stack (eager PyTorch, FlexGen-style) ---------------------------------------------------
    DeviceConstant("stack.eager_ops_per_layer", 102, "aten calls", "Llama decoder layer, eager PyTorch", "-",
                   "measured", f"{_GPTFAST} model.py TransformerBlock, one decode step counted with "
                   "torch.utils._python_dispatch.TorchDispatchMode (torch 2.13, CPU, tiny config)",
                   "norms 12, QKV linear 4, attention incl. RoPE/KV update/repeat_interleave/SDPA 61, out-proj 4, "
                   "FFN 14, residual 7"),
    DeviceConstant("stack.eager_ops_fixed", 25, "aten calls", "decode step outside the layers, eager PyTorch",
                   "-", "measured", f"{_GPTFAST} model.py + generate.py sample()/decode_n_tokens, counted as "
                   "stack.eager_ops_per_layer", "embedding/final norm/LM head 7, sampling 14, loop bookkeeping 4"),
    DeviceConstant("stack.eager_host_op_s", (1 / 25.5) / (32 * 102 + 25), "s", "x86 host of an A100-80GB "
                   "(eager PyTorch)", "-", "derived", "pytorch.org/blog/accelerating-generative-ai-2 (2023): the "
                   "eager gpt-fast starting point decodes Llama-7B at 25.5 tok/s on an A100-80GB and its trace is "
                   "'heavily CPU overhead bound'", "39.2 ms per token / (32 x 102 + 25) aten calls = 11.9 us per "
                   "call (assumes the whole step is host-bound)"),
    DeviceConstant("stack.orin_host_slowdown", 3.4 / 2.2, "x", "Jetson AGX Orin Cortex-A78AE host", "Samsung 8 nm",
                   "derived", "clock ratio: AMD EPYC 7742 boost 3.4 GHz (DGX A100 host; AMD specification) / "
                   "Cortex-A78AE 2.2 GHz (Jetson AGX Orin module data sheet)",
                   "equal work per cycle assumed; no published per-op PyTorch overhead on the Orin found", True),
    DeviceConstant("stack.flexgen_staging_copies", 2, "copies", "FlexGen disk/CPU tier -> GPU", "-", "derived",
                   "FMInference/FlexLLMGen @004ffef flexllmgen/pytorch_backend.py: the CPU KV cache is not pinned "
                   "(init_cache_one_gpu_batch, 'disable pin_memory due to high memory overhead'); general_copy "
                   "relays it through src.pin_memory(), and the disk tier through copy_worker_func's pinned "
                   "cpu_buf", "each fetched byte is copied once into a pinned buffer (read + write) before the DMA: "
                   "2 extra passes over host memory, the GPU's own LPDDR5 on the unified-memory Orin"),
)

_LINK_ROWS: tuple[DeviceConstant, ...] = (
    DeviceConstant("vrex.edge_pcie_eff", _PCIE_DERIVED, "fraction", "PCIe 3.0 x4 to an M.2 NVMe SSD", "PCIe Gen3",
                   "derived", "as agx_orin.pcie_eff (the same link, Table I)", "0.90"),
    DeviceConstant("vrex.server_pcie_eff", 25.13 / 32.0, "fraction", "PCIe 4.0 x16 to host DDR4", "PCIe Gen4",
                   "measured", "as a100.pcie_eff (the same link, Table I)", "0.785"),
    DeviceConstant("pcie.tlp_overhead_bytes", _TLP_OVERHEAD_B, "B", "PCIe transaction layer packet", "-", "derived",
                   "PCIe Base Specification: framing + sequence number + 16-B header + LCRC per TLP", ""),
    DeviceConstant("pcie.l0s_entry_s", 7e-6, "s", "PCIe link, ASPM L0s", "-", "spec",
                   "PCI Express Base Specification (ASPM): a transmitter enabled for L0s enters it after an idle "
                   "period recommended not to exceed 7 us", "", True),
    DeviceConstant("pcie.l0s_power_frac", 0.5, "fraction", "PCIe link, ASPM L0s", "-", "choice",
                   "docs/DECISIONS.md D106: in L0s the idle direction's transmitter is in electrical idle while "
                   "receivers stay on; half of the L0 link power", "", True),
    DeviceConstant("pcie.l1_entry_s", 100e-6, "s", "PCIe link, ASPM L1 + L1.2", "-", "choice",
                   "docs/DECISIONS.md D106: L1 entry is implementation-defined (an idle timer); taken as 100 us",
                   "", True),
    DeviceConstant("pcie.l1_exit_s", 100e-6, "s", "PCIe link, L1.2 exit", "-", "spec",
                   "PCI-SIG L1 PM Substates: L1.2 exit of the order of 100 us (the reference clock and PLLs "
                   "restart)", "added once to the first fetch of a step that starts on an idle link", True),
    DeviceConstant("pcie.l1_power_frac", 3e-3 / 12.0, "fraction", "PCIe 3.0 x4 link in L1.2", "-", "derived",
                   "Toshiba XG6 product specification (HotHardware review table): L1.2 power < 3 mW typical",
                   "3 mW of the paper's 12 W x4 link; device-side figure used for the whole link", True),
)

_SSD_ROWS: tuple[DeviceConstant, ...] = (
    DeviceConstant("ssd.granule_bytes", 4096, "B", "NVMe SSD", "-", "spec",
                   "NVM Express Base Specification: logical blocks of 4 KiB (the usual LBA format of client drives "
                   "such as the Kioxia BG6)", "a scattered read moves whole 4 KiB blocks"),
    DeviceConstant("host_dram.granule_bytes", 64, "B", "host DDR4 over PCIe", "-", "spec",
                   "PCIe reads of host memory are served in 64-B cache lines (x86 coherent DMA)", ""),
    DeviceConstant("ssd.read_iops", 850e3, "IOPS", "Kioxia BG6 (PCIe 4.0 x4, BiCS6 TLC)", "-", "spec",
                   "Kioxia BG6 announcement (May 2023, e.g. computerbase.de 2023-05): up to 850,000 random-read "
                   "IOPS, 6,000 MB/s sequential read", "4 KiB random read, best capacity, high queue depth"),
    DeviceConstant("ssd.read_latency_s", 80e-6, "s", "client TLC NVMe SSD, 4 KiB read at QD1", "-", "choice",
                   "docs/DECISIONS.md D105: no BG6 QD1 latency published; typical client TLC read latency taken",
                   "bounds throughput at a finite queue depth: QD x size / latency", True),
    DeviceConstant("nvme.command_bytes", 64 + 16 + 4 + 4 + 4, "B", "NVMe command on PCIe", "-", "derived",
                   "NVM Express Base Specification: 64-B submission entry fetched by the drive, 16-B completion "
                   "entry written back, SQ-tail and CQ-head doorbells and an MSI-X write of 4 B each",
                   "+ one TLP overhead (pcie.tlp_overhead_bytes) per transaction: 5 per command"),
    DeviceConstant("nvme.seq_command_bytes", 128 * 1024, "B", "sequential NVMe read command", "-", "spec",
                   "Linux kernel default read_ahead_kb = 128 (the page-cache readahead under FlexGen's memory-mapped "
                   "disk tier); docs/DECISIONS.md D105 gives the KVMU the same command size for a whole-layer read",
                   "a sequential whole-tier read is issued as commands of this size", True),
    DeviceConstant("kvmu.queue_depth", 64, "commands", "V-Rex KVMU NVMe queue", "14 nm", "choice",
                   "docs/DECISIONS.md D105: outstanding NVMe reads the KVMU keeps in flight", "", True),
    DeviceConstant("host.queue_depth", 32, "commands", "GPU host NVMe queue (FlexGen copy threads)", "-", "choice",
                   "docs/DECISIONS.md D105: Linux page-cache readahead under FlexGen's copy threads", "", True),
)

ROWS: tuple[DeviceConstant, ...] = _DRAM_ROWS + _VREX_ROWS + _GPU_ROWS + _LINK_ROWS + _SSD_ROWS

_BY_KEY = {r.key: r for r in ROWS}
if len(_BY_KEY) != len(ROWS):
    raise RuntimeError("perf.constants: duplicate key in ROWS")


def const(key: str) -> float:
    """The value of one row; KeyError names the known keys."""
    try:
        return _BY_KEY[key].value
    except KeyError:
        raise KeyError(f"no device constant {key!r}; known: {', '.join(sorted(_BY_KEY))}") from None


def row(key: str) -> DeviceConstant:
    """The whole row (value, source, note) of ``key``."""
    const(key)
    return _BY_KEY[key]


def table() -> pd.DataFrame:
    return pd.DataFrame([asdict(r) for r in ROWS])
