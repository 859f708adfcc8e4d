"""Every reading of ReSV measured in the study, labelled, with exact match and its Wilson 95 % interval
(docs/DECISIONS.md D260-D262).

    variant_table(df)   # df: longctx.load_results(...); one row per (variant, context length) the study ran

Labels: ``paper-stated`` -- ReSV at the paper's settings and the paper's own Fig. 19 ablation (ReSV w/o
clustering); ``another reading`` -- where the paper is silent, the D1-D4 alternatives (literal Eq. 1-3 on raw
scores, granularity per layer, the concatenated layer key hashed, the code re-hashed from the mean), the WiCSum
total over candidates only (D7) and other Th_r-wics values; ``beyond`` -- not in the paper (``resv_rescore``, D262);
``reference`` -- full attention and the exact top-k selection.
"""
from __future__ import annotations

import pandas as pd

from .. import methods as method_table
from ..config import ReSVConfig
from ..eval.stats import wilson
from ..retrieval import takes_resv_config
from .grid import LOCAL_POLICIES, READING_TAGS, method_spec

LABELS: tuple[str, ...] = ("paper-stated", "another reading", "beyond", "reference")
#: The label of a ReSV policy by its method's role (:data:`vrex_lib.methods.METHODS`).
_ROLE_LABEL = {"table2": "paper-stated", "ablation": "paper-stated", "reading": "another reading",
               "alternative": "beyond"}


def policy_label(policy: str) -> str | None:
    """The label of a policy of the study, from the method table: a ReSV policy's by its role; ``reference`` for
    the Table II row that retrieves nothing (VideoLLM-Online's full attention) and the study's own exact top-k;
    None for the rest (e.g. InfiniGen)."""
    if policy in LOCAL_POLICIES:
        return "reference"
    m = method_table.METHODS.get(policy)
    if m is None:
        return None
    if m.role == "table2" and not m.stages:
        return "reference"
    # ReSV's readings, and this artifact's own variants whatever their policy class (D490)
    return _ROLE_LABEL.get(m.role) if takes_resv_config(policy) or m.role == "alternative" else None


def variant_label(name: str) -> str | None:
    """The label of a method name of the study (None: not a ReSV reading nor a reference, e.g. InfiniGen)."""
    s = method_spec(name)
    lab = policy_label(s.policy)
    kw = dict(s.kwargs)
    default = ReSVConfig().th_r_wics
    if lab == "paper-stated" and (any(k in kw for k, _ in READING_TAGS.values())
                                  or kw.get("th_r_wics", default) != default):
        return "another reading"
    return lab


def variant_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (ReSV variant or reference, context length): label, trials, exact match with its Wilson 95 % interval,
    the selected fraction of the offloaded tier, keys re-scored per candidate (``resv_rescore``) and ReSV's tokens
    per cluster at the question and answer."""
    rows = []
    for (m, n), g in df.groupby(["method", "context_tokens"], sort=False):
        lab = variant_label(m)
        if lab is None:
            continue
        k, t = int(g.correct.sum()), len(g)
        lo, hi = wilson(k, t)
        off = g.sum_off.sum()
        # resv_rescore's shortlist counters (the bounded ReSV's records count other things)
        rk = [r for r in g.get("rescored_keys", pd.Series(dtype=object))
              if isinstance(r, dict) and "shortlist_keys" in r]
        rs = sum(r["shortlist_keys"] for r in rk) / max(1, sum(r["candidates"] for r in rk)) if rk else float("nan")
        tpc = g["tokens_per_cluster"].mean() if "tokens_per_cluster" in g else float("nan")
        rows.append(dict(method=m, label=lab, context_tokens=int(n), n=t, exact_match=k / t, em_lo=lo, em_hi=hi,
                         fetched_frac_offloaded=g.sum_sel_off.sum() / off if off else float("nan"),
                         rescored_keys_frac=rs, tokens_per_cluster=tpc))
    out = pd.DataFrame(rows)
    return out.sort_values(["label", "method", "context_tokens"], key=lambda c: c.map(
        {x: i for i, x in enumerate(LABELS)}) if c.name == "label" else c, kind="stable").reset_index(drop=True)
