"""Every FAIL / NOT RUN row of Fig. 4 and Fig. 13-18 carries a computed cause; implied-by-printed checks by hand;
the validation rows beside published measurements."""
from __future__ import annotations

import pytest

from vrex_lib import report
from vrex_lib.perf import Workload
from vrex_lib.claims import causes as C
from vrex_lib.perf import experiments as E
from vrex_lib.claims import performance as CMP

PREFIXES = ("fig13.", "fig14.", "fig15.", "fig16.", "fig17.", "fig18.", "headline.")


@pytest.fixture(scope="module")
def res():
    return CMP.run_experiments(Workload.paper())


def _rows(res, measured_claims=None, label="NOT RUN: no workload file"):
    cl = CMP.claim_values(res)
    rows = [r for pre in PREFIXES for r in CMP.paired_rows(cl, measured_claims, paper_label="paper",
                                                           measured_label=label, prefix=pre, res=res)]
    f4b = E.fig4b(kv_sizes=(1000, 80000), workload="paper")
    rows += CMP.fig4_rows(E.fig4a(), f4b, E.fig4c(workload="paper"))
    rows += CMP.system_power_simulated_rows(res["grid"])[0]
    return rows


def test_every_fail_and_not_run_row_has_a_cause(res):
    rows = _rows(res)
    failing = [r for r in rows if r.verdict() in (report.FAIL, report.MISSING)]
    assert failing, "the comparison has FAIL/NOT RUN rows to attribute"
    for r in failing:
        assert r.cause in report.CAUSES and r.cause_detail, (r.claim, r.verdict(), r.cause)
    assert {r.cause for r in failing if r.claim.endswith(CMP.MEASURED_SUFFIX)} == {"not-run"}
    # Passing rows carry no cause in the written table.
    df = report.to_frame(rows, "test")
    assert (df[df.verdict == "PASS"].cause == "").all()


def test_measured_column_fails_are_stand_in_workload_only_where_the_paper_column_passes(res):
    cl = {k: (v * 10, n) for k, (v, n) in CMP.claim_values(res).items()}  # every measured value 10x ours
    rows = {r.claim: r for r in _rows(res, cl, label="measured:w.json (profile default, SmolLM2-135M)")}
    meas = [r for k, r in rows.items() if k.endswith(CMP.MEASURED_SUFFIX) and r.verdict() == report.FAIL]
    assert meas
    for r in meas:
        p = rows[r.claim[: -len(CMP.MEASURED_SUFFIX)]]
        # the counterfactual: stand-in-workload only when the paper-stated column PASSes
        if p.graded() == report.PASS:
            assert r.cause == "stand-in-workload" and "flips the verdict" in r.cause_detail, r.claim
        else:
            assert r.cause == p.cause and r.cause != "stand-in-workload", r.claim
    assert {r.cause for r in meas} >= {"stand-in-workload", "model"}


def test_every_model_fail_names_its_term_share_and_required_value(res):
    rows = [r for r in _rows(res) if r.verdict() == report.FAIL and r.cause == "model"]
    assert rows
    for r in rows:
        assert r.term and r.term["term"] and r.term["needs"] and r.term["plausible"], r.claim
        assert 0 <= r.term["share"] <= 1 and ("within" in r.term["plausible"] or "outside" in r.term["plausible"]
                                              or "negative" in r.term["plausible"]), r.claim
    df = report.to_frame(rows, "t")
    assert (df.term.str.len() > 0).all() and (df.term_needs.str.len() > 0).all()


def test_a_model_fail_without_a_term_is_counted_apart():
    assert report.cause_of("FAIL", "model", "") == report.NO_TERM
    assert report.cause_of("FAIL", "model", "LLM ops") == "model"
    assert report.cause_of("FAIL", "paper-inconsistent", "") == "paper-inconsistent"


def test_term_needed_value_by_hand():
    tol = CMP.paper.Tolerance("rel", 0.25)
    e = C.sum_term({"a": 80.0, "b": 20.0}, 100.0, 200.0, tol, "ms")  # a PASS needs 150 ms: a -> 130 (x1.63)
    assert e["term"] == "a" and e["share"] == pytest.approx(0.8) and "130" in e["needs"] and "within" in e["plausible"]
    e = C.sum_term({"a": 10.0}, 100.0, 20.0, tol, "ms")  # needs 25 ms: a -> -65, impossible
    assert "negative" in e["plausible"]
    e = C.share_term("p", 50.0, 100.0, 80.0)  # p / (50 + p) = 0.8 -> p = 200 (x4)
    assert "200" in e["needs"] and "outside" in e["plausible"]


def _printed(**over):
    pv = CMP.printed_values()
    pv.update(over)
    return pv


def test_paper_inconsistent_only_when_it_holds_over_every_admissible_choice():
    key = "fig15.vrex_fps_large"
    pv = _printed()
    tol = CMP.paper.get(key).tol
    base = next(c for c in C.implied_checks(pv) if key in c.claims)
    assert base.violated
    # ours at the bound: the check is violated for every D6 and D221 -> paper-inconsistent
    got = C.inconsistency(key, base.bound, tol, pv)
    assert got is not None and got[0] == "paper-inconsistent" and got[2] == base.key
    for cap in C.choices.get("D6").admissible:
        for reuse in C.choices.get("D221").admissible:
            c = next(x for x in C.implied_checks(pv, D6=cap, D221=reuse) if key in x.claims)
            assert c.violated
    # ours far on the printed side of the bound: not the paper's inconsistency but our miss
    assert C.inconsistency(key, base.printed * 0.9, tol, pv) is None


def test_a_contradiction_that_vanishes_inside_a_range_is_never_a_pass_range():
    """The implied-by-printed check is evidence for 'paper-inconsistent' only: where its contradiction vanishes for
    part of D6's range the row stays a FAIL with a model term; only the simulator can make it DEPENDS (D400)."""
    key = "fig13.edge.b1.frame.vrex8_ms.40k"
    pv = _printed()
    c = next(x for x in C.implied_checks(pv) if key in x.claims)
    got = C.inconsistency(key, c.bound, CMP.paper.get(key).tol, pv)
    assert got is not None and got[0] == "depends"
    assert not next(x for x in C.implied_checks(pv, D6=32768) if key in x.claims).violated
    r = report.row(key, c.bound)
    r.tolerance = CMP.paper.Tolerance("abs", -1.0)  # force the FAIL this case needs
    C.attribute(r, key, measured=False, res=None, checks=C.implied_checks(pv), printed=pv)
    assert r.verdict() == report.FAIL and r.pass_range == "" and r.cause == "model"


def test_link_bound_at_40k_by_hand():
    pv = CMP.printed_values()
    checks = {c.claims[0]: c for c in C.implied_checks(pv)}
    c = checks["fig13.edge.b1.frame.vrex8_ms.40k"]
    # Table II's 32.7 % of (40000 - 4096) offloaded tokens x 131072 B over 4 GB/s.
    assert c.bound == pytest.approx(1e3 * 0.327 * 35904 * 131072 / 4e9, rel=1e-9)
    assert c.violated and c.printed == 254
    assert c.ours_on_allowed_side(500.0) and not c.ours_on_allowed_side(200.0)
    # Fig. 14 vs FlexGen: (26 x 254 x 7.3 + 39 x 97 x 15.1) / (26 x 254 + 39 x 97) > 5.4.
    e2e = (26 * 254 * 7.3 + 39 * 97 * 15.1) / (26 * 254 + 39 * 97)
    assert checks["fig14.speedup.40k"].bound == pytest.approx(e2e) and checks["fig14.speedup.40k"].violated
    assert not checks["fig16.speedup.vrex_all"].ours_on_allowed_side(9.0)


def test_cause_follows_the_side_of_the_miss():
    chk = C.ImpliedCheck("implied.x", ("k",), printed=254.0, bound=385.0, kind="min", unit="ms", detail="d")
    kw = dict(measured=False, res=None, checks=[chk], note="")
    assert C.cause_for("k", 500.0, "FAIL", **kw)[0] == "paper-inconsistent"  # at or beyond the bound
    assert C.cause_for("k", 100.0, "FAIL", **kw)[0] == "model"  # ours missed the other way: our model
    assert C.cause_for("k", 100.0, "PASS", **kw) == ("", "")
    assert C.cause_for("other", 500.0, "FAIL", **kw)[0] == "model"
    assert C.cause_for("k", None, "NOT RUN", **kw)[0] == "not-run"


def test_implied_check_rows_are_info_and_name_violations():
    rows = CMP.implied_check_rows()
    assert rows and all(r.verdict() == report.INFO_V for r in rows)
    assert any("VIOLATED" in r.note for r in rows) and len({r.claim for r in rows}) == len(rows)


def test_validation_rows_beside_published_measurements():
    rows, df = CMP.validation_rows()
    assert len(rows) == len(df) >= 6 and all(r.verdict() == report.INFO_V for r in rows)
    eager = df.set_index("key").loc["decode.a100.eager.Llama-2-7B"]
    # the point that defines stack.eager_host_op_s (as if the whole step were host-bound; its GEMVs are device-bound)
    assert eager.ratio == pytest.approx(1.0, abs=0.05)
    assert df.ratio.between(0.2, 5).all() and df.source.str.len().gt(20).all()
