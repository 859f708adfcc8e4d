"""The performance simulator's definitions: Fig. 18 roofline fraction, headline comparison sets, Fig. 14 baseline,
InfiniGenP's resident keys (docs/DECISIONS.md D27)."""
from __future__ import annotations

import pandas as pd
import pytest

from vrex_lib.perf import Workload
from vrex_lib.perf import experiments as E
from vrex_lib.perf import simulate

WL = Workload.uniform({(m, s): r for m in ("infinigen", "infinigen_p", "rekv", "resv")
                             for s, r in (("frame", 0.3), ("text", 0.05))})


def test_op_intensity_counts_dram_bytes_once():
    # The fetched KV is already in bytes['dram'] (landing write + attention read); PCIe bytes must not be added.
    r = simulate("agx_orin", "flexgen", "frame", 40000, 1, workload=WL)
    assert r.bytes["pcie_fetch"] > 0
    assert r.op_intensity == pytest.approx((r.flops + r.pred_flops) / r.bytes["dram"], rel=1e-12)


def test_llm_scope_throughput_excludes_vision_time_and_flops():
    # dense_layers=0: layer 0's full fetch would otherwise hide behind the vision tower only when it runs.
    r = simulate("vrex8", "resv", "frame", 10000, 4, workload=WL, dense_layers=0)
    no_vis = simulate("vrex8", "resv", "frame", 10000, 4, workload=WL, include_vision=False, dense_layers=0)
    assert r.llm_achieved_tflops == pytest.approx(no_vis.achieved_tflops, rel=1e-6)
    assert r.llm_op_intensity == pytest.approx(no_vis.op_intensity, rel=1e-6)


def test_fig18_fraction_is_of_the_roof_at_the_mean_intensity():
    f = E.fig18(workload=WL).set_index("label")
    oi = f.op_intensity.mean()
    for lab, row in f.iterrows():
        roof = min(row.peak_tflops, oi * row.dram_gbs / 1e3)
        assert row.roof_frac == pytest.approx(100 * row.achieved_tflops / roof, rel=1e-9)
        # A point cannot exceed the roof at its own intensity, and memory-bound points use the bandwidth roof.
        assert row.roof_frac_own <= 100.0 + 1e-9
        assert row.roof_frac > row.peak_frac
    # Shared LPDDR5 roof: the ratio of fractions is the ratio of throughputs (paper: 71.5 / 6.6 = 10.8x).
    assert f.roof_frac["vrex8"] / f.roof_frac["agx_flexgen"] == pytest.approx(
        f.achieved_tflops["vrex8"] / f.achieved_tflops["agx_flexgen"], rel=1e-9)


def _sp(rows):
    return pd.DataFrame(rows, columns=["platform", "batch", "stage", "kv_len", "speedup", "energy_gain"])


def test_headline_ranges_use_only_the_paper_panels():
    sp = _sp([("edge", 1, "frame", 1000, 2.0, 5.0), ("edge", 1, "text", 40000, 15.0, 18.0),
              ("edge", 4, "frame", 1000, 2.1, 3.0), ("edge", 4, "text", 40000, 60.0, 100.0),  # not a Fig. 13 panel
              ("server", 1, "frame", 40000, 19.0, 20.0), ("server", 8, "text", 40000, 150.0, 250.0)])  # not either
    h = E.headline_ranges(sp)
    assert h["speedup_min"]["value"] == 2.0 and h["speedup_max_edge"]["value"] == 15.0
    assert h["speedup_max"] == dict(value=19.0, where="server b1 frame @40K")  # server counts for the 19.7x end
    assert h["energy_gain_min"]["value"] == 3.0 and h["energy_gain_max"]["value"] == 18.0  # edge only
    assert set(map(tuple, E.paper_panels(sp)[["platform", "batch", "stage"]].values)) == {
        ("edge", 1, "frame"), ("edge", 1, "text"), ("edge", 4, "frame"), ("server", 1, "frame")}


def test_infinigen_p_with_resident_keys_fetches_only_values():
    from vrex_lib.perf.methods import get_method
    from vrex_lib.perf.sim import SimParams

    assert get_method("infinigen_p").keys_resident(SimParams())
    assert not get_method("infinigen_p").keys_resident(SimParams(infinigen_p_key_frac=0.5))
    assert not get_method("infinigen").keys_resident(SimParams())
    for stage in ("frame", "text"):
        full = simulate("a100", "infinigen_p", stage, 40000, 1, workload=WL, dense_layers=0)
        part = simulate("a100", "infinigen_p", stage, 40000, 1, workload=WL, infinigen_p_key_frac=0.5,
                        dense_layers=0)
        # Same selection and granule amplification; with every key resident only V (half of K+V) is fetched.
        assert full.notes["moved_fraction"] == part.notes["moved_fraction"]
        assert full.bytes["pcie_fetch"] == pytest.approx(0.5 * part.bytes["pcie_fetch"], rel=1e-12)


def test_fig14_speedup_is_over_the_fastest_agx_method():
    f14 = pd.DataFrame([dict(kv_len=k, label=l, total=t) for k, l, t in (
        (1000, "agx_orin+flexgen", 20.0), (1000, "agx_orin+rekv", 25.0), (1000, "vrex8", 10.0),
        (40000, "agx_orin+flexgen", 900.0), (40000, "agx_orin+rekv", 300.0), (40000, "vrex8", 50.0))])
    s = E.fig14_speedups(f14).set_index("kv_len")
    assert s.vs_best[1000] == 2.0 and s.best_label[1000] == "agx_orin+flexgen"
    assert s.vs_best[40000] == 6.0 and s.best_label[40000] == "agx_orin+rekv" and s.vs_flexgen[40000] == 18.0
