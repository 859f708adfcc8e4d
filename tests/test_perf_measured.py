"""Measured simulator inputs from runtime traces (vrex_lib.perf.measured) and how the simulator applies them."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vrex_lib import perf
from vrex_lib.perf import experiments as E
from vrex_lib.perf.measured import measure_trace_params
from vrex_lib.runtime.trace import RetrievalTrace

RATIOS = {(m, s): 0.3 for m in ("infinigen", "infinigen_p", "rekv", "resv") for s in ("frame", "text")}
L, H = 3, 2


def _trace(cands, sel_frac, reuse_frac, text_steps=2, model="toy"):
    """Frame steps with ``cands`` candidates each, selecting sel_frac of them, reusing reuse_frac of the selection
    (none on the first applied step); then ``text_steps`` text steps selecting 4 and reusing 2. Layer 0 dense."""
    kinds = ["system"] + ["frame"] * len(cands) + ["question"] + ["decode"] * (text_steps - 1)
    n = len(kinds)
    cand = np.array([0] + list(cands) + [cands[-1]] * text_steps, np.int64)
    sel = np.zeros((n, L, H), np.int64)
    reu = np.full((n, L, H), -1, np.int64)
    app = np.zeros((n, L), bool)
    for i, k in enumerate(kinds):
        if cand[i] == 0:
            continue
        app[i, 1:] = True
        fr = k == "frame"
        sel[i, 1:] = round(sel_frac * cand[i]) if fr else 4
        first = (i == 1 or cand[i - 1] == 0) if fr else k == "question"
        if not first:
            reu[i, 1:] = round(reuse_frac * sel[i, 1, 0]) if fr else 2
    stage = ["frame" if k == "frame" else "text" for k in kinds]
    arrays = dict(kind=np.array(kinds, "U8"), stage=np.array(stage, "U8"),
                  n_candidates=cand, selected=sel, reused=reu, applied=app)
    return RetrievalTrace(dict(model=model, head_dim=4, bytes_per_elem=4), arrays)


def _write(root, method, traces):
    for i, t in enumerate(traces):
        t.save(root / method / "traces" / "step" / f"s{i}.npz")


def test_measured_reuse_and_exponent_from_traces(tmp_path):
    # resv: two traces, constant ratio (exponent 1) and reuse 0.75 on frames; rekv: one trace, reuse 0.5
    _write(tmp_path, "resv", [_trace([8, 16, 32, 64], 0.5, 0.75), _trace([8, 16, 32, 64, 128], 0.5, 0.75)])
    _write(tmp_path, "rekv", [_trace([16, 64, 256], 0.25, 0.5)])
    _write(tmp_path / "resv@sweep", "resv", [_trace([8, 16], 1.0, 0.0)])  # variants are not read
    mp = measure_trace_params(tmp_path, "default")
    assert mp.measured and mp.n_traces == {"resv": 2, "rekv": 1}
    # pooled Σ reused / Σ selected; first applied frame step has no previous step
    assert mp.retrieved_reuse[("resv", "frame")] == pytest.approx(0.75)
    assert mp.retrieved_reuse[("resv", "text")] == pytest.approx(0.5)
    assert mp.retrieved_reuse[("rekv", "frame")] == pytest.approx(0.5)
    assert mp.ratio_exponent["resv"] == pytest.approx(1.0, abs=1e-9)
    assert mp.ratio_exponent["rekv"] == pytest.approx(1.0, abs=1e-9)
    assert mp.ratio_ref_len == 256
    assert "profile default" in mp.label and "resv: 2" in mp.label and "toy" in mp.label
    ov = mp.overrides()
    assert ov["retrieved_cache"] == "kvmu" and ov["ratio_ref_len"] == 256
    assert mp.overrides("all")["retrieved_cache"] == "all"
    assert set(mp.table().method) == {"resv", "rekv"}
    # sqrt growth is recovered
    t = _trace([16, 64, 256, 1024], 0.0, 0.0)
    t.arrays["selected"][1:5, 1:] = np.sqrt([16, 64, 256, 1024]).astype(int)[:, None, None]
    _write(tmp_path / "g2", "resv", [t])
    assert measure_trace_params(tmp_path / "g2").ratio_exponent["resv"] == pytest.approx(0.5)


def test_neutral_without_traces_or_with_schema1(tmp_path):
    mp = measure_trace_params(tmp_path / "nothing")
    assert not mp.measured and "neutral" in mp.label and mp.overrides() == {"retrieved_cache": "kvmu"}
    p = _trace([8, 16, 32], 0.5, 0.5).save(tmp_path / "x.npz")
    z = dict(np.load(p))
    del z["a_reused"]
    z["meta_json"] = np.array(json.dumps({**json.loads(str(z["meta_json"])), "schema_version": 1}))
    (tmp_path / "old" / "resv" / "traces" / "t").mkdir(parents=True)
    np.savez(tmp_path / "old" / "resv" / "traces" / "t" / "a.npz", **z)
    old = measure_trace_params(tmp_path / "old")
    assert not old.measured and "schema 1" in old.label and old.n_traces == {"resv": 1}


def test_simulator_applies_reuse_only_where_a_cache_is_modelled():
    kv = 40000
    reuse = {("resv", "frame"): 0.6, ("rekv", "frame"): 0.4}
    base_v = perf.simulate("vrex8", "resv", "frame", kv, ratios=RATIOS)
    v = perf.simulate("vrex8", "resv", "frame", kv, ratios=RATIOS, retrieved_reuse=reuse)
    assert v.bytes["pcie_fetch"] == pytest.approx(0.4 * base_v.bytes["pcie_fetch"])
    assert v.latency_ms < base_v.latency_ms and v.notes["retrieved_reuse"] == 0.6
    # the retrieved-KV region holds every layer's selected offloaded KV
    llm = perf.LLAMA3_8B
    assert v.mem_bytes - base_v.mem_bytes == pytest.approx(
        llm.n_layers * 0.3 * (kv - 4096) * llm.kv_bytes_per_token_layer
        + 2 * (v.bytes["pcie_fetch"] - base_v.bytes["pcie_fetch"]) / llm.n_layers)
    assert v.notes["retrieved_kept_frac"] == 1.0
    # batch 16: the region does not all fit in V-Rex8's DRAM -> partial reuse, never an OOM caused by the cache
    b0 = perf.simulate("vrex8", "resv", "frame", kv, 16, ratios=RATIOS)
    b16 = perf.simulate("vrex8", "resv", "frame", kv, 16, ratios=RATIOS, retrieved_reuse=reuse)
    assert 0 < b16.notes["retrieved_kept_frac"] < 1 and 0 < b16.notes["retrieved_reuse"] < 0.6
    assert b16.mem_bytes <= b16.mem_capacity and not b0.oom
    assert b16.bytes["pcie_fetch"] == pytest.approx((1 - b16.notes["retrieved_reuse"]) * b0.bytes["pcie_fetch"])
    # GPU baselines: no cache by default; with 'all', their own reuse; KVPU-only (token layout): KVMU mode none
    g0 = perf.simulate("agx_orin", "rekv", "frame", kv, ratios=RATIOS, retrieved_reuse=reuse)
    assert g0.notes["retrieved_reuse"] == 0.0
    g1 = perf.simulate("agx_orin", "rekv", "frame", kv, ratios=RATIOS, retrieved_reuse=reuse, retrieved_cache="all")
    assert g1.bytes["pcie_fetch"] == pytest.approx(0.6 * g0.bytes["pcie_fetch"])
    fx = perf.simulate("agx_orin", "flexgen", "frame", kv, ratios=RATIOS, retrieved_reuse=0.9, retrieved_cache="all")
    assert fx.notes["retrieved_reuse"] == 0.0, "FlexGen selects nothing: nothing to cache"
    kvpu = perf.simulate("vrex8", "resv_kvpu", "frame", kv, ratios=RATIOS, retrieved_reuse=reuse)
    assert kvpu.notes["retrieved_reuse"] == 0.0
    assert perf.simulate("vrex8", "resv", "text", kv, ratios=RATIOS,
                         retrieved_reuse=reuse).notes["retrieved_reuse"] == 0.0  # missing key -> 0
    assert perf.simulate("vrex8", "resv", "frame", kv, ratios=RATIOS, retrieved_reuse=reuse,
                         retrieved_cache="none").notes["retrieved_reuse"] == 0.0
    with pytest.raises(ValueError, match="retrieved_cache"):
        perf.simulate("vrex8", "resv", "frame", kv, ratios=RATIOS, retrieved_cache="gpu")
    with pytest.raises(ValueError, match="retrieved_reuse"):
        perf.simulate("vrex8", "resv", "frame", kv, ratios=RATIOS, retrieved_reuse=1.5)


def test_per_method_growth_exponent():
    ex = {"resv": 0.5}
    a = perf.simulate("vrex8", "resv", "frame", 40000, ratios=RATIOS, ratio_exponent=ex, ratio_ref_len=10000)
    assert a.ratio == pytest.approx(0.3 * 0.5) and a.notes["ratio_exponent"] == 0.5
    b = perf.simulate("agx_orin", "rekv", "frame", 40000, ratios=RATIOS, ratio_exponent=ex, ratio_ref_len=10000)
    assert b.ratio == pytest.approx(0.3), "methods without a fit keep a constant ratio"
    c = perf.simulate("vrex8", "resv", "frame", 40000, ratios=RATIOS, ratio_exponent=3.0, ratio_ref_len=10000)
    assert c.ratio == 1.0, "growth never selects more than every candidate"


def test_retrieved_cache_comparison_both_ways():
    df = E.retrieved_cache_comparison(kv_sizes=(40000,), ratios=RATIOS,
                                      retrieved_reuse={("resv", "frame"): 0.6, ("infinigen_p", "frame"): 0.6},
                                      retrieved_cache="ignored")
    assert set(df.cache) == {"kvmu", "all"} and len(df) == 10
    k, a = (df[df.cache == c].set_index("method") for c in ("kvmu", "all"))
    assert k.retrieved_reuse["infinigen_p"] == 0.0 and a.retrieved_reuse["infinigen_p"] == 0.6
    assert a.latency_ms["infinigen_p"] < k.latency_ms["infinigen_p"]
    assert a.latency_ms["flexgen"] == k.latency_ms["flexgen"] and k.latency_ms["resv"] == a.latency_ms["resv"]
    assert k.vrex_speedup["resv"] == 1.0
