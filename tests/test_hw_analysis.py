"""Notebook 04's tables computed in vrex_lib.hw.analysis, checked on hand-made inputs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from vrex_lib import paper
from vrex_lib.config import VRexCoreConfig
from vrex_lib.hw import analysis, timing
from vrex_lib.hw import fixedpoint as fx
from vrex_lib.hw.vectors import load_traces, trace_sources, trace_wtu_rows
from vrex_lib.hw.walk import wtu_walk_ref
from vrex_lib.hw.hcu import HCUFrameResult
from vrex_lib.hw.wtu import WTUParams
from vrex_lib.hw.wtu_driver import WTURowResult


def test_kv_bytes_per_token_head():
    assert analysis.kv_bytes_per_token_head(64) == 256  # K + V, 64 dims, 2 B each
    assert analysis.kv_bytes_per_token_head(128, 1) == 256
    with pytest.raises(ValueError, match="head_dim"):
        analysis.kv_bytes_per_token_head(0)


def test_fig10_memory_bytes_equal_the_paper():
    mem = analysis.fig10_memory_bytes()
    assert set(mem) == {f"dre.mem_bytes.{k}" for k in ("hcu_cur_hash", "hcu_key_hash", "wtu_score", "wtu_count",
                                                       "total")}
    for k, v in mem.items():
        assert v == paper.value(k), k
    assert mem["dre.mem_bytes.total"] == 128 + 4096 + 8192 + 8192


def test_kvmu_layout_table_by_hand():
    # 3 clusters of 2, 1, 2 tokens; clusters 0 and 1 selected. Arrival order of the 5 tokens: clusters 0,2,1,2,0.
    # Contiguous: clusters 0,1 adjacent -> one transaction of 3 tokens. Scattered: selected tokens at arrival
    # positions 0, 2, 4 -> three transactions of one token.
    tr = dict(kvmu_start=np.array([0, 3]), kvmu_selected=np.array([1, 1, 0]), kvmu_counts=np.array([2, 1, 2]),
              kvmu_assign_start=np.array([0, 5]), kvmu_assign=np.array([0, 2, 1, 2, 0]))
    t = analysis.kvmu_layout_table(tr, 100, bandwidth_bps=1e6, per_txn_s=1e-3)
    assert t.loc[0, ["clusters", "selected", "tokens", "txn_contiguous", "txn_scattered", "bytes"]].tolist() == \
        [3, 2, 3, 1, 3, 300]
    assert t.loc[0, "us_contiguous"] == pytest.approx(1e3 + 300)  # 1 ms + 300 B at 1 MB/s
    assert t.loc[0, "us_scattered"] == pytest.approx(3e3 + 300)
    assert analysis.txn_ratio(t) == 3.0


def test_early_exit_summary_by_hand():
    ee = pd.DataFrame(dict(source=["frame", "frame", "text"], layer=[3, 3, 15], clusters=[4, 6, 10],
                           consumed_frac=[0.25, 0.5, 0.1], selected=[1, 3, 1], scans=[1, 3, 2], cycles=[9, 11, 20],
                           resolve=[2, 4, 6]))
    s = analysis.early_exit_summary(ee)
    assert s.loc["frame", "consumed_pct"] == pytest.approx(37.5)  # mean of 25 % and 50 %
    assert s.loc["frame", "consumed_pct_cluster_weighted"] == pytest.approx(40.0)  # 4 of 10 clusters
    assert s.loc["text", "rows"] == 1 and s.loc["frame", "scans_mean"] == 2


def test_early_exit_table_rejects_ragged_inputs():
    with pytest.raises(ValueError, match="one of each per row"):
        analysis.early_exit_table([(np.ones(2), np.ones(2))], [], ["text"], [0])


def test_dre_cycle_sweep_by_hand():
    cfg = VRexCoreConfig()
    sw = analysis.dre_cycle_sweep([1000], 32, tokens_per_frame=10, n_kv_heads=8, group=4, scans_per_row=1.5,
                                  resolve_per_row=4.0, cfg=cfg)
    r = sw.iloc[0]
    assert r.clusters == 32  # ceil(1000 / 32)
    assert r.hcu_cycles_per_head == 10 * 2 + 1  # 10 tokens x ceil(32 / 16) rows + DONE
    # 40 rows on 1 WTU core: G = 2 -> 2·(2 + 1.5) + 2 + 4 = 13 cycles per row
    assert r.wtu_cycles_per_head == int(np.ceil(40 / cfg.n_wtu_h)) * 13
    assert r.dre_cycles_per_layer == 8 * (r.hcu_cycles_per_head + r.wtu_cycles_per_head)
    assert r.dre_us_per_layer == pytest.approx(r.dre_cycles_per_layer / 800)
    assert timing.cycles_to_us(800, cfg) == pytest.approx(1.0)


def test_wtu_walk_stats_equal_the_walk_reference_on_the_same_rows():
    tr = load_traces()
    if tr is None:
        pytest.skip("data/traces/dre_traces.npz missing: run `.venv/bin/python data/make_dre_traces.py`")
    got = analysis.wtu_walk_stats(0.3, 16, 8, 3)
    rows = [r for s in trace_sources(tr) for r in trace_wtu_rows(tr, max_rows=3, source=s)]
    refs = [wtu_walk_ref(w, c, fx.quantize_ratio(0.3), WTUParams(lanes=16, n_buckets=8)) for w, c in rows]
    assert got["rows"] == len(rows) == 3 * len(trace_sources(tr))
    assert got["scans_per_row"] == pytest.approx(np.mean([r.scans for r in refs]))
    assert got["resolve_per_row"] == pytest.approx(np.mean([r.resolve_rows + r.resolve_lanes for r in refs]))
    assert got["cycles_per_row"] == pytest.approx(np.mean([r.cycles for r in refs]))
    assert got["clusters_per_row"] == pytest.approx(np.mean([len(w) for w, _ in rows]))


def _tiny_trace() -> dict:
    # text: 2 recorded frames (layers 0, 5; head 1, 2), rows 0, 1 -> frame 0 and row 2 -> frame 1; frame: 1 frame
    return {"hcu_frame_layer": np.array([0, 5]), "hcu_frame_head": np.array([1, 2]),
            "wtu_row_frame": np.array([0, 0, 1]), "frame_hcu_frame_layer": np.array([7]),
            "frame_hcu_frame_head": np.array([0]), "frame_wtu_row_frame": np.array([0, 0])}


def test_real_row_layers_and_breakdown_by_hand():
    tr = _tiny_trace()
    assert analysis.real_row_layers(tr, ["text", "text", "text", "frame"]).tolist() == [0, 0, 5, 7]
    ee = pd.DataFrame(dict(source=["text", "text", "frame"], layer=[0, 0, 7], clusters=[3, 40, 5],
                           consumed_frac=[1 / 3, 0.05, 0.2]))
    by_layer, by_clusters = analysis.early_exit_breakdown(ee)
    assert by_layer.loc[("text", 0), "rows"] == 2 and by_layer.loc[("text", 0), "clusters_mean"] == 21.5
    assert by_layer.loc[("frame", 7), "consumed_pct"] == pytest.approx(20.0)
    assert by_clusters["size"].tolist() == [1, 1, 1]  # bins (0, 4], (32, 64] for text; (4, 8] for frame


def test_trace_cycles_table_by_hand():
    res = dict(hcu=dict(real=[HCUFrameResult(np.zeros(1), 4, 800), HCUFrameResult(np.zeros(1), 6, 1600),
                              HCUFrameResult(np.zeros(1), 2, 80)], real_source=["text", "text", "frame"]),
               wtu=dict(real=[WTURowResult(np.zeros(1, bool), c, 1) for c in (100, 300, 50, 8, 8)],
                        real_source=["text", "text", "text", "frame", "frame"]))
    t = analysis.trace_cycles_table(res, _tiny_trace(), VRexCoreConfig())
    assert t.source.tolist() == ["frame", "text", "text"]
    text = t[t.source == "text"]
    assert text.wtu_cycles.tolist() == [400, 50] and text.rows.tolist() == [2, 1]  # rows 0+1 -> frame 0
    assert text.layer.tolist() == [0, 5] and text.clusters.tolist() == [4, 6]
    assert text.us_hcu.tolist() == pytest.approx([1.0, 2.0])  # 800 and 1600 cycles at 800 MHz
    assert t[t.source == "frame"].wtu_cycles.tolist() == [16]
