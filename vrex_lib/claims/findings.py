"""Findings: what the verdicts add up to, as rows a reader can check by hand (docs/DECISIONS.md D225).

A findings table (``findings_<topic>``, written with :func:`vrex_lib.report.write_wide_table`) has the columns
:data:`COLUMNS`: ``finding`` (an id), ``kind`` (:data:`KINDS`), ``statement`` (one sentence) and ``evidence`` (the
arithmetic, the counterfactual or the rows it rests on). The report opens with every such table present.

    df = verdict_findings()                  # the findings of the verdict machinery itself (notebook 07)
    report.write_wide_table("findings_verdicts", df, profile=...)
"""
from __future__ import annotations

import pandas as pd

from .. import paper
from ..perf.model_ops import LLAMA3_8B
from .resv import hc_overhead_pct

COLUMNS = ["finding", "kind", "statement", "evidence"]
#: confirmed: holds robustly; refuted: the printed numbers or a counterfactual contradict it robustly;
#: uncheckable: needs what this machine or the paper does not give; or one of the report's headings directly
#: (:data:`vrex_lib.report.content.FINDING_KINDS`, D408).
KINDS = ("confirmed", "refuted", "uncheckable", "paper-inconsistent", "not-reproduced", "depends", "beyond", "not-run")


def hash_hc_finding(head_dim: int = LLAMA3_8B.head_dim, n_kv_heads: int = LLAMA3_8B.n_kv_heads) -> dict:
    """§IV.B's 'hash <= 0.5 % of the key' and §VI.B's HC table at 1.67 % of the KV against the hashing reading
    (D3: per KV head, the default, or the concatenated layer key), at the paper's model shape."""
    n_hp = int(paper.value("resv.n_hp"))
    tpc = paper.value("resv.tokens_per_cluster")
    bound, hc = paper.value("resv.hash_pct_of_key_dim"), paper.value("resv.hc_table_pct_of_kv")
    head = 100 * n_hp / (16 * head_dim)
    layer = 100 * n_hp / (16 * head_dim * n_kv_heads)
    hc_head = hc_overhead_pct(head_dim, n_kv_heads, tpc, n_hp, "per_head")
    hc_layer = hc_overhead_pct(head_dim, n_kv_heads, tpc, n_hp, "concat")
    return dict(
        finding="resv.hash_reading", kind="refuted",
        statement=(f"The paper's two printed overheads contradict the default per-KV-head hashing (D3): a "
                   f"{n_hp}-bit hash is {head:.2f} % of a {head_dim}-d BF16 head key (> {bound:g} %) and the HC "
                   f"table {hc_head:.2f} % of the KV (printed {hc:g} %); both printed numbers hold only for hashing "
                   f"the concatenated layer key ({layer:.3f} %, {hc_layer:.2f} %)."),
        evidence=(f"{n_hp} / (16 x {head_dim}) = {head:.3f} %; {n_hp} / (16 x {head_dim} x {n_kv_heads}) = "
                  f"{layer:.3f} %; HC rows (BF16 centroid, {n_hp}-bit code, 16-bit count, 32-bit index per member) "
                  f"at {tpc:g} tokens per cluster (claims.resv.hc_overhead_pct): per head {hc_head:.3f} %, per "
                  f"layer {hc_layer:.3f} %; Llama-3-8B: {n_kv_heads} KV heads of {head_dim}"))


def verdict_findings(tables: pd.DataFrame | None = None) -> pd.DataFrame:
    """The findings the verdict machinery itself can state (:data:`COLUMNS`): the hashing reading's contradiction,
    and, from ``tables`` (:func:`vrex_lib.report.collect_tables`), each paper-inconsistent claim with its
    arithmetic."""
    rows = [hash_hc_finding()]
    if tables is not None and len(tables):
        t = tables[(tables["verdict"] == "FAIL") & (tables["cause"] == "paper-inconsistent")]
        t = t[~t["claim"].astype(str).str.endswith(".measured_workload")].drop_duplicates("claim")
        for r in t.itertuples():
            rows.append(dict(finding=str(r.claim), kind="refuted",
                             statement=f"The printed {r.paper:g} {r.unit} ({r.where}) is outside what the paper's own "
                                       "inputs allow, for every admissible value of the choices the bound depends on.",
                             evidence=str(r.cause_detail)))
    return pd.DataFrame(rows, columns=COLUMNS)


__all__ = ["COLUMNS", "KINDS", "hash_hc_finding", "verdict_findings"]
