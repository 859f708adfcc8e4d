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

from .. import memtech


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

_DRAMSIM3_HBM = ("umd-memsys/DRAMsim3 configs/HBM2_8Gb_x128.ini (the DRAM simulator the paper names for HBM2e, "
                 "§VI.A), timing in cycles at its tCK = 1 ns")
_GPTFAST = "pytorch-labs/gpt-fast @32971d3"
_HOST_SCRIPT = ("scripts/measure_host_overhead.py (torch 2.13.0 CPU, transformers 4.35.2, gpt-fast @32971d3, "
                "Python 3.11; one thread of an Intel Xeon KVM guest (family 6 model 167, AVX-512/AMX), 2026-12-02; "
                "tiny fp16/bf16 models: the step time is the framework's own)")


def _tech_rows(tech: memtech.MemoryTech, system: str) -> tuple[DeviceConstant, ...]:
    """The ``<tech>.*`` rows of one DRAM technology, read from its record (:mod:`vrex_lib.memtech`): the paper's bus,
    the channel organisation and every JEDEC timing."""
    t = tech.timing
    bus = DeviceConstant(f"{tech.name}.bus_bits", tech.bus_bits, "bit", system, "-", "spec",
                         f"V-Rex paper §VI.A: {tech.name.upper()} on a {tech.bus_bits}-bit bus", f"record {tech.label}")
    org = tuple(DeviceConstant(f"{tech.name}.{k}", getattr(t, k), "B" if k == "page_bytes" else
                               ("banks" if k == "banks" else ("beats" if k == "burst_length" else "bit")),
                               t.device, "-", "spec", t.source, t.notes.get(k, "")) for k in memtech.JedecTiming.ORG)
    times = tuple(DeviceConstant(f"{tech.name}.{k}", getattr(t, k), "s", t.device, "-", "spec", t.source,
                                 t.notes.get(k, "")) for k in memtech.JedecTiming.TIMES)
    return (bus,) + org + times


_DRAM_ROWS: tuple[DeviceConstant, ...] = (
    # every DRAM technology with JEDEC timing, from its record (a new record brings its rows)
    *(row for name in memtech.DRAM if memtech.dram(name).timing is not None
      for row in _tech_rows(memtech.dram(name), memtech.dram(name).label)),
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
    # --- GPU memory pipeline and kernels (A100-SXM4-80GB measurements; the Orin takes the same Ampere figures) -----
    DeviceConstant("a100.mem_side_eff", 1700e9 / (2039e9 * (1 - 260 / 3900)), "fraction", "A100-80GB (GA100, HBM2e)",
                   "TSMC 7 nm", "measured", f"{_GPTFAST} README: 'Running on an A100 80GB, albeit power-limited to 330 "
                   "watts. Empirically, seems like peak bandwidth is about 1700 GB/s' (the board of the gpt-fast "
                   "benchmarks); cross-check te42kyfo/gpu-benches gpu-stream/a100_80.txt: read kernel at 100 % "
                   "occupancy 1769 GB/s", "1700 / (2039 x 0.933, the HBM2e model's long-read share) = 0.898: what the "
                   "GPU's memory pipeline loses beyond the DRAM timing (docs/DECISIONS.md D100, D240)"),
    DeviceConstant("agx_orin.mem_side_eff", 1700e9 / (2039e9 * (1 - 260 / 3900)), "fraction",
                   "Jetson AGX Orin (Ampere GA10B, LPDDR5)", "Samsung 8 nm", "derived", "as a100.mem_side_eff (the "
                   "same Ampere memory pipeline; no published GPU-stream measurement of the AGX Orin 32 GB found)",
                   "0.898", True),
    DeviceConstant("gpu.write_batch", float("inf"), "bursts", "A100 / AGX Orin memory controllers behind the L2",
                   "-", "derived", "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): a 40 MB L2 in front of "
                   "the memory controllers (the Orin's GA10B: 4 MB); dirty lines leave the L2 in batches of up to an L2 "
                   "slice's share, thousands of bursts per channel", "unbounded: the read/write turnaround is amortised "
                   "away; validated against gpu-benches' write-only and copy kernels (perf_validation)", True),
    DeviceConstant("gpu.kernel_dram_graph_s", 3.316e-6, "s", "A100-SXM4-80GB, kernels launched in a CUDA graph",
                   "TSMC 7 nm", "derived", "te42kyfo/gpu-benches @1c36d50 gpu-small-kernels/a100_80_graph.txt "
                   "(10000 dependent SCALE kernels per size, cudaGraph): least squares of T = a + V/b over the 33 "
                   "DRAM-resident volumes V >= 80 MB (84-986 MB): a = 3.32 us, b = 1753 GB/s; the benchmark's own "
                   "model T = V / (a + V/b), gpu-small-kernels/readme.md", "a kernel that streams DRAM pays a once: "
                   "launch, the first loads' latency, ramp and tail (the bytes-in-flight fill of Little's law)"),
    DeviceConstant("gpu.kernel_dram_stream_s", 5.005e-6, "s", "A100-SXM4-80GB, kernels launched on a stream",
                   "TSMC 7 nm", "derived", "te42kyfo/gpu-benches @1c36d50 gpu-small-kernels/a100_80.txt, the same "
                   "fit over its 21 DRAM-resident volumes (84-392 MB): a = 5.0 us, b = 1752 GB/s",
                   "eager stacks launch one kernel at a time on a stream"),
    DeviceConstant("gpu.kernel_small_graph_s", 1.34e-6, "s", "A100-SXM4-80GB, CUDA graph", "TSMC 7 nm", "measured",
                   "te42kyfo/gpu-benches @1c36d50 gpu-small-kernels/a100_80_graph.txt: 4096-element SCALE (64 KiB, "
                   "L2-resident) at 49 GB/s = 1.34 us per kernel", "a small kernel on activations (norm, RoPE, "
                   "KV-cache update, SiLU gate): launch-to-launch time"),
    DeviceConstant("gpu.kernel_small_stream_s", 2.62e-6, "s", "A100-SXM4-80GB, stream launches", "TSMC 7 nm",
                   "measured", "te42kyfo/gpu-benches @1c36d50 gpu-small-kernels/a100_80.txt: 4096-element SCALE at "
                   "25 GB/s = 2.62 us per kernel", ""),
    # --- GPU software stack (eager PyTorch, FlexGen-style) ---------------------------------------------------
    DeviceConstant("stack.eager_ops_per_layer", 102, "aten calls", "Llama decoder layer, eager PyTorch", "-",
                   "measured", f"{_GPTFAST} model.py TransformerBlock, one decode step counted with "
                   "torch.utils._python_dispatch.TorchDispatchMode (torch 2.13, CPU, tiny config)",
                   "norms 12, QKV linear 4, attention incl. RoPE/KV update/repeat_interleave/SDPA 61, out-proj 4, "
                   "FFN 14, residual 7"),
    DeviceConstant("stack.eager_ops_fixed", 25, "aten calls", "decode step outside the layers, eager PyTorch",
                   "-", "measured", f"{_GPTFAST} model.py + generate.py sample()/decode_n_tokens, counted as "
                   "stack.eager_ops_per_layer", "embedding/final norm/LM head 7, sampling 14, loop bookkeeping 4"),
    DeviceConstant("stack.eager_kernels_per_layer", 43, "kernels", "Llama decoder layer, eager PyTorch", "-",
                   "measured", f"{_GPTFAST} model.py TransformerBlock under TorchDispatchMode (torch 2.13, CPU, tiny "
                   "config; difference of 3- and 1-layer models): the aten calls that launch a kernel (views, "
                   "transposes, slices excluded)", "norms + residuals 14, QKV 1, attention 22, out-proj 1, FFN 5"),
    DeviceConstant("stack.compiled_kernels_per_layer", 10, "kernels", "Llama decoder layer, gpt-fast torch.compile",
                   "-", "measured", f"{_GPTFAST} model.py Transformer compiled by Inductor (torch 2.13, this "
                   "machine's CPU backend, fullgraph; difference of 3- and 1-layer models): 5 extern mm + 1 SDPA + 4 "
                   "fused kernels", "norm+residual 2, QKV mm + RoPE/KV-cache update 2, attention 1, out-proj 1, FFN "
                   "3 mm + SiLU gate 4; the CUDA backend's Triton fusion is taken as the same grouping (unverified)",
                   True),
    DeviceConstant("stack.hf_eager_ops_per_layer", 89, "aten calls", "Llama decoder layer, Hugging Face eager", "-",
                   "measured", "huggingface/transformers 4.35.2 LlamaForCausalLM (the release of the Jetson AI Lab HF "
                   "benchmark's time, Nov 2023) decode step under TorchDispatchMode (torch 2.13, CPU, tiny MHA config; "
                   "difference of 3- and 1-layer models)", "41 of them launch a kernel (stack.hf_eager_kernels_per_"
                   "layer); eager attention: matmul, divide, mask add, softmax, past-KV concatenation"),
    DeviceConstant("stack.hf_eager_kernels_per_layer", 41, "kernels", "Llama decoder layer, Hugging Face eager", "-",
                   "measured", "as stack.hf_eager_ops_per_layer: mul 9, mm 7, add 6, cat 4, pow/mean/rsqrt/index/neg/"
                   "bmm 2 each, div, softmax, silu", ""),
    DeviceConstant("stack.hf_eager_ops_fixed", 13, "aten calls", "decode step outside the layers, Hugging Face eager",
                   "-", "measured", "as stack.hf_eager_ops_per_layer (the 1-layer model less one layer)",
                   "embedding, final norm, LM head of the model's forward; the whole generate() step dispatches 48 "
                   "(scripts/measure_host_overhead.py); its host time enters as stack.hf_eager_host_fixed_x"),
    DeviceConstant("stack.eager_host_op_s", (1 / 25.5) / (32 * 102 + 25), "s", "x86 host of an A100-80GB "
                   "(eager PyTorch)", "-", "derived", "pytorch.org/blog/accelerating-generative-ai-2 (2023): the "
                   "eager gpt-fast starting point decodes Llama-7B at 25.5 tok/s on an A100-80GB and its trace is "
                   "'heavily CPU overhead bound'", "39.2 ms per token / (32 x 102 + 25) aten calls = 11.9 us per "
                   "call (assumes the whole step is host-bound)"),
    DeviceConstant("stack.hf_eager_host_layer_x", 0.640, "x", "Hugging Face eager decoder layer / gpt-fast eager "
                   "TransformerBlock, host time per decode step", "-", "measured", f"{_HOST_SCRIPT}: least squares "
                   "over 1-4 layers of each layer count's median step (21 interleaved repeats): 290 us per HF layer "
                   "vs 453 us per gpt-fast layer", "a property of the two code bases, taken to hold on the A100's "
                   "host (docs/DECISIONS.md D247); cross-checks 0.643 (median of per-repeat fits), 0.610 (fastest "
                   "runs)"),
    DeviceConstant("stack.hf_eager_host_fixed_x", 1.23, "x", "Hugging Face generate() step outside the layers / "
                   "gpt-fast decode_n_tokens step outside the layers, host time", "-", "measured",
                   f"{_HOST_SCRIPT}: the same fits' intercepts, 334 us (HF: generate()'s logits processors, stopping "
                   "criteria, attention-mask and input-id concatenation, the 4D mask, embedding, norm, LM head) vs "
                   "272 us (gpt-fast: embedding, norm, LM head, top-k sampling, the loop's clones)",
                   "cross-checks 1.19 (per-repeat fits), 1.42 (fastest runs): the intercept is the less certain of "
                   "the two; it is 1.5 % of a 32-layer step's host time"),
    DeviceConstant("stack.orin_host_slowdown", 3.4 / 2.2, "x", "Jetson AGX Orin Cortex-A78AE host", "Samsung 8 nm",
                   "derived", "clock ratio: AMD EPYC 7742 boost 3.4 GHz (DGX A100 host; AMD specification) / "
                   "Cortex-A78AE 2.2 GHz (Jetson AGX Orin module data sheet)",
                   "equal work per cycle assumed: no published single-thread comparison of the Cortex-A78AE with "
                   "the EPYC 7742 (or another x86 server core) and no per-op PyTorch overhead on the Orin found "
                   "(docs/DECISIONS.md D247)", True),
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
    DeviceConstant("ssd.granule_bytes", memtech.NVME_SSD.granule_bytes, "B", memtech.NVME_SSD.label, "-", "spec",
                   memtech.NVME_SSD.sources["granule_bytes"], "a scattered read moves whole 4 KiB blocks"),
    DeviceConstant("host_dram.granule_bytes", 64, "B", "host DDR4 over PCIe", "-", "spec",
                   "PCIe reads of host memory are served in 64-B cache lines (x86 coherent DMA)", ""),
    DeviceConstant("ssd.read_iops", memtech.NVME_SSD.read_iops, "IOPS", "Kioxia BG6 (PCIe 4.0 x4, BiCS6 TLC)", "-",
                   "spec", memtech.NVME_SSD.sources["read_iops"], "4 KiB random read, best capacity, high queue depth"),
    DeviceConstant("ssd.read_latency_s", memtech.NVME_SSD.read_latency_s, "s", "client TLC NVMe SSD, 4 KiB read at QD1",
                   "-", "choice", "docs/DECISIONS.md D105: no BG6 QD1 latency published; typical client TLC read "
                   "latency taken", "bounds throughput at a finite queue depth: QD x size / latency", True),
    DeviceConstant("nvme.command_bytes", 64 + 16 + 4 + 4 + 4, "B", "NVMe command on PCIe", "-", "derived",
                   "NVM Express Base Specification: 64-B submission entry fetched by the drive, 16-B completion "
                   "entry written back, SQ-tail and CQ-head doorbells and an MSI-X write of 4 B each",
                   "+ one TLP overhead (pcie.tlp_overhead_bytes) per transaction: 5 per command"),
    DeviceConstant("nvme.seq_command_bytes", 128 * 1024, "B", "sequential NVMe read command", "-", "spec",
                   "Linux kernel default read_ahead_kb = 128 (the page-cache readahead under FlexGen's memory-mapped "
                   "disk tier); docs/DECISIONS.md D105 gives the KVMU the same command size for a whole-layer read",
                   "a sequential whole-tier read is issued as commands of this size", True),
    DeviceConstant("host.copy_bytes_s", 8 * 25.6e9 / 2, "B/s", "DGX A100 host socket (AMD EPYC 7742, 8 x "
                   "DDR4-3200)", "-", "derived", "AMD EPYC 7742 specification: 8 DDR4-3200 channels = 204.8 GB/s per "
                   "socket; a copy reads and writes each byte", "102.4 GB/s of bytes copied: the peak, so FlexGen's "
                   "pinned-buffer relay is charged the least host-memory time it can take (docs/DECISIONS.md D243)",
                   True),
    DeviceConstant("kvmu.queue_depth", 64, "commands", "V-Rex KVMU NVMe queue", "14 nm", "choice",
                   "docs/DECISIONS.md D105: outstanding NVMe reads the KVMU keeps in flight", "", True),
    DeviceConstant("host.queue_depth", 32, "commands", "GPU host NVMe queue (FlexGen copy threads)", "-", "choice",
                   "docs/DECISIONS.md D105: Linux page-cache readahead under FlexGen's copy threads", "", True),
)

_PARKING_TAX = ("S. S. Vadari, 'The Model Parking Tax: Quantifying the Hidden Energy Cost of Always-On GPU Model "
                 "Deployment', arXiv:2605.23918 (2026), nvidia-smi on H100 80 GB, A100 80 GB (HBM2e) and L40S")

_ENERGY_ROWS: tuple[DeviceConstant, ...] = (
    # --- GPU board power while the GPU waits on the link (docs/DECISIONS.md D427) ------------------------------
    DeviceConstant("a100.idle_w", (62.12 + 61.57 + 58.99 + 62.13) / 4, "W", "A100-SXM4-80GB board (DGX A100), idle",
                   "TSMC 7 nm", "measured", "chuyishang/inference-energy @6e617d2 results_paste.md: 'DGX4 (A100-80GB)' "
                   "idle power before four 10-minute LLM serving runs, 62.12 / 61.57 / 58.99 / 62.13 W (NVML board "
                   "power); cross-check Slusheeking/nextgen docs/SYSTEM_HARDWARE.md: nvidia-smi, A100-SXM4-40GB, P0, "
                   "no process, 45 W", "61.2 W, the mean: the floor of what the board draws while it waits (taken as "
                   "the bare idle: an NVML read holds no CUDA context)"),
    DeviceConstant("a100.context_step_w", 38.0, "W", "A100 80 GB board, idle with a CUDA context held", "TSMC 7 nm",
                   "measured", _PARKING_TAX + ": a CUDA context forces a discrete DVFS transition of +26-50 W over "
                   "the bare idle on the HBM parts, independent of the memory allocated (<0.02 W/GB)",
                   "38 W: the middle of the printed 26-50 W range (the per-part value was not read); a FlexGen process "
                   "waiting on its copy stream holds its context, so its board idles at a100.idle_w + this step",
                   True),
    # --- host CPU of the server's relay copies (docs/DECISIONS.md D428) ----------------------------------------
    DeviceConstant("host.cpu_package_w", 225.0, "W", "DGX A100 host socket (AMD EPYC 7742, 64 cores)", "TSMC 7 nm",
                   "spec", "AMD EPYC 7742 specification: default TDP 225 W", "charged for the relay copies' time: a "
                   "copy at the socket's full DDR4 rate (host.copy_bytes_s) keeps every memory channel and the cores "
                   "issuing it busy; the package at TDP is the upper bound of its draw (the idle package, present "
                   "beside V-Rex48 too, is not subtracted)"),
)

ROWS: tuple[DeviceConstant, ...] = _DRAM_ROWS + _VREX_ROWS + _GPU_ROWS + _LINK_ROWS + _SSD_ROWS + _ENERGY_ROWS

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
