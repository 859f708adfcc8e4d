"""vrex_lib.dse: sweep definition, Pareto fronts, the measured-workload adapter, caching, table and report."""
from __future__ import annotations

import dataclasses
import json
import math

import pandas as pd
import pytest

from vrex_lib import dse, report
from vrex_lib.config import VRexCoreConfig
from vrex_lib.perf import Workload, simulate_measured


def test_pareto_mask_hand_cases():
    a = [0.1, 0.2, 0.05, 0.3, math.nan, 0.1]
    b = [5.0, 4.0, 9.0, 4.0, 1.0, 6.0]
    # (0.3, 4) is dominated by (0.2, 4); (0.1, 6) by (0.1, 5); NaN is never on the front.
    assert list(dse.pareto_mask(a, b)) == [True, True, True, False, False, False]


def test_resv_points_one_at_a_time_and_named():
    spec = dse.sweep_spec("default")
    pts = dse.resv_points(spec)
    paper = dse.point_name({k: dse.PAPER_POINT[k] for k in dse.RESV_KEYS})
    assert next(iter(pts)) == paper == "resv@nhp32_th7_r0.3"
    for name, p in pts.items():
        assert dse.point_name(p) == name
        assert sum(p[k] != dse.PAPER_POINT[k] for k in dse.RESV_KEYS) <= 1
    assert {p["n_hp"] for p in pts.values()} == {16, 32, 64}
    assert min(p["th_r_wics"] for p in pts.values()) == 0.1 and max(p["th_r_wics"] for p in pts.values()) == 0.9
    for prof in ("smoke", "default", "full"):
        s = dse.sweep_spec(prof)
        assert all(b & (b - 1) == 0 for b in s.n_buckets)  # WTU bucket counts are powers of two
        assert s.long_points == "all" or len(dse.long_point_names(s)) == len(s.long_points)
    with pytest.raises(ValueError, match="unknown profile"):
        dse.sweep_spec("huge")
    assert dse.spec_inputs_key(spec, "m") != dse.spec_inputs_key(dataclasses.replace(spec, th_r_wics=(0.5,)), "m")


def test_measured_workload_replaces_only_what_was_measured():
    wl = Workload.from_stats("resv", selected_frac=0.2, tokens_per_cluster=12.0, wics_exit_frac=None, reuse=None)
    assert wl.selected("resv", "frame", 5000)[0] == pytest.approx(0.2)
    assert wl.tokens_per_cluster.at(5000)[0] == pytest.approx(12.0)
    assert wl.provenance["selected_frac"].kind == "user"
    assert wl.provenance["wics_exit_frac"].kind == "paper-stated"
    base = Workload.from_stats("resv", selected_frac=math.nan)
    assert base.name == "paper"
    with pytest.raises(ValueError, match="no simulator model"):
        Workload.from_stats("no_such_method", selected_frac=0.3)
    noclust = Workload.from_stats("resv_noclust", selected_frac=0.3)  # Fig. 19's ablation has its own model
    assert noclust.provenance["selected_frac"].kind == "user"


def test_simulated_latency_follows_the_measured_selection():
    """Beyond the KVMU window the fetched KV grows with the selected fraction, so latency must too."""
    lat = [simulate_measured("vrex8", "resv", "frame", 40_000, selected_frac=f).latency_ms for f in (0.05, 0.3, 0.9)]
    assert lat[0] < lat[1] < lat[2]
    r = simulate_measured("agx_orin", "resv", "frame", 40_000, selected_frac=0.3, source="unit test")
    assert "unit test" in r.workload_source or "user" in r.workload_source


def test_dre_area_power_grows_with_lanes_and_hash_bits():
    small = dse.dre_area_power(VRexCoreConfig(n_hcu_w=8, n_wtu_w=8), 32)
    paper = dse.dre_area_power(VRexCoreConfig(), 32)
    wide = dse.dre_area_power(VRexCoreConfig(n_hcu_w=32, n_wtu_w=32), 32)
    assert small["dre_area_mm2"] < paper["dre_area_mm2"] < wide["dre_area_mm2"]
    assert dse.dre_area_power(VRexCoreConfig(), 16)["dre_area_mm2"] < paper["dre_area_mm2"]
    assert 0 < paper["dre_area_mm2"] < paper["core_area_mm2"]


def test_dre_cycles_fall_with_lanes():
    walk = dict(scans_per_row=1.4, resolve_per_row=3.75)
    c8 = dse.dre_layer_cycles(VRexCoreConfig(n_hcu_w=8, n_wtu_w=8), 20_000, 16.0, walk, n_cores=8)
    c32 = dse.dre_layer_cycles(VRexCoreConfig(n_hcu_w=32, n_wtu_w=32), 20_000, 16.0, walk, n_cores=8)
    assert c32["wtu_cycles"] < c8["wtu_cycles"] and c32["hcu_cycles"] < c8["hcu_cycles"]


def test_wtu_walk_is_measured_in_myhdl():
    """Fewer buckets -> coarser refinement -> at least as many scans; lanes do not change the walk, only its
    cycles (more row groups per scan)."""
    w16 = dse.wtu_walk_stats(0.3, 16, 16, 5)
    w2 = dse.wtu_walk_stats(0.3, 16, 2, 5)
    w16_8 = dse.wtu_walk_stats(0.3, 8, 16, 5)
    assert w16["rows"] >= 3 and w16["scans_per_row"] >= 1
    assert w16_8["scans_per_row"] == w16["scans_per_row"]
    assert w16_8["cycles_per_row"] > w16["cycles_per_row"]
    assert w2["scans_per_row"] > w16["scans_per_row"] and w2["cycles_per_row"] > w16["cycles_per_row"]


def _fake_fid(spec) -> dict:
    """A fidelity file as measure_fidelity writes it, with made-up numbers (the table logic only)."""
    res = {}
    for i, (n, p) in enumerate(dse.resv_points(spec).items()):
        rec = dict(kv_len=400, answer_agreement=1.0 - p["th_r_wics"] / 10, attn_rel_error=0.3 * (1 - p["th_r_wics"]),
                   selected_frac=p["th_r_wics"], tokens_per_cluster=4.0 + i, wics_exit_frac=0.2, reuse_frac=0.5)
        res[n] = dict(fixture=rec, long=None)
    return dict(points=dse.resv_points(spec), results=res, model="fake")


@pytest.mark.long
def test_design_space_table_and_report(tmp_path):
    spec = dataclasses.replace(dse.sweep_spec("smoke"), th_r_wics=(0.1, 0.9), wtu_rows=2)
    df = dse.design_space(spec, _fake_fid(spec))
    assert df["is_paper"].sum() == 1
    assert set(df["kind"]) >= {"paper", "resv", "kv_capacity", "n_hcu_w", "n_wtu_w", "n_buckets"}
    hw = df[df["kind"].isin(["kv_capacity", "n_hcu_w", "n_wtu_w", "n_buckets"])]
    paper_row = df[df["is_paper"]].iloc[0]
    assert (hw["attn_rel_error_fixture"] == paper_row["attn_rel_error_fixture"]).all()  # same selections
    r = df.set_index("point")
    assert r.loc["resv@nhp32_th7_r0.1", "vrex8_latency_ms"] <= r.loc["resv@nhp32_th7_r0.9", "vrex8_latency_ms"]
    assert (df["vrex48_latency_ms"] < df["vrex8_latency_ms"]).all()
    assert df["pareto_latency"].any() and df["pareto_area"].any()
    path = dse.write_design_space(df, "smoke", out=tmp_path)
    assert path.name == "design_space.csv" and len(pd.read_csv(path)) == len(df)
    report.write_table("t1", [report.info_row("c", "q", "u", 1.0)], profile="smoke", out=tmp_path)
    assert set(report.collect_tables(tmp_path)["table"]) == {"t1"}  # the exploration table has no verdicts
    md = report.build_report(tmp_path).read_text()
    assert "## Appendix C — beyond the paper: the design space" in md and "tables/design_space.csv" in md
    assert "0 PASS · 0 CONSISTENT · 0 DEPENDS · 0 FAIL · 0 NOT RUN · 1 INFO." in md


def test_measure_fidelity_caches_by_inputs(tiny, tmp_path):
    spec = dataclasses.replace(dse.sweep_spec("smoke"), n_hp=(), th_hp=(), th_r_wics=(0.1,), fixture_frames=2,
                               long_frames=3, max_new_tokens=2)
    out = tmp_path / "fid.json"
    a = dse.measure_fidelity(spec, out, model=tiny, progress=False)
    rec = a["results"]["resv@nhp32_th7_r0.1"]["fixture"]
    assert 0.0 <= rec["selected_frac"] <= 1.0 and rec["attn_rel_error"] >= 0.0
    assert a["results"]["resv@nhp32_th7_r0.3"]["long"] is not None
    assert a["results"]["resv@nhp32_th7_r0.1"]["long"] is None  # not in long_points: null, never a guess
    b = dse.measure_fidelity(spec, out, model=tiny, progress=False)
    assert b["elapsed_s"] == a["elapsed_s"]  # reused
    spec2 = dataclasses.replace(spec, th_r_wics=(0.9,))
    c = dse.measure_fidelity(spec2, out, model=tiny, progress=False)
    assert "resv@nhp32_th7_r0.9" in c["results"] and "resv@nhp32_th7_r0.1" not in c["results"]
    assert json.loads(out.read_text())["inputs_key"] == dse.spec_inputs_key(spec2, tiny)


def test_shadow_workload_via_contract_c(tiny, tmp_path):
    """Every ReSV point's workload from one full-attention stream with the points' policies in shadow."""
    spec = dataclasses.replace(dse.sweep_spec("smoke"), n_hp=(), th_hp=(), th_r_wics=(0.9,), shadow_kv=(100,),
                               wtu_rows=2)
    sh = dse.measure_shadow(spec, tmp_path / "shadow.json", model=tiny)
    assert set(sh) == {"resv@nhp32_th7_r0.3", "resv@nhp32_th7_r0.9"}
    lo, hi = sh["resv@nhp32_th7_r0.3"][-1], sh["resv@nhp32_th7_r0.9"][-1]
    assert lo["kv_len"] == hi["kv_len"] >= 100  # same stream, same step
    assert lo["selected_frac"] <= hi["selected_frac"]  # a higher Th_r-wics never selects less on the same step
    df = dse.design_space(spec, _fake_fid(spec), sh)
    paper = df[df["is_paper"]].iloc[0]
    assert paper["workload_stream"].startswith("shadow long stream")
    assert paper["selected_frac"] == pytest.approx(lo["selected_frac"])
    assert dse.measure_shadow(dataclasses.replace(spec, shadow_kv=()), tmp_path / "none.json", model=tiny) == {}


def test_bounded_knobs_on_the_same_fronts(tiny, tmp_path):
    """The bounded ReSV's cap, budget and bits (beyond the paper): measured on the fixture like the ReSV points,
    cached by inputs, costed by the simulator's resv_best with those knobs plus the added blocks' per-core delta,
    and judged on the same Pareto fronts as the paper's points."""
    pts = dse.bounded_points()
    assert len(pts) == 6 and dse.bounded_name(dict(cap=8, budget=0.015, bits=4)) in pts
    assert len(dse.bounded_points(dse.bounded_sweep("default"))) == 3 and dse.bounded_sweep("full") == dse.BOUNDED_SWEEP
    with pytest.raises(ValueError, match="unknown knob"):
        dse.bounded_points(dict(lanes=(4,)))
    with pytest.raises(ValueError, match="bits"):
        dse.bounded_points(dict(bits=(1,)))
    spec = dataclasses.replace(dse.sweep_spec("smoke"), fixture_frames=2, max_new_tokens=2)
    sweep = dict(budget=(0.5,))
    a = dse.measure_bounded(spec, tmp_path / "b.json", model=tiny, sweep=sweep)
    assert set(a["results"]) == {"resv_best@cap8_b0.015_bits4", "resv_best@cap8_b0.5_bits4"}
    lo, hi = (a["results"][n] for n in ("resv_best@cap8_b0.015_bits4", "resv_best@cap8_b0.5_bits4"))
    assert lo["selected_frac"] < hi["selected_frac"] and lo["attn_rel_error"] >= hi["attn_rel_error"] >= 0
    assert dse.measure_bounded(spec, tmp_path / "b.json", model=tiny, sweep=sweep)["elapsed_s"] == a["elapsed_s"]
    delta = pd.DataFrame(dict(area_um2=[1000.0, 500.0], power_mW=[2.0, 1.0]))
    bdf = dse.bounded_space(spec, a, delta).set_index("point")
    paper = dse.dre_area_power(VRexCoreConfig(), dse.PAPER_POINT["n_hp"])
    assert (bdf.kind == "bounded").all() and bdf.dre_area_mm2.iloc[0] == pytest.approx(paper["dre_area_mm2"] + 0.0015)
    assert bdf.dre_power_mW.iloc[0] == pytest.approx(paper["dre_power_mW"] + 3.0)
    assert bdf.loc["resv_best@cap8_b0.015_bits4", "vrex8_latency_ms"] < bdf.loc["resv_best@cap8_b0.5_bits4",
                                                                                "vrex8_latency_ms"]
    assert dse.bounded_space(spec, a).dre_area_mm2.isna().all()  # no synthesised delta: no area, never a guess
    base = pd.DataFrame(dict(point=["p"], kind=["paper"], attn_rel_error_fixture=[1.0], vrex8_latency_ms=[1e9],
                             dre_area_mm2=[1e9], profile=["smoke"], model=["m"], kv_len_sim=[5000]))
    both = dse.with_bounded(base, bdf.reset_index())
    assert not both.loc[both.kind == "paper", "pareto_latency"].any()  # beaten by a bounded point on both axes
    assert both.pareto_latency.any() and (both.profile == "smoke").all()
