"""What REPORT.md and report.html show, as plain data for the templates: headline rows, verdict counts per
cause, what is incomplete, and each section's figures and rows in the paper's order.

Cells are Markdown-ready strings (``|`` escaped); the templates only arrange them.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd

from ..config import results_dir, workload_path
from . import captions, layout, manifest, stale
from .rows import (CAUSES, CONSISTENT, DEPENDS, FAIL, INFO_V, MISSING, NEEDS_CAUSE, NO_TERM, PASS, UNEXPLAINED,
                   VERDICTS, cause_of)
from .tables import collect_tables, damaged_tables, is_comparison, load_table, mixed_profiles, table_paths, table_title

_TAGS = (" [V-Rex: paper-stated workload]", " [V-Rex: measured workload]")
_UNIT_GLUE = {"x": "×", "%": " %", "fraction": ""}


def cell(text: object) -> str:
    """``text`` safe inside a Markdown table cell."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x: object) -> str:
    if _missing(x):
        return "–"
    if not isinstance(x, float):
        return str(x)
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def value(x: object, unit: object) -> str:
    """A number with its unit ('20.49 %', '1.361×', '53.25 TFLOPS')."""
    if _missing(x):
        return "–"
    u = "" if _missing(unit) else str(unit)
    if u in _UNIT_GLUE:
        return num(x) + _UNIT_GLUE[u]
    return f"{num(x)} {u}".strip()


def _text(x) -> str:
    return "" if _missing(x) else str(x).strip()


#: The long texts behind the report's cause cells, in order (:func:`note`); :func:`context` resets it.
_NOTES: list[dict] = []


def slug(text: str) -> str:
    """The anchor GitHub gives a heading (lower case, punctuation dropped, spaces as hyphens); report.html's
    headings get the same ids (:mod:`.render`)."""
    import re

    t = re.sub(r"<[^>]+>", "", str(text)).strip().lower()
    return re.sub(r"[^\w\- ]", "", t).replace(" ", "-")


def note(text: str, check: str = "") -> str:
    """A footnote link ``[n]`` to ``text`` (and the check id behind it), listed under *Cause details*; in
    report.html the link opens as a details element."""
    text = _text(text)
    if not text and not check:
        return ""
    for n in _NOTES:
        if n["text"] == text and n["check"] == check:
            return f"[[{n['n']}]](#note-{n['n']})"
    n = len(_NOTES) + 1
    _NOTES.append(dict(n=n, text=cell(text), check=cell(check)))
    return f"[[{n}]](#note-{n})"


def _short(text: str, limit: int = 90) -> str:
    """The first clause of ``text``, at most ``limit`` characters."""
    t = _text(text).split("; ")[0].split(". ")[0]
    return cell(t if len(t) <= limit else t[: limit - 1].rsplit(" ", 1)[0] + "…")


def _get(r: pd.Series, col: str) -> str:
    return _text(r[col]) if col in r.index else ""


#: The most visible characters a cause cell shows (issue 47; the rest is behind its note link).
CAUSE_CELL_MAX = 160


def visible(text: str) -> str:
    """What a reader sees of a Markdown cell: link targets and emphasis marks dropped."""
    import re

    t = re.sub(r"\[\[(\d+)\]\]\(#[^)]*\)", r"[\1]", str(text))
    return re.sub(r"\*\*|`", "", t)


def _factor_words(plaus: str) -> str:
    """'x0.31, beyond what the cited devices allow' from a term's plausibility note (never the word 'plausible')."""
    import re

    m = re.search(r"x(\d[\d.]*|inf)", plaus)
    if "negative" in plaus or not m:
        return "a negative value, which no device gives"
    inside = "within" in plaus and "outside" not in plaus
    return f"×{m.group(1)}, " + ("within" if inside else "beyond") + " the cited devices' range"


def _sentence(verdict: str, cause: str, detail: str, r: pd.Series | None) -> str:
    """The plain sentence of one row's cause (no ids, no arithmetic: that is behind the note)."""
    if verdict == DEPENDS:
        point, _, rest = _text(detail).removeprefix("PASS at ").partition(" (")
        return f"passes at {point} ({rest.split(';')[0].rstrip(')')})" if rest else f"passes at {point}"
    if verdict == CONSISTENT:
        return "by construction"
    if cause == "model" and r is not None:
        term = _get(r, "term")
        share = r["term_share"] if "term_share" in r.index and not _missing(r["term_share"]) else None
        needs = _get(r, "term_needs")
        part = f" ({share:.0%} of it)" if share is not None and share < 0.995 else ""
        return (f"{term}{part} would need {needs}, "
                f"{_factor_words(_get(r, 'term_plausible'))}")
    return _short(_no_ids(detail).removeprefix("NOT RUN: "), 50 if cause == "not-run" else 110)


def _no_ids(text: str) -> str:
    """``text`` without dotted ids (claim keys, check ids such as implied.vrex8.max_sel_frac_pcie.40k)."""
    import re

    t = re.sub(r"\(?`?\b[a-z][\w-]*(?:\.[\w-]+){2,}\b`?\)?", "", _text(text))
    return re.sub(r"\s+([,;:.)])", r"\1", re.sub(r"\s{2,}", " ", t)).strip(" ,;:")


def cause_text(verdict: str, cause: object, detail: object, r: pd.Series | None = None) -> str:
    """One plain sentence for a row's cause cell, the detail, the arithmetic and the check id behind a footnote
    link: '**model** — V-Rex8 LLM ops (85% of it) would need 123 ms (now 400 ms), ×0.31, beyond what the cited
    devices allow [3]' for a FAIL / NOT RUN row, '**unexplained**' when it names no cause, the passing point of a
    DEPENDS row, what a CONSISTENT row checks; '' otherwise. At most :data:`CAUSE_CELL_MAX` visible characters."""
    term = _get(r, "term") if r is not None else "x"
    check = _get(r, "check") if r is not None else ""
    if verdict in (DEPENDS, CONSISTENT):
        head = "**depends** — " if verdict == DEPENDS else ""
        return _fit(head + cell(_sentence(verdict, "", _text(detail), r)), note(detail, check))
    c = cause_of(verdict, _text(cause), term)
    if not c:
        return ""
    if c == UNEXPLAINED:
        return f"**{c}**" + (f" (`{cell(_text(cause))}` is not one of the causes)" if _text(cause) else "")
    long = _text(detail)
    if c == "model" and r is not None:
        long = "; ".join(x for x in (long, f"term: {term}", f"needs {_get(r, 'term_needs')}",
                                     _get(r, "term_plausible")) if x)
    if not long:
        return f"**{c}**"
    return _fit(f"**{c}** — " + cell(_sentence(verdict, c, _text(detail), r)), note(long, check))


def _fit(text: str, link: str, limit: int = CAUSE_CELL_MAX) -> str:
    """``text`` cut at a word so that it and ``link`` show at most ``limit`` characters."""
    room = limit - len(visible(link)) - 1
    if len(visible(text)) > room:
        cut = len(text) - (len(visible(text)) - room) - 1
        text = text[:cut].rsplit(" ", 1)[0].rstrip(",;:") + "…"
    return f"{text} {link}".strip()


def _pair_cause(a: pd.Series, b: pd.Series | None) -> str:
    """The cause cell of a claim and its measured-workload twin: 'both workloads: ...' once where the two name
    the same cause and sentence, else each side labelled (one side alone when the other has none)."""
    ta = cause_text(a["verdict"], a["cause"], a["cause_detail"], a)
    tb = "" if b is None else cause_text(b["verdict"], b["cause"], b["cause_detail"], b)
    if not tb or tb == ta:
        return ta
    if not ta:
        return f"measured: {tb}"
    same = (b is not None and a["verdict"] == b["verdict"] == FAIL and _text(a["cause"]) == _text(b["cause"])
            and _get(a, "term") == _get(b, "term"))
    if same:
        return _fit("both workloads: " + ta.rsplit(" [[", 1)[0], ta[len(ta.rsplit(" [[", 1)[0]) + 1:])
    room = CAUSE_CELL_MAX - len("paper-stated: ; measured: ")

    def bare(t: str, row: pd.Series) -> str:  # a NOT RUN side shrinks to its label; what would run it is behind the note
        head, _, link = t.rpartition(" [[")
        return f"{head.split(' — ')[0]} [[{link}" if row["verdict"] == MISSING and link else t
    if len(visible(ta)) + len(visible(tb)) > room:
        ta, tb = bare(ta, a), bare(tb, b)
    la, lb = len(visible(ta)), len(visible(tb))
    if la + lb > room:  # the shorter keeps its length up to half the room, the longer gets the rest
        ka = max(room // 2, room - lb) if la > lb else min(la, room // 2)
        kb = room - min(la, ka)
        ta, tb = (_fit(t.rsplit(" [[", 1)[0], t[len(t.rsplit(" [[", 1)[0]) + 1:], k) for t, k in ((ta, ka), (tb, kb)))
    return f"paper-stated: {ta}; measured: {tb}"


def pairs(df: pd.DataFrame) -> list[tuple[pd.Series, pd.Series | None]]:
    """Rows of one table with each ``<claim>.measured_workload`` row joined to its ``<claim>`` twin, in order."""
    rows = [r for _, r in df.iterrows()]
    twin: dict[int, int] = {}
    taken: set[int] = set()
    for j, r in enumerate(rows):
        if str(r["claim"]).endswith(layout.MEASURED_SUFFIX):
            base = str(r["claim"])[: -len(layout.MEASURED_SUFFIX)]
            i = next((i for i, q in enumerate(rows[:j]) if q["claim"] == base and i not in twin), None)
            if i is not None:
                twin[i] = j
                taken.add(j)
    return [(r, rows[twin[i]] if i in twin else None) for i, r in enumerate(rows) if i not in taken]


def _label(r: pd.Series, strip_tags: bool) -> str:
    q = _text(r["quantity"])
    for t in _TAGS if strip_tags else ():
        q = q.replace(t, "")
    claim = str(r["claim"])
    return f"`{cell(claim)}`" + (f" — {cell(q)}" if q and q != claim else "")


def _counts(df: pd.DataFrame) -> str:
    vc = df["verdict"].value_counts()
    return " · ".join(f"{int(vc[v])} {v}" for v in VERDICTS if v in vc)


def _is_detail_info(r: pd.Series) -> bool:
    """An informational row with no printed counterpart: shown in the appendix, not in its section."""
    return r["verdict"] == INFO_V and _missing(r["paper"])


def _verdict_cell(r: pd.Series) -> str:
    """'**PASS** · robust' / '**FAIL** · depends on D6, D244' (the robustness column, ids only)."""
    import re

    rob = _get(r, "robustness")
    tail = "" if not rob else (" · robust" if rob.startswith("robust") else
                               " · depends on " + ", ".join(dict.fromkeys(re.findall(r"D\d+", rob.split(":")[0]))))
    if r["verdict"] == DEPENDS:
        tail = ""  # the cause cell names the passing point
    return f"**{r['verdict']}**{tail}"


def _cells(a: pd.Series, b: pd.Series | None) -> dict:
    """The cells a row and its measured-workload twin share in every table: paper, ours, verdicts, cause."""
    return dict(paper=value(a["paper"], a["unit"]), ours=value(a["reproduced"], a["unit"]),
                verdict=_verdict_cell(a), measured="" if b is None else value(b["reproduced"], b["unit"]),
                measured_verdict="" if b is None else f"**{b['verdict']}**", cause=_pair_cause(a, b))


def table_block(path: Path, df: pd.DataFrame, move_info: bool = True) -> dict:
    """One comparison table: its rows (paired when it has measured-workload twins) and, with ``move_info``, its
    informational rows with no paper value apart (the report shows those in its appendix)."""
    keep, info = [], []
    for a, b in pairs(df):
        if move_info and _is_detail_info(a) and (b is None or _is_detail_info(b)):
            info += [a] if b is None else [a, b]
        else:
            keep.append((a, b))
    paired = any(b is not None for _, b in keep)
    rows = [dict(_cells(a, b), label=_label(a, paired), tol=cell(a["tolerance"]),
                 rel="–" if _missing(a["rel_error"]) else f"{a['rel_error']:+.1%}") for a, b in keep]
    profile = ", ".join(sorted(str(p) for p in df["profile"].dropna().unique())) or "?"
    return dict(id=path.stem, title=cell(table_title(path)), csv=f"tables/{path.name}", profile=profile,
                counts=_counts(df), paired=paired, rows=rows,
                info=[dict(label=_label(r, False), ours=value(r["reproduced"], r["unit"])) for r in info])


def wide_block(path: Path, df: pd.DataFrame) -> dict:
    """An exploration table: its size and, when it marks them, the paper's and the Pareto rows."""
    prof = ", ".join(sorted(str(p) for p in df["profile"].dropna().unique())) if "profile" in df else "?"
    flags = [c for c in ("is_paper", "pareto_latency", "pareto_area") if c in df.columns]
    cols, rows = [], []
    if flags:
        keep = df[df[flags].fillna(False).astype(bool).any(axis=1)]
        side = path.with_suffix(".columns")
        listed = side.read_text().strip().split(",") if side.exists() else []
        cols = [c for c in listed if c in df.columns and c not in flags] or \
            [c for c in df.columns if c not in ("profile", "model", "workload_source", *flags)][:12]
        cols += flags
        rows = [[cell(num(d[c])) for c in cols] for d in (r._asdict() for r in keep.itertuples(index=False))]
    return dict(id=path.stem, title=cell(table_title(path)), csv=f"tables/{path.name}", profile=prof or "?",
                n_rows=len(df), columns=[cell(c) for c in cols], rows=rows)


def _find(tables: pd.DataFrame, table: str, claim: str) -> tuple[pd.Series | None, pd.Series | None]:
    """The row of ``claim`` (with a paper value) and its measured-workload twin: in ``table`` first, else in the
    first table holding it."""
    hits = tables[(tables["claim"] == claim) & tables["paper"].notna()]
    if not len(hits):
        return None, None
    tid = table if (hits["table"] == table).any() else hits.iloc[0]["table"]
    return next((a, b) for a, b in pairs(tables[tables["table"] == tid]) if a["claim"] == claim)


def headline(tables: pd.DataFrame) -> list[dict]:
    """The first table of the report: groups of rows (Abstract, Table I, II, III), each row with its paper value,
    ours (paper-stated workload and measured workload where both exist), verdicts and cause. Every row of the
    ``headline`` table is shown; a listed claim that no table holds is shown as not in these results."""
    listed = {claim: (group, label) for group, _, claim, label in layout.HEADLINE}
    chosen: list[tuple[str, str, str, pd.Series | None, pd.Series | None]] = []
    for a, b in pairs(tables[tables["table"] == layout.HEADLINE_TABLE]):
        group, label = listed.get(str(a["claim"]), ("Abstract", ""))
        chosen.append((group, str(a["claim"]), label, a, b))
    seen = {c[1] for c in chosen}
    for group, table, claim, label in layout.HEADLINE:
        if claim not in seen:
            seen.add(claim)
            chosen.append((group, claim, label, *_find(tables, table, claim)))
    rank = {claim: i for i, (_, _, claim, _) in enumerate(layout.HEADLINE)}
    chosen.sort(key=lambda c: rank.get(c[1], len(rank)))  # stable: unlisted rows keep the table's order
    names = list(dict.fromkeys([g for g, *_ in layout.HEADLINE] + [c[0] for c in chosen]))
    groups = [dict(name=g, rows=[_headline_row(label, claim, a, b) for gg, claim, label, a, b in chosen if gg == g])
              for g in names]
    return [g for g in groups if g["rows"]]


def _headline_row(label: str, claim: str, a: pd.Series | None, b: pd.Series | None) -> dict:
    if a is None:
        return dict(label=cell(label), where="", paper="–", ours="–", verdict="–", measured="",
                    measured_verdict="", cause=f"not in these results: no table holds `{claim}` (its notebook has "
                                               "not run)")
    return dict(_cells(a, b), label=cell(label or _text(a["quantity"]).replace(_TAGS[0], "")),
                where=cell(_text(a["where"])))


def _terms(tables: pd.DataFrame) -> list:
    return list(tables["term"]) if "term" in tables.columns else ["x"] * len(tables)


def _causes(tables: pd.DataFrame) -> list[str]:
    return [cause_of(v, c, t) for v, c, t in zip(tables["verdict"], tables["cause"], _terms(tables))]


def unexplained(tables: pd.DataFrame) -> pd.DataFrame:
    """The FAIL and NOT RUN rows that name no cause (the report lists them; a test requires none)."""
    if not len(tables):
        return tables
    mask = [cause_of(v, c) == UNEXPLAINED for v, c in zip(tables["verdict"], tables["cause"])]
    return tables[mask]


def without_term(tables: pd.DataFrame) -> pd.DataFrame:
    """The 'model' FAIL rows that name no responsible term (the report lists them; counted as
    :data:`~vrex_lib.report.rows.NO_TERM`)."""
    if not len(tables):
        return tables
    return tables[[c == NO_TERM for c in _causes(tables)]]


def _is_twin(claims: pd.Series) -> pd.Series:
    return claims.astype(str).str.endswith(layout.MEASURED_SUFFIX)


def distinct_claims(tables: pd.DataFrame) -> pd.DataFrame:
    """One row per claim id over every comparison table: a claim shown in several tables (the headline table
    repeats others' rows, an estimate of record has INFO cross-checks beside it) counts once, from the row that
    grades it (PASS, CONSISTENT, DEPENDS or FAIL) before a NOT RUN one before an INFO one, the headline table
    last; the measured-workload twins are the same claims' counterfactual column and are left out."""
    if not len(tables):
        return tables
    t = tables[~_is_twin(tables["claim"])]
    graded = t["verdict"].isin([PASS, CONSISTENT, DEPENDS, FAIL])
    rank = (~graded).astype(int) + (t["verdict"] == INFO_V).astype(int)
    order = t.assign(_nopaper=t["paper"].isna().astype(int), _rank=rank,
                     _hl=(t["table"] == layout.HEADLINE_TABLE).astype(int))
    order = order.sort_values(["_nopaper", "_rank", "_hl", "table"], kind="stable").drop_duplicates("claim")
    return order.drop(columns=["_nopaper", "_rank", "_hl"]).sort_index()


def conflicts(tables: pd.DataFrame) -> dict[str, list[tuple[str, str]]]:
    """claim -> [(table, verdict)] for every claim graded in more than one table with different verdicts (one claim
    must have one verdict; the report lists these)."""
    if not len(tables):
        return {}
    t = tables[~_is_twin(tables["claim"]) & tables["paper"].notna()]
    out = {}
    for claim, g in t.groupby("claim", sort=True):
        if g["verdict"].nunique() > 1:
            out[str(claim)] = list(zip(g["table"], g["verdict"]))
    return out


SUMMARY_COLUMNS = ["verdict", "cause", "claims", "rows", "tables"]


def summary_frame(tables: pd.DataFrame) -> pd.DataFrame:
    """Counts per (verdict, cause) over every comparison table: what ``results/tables/summary.csv`` holds (columns
    verdict, cause, claims -- distinct claims, :func:`distinct_claims` --, rows -- every row, measured-workload
    twins and repeats included --, tables; one line for PASS, CONSISTENT, DEPENDS and INFO, one per cause,
    'model-without-term' and 'unexplained' for FAIL and NOT RUN, zeros included, so its shape never changes)."""
    recs = []
    t = tables.assign(_cause=_causes(tables)) if len(tables) else tables.assign(_cause=[])
    d = distinct_claims(tables)
    d = d.assign(_cause=_causes(d)) if len(d) else d.assign(_cause=[])
    for v in VERDICTS:
        sub, dsub = t[t["verdict"] == v], d[d["verdict"] == v]
        keys = [*CAUSES, NO_TERM, UNEXPLAINED] if v in NEEDS_CAUSE else [""]
        for c in keys:
            part = sub[sub["_cause"] == c]
            recs.append(dict(verdict=v, cause=c, claims=int((dsub["_cause"] == c).sum()), rows=len(part),
                             tables=int(part["table"].nunique())))
    profile = ", ".join(sorted({str(p) for p in tables["profile"].dropna()})) if len(tables) else ""
    return pd.DataFrame.from_records(recs, columns=SUMMARY_COLUMNS).assign(profile=profile)


def totals_line(summary: pd.DataFrame, col: str = "claims") -> str:
    """The verdict totals over distinct claims (``col``) with the FAIL / NOT RUN causes, e.g. '5 PASS · 3 CONSISTENT
    · 1 DEPENDS · 2 FAIL (model 1, unexplained 1) · 1 NOT RUN (not-run 1) · 4 INFO'."""
    parts = []
    for v in (PASS, CONSISTENT, DEPENDS, FAIL, MISSING, INFO_V):
        sub = summary[summary["verdict"] == v]
        n = int(sub[col].sum())
        by = ", ".join(f"{c} {int(k)}" for c, k in zip(sub["cause"], sub[col]) if c and k)
        parts.append(f"{n} {v}" + (f" ({by})" if by else ""))
    return " · ".join(parts)


def incomplete(out: str | os.PathLike | None = None, notebook_dir: str | os.PathLike | None = None) -> list[str]:
    """Markdown bullets: what keeps these results from being one complete run (empty when nothing does)."""
    base = results_dir(out)
    items = [f"`notebooks/{nb}`: {', '.join(f'`{t}`' for t in ids)} absent"
             for nb, ids in manifest.missing_tables(base, notebook_dir).items()]
    items += [f"`notebooks/{nb}`: figure {', '.join(f'`{f}.png`' for f in ids)} absent"
              for nb, ids in manifest.missing_figures(base, notebook_dir).items()]
    items += [f"`notebooks/{nb[:-len('.FAILED.ipynb')]}.ipynb`: last run FAILED (see `results/executed/{nb}`)"
              for nb in sorted(p.name for p in (base / "executed").glob("*.FAILED.ipynb"))]
    items += [f"`results/tables/{name}`: {why}; rerun the notebook that writes it"
              for name, why in damaged_tables(base).items()]
    items += [f"`results/executed/{nb[:-6]}.manifest.json`: {why}; rerun `make reproduce`"
              for nb, why in manifest.bad_manifests(base, notebook_dir).items()]
    items += [f"`notebooks/{nb}`: stale ({why}); rerun `make reproduce`"
              for nb, why in stale.stale_notebooks(base, notebook_dir).items()]
    mixed = mixed_profiles(base)
    if mixed:
        items.append("tables from several profiles (" + "; ".join(f"{p}: {', '.join(ts)}" for p, ts in mixed.items())
                     + "): tables of an earlier run are mixed in; rerun `make reproduce` into a clean RESULTS")
    return items


def sections(out: str | os.PathLike | None, notebook_dir: str | os.PathLike | None) -> dict[str, dict]:
    """Section key -> dict(heading, figures, tables, wide) for every section with something to show, built from
    every table and figure under ``results/`` (the headline table excepted: it opens the report)."""
    base = results_dir(out)
    who = manifest.writers(base, notebook_dir)
    got = {s.key: dict(key=s.key, heading=s.heading, figures=[], tables=[], wide=[], also=[])
           for s in layout.ALL_SECTIONS}
    places: dict[str, str] = {}
    paper_keys = {s.key for s in layout.PAPER_SECTIONS}
    counts = manifest.recorded_rows(base)
    for path in table_paths(base):
        df = load_table(path, counts.get(path.stem))
        if isinstance(df, str) or path.stem == layout.HEADLINE_TABLE or path.stem.startswith(FINDINGS_PREFIX):
            continue  # damaged tables are listed as incomplete; findings open the report
        wide = not is_comparison(df)
        key = layout.place("table", path.stem, title=table_title(path), wide=wide, writer=who.get(path.stem, ""))
        places[path.stem] = key
        block = wide_block(path, df) if wide else table_block(path, df, move_info=key in paper_keys)
        got[key]["wide" if wide else "tables"].append(block)
    for png in sorted((base / "figures").glob("*.png")):
        key = layout.place("figure", png.stem, writer=who.get(png.stem, ""), table_places=places)
        got[key]["figures"].append(dict(id=png.stem, href=f"figures/{png.name}",
                                        caption=captions.caption(png.stem, who.get(png.stem, ""))))
    shown = {f["id"]: sec["heading"].split(" — ")[0] for sec in got.values() for f in sec["figures"]}
    for s in layout.ALL_SECTIONS:
        got[s.key]["also"] = [dict(id=f, href=f"figures/{f}.png", where=shown[f]) for f in s.also
                              if f in shown and f not in {x["id"] for x in got[s.key]["figures"]}]
    order = {s.key: i for i, s in enumerate(layout.ALL_SECTIONS)}
    for s in layout.ALL_SECTIONS:  # what a section lists first, in its own order; the rest by id
        for part, listed in (("figures", s.figures), ("tables", s.tables), ("wide", s.tables)):
            got[s.key][part].sort(key=lambda x: (listed.index(x["id"]) if x["id"] in listed else len(listed),
                                                 x["id"]))
    return {k: v for k, v in sorted(got.items(), key=lambda kv: order[kv[0]])
            if v["figures"] or v["tables"] or v["wide"]}


FINDINGS_PREFIX = "findings_"
FINDINGS_COLUMNS = ("finding", "kind", "statement", "evidence")
#: The report's opening headings (issue 42's vocabulary), in order; a findings table's ``kind`` (confirmed /
#: refuted / uncheckable, :data:`vrex_lib.claims.findings.KINDS`) maps onto them, and the retrieval study's own
#: findings (:data:`BEYOND_TABLES`) go under their own heading.
FINDING_KINDS = {"paper-inconsistent": "The paper contradicts its own inputs",
                 "not-reproduced": "Not reproduced by our model",
                 "confirmed": "Confirmed", "depends": "Depends on an open choice",
                 "beyond": "Beyond the paper: our retrieval findings", "not-run": "Not run here"}
_KIND_OF = {"refuted": "paper-inconsistent", "confirmed": "confirmed", "uncheckable": "not-run"}
#: Findings tables of what this artifact found beyond the paper's claims.
BEYOND_TABLES = ("findings_retrieval",)


def _table_findings(base: Path, out: dict) -> tuple[list[str], list[str]]:
    """The bullets of every ``findings_*`` table into ``out``; (tables read, tables that could not be)."""
    read, bad = [], []
    for path in sorted((base / "tables").glob(f"{FINDINGS_PREFIX}*.csv")):
        try:
            df = pd.read_csv(path)
        except (OSError, ValueError) as err:
            bad.append(f"`tables/{path.name}` unreadable ({type(err).__name__})")
            continue
        miss = [c for c in FINDINGS_COLUMNS if c not in df.columns]
        if miss:
            bad.append(f"`tables/{path.name}` lacks the columns {', '.join(miss)}")
            continue
        read.append(f"[tables/{path.name}](tables/{path.name})")
        for r in df.itertuples():
            k = str(r.kind).strip()
            kind = "beyond" if path.stem in BEYOND_TABLES else (k if k in FINDING_KINDS else _KIND_OF.get(k, "not-run"))
            out[FINDING_KINDS[kind]].append(f"{cell(_text(r.statement))} `{cell(_text(r.finding))}` "
                                            + note(_text(r.evidence)))
    return read, bad


def findings(tables: pd.DataFrame, base: Path) -> dict:
    """The report's opening: {heading: [bullet, ...]} under :data:`FINDING_KINDS`: every ``findings_*`` table
    under ``results/tables`` (columns :data:`FINDINGS_COLUMNS`), and from the verdicts the robust PASSes (listed),
    the robust 'model' FAILs (with the term, what it would need and the nearest value any admissible point gives),
    the DEPENDS claims (with their passing point) and the NOT RUN ones; plus the tables read."""
    out: dict[str, list[str]] = {h: [] for h in FINDING_KINDS.values()}
    read, bad = _table_findings(base, out)
    d = distinct_claims(tables)
    if len(d):
        rob = d[_col(d, "robustness").str.startswith("robust")]
        ok = rob[rob["verdict"] == PASS]
        if len(ok):
            out[FINDING_KINDS["confirmed"]].append(
                f"{len(ok)} claims PASS at every point of the open choices they depend on: "
                + ", ".join(f"`{cell(c)}`" for c in ok["claim"]))
        plain = d[(d["verdict"] == PASS) & (_col(d, "robustness") == "")]
        if len(plain):
            out[FINDING_KINDS["confirmed"]].append(
                f"{len(plain)} claims PASS where no open choice applies: "
                + ", ".join(f"`{cell(c)}`" for c in plain["claim"]))
        far = rob[(rob["verdict"] == FAIL) & (rob["cause"] == "model")]
        for r in far.itertuples():
            out[FINDING_KINDS["not-reproduced"]].append(
                f"`{cell(r.claim)}`: ours {value(r.reproduced, r.unit)} vs printed {value(r.paper, r.unit)}; "
                f"{cell(_text(r.term))} would need {cell(_text(r.term_needs))}; "
                f"{cell(_text(r.robustness).replace('robust over', 'FAIL at all'))} "
                + note(_text(r.cause_detail), _text(getattr(r, "check", ""))))
        dep = d[d["verdict"] == DEPENDS]
        for r in dep.itertuples():
            out[FINDING_KINDS["depends"]].append(f"`{cell(r.claim)}` {cell(_text(r.cause_detail))}")
        nr = d[d["verdict"] == MISSING]
        if len(nr):
            out[FINDING_KINDS["not-run"]].append(
                f"{len(nr)} claims are NOT RUN here (they need the full profile, a GPU or a tool this machine "
                "lacks; each names what would run it): " + ", ".join(f"`{cell(c)}`" for c in nr["claim"]))
    return dict(groups=[dict(name=k, items=v) for k, v in out.items() if v], tables=read, bad=bad)


def _col(d: pd.DataFrame, col: str) -> pd.Series:
    return d[col].astype(object).fillna("").astype(str) if col in d.columns else pd.Series("", index=d.index)


def per_table_counts(tables: pd.DataFrame) -> list[dict]:
    """One row per comparison table: its verdict counts and FAIL / NOT RUN rows without a cause."""
    rows = []
    for tid, df in tables.groupby("table", sort=True):
        vc = df["verdict"].value_counts()
        rows.append(dict(table=tid, **{v: int(vc.get(v, 0)) for v in VERDICTS},
                         unexplained=len(unexplained(df))))
    return rows


def profile_models(base: Path, profiles: list[str]) -> str:
    """Which model each profile ran, as its workload file records it (``model_identity``, docs/DECISIONS.md D210):
    '; model — default: SmolLM2-135M-Instruct (...), recorded in `data/workload_default.json`'."""
    said = []
    for p in profiles:
        rel = str(workload_path(p, "."))
        try:
            d = json.loads((base / rel).read_text())
        except (OSError, ValueError):
            said.append(f"{p}: not recorded (`{rel}` is missing or unreadable)")
            continue
        ident = d.get("model_identity") if isinstance(d, dict) else None
        said.append(f"{p}: {ident['summary']}, recorded in `{rel}`" if isinstance(ident, dict) and "summary" in ident
                    else f"{p}: not recorded (`{rel}` has no model_identity)")
    return f"; model — {'; '.join(said)}" if said else ""


def context(out: str | os.PathLike | None = None, notebook_dir: str | os.PathLike | None = None) -> dict:
    """Everything the report templates need, from ``results/``."""
    base = results_dir(out)
    _NOTES.clear()
    tables = collect_tables(base)
    summary = summary_frame(tables)
    why = unexplained(tables)
    found = findings(tables, base)
    hl = headline(tables)
    secs = sections(base, notebook_dir)
    twice = conflicts(tables)
    noterm = without_term(tables)
    profiles = sorted({str(p) for p in tables["profile"].dropna().unique()}) if len(tables) else []
    hl_path = base / "tables" / f"{layout.HEADLINE_TABLE}.csv"
    return dict(
        profiles=", ".join(profiles) or "none", models=profile_models(base, profiles), profile_set=profiles,
        n_tables=int(tables["table"].nunique()),
        totals=totals_line(summary), totals_rows=totals_line(summary, "rows"),
        incomplete=incomplete(base, notebook_dir), headline=hl, findings=found,
        conflicts=[dict(claim=cell(c), where=", ".join(f"{t}: {v}" for t, v in tv)) for c, tv in twice.items()],
        without_term=[dict(table=r["table"], label=_label(r, False)) for _, r in noterm.iterrows()],
        headline_csv=f"tables/{hl_path.name}" if hl_path.is_file() else "",
        causes=[dict(name=c, meaning=cell(m), fail=_n(summary, FAIL, c), not_run=_n(summary, MISSING, c))
                for c, m in CAUSES.items()]
        + [dict(name=NO_TERM, meaning="a 'model' FAIL that names no responsible term: its builder must name it",
                fail=_n(summary, FAIL, NO_TERM), not_run=0)]
        + [dict(name=UNEXPLAINED, meaning="the row names no cause: its builder must set one",
                fail=_n(summary, FAIL, UNEXPLAINED), not_run=_n(summary, MISSING, UNEXPLAINED))],
        n_unexplained=len(why),
        unexplained=[dict(table=r["table"], label=_label(r, False), verdict=f"**{r['verdict']}**")
                     for _, r in why.iterrows()],
        per_table=per_table_counts(tables), sections=secs, notes=list(_NOTES),
        paper_keys=[s.key for s in layout.PAPER_SECTIONS], summary=summary,
        stale=stale.stale_notebooks(base, notebook_dir))


def _n(summary: pd.DataFrame, verdict: str, cause: str) -> int:
    sub = summary[(summary["verdict"] == verdict) & (summary["cause"] == cause)]
    return int(sub["claims"].sum())
