"""Table III (area/power breakdown of one V-Rex core), §VI.F hardware-overhead text, chip areas, PCIe power.

Areas in Table III are printed to 0.01 mm^2, so the three DRE rows (0.01 / 0.02 / 0.01) carry one
significant digit; their percentages (0.28 / 1.23 / 0.53 %) are the precise numbers to compare.
Tolerances: totals +-30 % and DRE shares +-1 percentage point; per-block values +-50 % (a
component-level estimate cannot be expected to match a Design Compiler run block by block).
"""
from ._core import INFO, Tolerance, pv

T3 = "Table III"
_tot = Tolerance("rel", 0.30, "totals within +-30%: a component-level estimate vs a DC synthesis")
_blk = Tolerance("rel", 0.50, "per block: component-level estimate vs the paper's DC synthesis")
_share = Tolerance("abs", 1.0, "DRE share within +-1 percentage point (numerator and denominator share constants)")
_coarse = Tolerance("none", 0.0, "printed to 0.01 mm2 (one significant digit); compare the % row")

_BLOCKS = {  # key: (area mm2, area %, power mW, power %)
    "dpe": (1.37, 72.79, 2311.39, 88.58),
    "vpe": (0.14, 7.18, 122.06, 4.68),
    "onchip_mem": (0.34, 17.98, 118.94, 4.56),
    "hcu": (0.01, 0.28, 2.99, 0.11),
    "wtu": (0.02, 1.23, 39.04, 1.49),
    "kvmu": (0.01, 0.53, 15.01, 0.58),
}
for _k, (_a, _ap, _p, _pp) in _BLOCKS.items():
    _dre = _k in ("hcu", "wtu", "kvmu")
    pv(f"table3.area_mm2.{_k}", _a, "mm2", T3, tol=_coarse if _dre else _blk)
    pv(f"table3.area_pct.{_k}", _ap, "%", T3, tol=_blk)
    pv(f"table3.power_mw.{_k}", _p, "mW", T3, tol=_blk)
    pv(f"table3.power_pct.{_k}", _pp, "%", T3, tol=_blk)
pv("table3.area_mm2.total", 1.89, "mm2", T3 + "; §VI.F", tol=_tot)
pv("table3.power_mw.total", 2609.43, "mW", T3 + "; §VI.F ('2.61 W')", tol=_tot)

pv("dre.area_share_pct", 2.0, "%", "Abstract; §VI.F", tol=_share,
   note="Table III rows sum to 2.04%")
pv("dre.power_share_pct", 2.2, "%", "Abstract; Table III (57.04 mW / 2609.43 mW = 2.19%)", tol=_share)
pv("dre.power_share_pct_body", 2.4, "%", "§VI.F body text", tol=INFO,
   note="inconsistent with the paper's own Table III and abstract (2.2%); shown, not judged")

_A = "§VI.F (area comparison)"
pv("chip.area_mm2.vrex8", 15.12, "mm2", _A, tol=_tot, note="= 8 x 1.89")
pv("chip.area_mm2.vrex48", 90.57, "mm2", _A, tol=_tot, note="48 x 1.89 = 90.72; printed 90.57")
pv("chip.area_mm2.agx_orin", 200, "mm2", _A, "input", note="the paper's figure for the AGX Orin")
pv("chip.area_mm2.a100", 826, "mm2", _A, "input", note="the paper's figure for the A100")
# The one registration of the paper's PCIe power model input (vrex_lib.estimate.PCIE_W_PER_LANE, vrex_lib.perf).
pv("system.pcie_w_per_lane", 3.0, "W/lane", "§VI.A ('3 W per lane')", "input")
