"""Where each table and figure goes in REPORT.md: the paper's order, and the headline claims opening it.

A table or figure is placed by the first rule that applies (:func:`place`):

1. listed by a :class:`Section` (its id in ``tables`` / ``figures``);
2. an exploration table (no verdict columns) -> the design-space appendix;
3. the first paper reference in the table's title (``Table II``, ``Fig. 13``, ``§VI.E``) -> the section
   holding that reference;
4. an id named after the paper (``fig15_...``, ``table2_...``) -> that figure's or table's section;
5. a figure named like a table -> that table's section;
6. the notebook that wrote it (its two-digit number, e.g. ``09``) -> that notebook's section;
7. otherwise the appendix of unmapped tables and figures. Nothing is ever dropped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    """One part of the report. ``refs``: paper references (as titles write them) placing a table here;
    ``notebooks``: numbers of the notebooks whose otherwise unplaced tables and figures land here; ``also``:
    figures shown in another section that this one links to (one figure covering several of the paper's)."""

    key: str
    heading: str
    refs: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    notebooks: tuple[str, ...] = ()
    also: tuple[str, ...] = ()


#: The sections of the body, in the paper's order (§III motivation -> §VI.F hardware overhead).
PAPER_SECTIONS: tuple[Section, ...] = (
    Section("fig4", "Fig. 4 — memory footprint and retrieval overhead (§III)", ("Fig. 4", "Fig. 5", "§II", "§III"),
            ("fig4",), ("fig4",)),
    Section("resv", "Fig. 7–9 — ReSV: hash-bit key clustering and WiCSum thresholding (§IV)",
            ("Fig. 6", "Fig. 7", "Fig. 8", "Fig. 9", "§IV", "§IV.A", "§IV.B", "§IV.C"), ("resv_algorithm",),
            ("fig7b_resv_correlation", "fig8_resv_walkthrough", "fig9_resv_wicsum_row", "resv_cluster_stats",
             "resv_encoder_comparison", "resv_sensitivity", "workload_curves"), ("02",)),
    Section("dre", "Fig. 10–11 — the DRE: HCU, WTU and KVMU (§V)",
            ("Fig. 10", "Fig. 11", "Fig. 12", "§V", "§V.A", "§V.B", "§V.C"), ("dre_hardware",),
            ("fig11_bucket_walk", "dre_early_exit"), ("04",)),
    Section("table1", "Table I and the COIN set-up (§VI.A)", ("Table I", "§VI.A"), ("table1_peak", "coin_avg_case"),
            ("table1_peak", "coin_avg_case", "coin_frames"), ("00", "01")),
    Section("fig13", "Fig. 13 — per-frame latency, TPOT and energy efficiency (§VI.B)", ("Fig. 13", "§VI.B"),
            ("fig13",), ("fig13a", "fig13b"), ("06",)),
    Section("fig14", "Fig. 14 — end-to-end latency breakdown, average COIN case (§VI.B)", ("Fig. 14",), ("fig14",),
            ("fig14",)),
    Section("fig15", "Fig. 15 — batch-16 throughput vs Oaken (§VI.B)", ("Fig. 15",), ("fig15",), ("fig15_16",)),
    Section("fig16", "Fig. 16 — ablation at 40K tokens (§VI.B)", ("Fig. 16",), ("fig16",),
            also=("fig15_16", "fig17_ssd_block")),
    Section("fig17", "Fig. 17 — V-Rex48 memory bandwidth (§VI.C)", ("Fig. 17", "§VI.C"), ("fig17",),
            ("fig17_ssd_block",)),
    Section("fig18", "Fig. 18 — roofline at 40K tokens, batch 4 (§VI.D)", ("Fig. 18", "§VI.D"), ("fig18",),
            ("fig18",)),
    Section("table2", "Table II — retrieval ratio and COIN accuracy (§VI.E)", ("Table II", "§VI.E"), ("table2",),
            ("table2_ratios",), ("03", "09")),
    Section("fig19", "Fig. 19 — ReSV ablation: clustering (§VI.E)", ("Fig. 19",), ("fig19",), ("fig19",)),
    Section("fig20", "Fig. 20 — retrieval ratio per layer and head (§VI.E)", ("Fig. 20",), ("fig20",), ("fig20",)),
    Section("table3", "Table III — area and power of one V-Rex core (§VI.F)", ("Table III", "§VI.F"),
            ("table3", "dre_logic_area_crosscheck"),
            ("table3_blocks", "estimate_by_source", "estimate_tornado", "estimate_dre_activity"), ("05",)),
)
#: The abstract's table, rendered whole at the top of the report (:data:`HEADLINE`).
HEADLINE_TABLE = "headline"
#: The verdict overview near the top (notebook 07's figure).
SUMMARY = Section("summary", "Verdicts", figures=("summary_verdicts",), notebooks=("07",))
#: Detail tables: every row informational (before/after, sweeps, what the printed numbers imply).
DETAIL = Section("detail", "Appendix A — detail tables", tables=("baselines_before_after", "resv_ratio_sweep",
                                                                   "perf_implied"), figures=("resv_ratio_sweep",))
DESIGN = Section("design", "Appendix C — beyond the paper: the design space", tables=("design_space",),
                 figures=("design_space_pareto",), notebooks=("08",))
OTHER = Section("other", "Appendix D — tables and figures not mapped to a part of the paper")
ALL_SECTIONS: tuple[Section, ...] = (*PAPER_SECTIONS, SUMMARY, DETAIL, DESIGN, OTHER)

#: (group, table, claim, label) of the report's first table, in order: the abstract's claims, then Tables I-III.
#: A claim is looked up in its table first, then in any table. The abstract's ranges are the Fig. 13 claims they
#: repeat, named by those claim ids (one claim, one verdict, counted once); its 19.7x is the server batch-8 frame
#: panel's maximum (``headline.speedup_max``). Every row of the ``headline`` table is shown; rows listed here get
#: their label, the others their quantity.
HEADLINE: tuple[tuple[str, str, str, str], ...] = (
    ("Abstract", "fig13", "fig13.edge.b1.fps_min", "V-Rex8 frame rate, low end (edge, batch 1, 40K)"),
    ("Abstract", "fig13", "fig13.edge.b1.fps_max", "V-Rex8 frame rate, high end (edge, batch 1, 1K)"),
    ("Abstract", "fig13", "fig13.edge.b1.text.speedup_min",
     "speedup over the GPU baselines, low end (edge, batch 1, TPOT, 1K)"),
    ("Abstract", "headline", "headline.speedup_max",
     "speedup over the GPU baselines, high end (server, batch 8, frame: the panel's maximum)"),
    ("Abstract", "fig13", "fig13.edge.b4.frame.energy_gain.1k",
     "energy-efficiency gain over AGX Orin, low end (edge, batch 4, frame, 1K)"),
    ("Abstract", "fig13", "fig13.edge.b1.text.energy_gain.40k",
     "energy-efficiency gain over AGX Orin, high end (edge, batch 1, TPOT, 40K)"),
    ("Abstract", "table3", "dre.power_share_pct", "DRE share of the core's power"),
    ("Abstract", "table3", "dre.area_share_pct", "DRE share of the core's area"),
    ("Table I", "table1_peak", "table1.peak_tflops.vrex8", "peak throughput, V-Rex8"),
    ("Table I", "table1_peak", "table1.peak_tflops.vrex48", "peak throughput, V-Rex48"),
    ("Table I", "headline", "table1.power_w.vrex8", "system power, V-Rex8"),
    ("Table I", "headline", "table1.power_w.vrex48", "system power, V-Rex48"),
    ("Table II", "table2", "table2.ratio.resv.frame.avg", "ReSV retrieval ratio, frame stage (mean of 5 tasks)"),
    ("Table II", "table2", "table2.ratio.resv.text.avg", "ReSV retrieval ratio, text stage (mean of 5 tasks)"),
    ("Table II", "fig19", "fig19.acc_drop.resv", "ReSV's mean COIN Top-1 drop vs VideoLLM-online"),
    ("Table III", "table3", "table3.area_mm2.total", "area of one V-Rex core"),
    ("Table III", "table3", "table3.power_mw.total", "power of one V-Rex core"),
)
#: The claim suffix of a row's twin simulated with the measured workload (claims.performance's pairing).
MEASURED_SUFFIX = ".measured_workload"

_REF = re.compile(r"Table\s+(?:III|II|I)\b|Fig\.\s*\d+|§\s*[IVX]+(?:\.[A-Z])?")
_ID_REF = re.compile(r"^(fig|table)(\d+)(?:[_.-]|$)")
_ROMAN = {1: "I", 2: "II", 3: "III"}


def paper_refs(text: str) -> list[str]:
    """The paper references in ``text``, normalised ('Fig.13' -> 'Fig. 13'), in order of appearance."""
    out = []
    for m in _REF.finditer(text or ""):
        ref = re.sub(r"\s+", " ", m.group(0))
        out.append(re.sub(r"^Fig\.\s*", "Fig. ", ref).replace("§ ", "§"))
    return out


def _id_ref(item_id: str) -> str:
    m = _ID_REF.match(item_id)
    if not m:
        return ""
    n = int(m.group(2))
    return f"Fig. {n}" if m.group(1) == "fig" else (f"Table {_ROMAN[n]}" if n in _ROMAN else "")


def _by_ref(ref: str) -> str:
    for s in PAPER_SECTIONS:
        if ref in s.refs:
            return s.key
    return ""


def place(kind: str, item_id: str, *, title: str = "", wide: bool = False, writer: str = "",
          table_places: dict[str, str] | None = None) -> str:
    """The key of the section that shows table/figure ``item_id`` (``kind`` 'table' or 'figure'); the rules are
    in the module docstring. ``writer``: the notebook that wrote it; ``table_places``: table id -> section key
    (for figures named like a table)."""
    attr = "tables" if kind == "table" else "figures"
    for s in ALL_SECTIONS:
        if item_id in getattr(s, attr):
            return s.key
    if kind == "table" and wide:
        return DESIGN.key
    for ref in paper_refs(title):
        if _by_ref(ref):
            return _by_ref(ref)
    if _by_ref(_id_ref(item_id)):
        return _by_ref(_id_ref(item_id))
    if kind == "figure" and table_places and item_id in table_places:
        return table_places[item_id]
    number = writer[:2]
    for s in ALL_SECTIONS:
        if number and number in s.notebooks:
            return s.key
    return OTHER.key
