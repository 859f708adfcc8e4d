"""DRE hardware (paper §V.B–C, Fig. 10, Fig. 11, §IV.C): memory sizes and the Fig. 11 toy.

The memory sizes are the paper's specification of the DRE (inputs our MyHDL blocks are sized by); the total
20.125 KB is registered in hardware.py (``core.dre_sram_kb``).
"""
from ._core import pv

F10 = "Fig. 10"
pv("dre.mem_bytes.hcu_cur_hash", 128, "B", F10 + " (HCU current hash-bit memory)", "input", "exact")
pv("dre.mem_bytes.hcu_key_hash", 4096, "B", F10 + " (HCU key-cache hash-bit memory)", "input", "exact")
pv("dre.mem_bytes.wtu_score", 8192, "B", F10 + " (WTU score memory)", "input", "exact")
pv("dre.mem_bytes.wtu_count", 8192, "B", F10 + " (WTU token-count memory)", "input", "exact")
pv("dre.mem_bytes.total", 20608, "B", "§VI.F; Fig. 10 (20.125 KB)", "input", "exact")

# Fig. 11 toy example (illustrative ratio 0.8): weighted sum 1000, min/max 0/40, Th_csum 800, exit at 802.
F11 = "Fig. 11"
pv("fig11.weighted_sum", 1000, "", F11, "input", note="toy row of the figure; its entries are not printed")
pv("fig11.th_csum", 800, "", F11, "input", note="= 0.8 x 1000 (illustrative Th_r-wics = 80%)")
pv("fig11.min_score", 0, "", F11, "input")
pv("fig11.max_score", 40, "", F11, "input")
pv("fig11.exit_cumsum", 802, "", F11, "result", "shown",
   note="cumulative sum at exit in the toy; depends on the unprinted toy entries, so informational")

# The early exit ("average 16% per row", §IV.C) is registered once, in resv.py
# (``resv.wicsum_row_prefix_pct``); notebook 04 compares the WTU's measured fraction against it.
