"""The RTL estimate (estimate/rtl.py, rtl_timing.py) on hand-made summaries whose answers are known, and the
Stillmaker-Baas delay factors."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from helpers import full_adder_netlist

from vrex_lib.config import VRexCoreConfig
from vrex_lib.estimate import rtl, rtl_timing, scaling
from vrex_lib.estimate.cells import _cell, load_cap_ff
from vrex_lib.estimate.constants import CELL_DELAYS


def test_delay_factors_from_the_fits():
    d = lambda c, v: c[0] * v ** 3 + c[1] * v ** 2 + c[2] * v + c[3]  # noqa: E731
    hp14 = scaling.DELAY_POLY[scaling.NODES_NM.index(14)]
    lp45 = scaling.DELAY_POLY[scaling.NODES_NM.index(45)]
    assert scaling.delay_factor(45, 1.1) == pytest.approx(d(hp14, 0.8) / d(lp45, 1.1))
    assert scaling.delay_factor(45, 1.1) == pytest.approx(0.1043, abs=1e-4)
    assert scaling.delay_factor(45, 1.1, row45="hp") == pytest.approx(0.3306, abs=1e-4)
    assert scaling.energy_factor(45, 1.1) == pytest.approx(0.0793, abs=1e-4)  # the rows every estimate uses
    assert scaling.energy_factor(45, 1.1, row45="hp") == pytest.approx(0.0922, abs=1e-4)
    with pytest.raises(ValueError, match="row45"):
        scaling.energy_factor(45, 1.1, row45="lvt")


def _unit(count: int, nand: int = 10, xor: int = 5) -> dict:
    act = dict(steps=100, patterns=100 + count, segments=count, alpha=0.25, by_cell={"$_NAND_": 50, "$_XOR_": 20},
               by_fanout={"1": 30, "3": 70})
    return dict(count=count, cells_by_type={"$_NAND_": nand, "$_XOR_": xor}, cells=nand + xor, activity=act,
                random_activity={**act, "by_cell": {"$_NAND_": 100, "$_XOR_": 40}}, netlist="fa.json")


def test_unit_energy_by_hand():
    e = rtl.unit_energy(_unit(4), rtl.RTLOptions(glitch=0.25))
    nand, xor = _cell("NAND2_X1"), _cell("XOR2_X1")
    internal = (50 * nand.internal_fJ + 20 * xor.internal_fJ) / 100
    net = (30 * 0.5 * load_cap_ff(1) + 70 * 0.5 * load_cap_ff(3)) * 1.1 ** 2 / 100
    ef = scaling.energy_factor(45, 1.1)
    assert e["internal_fj_45"] == pytest.approx(internal) and e["net_fj_45"] == pytest.approx(net)
    assert e["dyn_pj_14"] == pytest.approx((internal + net) * 1.25 * ef * 1e-3)
    assert e["area_um2"] == pytest.approx((10 * nand.area_um2 + 5 * xor.area_um2) * scaling.area_factor(45))
    assert e["leakage_uw"] == pytest.approx((10 * nand.leakage_nW + 5 * xor.leakage_nW) * ef * 1e-3)
    fixed = rtl.unit_energy(_unit(4), rtl.RTLOptions(fanout=2.0))
    assert fixed["net_fj_45"] == pytest.approx(100 * 0.5 * load_cap_ff(2) * 1.1 ** 2 / 100)
    assert rtl.unit_energy(_unit(4), rtl.RTLOptions(operands="random"))["internal_fj_45"] == pytest.approx(2 * internal)


def _summary() -> dict:
    regs = dict(w_in=dict(bits=128, toggles=400), x_in=dict(bits=128, toggles=400), products=dict(bits=192, toggles=300),
                tree=dict(bits=224, toggles=350), acc=dict(bits=32, toggles=50), control=dict(bits=9, toggles=4))
    dpe = dict(params=dict(n=8, levels_per_stage=1), latency=6, units={"bf16_mul": _unit(8), "fp32_add": _unit(3)},
               registers=regs, level_toggles=[200, 100, 50], activity=dict(vectors=100, sources={"l3.q_proj": 100}))
    vpe = dict(params=dict(lanes=8), latency=3, units={"fp32_mul": _unit(8)},
               registers=dict(operands=dict(bits=768, toggles=900), control=dict(bits=14, toggles=3)),
               activity=dict(vectors=100, sources={"l3.silu": 100}))
    return dict(schema="vrex.hw.lxe/1", blocks=dict(dpe=dpe, vpe=vpe))


def test_the_dpe_is_n_trees_sharing_one_activation_register():
    s = _summary()
    one, two = VRexCoreConfig(n_dpe_h=1, n_dpe_w=8, n_vpe_w=8), VRexCoreConfig(n_dpe_h=2, n_dpe_w=8, n_vpe_w=8)
    a, b = rtl.lxe_rtl(s, one), rtl.lxe_rtl(s, two)
    ua, ub = a[(a.block == "DPE") & (a.source == "rtl cells")], b[(b.block == "DPE") & (b.source == "rtl cells")]
    assert ub.dynamic_mW.sum() == pytest.approx(2 * ua.dynamic_mW.sum())
    bits = lambda df: float(df[df.part.str.contains("register bits")].part.iloc[0].split()[0])  # noqa: E731
    assert bits(b[b.block == "DPE"]) == 2 * (128 + 192 + 224 + 32 + 9) + 128  # x_in once
    steps = rtl.energy_steps(s, one)
    d = steps[steps.block == "DPE"].set_index("step").value
    units = d.filter(like="= units").iloc[0]
    assert units == pytest.approx(d.iloc[0] * d.iloc[1] * d.iloc[2] * 1e-3)
    total = d.filter(like="= total").iloc[0]
    assert total == pytest.approx(units + d.filter(like="registers").iloc[0] + d.filter(like="clock tree").iloc[0]
                                  + d.filter(like="leakage").iloc[0])


def test_register_recount_and_variants_move_the_right_way():
    s, cfg = _summary(), VRexCoreConfig(n_dpe_h=1, n_dpe_w=8, n_vpe_w=8)
    regs = rtl.register_counts("DPE", s["blocks"]["dpe"], cfg, rtl.RTLOptions(levels_per_stage=3))
    assert regs["tree"] == (32 * 1, 50 / 100)  # only the root is registered
    sens = rtl.sensitivity(s, cfg).set_index("variant")
    base = sens.DPE_mW.iloc[0]
    assert sens.loc["glitch 0", "DPE_mW"] < base < sens.loc["glitch 0.4 (cited high)", "DPE_mW"]
    assert sens.loc["Stillmaker-Baas HP 45 nm row", "DPE_mW"] > base
    assert sens.loc["DPE register after every 3 tree levels", "DPE_mW"] < base
    with pytest.raises(ValueError, match="operands"):
        rtl.lxe_rtl(s, cfg, replace(rtl.RTLOptions(), operands="noise"))


def test_stage_delays_add_up(tmp_path):
    (tmp_path / "netlists").mkdir()
    # one hand-made netlist stands in for every unit
    (tmp_path / "netlists" / "fa.json").write_text(json.dumps(dict(modules=dict(fa=full_adder_netlist()))))
    s = _summary()
    for name in ("product_add", "dpe_acc"):
        s["blocks"]["dpe"]["units"][name] = _unit(1)
    for name in ("rot_mux", "vpe_misc", "vpe_glue", "fp32_add"):
        s["blocks"]["vpe"]["units"][name] = _unit(8)
    t = rtl_timing.stage_table(s, tmp_path)
    fa = rtl_timing.unit_paths(s, tmp_path)["fp32_add"]["delay_ps"]
    ff = CELL_DELAYS["DFF_X1"]
    overhead = ff.intrinsic_ps + ff.slope_ps_per_fF * load_cap_ff(1) + ff.setup_ps
    assert list(t[t.block == "DPE"].delay_ps_45nm) == pytest.approx([overhead + fa] * 5)  # mul, 3 levels, acc
    assert t[t.block == "VPE"].delay_ps_45nm.iloc[1] == pytest.approx(overhead + 3 * fa)
    assert t.delay_ps_14nm_lp.iloc[0] == pytest.approx((overhead + fa) * scaling.delay_factor(45, 1.1))
    assert len(rtl_timing.stage_table(s, tmp_path, levels_per_stage=3)) == 5  # mul, one tree stage, acc, 2 VPE
    xor = CELL_DELAYS["XOR2_X1"]
    assert rtl_timing.cell_delay_ps("$_XOR_", 2) == pytest.approx(xor.intrinsic_ps + xor.slope_ps_per_fF
                                                                   * load_cap_ff(2))
