"""Notebook 04's claim rows (vrex_lib.claims.dre) on hand-made inputs: values, verdicts and causes."""
from __future__ import annotations

import pandas as pd
import pytest

from vrex_lib import report
from vrex_lib.claims import dre
from vrex_lib.hw.activity import BlockActivity


def _ee(frame_clusters, frame_selected, text_clusters=(40, 60), text_selected=(1, 2)) -> pd.DataFrame:
    rows = [dict(source="frame", layer=3, clusters=n, selected=k, consumed_frac=k / n, scans=1 + i % 2,
                 cycles=20, resolve=2) for i, (n, k) in enumerate(zip(frame_clusters, frame_selected))]
    rows += [dict(source="text", layer=15, clusters=n, selected=k, consumed_frac=k / n, scans=2, cycles=40,
                  resolve=3) for n, k in zip(text_clusters, text_selected)]
    return pd.DataFrame(rows)


def _summary(bulk: bool = True, synth: bool = True, bad: int = 0) -> dict:
    blocks = {}
    for b in ("hcu", "wtu", "kvmu"):
        blocks[b] = dict(mismatches=bad if b == "wtu" else 0, verilog=dict(mismatches=0) if bulk else None,
                         bulk=dict(simulator="verilator", vectors=10_000, mismatches=0) if bulk else None,
                         synth=dict(cells=1000) if synth else None)
    return dict(verilog_checks="run" if bulk else "skipped (--no-verilog)", blocks=blocks)


def _per_frame() -> pd.DataFrame:
    return pd.DataFrame(dict(source=["frame", "frame", "text"], us_hcu=[0.01, 0.03, 0.05], us_wtu=[0.2, 0.4, 0.6]))


KVM = pd.DataFrame(dict(txn_contiguous=[2, 2], txn_scattered=[6, 8]))


def test_early_exit_evidence_by_hand():
    ev = dre.early_exit_evidence(_ee([2, 4, 20], [1, 1, 2]))
    assert ev["rows"] == 3 and ev["clusters_mean"] == pytest.approx(26 / 3) and ev["clusters_median"] == 4
    assert ev["floor_pct"] == pytest.approx(100 * (1 / 2 + 1 / 4 + 1 / 20) / 3)  # one cluster per row at least
    assert ev["consumed_pct"] == pytest.approx(100 * (0.5 + 0.25 + 0.1) / 3)
    assert ev["large_rows"] == 1 and ev["large_consumed_pct"] == pytest.approx(10.0)  # only the 20-cluster row
    with pytest.raises(ValueError, match="no 'frame' rows"):
        dre.early_exit_evidence(_ee([], []))


def test_small_rows_make_it_the_workload_with_the_floor_named():
    cause, detail = dre.early_exit_cause(_ee([2, 4, 20], [1, 1, 2]), mismatches=0)
    assert cause == "stand-in-workload"
    assert "floor alone is 26.7 %" in detail and "0 mismatches" in detail and "8.7 clusters" in detail
    assert "the 1 frame rows with >= 16 clusters consume 10.0 %" in detail and "text rows (50 clusters" in detail


def test_large_rows_with_a_high_share_point_at_the_scores_not_the_floor():
    cause, detail = dre.early_exit_cause(_ee([100, 200], [40, 80]), mismatches=0)  # floor 0.75 % << 16 %
    # no measured quantity of the stand-in drives it (the floor is far below): our score convention, not the workload
    assert cause == "model" and "D1" in detail and "no measured quantity" in detail


def test_mismatches_make_it_the_model():
    cause, detail = dre.early_exit_cause(_ee([2, 4], [1, 1]), mismatches=3)
    assert cause == "model" and detail.startswith("3 mismatches")


def test_dre_rows_order_verdicts_and_causes():
    acts = [BlockActivity("wtu", cycles=100, vectors=10, signal_bits=50, toggles=500, flop_bits=20,
                          flop_toggles=100, source="icarus VCD", real_vectors=5, simulator="icarus")]
    rows = dre.dre_rows(_summary(), _ee([2, 4, 6], [1, 1, 1]), _per_frame(), KVM, activity=acts)
    claims = [r.claim for r in rows]
    assert claims[:2] == ["dre.early_exit_pct.frame", "dre.early_exit_pct.text"]
    assert claims[2:7] == [f"dre.mem_bytes.{k}" for k in ("hcu_cur_hash", "hcu_key_hash", "wtu_score", "wtu_count",
                                                           "total")]
    assert claims[-2:] == ["dre.toggle_rate.wtu", "dre.flop_toggle_rate.wtu"]
    by = {r.claim: r for r in rows}
    # the WTU's share is shown, not graded: the 16 % claim is graded once, on the ReSV rule (D223)
    exit_row = by["dre.early_exit_pct.frame"]
    assert exit_row.reproduced == pytest.approx(100 * (1 / 2 + 1 / 4 + 1 / 6) / 3)
    assert exit_row.verdict() == report.INFO_V and "resv.wicsum_row_prefix_pct" in exit_row.note
    assert "stand-in-workload" in exit_row.note
    # memories sized from Fig. 10 hold by construction
    assert all(by[f"dre.mem_bytes.{k}"].verdict() == report.CONSISTENT for k in ("total", "wtu_score"))
    assert by["dre.kvmu_txn_ratio"].reproduced == 3.5  # 14 / 4
    assert by["dre.wtu_scans_per_row"].reproduced == pytest.approx(4 / 3)  # scans 1, 2, 1
    assert by["dre.hcu_us_per_frame"].reproduced == pytest.approx(0.02)
    assert by["dre.toggle_rate.wtu"].reproduced == pytest.approx(0.1)  # 500 / (50 · 100)
    assert by["dre.flop_toggle_rate.wtu"].reproduced == pytest.approx(0.05)
    assert by["dre.cells.kvmu"].reproduced == 1000 and by["dre.mismatches"].reproduced == 0
    assert dre.check_rows_have_causes(rows) == []


def test_skipped_verilog_checks_are_not_run_with_their_reason():
    rows = dre.dre_rows(_summary(bulk=False, synth=False), _ee([2, 4], [1, 1]), _per_frame(), KVM)
    bulk = [r for r in rows if r.claim.startswith("dre.bulk_vectors.")]
    assert len(bulk) == 3 and all(r.verdict() == report.MISSING and r.cause == "not-run" for r in bulk)
    assert "--no-verilog" in bulk[0].cause_detail and "make setup" in bulk[0].cause_detail
    assert not [r for r in rows if r.claim.startswith("dre.cells.")]  # not synthesised: no cell rows
    assert dre.check_rows_have_causes(rows) == []


def test_check_rows_have_causes_finds_an_unexplained_fail():
    r = report.row("resv.wicsum_row_prefix_pct", 40.0)
    assert dre.check_rows_have_causes([r]) == ["resv.wicsum_row_prefix_pct"]
