"""The DRE (Dynamic KV cache Retrieval Engine, paper §V, Fig. 10–12) as cycle-accurate MyHDL blocks.

hcu.py   HCU: Hamming-distance clustering (XOR-popcount x16, < Th_hd, HC-table updater)
wtu.py   WTU: WiCSum thresholding with early-exit bucket sorting (Fig. 11) and the aggregator
kvmu.py  KVMU: cluster-contiguous KV mapping and the prefetch request stream
dre.py   the DRE top level (Fig. 10 memory sizes, 20.125 KB)
fixedpoint.py  formats and the integer reference rules (same as vrex_lib.resv)
timing.py      analytic cycle models (== the simulations), used by the performance simulator
verify.py      reference checks, Verilog conversion + Icarus replay, yosys synthesis -> summary.json
bulk.py        >= 10k vectors per block on the converted Verilog (Verilator; Icarus fallback), checked vs reference

Design choices where the paper is silent: docs/DECISIONS.md D9 and D80-D87.
"""
from .timing import cycles_to_us, hcu_cycles, hcu_cycles_trace, kvmu_cycles, wtu_cycles, wtu_row_cycles

__all__ = ["cycles_to_us", "hcu_cycles", "hcu_cycles_trace", "kvmu_cycles", "wtu_cycles", "wtu_row_cycles"]
