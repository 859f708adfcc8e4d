"""Table I (hardware specifications) and the V-Rex core configuration (§VI.A, §VI.F).

Bandwidths, capacities and powers of Table I are *inputs* to the performance simulator (the paper
gives them as the systems' specifications). Peak throughputs are *derived* claims we recompute.
"""
from ._core import pv

T1 = "Table I"

# Peak throughput (TFLOPS): FP16 for AGX, BF16 for V-Rex and A100 (Table I footnote 1).
pv("table1.peak_tflops.agx_orin", 54, "TFLOPS", T1, "input", note="FP16; with 2:4 sparsity (docs/DECISIONS.md D21)")
pv("table1.peak_tflops.vrex8", 53.3, "TFLOPS", T1, qkind="arithmetic")
pv("table1.peak_tflops.a100", 312, "TFLOPS", T1, "input", note="BF16 dense")
pv("table1.peak_tflops.vrex48", 319.5, "TFLOPS", T1, qkind="arithmetic")
pv("table1.n_cores.vrex8", 8, "cores", T1, "input")
pv("table1.n_cores.vrex48", 48, "cores", T1, "input")
# Memory.
pv("table1.dram_bw_gbs.edge", 204.8, "GB/s", T1, "input", note="LPDDR5, 256-bit bus (§VI.A)")
pv("table1.dram_bw_gbs.server", 1935, "GB/s", T1, "input", note="HBM2e, 5120-bit bus (§VI.A)")
pv("table1.dram_capacity_gb.edge", 32, "GB", T1, "input")
pv("table1.dram_capacity_gb.server", 80, "GB", T1, "input")
pv("table1.pcie_bw_gbs.edge", 4, "GB/s", T1, "input", note="PCIe 3.0 x4 to an M.2 NVMe SSD (Kioxia BG6)")
pv("table1.pcie_bw_gbs.server", 32, "GB/s", T1, "input", note="PCIe 4.0 x16 to DDR4 CPU memory")
pv("table1.pcie_lanes.edge", 4, "lanes", T1, "input")
pv("table1.pcie_lanes.server", 16, "lanes", T1, "input")
# System power (V-Rex, DRAM, PCIe and storage included; footnote 2).
pv("table1.power_w.agx_orin", 40, "W", T1, "input", note="printed '~40W'; measured with tegrastats (§VI.A)")
pv("table1.power_w.vrex8", 35, "W", T1, qkind="power",
   note="text: '11.4% lower than 40 W' implies 35.44 W")
pv("table1.power_w.a100", 300, "W", T1, "input", note="measured with nvidia-smi (§VI.A)")
pv("table1.power_w.vrex48", 203.68, "W", T1, qkind="power")

# Core configuration and implementation (§VI.F) -- inputs.
_F = "§VI.F"
for _name, _v in dict(n_dpe_h=64, n_dpe_w=64, n_vpe_h=1, n_vpe_w=64, n_hcu_h=1, n_hcu_w=16, n_wtu_h=1,
                      n_wtu_w=16).items():
    pv(f"core.{_name}", _v, "", _F, "input")
pv("core.freq_mhz", 800, "MHz", _F, "input")
pv("core.vdd_v", 0.8, "V", _F, "input")
pv("core.node_nm", 14, "nm", _F, "input")
pv("core.lxe_sram_kb", 384, "KB", _F, "input")
pv("core.dre_sram_kb", 20.125, "KB", "§VI.F; Fig. 10 (128 B + 4 KB + 8 KB + 8 KB)", "input")
pv("core.peak_tflops", 6.656, "TFLOPS", "derived from §VI.F: (64·64+64)·2·0.8 GHz", "derived",
   "arithmetic")
