"""Logic power from synthesized cells at a hand-made toggle count; the CACTI + cells breakdown; its claim rows."""
from dataclasses import dataclass

import pytest

from vrex_lib import report
from vrex_lib.claims import table3 as T
from vrex_lib.estimate import cells as X
from vrex_lib.estimate import constants as C
from vrex_lib.estimate.cacti_cells import Overheads, cacti_cells_breakdown, power_model
from vrex_lib.estimate.dram import dram_energy
from vrex_lib.perf.systems import get_system


@dataclass(frozen=True)
class HandActivity:
    """The shape of vrex_lib.hw.activity.BlockActivity, filled by hand."""

    block: str
    cycles: int
    vectors: int
    signal_bits: int
    toggles: int
    flop_bits: int
    flop_toggles: int
    source: str = "hand-made"

    @property
    def alpha(self) -> float:
        return self.toggles / (self.signal_bits * self.cycles)

    @property
    def flop_alpha(self) -> float:
        return self.flop_toggles / (self.flop_bits * self.cycles)


# Stillmaker-Baas 45 nm / 1.1 V -> 14 nm / 0.8 V energy factor, by hand from their fits.
SB = (0.2363 * 0.64 - 0.09675 * 0.8 + 0.02239) / (1.103 * 1.21 - 0.362 * 1.1 + 0.2767)


def test_block_power_from_a_hand_made_toggle_count():
    act = HandActivity("hcu", cycles=1000, vectors=10, signal_bits=500, toggles=50_000, flop_bits=20,
                       flop_toggles=4_000)
    assert act.alpha == 0.1 and act.flop_alpha == 0.2
    lp = X.logic_power("HCU", {"$_NAND_": 100, "$_DFF_P_": 10, "$mem_v2": 3}, act, 800e6, fanout=2)
    # Net load at fan-out 2 (45 nm): two mean X1 inputs (1.57236 fF, the 13 combinational cells' mean) + the
    # 5K_hvratio_1_1 wire load, 0.1774 fF x 3.9394.
    c_load = 2 * 1.5723567692 + 0.1774 * 3.9394
    nand_pj = (1.3424 + 0.5 * c_load * 1.1 ** 2) * 1e-3 * SB  # internal + 1/2 C V^2, fJ -> pJ, scaled
    dff_data_pj = (11.9033 + 0.5 * c_load * 1.1 ** 2) * 1e-3 * SB
    dff_clock_pj = (7.2239 + 0.949653 * 1.1 ** 2) * 1e-3 * SB  # CK-pin arcs + the pin's C V^2 every cycle
    # Clock tree for 10 flops: one CLKBUF_X3 leaf switching twice, its net's wire (fan-out 10: halfway between the
    # wire-load table's 9 and 11) and its input pin, each net charged once per cycle.
    wire10 = 0.1774 * (25.4842 + 27.0320) / 2
    tree_pj = (wire10 * 1.21 + 2 * 5.2282 + 1.421162 * 1.21) * 1e-3 * SB
    f_mw = 800e6 * 1e-9
    assert lp.dynamic_mw == pytest.approx((100 * 0.1 * nand_pj + 10 * 0.2 * dff_data_pj) * f_mw, rel=1e-4)
    assert lp.clock_mw == pytest.approx((10 * dff_clock_pj + tree_pj) * f_mw, rel=1e-4)
    assert lp.leakage_mw == pytest.approx((100 * 17.39336 + 10 * 79.112308) * 1e-6 * SB, rel=1e-6)
    assert lp.n_cells == 110 and lp.n_ff == 10  # $mem cells are CACTI's, not cells
    # Mutations: twice the toggles doubles the dynamic power only; a glitch share scales combinational power only.
    act2 = HandActivity("hcu", 1000, 10, 500, 100_000, 20, 8_000)
    lp2 = X.logic_power("HCU", {"$_NAND_": 100, "$_DFF_P_": 10}, act2, 800e6)
    assert lp2.dynamic_mw == pytest.approx(2 * lp.dynamic_mw) and lp2.clock_mw == pytest.approx(lp.clock_mw)
    g = X.logic_power("HCU", {"$_NAND_": 100}, act, 800e6, glitch=0.4)
    assert g.dynamic_mw == pytest.approx(1.4 * X.logic_power("HCU", {"$_NAND_": 100}, act, 800e6).dynamic_mw)


def test_bad_activity_and_unknown_cells_are_errors():
    bad = HandActivity("wtu", 10, 1, 10, 500, 1, 0)  # 5 toggles per bit per cycle: impossible
    with pytest.raises(ValueError, match="outside"):
        X.logic_power("WTU", {"$_AND_": 1}, bad, 800e6)
    with pytest.raises(KeyError, match="add it"):
        X.decompose("$_DLATCH_P_")


@pytest.mark.parametrize("ytype,cells", [("$_SDFFE_PP0P_", {"DFF_X1": 1, "AND2_X1": 1, "MUX2_X1": 1}),
                                         ("$_DFF_PP0_", {"DFFR_X1": 1}), ("$_DFFE_PP_", {"DFF_X1": 1, "MUX2_X1": 1}),
                                         ("$_SDFF_PP0_", {"DFF_X1": 1, "AND2_X1": 1}), ("$_XNOR_", {"XNOR2_X1": 1})])
def test_yosys_cells_map_to_library_cells(ytype, cells):
    assert X.decompose(ytype) == cells


def test_every_cell_row_is_sourced_and_physical():
    for c in C.CELLS:
        assert c.source in C.SOURCES and c.area_um2 > 0 and c.leakage_nW > 0 and c.internal_fJ > 0, c
    assert X.is_flop("DFF_X1") and not X.is_flop("NAND2_X1")
    # A flip-flop's clock energy per cycle is larger than an inverter's transition (the reason the clock matters).
    assert X.cell_energy("DFF_X1").clock_pj_per_cycle > X.cell_energy("INV_X1").toggle_pj


def test_cited_overheads():
    assert Overheads.cited("low").datapath_factor == 1.0
    assert Overheads.cited("mid").datapath_factor == pytest.approx((1 + 0.2) / (1 - 0.25))
    assert Overheads.cited("high").datapath_factor == pytest.approx(1.4 / 0.5)
    with pytest.raises(ValueError):
        Overheads.cited("typical")


SUMMARY = {"blocks": {b: {"cells_by_type": {"$_AND_": 200, "$_XOR_": 100, "$_SDFF_PP0_": 20, "$mem_v2": 2}}
                      for b in ("hcu", "wtu", "kvmu")}}


def test_cacti_cells_breakdown_and_its_rows(tmp_path):
    acts = {b: HandActivity(b, 1000, 10, 1000, 100_000, 100, 10_000) for b in ("hcu", "wtu", "kvmu")}
    df = cacti_cells_breakdown(activities=acts, summary=SUMMARY, cache_dir=tmp_path)
    assert set(df.block) == {"DPE", "VPE", "On-chip memory", "HCU", "WTU", "KVMU"}
    hcu = df[(df.block == "HCU") & (df.source == "cells")].iloc[0]
    lp = X.logic_power("HCU", SUMMARY["blocks"]["hcu"]["cells_by_type"], acts["hcu"], 800e6,
                       glitch=Overheads.cited("mid").glitch_share)
    assert hcu.power_mW == pytest.approx(lp.total_mw)
    assert (df.power_mW == df.dynamic_mW + df.clock_mW + df.leakage_mW).all()
    low = cacti_cells_breakdown(activities=acts, summary=SUMMARY, cache_dir=tmp_path, point="low")
    assert low.power_mW.sum() < df.power_mW.sum()  # the overheads only add
    rows = T.table3_rows("cacti+cells", df)
    f = report.to_frame(rows, "smoke")
    assert len(f) == 6 * 4 + 5 and set(f.verdict) <= {report.PASS, report.FAIL, report.INFO_V}
    fails = f[f.verdict == report.FAIL]
    assert (fails.cause == "model").all() and (fails.cause_detail != "").all()
    with pytest.raises(ValueError, match="no measured activity"):
        cacti_cells_breakdown(activities={"hcu": acts["hcu"]}, summary=SUMMARY, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="cells_by_type"):
        cacti_cells_breakdown(activities=acts, summary={"blocks": {"hcu": {}}}, cache_dir=tmp_path)
    nr = report.to_frame(T.not_run_rows("no yosys summary"), "smoke")
    assert set(nr.verdict) == {report.MISSING} and (nr.cause == "not-run").all()


def test_power_model_of_the_cacti_cells_estimate(tmp_path):
    acts = {b: HandActivity(b, 1000, 10, 1000, 100_000, 100, 10_000) for b in ("hcu", "wtu", "kvmu")}
    df = cacti_cells_breakdown(activities=acts, summary=SUMMARY, cache_dir=tmp_path)
    pm = power_model(df)
    assert pm.peak_w == pytest.approx(df.power_mW.sum() * 1e-3)  # full utilisation = the Table III point
    idle = pm.power_w()
    assert idle == pytest.approx((df.leakage_mW.sum() + df.clock_mW.sum()) * 1e-3)
    hcu_dyn = df[df.block == "HCU"].dynamic_mW.sum() * 1e-3
    assert pm.power_w(hcu=0.5) - idle == pytest.approx(0.5 * hcu_dyn)


def test_system_power_uses_the_estimators_dram_energy(tmp_path):
    p = T.system_power_parts("vrex8", 1.0, cache_dir=tmp_path)
    sys8 = get_system("vrex8")
    e = dram_energy("lpddr5", cache_dir=tmp_path)
    assert p["core"] == pytest.approx(8.0)
    assert p["dram"] == pytest.approx(sys8.dram * 8 * e.device_pj_per_bit * 1e-12)
    assert p["total"] == pytest.approx(sum(v for k, v in p.items() if k != "total"))
    p48 = T.system_power_parts("vrex48", 1.0, cache_dir=tmp_path)  # HBM2e: the cited rows; host DDR4: CACTI-IO
    assert p48["host_dram"] == pytest.approx(get_system("vrex48").pcie * 8 * dram_energy("ddr4", cache_dir=tmp_path)
                                             .total_pj_per_bit * 1e-12)


def test_a_summary_without_synthesis_is_not_run_not_a_crash(tmp_path):
    """Notebook 04 in the smoke profile writes hdl/summary.json without synthesis; notebook 05 then reports the
    CACTI + cells rows NOT RUN with why, instead of failing inside the model (docs/DECISIONS.md D323)."""
    import json

    from vrex_lib.estimate import synth

    p = tmp_path / "summary.json"
    entry = {"synth": None, "memory_bits": 8}
    p.write_text(json.dumps({"size": "smoke", "tools": {"yosys": "Yosys 0.23"},
                             "blocks": {"hcu": entry, "wtu": entry, "kvmu": entry}}))
    found, why = synth.ensure_summary(p, run_if_missing=False)
    assert found is None and "no cell counts for hcu, wtu, kvmu" in why and "size 'smoke'" in why
    p.write_text(json.dumps({"size": "default", "tools": {"yosys": None}, "blocks": {"hcu": entry}}))
    assert "yosys was not installed" in synth.ensure_summary(p, run_if_missing=True)[1]
    cells = {"cells_by_type": {"$_AND_": 3}}
    p.write_text(json.dumps({"size": "default", "tools": {"yosys": "Yosys"},
                             "blocks": {"hcu": cells, "wtu": {"synth": cells}}}))
    assert synth.ensure_summary(p, run_if_missing=False) == (p, "")
    p.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a summary.json of vrex_lib.hw.verify"):
        synth.ensure_summary(p, run_if_missing=False)
