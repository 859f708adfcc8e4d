"""Estimator: the constants table is sourced and positive; counts derive from VRexCoreConfig."""
import math

import pytest

import vrex_lib.estimate as E
from vrex_lib.config import VRexCoreConfig
from vrex_lib.estimate import constants as C
from vrex_lib.estimate.synth import cell_area_45nm_um2, ge_area_um2, model_logic_area_um2, yosys_area


def test_every_row_has_a_known_source_and_positive_values():
    for r in C.ROWS:
        assert r.source in C.SOURCES, r
        if r.component.endswith("_share"):  # a cited range of a dimensionless share: its low end may be 0
            assert 0 <= r.energy_pJ < 1, r
            continue
        vals = [v for v in (r.energy_pJ, r.area_um2) if not math.isnan(v)]
        assert all(v > 0 for v in vals), r
        assert vals or r.leakage_uW > 0, r  # device rows carry their power in the leakage column
        assert r.leakage_uW >= 0, r


@pytest.mark.parametrize("arith", ["horowitz", "aladdin", "geomean"])
def test_derived_components_positive(arith):
    for name in ["bf16_mac", "bf16_multiplier", "fp32_adder", "int16_multiplier", "int32_adder", "comparator16",
                 "counter32", "xor32", "popcount32", "register", "sram_32kb"]:
        p = E.part(name, arith)
        assert p.energy_pj > 0 and p.area_um2 > 0, (arith, name)


def test_action_energy_api():
    from vrex_lib import paper
    from vrex_lib.estimate.scaling import energy_factor

    # BF16 MAC by hand from the Horowitz rows (45 nm / 0.9 V): FP16 multiplier 1.1 pJ x (8/11)^2 (BF16 has an
    # 8-bit significand, FP16 11) + FP16 adder 0.4 pJ x 16/16, scaled to 14 nm / 0.8 V by Stillmaker-Baas.
    ef = energy_factor(45, 0.9, 14, 0.8)
    assert E.action_energy_pj("bf16_multiplier", "multiply") == pytest.approx(1.1 * (8 / 11) ** 2 * ef, rel=1e-9)
    assert E.action_energy_pj("bf16_adder", "add") == pytest.approx(0.4 * ef, rel=1e-9)
    assert E.action_energy_pj("bf16_mac", "mac") == pytest.approx((1.1 * (8 / 11) ** 2 + 0.4) * ef, rel=1e-9)
    with pytest.raises(ValueError, match="action"):
        E.action_energy_pj("bf16_mac", "read")
    # Off-chip rows: the table's cited values, case-insensitive kinds; unknown kinds fail.
    assert E.dram_pj_per_bit("LPDDR5") == C.rows("dram_lpddr5", "transfer")[0].energy_pJ
    assert E.dram_pj_per_bit("hbm2e") == 3.9  # O'Connor et al. MICRO 2017
    with pytest.raises(ValueError):
        E.dram_pj_per_bit("gddr6")
    assert E.ssd_power_w("active") == pytest.approx(4.0) and E.ssd_power_w("idle") == pytest.approx(0.05)
    # PCIe: the paper's one registered input, 3 W per lane, x lanes at full load.
    assert E.PCIE_W_PER_LANE == paper.spec("system.pcie_w_per_lane")
    assert E.pcie_power_w(16) == pytest.approx(16 * E.PCIE_W_PER_LANE)


def test_sram_energy_grows_with_size_and_width():
    lib = E.Library()
    assert lib.sram_access(8 * 1024).energy_pj < lib.sram_access(32 * 1024).energy_pj
    assert lib.sram_access(8 * 1024, 128).energy_pj == pytest.approx(2 * lib.sram_access(8 * 1024, 64).energy_pj)


def _blocks(cfg=VRexCoreConfig(), **kw):
    return E.block_table(E.core_breakdown(cfg, **kw))


def test_n_wtu_w_changes_wtu_area_only():
    base, wide = _blocks(), _blocks(VRexCoreConfig().replace(n_wtu_w=32))
    assert wide.loc["WTU", "area_mm2"] > 1.2 * base.loc["WTU", "area_mm2"]
    assert wide.loc["DPE", "area_mm2"] == pytest.approx(base.loc["DPE", "area_mm2"])


def test_doubling_dpe_width_about_doubles_dpe_area():
    base, wide = _blocks(), _blocks(VRexCoreConfig().replace(n_dpe_w=128))
    assert wide.loc["DPE", "area_mm2"] / base.loc["DPE", "area_mm2"] == pytest.approx(2.0, rel=0.05)


def test_activity_scales_dynamic_power_not_area():
    full = E.core_breakdown()
    idle = E.core_breakdown(activity=E.Activity(dpe=0.0, vpe=0.0, hcu=0.0, wtu=0.0, kvmu=0.0,
                                                sram_read_bits=0, sram_write_bits=0))
    assert idle["area_mm2"].sum() == pytest.approx(full["area_mm2"].sum())
    assert idle["dynamic_mW"].sum() == 0
    # Idle: leakage + the un-gated clock of every register bit; the clock does not depend on activity.
    assert idle["power_mW"].sum() == pytest.approx(idle["leakage_mW"].sum() + idle["clock_mW"].sum())
    assert idle["clock_mW"].sum() == pytest.approx(full["clock_mW"].sum()) and idle["clock_mW"].sum() > 0
    half = E.Activity.from_counts(100, dpe_macs=50 * 64 * 64)
    assert half.dpe == pytest.approx(0.5)
    with pytest.raises(ValueError):
        E.Activity(dpe=1.5)


def test_chip_area_is_n_cores():
    assert E.chip_area_mm2(8) == pytest.approx(8 * E.core_area_mm2())
    with pytest.raises(ValueError):
        E.chip_area_mm2(0)


def test_dre_share_and_blocks_present():
    df = E.core_breakdown()
    assert set(df["block"]) == set(E.TABLE3_BLOCKS)
    assert set(df[df.group == "DRE"].block) == set(E.DRE_BLOCKS)
    s = E.dre_share(df)
    # The share is (HCU + WTU + KVMU) / all six blocks, for area and for power.
    b = E.block_table(df)
    dre = ["HCU", "WTU", "KVMU"]
    assert s["area_pct"] == pytest.approx(100 * b.loc[dre, "area_mm2"].sum() / b["area_mm2"].sum(), rel=1e-12)
    assert s["power_pct"] == pytest.approx(100 * b.loc[dre, "power_mW"].sum() / b["power_mW"].sum(), rel=1e-12)
    assert s["area_pct"] == pytest.approx(b.loc[dre, "area_pct"].sum(), rel=1e-12)
    # Growing a DRE block grows the share; growing the DPE shrinks it.
    assert E.dre_share(E.core_breakdown(VRexCoreConfig().replace(n_wtu_w=64)))["area_pct"] > s["area_pct"]
    assert E.dre_share(E.core_breakdown(VRexCoreConfig().replace(n_dpe_w=128)))["area_pct"] < s["area_pct"]


def test_wtu_accumulator_width_is_the_rtl_width():
    from vrex_lib.hw.fixedpoint import acc_bits

    df = E.core_breakdown()
    width = acc_bits(VRexCoreConfig().wtu_score_bytes * 8 // 16)
    assert width == 44
    assert f"cumulative-sum accumulator int{width}" in set(df.component)


def test_scaled_table_scales_only_what_has_a_node():
    t = C.scaled_table().set_index(["component", "action", "width", "source"])
    from vrex_lib.estimate.scaling import area_factor, energy_factor

    add = t.loc[("int_adder", "add", 32, "horowitz2014")]
    assert add.scaled_energy_pJ == pytest.approx(0.1 * energy_factor(45, 0.9), rel=1e-12)
    assert add.scaled_area_um2 == pytest.approx(137 * area_factor(45), rel=1e-12)
    eff = t.loc[("sram_array_efficiency", "-", 0, "assumption")]
    assert eff.scaled_area_um2 == eff.area_um2  # a dimensionless factor, not an area
    assert t.loc[("dram_lpddr5", "transfer", 1, "assumption")].scaled_energy_pJ == 5.0  # off-chip: not scaled


def test_dre_area_share_with_yosys_replaces_only_logic():
    import pandas as pd

    from vrex_lib.estimate.synth import dre_area_share_with_yosys, model_logic_area_um2

    df = E.core_breakdown()
    model = model_logic_area_um2(df)
    same = pd.DataFrame(dict(block=["hcu_top"], logic_area_um2=[model["HCU"]]))
    assert dre_area_share_with_yosys(df, same)["area_pct"] == pytest.approx(E.dre_share(df)["area_pct"])
    bigger = pd.DataFrame(dict(block=["hcu"], logic_area_um2=[model["HCU"] + 1e6]))  # +1 mm2 of HCU logic
    r = dre_area_share_with_yosys(df, bigger)
    tot, dre = df.area_mm2.sum(), df[df.group == "DRE"].area_mm2.sum()
    assert r["delta_mm2"] == pytest.approx(1.0) and r["area_pct"] == pytest.approx(100 * (dre + 1) / (tot + 1))
    assert dre_area_share_with_yosys(df, pd.DataFrame(dict(block=["xyz"], logic_area_um2=[1.0]))) is None


def test_yosys_cross_check_weights():
    assert ge_area_um2() == pytest.approx(0.798 * 0.17, rel=1e-3)
    assert cell_area_45nm_um2("$_DFFE_PP_") > cell_area_45nm_um2("$_DFF_P_")
    df = yosys_area({"blocks": {"hcu": {"cells_by_type": {"$_NAND_": 10, "$_DFF_P_": 2}}}})
    assert df.loc[0, "gate_equivalents"] == pytest.approx(10 + 2 * 4.522 / 0.798)
    assert df.loc[0, "flip_flops"] == 2
    with pytest.raises(KeyError):
        cell_area_45nm_um2("$_FOO_")
    kept = yosys_area({"hcu": {"cells_by_type": {"$_XOR_": 4, "$mem_v2": 2}, "memory_bits": 64}})
    assert not kept.loc[0, "memory_in_flops"] and kept.loc[0, "logic_area_um2"] == pytest.approx(
        4 * 1.596 / 0.798 * ge_area_um2())
    flops = yosys_area({"hcu": {"cells_by_type": {"$_XOR_": 4, "$_DFFE_PP_": 64}, "memory_bits": 64}})
    assert flops.loc[0, "memory_in_flops"]
    assert flops.loc[0, "logic_area_um2"] == pytest.approx(kept.loc[0, "logic_area_um2"])
    assert set(model_logic_area_um2(E.core_breakdown()).index) == {"HCU", "WTU", "KVMU"}


def test_logic_area_crosscheck_rows_explain_what_did_not_run():
    from vrex_lib.claims.table3 import logic_area_crosscheck

    df = E.core_breakdown()
    rows, table = logic_area_crosscheck(df, None, "no summary")
    assert {r.verdict() for r in rows} == {"NOT RUN"} and len(rows) == len(table) == 3
    assert all(r.cause == "not-run" and "no summary" in r.cause_detail for r in rows)
    ys = yosys_area({"blocks": {"hcu": {"cells_by_type": {"$_NAND_": 10}}}})
    rows, table = logic_area_crosscheck(df, ys)
    by = {r.claim: r for r in rows}
    assert by["dre.logic_area_um2.yosys.HCU"].reproduced == pytest.approx(10 * ge_area_um2())
    assert by["dre.logic_area_um2.yosys.WTU"].verdict() == "NOT RUN" and by["dre.logic_area_um2.yosys.WTU"].cause
    assert by["dre.area_share_pct"].cause == "model"
    assert table.set_index("Block").loc["HCU", "yosys_over_model"] > 0
