"""Beyond the paper: the bounded ReSV (docs/DECISIONS.md D490-D497) -- its algorithm, policies, method rows, MyHDL
blocks (bit-exact in MyHDL and Icarus) and simulator model."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from vrex_lib import methods
from vrex_lib.config import ReSVConfig, VRexCoreConfig
from vrex_lib.resv import bounded as rb
from vrex_lib.retrieval import make_policy


def _loop_cluster(codes, cap, th):
    """The capped founder rule as a plain loop over :func:`capped_nearest_ref` (the kernel's reference)."""
    cl_codes, counts, out = [], [], []
    for c in codes:
        j, _, join = rb.capped_nearest_ref(int(c), np.array(cl_codes, np.int64), np.array(counts), cap, th)
        if join:
            counts[j] += 1
            out.append(j)
        else:
            cl_codes.append(int(c))
            counts.append(1)
            out.append(len(cl_codes) - 1)
    return np.array(out), np.array(counts)


@pytest.mark.parametrize("cap", [1, 3, 8, 1000])
def test_capped_kernel_equals_reference_loop(cap):
    rng = np.random.default_rng(cap)
    base = rng.integers(0, 1 << 32, 6)
    codes = np.array([int(base[rng.integers(0, 6)]) ^ (1 << int(rng.integers(0, 32))) for _ in range(300)], np.int64)
    keys = rng.normal(size=(300, 4)).astype(np.float32)
    size = 300
    buf_c, buf_n, buf_m = np.zeros(size, np.int64), np.zeros(size, np.int64), np.zeros((size, 4), np.float32)
    got, n_cl = rb.capped_cluster(codes, keys, buf_c, buf_n, buf_m, 0, cap, 7)
    want, counts = _loop_cluster(codes, cap, 7)
    assert np.array_equal(got, want) and n_cl == counts.size and np.array_equal(buf_n[:n_cl], counts)
    assert counts.max() <= cap and (cap < 300 or counts.max() > 8)  # the cap binds, and only the cap
    for j in range(n_cl):  # running means: every cluster's mean is its members' mean
        assert np.allclose(buf_m[j], keys[got == j].mean(0), atol=1e-5)


def test_quantize_keys_and_integer_scores():
    rng = np.random.default_rng(0)
    k = rng.normal(0, rng.uniform(0.1, 10, (200, 1)), (200, 64))
    for bits in (2, 3, 4, 8):
        c, m, e = rb.quantize_keys(k, bits)
        qmax = 2 ** (bits - 1) - 1
        assert np.abs(c).max() <= qmax and m.min() >= 1 and m.max() <= 255 and e.min() >= 0 and e.max() <= 15
        assert np.all(m[e > 0] >= 128)                    # normalised unless the exponent is at its floor
        scale = m * 2.0 ** (e - rb.SCALE_BIAS)
        assert np.all(np.abs(c * scale[:, None] - k) <= scale[:, None] * 0.5 + 1e-9 + np.maximum(
            0, np.abs(k) - qmax * scale[:, None]))
    qc, qs = rb.quantize_query(rng.normal(size=(3, 64)))
    s = rb.member_scores_int(qc, c, m, e) * qs[:, None] * 2.0 ** -rb.SCALE_BIAS
    assert np.allclose(s, (qc * qs[:, None]) @ (c * (m * 2.0 ** (e - rb.SCALE_BIAS))[:, None]).T)


def test_budget_stop_and_config():
    assert rb.budget_stop_ref(np.array([3, 4, 2, 5]), 7).tolist() == [True, True, False, False]
    assert rb.budget_stop_ref(np.array([3, 4, 2, 5]), 8).tolist() == [True, True, True, False]
    assert rb.budget_stop_ref(np.array([9]), 1).tolist() == [True]
    for bad in (dict(summary="max"), dict(cap=0), dict(budget=0.0), dict(budget=1.5), dict(bits=1), dict(shortlist=0)):
        with pytest.raises(ValueError, match="BoundedConfig"):
            rb.BoundedConfig(**bad)


def _planted(summary: str, cap: int = 8):
    """One head: 400 filler keys in few directions and one unique key the query points at; which positions the
    bounded selection fetches."""
    rng = np.random.default_rng(1)
    D = 64
    dirs = rng.normal(size=(4, D))
    keys = dirs[rng.integers(0, 4, 400)] + 0.3 * rng.normal(size=(400, D))
    keys[200] = dirs[0] + 0.3 * rng.normal(size=D)
    q = rng.normal(size=D)
    keys[200] += 4.0 * q / np.linalg.norm(q)           # a filler-cluster member with a much larger score
    cfg = rb.BoundedConfig(summary=summary, cap=cap, budget=0.01)
    t = rb.CappedClusterTable(1, D, ReSVConfig(), cfg, layer=0)
    t.add(keys[None].astype(np.float32))
    cand = np.arange(400)
    sel, st = rb.bounded_select_head(cfg, q[None] * 3, keys.astype(np.float32), t.assign[0],
                                     t.means[0].astype(np.float64), cand, t.lowbit[0] if summary == "best" else None)
    return sel, st, t


@pytest.mark.parametrize("summary", rb.SUMMARIES)
def test_budget_bounds_the_fetch(summary):
    sel, st, t = _planted(summary)
    assert 4 <= sel.size <= 4 + 8 - 1                   # ceil(1 % of 400) tokens, whole clusters of <= cap
    assert np.all(np.diff(sel) > 0) and st["clusters_selected"] >= 1
    assert max(t.counts[0]) <= 8


def test_best_member_finds_the_planted_key():
    sel, _, _ = _planted("best")
    assert 200 in sel


def test_policies_and_method_rows():
    assert {"resv_best", "resv_cuboid", "resv_capped"} <= set(methods.ALTERNATIVES)
    assert methods.SIM_METHOD["resv_best"] == "resv_best"
    p = make_policy("resv_best", cap=4, budget=0.02, bits=2, th_hp=5)
    assert (p.bounded.cap, p.bounded.budget, p.bounded.bits, p.cfg.th_hp) == (4, 0.02, 2, 5)
    assert make_policy("resv_cuboid").bounded.summary == "cuboid"
    assert make_policy("resv_capped").bounded.summary == "centroid"
    with pytest.raises(ValueError, match="unknown option"):
        make_policy("resv_best", cluster_cap=4)
    p.reset(2, 3, 64)
    g = torch.Generator().manual_seed(0)
    keys = torch.randn(3, 300, 64, generator=g)
    for s in range(0, 300, 100):
        for layer in range(2):
            p.observe(layer, keys[:, s:s + 100], s, "frame", s // 100)
    sel = p.select(1, torch.randn(9, 1, 64, generator=g), keys, torch.arange(20, 280), "text")
    assert len(sel.indices) == 3 and all(6 <= i.numel() <= 6 + 3 for i in sel.indices)  # 2 % of 260, cap 4
    assert all(bool(((i >= 20) & (i < 280)).all()) for i in sel.indices)
    assert sel.stats["lowbit_keys"] == 3 * 260 and p.counters["lowbit_keys"] == 3 * 260
    with pytest.raises(ValueError, match="observed position"):
        p.observe(0, keys[:, :10], 0, "frame", 0)


def test_simulator_model_beside_resv():
    from vrex_lib.perf.sim import simulate
    r = simulate("vrex8", "resv_best", "text", 40000, workload="paper")
    base = simulate("vrex8", "resv", "text", 40000, workload="paper")
    assert 0 < r.fps < base.fps                          # the low-bit key reads cost time at 40K
    assert r.breakdown_ms["kv_prediction"] > base.breakdown_ms["kv_prediction"]
    assert abs(r.ratio - (rb.BoundedConfig().budget + 0.5 * 8 / 40000)) < 1e-12


# ------------------------------------------------------------------------------------------------ RTL
@pytest.mark.parametrize("name", ["capped_nearest", "best_member", "budget_stop"])
def test_myhdl_blocks_bit_exact(name):
    from vrex_lib.hw import bounded as hb
    p = hb.BoundedParams(lanes=4, code_bits=16, dim=8)
    vecs = hb.RANDOM[name](80, np.random.default_rng(3), p)
    assert hb.simulate_myhdl(name, vecs, p) == dict(vectors=80, mismatches=0)
    wrong = [dict(v, ref=(v["ref"][0] + 1,) + tuple(v["ref"][1:])) for v in vecs[:5]]  # a check that can fail
    assert hb.simulate_myhdl(name, wrong, p)["mismatches"] == 5


_no_iverilog = shutil.which("iverilog") is None or shutil.which("vvp") is None


_no_verilator = shutil.which("verilator") is None


@pytest.mark.hdl
@pytest.mark.long
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
@pytest.mark.parametrize("name", ["capped_nearest", "best_member", "budget_stop"])
def test_bulk_vectors_bit_exact(name, simulator, tmp_path):
    """The blocks at the DRE's sizes, 3,000 seeded vectors each (VREX_HW_VECTORS=10000 opt-in), in Icarus and in
    Verilator (the DRE's bulk simulator)."""
    if _no_iverilog if simulator == "icarus" else _no_verilator:
        pytest.skip(f"{simulator} not installed: `make setup`")
    from vrex_lib.hw import blocks
    from vrex_lib.hw import bounded as hb
    b = blocks.spec(name)
    p = b.params(VRexCoreConfig())
    n = hb.bulk_vectors()
    vecs = b.random(n, np.random.default_rng(4), p, blocks.OperatingPoint())
    r = hb.run_verilog(name, vecs, p, tmp_path, simulator)
    assert r["simulator"] == simulator and r["vectors"] == n >= 3000 and r["mismatches"] == 0


@pytest.mark.skipif(_no_verilator, reason="verilator not installed: `make setup`")
def test_verilator_check_catches_a_mutant(tmp_path):
    """The Verilator run compares every vector: the budget stop's adder off by one fails most selected vectors."""
    from vrex_lib.hw import bounded as hb
    from vrex_lib.hw.harness import Protocol, convert, simulate
    p = hb.BoundedParams(lanes=4, code_bits=16, dim=8)
    make, ports, outs = hb.BLOCKS["budget_stop"]
    vecs = hb.RANDOM["budget_stop"](300, np.random.default_rng(6), p)
    vfile = convert(lambda P: make(**P, p=p), ports(p), "budget_stop", tmp_path / "m")
    src = vfile.read_text()
    assert src.count("n = (a + count);") == 1, "mutation site not found in the converted budget_stop.v"
    vfile.write_text(src.replace("n = (a + count);", "n = (a + count + 1);"))
    stim, meta = hb.stimulus("budget_stop", vecs, p)
    run = simulate(vfile, "budget_stop", ports(p), Protocol(outs), stim, tmp_path / "m" / "sim", "verilator")
    bad = hb.check_log("budget_stop", run, meta, p)["mismatches"]
    assert 0 < bad < len(vecs)


@pytest.mark.hdl
@pytest.mark.skipif(_no_iverilog, reason="iverilog not installed: `make setup`")
@pytest.mark.parametrize("name", ["capped_nearest", "best_member", "budget_stop"])
def test_icarus_small_and_the_check_can_fail(name, tmp_path):
    from vrex_lib.hw import bounded as hb
    p = hb.BoundedParams(lanes=4, code_bits=16, dim=8)
    make, ports, outs = hb.BLOCKS[name]
    vecs = hb.RANDOM[name](200, np.random.default_rng(5), p)
    assert hb.run_verilog(name, vecs, p, tmp_path)["mismatches"] == 0
    stim, meta = hb.stimulus(name, vecs[:50], p)
    meta[7] = dict(meta[7], ref=("x",))                  # the log check fails on a wrong reference
    vfile = hb.convert(lambda P: make(**P, p=p), ports(p), name, tmp_path / "m")
    run = hb.simulate(vfile, name, ports(p), hb.Protocol(outs), stim, tmp_path / "m" / "sim", "icarus")
    assert hb.check_log(name, run, meta, p)["mismatches"] == 1


@pytest.mark.hdl
@pytest.mark.long
@pytest.mark.skipif(_no_iverilog or shutil.which("yosys") is None, reason="iverilog/yosys not installed")
def test_core_delta_small(tmp_path):
    from vrex_lib.estimate.bounded import core_delta
    from vrex_lib.hw import bounded as hb
    df = core_delta(tmp_path, p=hb.BoundedParams(lanes=4, code_bits=16, dim=8), n_vectors=200)
    logic = df[df.kind == "logic"]
    assert len(logic) == 3 and (logic.mismatches == 0).all() and (logic.cells > 0).all()
    if not _no_verilator:
        assert (logic.verilator_vectors == 200).all() and (logic.verilator_mismatches == 0).all()
    assert (df.area_um2 > 0).all() and (df.power_mW > 0).all() and (logic.alpha > 0).all()


def test_bulk_vectors_env(monkeypatch):
    from vrex_lib.hw import bounded as hb
    monkeypatch.setenv("VREX_HW_VECTORS", "10000")
    assert hb.bulk_vectors() == 10000
    monkeypatch.setenv("VREX_HW_VECTORS", "ten")
    with pytest.raises(ValueError, match="VREX_HW_VECTORS"):
        hb.bulk_vectors()


def test_study_names_and_labels():
    from vrex_lib.longctx.grid import method_spec
    from vrex_lib.longctx.variants import variant_label
    for name in ("resv_best", "resv_cuboid", "resv_capped"):
        assert variant_label(name) == variant_label(f"{name}@text") == "beyond"
    pol = method_spec("resv_best@text").build(ReSVConfig(th_hp=6))
    assert pol.retrieves_at_frame is False and pol.inner.cfg.th_hp == 6 and pol.inner.bounded.cap == 8


def test_study_budget_part_sets_the_token_budget_of_a_bounded_variant_only():
    from vrex_lib.longctx.grid import method_spec
    pol = method_spec("resv_best@text-b0.015").build(ReSVConfig())
    assert pol.inner.bounded.budget == 0.015 and pol.inner.bounded.cap == 8
    assert method_spec("resv_cuboid@b0.03").build(ReSVConfig()).bounded.budget == 0.03
    for bad, why in (("resv@text-b0.01", "unknown variant"), ("resv_best@text-b0", "token budget"),
                     ("resv_best@text-b1.5", "token budget")):
        with pytest.raises(ValueError, match=why):
            method_spec(bad)


def test_frame_budget_sets_the_bounded_variants_token_budget_and_leaves_the_study_sweep():
    """resv_best's Budget record sweeps its token budget at the frame stage only: the policy gets ``budget`` (not
    Th_r-wics, though a ReSVConfig configures it too), and the long-context study's equal-budget curves are
    unchanged."""
    from vrex_lib.longctx import frame_budget as FB
    from vrex_lib.longctx import grid
    pols = FB.budget_policies(ReSVConfig(th_r_wics=0.3, th_hp=6), budgets={"resv_best": (0.04,), "resv": (0.7,)})
    best, resv = pols["resv_best@0.04"], pols["resv@0.7"]
    assert best.bounded.budget == 0.04 and best.cfg.th_r_wics == 0.3 and best.cfg.th_hp == 6
    assert resv.cfg.th_r_wics == 0.7 and resv.cfg.th_hp == 6
    assert "resv_best" in FB.FRAME_BUDGETS and "resv_best" not in grid.BUDGET_TAGS
    assert not any(m.startswith("resv_best") for m in grid.BUDGET_METHODS)
    with pytest.raises(ValueError, match="no budget knob for resv_cuboid"):
        FB.budget_policies(budgets={"resv_cuboid": (0.01,)})
    with pytest.raises(SystemExit):
        FB.main(["--families", "exact,nope", "--out", "/tmp/x.csv"])


def test_at_equal_fetch_interpolates_the_reference_curve_without_extrapolating():
    import pandas as pd

    from vrex_lib.longctx.frame_budget import at_equal_fetch
    s = pd.DataFrame(dict(
        family=["resv"] * 2 + ["resv_best"] * 3, method=["r@1", "r@2", "b@1", "b@2", "b@3"], steps=3,
        fetched_frac_offloaded=[0.02, 0.06, 0.04, 0.01, 0.05],
        attn_rel_error=[0.4, 0.2, 0.25, 0.1, 0.3], kl_vs_full=[1.0, 0.2, 0.7, 0.1, 0.1],
        top1_agreement=[0.5, 0.9, 0.8, 1.0, 0.6]))
    t = at_equal_fetch(s, "resv", "resv_best").set_index(["method", "quantity"])
    assert t.loc[("b@1", "attn_rel_error"), "resv_at_equal_fetch"] == pytest.approx(0.3)   # midway 0.4 -> 0.2
    assert t.loc[("b@1", "attn_rel_error"), "b_not_worse"] is True                          # 0.25 <= 0.3
    assert t.loc[("b@1", "kl_vs_full"), "b_not_worse"] is False                             # 0.7 > 0.6
    assert t.loc[("b@1", "top1_agreement"), "b_not_worse"] is True                          # 0.8 >= 0.7
    assert t.loc[("b@3", "top1_agreement"), "b_not_worse"] is False                         # 0.6 < 0.8
    assert np.isnan(t.loc[("b@2", "kl_vs_full"), "resv_at_equal_fetch"])                   # below resv's range
    assert t.loc[("b@2", "kl_vs_full"), "b_not_worse"] is None
    with pytest.raises(ValueError, match="no rows of exact"):
        at_equal_fetch(s, "exact", "resv_best")
    s2 = s.assign(selected_frac=[0.1, 0.3, 0.2, 0.05, 0.4])                                # along the selected share
    t2 = at_equal_fetch(s2, "resv", "resv_best", x="selected_frac").set_index(["method", "quantity"])
    assert t2.loc[("b@1", "attn_rel_error"), "resv_at_equal_fetch"] == pytest.approx(0.3)
    assert np.isnan(t2.loc[("b@3", "attn_rel_error"), "resv_at_equal_fetch"])              # above resv's range
    with pytest.raises(ValueError, match="selected_frac"):
        at_equal_fetch(s, "resv", "resv_best", x="kv_len")


def test_fps_energy_rows_beside_the_papers_resv_are_info():
    """Notebook 06's table (claims.bounded): both methods per (system, stage, length), INFO rows only (no paper
    value), the bounded ReSV's fetch bounded by its budget at the frame stage, the blocks' energy only when given."""
    from vrex_lib.claims import bounded as CB
    from vrex_lib.report import to_frame
    df = CB.fps_energy_frame((1000, 40000), systems=("vrex8",))
    assert len(df) == 2 * 2 * 3 and df.blocks_mJ[df.method != "resv"].isna().all()
    t = df.set_index(["stage", "kv_len", "method"])
    assert t.loc[("frame", 40000, "resv_best"), "fetched_pct"] < t.loc[("frame", 40000, "resv"), "fetched_pct"]
    assert (df.fps > 0).all() and (df.energy_mJ > 0).all()
    with_blocks = CB.fps_energy_frame((40000,), delta_mw=4.0, systems=("vrex8",)).set_index(["stage", "method"])
    b = with_blocks.loc[("frame", "resv_best")]
    assert b.blocks_mJ == pytest.approx(4.0 * 8 * b.latency_ms * 1e-3) and b.blocks_mJ > 0
    rows = to_frame(CB.fps_energy_rows(df), "smoke")
    assert len(rows) == 2 * 2 * 2 * 2 and (rows.verdict == "INFO").all() and rows.paper.isna().all()
    with pytest.raises(ValueError, match="delta_mw"):
        CB.fps_energy_frame((1000,), delta_mw=-1.0)


def test_findings_row_reads_the_three_notebooks_data_and_names_what_is_missing(tmp_path):
    import pandas as pd

    from vrex_lib.claims import bounded as CB
    row = CB.finding(tmp_path)
    assert row["kind"] == "not-run" and "09_retrieval_demand" in row["evidence"] and "06_performance" in row["evidence"]
    pd.DataFrame([dict(method=m, task="passkey", context_tokens=1000, n=4, correct=c, fetched_frac_offloaded=f)
                  for m, c, f in (("full", 4, 1.0), ("resv_best@text", 3, 0.015))]).to_csv(
        tmp_path / "retrieval_demand_power.csv", index=False)
    pd.DataFrame(dict(area_um2=[100.0, 300.0], power_mW=[1.0, 1.0])).to_csv(tmp_path / "bounded_core_delta.csv")
    pd.DataFrame(dict(area_mm2=[0.04], power_mW=[200.0])).to_csv(tmp_path / "core_breakdown.csv")
    pd.DataFrame([dict(system="vrex8", stage=s, kv_len=40000, method=m, fps=f) for s in ("frame", "text")
                  for m, f in (("resv", 2.0), ("resv_best", 8.0))]).to_csv(tmp_path / "bounded_fps_energy.csv")
    row = CB.finding(tmp_path)
    assert row["kind"] == "beyond"
    for part in ("passkey 1K 3/4 (full 4/4) at 1.50 % fetched", "+400 um2 (+1.00 % of the core)", "+2.00 mW (+1.00 %)",
                 "vrex8 frame 40K: 2.00 -> 8.00 FPS"):
        assert part in row["evidence"], row["evidence"]
