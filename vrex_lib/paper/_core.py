"""The registry behind :mod:`vrex_lib.paper`: one :class:`PaperValue` per printed number.

Paper numbers are only ever *compared against*. Nothing in vrex_lib may use a ``PaperValue`` to
produce a reproduced number; hardware *inputs* the paper specifies (Table I bandwidths, the core
configuration) are the one exception and are marked ``kind="input"``.
"""
from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Literal

Kind = Literal["result", "input", "derived"]
TolKind = Literal["rel", "abs", "log", "none"]


@dataclass(frozen=True)
class Tolerance:
    """How far a reproduced number may be from the paper's and still PASS.

    kind='rel': |ours - paper| <= value * |paper|; kind='abs': |ours - paper| <= value (same unit);
    kind='log': |log10(ours / paper)| <= value (the same order of magnitude; ours must be positive);
    kind='none': informational, never judged.
    """

    kind: TolKind
    value: float = 0.0
    why: str = ""

    def check(self, paper: float, ours: float) -> bool | None:
        if self.kind == "none":
            return None
        if self.kind == "log":
            return ours > 0 and paper > 0 and abs(math.log10(ours / paper)) <= self.value + 1e-12
        err = abs(ours - paper)
        return err <= (self.value * abs(paper) if self.kind == "rel" else self.value) + 1e-12

    def __str__(self) -> str:
        if self.kind == "none":
            return "info"
        if self.kind == "log":
            return f"×/÷{10 ** self.value:.3g}"
        return f"±{self.value * 100:g}%" if self.kind == "rel" else f"±{self.value:g}"


INFO = Tolerance("none")

#: The one plausibility rule for a 'model' cause's responsible term: (lowest factor, highest factor, why). A term of
#: a model built from cited device numbers that would have to move further than this for a PASS needs a device
#: other than the one cited (claims.causes, claims.terms; docs/DECISIONS.md D403).
PLAUSIBLE_TERM: tuple[float, float, str] = (
    0.5, 2.0, "a simulator term is built from cited device numbers (bandwidths, efficiencies, per-op costs, "
              "docs/PERF_MODEL.md); the published spread of one such number across sources and measurements stays "
              "within x0.5-x2, so a needed change beyond it would need a device other than the one cited")

#: The one tolerance table: quantity kind -> the tolerance every claim of that kind is graded with, and why.
#: Relative where the quantity is a ratio or a small percentage (an absolute band of points around 2.5 % would
#: accept 0 %); absolute points only for shares of a whole large enough that points are the natural unit; the
#: order of magnitude for a share printed to one significant digit (D406).
QUANTITY_KINDS: dict[str, Tolerance] = {
    "latency": Tolerance("rel", 0.25, "a latency or frame rate from a first-principles simulator vs the paper's "
                                      "unreleased one, built from cited device numbers"),
    "ratio": Tolerance("rel", 0.35, "a speedup or energy-efficiency gain: the ratio of two simulated systems, each "
                                    "within the latency band, and the GPU baselines' efficiency is not published"),
    "utilisation": Tolerance("rel", 0.35, "an achieved fraction of a roof: the ratio of simulated FLOP/s to a peak"),
    "op_intensity": Tolerance("rel", 0.25, "operations per DRAM byte: FLOPs are exact, the bytes come from the "
                                           "simulator's traffic model"),
    "share": Tolerance("abs", 15.0, "a share (>= 10 %) of a whole, read off a stacked bar: points are the unit "
                                    "a reader of the bar resolves"),
    "small_share": Tolerance("rel", 0.5, "a small percentage (< 10 %) of a whole: relative, since a band of points "
                                         "would accept zero; half the value is the order-of-magnitude agreement "
                                         "a component estimate or a stand-in model can claim"),
    "block_share": Tolerance("abs", 10.0, "one block's share (>= 10 %) of Table III's core: a component-level "
                                          "estimate vs a Design Compiler run, in absolute points (relative, +-50 % of "
                                          "72.8 % would accept 36-109 %)"),
    "small_block_share": Tolerance("rel", 0.5, "one block's small share (< 10 %) of Table III's core: relative, since "
                                               "a band of points would accept zero; printed to 2-3 digits"),
    "one_digit_share": Tolerance("log", 0.5, "a share printed to one significant digit ('~1%', '0.5%', '2%'): the "
                                             "print states its order of magnitude only, so ours passes within a "
                                             "factor sqrt(10) = 3.16 either way (+-50 % would turn agreement on the "
                                             "order into a refutation)"),
    "power": Tolerance("rel", 0.30, "a total power (core or system) from our estimator vs the paper's synthesis and "
                                    "measurement"),
    "area": Tolerance("rel", 0.30, "a total area from our estimator vs the paper's synthesis"),
    "block_power": Tolerance("rel", 0.5, "one block's power: a component-level estimate vs a DC synthesis, block "
                                         "by block"),
    "block_area": Tolerance("rel", 0.5, "one block's area: a component-level estimate vs a DC synthesis"),
    "bandwidth": Tolerance("rel", 0.5, "a bandwidth spike read off a time plot"),
    "accuracy": Tolerance("abs", 1.5, "COIN Top-1 points with the real checkpoint (full profile): run-to-run and "
                                      "decoding differences of about a point are expected"),
    "accuracy_drop": Tolerance("abs", 1.0, "a drop of COIN Top-1 points between two methods on the same run"),
    "retrieval_ratio": Tolerance("rel", 0.5, "a retrieval ratio (% of the KV selected): relative, since 2.5 % +- 10 "
                                             "points would accept 0-12.5 %; half the value is the magnitude a "
                                             "different model and stream can be expected to reproduce"),
    "statistic": Tolerance("rel", 0.5, "a statistic of the data (tokens per cluster, a COIN average, the early-exit "
                                       "share) measured on another model, tokenizer or stream"),
    "correlation": Tolerance("abs", 0.15, "a correlation coefficient measured on another model's keys"),
    "arithmetic": Tolerance("rel", 0.01, "arithmetic on the paper's configuration; printed to 3-4 digits"),
    "derived_open": Tolerance("rel", 0.25, "arithmetic whose inputs the paper leaves open (which weights count)"),
    "exact": Tolerance("abs", 0.0, "a size, count or swept point set by construction: any difference is a bug"),
    "shown": Tolerance("none", 0.0, "printed, shown beside ours, never graded (the note says why)"),
    "input": Tolerance("none", 0.0, "a specification the models take as given, not a claim"),
}


@dataclass(frozen=True)
class PaperValue:
    """One number printed in the paper.

    key:   dotted identifier, e.g. ``table3.area_mm2.dpe``.
    value: the printed value, in ``unit``.
    where: where it is printed: table/figure/section, e.g. "Table III", "Fig. 13(a), text §VI.B".
    kind:  'result' (a claim to reproduce), 'input' (a specification the models take as given) or
           'derived' (arithmetic on printed numbers).
    qkind: the quantity kind (:data:`QUANTITY_KINDS`), which alone sets the tolerance (:attr:`tol`).
    note:  uncertainty or interpretation of the printed value.
    point: the exact point where the paper prints it (figure, panel, system, batch, stage, context length); a
           printed range is two claims, each at the point its end is printed.
    """

    key: str
    value: float
    unit: str
    where: str
    kind: Kind = "result"
    qkind: str = "input"
    note: str = ""
    point: str = ""

    def __post_init__(self) -> None:
        if self.qkind not in QUANTITY_KINDS:
            raise ValueError(f"paper value {self.key!r}: quantity kind {self.qkind!r} is not one of "
                             f"{', '.join(QUANTITY_KINDS)}")
        if self.kind == "result" and self.qkind == "input":
            raise ValueError(f"paper value {self.key!r}: a result needs a quantity kind other than 'input'")

    @property
    def tol(self) -> Tolerance:
        """The tolerance of this claim's quantity kind (:data:`QUANTITY_KINDS`); never set per claim."""
        return QUANTITY_KINDS[self.qkind]

    @property
    def at(self) -> str:
        """The point where it is printed (``point``, else ``where``)."""
        return self.point or self.where


REGISTRY: dict[str, PaperValue] = {}


def register(*values: PaperValue) -> None:
    for v in values:
        if v.key in REGISTRY and REGISTRY[v.key] != v:
            raise ValueError(f"paper value {v.key!r} registered twice with different contents")
        REGISTRY[v.key] = v


def pv(key: str, value: float, unit: str, where: str, kind: Kind = "result", qkind: str | None = None,
       note: str = "", point: str = "") -> PaperValue:
    """Shorthand used by the section modules: build and register one value (``qkind`` defaults to 'input' for an
    input, and must be given for a result)."""
    v = PaperValue(key, value, unit, where, kind, qkind or ("input" if kind == "input" else ""), note, point)
    register(v)
    return v
