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
from ..longctx import accuracy_table
from ..perf import simulate

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
