"""The study's comparisons with their uncertainty: exact match with Wilson 95 % intervals per cell, paired exact tests
between methods on the same trials, and the equal-budget table (docs/DECISIONS.md D481, D482).

    cells = power_table(df)                    # per (method, task, context length): n, exact match, interval, ...
    tests = paired_tests(df)                   # McNemar exact test of each stated comparison, per cell and pooled
    budget = equal_budget_table(df)            # exact match / needle recall vs fetched fraction of the offloaded tier

``df`` is :func:`~vrex_lib.longctx.export.load_results`. Every method of a comparison ran on the same trials (the
study's grid), so the test is paired: only the trials where exactly one of the two answers counts (McNemar); its
exact form is the two-sided binomial test of those discordant trials at 1/2.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from ..eval.stats import wilson

def stated_comparisons(names: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The comparisons the findings state (docs/DECISIONS.md D481), among the study methods ``names``: ReSV as
    specified (streaming and at the question) against the references (full attention, the exact top-k), streaming
    against at the question, ReSV at the question against each ablation and alternative read at the question, ReSV
    against every other method, and every other method against full attention."""
    from .grid import method_spec

    specs = {n: method_spec(n) for n in names}
    resv = [n for n, s in specs.items() if s.policy == "resv" and not s.kwargs]
    refs = [n for n, s in specs.items() if s.policy in ("full", "exact")]
    text = [n for n, s in specs.items() if s.text_only and n not in resv]
    others = [n for n, s in specs.items() if n not in resv and n not in refs and n not in text]
    full = [n for n in refs if specs[n].policy == "full"]
    pairs = [(a, b) for a in resv for b in refs] + list(zip(resv, resv[1:]))
    pairs += [(a, b) for a in resv if specs[a].text_only for b in text]
    pairs += [(resv[0], b) for b in others if resv] + [(a, b) for a in others + text for b in full]
    return tuple(dict.fromkeys(pairs))


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (binomial at 1/2; 1.0 when there are none)."""
    n, k = a_only + b_only, min(a_only, b_only)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def power_table(df: pd.DataFrame, by: Sequence[str] = ("method", "task", "context_tokens")) -> pd.DataFrame:
    """Per group: trials, correct, exact match with its Wilson 95 % interval, needle recall (mean) and the fetched
    fraction of the offloaded tier (pooled over the group's consulted (step, layer, KV head) cells)."""
    rows = []
    for keys, g in df.groupby(list(by), sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        k, n = int(g.correct.sum()), len(g)
        lo, hi = wilson(k, n)
        off = g.sum_off.sum() if "sum_off" in g else float("nan")
        rows.append(dict(zip(by, keys), n=n, correct=k, exact_match=k / n, em_lo=lo, em_hi=hi,
                         recall_needle=g.recall_needle.mean(), recall_value=g.recall_value.mean(),
                         fetched_frac_offloaded=g.sum_sel_off.sum() / off if off else float("nan")))
    return pd.DataFrame(rows)


def paired(df: pd.DataFrame, a: str, b: str) -> dict | None:
    """``a`` against ``b`` on the trials both ran: n, correct counts, both, a only, b only, the difference in exact
    match and the exact McNemar p-value (None when they share no trial)."""
    x = df[df.method == a].set_index("trial").correct
    y = df[df.method == b].set_index("trial").correct
    common = x.index.intersection(y.index)
    if not len(common):
        return None
    x, y = x[common].astype(bool), y[common].astype(bool)
    a_only, b_only = int((x & ~y).sum()), int((~x & y).sum())
    return dict(n=len(common), a_correct=int(x.sum()), b_correct=int(y.sum()), both=int((x & y).sum()),
                a_only=a_only, b_only=b_only, diff=(int(x.sum()) - int(y.sum())) / len(common),
                p_mcnemar=mcnemar_exact(a_only, b_only))


def paired_tests(df: pd.DataFrame, comparisons: Sequence[tuple[str, str]] | None = None,
                 by: Sequence[str] = ("task", "context_tokens")) -> pd.DataFrame:
    """For each comparison (a, b) whose methods both ran (default: :func:`stated_comparisons` of the power methods
    present): per ``by`` cell and pooled over all trials, the trials both ran, each one's correct count, the
    discordant counts (a only, b only), the difference in exact match and the exact McNemar p-value."""
    from .grid import POWER_METHODS

    have = set(df.method)
    if comparisons is None:
        comparisons = stated_comparisons([m for m in POWER_METHODS if m in have])
    rows = []
    for a, b in comparisons:
        if a not in have or b not in have:
            continue
        sub = df[df.method.isin((a, b))]
        for keys, g in sub.groupby(list(by), sort=True):
            keys = keys if isinstance(keys, tuple) else (keys,)
            r = paired(g, a, b)
            if r:
                rows.append(dict(a=a, b=b, **dict(zip(by, keys)), **r))
        r = paired(sub, a, b)
        if r:
            rows.append(dict(a=a, b=b, **{k: "all" for k in by}, **r))
    return pd.DataFrame(rows)


def equal_budget_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (method, context length): the fetched fraction of the offloaded tier against exact match (Wilson 95 %)
    and needle recall -- the points of the equal-budget curves (docs/DECISIONS.md D482). ``family`` groups a
    method's budgets (exact top-k, ReSV along Th_r-wics, InfiniGen along alpha, StreamingLLM along its window)."""
    from .grid import method_spec

    t = power_table(df, by=("method", "context_tokens"))
    t.insert(1, "family", [_family(method_spec(m)) for m in t.method])
    return t.sort_values(["family", "context_tokens", "fetched_frac_offloaded"]).reset_index(drop=True)


def _family(spec) -> str:
    from ..retrieval import POLICIES, takes_resv_config

    kw = dict(spec.kwargs)
    if spec.policy in POLICIES and takes_resv_config(spec.policy):
        reading = [k for k in kw if k != "th_r_wics"]
        return f"{spec.policy}{'@text' if spec.text_only else ''}" + (f" ({', '.join(reading)})" if reading else "")
    return spec.policy
