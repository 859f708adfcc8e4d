"""Every performance claim re-graded over the admissible PRODUCT of the open choices it depends on
(:mod:`vrex_lib.choices`), so a verdict says whether it holds for every combination a careful reader could pick
(docs/DECISIONS.md D222, D400-D402).

    rg = regrade(Workload.paper())            # {claim key: Regrade}
    rg[key].robustness()   # 'robust over 141 points' or 'depends on D6, D101: FAIL at D6=16384, D101=32 (...)'
    rg[key].pass_range()   # a FAIL that PASSes somewhere: 'D6=16384, D101=32 (3 of 141 points pass; ...)'
    rg[key].apply(row)     # sets row.robustness and, for a FAIL that PASSes at a named point, DEPENDS

The choices are read generically: every :class:`~vrex_lib.choices.Choice` with an ``override`` the experiment run
accepts (a choice the run refuses, e.g. one read only by another experiment, is listed in
:attr:`Design.excluded`). One run per non-default value of each such choice finds the choices each claim depends on
(those that move its value); the product of those is evaluated in full when it has at most :data:`MAX_FULL` points,
else by a stated design: every corner (each choice at its first and last admissible value), every one-at-a-time
point and a seeded Latin hypercube of :data:`LHS_SIZE` points (:func:`design`). A DEPENDS row names the passing
point nearest the defaults (fewest changed choices), which a test re-simulates.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import choices, report

#: A product of at most this many points is evaluated in full (about 0.3 s a point on one core: at most 40 s of
#: notebook 06, within `make reproduce`'s budget, D368); a larger one by the stated :func:`design`.
MAX_FULL = 128
#: Latin-hypercube points added to the corners and the one-at-a-time points when the product is larger.
LHS_SIZE = 64
#: The most corners a design takes: all 2^k of them up to this, else this many drawn at random (seeded).
MAX_CORNERS = 64
#: The design's seed.
SEED = 0


def _fmt(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def point_text(pt: Mapping[str, object]) -> str:
    """'D6=16384, D101=32' (the choices in ``pt`` that differ from their defaults; 'the defaults' when none)."""
    items = [f"{cid}={_fmt(v)}" for cid, v in pt.items() if v != choices.get(cid).default]
    return ", ".join(items) or "the defaults"


def parse_point(text: str) -> dict[str, object]:
    """The inverse of :func:`point_text` (the admissible value whose text matches): {choice id: value}; a choice or
    value that is not admissible is an error naming it."""
    out: dict[str, object] = {}
    if text.strip() == "the defaults":
        return out
    for part in text.split(","):
        cid, _, val = part.strip().partition("=")
        ch = choices.get(cid.strip())
        hit = [v for v in ch.admissible if _fmt(v) == val.strip()]
        if not hit:
            raise ValueError(f"{val!r} is not an admissible value of {ch.id} ({', '.join(map(_fmt, ch.admissible))})")
        out[ch.id] = hit[0]
    return out


def overrides(pt: Mapping[str, object]) -> dict:
    """The run keywords of a point (each choice's ``override``)."""
    return {choices.get(cid).override: v for cid, v in pt.items()}


def _span(ch: choices.Choice, values: list) -> str:
    """'16384-32768 tokens' for consecutive admissible numbers, else the values listed."""
    idx = sorted(ch.admissible.index(v) for v in set(values))
    vals = [ch.admissible[i] for i in idx]
    unit = f" {ch.unit}" if ch.unit else ""
    if len(vals) > 1 and idx == list(range(idx[0], idx[0] + len(idx))) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return f"{_fmt(vals[0])}-{_fmt(vals[-1])}{unit}"
    return ", ".join(_fmt(v) for v in vals) + unit


@dataclass(frozen=True)
class Design:
    """The points a regrade evaluates: ``ids`` the choices varied, ``points`` ({choice id: value} over ``ids``, the
    defaults first), ``full`` the product's size, ``kind`` 'full product' or the stated design, ``excluded``
    {choice id: why it is not varied}."""

    ids: tuple[str, ...]
    points: tuple[dict, ...]
    full: int
    kind: str
    excluded: dict = field(default_factory=dict)

    def describe(self) -> str:
        """'the full product of D6 x D101 (15 points)' or the design with its size and seed."""
        prod = " x ".join(self.ids) or "no choice"
        if self.kind == "full product":
            return f"the full product of {prod} ({len(self.points)} points)"
        return f"{self.kind} over {prod}: {len(self.points)} of the product's {self.full} points"


def _defaults(ids) -> dict:
    return {cid: choices.get(cid).default for cid in ids}


def design(ids: tuple[str, ...], max_full: int = MAX_FULL, lhs_size: int = LHS_SIZE, seed: int = SEED) -> Design:
    """The points over the choices ``ids``: the full product when it has at most ``max_full`` points, else the
    corners (at most :data:`MAX_CORNERS`, drawn when there are more), the one-at-a-time points and a seeded Latin
    hypercube of ``lhs_size`` points (each choice's values
    spread evenly over the hypercube's strata, the strata permuted independently per choice)."""
    levels = [choices.get(cid).admissible for cid in ids]
    full = math.prod(len(x) for x in levels)
    base = _defaults(ids)
    if full <= max_full:
        pts = [dict(zip(ids, combo)) for combo in itertools.product(*levels)]
        kind = "full product"
    else:
        rng = np.random.default_rng(seed)
        ends = [(lv[0], lv[-1]) for lv in levels]
        if 2 ** len(ids) <= MAX_CORNERS:
            pts = [dict(zip(ids, combo)) for combo in itertools.product(*ends)]
            corners = f"every corner ({2 ** len(ids)})"
        else:
            bits = rng.integers(0, 2, size=(MAX_CORNERS, len(ids)))
            pts = [{cid: e[b] for cid, e, b in zip(ids, ends, row)} for row in bits]
            corners = f"{MAX_CORNERS} of the {2 ** len(ids)} corners drawn at random"
        pts += [dict(base, **{cid: v}) for cid, lv in zip(ids, levels) for v in lv]
        cols = [[lv[int(i * len(lv) / lhs_size)] for i in rng.permutation(lhs_size)] for lv in levels]
        pts += [dict(zip(ids, row)) for row in zip(*cols)]
        kind = f"{corners}, every one-at-a-time point and a {lhs_size}-point Latin hypercube (seed {seed})"
    seen, uniq = set(), [base]
    seen.add(tuple(base.values()))
    for p in pts:
        t = tuple(p.values())
        if t not in seen:
            seen.add(t)
            uniq.append(p)
    return Design(tuple(ids), tuple(uniq), full, kind)


def _changed(pt: Mapping) -> tuple[int, int]:
    """How far ``pt`` is from the defaults: (choices changed, summed steps along their admissible orders)."""
    n = steps = 0
    for cid, v in pt.items():
        ch = choices.get(cid)
        if v != ch.default:
            n += 1
            steps += abs(ch.admissible.index(v) - ch.admissible.index(ch.default))
    return n, steps


@dataclass
class Regrade:
    """One claim over the choices: ``default`` the verdict at every default, ``depends_on`` the choices that move
    its value, ``points`` [({choice id: value}, ours, verdict)] over the design, ``design`` its
    :class:`Design`; ``by_choice`` = {choice id: [(value, ours, verdict)]} one choice at a time."""

    key: str
    default: str
    depends_on: tuple[str, ...] = ()
    points: list[tuple[dict, float | None, str]] = field(default_factory=list)
    design: Design | None = None
    by_choice: dict[str, list[tuple]] = field(default_factory=dict)

    def _size(self) -> str:
        return f"{len(self.points)} points" if self.points else "the defaults only"

    def flips(self) -> list[dict]:
        """The points where the verdict differs from the default's, nearest the defaults first."""
        return sorted((pt for pt, _, verd in self.points if verd != self.default), key=_changed)

    def pass_points(self) -> list[dict]:
        """For a FAIL at the defaults: the points where the claim PASSes, nearest the defaults first."""
        if self.default != report.FAIL:
            return []
        return sorted((pt for pt, _, verd in self.points if verd == report.PASS), key=_changed)

    def robustness(self) -> str:
        """'robust over N points' when no point flips the verdict (a FAIL adds the value nearest the printed one
        and its point); else 'depends on D6, D101: FAIL at D6=16384,
        D101=32 (k of N points flip)'."""
        if self.default not in (report.PASS, report.FAIL):
            return ""
        fl = self.flips()
        if not fl:
            if self.default == report.FAIL:
                pt, o = self.best()
                if o is not None:
                    return (f"robust over {self._size()}: none within the swept ranges passes (nearest: {o:.4g} at "
                            f"{point_text(pt)})")
            return f"robust over {self._size()}"
        ids = list(dict.fromkeys([*self.depends_on, *(c for c, v in fl[0].items() if v != choices.get(c).default)]))
        other = "FAIL" if self.default == report.PASS else "PASS"
        n = sum(verd != self.default for _, _, verd in self.points)
        return (f"depends on {', '.join(ids)}: {other} at {point_text(fl[0])} ({n} of {len(self.points)} "
                "points flip)")

    def pass_range(self) -> str:
        """For a FAIL that PASSes somewhere: the passing point nearest the defaults, then how many points pass
        and, per choice whose passing values are not its whole range, the values at which a point passes
        ('D6=16384 (3 of 141 points pass; D6 at 16384-32768 tokens)'); '' when it PASSes nowhere."""
        pp = self.pass_points()
        if not pp:
            return ""
        n = sum(verd == report.PASS for _, _, verd in self.points)
        sub = []
        for cid in self.depends_on:
            vals = [pt[cid] for pt, _, verd in self.points if verd == report.PASS and cid in pt]
            if vals and len(set(map(str, vals))) < len(choices.get(cid).admissible):
                sub.append(f"{cid} at {_span(choices.get(cid), vals)}")
        return f"{point_text(pp[0])} ({n} of {len(self.points)} points pass" + (
            f"; {', '.join(sub)})" if sub else ")")

    def best(self) -> tuple[dict, float | None]:
        """The point whose value is nearest the printed one (log distance), with that value: the most any
        admissible combination gives."""
        pv = report.row(self.key, None).paper
        cands = [(pt, o) for pt, o, _ in self.points if o is not None and o == o]
        if not cands or not pv:
            return {}, None
        # nearest the printed value; among points within 0.1 % of each other, the one nearest the defaults
        return min(cands, key=lambda x: (round(abs(math.log(max(abs(x[1]), 1e-300) / abs(pv))), 3), _changed(x[0])))

    def apply(self, r: report.Row) -> report.Row:
        """Set ``r``'s robustness column and, when it FAILs at the defaults but PASSes at a point of the product,
        its pass range (the row becomes DEPENDS, naming the point)."""
        r.robustness = self.robustness()
        if r.graded() == report.FAIL:
            r.pass_range = self.pass_range()
        return r


def grade(key: str, ours: float | None) -> str:
    """The PASS / FAIL / NOT RUN verdict of ``ours`` against the registered claim ``key``."""
    return report.row(key, ours).graded()


def _moves(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    if a != a or b != b:
        return (a != a) != (b != b)
    return abs(a - b) > 1e-9 * max(1.0, abs(a))


def default_run(workload, kv_sizes=None) -> Callable[..., Mapping]:
    """``run(**override)`` -> {claim key: (value, note)}: every performance experiment under ``workload``."""
    from ..perf import experiments as E
    from . import performance as CMP

    kv = kv_sizes or E.KV_SIZES
    return lambda **ov: CMP.claim_values(CMP.run_experiments(workload, kv, **ov))


def swept_choices(run: Callable[..., Mapping], ids: tuple[str, ...] | None = None) -> tuple[list[str], dict]:
    """([choice id], {choice id: why not swept}): every choice of :mod:`vrex_lib.choices` (or ``ids``) with an
    ``override`` that ``run`` accepts."""
    ok, excluded = [], {}
    for ch in choices.CHOICES.values():
        if ids is not None and ch.id not in ids:
            continue
        if ch.override is None:
            excluded[ch.id] = "no simulator keyword (read by the implied-by-printed checks only)"
            continue
        try:
            run(**{ch.override: ch.default})
        except TypeError as e:
            excluded[ch.id] = f"the performance experiments do not take {ch.override} ({e})"
            continue
        ok.append(ch.id)
    return ok, excluded


def regrade(workload, kv_sizes=None, ids: tuple[str, ...] | None = None, run: Callable[..., Mapping] | None = None,
            max_full: int = MAX_FULL, lhs_size: int = LHS_SIZE, seed: int = SEED) -> dict[str, Regrade]:
    """{claim key: :class:`Regrade`} for every registered claim ``run`` answers, over the product (or the stated
    :func:`design`) of the choices that move at least one claim. ``ids`` limits the choices (default: all of
    :mod:`vrex_lib.choices`); ``run(**override)`` -> {key: (value, note)} replaces the experiment run (tests)."""
    from .. import paper

    run = run or default_run(workload, kv_sizes)
    cache: dict[tuple, Mapping] = {}

    def at(pt: Mapping) -> Mapping:
        k = tuple(sorted((c, str(v)) for c, v in pt.items() if v != choices.get(c).default))
        if k not in cache:
            cache[k] = run(**overrides({c: v for c, v in pt.items() if v != choices.get(c).default}))
        return cache[k]

    base = at({})
    keys = [k for k in base if k in paper.REGISTRY]
    out = {k: Regrade(k, grade(k, base[k][0])) for k in keys}
    ok, excluded = swept_choices(run, ids)
    deps: dict[str, set] = {k: set() for k in keys}
    for cid in ok:
        ch = choices.get(cid)
        for val in ch.admissible:
            got = at({cid: val})
            for k in keys:
                v = got.get(k, (None, ""))[0]
                out[k].by_choice.setdefault(cid, []).append((val, v, grade(k, v)))
                if _moves(v, base[k][0]):
                    deps[k].add(cid)
    active = tuple(c for c in ok if any(c in d for d in deps.values()))
    for c in ok:
        if c not in active:
            excluded[c] = "moves no performance claim at any admissible value"
    dsg = design(active, max_full, lhs_size, seed)
    dsg = Design(dsg.ids, dsg.points, dsg.full, dsg.kind, excluded)
    for pt in dsg.points:
        got = at(pt)
        for k in keys:
            v = got.get(k, (None, ""))[0]
            out[k].points.append((pt, v, grade(k, v)))
    for k in keys:
        out[k].depends_on = tuple(c for c in active if c in deps[k])
        out[k].design = dsg
    return out


def verify_depends(rows, run: Callable[..., Mapping]) -> list[str]:
    """Each DEPENDS row re-run at the point its pass range names (``run(**override)`` -> {key: (value, note)}):
    one problem per row whose point does not PASS (a point that is not admissible is an error)."""
    bad = []
    for r in rows:
        if r.verdict() != report.DEPENDS:
            continue
        pt = parse_point(r.pass_range.split(" (", 1)[0])
        v = run(**overrides(pt)).get(r.claim, (None, ""))[0]
        if grade(r.claim, v) != report.PASS:
            bad.append(f"{r.claim}: DEPENDS names {point_text(pt)}, where it gives {v} ({grade(r.claim, v)})")
    return bad


def verify_robust(rows, rg: Mapping[str, Regrade]) -> list[str]:
    """Each row called robust against its regrade: one problem per row that some point of the design flips."""
    bad = []
    for r in rows:
        g = rg.get(r.claim)
        if g is not None and r.robustness.startswith("robust") and g.flips():
            bad.append(f"{r.claim}: called robust, but {g.default} flips at {point_text(g.flips()[0])}")
    return bad


def summary(rg: Mapping[str, Regrade]) -> dict:
    """How many graded claims flip somewhere in the design, of how many, with the design in words."""
    graded = [r for r in rg.values() if r.default in (report.PASS, report.FAIL)]
    flip = [r.key for r in graded if r.flips()]
    dsg = next((r.design for r in rg.values() if r.design is not None), None)
    return dict(claims=len(graded), flip=len(flip), flipping=flip,
                robust_pass=sum(1 for r in graded if r.default == report.PASS and not r.flips()),
                robust_fail=sum(1 for r in graded if r.default == report.FAIL and not r.flips()),
                design=dsg.describe() if dsg else "", excluded=dict(dsg.excluded) if dsg else {})


def summary_line(rg: Mapping[str, Regrade]) -> str:
    """'3 of 57 graded performance claims flip somewhere in <design>.'"""
    s = summary(rg)
    return (f"{s['flip']} of {s['claims']} graded performance claims change verdict somewhere in {s['design']}; "
            f"the other {s['claims'] - s['flip']} hold at every point")


def findings_frame(rg: Mapping[str, Regrade]) -> "pandas.DataFrame":  # noqa: F821
    """The regrade as one finding of the report's opening (kind 'depends', :mod:`vrex_lib.claims.findings`): how
    many verdicts flip in the design, which, and the design."""
    import pandas as pd

    s = summary(rg)
    ex = "; ".join(f"{c}: {why}" for c, why in s["excluded"].items())
    return pd.DataFrame([dict(finding="perf.robustness", kind="depends",
                              statement=summary_line(rg) + ".",
                              evidence=f"flipping: {', '.join(s['flipping']) or 'none'}; not varied: {ex or 'none'} "
                                       "(claims.robustness, D401; every point in perf_robustness.csv)")],
                        columns=["finding", "kind", "statement", "evidence"])


def frame(rg: Mapping[str, Regrade]) -> "pandas.DataFrame":  # noqa: F821
    """One row per (claim, design point): the point (its non-default choices), ours and the verdict, beside the
    default verdict and the choices the claim depends on."""
    import pandas as pd

    return pd.DataFrame([dict(claim=k, point=point_text(pt), ours=o, verdict=verd, default_verdict=r.default,
                              depends_on=" ".join(r.depends_on))
                         for k, r in rg.items() for pt, o, verd in r.points],
                        columns=["claim", "point", "ours", "verdict", "default_verdict", "depends_on"])


__all__ = ["Design", "LHS_SIZE", "MAX_CORNERS", "MAX_FULL", "Regrade", "SEED", "default_run", "design",
           "findings_frame", "frame", "grade", "overrides", "parse_point", "point_text", "regrade", "summary",
           "summary_line", "swept_choices", "verify_depends", "verify_robust"]
