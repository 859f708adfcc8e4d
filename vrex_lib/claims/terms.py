"""Why a Table III row of an estimate FAILs, as data: the responsible term, its share of the result, the value it
would need for a PASS, and whether that value is physically plausible (``docs/DECISIONS.md D289``).

    terms = fail_terms(df, rows)        # df: a breakdown frame of one estimate; rows: its Table III rows
    terms["table3.power_mw.dpe"]        # {'term', 'kind', 'share', 'value', 'needs', 'factor', 'unit',
                                        #  'plausible', 'why', 'target'}

The term is the largest group of same-kind parts of the row's quantity (of the block for a block row, of the core
for a total, of the DRE or the rest of the core for a DRE share, whichever needs the smaller change): e.g. all the
DPE's synthesised units together, named by their largest members. ``needs`` is the value
of that term alone that brings the row to the nearest edge of its tolerance band, everything else fixed.
``plausible`` compares the needed factor with the one plausibility rule (:data:`vrex_lib.paper.PLAUSIBLE_TERM`);
:data:`PLAUSIBLE` gives each kind's reason for moving at all.
"""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from .. import paper, report

#: kind -> why a term of that kind can move at all in a synthesis of the same design; how far it may move is the one
#: plausibility rule of the tolerance table (:data:`vrex_lib.paper.PLAUSIBLE_TERM`, docs/DECISIONS.md D403).
PLAUSIBLE: dict[str, str] = {
    "logic switching": "a 14 nm library's switching energy vs NanGate 45 nm cells scaled by Stillmaker-Baas: their "
                       "HP/LP 45 nm fits differ x1.16, glitches 0-40 %, net loads at fan-out 1-4 and timing-driven "
                       "upsizing",
    "per-op datapath": "cited per-operation energies of one operation differ between sources (Horowitz vs Aladdin, "
                       "notebook 05 §5)",
    "registers and clock": "clock gating could halve the flip-flops' clock energy; a skew-balanced tree of larger "
                           "buffers could double the tree",
    "SRAM": "CACTI's cell flavours, temperature and banking (notebook 05 §6)",
    "logic area": "pre-layout cell area of the same RTL: complex cells (AOI/OAI, full adders) shrink it, timing "
                  "upsizing grows it",
    "datapath area": "cited per-operation areas differ between sources",
    "register area": "flip-flop flavours (with enable, scan) and sizing",
    "SRAM area": "macro compilers' array efficiency and periphery",
}


def part_kind(name: str, source: str, quantity: str) -> str:
    """The :data:`PLAUSIBLE` kind of one breakdown part for ``quantity`` ('power' | 'area')."""
    n, s = name.lower(), (source or "").lower()
    if "register" in n or "clock tree" in n or "queue" in n or s == "rtl registers":
        base = "registers"
    elif s == "cacti" or "sram" in n:
        base = "sram"
    elif s in ("cells", "rtl cells"):
        base = "logic"
    else:
        base = "datapath"
    return {("registers", "power"): "registers and clock", ("sram", "power"): "SRAM",
            ("logic", "power"): "logic switching", ("datapath", "power"): "per-op datapath",
            ("registers", "area"): "register area", ("sram", "area"): "SRAM area", ("logic", "area"): "logic area",
            ("datapath", "area"): "datapath area"}[(base, quantity)]


def _parts(df: pd.DataFrame) -> pd.DataFrame:
    """Breakdown rows as (block, name, source, power, area) whichever estimate made them."""
    name = df["part"] if "part" in df else df["component"]
    source = df["source"] if "source" in df else pd.Series("component", index=df.index)
    return pd.DataFrame(dict(block=df.block, name=name, source=source, power=df.power_mW, area=df.area_mm2))


def _target(r: report.Row) -> float:
    t = r.tolerance
    if t.kind == "log":
        return r.paper * 10 ** (-t.value if r.reproduced < r.paper else t.value)
    band = t.value * abs(r.paper) if t.kind == "rel" else t.value
    return r.paper - band if r.reproduced < r.paper else r.paper + band


def _needs(kind: str, r: report.Row, value: float, part: float, total: float) -> float:
    """The part's value that moves the row to its target: absolute rows add the difference; shares solve
    (B - T + T') / (core - T + T') = target."""
    tgt = _target(r)
    if kind == "abs":
        return part + tgt - r.reproduced
    s = tgt / 100.0
    new_block = s * (total - value) / (1.0 - s)
    return part + new_block - value


def _entry(r: report.Row, name: str, kind: str, part: float, share: float, needs: float, unit: str) -> dict:
    factor = needs / part if part else float("inf")
    lo, hi, _ = paper.PLAUSIBLE_TERM
    why = PLAUSIBLE[kind]
    ok = needs > 0 and lo <= factor <= hi
    return dict(claim=r.claim, term=name, kind=kind, share=share, value=part, needs=needs, factor=factor, unit=unit,
                target=_target(r), plausible=bool(ok),
                why=(f"x{factor:.2f} is within" if ok else (f"x{factor:.2f} is outside" if needs > 0 else
                     "a negative value is impossible; outside")) + f" x{lo:g}-x{hi:g}: {why}")


def _largest(p: pd.DataFrame, col: str) -> pd.Series:
    """The largest group of same-kind parts of ``p`` (by ``col``): its blocks, kind, members and total."""
    kinds = [part_kind(n, s, col) for n, s in zip(p["name"], p["source"])]
    g = p.assign(kind=kinds).groupby("kind", sort=False)
    tot = g[col].sum()
    k = tot.idxmax()
    members = p[[x == k for x in kinds]].sort_values(col, ascending=False)
    blocks = "/".join(dict.fromkeys(members.block))
    names = ", ".join(members["name"].head(3)) + (f" and {len(members) - 3} more" if len(members) > 3 else "")
    return pd.Series({"block": blocks, "name": names, "kind": k, col: float(tot[k])})


def fail_terms(df: pd.DataFrame, rows: Iterable[report.Row], keys: dict[str, str]) -> dict[str, dict]:
    """claim -> the responsible term of every FAIL row (module docstring). ``keys``: Table III block -> key
    (``claims.table3.KEY``)."""
    p = _parts(df)
    block_of = {v: k for k, v in keys.items()}
    out = {}
    for r in rows:
        if r.verdict() != report.FAIL:
            continue
        head, *rest = r.claim.split(".")
        if head == "table3" and len(rest) == 2:
            q, key = rest
            col, unit = ("power", "mW") if q.startswith("power") else ("area", "mm2")
            sel = p if key == "total" else p[p.block == block_of.get(key, "")]
            if sel.empty:
                continue
            t = _largest(sel, col)
            value, total = float(sel[col].sum()), float(p[col].sum())
            needs = _needs("share" if q.endswith("pct") else "abs", r, value, float(t[col]), total)
            out[r.claim] = _entry(r, f"{t.block} {t.kind} ({t['name']})", t.kind, float(t[col]),
                                  float(t[col]) / value if value else 0.0, needs, unit)
        elif head == "dre" and r.claim in ("dre.area_share_pct", "dre.power_share_pct"):
            col, unit = ("area", "mm2") if "area" in r.claim else ("power", "mW")
            dre = p[p.block.isin(("HCU", "WTU", "KVMU"))]
            rest_ = p[~p.block.isin(("HCU", "WTU", "KVMU"))]
            total, dsum = float(p[col].sum()), float(dre[col].sum())
            cands = []
            for sel, value in ((dre, dsum), (rest_, total - dsum)):
                t = _largest(sel, col)
                # the denominator's part moves the share through the core total only
                needs = (_needs("share", r, dsum, float(t[col]), total) if sel is dre else
                         float(t[col]) + dsum / (_target(r) / 100.0) - total)
                cands.append(_entry(r, f"{t.block} {t.kind} ({t['name']})", t.kind, float(t[col]),
                                    float(t[col]) / value if value else 0.0, needs, unit))
            out[r.claim] = min(cands, key=lambda e: abs(e["factor"] - 1) if e["needs"] > 0 else float("inf"))
    return out


def describe(e: dict) -> str:
    """One sentence for a row's cause_detail."""
    return (f"responsible term {e['term']} ({100 * e['share']:.0f} % of the result, {e['value']:.4g} {e['unit']}); "
            f"a PASS needs it at {e['needs']:.4g} {e['unit']}: {'plausible' if e['plausible'] else 'implausible'}, "
            f"{e['why']}")


def annotate(rows: list[report.Row], terms: dict[str, dict]) -> list[report.Row]:
    """``rows`` with each FAIL row's cause_detail extended by :func:`describe` of its term."""
    for r in rows:
        if r.claim in terms:
            e = terms[r.claim]
            r.cause_detail = f"{r.cause_detail}; {describe(e)}" if r.cause_detail else describe(e)
            r.term = report.model_term(e["term"], e["share"], f"{e['needs']:.4g} {e['unit']} (now {e['value']:.4g})",
                                       f"{'plausible' if e['plausible'] else 'implausible'}: {e['why']}")
    return rows
