"""Physics checks of the performance simulator (latency monotonicity, overlap, batching, OOM, energy)."""
from __future__ import annotations

import dataclasses
import math
from functools import partial

import pandas as pd
import pytest

from vrex_lib import perf
from vrex_lib.perf import Workload, moved_fraction
from vrex_lib.perf.systems import get_system

PAPER_WL = Workload.paper()
simulate = partial(perf.simulate, workload=PAPER_WL)

SYSTEM_METHODS = [("agx_orin", m) for m in perf.GPU_METHODS + ("resv",)] + [("vrex8", "resv"), ("vrex8", "resv_kvpu"),
                                                                         ("a100", "flexgen"), ("vrex48", "resv")]


def _phase(r, layer, phase):
    return [x for x in r.timeline if x["layer"] == layer and x["phase"] == phase]


def test_bandwidth_bound_phase_takes_bytes_over_bandwidth():
    from vrex_lib.perf import dram

    sys = get_system("agx_orin")
    r = simulate(sys, "flexgen", "frame", 20000, 1)
    (qkv,) = _phase(r, 3, "qkv")
    llm = perf.LLAMA3_8B
    # QKV: weights + activations as one long read stream, the new K,V (10 tokens x 256 B per head) as writes.
    t = sys.dram_timing
    read_bps = sys.dram_bw * dram.stream_efficiency(t).total * sys.mem_side_eff
    write_bps = sys.dram_bw * dram.stream_efficiency(t, 10 * 256, write=True).total * sys.mem_side_eff
    new_kv = 10 * llm.kv_bytes_per_token_layer
    # + the fixed start-up of its one DRAM-streaming kernel (the eager QKV projection), measured on the A100
    assert (qkv["end_us"] - qkv["start_us"]) * 1e-6 == pytest.approx(
        (qkv["dram_bytes"] - new_kv) / read_bps + new_kv / write_bps + sys.kernel_dram_s, rel=1e-9)
    fetch = _phase(r, 3, "kv_fetch")[0]
    assert (fetch["end_us"] - fetch["start_us"]) * 1e-6 == pytest.approx(
        fetch["pcie_bytes"] * (1 + 212 / 131072) / sys.pcie, rel=1e-9)  # + one NVMe command per 128 KiB
    # FlexGen moves every offloaded token of every layer once.
    assert r.bytes["pcie_fetch"] == pytest.approx((20000 - 4096) * llm.kv_bytes_per_token, rel=1e-9)


@pytest.mark.parametrize("system,method", SYSTEM_METHODS)
@pytest.mark.parametrize("stage", ["frame", "text"])
def test_prefetch_never_faster_than_compute(system, method, stage):
    r = simulate(system, method, stage, 40000, 1)
    serial = simulate(system, method, stage, 40000, 1, prefetch=False)
    for layer in range(perf.LLAMA3_8B.n_layers):
        main = [x for x in r.timeline if x["layer"] == layer and x["engine"] == "main" and x["phase"] != "stall"]
        busy = sum(x["end_us"] - x["start_us"] for x in main)
        span = max(x["end_us"] for x in main) - min(x["start_us"] for x in main)
        assert span >= busy - 1e-6
    compute = sum(v for k, v in r.breakdown_ms.items() if k != "retrieval_exposed")
    pcie_ms = sum(x["end_us"] - x["start_us"] for x in r.timeline if x["engine"] == "pcie") / 1e3
    assert r.latency_ms >= compute - 1e-9
    assert r.latency_ms >= pcie_ms - 1e-9
    assert r.latency_ms <= serial.latency_ms + 1e-9
    assert sum(r.breakdown_ms.values()) == pytest.approx(r.latency_ms, rel=1e-9)


@pytest.mark.parametrize("system,method", SYSTEM_METHODS)
@pytest.mark.parametrize("stage", ["frame", "text"])
def test_doubling_kv_never_lowers_latency(system, method, stage):
    lat = [simulate(system, method, stage, kv, 1).latency_ms for kv in (500, 1000, 2000, 4000, 8000, 16000, 32000,
                                                                         64000)]
    assert all(b >= a - 1e-9 for a, b in zip(lat, lat[1:])), lat


@pytest.mark.parametrize("system,method", [("agx_orin", "flexgen"), ("vrex8", "resv"), ("a100", "rekv")])
def test_batch_scaling_sane(system, method):
    r1 = simulate(system, method, "frame", 10000, 1)
    r4 = simulate(system, method, "frame", 10000, 4)
    # More streams never finish sooner, but weights are read once per step so 4 streams cost < 4x.
    assert r1.latency_ms <= r4.latency_ms < 4 * r1.latency_ms
    assert r4.flops == pytest.approx(4 * r1.flops, rel=1e-6)
    assert r4.mem_bytes > r1.mem_bytes


def test_pcie_bandwidth_moves_results():
    base = simulate("vrex8", "resv", "frame", 40000, 1)
    fast = simulate("vrex8", "resv", "frame", 40000, 1, system_pcie_bw=16e9)
    assert fast.latency_ms < 0.8 * base.latency_ms
    fg = simulate("agx_orin", "flexgen", "frame", 40000, 1)
    fg2 = simulate(dataclasses.replace(get_system("agx_orin"), pcie_bw=8e9), "flexgen", "frame", 40000, 1)
    assert fg2.latency_ms < 0.7 * fg.latency_ms
    # Nothing offloaded at 1K: PCIe does not matter there.
    assert simulate("vrex8", "resv", "frame", 1000, 1, system_pcie_bw=16e9).latency_ms == pytest.approx(
        simulate("vrex8", "resv", "frame", 1000, 1).latency_ms)


def test_vrex_peak_is_derived_from_core_config():
    from vrex_lib.config import VRexCoreConfig

    assert get_system("vrex8").peak_flops == pytest.approx(8 * VRexCoreConfig().peak_flops)
    assert get_system("vrex48").peak_flops / 1e12 == pytest.approx(319.488, rel=1e-6)
    from vrex_lib.perf.systems import vrex

    big = vrex(8, "edge", VRexCoreConfig(freq_hz=1.6e9))
    assert simulate(big, "resv", "frame", 1000, 16).latency_ms < simulate("vrex8", "resv", "frame", 1000, 16).latency_ms


def test_moved_fraction_limits():
    assert moved_fraction(1.0, 256, 256, 4096) == 1.0
    assert moved_fraction(0.0, 256, 256, 4096) == 0.0
    assert moved_fraction(0.3, 256, 256, 64) == pytest.approx(0.3)  # granule below a chunk: no amplification
    assert moved_fraction(0.1, 256, 256, 4096) == pytest.approx(1 - 0.9 ** 16)
    # Longer contiguous runs waste less of each page.
    runs = [moved_fraction(0.1, b, 256, 4096) for b in (8192, 2560, 256)]
    assert runs[0] < runs[1] < runs[2]


def test_oom_fig15_setup():
    def oom(system, method, kv):
        return simulate(system, method, "frame", kv, 16, offload=False if method == "flexgen" else None).oom

    assert not oom("agx_orin", "flexgen", 5000) and oom("agx_orin", "flexgen", 10000)
    assert not oom("oaken", "oaken", 20000) and oom("oaken", "oaken", 40000)
    assert not oom("vrex8", "resv", 40000)


def test_selected_fraction_comes_from_the_workload():
    dev, off = dict(PAPER_WL.selected_frac_device), dict(PAPER_WL.selected_frac_offloaded)

    def wl(f):
        return PAPER_WL.replace(selected_frac_device={**dev, ("resv", "frame"): f},
                                selected_frac_offloaded={**off, ("resv", "frame"): f})

    lo = simulate("vrex8", "resv", "frame", 40000, workload=wl(0.1))
    hi = simulate("vrex8", "resv", "frame", 40000, workload=wl(0.5))
    assert lo.latency_ms < hi.latency_ms and lo.ratio == 0.1 and "user" in lo.workload_source
    # The two tiers are separate inputs: only the offloaded share moves the link.
    only_dev = simulate("vrex8", "resv", "frame", 40000,
                        workload=PAPER_WL.replace(selected_frac_device={**dev, ("resv", "frame"): 0.9}))
    base = simulate("vrex8", "resv", "frame", 40000)
    assert only_dev.bytes["pcie_fetch"] == base.bytes["pcie_fetch"] and only_dev.bytes["dram"] > base.bytes["dram"]
    with pytest.raises(ValueError, match="unknown method"):
        simulate("vrex8", "nope", "frame", 1000)
    with pytest.raises(ValueError, match="stage"):
        simulate("vrex8", "resv", "prefill", 1000)
    with pytest.raises(TypeError, match="Workload"):
        simulate("vrex8", "resv", "frame", 1000, retrieved_reuse=0.5)  # a workload field, not a SimParams one
    with pytest.raises(KeyError, match="rekv/frame"):
        simulate("agx_orin", "rekv", "frame", 1000, workload=Workload.uniform({("resv", "frame"): 0.3}))
    for bad in (float("nan"), float("inf"), 1.5, "40000"):
        with pytest.raises(ValueError, match="kv_len"):
            simulate("vrex8", "resv", "frame", bad)


def test_energy_accounting():
    r = simulate("agx_orin", "flexgen", "frame", 20000, 1)
    # the Orin has no cited idle power (D427): working and stalled, its board draws Table I's 40 W
    board_j = r.energy_breakdown_J["gpu_board"] + r.energy_breakdown_J["gpu_board_stall"]
    assert board_j == pytest.approx(40 * r.latency_ms * 1e-3)
    assert r.energy_J == pytest.approx(sum(r.energy_breakdown_J.values()))
    v = simulate("vrex8", "resv", "frame", 20000, 1)
    assert v.energy_breakdown_J["core"] > 0 and v.energy_breakdown_J["dram"] > 0
    assert v.gops_per_w > r.gops_per_w
    assert math.isfinite(v.achieved_tflops) and 0 < v.achieved_tflops < get_system("vrex8").peak_flops / 1e12


def test_e2e_and_footprint():
    e = perf.e2e_coin("agx_orin", "flexgen", 10000, workload="paper")
    assert e["total"] == pytest.approx(e["prefill"] + e["generation"] + e["vision_mlp"])
    assert e["prefill_retrieval"] <= e["prefill"]
    f = perf.memory_footprint_gb(10)
    assert f["kv_gb"] == pytest.approx(4 * 10 * 60 * 10 * 10 * 131072 / 1e9)


def test_kvmu_layout_only_on_vrex():
    gpu = simulate("agx_orin", "resv", "frame", 40000, 1)
    assert gpu.notes["layout"] == "token"
    kvmu = simulate("vrex8", "resv", "frame", 40000, 1, dense_layers=0)
    kvpu = simulate("vrex8", "resv_kvpu", "frame", 40000, 1, dense_layers=0)
    assert kvmu.bytes["pcie_fetch"] < kvpu.bytes["pcie_fetch"]
    assert kvmu.latency_ms < kvpu.latency_ms
    # Reusing clusters already in the Retrieved-KV region cuts the (selecting layers') fetch proportionally.
    half = simulate("vrex8", "resv", "frame", 40000, 1, dense_layers=0,
                    workload=PAPER_WL.replace(reuse={("resv", "frame"): 0.5}))
    assert half.bytes["pcie_fetch"] == pytest.approx(0.5 * kvmu.bytes["pcie_fetch"])


def test_coin_case_from_notebook01_stats(tmp_path):
    csv = tmp_path / "coin_stats.csv"
    pd.DataFrame(dict(task=["step", "all"], n_samples=[2, 10], avg_frames_2fps=[20.0, 30.4],
                      avg_question_tokens=[20.0, 18.2], avg_answer_tokens=[5.0, 7.6],
                      tokenizer=["tok", "tok"])).to_csv(csv, index=False)
    c = perf.COINCase.from_stats(csv)
    assert (c.frames, c.question_tokens, c.answer_tokens) == (30, 18, 8) and "notebook 01" in c.source
    with pytest.raises(FileNotFoundError, match="notebook"):
        perf.COINCase.from_stats(tmp_path / "nope.csv")
    # The question prefill is one step of question_tokens new tokens.
    q = simulate("vrex8", "resv", "frame", 5000, 1, n_new=25, include_vision=False)
    f = simulate("vrex8", "resv", "frame", 5000, 1, include_vision=False)
    assert q.flops > 2 * f.flops and q.latency_ms >= f.latency_ms
