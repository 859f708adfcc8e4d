"""The registry behind :mod:`vrex_lib.paper`: one :class:`PaperValue` per printed number.

Paper numbers are only ever *compared against*. Nothing in vrex_lib may use a ``PaperValue`` to
produce a reproduced number; hardware *inputs* the paper specifies (Table I bandwidths, the core
configuration) are the one exception and are marked ``kind="input"``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["result", "input", "derived"]
TolKind = Literal["rel", "abs", "none"]


@dataclass(frozen=True)
class Tolerance:
    """How far a reproduced number may be from the paper's and still PASS.

    kind='rel': |ours - paper| <= value * |paper|; kind='abs': |ours - paper| <= value (same unit);
    kind='none': informational, never judged.
    """

    kind: TolKind
    value: float = 0.0
    why: str = ""

    def check(self, paper: float, ours: float) -> bool | None:
        if self.kind == "none":
            return None
        err = abs(ours - paper)
        return err <= (self.value * abs(paper) if self.kind == "rel" else self.value) + 1e-12

    def __str__(self) -> str:
        if self.kind == "none":
            return "info"
        return f"±{self.value * 100:g}%" if self.kind == "rel" else f"±{self.value:g}"


INFO = Tolerance("none")


@dataclass(frozen=True)
class PaperValue:
    """One number printed in the paper.

    key:   dotted identifier, e.g. ``table3.area_mm2.dpe``.
    value: the printed value, in ``unit``.
    where: where it is printed: table/figure/section, e.g. "Table III", "Fig. 13(a), text §VI.B".
    kind:  'result' (a claim to reproduce), 'input' (a specification the models take as given) or
           'derived' (arithmetic on printed numbers).
    tol:   default tolerance for comparing a reproduction against it.
    note:  uncertainty or interpretation of the printed value.
    """

    key: str
    value: float
    unit: str
    where: str
    kind: Kind = "result"
    tol: Tolerance = INFO
    note: str = ""


REGISTRY: dict[str, PaperValue] = {}


def register(*values: PaperValue) -> None:
    for v in values:
        if v.key in REGISTRY and REGISTRY[v.key] != v:
            raise ValueError(f"paper value {v.key!r} registered twice with different contents")
        REGISTRY[v.key] = v


def pv(key: str, value: float, unit: str, where: str, kind: Kind = "result", tol: Tolerance = INFO,
       note: str = "") -> PaperValue:
    """Shorthand used by the section modules: build and register one value."""
    v = PaperValue(key, value, unit, where, kind, tol, note)
    register(v)
    return v
