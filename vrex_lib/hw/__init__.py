"""The DRE (Dynamic KV cache Retrieval Engine, paper §V, Fig. 10–12) as cycle-accurate MyHDL blocks.

hcu.py   HCU: Hamming-distance clustering (XOR-popcount x16, < Th_hd, HC-table updater)
wtu.py   WTU: WiCSum thresholding with early-exit bucket sorting (Fig. 11) and the aggregator
kvmu.py  KVMU: cluster-contiguous KV mapping and the prefetch request stream
dre.py   the DRE top level (Fig. 10 memory sizes, 20.125 KB)
memories.py    the on-chip RAM (one write port, N read ports)
fixedpoint.py  formats and the integer reference rules (same as vrex_lib.resv)
walk.py        the WTU bucket walk as plain Python: reference of its scans and cycles
timing.py      analytic cycle models (== the simulations), used by the performance simulator
vectors.py     real traces (data/traces/dre_traces.npz) and seeded random vectors
harness.py     Verilog conversion, the one stimulus-file testbench, Icarus / Verilator runs, the replay
blocks.py      one record per block (params, ports, instance, vectors, checks) that the loops below read
bulk.py        >= 10k vectors per block on the converted Verilog (Verilator; Icarus fallback), checked vs reference
verify.py      reference checks, Verilog replay, bulk vectors, yosys synthesis -> summary.json
activity.py    toggle counts of the converted Verilog (VCD) for the energy estimator
analysis.py    notebook 04's tables and the measured WTU walk of the design-space sweep

Design choices where the paper is silent: docs/DECISIONS.md D9 and D80-D87.
"""
from .timing import cycles_to_us, hcu_cycles, hcu_cycles_trace, kvmu_cycles, wtu_cycles, wtu_row_cycles

__all__ = ["cycles_to_us", "hcu_cycles", "hcu_cycles_trace", "kvmu_cycles", "wtu_cycles", "wtu_row_cycles"]
