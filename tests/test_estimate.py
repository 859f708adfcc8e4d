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
    assert E.action_energy_pj("bf16_mac", "mac") == pytest.approx(
        E.action_energy_pj("bf16_multiplier", "multiply") + E.action_energy_pj("bf16_adder", "add"))
    with pytest.raises(ValueError, match="action"):
        E.action_energy_pj("bf16_mac", "read")
    assert E.dram_pj_per_bit("LPDDR5") > E.dram_pj_per_bit("hbm2e") > 0
    with pytest.raises(ValueError):
        E.dram_pj_per_bit("gddr6")
    assert E.ssd_power_w("active") > E.ssd_power_w("idle") > 0
    assert E.PCIE_W_PER_LANE == 3.0


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
    assert idle["power_mW"].sum() == pytest.approx(idle["leakage_mW"].sum())
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
    s = E.dre_share(df)
    assert 0 < s["area_pct"] < 100 and 0 < s["power_pct"] < 100


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
