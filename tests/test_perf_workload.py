"""The Workload input, simulate()'s purity, hand-computed model pieces, the paper-access rule."""
from __future__ import annotations

import ast
import dataclasses
import json
import math
import shutil
from pathlib import Path

import pytest

from vrex_lib import paper
from vrex_lib.estimate.core import Activity as CoreActivity
from vrex_lib.estimate.core import CorePowerModel, core_breakdown
from vrex_lib.perf import Curve, Workload, simulate
from vrex_lib.perf.sim import _op_time_s
from vrex_lib.perf.systems import get_system
from vrex_lib.perf.model_ops import Op

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "workload_tiny.json"


# ---- Workload --------------------------------------------------------------------------------------------------

def test_paper_workload_is_labelled_and_reads_table2():
    w = Workload.paper()
    assert w.selected("resv", "frame", 40000) == (pytest.approx(0.327), None)  # constant: never extrapolated
    assert w.selected("resv", "frame", 40000, "device") == (pytest.approx(0.327), None)  # one ratio, both tiers
    assert w.provenance["selected_frac_device"].kind == "paper-stated" and "Table II" in w.source()
    assert "both tiers" in w.provenance["selected_frac_offloaded"].detail
    assert w.dense_layers == 1 and "Fig. 6" in w.provenance["dense_layers"].source
    assert (w.frames, w.question_tokens, w.answer_tokens) == (26, 25, 39)
    assert w.tokens_per_cluster.value == (32.0,) and w.wics_exit_frac.value == (0.16,)


def test_from_measurement_reads_contract_a_and_labels_extrapolation():
    w = Workload.from_measurement(FIXTURE)
    assert w.provenance["selected_frac_device"].kind == "measured" and "profile tiny" in w.source()
    assert w.tokens_per_frame == 12 and w.dense_layers == 1
    # Offloaded tier: selected_frac_offloaded, measured only at 10K (0.10) -> a constant.
    assert w.selected("resv", "frame", 10000) == (pytest.approx(0.10), None)
    # On-device tier, by hand: 1K nothing offloaded -> selected_frac 0.40; 10K: (0.15 x 9900 - 0.10 x 5900) /
    # (9900 - 5900) = 895 / 4000 = 0.22375.
    assert w.selected("resv", "frame", 1000, "device") == (pytest.approx(0.40), None)
    assert w.selected("resv", "frame", 10000, "device") == (pytest.approx(0.22375), None)
    # Inside the range: linear in log(kv): halfway in log between 1K and 10K.
    v, pol = w.selected("resv", "frame", math.sqrt(1000 * 10000), "device")
    assert pol is None and v == pytest.approx((0.40 + 0.22375) / 2)
    # Outside: 'hold' keeps the end value and says so.
    assert w.selected("resv", "frame", 40000, "device") == (pytest.approx(0.22375), "hold")
    assert w.reuse_at("resv", "frame", 40000) == (pytest.approx(0.60), None)  # one length: a constant
    assert w.tokens_per_cluster.at(5000)[0] == pytest.approx(50 + 10 * math.log(5) / math.log(10))
    # A method the file lacks fails with the fix; flexgen was never offloaded: its offloaded share is absent
    # and the on-device one is not substituted.
    with pytest.raises(KeyError, match="measure that method"):
        w.selected("rekv", "frame", 1000)
    with pytest.raises(KeyError, match="not substituted"):
        w.selected("flexgen", "frame", 1000)
    assert "no offloaded-tier share for flexgen/frame" in w.provenance["selected_frac_offloaded"].detail
    # The scenario the file does not carry keeps the paper's, labelled.
    frames = w.provenance["frames"]
    assert frames.kind == "paper-stated" and "not in workload_tiny.json" in frames.detail


def test_loglog_fit_extrapolation():
    w = Workload.from_measurement(FIXTURE, extrapolation="loglog-fit")
    v, pol = w.selected("resv", "frame", 100000, "device")
    # log-log line through (1e3, 0.4) and (1e4, 0.22375): one decade on, 0.22375^2 / 0.4.
    assert pol == "loglog-fit" and v == pytest.approx(0.22375 ** 2 / 0.4)
    r = simulate("vrex8", "resv", "frame", 100000, workload=w)
    assert "selected_frac_device resv/frame 'loglog-fit'" in r.workload_source
    assert r.row()["workload_source"] == r.workload_source
    inside = simulate("vrex8", "resv", "frame", 5000, workload=w)
    assert "extrapolated" not in inside.workload_source
    with pytest.raises(ValueError, match="extrapolation"):
        Workload.from_measurement(FIXTURE, extrapolation="linear")


def test_from_measurement_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="vrex_lib.workload measure"):
        Workload.from_measurement(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "other/1"}))
    with pytest.raises(ValueError, match="bad.json.*schema"):
        Workload.from_measurement(bad)
    with pytest.raises(TypeError, match="workload"):
        simulate("vrex8", "resv", "frame", 1000, workload=3)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Workload.uniform({("resv", "frame"): 1.5})
    with pytest.raises(ValueError, match="loglog-fit"):
        Curve((1000.0,), (0.1,), "loglog-fit")


def test_simulate_accepts_workload_paper_string_and_path():
    a = simulate("vrex8", "resv", "frame", 20000, workload="paper")
    b = simulate("vrex8", "resv", "frame", 20000, workload=Workload.paper())
    assert json.dumps(a.row()) == json.dumps(b.row())
    c = simulate("vrex8", "resv", "frame", 20000, workload=str(FIXTURE))
    assert "measured" in c.workload_source and c.ratio == pytest.approx(0.10)  # the 10K offloaded share
    with pytest.raises(TypeError):
        simulate("vrex8", "resv", "frame", 20000)  # workload is required


# ---- purity ------------------------------------------------------------------------------------------------------

def test_simulate_is_independent_of_the_results_directory(tmp_path, monkeypatch):
    def run():  # JSON text: NaN fields (text-stage FPS) compare equal
        return json.dumps([simulate(s, m, st, kv, 1, workload="paper").row()
                           for s, m in (("vrex8", "resv"), ("agx_orin", "rekv")) for st in ("frame", "text")
                           for kv in (1000, 40000)], sort_keys=True)

    empty = tmp_path / "empty"
    empty.mkdir()
    full = tmp_path / "full"
    (full / "data").mkdir(parents=True)
    (full / "data" / "retrieval_ratios.csv").write_text(
        "method,task,stage,retrieval_ratio,profile\nresv,step,frame,0.01,default\nrekv,step,frame,0.9,default\n")
    shutil.copy(FIXTURE, full / "data" / "workload_default.json")
    out = []
    for d in (empty, tmp_path / "none", full):
        monkeypatch.setenv("VREX_RESULTS_DIR", str(d))
        out.append(run())
    assert out[0] == out[1] == out[2]


# ---- hand-computed model pieces ------------------------------------------------------------------------------------

def test_one_op_roofline_time():
    from vrex_lib.perf import dram

    base = get_system("agx_orin")
    sys = dataclasses.replace(base, peak_flops=1e12, compute_eff=1.0, dram_bw=1e11, mem_side_eff=0.5, host_op_s=1e-6)
    read_bps = 1e11 * dram.stream_efficiency(sys.dram_timing).total * 0.5
    # 2 GFLOP at 1 TFLOP/s = 2 ms; 200 MB of long reads at 50 GB/s x 0.928 = 4.3 ms -> memory-bound, + the fixed
    # start-up of its 3 kernels (each streaming DRAM, an op outside the stack table).
    op = Op("x", "gemm", 2e9, weight_bytes=1.5e8, act_bytes=0.5e8, kernels=3)
    assert _op_time_s(op, sys) == pytest.approx(2e8 / read_bps + 3 * sys.kernel_dram_s, rel=1e-12)
    assert _op_time_s(Op("y", "gemm", 8e9, weight_bytes=1e6, kernels=0), sys) == pytest.approx(8e-3, rel=1e-12)
    # Host-bound: 5000 framework calls of 1 us outlast 1 MB of traffic.
    assert _op_time_s(Op("z", "vector", 0.0, act_bytes=1e6, host_ops=5000), sys) == pytest.approx(5e-3, rel=1e-12)


def test_one_pcie_transfer():
    r = simulate("agx_orin", "flexgen", "frame", 10000, 1, workload="paper")
    # FlexGen fetches every offloaded token of a layer: (10000 - 4096) tokens x 2 (K,V) x 8 heads x 128 x 2 B,
    # read sequentially in 128-KiB NVMe commands of 64 + 16 + 3 x 4 B + 5 TLP overheads of 24 B = 212 B each.
    layer_bytes = (10000 - 4096) * 2 * 8 * 128 * 2
    link_bps = 4e9 * 0.985 * 256 / 280  # Table I 4 GB/s x derived PCIe Gen3 efficiency
    fetch = [x for x in r.timeline if x["phase"] == "kv_fetch" and x["layer"] == 5][0]
    assert fetch["pcie_bytes"] == layer_bytes
    assert (fetch["end_us"] - fetch["start_us"]) * 1e-6 == pytest.approx(
        (layer_bytes + layer_bytes / 131072 * 212) / link_bps, rel=1e-12)


def test_one_layer_overlap():
    # PCIe-bound (FlexGen at 40K on the edge): consecutive attentions start one fetch time apart.
    r = simulate("agx_orin", "flexgen", "frame", 40000, 1, workload="paper")
    fetch_s = r.notes["fetch_ms_per_layer"] * 1e-3
    attn = {x["layer"]: x["start_us"] * 1e-6 for x in r.timeline if x["phase"] == "attn"}
    assert attn[11] - attn[10] == pytest.approx(fetch_s, rel=1e-9)
    # Compute-bound (nothing offloaded at 1K): the layer period is the sum of its ops, no stall.
    r1 = simulate("agx_orin", "flexgen", "frame", 1000, 1, workload="paper")
    main = [x for x in r1.timeline if x["layer"] == 10 and x["engine"] == "main"]
    busy = sum(x["end_us"] - x["start_us"] for x in main)
    a1 = {x["layer"]: x["start_us"] for x in r1.timeline if x["phase"] == "attn"}
    assert a1[11] - a1[10] == pytest.approx(busy, rel=1e-9)
    assert r1.breakdown_ms["retrieval_exposed"] == 0


def test_core_power_at_zero_and_full_activity():
    m = CorePowerModel.of()
    df = core_breakdown()
    f = 800e6
    clock_w = sum(r.count * r.energy_pJ_per_action * f * 1e-12 for r in df.itertuples()
                  if r.component.endswith("(bits)"))  # every register row counts bits
    leak_w = df.leakage_mW.sum() * 1e-3
    assert m.clock_w == pytest.approx(clock_w, rel=1e-12) and m.leakage_w == pytest.approx(leak_w, rel=1e-12)
    assert m.power_w() == pytest.approx(leak_w + clock_w, rel=1e-12)  # 0 % activity: leakage + clock
    assert m.peak_w == pytest.approx(df.power_mW.sum() * 1e-3, rel=1e-12)  # 100 %: Table III's full activity
    idle = core_breakdown(activity=CoreActivity(dpe=0, vpe=0, hcu=0, wtu=0, kvmu=0, sram_read_bits=0,
                                                sram_write_bits=0))
    assert m.power_w() == pytest.approx(idle.power_mW.sum() * 1e-3, rel=1e-12)
    assert m.clock_w > 0 and m.leakage_w > 0


# ---- paper access rule ------------------------------------------------------------------------------------------

def test_paper_spec_returns_inputs_and_refuses_results():
    assert paper.spec("table1.dram_bw_gbs.edge") == 204.8 and paper.spec("system.pcie_w_per_lane") == 3.0
    with pytest.raises(ValueError, match="result"):
        paper.spec("table1.power_w.vrex8")
    with pytest.raises(ValueError, match="derived"):
        paper.spec("core.peak_tflops")


def test_model_code_reads_paper_results_only_in_workload_paper_and_comparison_code():
    offenders = []
    for pkg in ("perf", "estimate"):
        for f in sorted((ROOT / "vrex_lib" / pkg).rglob("*.py")):
            tree = ast.parse(f.read_text())
            parents = {}
            for node in ast.walk(tree):
                for ch in ast.iter_child_nodes(node):
                    parents[ch] = node
            for node in ast.walk(tree):
                if (isinstance(node, ast.Attribute) and node.attr in ("value", "get", "select")
                        and isinstance(node.value, ast.Name) and node.value.id == "paper"):
                    fn, p = None, parents.get(node)
                    while p is not None:
                        if isinstance(p, ast.FunctionDef):
                            fn = p.name
                            break
                        p = parents.get(p)
                    if not (f.name == "workload.py" and fn == "paper"):
                        offenders.append(f"{pkg}/{f.name}:{node.lineno} paper.{node.attr} in {fn}")
    assert not offenders, offenders


# ---- comparison code -----------------------------------------------------------------------------------------------

def test_paired_rows_mark_the_measured_column_not_run_without_a_file(tmp_path):
    from vrex_lib.claims import performance as CMP

    w, label = CMP.workload_for_claims(tmp_path / "workload_default.json")
    assert w is None and label.startswith("NOT RUN") and "vrex_lib.workload measure" in label
    w, label = CMP.workload_for_claims(FIXTURE)  # the tiny fixture lacks the GPU baselines' fractions
    assert w is None and "rekv/frame" in label
    claims = {"fig13.edge.b1.frame.vrex8_ms.1k": (100.0, "")}
    rows = CMP.paired_rows(claims, None, paper_label="paper", measured_label=label)
    assert [r.claim for r in rows] == ["fig13.edge.b1.frame.vrex8_ms.1k",
                                       "fig13.edge.b1.frame.vrex8_ms.1k" + CMP.MEASURED_SUFFIX]
    assert rows[0].verdict() == "PASS" and rows[1].verdict() == "NOT RUN" and "rekv/frame" in rows[1].note
    f = CMP.paired_frame(rows)
    assert f.loc[0, "paper_wl_verdict"] == "PASS" and f.loc[0, "measured_wl_verdict"] == "NOT RUN"


def test_implied_rows_by_hand():
    from vrex_lib.claims import performance as CMP
    from vrex_lib.perf.model_ops import LLAMA3_8B, SIGLIP_L384

    imp = CMP.implied_rows().set_index("kv_len")
    # 40K: 254 ms printed; the 4 GB/s link moves 1.016 GB, the offloaded KV is (40000 - 4096) x 131072 B.
    assert imp.loc[40000, "max_sel_frac_pcie"] == pytest.approx(4e9 * 0.254 / ((40000 - 4096) * 131072), rel=1e-9)
    assert imp.loc[40000, "pcie_bound_violated"]  # Table II's 32.7 % cannot cross in 254 ms without reuse
    need = (LLAMA3_8B.weight_bytes + SIGLIP_L384.weight_bytes + 1000 * 131072) / 0.121
    assert imp.loc[1000, "dram_util"] == pytest.approx(need / 204.8e9, rel=1e-9)
    assert imp.loc[40000, "implied_flexgen_ms"] == pytest.approx(254 * 7.3)


def test_fig4_claims_from_frames():
    import pandas as pd

    from vrex_lib.claims import performance as CMP

    f4a = pd.DataFrame(dict(minutes=[1, 5], params_gb=[17.0, 17.0], kv_gb=[3.0, 15.0]))
    f4b = pd.DataFrame(dict(kv_len=[80000], prefill_share=[80.0], retrieval_share_of_prefill=[70.0],
                            workload_source=["paper"]))
    f4c = dict(ops_retrieval_pct=20.0, lat_prediction_pct=40.0, lat_fetch_pct=30.0, lat_llm_pct=30.0)
    c = CMP.fig4_claims(f4a, f4b, f4c)
    assert c["fig4a.minutes_to_32gb"][0] == pytest.approx((32 - 17) / 3.0)
    assert c["fig4c.lat_retrieval_text_pct"][0] == 70.0 and c["fig4b.prefill_share_80k"] == (80.0, "paper")
    with pytest.raises(ValueError, match="80000"):
        CMP.fig4_claims(f4a, f4b.assign(kv_len=[40000]), f4c)


def test_workload_is_immutable():
    w = Workload.paper()
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.frames = 3
    with pytest.raises(TypeError):
        w.selected_frac[("resv", "frame")] = Curve.constant(0.1)
    w2 = w.replace(frames=3)
    assert w.frames == 26 and w2.frames == 3 and w2.provenance["frames"].kind == "user"


def test_rekv_frame_variant_supplies_the_simulators_rekv(tmp_path):
    d = json.loads(FIXTURE.read_text())
    base = dict(d["checkpoints"][0], tokens_per_cluster=None, wics_exit_frac=None, selected_frac_offloaded=None)
    d["checkpoints"] += [dict(base, method="rekv", stage="frame", selected_frac=1.0),
                         dict(base, method="rekv@frame", stage="frame", selected_frac=0.25)]
    p = tmp_path / "w.json"
    p.write_text(json.dumps(d))
    w = Workload.from_measurement(p)
    assert w.selected("rekv", "frame", 1000, "device")[0] == pytest.approx(0.25)  # every-step mode, not per question
    assert "rekv from rekv@frame" in w.provenance["selected_frac_device"].label()
    d["checkpoints"].pop()                                                 # without the variant: plain rekv
    p.write_text(json.dumps(d))
    assert Workload.from_measurement(p).selected("rekv", "frame", 1000, "device")[0] == pytest.approx(1.0)
