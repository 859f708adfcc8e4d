"""ONE table of the performance model's device constants: achieved fractions of peak, per-kernel overheads and
link protocol efficiency, each with its source, the device/node it was measured on and how it was obtained.

``how``: 'measured' (a published measurement on that device or the same silicon), 'derived' (arithmetic on a
standard or a datasheet, the derivation in the note) or 'spec' (the paper's or a vendor's specification). Nothing
here is fitted to a V-Rex paper result. Table I's peaks, bandwidths, capacities and powers are read from
:func:`vrex_lib.paper.spec` (kind 'input'); this table holds what turns a peak into an achieved rate.

    from vrex_lib.perf.constants import const, table
    const("a100.pcie_eff")        # 0.785
    table()                       # DataFrame: key, value, unit, device, node, how, source, note
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


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


# PCIe Gen3/Gen4 link efficiency, derived from the PCIe Base Specification (rev. 4.0): 128b/130b line encoding
# (0.985) and a 256-B maximum TLP payload carrying ~24 B of framing + sequence number + 16-B header + LCRC
# (256 / 280 = 0.914): 0.985 x 0.914 = 0.90 of the signalling rate at best; ACK/flow-control DLLPs take a little
# more. Used for the edge links, where no measurement on the paper's configuration was found.
_PCIE_DERIVED = 0.985 * 256.0 / (256.0 + 24.0)
# LPDDR5 streaming efficiency, derived from JEDEC JESD209-5 refresh timing: all-bank refresh tRFCab = 280 ns every
# tREFI = 3.906 us blocks the channel 7.2 % of the time; long sequential bursts interleaved over banks hide
# activates/precharges, so 1 - 280/3906 = 0.928 bounds a streaming read.
_LPDDR5_DERIVED = 1.0 - 280.0 / 3906.0
# HBM2e, same derivation with JESD235 timing (tRFC = 350 ns for 8 Gb dies, tREFI = 3.9 us): 1 - 350/3900 = 0.910.
_HBM2E_DERIVED = 1.0 - 350.0 / 3900.0

ROWS: tuple[DeviceConstant, ...] = (
    # --- A100 80 GB (HBM2e 1935 GB/s, BF16 312 TFLOPS dense, PCIe 4.0 x16) -----------------------------------
    DeviceConstant("a100.compute_eff", 215.3 / 312.0, "fraction", "A100/A800 80GB PCIe (GA100)", "TSMC 7 nm",
                   "measured", "github.com/mli/transformers-benchmarks issue #4 (2023): torch.float16 matmul "
                   "n=8192 on an A800 80GB PCIe (same GA100 die and clocks as the A100 80GB): 215.3 TFLOPS",
                   "215.3 / 312 = 0.69"),
    DeviceConstant("a100.dram_eff", 1727.5 / 1935.0, "fraction", "A100/A800 80GB PCIe (HBM2e)", "TSMC 7 nm",
                   "measured", "github.com/mli/transformers-benchmarks issue #4 (2023): memory-bandwidth test "
                   "(4 Mi-element copy) on an A800 80GB PCIe: 1727.5 GB/s of 1935 GB/s", "1727.5 / 1935 = 0.89"),
    DeviceConstant("a100.pcie_eff", 25.13 / 32.0, "fraction", "A100-SXM4 (PCIe 4.0 x16)", "PCIe Gen4",
                   "measured", "github.com/NVIDIA/nvbandwidth issue #42 (2025): host_to_device_memcpy_sm, 512 MiB "
                   "and 1 GiB buffers: 25.13 GB/s; the BaM paper (Qureshi et al., ASPLOS 2023) likewise measures a "
                   "25 GB/s peak for x16 Gen4", "25.13 / 32 = 0.785"),
    DeviceConstant("a100.kernel_launch_s", 4.9e-6, "s", "CUDA GPU (driver launch path)", "-", "measured",
                   "github.com/JuliaGPU/CUDAdrv.jl PR #15 (2017): 'statically compiled C has a launch overhead of "
                   "4.90 us' (cuLaunchKernel, mostly libcuda)", "per kernel, serialised with the GPU's work"),
    # --- Jetson AGX Orin 32 GB (LPDDR5 204.8 GB/s; Table I 54 TFLOPS FP16 with 2:4 sparsity) -----------------
    DeviceConstant("agx_orin.dense_fraction", 0.5, "fraction", "Jetson AGX Orin", "Samsung 8 nm", "spec",
                   "NVIDIA Ampere architecture whitepaper: 2:4 structured sparsity doubles tensor-core peak; "
                   "docs/DECISIONS.md D21", "Table I's 54 TFLOPS is a sparse figure: dense = 27 TFLOPS"),
    DeviceConstant("agx_orin.compute_eff", 215.3 / 312.0, "fraction", "Jetson AGX Orin (Ampere GA10B)",
                   "Samsung 8 nm", "derived", "same Ampere tensor-core GEMM efficiency as a100.compute_eff (no "
                   "published dense GEMM measurement on the AGX Orin 32 GB found)", "0.69 of the dense peak"),
    DeviceConstant("agx_orin.dram_eff", 0.70, "fraction", "Jetson AGX Orin (LPDDR5, GPU STREAM)", "Samsung 8 nm",
                   "measured", "github.com/jetsonhacks/jetson-mem-bench docs/GUIDE.md §7 'Interpreting results': "
                   "GPU STREAM copy/triad on Jetson (AGX Orin, 204.8 GB/s theoretical) sustains 60-80 % of "
                   "theoretical solo", "midpoint 0.70 of the reported range; the LPDDR5 refresh bound "
                   "(vrex.lpddr5_dram_eff, 0.928) is the ceiling"),
    DeviceConstant("agx_orin.pcie_eff", _PCIE_DERIVED, "fraction", "PCIe 3.0 x4 to an M.2 NVMe SSD", "PCIe Gen3",
                   "derived", "PCIe Base Specification: 128b/130b encoding x 256-B payload / 280-B TLP",
                   "0.985 x 0.914 = 0.90; the Kioxia BG6 (PCIe 4.0 x4 drive) reads faster than this Gen3 x4 link"),
    DeviceConstant("agx_orin.kernel_launch_s", 4.9e-6, "s", "CUDA GPU (driver launch path)", "-", "derived",
                   "a100.kernel_launch_s (same driver path; the Orin's Cortex-A78AE host is slower, so a lower "
                   "bound)"),
    # --- V-Rex (LXE + DRE, 14 nm, 800 MHz; LPDDR5 edge / HBM2e server) -------------------------------------
    DeviceConstant("vrex.compute_eff", 1.0, "fraction", "V-Rex LXE (64 x 64 MAC trees)", "14 nm", "derived",
                   "§VI.F: 64-wide MAC trees; every GEMM dimension of Llama-3-8B and SigLIP-L (4096, 1024, 14336, "
                   "128, 576 patches) is a multiple of 64, so a fed tree has no idle lanes", "1.0"),
    DeviceConstant("vrex.lpddr5_dram_eff", _LPDDR5_DERIVED, "fraction", "LPDDR5 256-bit (edge)", "-", "derived",
                   "JEDEC JESD209-5 refresh timing (tRFCab 280 ns / tREFI 3.906 us)", "0.928"),
    DeviceConstant("vrex.hbm2e_dram_eff", _HBM2E_DERIVED, "fraction", "HBM2e 5120-bit (server)", "-", "derived",
                   "JEDEC JESD235 refresh timing (tRFC 350 ns / tREFI 3.9 us)", "0.910"),
    DeviceConstant("vrex.edge_pcie_eff", _PCIE_DERIVED, "fraction", "PCIe 3.0 x4 to an M.2 NVMe SSD", "PCIe Gen3",
                   "derived", "as agx_orin.pcie_eff (the same link, Table I)", "0.90"),
    DeviceConstant("vrex.server_pcie_eff", 25.13 / 32.0, "fraction", "PCIe 4.0 x16 to host DDR4", "PCIe Gen4",
                   "measured", "as a100.pcie_eff (the same link, Table I)", "0.785"),
    # --- Offload-tier granules -------------------------------------------------------------------------------
    DeviceConstant("ssd.granule_bytes", 4096, "B", "NVMe SSD", "-", "spec",
                   "NVM Express Base Specification: logical blocks of 4 KiB (the usual LBA format of client drives "
                   "such as the Kioxia BG6)", "a scattered read moves whole 4 KiB blocks"),
    DeviceConstant("host_dram.granule_bytes", 64, "B", "host DDR4 over PCIe", "-", "spec",
                   "PCIe reads of host memory are served in 64-B cache lines (x86 coherent DMA)", ""),
)

_BY_KEY = {r.key: r for r in ROWS}


def const(key: str) -> float:
    """The value of one row; KeyError names the known keys."""
    try:
        return _BY_KEY[key].value
    except KeyError:
        raise KeyError(f"no device constant {key!r}; known: {', '.join(sorted(_BY_KEY))}") from None


def table() -> "pandas.DataFrame":  # noqa: F821
    import pandas as pd

    return pd.DataFrame([asdict(r) for r in ROWS])
