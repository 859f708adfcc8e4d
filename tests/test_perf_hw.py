"""Hand-computed cases of the hardware model v3: the DRAM model, the per-core LXE, dense layers, the NVMe link and
its ASPM power, the GPU host stack, and the workload file's sturdiness (docs/PERF_MODEL.md)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from vrex_lib.config import RuntimeConfig, VRexCoreConfig
from vrex_lib.perf import Workload, dram, link, lxe, simulate
from vrex_lib.perf.constants import const, table
from vrex_lib.perf.model_ops import Gemm
from vrex_lib.perf.systems import get_system

FIXTURE = Path(__file__).resolve().parent / "data" / "workload_tiny.json"


# ---- one DRAM model per technology ---------------------------------------------------------------------------

def test_lpddr5_weight_stream_and_write_stream_by_hand():
    t = dram.timing("lpddr5", 204.8e9, 256)
    assert (t.n_channels, t.jedec.burst_bytes, t.channel_bytes_s) == (16, 32, pytest.approx(12.8e9))
    w = dram.stream_efficiency(t)
    # A long read: one 2-KiB row per activation (160 ns of data) >> max(tRRD 5, tFAW/4 5, tRC 61.25/16) ns.
    assert w.row == 1.0 and w.total == pytest.approx(1 - 280 / 3906, rel=1e-12)
    # Writes drain 16 bursts (512 B = 40 ns) per RD->WR (20 + 4 + 2 - 11 nCK) + WR->RD (11 + 4 + 5 nCK) switch.
    turn_s = ((20 + 4 + 2 - 11) + (11 + 4 + 5)) * 1.25e-9
    ww = dram.stream_efficiency(t, write=True)
    assert ww.turnaround == pytest.approx(40e-9 / (40e-9 + turn_s), rel=1e-12)


def test_hbm2e_scattered_read_is_activation_bound_by_hand():
    t = dram.timing("hbm2e", 1935e9, 5120)
    e = dram.stream_efficiency(t, run_bytes=256)
    per_act = 256 / (1 + (256 - 64) / 1024)          # a 256-B run at a random offset opens 1.19 rows
    data_s = per_act / (1935e9 / 40)
    act_s = max(4e-9, 30e-9 / 4, 48e-9 / (16 * (1 - (15 / 16) ** 32)))  # tFAW/4 = 7.5 ns binds
    assert e.act_interval_s == pytest.approx(7.5e-9) and e.bytes_per_act == pytest.approx(per_act)
    assert e.total == pytest.approx((1 - 260 / 3900) * data_s / act_s, rel=1e-12)
    assert e.total < 0.6 < dram.stream_efficiency(t).total  # scattered 256-B reads lose ~40 % on HBM2e
    with pytest.raises(ValueError, match="run_bytes"):
        dram.stream_efficiency(t, run_bytes=0)
    with pytest.raises(ValueError, match="ddr6"):
        dram.timing("ddr6", 1e9, 64)


def test_systems_on_one_memory_share_one_dram_model():
    import dataclasses
    v8, orin, v48, a100 = (get_system(n) for n in ("vrex8", "agx_orin", "vrex48", "a100"))
    # One JEDEC timing per technology; only the controller's write batch differs (V-Rex: DRAMsim3's 16 bursts; a GPU
    # drains its write-back L2 in unbounded batches).
    for acc, gpu in ((v8, orin), (v48, a100)):
        assert acc.memory is gpu.memory
        assert dataclasses.replace(acc.dram_timing, write_batch=0) == dataclasses.replace(gpu.dram_timing, write_batch=0)
        assert acc.dram_timing.write_batch == 16 and gpu.dram_timing.write_batch == float("inf")
    assert v8.dram_eff == pytest.approx(orin.dram_eff / const("agx_orin.mem_side_eff"))
    assert v48.dram_eff == pytest.approx(a100.dram_eff / const("a100.mem_side_eff"))


def test_every_constant_has_a_source_a_known_how_and_a_doc_row():
    t = table()
    assert t.key.is_unique and (t.source.str.len() > 10).all()
    assert set(t.how) <= {"measured", "derived", "spec", "choice"}
    assert (t[t.how == "choice"].source.str.contains("DECISIONS.md D1")).all()
    doc = (Path(__file__).resolve().parents[1] / "docs" / "PERF_MODEL.md").read_text()
    missing = [k for k in t.key if f"`{k}`" not in doc]
    assert not missing, f"docs/PERF_MODEL.md lacks constants rows {missing}"


# ---- per-core LXE -------------------------------------------------------------------------------------------

def test_small_n_gemm_utilisation_from_the_tile_shape():
    # A 10-token frame through a 4096 x 4096 projection on 8 cores with 64-B/cycle ports: 64 x 64 tiles of 8 KiB
    # take 128 cycles to load and are used for 10; 4096 tiles / 8 cores = 512 per core.
    c = lxe.gemm_core_cycles(Gemm(10, 4096, 4096), n_cores=8, port_bytes_per_cycle=64)
    assert (c.cycles, c.tiles_busiest) == (512 * 128, 512)
    assert c.utilisation == pytest.approx(10 / 128)
    # 576 patch rows keep every tile busy for 576 cycles: full utilisation.
    assert lxe.gemm_core_cycles(Gemm(576, 1024, 4096), 8, 64).utilisation == pytest.approx(1.0)
    # Edge tiles: a 1250-column score matrix fills 20 tiles of 64 (1280).
    assert lxe.gemm_core_cycles(Gemm(576, 128, 1250), 1, 64).utilisation == pytest.approx(1250 / 1280)
    # 48 cores: 1024 tiles of a 4096 x 1024 projection -> ceil(1024/48) = 22 on the busiest core.
    assert lxe.gemm_core_cycles(Gemm(10, 4096, 1024), 48, 64).tiles_busiest == 22


def test_softmax_on_the_vpe_by_hand():
    core = VRexCoreConfig()
    # 8 cores x 64 lanes; softmax = 5 lane-ops per element (max, subtract, exp, sum, scale).
    t = lxe.lxe_time((), {"softmax": 512_000}, 0.0, core, 8, 64)
    assert t.vpe_s == pytest.approx(5 * 512_000 / 512 / 800e6) and t.limit == "vpe"
    with pytest.raises(ValueError, match="unknown VPE"):
        lxe.vpe_lane_ops({"tanh": 1})


def test_vrex_ops_report_what_limits_them():
    r = simulate("vrex8", "resv", "frame", 1000, 1, workload="paper")
    assert set(r.notes["limits_ms"]) <= {"dram", "dpe", "vpe"} and r.notes["limits_ms"]["dram"] > 0
    r16 = simulate("vrex8", "resv", "frame", 1000, 16, workload="paper")  # 160 rows per tile: compute counts
    assert r16.latency_ms > r.latency_ms


# ---- dense layers -------------------------------------------------------------------------------------------

def test_dense_layer_zero_reads_and_fetches_everything():
    assert Workload.paper().dense_layers == RuntimeConfig().dense_layers == 1
    r = simulate("vrex8", "resv", "frame", 40000, 1, workload="paper", dense_resident=False)
    off = 40000 - RuntimeConfig().kv_capacity
    layer0 = [x for x in r.timeline if x["phase"] == "kv_fetch" and x["layer"] == 0][0]
    assert layer0["pcie_bytes"] == off * 2 * 8 * 128 * 2  # 147,062,784 B: every offloaded token of layer 0
    sparse = [x for x in r.timeline if x["phase"] == "kv_fetch" and x["layer"] == 5][0]["pcie_bytes"]
    assert r.bytes["pcie_fetch"] == pytest.approx(layer0["pcie_bytes"] + 31 * sparse)
    none = simulate("vrex8", "resv", "frame", 40000, 1, workload="paper", dense_layers=0, dense_resident=False)
    assert none.bytes["pcie_fetch"] == pytest.approx(32 * sparse) and none.latency_ms < r.latency_ms
    # Layer 0 predicts nothing: no prediction phase for it.
    assert not [x for x in r.timeline if x["phase"] == "kv_prediction" and x["layer"] == 0]
    # Kept on device instead, layer 0 fetches nothing and holds its whole KV in DRAM.
    res = simulate("vrex8", "resv", "frame", 40000, 1, workload="paper", dense_resident=True)
    assert res.bytes["pcie_fetch"] == pytest.approx(31 * sparse)
    assert res.mem_bytes == pytest.approx(r.mem_bytes + layer0["pcie_bytes"])


# ---- the link: NVMe commands, ASPM ------------------------------------------------------------------------------

def test_one_nvme_fetch_with_command_overhead_by_hand():
    # 1 MiB in 256 reads of 4 KiB on a 3.6 GB/s link: link (1 MiB + 256 x 212 B) = 306 us, IOPS 256 / 850k =
    # 301 us, queue 256 x 80 us / 64 = 320 us -> queue-bound.
    t = link.fetch_time_s(2 ** 20, 256, link_bytes_s=3.6e9, ssd=True, queue_depth=64)
    assert link.command_overhead_bytes() == 212
    assert t == pytest.approx(256 * 80e-6 / 64)
    assert link.fetch_time_s(2 ** 20, 256, link_bytes_s=3.6e9, ssd=True, queue_depth=1024) == pytest.approx(
        (2 ** 20 + 256 * 212) / 3.6e9)
    assert link.fetch_time_s(2 ** 20, 0, link_bytes_s=3.6e9, ssd=False, queue_depth=1) == pytest.approx(2 ** 20 / 3.6e9)
    assert link.command_bytes("cluster", 8192, 256, 4096) == pytest.approx(4096 * 2.5)
    assert link.command_bytes("token", 256, 256, 4096) == 4096


def test_aspm_idle_power_by_hand():
    gaps = [1e-6, 50e-6, 1e-3]
    total, eq = link.idle_power_frac(gaps, "l1")
    l1 = 3e-3 / 12
    assert total == pytest.approx(sum(gaps))
    assert eq == pytest.approx(1e-6 + (7e-6 + 43e-6 * 0.5) + (7e-6 + 93e-6 * 0.5 + 900e-6 * l1))
    assert link.idle_power_frac(gaps, "off")[1] == pytest.approx(sum(gaps))
    with pytest.raises(ValueError, match="aspm"):
        link.idle_power_frac(gaps, "l2")


def test_idle_link_is_not_charged_at_full_power():
    on = simulate("vrex8", "resv", "frame", 1000, 1, workload="paper")
    off = simulate("vrex8", "resv", "frame", 1000, 1, workload="paper", aspm="off")
    full_w = 4 * 3.0
    assert off.energy_breakdown_J["pcie_idle"] == pytest.approx(full_w * off.latency_ms * 1e-3)
    assert on.energy_breakdown_J["pcie_idle"] < 0.01 * off.energy_breakdown_J["pcie_idle"]


def test_ssd_block_size_moves_the_scattered_methods_only():
    small = simulate("vrex8", "resv_kvpu", "frame", 40000, 1, workload="paper", system_offload_granule=16384)
    base = simulate("vrex8", "resv_kvpu", "frame", 40000, 1, workload="paper")
    fg = [simulate("agx_orin", "flexgen", "frame", 40000, 1, workload="paper", system_offload_granule=g).latency_ms
          for g in (4096, 16384)]
    assert small.bytes["pcie_fetch"] > base.bytes["pcie_fetch"] and fg[0] == pytest.approx(fg[1])


# ---- GPU host stack -------------------------------------------------------------------------------------------

def test_gpu_host_stack_rows_and_host_bound_decode():
    orin, a100 = get_system("agx_orin"), get_system("a100")
    per_call = (1 / 25.5) / (32 * 102 + 25)
    assert a100.host_op_s == pytest.approx(per_call) and orin.host_op_s == pytest.approx(per_call * 3.4 / 2.2)
    r = simulate("a100", "flexgen", "text", 1000, 1, workload="paper")
    assert r.notes["limits_ms"]["host"] > r.notes["limits_ms"]["dram"]  # batch-1 decode on the A100: host-bound
    fast = simulate(a100.replace(host_op_s=0.0, host_fixed_s=0.0), "flexgen", "text", 1000, 1, workload="paper")
    assert fast.latency_ms < 0.5 * r.latency_ms


def test_flexgen_staging_copies_load_the_orin_dram_only():
    orin = simulate("agx_orin", "flexgen", "frame", 20000, 1, workload="paper")
    none = simulate("agx_orin", "flexgen", "frame", 20000, 1, workload="paper", system_staging_copies=0)
    assert orin.bytes["dram"] == pytest.approx(none.bytes["dram"] + 4 * orin.bytes["pcie_fetch"])
    a = simulate("a100", "flexgen", "frame", 20000, 1, workload="paper")
    assert a.bytes["staging"] == 2 * a.bytes["pcie_fetch"] and a.energy_breakdown_J["host_dram"] > 0


# ---- sturdiness of the workload input ---------------------------------------------------------------------------

def _fixture(tmp_path, mutate) -> Path:
    d = json.loads(FIXTURE.read_text())
    mutate(d)
    p = tmp_path / "w.json"
    p.write_text(json.dumps(d))
    return p


@pytest.mark.parametrize("field", ["tokens_per_cluster", "kv_len", "selected_frac", "reuse_frac"])
def test_non_finite_values_are_rejected_naming_file_and_field(tmp_path, field):
    p = _fixture(tmp_path, lambda d: d["checkpoints"][1].__setitem__(field, float("nan")))
    with pytest.raises(ValueError, match=rf"w\.json: checkpoint 1 field '{field}'"):
        Workload.from_measurement(p)


def test_non_object_files_and_inconsistent_fractions(tmp_path):
    p = tmp_path / "list.json"
    p.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"list\.json: holds a JSON list"):
        Workload.from_measurement(p)
    bad = _fixture(tmp_path, lambda d: d["checkpoints"][1].update(selected_frac=0.01, selected_frac_offloaded=0.9))
    with pytest.raises(ValueError, match="on-device share"):
        Workload.from_measurement(bad)
    nodense = _fixture(tmp_path, lambda d: d.pop("dense_layers"))
    with pytest.raises(ValueError, match="dense_layers"):
        Workload.from_measurement(nodense)
    only_all = _fixture(tmp_path, lambda d: d["checkpoints"][1].update(selected_frac_offloaded=None))
    w = Workload.from_measurement(only_all)  # 10K has offloaded candidates but no split: neither tier used
    assert "no selected_frac_offloaded" in w.provenance["selected_frac_device"].detail
    assert math.isclose(w.selected("resv", "frame", 10000, "device")[0], 0.40)
