"""The verdict engine under mutation (issue 42): DEPENDS only where our simulator passes at a named point of the
admissible product, robustness over that product, and seeded defects that each make a check fail."""
from __future__ import annotations

import pytest

from vrex_lib import choices, report
from vrex_lib.claims import robustness as ROB

KEY = "fig13.edge.b1.frame.vrex8_ms.40k"  # printed 254 ms, latency: PASS within 190.5-317.5 ms
OTHER = "fig13.edge.b1.frame.vrex8_ms.1k"  # printed 121 ms


def _interaction_run(**ov):
    """KEY passes only where D6 is 32768 AND D101 is 32 (each alone moves it, neither alone passes); OTHER PASSes
    at the defaults and at D6=2048 or D103=False alone, and FAILs only where both hold; the rest is ignored."""
    cap = ov.get("recent_capacity", 4096)
    port = ov.get("system_core_port_bytes_per_cycle", 64)
    dense = ov.get("dense_resident", True)
    v = 400.0 - (60.0 if cap == 32768 else 0.0) - (60.0 if port == 32 else 0.0)
    o = 121.0 + (30.0 if cap == 2048 else 0.0) + (30.0 if not dense else 0.0)  # PASS up to 151.25 ms
    return {KEY: (v, ""), OTHER: (o, "")}


@pytest.fixture(scope="module")
def rg():
    return ROB.regrade(None, ids=("D6", "D101", "D103"), run=_interaction_run)


def test_choices_are_read_generically_from_the_table():
    ok, excluded = ROB.swept_choices(lambda **ov: {})
    assert set(ok) | set(excluded) == set(choices.CHOICES)
    assert all(choices.get(c).override for c in ok) and "D221" in excluded


def test_a_pass_only_in_the_product_is_found_and_named(rg):
    r = rg[KEY]
    assert r.default == report.FAIL and set(r.depends_on) == {"D6", "D101"}
    # one choice at a time never passes: only the combination does
    assert all(verd == report.FAIL for pts in r.by_choice.values() for _, _, verd in pts)
    assert r.pass_range().startswith("D6=32768, D101=32 (")
    row = report.row(KEY, 400.0)
    r.apply(row)
    assert row.verdict() == report.DEPENDS
    assert ROB.verify_depends([row], _interaction_run) == []


def test_a_robust_claim_that_flips_in_the_product_is_not_robust(rg):
    r = rg[OTHER]
    assert r.default == report.PASS and set(r.depends_on) == {"D6", "D103"}
    assert all(verd == report.PASS for pts in r.by_choice.values() for _, _, verd in pts)  # one at a time: robust
    assert r.robustness().startswith("depends on D6, D103: FAIL at D6=2048, D103=False")
    assert "(3 of 30 points flip)" in r.robustness() and r.design.kind == "full product"
    s = ROB.summary(rg)
    assert s["flip"] == 2 and s["claims"] == 2


def test_seeded_defect_a_depends_with_no_passing_point_is_caught(rg):
    row = report.row(KEY, 400.0)
    row.pass_range = "D6=32768 (1 of 30 points pass)"  # D6 alone does not pass
    assert row.verdict() == report.DEPENDS
    bad = ROB.verify_depends([row], _interaction_run)
    assert len(bad) == 1 and KEY in bad[0] and "D6=32768" in bad[0]
    row.pass_range = "D6=99 (x)"
    with pytest.raises(ValueError, match="not an admissible value of D6"):
        ROB.verify_depends([row], _interaction_run)


def test_seeded_defect_a_robust_row_that_flips_is_caught(rg):
    row = report.row(OTHER, 121.0)
    rg[OTHER].apply(row)
    assert ROB.verify_robust([row], rg) == []
    row.robustness = "robust over 30 points"  # the defect: an engine that looked one choice at a time
    bad = ROB.verify_robust([row], rg)
    assert len(bad) == 1 and "D6=2048, D103=False" in bad[0]


def test_a_fail_that_passes_nowhere_is_robust_and_names_the_nearest_point():
    def run(**ov):
        return {KEY: (600.0 - (50.0 if ov.get("recent_capacity") == 32768 else 0.0), "")}
    r = ROB.regrade(None, ids=("D6",), run=run)[KEY]
    assert r.pass_range() == ""
    assert r.robustness() == "robust over 5 points: none within the swept ranges passes (nearest: 550 at D6=32768)"
    row = report.row(KEY, 600.0)
    r.apply(row)
    assert row.verdict() == report.FAIL and row.pass_range == ""


def test_the_design_is_stated_when_the_product_is_too_large():
    ids = ("D6", "D101", "D103", "D244", "D243")
    d = ROB.design(ids, max_full=10, lhs_size=16, seed=3)
    assert d.full == 5 * 3 * 2 * 3 * 3 and d.kind.startswith("every corner (32)") and "seed 3" in d.kind
    assert d.points[0] == {c: choices.get(c).default for c in ids}
    corners = [p for p in d.points if all(p[c] in (choices.get(c).admissible[0], choices.get(c).admissible[-1])
                                          for c in ids)]
    assert len(corners) >= 32 and len({tuple(map(str, p.values())) for p in d.points}) == len(d.points)
    for c in ids:  # every admissible value of every choice is visited
        assert {str(p[c]) for p in d.points} == {str(v) for v in choices.get(c).admissible}
    assert d.describe().endswith(f"{len(d.points)} of the product's 270 points")
    assert ROB.design(ids, max_full=10, lhs_size=16, seed=3) == d
    big = ("D6", "D101", "D103", "D244", "D243", "D104", "D246")  # 2^7 corners: 64 drawn
    d7 = ROB.design(big, max_full=10, lhs_size=16, seed=3)
    assert d7.kind.startswith("64 of the 128 corners drawn at random") and len(d7.points) <= 64 + 21 + 16


def test_point_text_round_trips():
    pt = {"D6": 16384, "D101": 32, "D103": False, "D243": 25.6e9, "D244": "packed"}
    assert ROB.parse_point(ROB.point_text(pt)) == pt
    assert ROB.point_text({"D6": 4096}) == "the defaults" and ROB.parse_point("the defaults") == {}


@pytest.mark.long
def test_every_depends_row_passes_when_resimulated_at_its_named_point():
    """The real simulator: every DEPENDS row of the performance comparison, re-run at the point it names, PASSes;
    every robust row holds at every point of the design (about 1-2 minutes)."""
    from vrex_lib.claims import performance as CMP
    from vrex_lib.perf import Workload

    w = Workload.paper()
    rg = ROB.regrade(w)
    res = CMP.run_experiments(w)
    rows = [r for pre in ("fig13.", "fig14.", "fig15.", "fig16.", "fig17.", "fig18.", "headline.")
            for r in CMP.paired_rows(CMP.claim_values(res), None, paper_label="", measured_label="NOT RUN: x",
                                     prefix=pre, res=res, robust=rg)]
    dep = [r for r in rows if r.verdict() == report.DEPENDS]
    assert dep and all(not r.claim.endswith(CMP.MEASURED_SUFFIX) for r in dep)
    assert ROB.verify_depends(rows, ROB.default_run(w)) == []
    assert ROB.verify_robust(rows, rg) == []


def test_cause_cells_are_one_short_sentence_without_ids():
    """Issue 47: every cause cell of the performance comparison (both workload columns, a measured column that
    fails with the same cause as the paper-stated one included) shows at most 160 characters, no claim or check
    id, and never calls a FAIL 'plausible'."""
    import re

    from vrex_lib.claims import performance as CMP
    from vrex_lib.perf import Workload
    from vrex_lib.report import content

    res = CMP.run_experiments(Workload.paper())
    cl = CMP.claim_values(res)
    meas = {k: (v * 3, n) for k, (v, n) in cl.items()}
    df = report.to_frame([r for pre in ("fig13.", "fig14.", "fig16.", "fig18.", "headline.")
                          for r in CMP.paired_rows(cl, meas, paper_label="", prefix=pre, res=res,
                                                   measured_label="profile default, model SmolLM2")], "t")
    cells = [content._pair_cause(a, b) for a, b in content.pairs(df)]
    shown = [content.visible(c) for c in cells if c]
    assert len(shown) > 20 and any(s.startswith("both workloads: ") for s in shown)
    ids = re.compile(r"\b(fig1\d|headline|implied|table\d)\.[\w.]+")
    for s in shown:
        assert len(s) <= content.CAUSE_CELL_MAX, s
        assert not ids.search(s), s
        assert "plausible" not in s, s
    # a long detail is cut at a word and keeps its note link
    long = content._fit("**model** — " + "word " * 60, "[[7]](#note-7)")
    assert len(content.visible(long)) <= 160 and long.endswith("… [[7]](#note-7)")


def _cand(term: str, part: float, whole: float, needs: float) -> dict:
    from vrex_lib.claims import causes as C
    return C.part_term(term, part, whole, needs)


def test_a_ratio_blames_the_side_whose_change_stays_on_the_papers_axis():
    """Seeded defect 'a model term on the wrong side': the baseline's link stall needs the smaller change (x3) but
    would put the baseline at 6,000 ms, off a 0-2,400 ms axis; V-Rex's own step (x0.25) is the term to name."""
    from vrex_lib.claims import causes as C

    ours = C._side([_cand("V-Rex LLM ops", 400.0, 500.0, 100.0)], 500.0, 200.0, "vrex8", 2400.0)
    base = C._side([_cand("GPU link stall", 2000.0, 3000.0, 6000.0)], 3000.0, 7000.0, "gpu", 2400.0)
    assert not base[0]["on_axis"] and ours[0]["on_axis"]
    pick = C.both_sides(ours, base)
    assert pick["term"] == "V-Rex LLM ops" and "the other side: GPU link stall" in pick["plausible"]
    # without the axis the smaller change wins: the axis is what moves the blame
    ours2 = C._side([_cand("V-Rex LLM ops", 400.0, 500.0, 100.0)], 500.0, 200.0, "vrex8", None)
    base2 = C._side([_cand("GPU link stall", 2000.0, 3000.0, 6000.0)], 3000.0, 7000.0, "gpu", None)
    assert C.both_sides(ours2, base2)["term"] == "GPU link stall"


def test_the_batch4_speedup_names_vrex_not_an_off_axis_baseline():
    from vrex_lib.claims import performance as CMP
    from vrex_lib.perf import Workload

    res = CMP.run_experiments(Workload.paper())
    rows = {r.claim: r for r in CMP.paired_rows(CMP.claim_values(res), None, paper_label="", prefix="fig13.edge.b4",
                                                measured_label="NOT RUN: x", res=res)}
    r = rows["fig13.edge.b4.frame.speedup_max"]
    assert r.verdict() == report.FAIL and r.cause == "model"
    assert r.term["term"].startswith("vrex8") and "off the paper's 0-8,000 ms axis" in r.term["plausible"]


def test_one_estimate_of_record_per_table3_claim_never_by_table_order():
    """D404: the RTL estimate where it ran grades the Table III claims; the others are INFO cross-checks, and the
    distinct-claim count takes the graded row whatever the tables' names."""
    import pandas as pd

    from vrex_lib import paper
    from vrex_lib.claims import table3 as T
    from vrex_lib.report import content

    assert T.record_model(["component", "rtl", "cacti+cells"]) == "rtl"
    assert T.record_model(["component", "cacti+cells"]) == "cacti+cells"
    assert T.record_model(["component"]) == "component"
    with pytest.raises(ValueError, match="unknown estimate"):
        T.record_model(["spice"])
    key = "dre.area_share_pct"
    rtl = [report.row(key, 9.0)]  # FAIL in the estimate of record
    comp = T.cross_check([report.row(key, 2.0), report.row("table3.power_mw.total", 2600.0)], "component", "rtl",
                         rtl)
    assert comp[0].verdict() == report.INFO_V and "estimate of record is the RTL" in comp[0].note
    assert comp[1].verdict() == report.PASS  # a claim the record does not answer stays graded
    tabs = pd.concat([report.to_frame(comp, "t").assign(table="a_table3"),
                      report.to_frame(rtl, "t").assign(table="z_table3_rtl")], ignore_index=True)
    d = content.distinct_claims(tabs).set_index("claim")
    assert d.loc[key, "verdict"] == report.FAIL and d.loc[key, "table"] == "z_table3_rtl"
    assert paper.get(key).value == 2.0


def test_readme_numbers_are_generated_and_a_stale_number_fails(tmp_path):
    """The README's generated blocks (counts per distinct claim, headline table, notebook times) from a small results
    folder; a seeded stale number is reported as drift by the script's --check (exit 1) and fixed by a rewrite."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from vrex_lib.paper import Tolerance
    from vrex_lib.report import readme

    out = tmp_path / "results"
    tol = Tolerance("rel", 0.1)
    report.write_table("headline", [
        report.Row("fig13.edge.b1.fps_min", "q", "FPS", 3.9, 3.8, tol, "abstract"),
        report.Row("fig13.edge.b1.fps_min.measured_workload", "q", "FPS", 3.9, 9.0, tol, "abstract",
                   cause="stand-in-workload", cause_detail="the measured workload selects 1 %")],
        profile="t", title="Headline claims", out=out)
    report.write_table("fig16", [report.Row("fig16.x", "q", "x", 8.1, 3.0, tol, "Fig. 16", cause="model",
                                            cause_detail="d")], profile="t", title="Fig. 16", out=out)
    (out / "executed").mkdir()
    (out / "executed" / "06_performance.ipynb").write_text(json.dumps(dict(metadata=dict(papermill=dict(
        duration=63.4)), cells=[])))
    blocks = readme.generate(out)
    assert blocks["counts"].startswith("Per distinct claim: 1 PASS · 0 CONSISTENT · 0 DEPENDS · 1 FAIL")
    assert "(Rows, measured-workload twins and repeats included: 1 PASS" in blocks["counts"]
    assert "| `06_performance` | 63 s |" in blocks["times"] and "#note-" not in blocks["headline"]
    body = "intro\n" + "".join(f"<!-- readme:{n} -->\nold\n<!-- /readme:{n} -->\n" for n in readme.BLOCKS) + "end\n"
    md = tmp_path / "README.md"
    md.write_text(body)
    script = [sys.executable, str(Path(__file__).parents[1] / "scripts" / "readme_numbers.py"), "--results", str(out),
              "--readme", str(md)]
    assert subprocess.run(script + ["--check"], capture_output=True, text=True).returncode == 1
    assert subprocess.run(script, capture_output=True, text=True).returncode == 0
    assert subprocess.run(script + ["--check"], capture_output=True, text=True).returncode == 0
    assert md.read_text().startswith("intro\n") and md.read_text().endswith("end\n")
    stale = md.read_text().replace("1 FAIL", "2 FAIL", 1)  # the seeded defect: one stale number
    md.write_text(stale)
    r = subprocess.run(script + ["--check"], capture_output=True, text=True)
    assert r.returncode == 1 and "drifted" in r.stderr and "counts" in r.stderr
    md.write_text("no markers\n")
    r = subprocess.run(script, capture_output=True, text=True)
    assert r.returncode == 2 and "<!-- readme:counts -->" in r.stderr


def test_server_panel_numbers_are_graded_once_registered(monkeypatch):
    """Fig. 13(b): each printed number entered in vrex_lib.paper (latency, TPOT, speedups at batch 1 and 8, energy
    gains) becomes a claim graded with both workloads and a cause; unregistered points stay INFO."""
    from vrex_lib import paper
    from vrex_lib.claims import performance as CMP
    from vrex_lib.perf import Workload

    keys = CMP.server_keys()
    assert {"fig13.server.b8.frame.speedup_max", "fig13.server.b1.text.vrex48_ms.40k",
            "fig13.server.b8.frame.energy_gain.1k", "fig13.server.b1.frame.vrex48_ms.1k"} <= set(keys)
    res = CMP.run_experiments(Workload.paper())
    assert not any(k.startswith("fig13.server.") for k in CMP.claim_values(res))  # none registered: none graded
    test_vals = {"fig13.server.b8.frame.speedup_max": ("x", "ratio", 1000.0),   # a made-up value: a FAIL
                 "fig13.server.b1.text.vrex48_ms.40k": ("ms", "latency", None)}  # ours itself: a PASS
    cl0 = CMP.server_claims(res["sp"])
    assert cl0 == {}
    for k, (unit, kind, v) in test_vals.items():
        if v is None:
            d = res["sp"][(res["sp"].platform == "server") & (res["sp"].batch == 1) & (res["sp"].stage == "text")]
            v = float(d.set_index("kv_len").vrex_ms[40000])
        monkeypatch.setitem(paper.REGISTRY, k, paper.PaperValue(k, v, unit, "test", "result", kind))
    cl = CMP.claim_values(res)
    rows = {r.claim: r for r in CMP.paired_rows(cl, cl, paper_label="", measured_label="m", prefix="fig13.server.",
                                                res=res)}
    assert set(rows) == {k for k in test_vals} | {k + CMP.MEASURED_SUFFIX for k in test_vals}
    assert rows["fig13.server.b1.text.vrex48_ms.40k"].verdict() == report.PASS
    r = rows["fig13.server.b8.frame.speedup_max"]
    assert r.verdict() == report.FAIL and r.cause == "model" and r.term and "a100+FlexGen" in r.term["plausible"] + \
        r.term["term"]
    info = {x.claim for x in CMP.server_info_rows(res, "w")}
    assert "fig13.server.b1.text.40k" not in info and "fig13.server.b1.text.1k" in info


def test_findings_say_what_they_mean(tmp_path):
    """Issue 42's vocabulary: a robust model FAIL is 'not reproduced' with its term and the nearest admissible value,
    a DEPENDS names its point, robust PASSes are listed as confirmed."""
    import pandas as pd

    from vrex_lib.paper import Tolerance
    from vrex_lib.report import content

    tol = Tolerance("rel", 0.1)
    fail = report.Row("fig16.x", "q", "x", 8.1, 3.0, tol, cause="model", cause_detail="d",
                      robustness="robust over 92 points: none within the swept ranges passes (nearest: 3.01 at "
                                 "D6=32768)",
                      term=report.model_term("V-Rex link stall", 0.8, "190 ms (now 1,259 ms)", "x0.15 is outside"))
    dep = report.Row("fig13.y", "q", "ms", 254.0, 440.0, tol, pass_range="D6=16384 (18 of 270 points pass)",
                     robustness="depends on D6: PASS at D6=16384 (18 of 270 points flip)")
    ok = report.Row("fig13.z", "q", "ms", 121.0, 120.0, tol, robustness="robust over 92 points")
    tabs = report.to_frame([fail, dep, ok], "t").assign(table="fig")
    f = content.findings(tabs, tmp_path)
    g = {x["name"]: " ".join(x["items"]) for x in f["groups"]}
    nr = g["Not reproduced by our model"]
    assert "`fig16.x`" in nr and "V-Rex link stall would need 190 ms" in nr
    assert "FAIL at all 92 points: none within the swept ranges passes" in nr
    assert "D6=16384" in g["Depends on an open choice"] and "`fig13.z`" in g["Confirmed"]
    assert set(g) <= set(content.FINDING_KINDS.values())


def test_the_report_gives_how_many_verdicts_flip(rg, tmp_path):
    from vrex_lib.report import content

    df = ROB.findings_frame(rg)
    assert df.statement[0].startswith("2 of 2 graded performance claims change verdict somewhere in the full product")
    out = tmp_path / "results"
    report.write_wide_table("findings_robustness", df, profile="t", out=out)
    f = content.findings(content.collect_tables(out), out)
    assert any(g["name"] == "Depends on an open choice" and "2 of 2 graded" in " ".join(g["items"])
               for g in f["groups"])
