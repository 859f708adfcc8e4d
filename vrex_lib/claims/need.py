"""What a FAIL row would need: the edge of the tolerance band a PASS needs, and a term's needed value with the factor
that takes and whether one plausibility rule (:data:`vrex_lib.paper.PLAUSIBLE_TERM`) allows it (docs/DECISIONS.md
D224, D403). Pure arithmetic on printed values, so a claim module can name its term without importing the simulator.
"""
from __future__ import annotations

from .. import paper, report

PLAUSIBLE_TERM = paper.PLAUSIBLE_TERM


def target(printed: float, ours: float, tol: paper.Tolerance) -> float:
    """The nearest edge of the tolerance band around ``printed``, on ours' side: what a PASS needs."""
    if tol.kind == "log":
        return printed * 10 ** (-tol.value if ours < printed else tol.value)
    band = tol.value * abs(printed) if tol.kind == "rel" else tol.value
    return printed - band if ours < printed else printed + band


def part_term(name: str, part: float, whole: float, needs: float, unit: str = "ms") -> dict:
    """The term ``part`` of ``whole`` that would have to be ``needs`` (same unit) for a PASS, with the factor that
    takes and whether it is plausible (:data:`PLAUSIBLE_TERM`)."""
    lo, hi, why = PLAUSIBLE_TERM
    factor = needs / part if part else float("inf")
    ok = needs > 0 and lo <= factor <= hi
    note = ((f"x{factor:.2f} is within" if ok else f"x{factor:.2f} is outside") + f" x{lo:g}-x{hi:g}: {why}"
            if needs > 0 else "implausible: it would need a negative value")
    return dict(report.model_term(name, part / whole if whole else 0.0,
                                  f"{needs:.4g} {unit} (now {part:.4g} {unit})", note),
                factor=factor if needs > 0 else float("inf"))


def whole_term(name: str, ours: float, printed: float, tol: paper.Tolerance, unit: str) -> dict:
    """A claim with no recorded breakdown: the simulated quantity as a whole and the value it would need."""
    return part_term(name, ours, ours, target(printed, ours, tol), unit)
