"""Hardware model v4: the memory-technology records, the resource ledger, the GPU baselines beside their published
measurements, the core port and the dense layers' KV (docs/PERF_MODEL.md, docs/DECISIONS.md D240-D259)."""
from __future__ import annotations

import dataclasses
import math

import pytest

from vrex_lib import memtech
from vrex_lib.estimate import constants as EC
from vrex_lib.perf import constants as PC
from vrex_lib.perf import Workload, simulate
from vrex_lib.perf.model_ops import STACK_COUNTS
from vrex_lib.perf.sim import RESOURCES
from vrex_lib.perf.systems import agx_orin, get_system
from vrex_lib.perf.validation import validation_frame

POINTS = [("vrex8", "resv", "frame", 40000), ("vrex8", "resv", "text", 1000), ("agx_orin", "flexgen", "frame", 40000),
          ("a100", "flexgen", "frame", 40000), ("vrex48", "resv", "frame", 20000), ("agx_orin", "rekv", "text", 20000)]


# ---- memory-technology records ----------------------------------------------------------------------------

def test_every_table_row_of_a_technology_is_its_records_value():
    for tech in (memtech.LPDDR5, memtech.HBM2E):
        for f in memtech.JedecTiming.ORG + memtech.JedecTiming.TIMES:
            assert PC.const(f"{tech.name}.{f}") == getattr(tech.timing, f)
        assert PC.const(f"{tech.name}.bus_bits") == tech.bus_bits
        assert EC.rows(f"dram_{tech.name}", "transfer")[0].energy_pJ == tech.device_pj_per_bit
        assert EC.rows(f"dram_phy_{tech.name}", "transfer")[0].energy_pJ == tech.phy_pj_per_bit
        assert EC.DRAM_DEVICES[tech.name] is tech.idd
    assert PC.const("ssd.read_iops") == memtech.NVME_SSD.read_iops
    # a record says why it lacks a part instead of skipping it silently
    assert memtech.HBM2E.cacti_io is None and "HBM" in memtech.HBM2E.cacti_io_none
    assert "hbm2e" not in EC.DRAM_INTERFACES
    with pytest.raises(ValueError, match="either"):
        dataclasses.replace(memtech.HBM2E, cacti_io_none="")


def test_a_system_holds_its_records_and_a_changed_record_moves_the_result():
    v8 = get_system("vrex8")
    assert v8.memory is memtech.LPDDR5 and v8.offload_store is memtech.NVME_SSD
    assert get_system("a100").offload_store is memtech.DDR4
    slow = dataclasses.replace(memtech.LPDDR5, timing=dataclasses.replace(memtech.LPDDR5.timing, tREFI_s=1e-6))
    base = simulate(v8, "resv", "frame", 1000, workload="paper")
    moved = simulate(v8.replace(memory=slow), "resv", "frame", 1000, workload="paper")
    assert moved.latency_ms > base.latency_ms  # more refresh: less bandwidth, the one record moves the simulator
    hot = dataclasses.replace(memtech.LPDDR5, device_pj_per_bit=2 * memtech.LPDDR5.device_pj_per_bit)
    assert (simulate(v8.replace(memory=hot), "resv", "frame", 1000, workload="paper").energy_breakdown_J["dram"]
            == pytest.approx(2 * base.energy_breakdown_J["dram"]))


# ---- the resource ledger ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("system,method,stage,kv", POINTS)
def test_ledger_has_no_energy_without_time_and_no_time_without_a_resource(system, method, stage, kv):
    r = simulate(system, method, stage, kv, workload="paper")
    assert sum(x["energy_j"] for x in r.ledger) == pytest.approx(r.energy_J, rel=1e-12)
    for x in r.ledger:
        assert x["resource"] in RESOURCES, x
        assert x["time_s"] >= 0 and x["energy_j"] >= 0 and x["bytes"] >= 0
        assert x["energy_j"] == 0 or x["time_s"] > 0, f"energy without time: {x}"
        assert x["bytes"] == 0 or x["time_s"] > 0, f"a transfer that takes no time: {x}"
        assert x["time_s"] <= r.latency_ms * 1e-3 * (1 + 1e-9), x  # no resource is held beyond the step


def test_flexgens_host_relay_copy_takes_host_memory_time_on_the_server():
    r = simulate("a100", "flexgen", "frame", 40000, workload="paper")
    copy = [x for x in r.ledger if x["term"].startswith("FlexGen pinned")][0]
    assert copy["bytes"] > 0 and copy["time_s"] == pytest.approx(
        2 * r.bytes["pcie_fetch"] / PC.const("host.copy_bytes_s"))
    assert any(x["engine"] == "host" for x in r.timeline)
    # a host copy rate so slow that the relay, not the link, bounds the fetch: the step grows
    slow = simulate("a100", "flexgen", "frame", 40000, workload="paper", system_host_copy_bytes_s=5e9)
    assert slow.latency_ms > 1.5 * r.latency_ms


# ---- GPU baselines beside published measurements ----------------------------------------------------------

#: Rows outside 10 % of their measurement (reported INFO rows), each held to the band docs/PERF_MODEL.md states: the
#: two gpt-fast A100 rows at 1.10 (D109); the Orin Hugging Face row at 1.50 since its host cost is HF's measured
#: share of gpt-fast's (0.64 per layer, D247); equal cost per call would give 1.37.
EXPLAINED_MISSES = {"decode.a100.graphs.Llama-2-7B": (1.08, 1.12), "decode.a100.graphs.Llama-3.1-8B": (1.08, 1.12),
                    "decode.agx_orin.hf_eager.Llama-2-7B": (1.45, 1.55)}


def test_validation_rows_stay_where_they_are():
    df = validation_frame().set_index("key")
    holds = df.drop(index=list(EXPLAINED_MISSES))
    value = holds[holds.kind != "lower-bound"]
    assert value.ratio.between(0.9, 1.1).all(), value.ratio.to_dict()
    assert (holds[holds.kind == "lower-bound"].ratio >= 1.0).all()
    for key, (lo, hi) in EXPLAINED_MISSES.items():  # the explained misses stay where the report puts them
        assert lo <= df.ratio[key] <= hi, (key, df.ratio[key])


def test_hf_eager_host_cost_is_the_measured_share_of_gpt_fasts():
    from vrex_lib.perf.model_ops import decoder_layer_ops, lm_head_op
    from vrex_lib.perf.sim import OpCosts
    from vrex_lib.perf.validation import LLAMA2_7B

    call, slow = PC.const("stack.eager_host_op_s"), PC.const("stack.orin_host_slowdown")
    gf_layer, gf_fixed = 102 * call * slow, 25 * call * slow  # gpt-fast's eager step on the Orin's host
    hf, gf = agx_orin(stack="hf_eager"), agx_orin()
    costs = {name: OpCosts(s) for name, s in (("hf", hf), ("gf", gf))}
    ops = decoder_layer_ops(LLAMA2_7B, 1, 1, 69)
    layer = {k: sum(c.gpu_parts(o)[1]["host"] for o in ops) for k, c in costs.items()}
    head = {k: c.gpu_parts(lm_head_op(LLAMA2_7B, 1, 25))[1]["host"] for k, c in costs.items()}
    assert layer["gf"] == pytest.approx(gf_layer) and head["gf"] == pytest.approx(gf_fixed)
    # Hugging Face: the measured ratios (scripts/measure_host_overhead.py), not the per-call cost times its calls
    assert PC.const("stack.hf_eager_host_layer_x") == pytest.approx(0.640)
    assert PC.const("stack.hf_eager_host_fixed_x") == pytest.approx(1.23)
    assert layer["hf"] == pytest.approx(0.640 * gf_layer) and head["hf"] == pytest.approx(1.23 * gf_fixed)
    assert hf.host_fixed_s == pytest.approx(1.23 * gf_fixed)
    assert not math.isclose(layer["hf"], 89 * call * slow, rel_tol=0.05)  # equal cost per call: 0.87 of gpt-fast's


def test_stack_counts_are_the_traced_totals():
    comp, eager, hf = STACK_COUNTS["compiled"], STACK_COUNTS["eager"], STACK_COUNTS["hf_eager"]
    layer = ("qkv", "attn", "o_proj", "ffn", "vector")
    assert sum(comp[o][1] for o in layer) == PC.const("stack.compiled_kernels_per_layer")
    assert sum(eager[o][0] for o in layer) == PC.const("stack.eager_ops_per_layer")
    assert sum(eager[o][1] for o in layer) == PC.const("stack.eager_kernels_per_layer")
    assert sum(hf[o][0] for o in layer) == PC.const("stack.hf_eager_ops_per_layer")
    assert sum(hf[o][1] for o in layer) == PC.const("stack.hf_eager_kernels_per_layer")
    assert hf["lm_head"][0] == PC.const("stack.hf_eager_ops_fixed")
    assert all(c[2] <= c[1] for t in STACK_COUNTS.values() for c in t.values())


def test_kernel_startup_is_charged_per_kernel():
    a = get_system("a100")
    no_host = dict(host_op_s=0.0, host_fixed_s=0.0)
    r0 = simulate(a.replace(kernel_dram_s=0.0, kernel_small_s=0.0, **no_host), "full", "text", 1000, workload="paper")
    r1 = simulate(a.replace(**no_host), "full", "text", 1000, workload="paper")
    assert r1.latency_ms > r0.latency_ms and not math.isclose(r1.latency_ms, r0.latency_ms)


# ---- the granule, the workload's block counts, Fig. 19 and the report rows ------------------------------------

def test_block_counts_by_hand():
    import numpy as np

    from vrex_lib.workload.shadow import block_counts

    c = block_counts(np.array([0, 1, 2, 3, 16, 17, 40]), np.array([0, 0, 0, 0, 1, 1, 2]))
    assert c["token"][16] == (3, 1) and c["token"][2] == (4, 3)  # blocks {0,1,2} are one run; {0,1},{8},{20}
    assert c["cluster"][16] == (3, 3) and c["cluster"][2] == (2 + 1 + 1, 3)  # one extent per cluster


def test_granule_rule_and_measured_blocks():
    from vrex_lib.perf import Curve

    ex = simulate("vrex8", "resv", "frame", 40000, workload="paper")
    assert ex.notes["moved_fraction"] == pytest.approx(0.327)  # 32-token clusters fill whole 4-KiB blocks
    ind = simulate("vrex8", "resv", "frame", 40000, workload="paper", granule_rule="independent")
    assert ind.notes["moved_fraction"] > ex.notes["moved_fraction"] and ind.latency_ms > ex.latency_ms
    wl = Workload.paper().replace(fetch_blocks={("resv", "cluster", 16): Curve.constant(0.125)})
    m = simulate("vrex8", "resv", "frame", 40000, workload=wl)
    assert m.notes["moved_fraction"] == pytest.approx(0.327 * 0.125 * 16) and "measured" in m.notes["granule"]


def test_fig19_rows_are_graded_and_explained():
    from vrex_lib import report
    from vrex_lib.claims import hwmodel as H

    df = report.to_frame(H.fig19_speedup_rows(H.fig19_frame()), "t").set_index("claim")
    for k in ("fig19.speedup.resv_noclust", "fig19.speedup.resv"):
        assert df.verdict[k] in ("PASS", "FAIL")
        assert df.verdict[k] == "PASS" or df.cause_detail[k]
    assert df.cause["fig19.speedup.resv"] in ("", "paper-inconsistent", "model")
    # fetching every offloaded key costs the ablation more than keeping them resident
    assert df.reproduced["fig19.speedup.resv_noclust"] < df.reproduced["fig19.speedup.resv_noclust.vrex8.keys_resident"]


def test_sweep_covers_every_simulator_choice():
    from vrex_lib import choices
    from vrex_lib.claims import hwmodel as H

    sw = H.sweep_frame(ids=("D101", "D103"))
    assert set(sw.choice) == {"D101", "D103"}
    for cid in ("D101", "D103"):
        d = sw[sw.choice == cid]
        assert set(d.value) == set(choices.get(cid).admissible) and d.default.any()
    # the literal dense reading fetches layer 0 every step: slower at 40K
    d = sw[(sw.choice == "D103") & (sw.quantity == "edge frame 40K (ms)")].set_index("value").ours
    assert d[False] > d[True]
    # a 32-B/cycle port binds V-Rex8's tile loads: slower than 64 B/cycle at 1K
    p = sw[(sw.choice == "D101") & (sw.quantity == "edge frame 1K (ms)")].set_index("value").ours
    assert p[32] > p[64] >= p[128]
    s = H.sweep_summary(sw)
    assert {"lo", "hi", "paper_inside"} <= set(s.columns)


def test_edge_line_names_the_term_and_the_value_it_needs():
    from vrex_lib.claims import hwmodel as H

    el = H.edge_line_frame(kv_sizes=(1000, 40000)).set_index("kv_len")
    for kv, r in el.iterrows():
        assert r.term_ms == max(r[f"{t}_ms"] for t in ("llm", "vision_mlp", "kv_prediction", "retrieval_exposed"))
        assert r.term_needed_ms == pytest.approx(r.term_ms + r.paper_ms - r.ours_ms)
    assert el.term[1000] == "llm" and el.term[40000] == "retrieval_exposed"
    cr = H.core_ratio_frame(kv_sizes=(1000,), stages=("frame",))
    # the terms add up to each system's latency, so their shares of the gap add up to one
    assert cr.share_of_difference.sum() == pytest.approx(1.0, abs=1e-9)


# ---- hardware model v5: the choices' sources, the decoupled capacities, GPU-side ReSV, decode rate, the ledger ----

def test_every_choice_range_names_its_source(monkeypatch):
    from vrex_lib import choices

    assert choices.unsourced() == []
    assert {"D420", "D421", "D422", "D423", "D424", "D427", "D429"} <= set(choices.CHOICES)
    bare = dataclasses.replace(choices.get("D420"), id="Dx", source=" ")
    monkeypatch.setattr(choices, "_ROWS", choices._ROWS + (bare,))
    assert choices.unsourced() == ["Dx"]  # a range without a source is caught


def test_every_choice_reaches_the_simulator_and_moves_something():
    """Each new choice is a plain entry with a simulator keyword the robustness sweep can pass, and each value runs."""
    from vrex_lib import choices

    points = {"D420": ("agx_orin", "flexgen", 4), "D421": ("agx_orin", "resv", 1), "D422": ("agx_orin", "resv", 1),
              "D423": ("agx_orin", "resv", 1), "D424": ("vrex8", "resv", 1)}
    for cid, (sysn, m, b) in points.items():
        c = choices.get(cid)
        stage = "text" if cid == "D424" else "frame"
        kv = 1000 if cid == "D424" else 40000
        lat = {v: simulate(sysn, m, stage, kv, b, workload="paper", **{c.override: v}).latency_ms
               for v in c.admissible}
        assert len(set(lat.values())) > 1, (cid, lat)


def test_capacities_are_decoupled():
    # V-Rex's KVMU capacity (D6) leaves the baselines' KV where it is; the baselines' (D420) leaves V-Rex's
    f = simulate("agx_orin", "flexgen", "frame", 40000, 4, workload="paper")
    f16k = simulate("agx_orin", "flexgen", "frame", 40000, 4, workload="paper", recent_capacity=16384)
    assert f16k.latency_ms == f.latency_ms and f16k.notes["on_device_tokens"] == 4096
    v = simulate("vrex8", "resv", "frame", 40000, 4, workload="paper")
    v0 = simulate("vrex8", "resv", "frame", 40000, 4, workload="paper", baseline_kv_capacity=0)
    assert v0.latency_ms == v.latency_ms
    full = simulate("agx_orin", "flexgen", "frame", 40000, 4, workload="paper", baseline_kv_capacity=0)
    assert full.notes["on_device_tokens"] == 0 and full.latency_ms > f.latency_ms  # the paper's full offload
    fit = simulate("agx_orin", "flexgen", "frame", 40000, 4, workload="paper", baseline_kv_capacity="fit")
    assert 4096 < fit.notes["on_device_tokens"] < 40000 and not fit.oom  # what 32 GB holds after the weights
    # 'fit' by hand: the memory left after weights, activations and buffers, over the KV of one token of 4 streams
    from vrex_lib.perf.sim import SimParams
    from vrex_lib.perf.sim.inputs import baseline_capacity_tokens
    sys, p = get_system("agx_orin"), SimParams(baseline_kv_capacity="fit")
    llm = p.llm
    tok = baseline_capacity_tokens(p, sys, llm, 40000, 4, 10)
    left = sys.dram_capacity - llm.weight_bytes - p.vision.weight_bytes
    assert tok == fit.notes["on_device_tokens"] and tok * 4 * llm.kv_bytes_per_token < left
    with pytest.raises(ValueError, match="baseline_kv_capacity"):
        simulate("agx_orin", "flexgen", "frame", 40000, workload="paper", baseline_kv_capacity=-1)


def test_gpu_resv_choices_by_hand():
    base = simulate("agx_orin", "resv", "frame", 40000, workload="paper")
    r = base.ratio
    sel = simulate("agx_orin", "resv", "frame", 40000, workload="paper", token_fetch_rule="selected")
    assert sel.notes["moved_fraction"] == pytest.approx(r) and sel.latency_ms < base.latency_ms
    sec = simulate("agx_orin", "resv", "frame", 40000, workload="paper", token_fetch_rule="sector")
    assert sec.notes["moved_fraction"] == pytest.approx(1 - (1 - r) ** 2)  # 256-B tokens in 512-B sectors
    # the queue depth is the GPU host's only: V-Rex's KVMU keeps D105's 64
    deep = simulate("agx_orin", "resv", "frame", 40000, workload="paper", gpu_queue_depth=128)
    assert deep.latency_ms < base.latency_ms
    assert (simulate("vrex8", "resv_kvpu", "frame", 40000, workload="paper", gpu_queue_depth=8).latency_ms
            == simulate("vrex8", "resv_kvpu", "frame", 40000, workload="paper").latency_ms)
    # per (token, KV head) host calls: each one more eager call and kernel of the clustering op
    from vrex_lib.perf.methods import PredContext, get_method
    from vrex_lib.perf.sim import SimParams
    sysn = get_system("agx_orin")
    for calls in (0, 1, 4):
        p = SimParams(gpu_resv_host_calls=calls)
        ctx = PredContext(p.llm, 2, 10, 30000, "gpu", p, 10, 5.0, 0.5)
        clus = [o for o in get_method("resv").prediction_work("frame", ctx).ops if o.name == "pred_cluster"][0]
        assert clus.kernels == clus.n_host_ops == 10 + 2 * 10 * p.llm.n_kv_heads * calls
    assert sysn.host_op_s > 0


def test_decode_efficiency_is_one_rule_from_published_decode_runs():
    from vrex_lib import choices
    from vrex_lib.perf.validation import decode_dram_shares

    shares = decode_dram_shares()
    got = sorted(round(s, 2) for s in shares.values())
    assert got == sorted(v for v in choices.get("D424").admissible if v != "model")
    for sysn in ("vrex8", "agx_orin", "a100", "vrex48"):
        m = simulate(sysn, "full", "text", 1000, workload="paper")
        d = simulate(sysn, "full", "text", 1000, workload="paper", decode_dram_eff=0.70)
        assert d.latency_ms > m.latency_ms, sysn  # every system's model share lies above 0.70: the ceiling binds all
    df = validation_frame().set_index("key")
    assert (df.loc[[k for k in df.index if k.endswith("decode_share")]].ratio >= 1.0).all()


@pytest.mark.parametrize("system", ["agx_orin", "a100"])
def test_link_energy_is_charged_once_beside_a_measured_board(system):
    """The GPU board power (nvidia-smi / tegrastats: the whole board) holds its end of the link, so the ledger charges
    the far end only: half of what the same link costs beside V-Rex, whose power is built from parts."""
    from vrex_lib.perf import energy as EN

    r = simulate(system, "flexgen", "frame", 40000, workload="paper")
    sys = get_system(system)
    busy = sum(x["time_s"] for x in r.ledger if x["resource"] == "link" and x["term"].startswith("transfers"))
    link_j = sum(x["energy_j"] for x in r.ledger if x["resource"] == "link" and x["term"].startswith("transfers"))
    assert link_j == pytest.approx(0.5 * 3.0 * sys.pcie_lanes * busy)
    assert all("GPU's end is in the board power" in x["term"] for x in r.ledger if x["resource"] == "link")
    v = get_system("vrex8" if system == "agx_orin" else "vrex48")
    assert EN.link_share(sys) == 0.5 and EN.link_share(v) == 1.0
    assert EN.peak_power_w(sys)["pcie"] == pytest.approx(0.5 * 3.0 * sys.pcie_lanes)
    # every joule once: the board's, the link's far end, the tier's; the sum is the step's energy
    assert sum(x["energy_j"] for x in r.ledger) == pytest.approx(r.energy_J, rel=1e-12)
    board = [x for x in r.ledger if x["resource"] == "compute" and x["energy_j"] > 0]
    r_full = simulate(system, "flexgen", "frame", 40000, workload="paper", gpu_stall_power="board")
    board_full = [x for x in r_full.ledger if x["resource"] == "compute" and x["energy_j"] > 0]
    full_j = sum(x["energy_j"] for x in board_full)
    assert len(board) == 2 and full_j == pytest.approx(sys.power_w * r.latency_ms * 1e-3)


# ---- the energy ledger: board power while stalled (D427), the host CPU of relay copies (D428), the Orin's relay (D429)

LEDGER_POINTS = POINTS + [("a100", "flexgen", "text", 40000), ("a100", "full", "text", 1000),
                          ("vrex48", "resv", "frame", 40000), ("agx_orin", "flexgen", "frame", 5000)]


def _board(r) -> tuple[dict, dict]:
    working, stalled = [x for x in r.ledger if x["resource"] == "compute" and x["term"].startswith("GPU board")]
    return working, stalled


@pytest.mark.parametrize("stall", ["idle", "context", "board"])
@pytest.mark.parametrize("system,method,stage,kv", LEDGER_POINTS)
def test_energy_ledger_every_joule_once_at_every_stall_power(system, method, stage, kv, stall):
    from vrex_lib.perf import energy as EN

    relay = "cpu_ce" if (system, kv) == ("agx_orin", 5000) else "gpu"
    r = simulate(system, method, stage, kv, workload="paper", gpu_stall_power=stall, relay_copy_engine=relay)
    t = r.latency_ms * 1e-3
    assert sum(x["energy_j"] for x in r.ledger) == pytest.approx(r.energy_J, rel=1e-12)
    assert sum(r.energy_breakdown_J.values()) == pytest.approx(r.energy_J, rel=1e-12)
    for x in r.ledger:
        assert x["resource"] in RESOURCES and min(x["time_s"], x["energy_j"], x["bytes"]) >= 0, x
        assert x["energy_j"] == 0 or x["time_s"] > 0, f"energy without time: {x}"
        assert x["time_s"] <= t * (1 + 1e-9), x
    sys = get_system(system)
    if sys.kind == "vrex":
        assert not [x for x in r.ledger if x["term"].startswith("GPU board")]
        return
    working, stalled = _board(r)
    # the stall is the main engine's wait on the link; working + stalled is the step, each at its own power
    assert stalled["time_s"] == pytest.approx(r.breakdown_ms["retrieval_exposed"] * 1e-3, rel=1e-9, abs=1e-15)
    assert working["time_s"] + stalled["time_s"] == pytest.approx(t, rel=1e-12)
    assert working["energy_j"] == pytest.approx(sys.power_w * working["time_s"], rel=1e-12)
    stall_w = EN.gpu_stall_power_w(sys, stall)
    assert stalled["energy_j"] == pytest.approx(stall_w * stalled["time_s"], rel=1e-12, abs=1e-15)
    board_j = r.energy_breakdown_J["gpu_board"] + r.energy_breakdown_J["gpu_board_stall"]
    assert board_j == pytest.approx(working["energy_j"] + stalled["energy_j"], rel=1e-12)
    if stall == "board" or sys.idle_power_w is None:  # the busy power for the whole step: Table I x step time
        assert board_j == pytest.approx(sys.power_w * t, rel=1e-12)


def test_stall_power_levels_by_hand():
    from vrex_lib.perf import energy as EN

    a, o = get_system("a100"), get_system("agx_orin")
    assert EN.gpu_stall_power_w(a, "idle") == PC.const("a100.idle_w") and 45.0 <= PC.const("a100.idle_w") <= 63.0
    assert EN.gpu_stall_power_w(a, "context") == PC.const("a100.idle_w") + PC.const("a100.context_step_w")
    assert EN.gpu_stall_power_w(a, "board") == a.power_w == 300.0
    assert {EN.gpu_stall_power_w(o, lv) for lv in EN.STALL_POWER_LEVELS} == {o.power_w}  # no cited Orin idle
    # only the energy moves: the latency is the same at every level, and a lower stall power is less energy
    e = {lv: simulate("a100", "flexgen", "frame", 40000, workload="paper", gpu_stall_power=lv) for lv in
         EN.STALL_POWER_LEVELS}
    assert len({round(r.latency_ms, 9) for r in e.values()}) == 1
    assert e["idle"].energy_J < e["context"].energy_J < e["board"].energy_J
    stall_s = e["idle"].breakdown_ms["retrieval_exposed"] * 1e-3
    assert e["board"].energy_J - e["idle"].energy_J == pytest.approx((300.0 - PC.const("a100.idle_w")) * stall_s)
    with pytest.raises(ValueError, match="gpu_stall_power"):
        simulate("a100", "flexgen", "frame", 40000, workload="paper", gpu_stall_power="off")


def test_link_energy_and_board_power_stay_apart_at_every_stall_power():
    """D425 + D427: the link's far end is charged by its own busy/idle time whatever the board draws while it waits,
    and the board's stall energy is its stall power alone (the GPU's end of the link is in it, not added)."""
    link = {}
    for lv in ("idle", "context", "board"):
        r = simulate("a100", "flexgen", "frame", 40000, workload="paper", gpu_stall_power=lv)
        link[lv] = (r.energy_breakdown_J["pcie"], r.energy_breakdown_J["pcie_idle"])
        busy = [x for x in r.ledger if x["resource"] == "link" and x["term"].startswith("transfers")][0]
        assert busy["energy_j"] == pytest.approx(0.5 * 3.0 * 16 * busy["time_s"])
    assert len(set(link.values())) == 1


def test_host_cpu_copy_energy_appears_iff_host_copies_happen():
    r = simulate("a100", "flexgen", "frame", 40000, workload="paper")
    copy_s = 2 * r.bytes["pcie_fetch"] / PC.const("host.copy_bytes_s")
    cpu = [x for x in r.ledger if x["resource"] == "host_cpu" and "D428" in x["term"]]
    assert len(cpu) == 1 and cpu[0]["time_s"] == pytest.approx(copy_s)
    assert cpu[0]["energy_j"] > 0 and cpu[0]["energy_j"] == pytest.approx(PC.const("host.cpu_package_w") * copy_s)
    assert r.energy_breakdown_J["host_cpu_copy"] == cpu[0]["energy_j"]
    # nothing offloaded (the cache within the GPU's 4,096 tokens): no fetch, no copy, no CPU copy energy
    n = simulate("a100", "flexgen", "frame", 1000, workload="paper")
    assert n.bytes["staging"] == 0 and n.energy_breakdown_J["host_cpu_copy"] == 0
    # V-Rex48's KVMU relays nothing through host memory; the Orin's CPU is inside its module power
    for sysn, m in (("vrex48", "resv"), ("agx_orin", "flexgen")):
        x = simulate(sysn, m, "frame", 40000, workload="paper")
        assert "host_cpu_copy" not in x.energy_breakdown_J
        assert all(e["energy_j"] == 0 for e in x.ledger if e["resource"] == "host_cpu")


def test_orin_relay_copies_on_their_engine():
    """D429: 'cpu_ce' moves FlexGen's two relay copies off the GPU's kernels onto the CPU and copy engine after the
    SSD read; 'gpu' keeps their LPDDR5 traffic in line with the kernels (the default, unchanged latencies)."""
    g = simulate("agx_orin", "flexgen", "frame", 5000, 4, workload="paper")
    c = simulate("agx_orin", "flexgen", "frame", 5000, 4, workload="paper", relay_copy_engine="cpu_ce")
    assert any(x["phase"] == "staging" for x in g.timeline) and not any(x["engine"] == "host" for x in g.timeline)
    assert not any(x["phase"] == "staging" for x in c.timeline)
    fetch = {x["layer"]: x for x in c.timeline if x["phase"] == "kv_fetch"}
    copies = [x for x in c.timeline if x["phase"] == "host_copy"]
    assert copies and all(x["start_us"] >= fetch[x["layer"]]["end_us"] - 1e-6 for x in copies)  # after the read
    relay = [x for x in c.ledger if x["resource"] == "host_cpu" and "D429" in x["term"]][0]
    assert relay["energy_j"] == 0 and relay["time_s"] == pytest.approx(sum(x["end_us"] - x["start_us"] for x in copies)
                                                                      * 1e-6)
    assert c.latency_ms < g.latency_ms and c.bytes["pcie"] == g.bytes["pcie"]
    with pytest.raises(ValueError, match="relay_copy_engine"):
        simulate("agx_orin", "flexgen", "frame", 5000, workload="paper", relay_copy_engine="dma")


def test_v5_report_tables():
    from vrex_lib.claims import hwmodel as H

    hr = H.headline_regrade_frame(kv_sizes=(10000, 40000))
    assert set(hr.claim) == set(H.HEADLINE_PANELS)
    assert "D6=16384, D420=0" in set(hr.setting) and (hr.setting == "defaults").sum() == 2
    d = hr[hr.setting == "defaults"]
    assert (d.link_gbs_ours > 0).all() and d.link_gbs_implied.notna().all()
    ct = H.core_ratio_terms(kv_sizes=(1000,), stages=("text",))
    assert set(ct.term) == {"dram", "port", "compute", "link", "other"}
    assert ct.share_of_difference.sum() == pytest.approx(1.0)  # the terms add up to the whole gap
    ft = H.fig16_terms_frame()
    assert list(ft.paper.round(2)) == [2.8, round(6.0 / 2.8, 2), round(8.1 / 6.0, 2)]
    rows = H.headline_regrade_rows(hr) + H.fig16_terms_rows(ft)
    assert all(r.note for r in rows)


def test_v5_tables_have_their_own_keys():
    from vrex_lib.claims import hwmodel as H

    rows = H.core_ratio_rows(H.core_ratio_frame(kv_sizes=(1000,), stages=("text",)))
    terms = H.core_ratio_rows(H.core_ratio_terms(kv_sizes=(1000,), stages=("text",)), "hwmodel.cores.terms")
    assert not {r.claim for r in rows} & {r.claim for r in terms}


@pytest.mark.long
def test_perf_model_doc_headline_numbers_are_the_simulators():
    """docs/PERF_MODEL.md's headline table is vrex_lib.claims.headline_doc's output (regenerate with its --write)."""
    from pathlib import Path

    from vrex_lib.claims import headline_doc as HD

    doc = (Path(__file__).resolve().parents[1] / "docs" / "PERF_MODEL.md").read_text()
    table = HD.headline_markdown()
    assert table in doc, "stale: run python -m vrex_lib.claims.headline_doc --write docs/PERF_MODEL.md"
    assert "energy-efficiency gain (server panels)" in table and table.count("\n| ") == 10


def test_headline_doc_writes_between_its_markers(tmp_path):
    from vrex_lib.claims import headline_doc as HD

    p = tmp_path / "d.md"
    p.write_text(f"intro\n{HD.BEGIN}\nold\n{HD.END}\nafter\n")
    HD.write_doc(p, f"{HD.BEGIN}\nnew\n{HD.END}")
    assert p.read_text() == f"intro\n{HD.BEGIN}\nnew\n{HD.END}\nafter\n"
    (tmp_path / "e.md").write_text("no markers")
    with pytest.raises(ValueError, match="markers"):
        HD.write_doc(tmp_path / "e.md", "x")
