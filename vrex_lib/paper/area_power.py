"""Table III (area/power breakdown of one V-Rex core), §VI.F hardware-overhead text, chip areas, PCIe power.

Areas in Table III are printed to 0.01 mm^2, so the three DRE rows (0.01 / 0.02 / 0.01) carry one
significant digit; their percentages (0.28 / 1.23 / 0.53 %) are the precise numbers to compare.
Tolerances come from the quantity kind (``paper.QUANTITY_KINDS``): totals ('power', 'area'), blocks
('block_power', 'block_area', 'block_share' / 'small_block_share'), the DRE's shares ('small_share', 'one_digit_share' where printed to one digit).
"""
from ._core import pv

T3 = "Table III"

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
    _at = f"Table III, {_k.upper() if _k != 'onchip_mem' else 'on-chip memory'} row"
    pv(f"table3.area_mm2.{_k}", _a, "mm2", T3, qkind="shown" if _dre else "block_area",
       note="printed to 0.01 mm2 (one significant digit): the % row is graded" if _dre else "", point=_at + ", area")
    pv(f"table3.area_pct.{_k}", _ap, "%", T3, qkind="block_share" if _ap >= 10 else "small_block_share", point=_at + ", area %")
    pv(f"table3.power_mw.{_k}", _p, "mW", T3, qkind="block_power", point=_at + ", power")
    pv(f"table3.power_pct.{_k}", _pp, "%", T3, qkind="block_share" if _pp >= 10 else "small_block_share", point=_at + ", power %")
pv("table3.area_mm2.total", 1.89, "mm2", T3 + "; §VI.F", qkind="area", point="Table III, total row, area")
pv("table3.power_mw.total", 2609.43, "mW", T3 + "; §VI.F ('2.61 W')", qkind="power", point="Table III, total row, power")

pv("dre.area_share_pct", 2.0, "%", "Abstract; §VI.F", qkind="one_digit_share",
   note="printed '2%' (one digit); Table III rows sum to 2.04%")
pv("dre.power_share_pct", 2.2, "%", "Abstract; Table III (57.04 mW / 2609.43 mW = 2.19%)", qkind="small_share")
pv("dre.power_share_pct_body", 2.4, "%", "§VI.F body text", qkind="shown",
   note="inconsistent with the paper's own Table III and abstract (2.2%); shown, not judged")

_A = "§VI.F (area comparison)"
pv("chip.area_mm2.vrex8", 15.12, "mm2", _A, qkind="area", note="= 8 x 1.89")
pv("chip.area_mm2.vrex48", 90.57, "mm2", _A, qkind="area", note="48 x 1.89 = 90.72; printed 90.57")
pv("chip.area_mm2.agx_orin", 200, "mm2", _A, "input", note="the paper's figure for the AGX Orin")
pv("chip.area_mm2.a100", 826, "mm2", _A, "input", note="the paper's figure for the A100")
# The one registration of the paper's PCIe power model input (vrex_lib.estimate.PCIE_W_PER_LANE, vrex_lib.perf).
pv("system.pcie_w_per_lane", 3.0, "W/lane", "§VI.A ('3 W per lane')", "input")
