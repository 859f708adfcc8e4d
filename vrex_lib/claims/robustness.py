"""Every performance claim re-graded over the admissible range of each open choice (:mod:`vrex_lib.choices`), so a
verdict says whether it holds for every value a careful reader could pick (docs/DECISIONS.md D222).

    rg = regrade(Workload.paper())            # {claim key: Regrade}
    rg["fig13.edge.b1.frame.vrex8_ms.40k"].robustness()   # 'robust' or 'depends on D6 (PASS at 16384-32768 tokens)'
    rg[key].apply(row)                         # sets row.robustness and, for a FAIL that PASSes somewhere, DEPENDS

One experiment run (:func:`vrex_lib.claims.performance.run_experiments`, about a second) per non-default admissible
value of each choice with a simulator keyword; the others stay at their defaults.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .. import choices, paper, report

#: Choices swept by default: those with a simulator keyword that every performance experiment accepts.
SWEPT = ("D6", "D101", "D103", "D244", "D243", "D104")


def _fmt(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _span(ch: choices.Choice, values: list) -> str:
    """'16384-32768 tokens' for consecutive admissible values, else the values listed."""
    idx = [ch.admissible.index(v) for v in values]
    unit = f" {ch.unit}" if ch.unit else ""
    if len(values) > 1 and idx == list(range(idx[0], idx[0] + len(idx))) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return f"{_fmt(values[0])}-{_fmt(values[-1])}{unit}"
    return ", ".join(_fmt(v) for v in values) + unit


@dataclass
class Regrade:
    """One claim over the choices: ``by_choice`` = {choice id: [(value, ours, verdict), ...]} (the default
    included), ``default`` = the verdict at every default."""

    key: str
    default: str
    by_choice: dict[str, list[tuple]] = field(default_factory=dict)

    def flips(self) -> dict[str, list]:
        """{choice id: the admissible values at which the verdict differs from the default's}."""
        return {cid: [v for v, _, verd in pts if verd != self.default] for cid, pts in self.by_choice.items()
                if any(verd != self.default for _, _, verd in pts)}

    def pass_values(self) -> dict[str, list]:
        """{choice id: the values at which the claim PASSes} for the choices where it does."""
        return {cid: [v for v, _, verd in pts if verd == report.PASS] for cid, pts in self.by_choice.items()
                if any(verd == report.PASS for _, _, verd in pts)}

    def robustness(self) -> str:
        """'robust' when no admissible value flips the verdict; else 'depends on Dnn (PASS at ...)'."""
        if self.default not in (report.PASS, report.FAIL):
            return ""
        fl = self.flips()
        if not fl:
            return "robust"
        parts = []
        for cid, vals in fl.items():
            ch = choices.get(cid)
            parts.append(f"{cid} ({'FAIL' if self.default == report.PASS else 'PASS'} at {_span(ch, vals)})")
        return "depends on " + "; ".join(parts)

    def pass_range(self) -> str:
        """For a FAIL: 'D6 at 16384-32768 tokens' (where it PASSes); '' when it PASSes nowhere."""
        if self.default != report.FAIL:
            return ""
        return "; ".join(f"{cid} at {_span(choices.get(cid), vals)}" for cid, vals in self.pass_values().items())

    def apply(self, r: report.Row) -> report.Row:
        """Set ``r``'s robustness column and, when it FAILs at the defaults but PASSes for part of a range, its
        pass range (the row becomes DEPENDS)."""
        r.robustness = self.robustness()
        rng = self.pass_range()
        if rng and r.graded() == report.FAIL:
            r.pass_range = rng if not r.pass_range else f"{r.pass_range}; {rng}"
        return r


def grade(key: str, ours: float | None) -> str:
    """The PASS / FAIL / NOT RUN verdict of ``ours`` against the registered claim ``key``."""
    return report.row(key, ours).graded()


def regrade(workload, kv_sizes=None, ids: tuple[str, ...] = SWEPT,
            run: Callable[..., Mapping] | None = None) -> dict[str, Regrade]:
    """{claim key: :class:`Regrade`} for every claim :func:`~vrex_lib.claims.performance.claim_values` answers, over
    the admissible values of the choices ``ids``. ``run(**override)`` -> {key: (value, note)} replaces the
    experiment run (tests)."""
    if run is None:
        from . import performance as CMP
        from ..perf import experiments as E

        kv = kv_sizes or E.KV_SIZES

        def run(**ov):
            return CMP.claim_values(CMP.run_experiments(workload, kv, **ov))
    base = run()
    out = {k: Regrade(k, grade(k, v)) for k, (v, _) in base.items() if k in paper.REGISTRY}
    for cid in ids:
        ch = choices.get(cid)
        for val in ch.admissible:
            got = base if val == ch.default else run(**{ch.override: val})
            for k, rg in out.items():
                v = got.get(k, (None, ""))[0]
                rg.by_choice.setdefault(cid, []).append((val, v, grade(k, v)))
    return out


def frame(rg: Mapping[str, Regrade]) -> "pandas.DataFrame":  # noqa: F821
    """One row per (claim, choice, value): ours and the verdict, beside the default verdict."""
    import pandas as pd

    return pd.DataFrame([dict(claim=k, choice=cid, value=str(v), ours=o, verdict=verd, default_verdict=r.default)
                         for k, r in rg.items() for cid, pts in r.by_choice.items() for v, o, verd in pts])


__all__ = ["Regrade", "SWEPT", "frame", "grade", "regrade"]
