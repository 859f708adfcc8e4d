"""The long-context study with power (docs/DECISIONS.md D481, D482): the default grid's cells, the paired exact test,
the Wilson intervals and the budget tags."""
from __future__ import annotations

import collections
import math

import pandas as pd
import pytest

from vrex_lib import longctx, methods
from vrex_lib.longctx import power
from vrex_lib.longctx.grid import BUDGET_METHODS, POWER_METHODS


def test_default_make_reproduce_share_runs_every_power_method_on_the_same_trials():
    """make reproduce's share (D485): the five sweep trials (2 per passkey cell at 1K and 2K, 1 needle trial at 1K),
    the same trials for every compared method, so the paired tests pair."""
    g = longctx.study_grid("default")
    cells = collections.defaultdict(set)
    for cell in g.trials():
        for m in g.cell_methods(cell):
            if m in POWER_METHODS:
                cells[(m, cell[0], cell[1])].add(cell)
    assert len(cells) == len(POWER_METHODS) * 3
    assert {k[1:]: len(v) for k, v in cells.items()} == {("passkey", 1000): 2, ("passkey", 2000): 2, ("needle", 1000): 1}
    for key in {k[1:] for k in cells}:
        assert len({frozenset(v) for k, v in cells.items() if k[1:] == key}) == 1  # paired: the same trials


def test_power_grid_has_40_trials_per_power_cell_at_1k_and_2k():
    g = longctx.study_grid("default", "power")
    n = collections.Counter()
    for cell in g.trials():
        for m in g.cell_methods(cell):
            n[(m, cell[0], cell[1])] += 1
    for m in POWER_METHODS:
        for task in longctx.TASKS:
            for length in (1000, 2000):
                assert n[(m, task, length)] >= 40, (m, task, length)
    depths = {c[2] for c in g.trials() if "resv" in g.cell_methods(c)}
    assert min(depths) <= 0.1 and max(depths) >= 0.9 and len(depths) >= 10  # spread over the document
    # the methods the issue names, and every 'alternative' of the study from the method table
    for m in ("full", "resv", "resv@text", "resv_noclust@text", "exact@k0.01", "infinigen", "rekv", "streamingllm"):
        assert m in POWER_METHODS
    for m in methods.LONGCTX:
        if methods.METHODS[m].role == "alternative":
            assert any(p.split("@")[0] == m for p in POWER_METHODS), m
    # the sweep trials still run every method the claims name and every compared method (make reproduce's share of
    # the comparison, D485); the equal-budget curves run in the power grid; the full grid adds 4K
    default = longctx.study_grid("default")
    assert set(default.methods) >= set(POWER_METHODS) | {"resv_candwics@text", "resv_rescore@text-bound-s0.02"}
    assert not set(default.methods) & (set(BUDGET_METHODS) - set(POWER_METHODS) - {"resv@text-r0.7", "resv@text-r0.9"})
    power_sweep = {c for c in longctx.study_grid("default", "power").trials()
                   if set(BUDGET_METHODS) <= set(longctx.study_grid("default", "power").cell_methods(c))}
    assert {c for c in default.trials()} <= power_sweep
    assert 4000 in longctx.study_grid("default", "full").lengths


def test_block_methods_must_be_the_grids():
    with pytest.raises(ValueError, match="block methods"):
        longctx.StudyGrid("x", "smoke", (longctx.Block("passkey", (384,), (0.5,), methods=("rekv",)),), ("full",),
                          kv_capacity=128)


def test_mcnemar_exact_by_hand():
    assert power.mcnemar_exact(0, 0) == 1.0
    assert power.mcnemar_exact(5, 0) == pytest.approx(2 / 32)          # 2 * (1/2)^5
    assert power.mcnemar_exact(1, 6) == pytest.approx(2 * (1 + 7) / 128)
    assert power.mcnemar_exact(3, 3) == 1.0


def _df(rows):
    return pd.DataFrame([dict(trial=t, method=m, correct=c, task="passkey", context_tokens=1000, recall_needle=1.0 * c,
                              recall_value=1.0 * c, sum_off=100.0, sum_sel_off=f) for t, m, c, f in rows])


def test_paired_tests_count_discordant_trials_of_the_same_trials():
    rows = [(f"t{i}", "full", True, 100.0) for i in range(8)]
    rows += [(f"t{i}", "resv", i < 2, 0.5) for i in range(8)]          # resv right on t0, t1 only
    rows += [("t9", "resv", True, 0.5)]                                   # a trial full did not run: not paired
    t = power.paired_tests(_df(rows), [("resv", "full")])
    pooled = t[t.task == "all"].iloc[0]
    assert (pooled.n, pooled.a_only, pooled.b_only, pooled.both) == (8, 0, 6, 2)
    assert pooled.p_mcnemar == pytest.approx(2 / 64)
    assert pooled["diff"] == pytest.approx(-6 / 8)


def test_power_table_gives_wilson_intervals_and_the_fetched_fraction():
    rows = [(f"t{i}", "exact@k0.01", i < 40, 1.0) for i in range(40)] + [(f"t{i}", "resv", i < 20, 0.5)
                                                                         for i in range(40)]
    t = power.power_table(_df(rows)).set_index("method")
    assert t.loc["exact@k0.01", "em_lo"] == pytest.approx(0.9124, abs=1e-3)   # Wilson 40/40
    p, n, z = 0.5, 40, 1.959963984540054
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert t.loc["resv", "em_hi"] - t.loc["resv", "em_lo"] == pytest.approx(2 * half)
    assert t.loc["resv", "fetched_frac_offloaded"] == pytest.approx(0.005)
    b = power.equal_budget_table(_df(rows))
    assert list(b.family) == ["exact", "resv"]


def test_budget_tags_parse_and_refuse():
    assert longctx.method_spec("infinigen@a3").kwargs == (("alpha", 3.0),)
    assert longctx.method_spec("streamingllm@w768").kwargs == (("window", 768),)
    for bad in ("infinigen@a0", "streamingllm@w7.5", "streamingllm@x1"):
        with pytest.raises(ValueError, match="budget tag"):
            longctx.method_spec(bad)


def test_mechanism_rows_ride_on_the_trial_and_summarise_over_trials(tiny):
    """D483: a trial running resv@text carries ReSV's mechanism rows from the shared prefill, equal to the one-trial
    probe's; over_trials gives per quantity the trials, mean and interval."""
    from vrex_lib.config import ReSVConfig, RuntimeConfig

    grid = longctx.study_grid("smoke")
    cfg = RuntimeConfig(kv_capacity=grid.kv_capacity, interval_token=False)
    recs = []
    for cell in (("passkey", 384, 0.25, 0), ("passkey", 384, 0.75, 0)):
        longctx.run_trial(tiny, grid, cell, longctx.method_specs(["full", "resv@text"]), resv=ReSVConfig(), cfg=cfg,
                          on_record=recs.append)
    rt = [r for r in recs if r["method"] == "resv@text"]
    assert all(r["mechanism"] for r in rt) and not any("mechanism" in r for r in recs if r["method"] == "full")
    alone = longctx.mechanism.probe(tiny, grid, ("passkey", 384, 0.25, 0))
    got = pd.DataFrame(rt[0]["mechanism"])
    assert len(got) == len(alone)
    assert (got.dilution.to_numpy() == alone.dilution.to_numpy()).all()
    t = longctx.mechanism.over_trials([dict(r, context_tokens=384) for r in rt])
    row = t.set_index("quantity").loc["dilution"]
    assert row.trials == 2 and row.lo <= row["mean"] <= row.hi


def test_frame_budget_compares_each_method_with_full_on_the_same_frames(tiny):
    """D484: every budget streams the same frames beside full attention; a budget that keeps everything (window
    past the stream) matches full exactly, a tight one does not, and the fetched fraction follows the budget."""
    import torch

    from vrex_lib.config import RuntimeConfig
    from vrex_lib.longctx import frame_budget as FB

    g = torch.Generator().manual_seed(0)
    frames = [(torch.randn(10, tiny.hidden_size, generator=g), i / 2) for i in range(50)]
    pols = FB.budget_policies(budgets={"exact": (0.01, 0.5), "streamingllm": (4096,)})
    df = FB.frame_budget(tiny, frames, pols, RuntimeConfig(kv_capacity=128), lo_tokens=320, hi_tokens=480, every=2)
    s = FB.summary(df).set_index("method")
    assert set(s.index) == {"exact@0.01", "exact@0.5", "streamingllm@4096"}
    assert (df.kv_len >= 320).all() and (df.kv_len <= 490).all() and s.steps.min() >= 4
    keep_all = df[df.method == "streamingllm@4096"]
    assert (keep_all.kl_vs_full.abs() < 1e-6).all() and keep_all.top1_agrees.all()
    assert (keep_all.fetched_frac_offloaded == 1.0).all()
    assert s.loc["exact@0.01", "fetched_frac_offloaded"] < s.loc["exact@0.5", "fetched_frac_offloaded"]
    assert s.loc["exact@0.01", "selected_frac"] < s.loc["exact@0.5", "selected_frac"] <= 0.5 + 1e-9
    assert s.loc["exact@0.01", "attn_rel_error"] > s.loc["exact@0.5", "attn_rel_error"] > 0
    with pytest.raises(ValueError, match="lo_tokens"):
        FB.frame_budget(tiny, frames, pols, RuntimeConfig(kv_capacity=128), lo_tokens=500, hi_tokens=400)


def test_resv_vs_bounded_runs_the_table_families_and_compares_at_equal_fetch():
    from vrex_lib.longctx import frame_budget as FB
    assert FB.RESV_VS_BOUNDED[0] == "exact" and set(FB.RESV_VS_BOUNDED) <= set(FB.FRAME_BUDGETS)
    s, eq = FB.resv_vs_bounded("smoke", lo_tokens=200, hi_tokens=320, every=3, kv_capacity=128)
    assert set(s.family) == set(FB.RESV_VS_BOUNDED) and (s.steps > 0).all()
    assert set(eq.method) == {m for m in s.method if m.startswith("resv_best@")}
    assert set(eq.quantity) == {"attn_rel_error", "kl_vs_full", "top1_agreement"}
