"""One compared quantity (:class:`Row`), its verdict, and why a row FAILs or is NOT RUN (:data:`CAUSES`)."""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from .. import paper

COLUMNS = ["claim", "quantity", "unit", "paper", "reproduced", "rel_error", "tolerance", "verdict", "cause",
           "cause_detail", "where", "profile", "note"]
PASS, FAIL, INFO_V, MISSING = "PASS", "FAIL", "INFO", "NOT RUN"
VERDICTS = (PASS, FAIL, INFO_V, MISSING)
#: Why a row FAILs or is NOT RUN, set by the library function that builds the row (``cause_detail`` says more).
CAUSES: dict[str, str] = {
    "paper-inconsistent": "the printed value lies outside what the paper's own stated inputs allow; cause_detail names "
                          "the implied-by-printed row that shows it",
    "stand-in-workload": "measured on this profile's stand-in (SmolLM2-135M, the stand-in vision encoder, the fixture "
                         "or composed streams), not the paper's VideoLLM-online 8B on COIN; cause_detail says what differs",
    "model": "our reconstruction (simulator, estimator, micro-architecture) differs; cause_detail gives the reason",
    "not-run": "needs what this machine lacks; cause_detail says what would run it (e.g. the full profile on a GPU)",
}
#: What the report counts a FAIL or NOT RUN row without a cause as (never a key of :data:`CAUSES`).
UNEXPLAINED = "unexplained"
#: The verdicts that must carry a cause.
NEEDS_CAUSE = (FAIL, MISSING)


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

    def __post_init__(self) -> None:
        if self.cause and self.cause not in CAUSES:
            raise ValueError(f"row {self.claim}: cause {self.cause!r} is not one of {', '.join(CAUSES)}")

    def verdict(self) -> str:
        if self.reproduced is None or (isinstance(self.reproduced, float) and math.isnan(self.reproduced)):
            return MISSING
        if self.paper is None:
            return INFO_V
        ok = self.tolerance.check(self.paper, self.reproduced)
        return INFO_V if ok is None else (PASS if ok else FAIL)

    def rel_error(self) -> float | None:
        if self.paper is None or self.reproduced is None or self.paper == 0:
            return None
        return (self.reproduced - self.paper) / abs(self.paper)


def row(key: str, reproduced: float | None, *, quantity: str | None = None, tol: paper.Tolerance | None = None,
        note: str = "", cause: str = "", cause_detail: str = "") -> Row:
    """A row comparing ``reproduced`` with the registered paper value ``key`` (its unit, where, tolerance).

    ``cause``/``cause_detail`` (:data:`CAUSES`): why the row FAILs or is NOT RUN, when it does; the report shows
    them only for those verdicts, so a builder may set them before knowing the verdict."""
    pvv = paper.get(key)
    return Row(key, quantity or key, pvv.unit, pvv.value, None if reproduced is None else float(reproduced),
               tol or pvv.tol, pvv.where, note or pvv.note, cause, cause_detail)


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
        recs.append(dict(claim=r.claim, quantity=r.quantity, unit=r.unit, paper=r.paper, reproduced=r.reproduced,
                         rel_error=r.rel_error(), tolerance=str(r.tolerance), verdict=v,
                         cause=r.cause if explained else "", cause_detail=r.cause_detail if explained else "",
                         where=r.where, profile=profile, note=r.note))
    return pd.DataFrame.from_records(recs, columns=COLUMNS)


def cause_of(verdict: str, cause: object) -> str:
    """The cause a row is counted under: its own, :data:`UNEXPLAINED` for a FAIL / NOT RUN without one of
    :data:`CAUSES` (none, or a name that is not a cause), "" for the other verdicts."""
    if verdict not in NEEDS_CAUSE:
        return ""
    return cause.strip() if isinstance(cause, str) and cause.strip() in CAUSES else UNEXPLAINED
