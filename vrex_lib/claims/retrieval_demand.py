"""Notebook 09's rows: the long-context retrieval study beside Table II's proxies, and the text-stage simulation on
its workload.

Every row is INFO: the paper prints no long-context retrieval accuracy (its Table II is COIN Top-1 with the 8B
VideoLLM-online), so nothing here is held against a paper value. The rows say what they are in their note: the real
language model of this profile on a text retrieval task, not COIN Top-1.

    rows = accuracy_rows(df, profile="default", model="SmolLM2-135M-Instruct")   # df: longctx.load_results(...)
    rows += simulation_rows(sim)                                                 # sim: one row per simulated step
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .. import methods as method_table
from .. import report
from ..config import ReSVConfig
from ..eval.stats import wilson
from ..longctx import accuracy_table
from ..perf import simulate
from .findings import COLUMNS

TABLE_ID = "table2_retrieval_demand"
SIM_TABLE_ID = "retrieval_demand_sim"
#: The suffix each simulated row carries, by workload (the paper-stated one is a result of the paper, labelled so).
WORKLOAD_LABELS = {"paper": "[V-Rex: paper-stated workload]", "measured": "[V-Rex: measured workload]",
                   "retrieval": "[V-Rex: retrieval-demand workload]"}


def title(model: str) -> str:
    return (f"Table II beside: retrieval demand -- {model} on long-context passkey / needle retrieval "
            "(a text task, not COIN Top-1; INFO)")


def _note(model: str, profile: str, g: pd.DataFrame) -> str:
    tasks = ", ".join(sorted(g.task.unique()))
    lengths = ", ".join(str(n) for n in sorted(g.context_tokens.unique()))
    return (f"real {model} (profile {profile}) on a text retrieval task ({tasks}; context {lengths} tokens; "
            f"{g.trial.nunique()} trials), not COIN Top-1")


def accuracy_rows(df: pd.DataFrame, *, profile: str, model: str,
                  methods: Sequence[str] | None = None) -> list[report.Row]:
    """Per method: exact-match accuracy (all trials and per context length); for every method but ``full`` (the
    ceiling, whose recall and fractions are 1 by definition) also the accuracy on the trials ``full`` answers
    correctly (when there are any), the needle recall at the question and answer, and the selected fractions of the
    candidates and of the offloaded tier there. ``df``: :func:`vrex_lib.longctx.load_results`."""
    methods = list(methods or dict.fromkeys(df.method))
    by_m = accuracy_table(df, by=("method",)).set_index("method")
    by_n = accuracy_table(df, by=("method", "context_tokens")).set_index(["method", "context_tokens"])
    full_ok = set(df[(df.method == "full") & df.correct].trial) if "full" in set(df.method) else set()
    rows: list[report.Row] = []
    for m in methods:
        g = df[df.method == m]
        note = _note(model, profile, g)
        base = f"retrieval_demand.{m}"
        s = by_m.loc[m]
        rows.append(report.info_row(f"{base}.accuracy", f"{m}: exact-match accuracy", "fraction", s.accuracy, note))
        for n in sorted(g.context_tokens.unique()):
            rows.append(report.info_row(f"{base}.accuracy.{n}", f"{m}: exact-match accuracy at {n} tokens",
                                        "fraction", by_n.loc[(m, n)].accuracy, note))
        if m == "full":  # the ceiling: its recall and selected fractions are 1 by definition
            continue
        where = g[g.trial.isin(full_ok)]
        if len(where):  # undefined (and left out) where full answers no trial correctly
            rows.append(report.info_row(f"{base}.accuracy_where_full_correct",
                                        f"{m}: accuracy on the {len(where)} trials full answers correctly",
                                        "fraction", where.correct.mean(), note))
        for col, what in (("recall_value", "needle recall (key digits attended) at question + answer"),
                          ("selected_frac", "selected fraction of candidates at question + answer"),
                          ("selected_frac_offloaded", "selected fraction of the offloaded tier at question + answer")):
            rows.append(report.info_row(f"{base}.{col}", f"{m}: {what}", "fraction", s[col], note))
    return rows


#: Context lengths that become rows (the notebook's figure and data file hold every simulated length): the longest
#: the study measures in the default grid's full version, and the paper's longest, reached by holding.
ROW_KV: tuple[int, ...] = (8000, 40000)


def simulation_rows(sim: pd.DataFrame, kv_lens: Sequence[int] = ROW_KV) -> list[report.Row]:
    """INFO rows of the simulated text step (TPOT) per workload at ``kv_lens``; ``sim``
    (:func:`simulate_text`) columns: workload ('paper' | 'measured' | 'retrieval'), system, method, kv_len,
    latency_ms, selected_frac, workload_source."""
    rows = []
    for r in sim[sim.kv_len.isin(list(kv_lens))].itertuples(index=False):
        label = WORKLOAD_LABELS[r.workload]
        rows.append(report.info_row(f"retrieval_demand.sim.{r.system}.{r.method}.text.{int(r.kv_len)}.{r.workload}",
                                    f"{r.system} {r.method} text step at {int(r.kv_len)} tokens {label}", "ms",
                                    r.latency_ms, note=f"selected fraction {r.selected_frac:.4g}; {r.workload_source}"))
    return rows


#: (system, method) pairs notebook 09 simulates: V-Rex8 with ReSV, and the Fig. 13 GPU baselines on the AGX Orin.
SIM_POINTS: tuple[tuple[str, str], ...] = (("vrex8", "resv"),) + tuple(("agx_orin", m)
                                                                      for m in method_table.GPU_BASELINES)


def simulate_text(workloads: dict, kv_lens: Sequence[int],
                  points: Sequence[tuple[str, str]] = SIM_POINTS) -> pd.DataFrame:
    """The simulated text step (one generated token, batch 1) of each (system, method) in ``points`` at ``kv_lens``
    under each workload ({label in WORKLOAD_LABELS: Workload, 'paper' or a workload file}): one row per point with
    the selected fraction the simulator used and the workload's provenance label."""
    out = []
    for label, w in workloads.items():
        if label not in WORKLOAD_LABELS:
            raise ValueError(f"simulate_text: workload label {label!r} must be one of {', '.join(WORKLOAD_LABELS)}")
        for s, m in points:
            for kv in kv_lens:
                r = simulate(s, m, "text", int(kv), workload=w)
                out.append(dict(workload=label, system=s, method=m, kv_len=int(kv), latency_ms=r.latency_ms,
                                selected_frac=r.ratio, pcie_fetch_bytes=r.bytes.get("pcie_fetch"),
                                workload_source=r.workload_source))
    return pd.DataFrame(out)


# ------------------------------------------------------------------------------------------ findings (D225, D261)
#: The paper's ReSV and the methods it is held against in the findings (names of the study, vrex_lib.longctx.grid).
RESV, RESV_TEXT, NOCLUST_TEXT, CANDWICS_TEXT = "resv", "resv@text", "resv_noclust@text", "resv_candwics@text"
RESCORE_TEXT = "resv_rescore@text-bound-s0.02"
#: A cluster whose centroid estimate holds less than half its members' attention mass is 'diluted' (D261).
DILUTED = 2.0


def _em(df: pd.DataFrame, m: str) -> tuple[int, int, float, float] | None:
    """(correct, trials, Wilson 95 % low, high) of method ``m``; None when the grid did not run it."""
    g = df[df.method == m]
    if g.empty:
        return None
    k, n = int(g.correct.sum()), len(g)
    return (k, n, *wilson(k, n))


def _em_text(m: str, e) -> str:
    return f"{m} {e[0]}/{e[1]} (95 % {e[2]:.2f}-{e[3]:.2f})"


def _paired_text(df: pd.DataFrame, a: str, b: str) -> str:
    """The exact McNemar test of ``a`` against ``b`` on the trials both ran (vrex_lib.longctx.power, D481)."""
    from ..longctx.power import paired

    r = paired(df, a, b)
    if r is None:
        return ""
    return (f"; paired on the {r['n']} trials both ran: {a} only {r['a_only']}, {b} only {r['b_only']}, exact "
            f"McNemar p = {r['p_mcnemar']:.2g}")


def _lower(df: pd.DataFrame, a: str, b: str) -> tuple[str, str]:
    """Is ``a``'s exact match below ``b``'s? (kind, evidence): confirmed when the Wilson intervals are disjoint with
    ``a`` below, refuted when ``a`` does at least as well, else (or when ``b`` keeps no key) uncheckable."""
    ea, eb = _em(df, a), _em(df, b)
    if ea is None or eb is None:
        return "uncheckable", f"{a if ea is None else b} is not in this grid (the full grid runs it: --grid full)"
    ev = f"{_em_text(a, ea)}; {_em_text(b, eb)}" + _paired_text(df, a, b)
    if eb[0] == 0:
        return "uncheckable", ev + f"; {b} keeps no key on this grid, so there is nothing to lose"
    if ea[3] < eb[2]:
        return "confirmed", ev
    if ea[0] / ea[1] >= eb[0] / eb[1]:
        return "refuted", ev
    return "uncheckable", ev + "; the intervals overlap at this many trials"


def findings(df: pd.DataFrame, mech: pd.DataFrame | None = None,
             ratio: float = ReSVConfig().th_r_wics) -> pd.DataFrame:
    """The retrieval study's findings (columns of :data:`vrex_lib.claims.findings.COLUMNS`): ReSV as specified
    against ``full`` and the baselines, its own ablation without clustering, the mechanism read on one trial
    (``mech``: :func:`vrex_lib.longctx.mechanism.probe`, one row per (layer, KV head)) and the beyond-the-paper
    re-score. ``df``: :func:`vrex_lib.longctx.load_results`; ``ratio``: Th_r-wics of the probe."""
    rows = []
    kind, ev = _lower(df, RESV, "full")
    others = [m for m in method_table.GPU_BASELINES if m in set(df.method)]
    ev += "".join(f"; {_em_text(m, _em(df, m))}" for m in others)
    rows.append(("resv-loses-key", kind, f"ReSV as the paper specifies it (streaming, Th_r-wics {ReSVConfig().th_r_wics:g}) loses the key "
                 "that full attention keeps on the same trials", ev))
    kind, ev = _lower(df, RESV_TEXT, NOCLUST_TEXT)
    rows.append(("clustering-is-the-cause", kind, "The paper's own Fig. 19 ablation (ReSV without clustering: the "
                 "same WiCSum rule on exact per-token scores) keeps the key ReSV loses at the question, so the loss "
                 "comes from the clusters' estimate, not the threshold", ev))
    if mech is not None and len(mech):
        d = mech.dilution
        q1, med, q3 = (float(d.quantile(x)) for x in (0.25, 0.5, 0.75))
        rows.append(("centroid-dilution", "confirmed" if med > DILUTED else "refuted",
                     f"The key's digit tokens share clusters whose centroid score underestimates the members' "
                     f"attention mass (diluted: by more than {DILUTED:g}x)",
                     f"{mech.trial.iloc[0]}, {len(mech)} (layer, KV head) pairs: dilution median {med:.1f} (IQR "
                     f"{q1:.1f}-{q3:.1f}, max {d.max():.0f}); digit cluster size median "
                     f"{mech.cluster_size.median():.0f} (max {mech.cluster_size.max():.0f}); own minus centroid "
                     f"score median {mech.score_gap.median():.2f}"))
        one = float(mech.rows_one_cluster.mean())
        rows.append(("sinks-fill-the-threshold", "confirmed" if one > 0.5 else "refuted",
                     f"The always-attended tokens (sinks, recent window) in WiCSum's total hold more than Th_r-wics "
                     f"{ratio:g} of a row's attention, so most rows stop at their first cluster",
                     f"always-attended share median {mech.always_exact.median():.3f} exact, "
                     f"{mech.always_estimated.median():.3f} as ReSV estimates it; rows stopping at one cluster "
                     f"{one:.1%}"))
    kind, ev = _lower(df, RESV_TEXT, CANDWICS_TEXT)
    rows.append(("candidates-only-total", kind, "With WiCSum's total over the retrieval candidates only (the D7 "
                 "alternative) ReSV at the question does better than with the sinks in the total", ev))
    kind, ev = _lower(df, RESCORE_TEXT, "full")
    stmt = ("Beyond the paper: clusters as a 2 % shortlist, their members re-scored exactly (resv_rescore, D262), "
            "still lose the key that full keeps")
    rows.append(("rescore-still-loses", kind, stmt, ev))
    return pd.DataFrame(rows, columns=COLUMNS)
