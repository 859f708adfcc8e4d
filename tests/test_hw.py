"""DRE MyHDL blocks vs the software ReSV reference (bit for bit), cycle models vs simulation, edge cases."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrex_lib import paper
from vrex_lib.config import VRexCoreConfig
from vrex_lib.hw import fixedpoint as fx
from vrex_lib.hw import timing, walk
from vrex_lib.hw.dre import dre_memory_bytes
from vrex_lib.hw.hcu import HCUParams, simulate_hcu
from vrex_lib.hw.kvmu import prefetch_requests, scattered_requests, simulate_kvmu
from vrex_lib.hw.vectors import (load_traces, random_hcu_frames, random_wtu_rows, trace_hcu_frames, trace_sources,
                                 trace_wtu_rows)
from vrex_lib.hw.wtu import WTUParams
from vrex_lib.hw.wtu_driver import simulate_wtu
from vrex_lib.resv import reference as resv_ref

RATIO = 0.3
RQ = fx.quantize_ratio(RATIO)


def _check_hcu(frames, th=7, p=HCUParams()):
    res = simulate_hcu(frames, th, p)
    state = np.zeros(0, dtype=np.int64)
    for (old, new), r in zip(frames, res):
        if old is not None:
            state = np.asarray(old, dtype=np.int64)
        a, after = resv_ref.cluster_ref([int(x) for x in new], [int(x) for x in state], th)
        assert r.assignment.tolist() == a
        assert r.n_clusters == len(after)
        n_before = [len(state) + len({x for x in a[:t] if x >= len(state)}) for t in range(len(new))]
        assert r.cycles == timing.hcu_cycles_trace(n_before, VRexCoreConfig(n_hcu_w=p.lanes))
        state = np.asarray(after, dtype=np.int64)
    return res


def test_hcu_random_matches_reference_and_cycle_model():
    rng = np.random.default_rng(1)
    _check_hcu(random_hcu_frames(160, rng, HCUParams()))


def test_hcu_edge_cases():
    c = 0x0F0F0F0F
    frames = [
        (np.zeros(0, dtype=np.int64), np.array([c, c, c ^ 1])),  # empty table: first token opens, rest join
        (np.array([c ^ 0b11, c ^ 0b1100]), np.array([c])),  # tie at distance 2 -> lowest index
        (np.array([c]), np.array([c ^ 0x7F, c ^ 0x3F])),  # distance 7 is not < 7 (opens); 6 joins
        (np.array([0xFFFFFFFF] * 20), np.array([0xFFFFFFFF, 0])),  # 20 clusters (2 rows), lowest index wins
        (None, np.arange(32) * 0x01010101),  # continue from previous frame, full current memory (32 codes)
    ]
    _check_hcu(frames)
    _check_hcu([(np.array([c]), np.array([c, c ^ 1]))], th=0)  # Th = 0: nothing ever joins


def _traces_or_skip(source):
    tr = load_traces()
    if tr is None:
        pytest.skip("data/traces/dre_traces.npz missing: run `.venv/bin/python data/make_dre_traces.py`")
    assert source in trace_sources(tr), "regenerate data/traces/dre_traces.npz: `.venv/bin/python data/make_dre_traces.py`"
    return tr


@pytest.mark.parametrize("source", ["text", "frame"])
def test_hcu_real_trace(source):
    tr = _traces_or_skip(source)
    frames = trace_hcu_frames(tr, max_frames=12, source=source)
    res = _check_hcu(frames)
    # the hardware's assignments also equal the software ReSV table's, recorded by the trace script
    pre = "" if source == "text" else "frame_"
    n = sum(len(new) for _, new in frames)
    assert np.concatenate([r.assignment for r in res]).tolist() == tr[pre + "hcu_ref_assign"][:n].tolist()
    assert [r.n_clusters for r in res] == tr[pre + "hcu_ref_ncl"][:len(frames)].tolist()


def _check_wtu(rows, ratio=RATIO, p=WTUParams()):
    res, _ = simulate_wtu(rows, fx.quantize_ratio(ratio), p)
    for (w, c), r in zip(rows, res):
        want = resv_ref.wicsum_select_ref(np.asarray(w, dtype=np.int64)[None], np.asarray(c, dtype=np.int64),
                                          ratio)[0]
        assert r.selected.tolist() == want.tolist(), (w, c)
        sc = r.state_cycles
        cfg = VRexCoreConfig(n_wtu_w=p.lanes)
        assert r.cycles == timing.wtu_row_cycles(len(w), r.scans, sc.get("RES_G", 0), sc.get("RES_L", 0), cfg)
        assert r.cycles <= timing.wtu_cycles(1, len(w), r.scans, cfg, resolve=None)  # resolve at its upper bound
    return res


def test_wtu_edge_cases():
    M, C = fx.W_MAX, fx.C_MAX
    rows = [
        (np.full(40, 1234), np.arange(40) % 5),  # all scores equal -> by index
        (np.array([777]), np.array([3])),  # a single cluster
        (np.array([5, 9, 9, 1]), np.zeros(4, dtype=np.int64)),  # Sum = 0 -> all selected
        (np.array([M, 3, 2, 1] + [0] * 30), np.array([10, 1, 1, 1] + [1] * 30)),  # first bucket crosses
        (np.full(4096, M), np.full(4096, C)),  # every entry at its maximum: accumulator range (no saturation)
        (np.array([0, 0, 5, 0]), np.array([4, 0, 2, 9])),  # zero weights and zero counts mixed
        (np.array([100, 100, 50, 100, 50]), np.array([1, 0, 3, 1, 7])),  # ties across rows of the walk
    ]
    _check_wtu(rows)
    _check_wtu(rows[:4], ratio=1.0)  # nothing exceeds Th = Sum -> all
    _check_wtu(rows[:4], ratio=0.0)  # first nonzero product exits


def test_wtu_random_matches_reference_and_cycle_model():
    rng = np.random.default_rng(2)
    _check_wtu(random_wtu_rows(36, rng, 256), p=WTUParams(n_max=256))


@pytest.mark.parametrize("source", ["text", "frame"])
def test_wtu_real_rows_and_aggregate(source):
    tr = _traces_or_skip(source)
    pre = "" if source == "text" else "frame_"
    rows = trace_wtu_rows(tr, source=source)
    frame_of = tr[pre + "wtu_row_frame"]
    groups = list(dict.fromkeys(frame_of.tolist()))  # recorded frames, in KVMU-selection order
    sizes = [len(rows[int(np.argmax(frame_of == g))][0]) for g in groups]
    st = tr[pre + "kvmu_start"]
    for gi in sorted({0, int(np.argmax(sizes))}):  # the first recorded frame and the one with most clusters
        grp = [r for r, f in zip(rows, frame_of) if f == groups[gi]]  # rows of one frame share the clusters
        res, agg = simulate_wtu(grp, RQ, WTUParams(), aggregate=True)
        sel = np.stack([r.selected for r in res])
        want = resv_ref.wicsum_select_ref(np.stack([w for w, _ in grp]), grp[0][1], RATIO)
        assert (sel == want).all()
        assert (agg == want.any(0)).all()
        assert agg.astype(np.int64).tolist() == tr[pre + "kvmu_selected"][st[gi]:st[gi + 1]].tolist()  # software


def test_kvmu_matches_reference():
    rng = np.random.default_rng(3)
    sels = [(rng.random(C) < rng.random(), rng.integers(0, 4, C)) for C in rng.integers(1, 30, 60)]
    sels.append((np.array([True, False, True]), np.array([2, 0, 3])))  # an empty unselected cluster: one run
    for (reqs, cyc), (s, c) in zip(simulate_kvmu(sels, 256), sels):
        assert reqs == prefetch_requests(s, c, 256)
        assert cyc == timing.kvmu_cycles(len(c))
    assert prefetch_requests(np.array([True, False, True]), np.array([2, 0, 3]), 10) == [(0, 50)]


def test_cluster_layout_needs_fewer_transactions_than_scattered():
    rng = np.random.default_rng(4)
    assign = rng.integers(0, 20, 400)  # tokens of a cluster interleaved in arrival order
    counts = np.bincount(assign, minlength=20)
    sel = np.zeros(20, bool)
    sel[[2, 3, 11]] = True
    contiguous = prefetch_requests(sel, counts, 64)
    scattered = scattered_requests(assign, sel, 64)
    assert len(contiguous) == 2 and sum(n for _, n in contiguous) == sum(n for _, n in scattered)
    assert len(scattered) > len(contiguous)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, (1 << 44) - 1), st.integers(0, 1 << 16), st.integers(0, (1 << 44) - 1))
def test_threshold_rule_equals_software_rule(total, r_q, acc):
    # WTU: Acc > floor(Sum·r_q / 2^16); software: Acc·2^16 > r_q·Sum
    assert (acc > fx.threshold(total, r_q)) == (acc * (1 << 16) > r_q * total)


def test_memories_match_fig10():
    m = dre_memory_bytes()
    assert m["total"] == paper.value("dre.mem_bytes.total")
    assert HCUParams.from_core().cur_depth * 4 == paper.value("dre.mem_bytes.hcu_cur_hash")
    assert HCUParams.from_core().depth * 4 == paper.value("dre.mem_bytes.hcu_key_hash")
    assert WTUParams.from_core().n_max * 2 == paper.value("dre.mem_bytes.wtu_score")


def test_timing_models():
    cfg = VRexCoreConfig()
    assert timing.hcu_cycles(10, 0, cfg) == 10 + 1
    assert timing.hcu_cycles(10, 100, cfg) == 10 * 7 + 1
    assert timing.hcu_cycles(10, 100, cfg, n_opened=10) >= timing.hcu_cycles(10, 100, cfg)
    assert timing.hcu_cycles(32, 2000, cfg) > 32 * 125  # tiled: tile loads added
    assert timing.wtu_row_cycles(100, 3, 2, 5, cfg) == 7 * 5 + 2 + 7
    assert timing.cycles_to_us(800, cfg) == pytest.approx(1.0)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="key memory depth"):
        simulate_hcu([(np.zeros(1020, dtype=np.int64), np.zeros(10, dtype=np.int64))], 7)
    with pytest.raises(ValueError, match="16-bit"):
        simulate_wtu([(np.array([70000]), np.array([1]))], RQ)
    with pytest.raises(ValueError, match="code_bits"):
        HCUParams(code_bits=24).check()


def test_wtu_walk_by_hand_fig11_toy():
    # The Fig. 11 toy row (Σ w·c = 1000, min/max 0/40) at ratio 0.8, walked by hand:
    # r_q = round(0.8·2^16) = 52429, Th = floor(1000·52429 / 2^16) = 800; max - min = 40 -> s = 2 (40 >> 2 = 10 < 16),
    # buckets of width 4 from lo = 40: [40,44) 200 -> 200; [36,40) 228 -> 428; [32,36) 140 -> 568;
    # [28,32) 180 -> 748; [20,24) 110 -> 858 > 800: crossed at the 5th scan, one distinct weight (22) -> RES_G
    # (1 row) then RES_L up to lane 4: j_cut = 4. Selected: clusters 0..4. Cycles: G·(2 + 5) + 2 + 1 + 5 = 15.
    w = np.array([40, 38, 35, 30, 22, 18, 12, 9, 4, 0])
    c = np.array([5, 6, 4, 6, 5, 3, 2, 4, 7, 3])
    rq = fx.quantize_ratio(0.8)
    assert rq == 52429 and fx.threshold(int(w @ c), rq) == 800
    want_sel = [True] * 5 + [False] * 5
    ref = walk.wtu_walk_ref(w, c, rq)
    assert (ref.scans, ref.resolve_rows, ref.resolve_lanes, ref.cycles) == (5, 1, 5, 15)
    assert ref.selected.tolist() == want_sel
    assert [b[1] for b in ref.buckets] == [40, 36, 32, 28, 20]
    (r,), _ = simulate_wtu([(w, c)], rq, WTUParams())
    assert (r.scans, r.cycles, r.state_cycles["RES_G"], r.state_cycles["RES_L"]) == (5, 15, 1, 5)
    assert r.selected.tolist() == want_sel


def test_wtu_walk_reference_equals_myhdl_and_the_selection_rule():
    rng = np.random.default_rng(5)
    rows = random_wtu_rows(30, rng, 256)
    p = WTUParams(n_max=256)
    res, _ = simulate_wtu(rows, RQ, p)
    for (w, c), r in zip(rows, res):
        ref = walk.wtu_walk_ref(w, c, RQ, p)
        assert ref.selected.tolist() == r.selected.tolist()
        assert ref.selected.tolist() == fx.wicsum_select_ref(w, c, RATIO).tolist()
        assert (ref.scans, ref.resolve_rows, ref.resolve_lanes, ref.cycles) == (
            r.scans, r.state_cycles.get("RES_G", 0), r.state_cycles.get("RES_L", 0), r.cycles)


def test_measured_scans_constants_equal_the_walk_reference_on_the_trace():
    # timing.MEASURED_* are means over the recorded text rows; recompute them with the Python walk model (no RTL;
    # equal to the MyHDL WTU row by row, test above) rather than comparing the RTL with a copy of its own output.
    tr = load_traces()
    if tr is None:
        pytest.skip("data/traces/dre_traces.npz missing: run `.venv/bin/python data/make_dre_traces.py`")
    refs = [walk.wtu_walk_ref(w, c, RQ) for w, c in trace_wtu_rows(tr)]
    assert len(refs) == 810
    assert np.mean([r.scans for r in refs]) == pytest.approx(timing.MEASURED_SCANS_PER_ROW, abs=5e-5)
    assert np.mean([r.resolve_rows + r.resolve_lanes for r in refs]) == pytest.approx(
        timing.MEASURED_RESOLVE_PER_ROW, abs=5e-5)
    # and the RTL agrees on a slice of the same rows
    rows = trace_wtu_rows(tr, max_rows=40)
    res, _ = simulate_wtu(rows, RQ, WTUParams())
    assert [r.scans for r in res] == [x.scans for x in refs[:40]]
