"""Paper-vs-reproduced comparison tables, figures, ``results/REPORT.md`` and ``results/report.html``.

Every notebook ends its figures/tables here:

    rows = [report.row("table3.area_mm2.dpe", ours_mm2), ...]          # paper value + tolerance looked up
    report.write_table("table3", rows, profile=PROFILE, title="Table III ...")
    report.write_figure("table3", fig)

A table lands in ``results/tables/<id>.csv`` (columns: claim, quantity, unit, paper, reproduced,
rel_error, tolerance, verdict, cause, cause_detail, where, profile, note), a figure in ``results/figures/<id>.png``;
both are written atomically (temp file + rename) so a half-finished run never leaves a torn file, and recorded in
the running notebook's manifest (:mod:`.manifest`). :func:`build_report` collects them into REPORT.md and
report.html in the paper's order (:mod:`.layout`), headline claims first, every FAIL with its cause.

Modules: :mod:`.rows` (Row, verdicts, causes), :mod:`.tables` (files under results/), :mod:`.manifest` (what
each notebook wrote), :mod:`.layout` (sections, headline claims), :mod:`.content` (what the report shows),
:mod:`.render` (templates, REPORT.md / report.html / summary.csv), :mod:`.stale` (notebooks whose results are older
than their inputs), :mod:`.cli` (``python -m vrex_lib.report``).
"""
from __future__ import annotations

from .cli import main
from .content import headline, incomplete, summary_frame, unexplained, without_term
from .layout import HEADLINE, PAPER_SECTIONS, Section, paper_refs, place
from .manifest import (MANIFEST_ENV, expected_outputs, expected_tables, missing_figures, missing_tables,
                       start as start_manifest)
from .render import REPORT_HTML, REPORT_MD, STALE_MARK, build_report, mark_stale, markdown_section, render_html
from .stale import stale_notebooks
from .rows import (CAUSES, COLUMNS, CONSISTENT, DEPENDS, FAIL, INFO_V, MISSING, NEEDS_CAUSE, NO_TERM, PASS,
                   UNEXPLAINED, VERDICTS, Row, cause_of, info_row, model_term, row, to_frame)
from .tables import (SUMMARY_ID, collect_tables, damaged_tables, figure_path, is_comparison, mixed_profiles,
                     read_table, write_figure, write_frame, write_table, write_wide_table)

__all__ = [
    "CAUSES", "COLUMNS", "CONSISTENT", "DEPENDS", "FAIL", "NO_TERM", "model_term", "HEADLINE", "INFO_V", "MANIFEST_ENV", "MISSING", "NEEDS_CAUSE", "PAPER_SECTIONS",
    "PASS", "REPORT_HTML", "REPORT_MD", "Row", "STALE_MARK", "SUMMARY_ID", "Section", "UNEXPLAINED", "VERDICTS",
    "build_report", "cause_of", "figure_path", "collect_tables", "damaged_tables", "expected_outputs", "expected_tables",
    "headline", "incomplete", "info_row", "is_comparison", "main", "mark_stale", "markdown_section",
    "missing_figures", "missing_tables", "mixed_profiles", "paper_refs", "place", "read_table", "render_html", "row",
    "stale_notebooks", "start_manifest", "summary_frame", "to_frame", "unexplained", "without_term", "write_figure", "write_frame",
    "write_table", "write_wide_table",
]
