"""The DRE (Dynamic KV cache Retrieval Engine, paper §V, Fig. 10–12) and the LXE's DPE and VPE as MyHDL blocks.

hcu.py   HCU: Hamming-distance clustering (XOR-popcount x16, < Th_hd, HC-table updater)
wtu.py   WTU: WiCSum thresholding with early-exit bucket sorting (Fig. 11) and the aggregator -- the top
wtu_blocks.py  the WTU's sub-blocks, each with its testbench beside it
wtu_driver.py  rows through the WTU top in simulation (simulate_wtu)
kvmu.py  KVMU: cluster-contiguous KV mapping and the prefetch request stream
dre.py   the DRE top level (Fig. 10 memory sizes, 20.125 KB)
memories.py    the on-chip RAM (one write port, N read ports)
fixedpoint.py  formats and the integer reference rules (same as vrex_lib.resv)
walk.py        the WTU bucket walk as plain Python: reference of its scans and cycles
timing.py      analytic cycle models (== the simulations), used by the performance simulator
vectors.py     real traces (data/traces/dre_traces.npz) and seeded random vectors
harness.py     Verilog conversion, the one stimulus-file testbench, Icarus / Verilator runs, the replay
blocks.py      one record per block (params, ports, instance, vectors, checks) that the loops below read
bulk.py        thousands of vectors per block on the converted Verilog (Verilator or Icarus), checked vs reference
verify.py      reference checks, Verilog replay, bulk vectors, yosys synthesis -> summary.json
activity.py    toggle counts of the converted Verilog (VCD) for the energy estimator
analysis.py    notebook 04's tables and the measured WTU walk of the design-space sweep

fpref.py       bit-exact NumPy/torch reference of the LXE's BF16/FP32 arithmetic (FTZ, RNE, canonical NaN)
bf16.py        BF16 x BF16 and FP32 multipliers, the FP32 adder (MyHDL)
dpe.py         one DPE MAC tree: 64 BF16 products, 63 FP32 adders, FP32 accumulator, pipelined
vpe.py         the 1 x 64 VPE: FP32 multiply-add lanes, misc unit, lane rotator
vpe_programs.py softmax, RMSNorm, SiLU, RoPE as VPE instruction streams
lxe_vectors.py real SmolLM2 operands (data/traces/lxe_operands.npz) and random vectors of the LXE blocks
lxe_units.py   the identical units the DPE and VPE are composed of, their input streams and registers
gates.py       a synthesised netlist evaluated bit-parallel: toggles per net, longest path
lxe.py         verify (MyHDL, Icarus replay, Verilator bulk), synthesise by units, gate-level activity -> summary

Design choices where the paper is silent: docs/DECISIONS.md D9, D80-D87 and D280-D288.
"""
from .timing import cycles_to_us, hcu_cycles, hcu_cycles_trace, kvmu_cycles, wtu_cycles, wtu_row_cycles

__all__ = ["cycles_to_us", "hcu_cycles", "hcu_cycles_trace", "kvmu_cycles", "wtu_cycles", "wtu_row_cycles"]
