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
