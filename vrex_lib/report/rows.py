"""One compared quantity (:class:`Row`), its verdict, and why a row FAILs or is NOT RUN (:data:`CAUSES`).

Verdicts (:data:`VERDICTS`, docs/DECISIONS.md D220): PASS / FAIL (within / outside the claim's tolerance),
CONSISTENT (within it, but the value holds by construction: ``consistent`` says what the check checks, a
self-consistency, not a reproduction), DEPENDS (outside it at the artifact's defaults but inside it at some point of the
admissible product of the open choices it depends on, by our simulator: ``pass_range`` names that point and the
sub-range, :mod:`vrex_lib.claims.robustness`), INFO (nothing printed to
judge against) and NOT RUN. ``robustness`` ('robust' / 'depends on Dnn ...') says whether a PASS or FAIL holds over
every admissible value of the choices it depends on.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from .. import paper

COLUMNS = ["claim", "quantity", "unit", "paper", "reproduced", "rel_error", "tolerance", "verdict", "cause",
           "cause_detail", "where", "profile", "note", "robustness", "check", "term", "term_share", "term_needs",
           "term_plausible"]
PASS, FAIL, INFO_V, MISSING = "PASS", "FAIL", "INFO", "NOT RUN"
CONSISTENT, DEPENDS = "CONSISTENT", "DEPENDS"
VERDICTS = (PASS, CONSISTENT, DEPENDS, FAIL, INFO_V, MISSING)
#: Why a row FAILs or is NOT RUN, set by the library function that builds the row (``cause_detail`` says more).
CAUSES: dict[str, str] = {
    "paper-inconsistent": "the printed value lies outside what the paper's own stated inputs allow; cause_detail names "
                          "the implied-by-printed row that shows it",
    "stand-in-workload": "measured on this profile's stand-in (SmolLM2-135M, the stand-in vision encoder, the fixture "
                         "or composed streams), not the paper's VideoLLM-online 8B on COIN; cause_detail says what differs",
    "model": "our reconstruction (simulator, estimator, micro-architecture) differs; the row names the responsible "
             "term, its share of the result and the value it would need for a PASS, with whether that is plausible",
    "not-run": "needs what this machine lacks; cause_detail says what would run it (e.g. the full profile on a GPU)",
}
#: What the report counts a FAIL or NOT RUN row without a cause as (never a key of :data:`CAUSES`).
UNEXPLAINED = "unexplained"
#: The verdicts that must carry a cause.
NEEDS_CAUSE = (FAIL, MISSING)
#: What a 'model' FAIL without a responsible term is counted as (its builder must name the term).
NO_TERM = "model-without-term"


@dataclass
class Row:
    """One compared quantity. ``paper`` None -> informational (no printed value, e.g. held out)."""

    claim: str
    quantity: str
    unit: str
    paper: float | None
    reproduced: float | None
    tolerance: paper.Tolerance
    where: str = ""
    note: str = ""
    cause: str = ""
    cause_detail: str = ""
    #: what a value that holds by construction checks (non-empty: a passing row is CONSISTENT, not PASS).
    consistent: str = ""
    #: 'robust' / 'depends on Dnn (...)' for a row re-graded over the choices it depends on; '' when none.
    robustness: str = ""
    #: a FAIL that PASSes at a point of the choices' admissible product: 'D6=16384, D101=32 (3 of 92 points pass)'.
    pass_range: str = ""
    #: the id of the check or evidence behind the cause (an implied-by-printed row, a sweep), shown behind a link.
    check: str = ""
    #: a 'model' cause's responsible term: dict(term, share, needs, plausible) (:func:`model_term`).
    term: dict | None = None

    def __post_init__(self) -> None:
        if self.cause and self.cause not in CAUSES:
            raise ValueError(f"row {self.claim}: cause {self.cause!r} is not one of {', '.join(CAUSES)}")

    def graded(self) -> str:
        """PASS / FAIL / INFO / NOT RUN from the tolerance alone."""
        if self.reproduced is None or (isinstance(self.reproduced, float) and math.isnan(self.reproduced)):
            return MISSING
        if self.paper is None:
            return INFO_V
        ok = self.tolerance.check(self.paper, self.reproduced)
        return INFO_V if ok is None else (PASS if ok else FAIL)

    def verdict(self) -> str:
        """:meth:`graded`, with a by-construction PASS as CONSISTENT and a FAIL that PASSes for part of a choice's
        range as DEPENDS (module docstring)."""
        v = self.graded()
        if v == PASS and self.consistent:
            return CONSISTENT
        if v == FAIL and self.pass_range:
            return DEPENDS
        return v

    def rel_error(self) -> float | None:
        if self.paper is None or self.reproduced is None or self.paper == 0:
            return None
        return (self.reproduced - self.paper) / abs(self.paper)


def model_term(term: str, share: float, needs: str, plausible: str) -> dict:
    """A 'model' cause's responsible term: its name, its share of the result (0-1), the value it would need for a
    PASS ('needs DPE >= 0.55 pJ/MAC') and whether that is physically plausible and why."""
    if not term or not needs or not plausible:
        raise ValueError("a model term needs its name, the value it would need and a plausibility note")
    return dict(term=term, share=float(share), needs=needs, plausible=plausible)


def row(key: str, reproduced: float | None, *, quantity: str | None = None, judged: bool = True,
        note: str = "", cause: str = "", cause_detail: str = "", consistent: str = "") -> Row:
    """A row comparing ``reproduced`` with the registered paper value ``key`` (its unit, where it is printed, the
    tolerance of its quantity kind; ``judged`` False shows it as INFO).

    ``cause``/``cause_detail`` (:data:`CAUSES`): why the row FAILs or is NOT RUN, when it does; the report shows
    them only for those verdicts, so a builder may set them before knowing the verdict. ``consistent``: what the
    comparison checks when the value holds by construction (a passing row is then CONSISTENT)."""
    pvv = paper.get(key)
    return Row(key, quantity or key, pvv.unit, pvv.value, None if reproduced is None else float(reproduced),
               pvv.tol if judged else paper.INFO, pvv.at, note or pvv.note, cause, cause_detail, consistent)


def info_row(claim: str, quantity: str, unit: str, reproduced: float | None, note: str = "", *, cause: str = "",
             cause_detail: str = "") -> Row:
    """A measured quantity with no printed counterpart (held-out, fidelity proxy, sensitivity)."""
    return Row(claim, quantity, unit, None, None if reproduced is None else float(reproduced), paper.INFO,
               "", note, cause, cause_detail)


def to_frame(rows: Iterable[Row], profile: str) -> pd.DataFrame:
    """The rows as a table with :data:`COLUMNS`; ``cause``/``cause_detail`` kept only where a row FAILs or is
    NOT RUN."""
    recs = []
    for r in rows:
        v = r.verdict()
        explained = v in NEEDS_CAUSE
        detail = r.cause_detail if explained else ""
        if v == CONSISTENT:
            detail = r.consistent
        elif v == DEPENDS:
            detail = f"PASS at {r.pass_range}" + (f"; {r.cause_detail}" if r.cause_detail else "")
        t = r.term if (explained and r.cause == "model" and r.term) else {}
        recs.append(dict(claim=r.claim, quantity=r.quantity, unit=r.unit, paper=r.paper, reproduced=r.reproduced,
                         rel_error=r.rel_error(), tolerance=str(r.tolerance), verdict=v,
                         cause=r.cause if explained else "", cause_detail=detail,
                         where=r.where, profile=profile, note=r.note,
                         robustness=r.robustness if v in (PASS, FAIL, DEPENDS) else "",
                         check=r.check if (explained or v == DEPENDS) else "", term=t.get("term", ""),
                         term_share=t.get("share"), term_needs=t.get("needs", ""),
                         term_plausible=t.get("plausible", "")))
    return pd.DataFrame.from_records(recs, columns=COLUMNS)


def cause_of(verdict: str, cause: object, term: object = "x") -> str:
    """The cause a row is counted under: its own, :data:`UNEXPLAINED` for a FAIL / NOT RUN without one of
    :data:`CAUSES` (none, or a name that is not a cause), :data:`NO_TERM` for a 'model' FAIL whose ``term`` is
    empty, "" for the other verdicts."""
    if verdict not in NEEDS_CAUSE:
        return ""
    c = cause.strip() if isinstance(cause, str) and cause.strip() in CAUSES else UNEXPLAINED
    if c == "model" and verdict == FAIL and not (isinstance(term, str) and term.strip()):
        return NO_TERM
    return c
