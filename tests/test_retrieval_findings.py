"""Notebook 09's findings (vrex_lib.claims.retrieval_demand.findings) on constructed study results: each kind is
reached, and a reference that keeps no key makes a comparison uncheckable rather than 'refuted'."""
import pandas as pd
import pytest

from vrex_lib.claims import findings as F
from vrex_lib.claims import retrieval_demand as C


def _df(correct: dict[str, int], n: int = 5) -> pd.DataFrame:
    return pd.DataFrame([dict(method=m, trial=f"t{i}", correct=i < k) for m, k in correct.items() for i in range(n)])


def _kind(df, finding, mech=None):
    out = C.findings(df, mech)
    assert list(out.columns) == F.COLUMNS and set(out.kind) <= set(F.KINDS)
    return out.set_index("finding").loc[finding]


@pytest.mark.parametrize("resv, full, kind", [(0, 5, "confirmed"), (5, 5, "refuted"), (2, 4, "uncheckable"),
                                              (0, 0, "uncheckable")])
def test_resv_against_full_reaches_each_kind(resv, full, kind):
    row = _kind(_df({"resv": resv, "full": full}), "resv-loses-key")
    assert row.kind == kind
    assert f"resv {resv}/5" in row.evidence and f"full {full}/5" in row.evidence


def test_a_method_the_grid_did_not_run_is_uncheckable():
    row = _kind(_df({"resv": 0, "full": 5}), "clustering-is-the-cause")
    assert row.kind == "uncheckable" and "not in this grid" in row.evidence


def test_mechanism_rows_follow_their_stated_criteria():
    mech = pd.DataFrame(dict(trial="passkey/1000/0.25/0", dilution=[6.0, 4.0, 11.0], cluster_size=[30, 20, 40],
                             score_gap=[1.0, 2.0, 0.5], always_exact=[0.97] * 3, always_estimated=[0.98] * 3,
                             rows_one_cluster=[0.9, 0.8, 0.85]))
    df = _df({"resv": 0, "full": 5})
    assert _kind(df, "centroid-dilution", mech).kind == "confirmed"
    assert _kind(df, "sinks-fill-the-threshold", mech).kind == "confirmed"
    mech2 = mech.assign(dilution=1.0, rows_one_cluster=0.1)
    assert _kind(df, "centroid-dilution", mech2).kind == "refuted"
    assert _kind(df, "sinks-fill-the-threshold", mech2).kind == "refuted"
    assert "dilution median 6.0" in _kind(df, "centroid-dilution", mech).evidence
