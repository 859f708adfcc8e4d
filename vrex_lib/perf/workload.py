"""The workload as an explicit simulator input: :class:`Workload`.

Everything about the model and the data that the hardware model consumes, in one frozen object, each field with
its provenance:

* per (method, stage) the **selected fraction of on-device candidates** and, separately, of **offloaded
  candidates**, each a function of the context length (:class:`Curve`) with its own provenance, and the
  **cross-step reuse** of fetched KV (the KVMU's "Retrieved KV" region, Fig. 12);
* ReSV **tokens per cluster** and the **WiCSum early-exit fraction** (share of a row walked before exit);
* **tokens per frame**, the **dense layers** (the first layers attend to everything) and the scenario's
  **frames, question and answer tokens** (Fig. 4(b), Fig. 14).

Provenance kinds (:class:`FieldSource`): ``measured`` (a workload file of schema ``vrex.workload/1``: file, profile, model, the context
range actually measured), ``paper-stated`` (read from :mod:`vrex_lib.paper`, cited) or ``user`` (keywords).
Outside a measured range a named extrapolation policy applies and is reported in every result that used it:

* ``"hold"``: the value at the nearest measured length;
* ``"loglog-fit"``: least-squares line of log(value) on log(kv_len) over the measured points (≥ 2 lengths).

Inside the range values are interpolated linearly in log(kv_len). The measured fractions are dimensionless and are
applied to the simulated model's dimensions (Llama-3-8B, docs/DECISIONS.md D8) -- see docs/PERF_MODEL.md.

    w = Workload.paper()
    w = Workload.from_measurement("results/data/workload_default.json", extrapolation="loglog-fit")
    w = Workload.paper().replace(reuse={("resv", "frame"): 0.5})      # becomes provenance 'user' for that field
    w = Workload.uniform({("resv", "frame"): 0.3})                    # one user fraction for both tiers
"""
from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from .. import methods as method_table
from .. import paper
from ..config import WORKLOAD_SCHEMA as SCHEMA
from ..config import EXTRAPOLATIONS, RuntimeConfig
from .methods import METHODS

#: Simulator method -> the measured method (or variant) whose statistics it uses when the file has them:
#: ``rekv@frame`` is ReKV deciding at every step, the behaviour :mod:`vrex_lib.perf.methods` models for ReKV
#: (the paper's Table II row); plain ``rekv`` is the reference code's once-per-question retrieval.
SIM_METHOD_SOURCES: Mapping[str, str] = method_table.SIM_SOURCES
#: Runtime policy name -> simulator method, from the method table (``resv_noclust`` has no hardware mapping).
SIM_METHOD: Mapping[str, str] = method_table.SIM_METHOD
#: The methods whose selected fractions a workload carries: every simulator model's ``ratio_key`` (models without
#: selection -- flexgen, full, oaken -- need none).
SELECTING: tuple[str, ...] = tuple(dict.fromkeys(m.ratio_key for m in METHODS.values() if m.ratio_key))
TIERS = ("device", "offloaded")
#: Methods without a printed retrieval ratio and the Table II row whose ratio the paper-stated workload gives them:
#: Fig. 19's ablation selects with the same WiCSum threshold on per-token scores (an assumption, labelled).
PAPER_RATIO_OF: Mapping[str, str] = MappingProxyType({"resv_noclust": "resv"})
ProvKind = Literal["measured", "paper-stated", "user"]


@dataclass(frozen=True)
class FieldSource:
    """Where a field's value comes from: kind, the file or paper place, and detail (profile, model, kv range)."""

    kind: ProvKind
    source: str
    detail: str = ""

    def label(self) -> str:
        return f"{self.kind} ({self.source}{'; ' + self.detail if self.detail else ''})"


@dataclass(frozen=True)
class Curve:
    """A value as a function of the context length: points (kv_len, value), sorted by kv_len.

    One point = a constant (no length dependence stated), never labelled as extrapolated.
    """

    kv_len: tuple[float, ...]
    value: tuple[float, ...]
    extrapolation: str = "hold"

    def __post_init__(self) -> None:
        if len(self.kv_len) != len(self.value) or not self.value:
            raise ValueError(f"Curve needs matching, non-empty kv_len/value (got {len(self.kv_len)}, "
                             f"{len(self.value)})")
        if not all(math.isfinite(x) for x in self.kv_len + self.value):
            raise ValueError(f"Curve kv_len/value must be finite numbers (got {self.kv_len}, {self.value})")
        if list(self.kv_len) != sorted(self.kv_len):
            raise ValueError("Curve kv_len must be sorted ascending")
        if self.extrapolation not in EXTRAPOLATIONS:
            raise ValueError(f"extrapolation {self.extrapolation!r}: choose one of {EXTRAPOLATIONS}")
        if self.extrapolation == "loglog-fit" and len(set(self.kv_len)) < 2:
            raise ValueError("extrapolation 'loglog-fit' needs values at >= 2 context lengths; use 'hold'")

    @classmethod
    def constant(cls, v: float) -> "Curve":
        return cls((0.0,), (float(v),))

    @property
    def is_constant(self) -> bool:
        return len(self.value) == 1

    def at(self, kv_len: float) -> tuple[float, str | None]:
        """(value at ``kv_len``, the extrapolation policy used or None when inside the measured range)."""
        if not math.isfinite(kv_len):
            raise ValueError(f"Curve.at: kv_len must be a finite number, got {kv_len}")
        if self.is_constant:
            return self.value[0], None
        x = [math.log(max(k, 1.0)) for k in self.kv_len]
        lx = math.log(max(kv_len, 1.0))
        if x[0] <= lx <= x[-1]:
            for i in range(len(x) - 1):
                if x[i] <= lx <= x[i + 1]:
                    if x[i + 1] == x[i]:
                        return self.value[i], None
                    t = (lx - x[i]) / (x[i + 1] - x[i])
                    return self.value[i] + t * (self.value[i + 1] - self.value[i]), None
            return self.value[-1], None
        if self.extrapolation == "hold":
            return (self.value[0] if lx < x[0] else self.value[-1]), "hold"
        # loglog-fit over the points with positive values.
        pts = [(xi, math.log(v)) for xi, v in zip(x, self.value) if v > 0]
        if len({p[0] for p in pts}) < 2:
            return (self.value[0] if lx < x[0] else self.value[-1]), "hold"
        n = len(pts)
        mx = sum(p[0] for p in pts) / n
        my = sum(p[1] for p in pts) / n
        slope = sum((p[0] - mx) * (p[1] - my) for p in pts) / sum((p[0] - mx) ** 2 for p in pts)
        return math.exp(my + slope * (lx - mx)), "loglog-fit"

    @property
    def range_label(self) -> str:
        return "any length" if self.is_constant else f"kv {self.kv_len[0]:.0f}-{self.kv_len[-1]:.0f}"


def _finite(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _as_curve(v) -> Curve:
    return v if isinstance(v, Curve) else Curve.constant(float(v))


def _frozen(m: Mapping) -> MappingProxyType:
    return MappingProxyType({k: _as_curve(v) for k, v in m.items()})


_FIELDS = ("selected_frac_device", "selected_frac_offloaded", "reuse", "tokens_per_cluster", "wics_exit_frac",
           "tokens_per_frame", "dense_layers", "frames", "question_tokens", "answer_tokens", "fetch_blocks")


@dataclass(frozen=True)
class Workload:
    """What the hardware model consumes about the model and the data (see the module docstring).

    selected_frac_device:    {(method, stage): Curve} selected share of the on-device (KVMU-resident) candidates.
    selected_frac_offloaded: {(method, stage): Curve} selected share of the offloaded candidates. The two are kept
                             apart: a measurement that has only one of them says so, and the simulator never
                             substitutes one for the other (:meth:`selected` raises naming the missing tier).
    reuse:         {(method, stage): Curve} share of a step's selected offloaded KV already in device DRAM from the
                   previous step of the same stage (missing = 0).
    tokens_per_cluster, wics_exit_frac: ReSV statistics (Curves over kv_len, or constants).
    tokens_per_frame: LLM tokens appended per frame; dense_layers: the first layers attend to (and fetch) every
    token; frames / question_tokens / answer_tokens: the E2E scenario.
    fetch_blocks: {(method, layout, tokens per block): Curve} offload-tier blocks touched per selected offloaded
                   token of one (layer, KV head), K or V, in the method's layout ('token': arrival order; 'cluster':
                   the KVMU's cluster extents), as measured (missing: the simulator's granule rule applies, D244).
    provenance: {field name: FieldSource}; ``name``: short label of the whole workload.
    """

    selected_frac_device: Mapping[tuple[str, str], Curve]
    selected_frac_offloaded: Mapping[tuple[str, str], Curve]
    reuse: Mapping[tuple[str, str], Curve] = field(default_factory=dict)
    tokens_per_cluster: Curve = Curve.constant(32.0)
    wics_exit_frac: Curve = Curve.constant(0.16)
    tokens_per_frame: int = 10
    dense_layers: int = field(default_factory=lambda: RuntimeConfig().dense_layers)
    frames: int = 26
    question_tokens: int = 25
    answer_tokens: int = 39
    provenance: Mapping[str, FieldSource] = field(default_factory=dict)
    name: str = "user"
    fetch_blocks: Mapping[tuple[str, str, int], Curve] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Read-only mappings: a Workload cannot change after construction (use .replace()).
        for fld in ("selected_frac_device", "selected_frac_offloaded", "reuse"):
            object.__setattr__(self, fld, _frozen(getattr(self, fld)))
            for k, c in getattr(self, fld).items():
                if not (isinstance(k, tuple) and len(k) == 2 and k[1] in ("frame", "text")):
                    raise ValueError(f"Workload.{fld} key {k!r}: must be (method, 'frame'|'text')")
                if any(not 0.0 <= v <= 1.0 for v in c.value):
                    raise ValueError(f"Workload.{fld}[{k}] values {c.value} must be in [0, 1]")
        object.__setattr__(self, "fetch_blocks", _frozen(self.fetch_blocks))
        object.__setattr__(self, "tokens_per_cluster", _as_curve(self.tokens_per_cluster))
        object.__setattr__(self, "wics_exit_frac", _as_curve(self.wics_exit_frac))
        if any(v <= 0 for v in self.tokens_per_cluster.value):
            raise ValueError("Workload.tokens_per_cluster must be > 0")
        if any(not 0 < v <= 1 for v in self.wics_exit_frac.value):
            raise ValueError("Workload.wics_exit_frac must be in (0, 1]")
        for f in ("tokens_per_frame", "frames", "question_tokens", "answer_tokens"):
            if getattr(self, f) < 1:
                raise ValueError(f"Workload.{f} must be >= 1")
        if self.dense_layers < 0:
            raise ValueError(f"Workload.dense_layers must be >= 0, got {self.dense_layers}")
        prov = dict(self.provenance)
        for f in _FIELDS:
            prov.setdefault(f, FieldSource("user", "Workload(...) keyword"))
        prov["selected_frac"] = prov["selected_frac_device"]  # the short name's provenance (see .selected_frac)
        object.__setattr__(self, "provenance", MappingProxyType(prov))

    @property
    def selected_frac(self) -> Mapping[tuple[str, str], Curve]:
        """The on-device share per (method, stage) (:attr:`selected_frac_device`), the short name of the keys a
        workload carries a selection for."""
        return self.selected_frac_device

    # ---- constructors ------------------------------------------------------------------------------------
    @classmethod
    def uniform(cls, selected_frac: Mapping, **kw) -> "Workload":
        """A user workload with one selected fraction per (method, stage) for both tiers (provenance 'user',
        saying so)."""
        prov = dict(kw.pop("provenance", {}))
        both = FieldSource("user", "Workload.uniform", "one fraction for the on-device and the offloaded tier")
        prov.setdefault("selected_frac_device", both)
        prov.setdefault("selected_frac_offloaded", both)
        return cls(selected_frac_device=selected_frac, selected_frac_offloaded=selected_frac, provenance=prov, **kw)

    @classmethod
    def paper(cls) -> "Workload":
        """The workload the paper states: Table II's average retrieval ratios (per stage, constant in kv_len; the
        paper states one ratio per method, so both tiers get it), tokens per cluster (§VI.B), WiCSum early exit
        (§IV.C), the average COIN case (§VI.A), 10 tokens per frame (VideoLLM-online Live1+, docs/DECISIONS.md
        D8), layer 0 dense (Fig. 6; ``RuntimeConfig.dense_layers``). The paper states no cross-step reuse: none."""
        sel = {(m, st): Curve.constant(paper.value(f"table2.ratio.{PAPER_RATIO_OF.get(m, m)}.{st}.avg") / 100.0)
               for m in SELECTING for st in ("frame", "text")}
        t2 = ("Table II (average retrieval ratio per method and stage; Fig. 19's ablation states none and takes "
              "ReSV's)")
        prov = dict(
            selected_frac_device=FieldSource("paper-stated", t2, "constant in the context length; one ratio for "
                                            "both tiers (the paper states no split)"),
            selected_frac_offloaded=FieldSource("paper-stated", t2, "constant in the context length; one ratio for "
                                               "both tiers (the paper states no split)"),
            reuse=FieldSource("paper-stated", "not stated by the paper", "no reuse (0)"),
            tokens_per_cluster=FieldSource("paper-stated", "§VI.B (32 tokens per cluster)"),
            wics_exit_frac=FieldSource("paper-stated", "§IV.C (16 % of a row on average)"),
            tokens_per_frame=FieldSource("paper-stated", "VideoLLM-online Live1+ (docs/DECISIONS.md D8)"),
            dense_layers=FieldSource("paper-stated", "Fig. 6 (layer 0: full attention)",
                                    "RuntimeConfig.dense_layers"),
            frames=FieldSource("paper-stated", "§VI.A average COIN case"),
            question_tokens=FieldSource("paper-stated", "§VI.A average COIN case"),
            answer_tokens=FieldSource("paper-stated", "§VI.A average COIN case"),
            fetch_blocks=FieldSource("paper-stated", "not stated by the paper", "the granule rule applies (D244)"))
        return cls(selected_frac_device=sel, selected_frac_offloaded=sel, reuse={},
                   tokens_per_cluster=Curve.constant(paper.value("resv.tokens_per_cluster")),
                   wics_exit_frac=Curve.constant(paper.value("resv.wicsum_row_prefix_pct") / 100.0),
                   tokens_per_frame=10, dense_layers=RuntimeConfig().dense_layers,
                   frames=int(paper.value("coin.avg_case.frames")),
                   question_tokens=int(paper.value("coin.avg_case.question_tokens")),
                   answer_tokens=int(paper.value("coin.avg_case.answer_tokens")), provenance=prov, name="paper")

    @classmethod
    def from_measurement(cls, path: str | Path, extrapolation: str = "hold") -> "Workload":
        """Read a workload file of schema ``vrex.workload/1`` (docs/PERF_MODEL.md).

        Per (method, stage), as Curves over ``kv_len``: the offloaded share ``selected_frac_offloaded`` where the
        checkpoint had offloaded candidates, and the on-device share derived from the checkpoint's ``candidates``
        C, ``selected_frac`` f (share of all C), ``offloaded_candidates`` O and ``selected_frac_offloaded`` g:
        ``(f C - g O) / (C - O)`` (``f`` itself when O = 0); ``reuse_frac`` (null steps skipped); ReSV's tokens per
        cluster and early-exit fraction; ``dense_layers`` from the file header. The scenario (frames, question,
        answer) stays the paper's §VI.A case, labelled so. Raises naming the file, the field and the fix on any
        problem (missing or non-finite values, a non-object file, inconsistent fractions).
        """
        p = Path(path)
        if extrapolation not in EXTRAPOLATIONS:
            raise ValueError(f"extrapolation {extrapolation!r}: choose one of {EXTRAPOLATIONS}")
        d = _read_measurement(p)
        pts, notes = _checkpoint_points(p, d["checkpoints"])
        curves = {k: _curve(v, extrapolation) for k, v in pts.items()}
        by = {tag: {k[1:]: c for k, c in curves.items() if k[0] == tag} for tag in ("dev", "off", "reuse")}
        substituted = _use_variants(by)
        if not by["dev"] and not by["off"]:
            raise ValueError(f"{p}: no checkpoint carries a selected fraction; regenerate it with `python -m "
                             f"vrex_lib.workload measure`")
        kvs = sorted({float(c["kv_len"]) for c in d["checkpoints"]})
        where = f"{p.name}, profile {d['profile']}, model {(d.get('model_identity') or {}).get('summary', d['model'])}"
        rng = f"measured kv {kvs[0]:.0f}-{kvs[-1]:.0f}; outside: {extrapolation}"
        rng += "".join(f"; {s}" for s in substituted + notes)
        prov, kw = _measured_provenance(p, where, rng, by, curves)
        blocks = {(k[1], k[2].split("@")[0], int(k[2].split("@")[1])): c for k, c in curves.items() if k[0] == "blocks"}
        for sim_m, src in SIM_METHOD_SOURCES.items():  # rekv's frame mode supplies ReKV's layout, as its fractions
            blocks.update({(sim_m,) + k[1:]: c for k, c in list(blocks.items()) if k[0] == src})
        prov["fetch_blocks"] = (FieldSource("measured", where, rng) if blocks else
                                FieldSource("measured", where, "no fetch-block measurement: the granule rule applies"))
        return cls(selected_frac_device=by["dev"], selected_frac_offloaded=by["off"], reuse=by["reuse"],
                   tokens_per_frame=int(d["tokens_per_frame"]), dense_layers=int(d["dense_layers"]),
                   provenance=prov, name=f"measured:{p.name}", fetch_blocks=blocks, **kw)

    @classmethod
    def from_stats(cls, method: str, *, selected_frac: float | None, selected_frac_offloaded: float | None = None,
                   tokens_per_cluster: float | None = None, wics_exit_frac: float | None = None,
                   reuse: float | None = None, source: str = "measured") -> "Workload":
        """The paper's workload with one step's measured statistics of ``method`` (a runtime policy name or a
        simulator method) in place of the paper's statement, for both stages and constant in kv_len; the explorers
        (``python -m vrex_lib.live``, notebook 08) use it (docs/DECISIONS.md D90). ``selected_frac`` is the step's
        share of all candidates and sets the on-device tier; the offloaded tier takes ``selected_frac_offloaded``
        when given, else the same share, and the name says so. None/NaN keeps the paper-stated value, and the name
        says which fields did."""
        sim_method = SIM_METHOD.get(method, method)
        if sim_method not in METHODS:
            raise ValueError(f"method {method!r} has no simulator model; choose one of {', '.join(SIM_METHOD)}")
        key = METHODS[sim_method].ratio_key
        base = cls.paper()
        ch: dict = {}
        if key is not None and _finite(selected_frac):
            f = min(1.0, max(0.0, float(selected_frac)))
            g = f if not _finite(selected_frac_offloaded) else min(1.0, max(0.0, float(selected_frac_offloaded)))
            ch["selected_frac_device"] = {**base.selected_frac_device, (key, "frame"): f, (key, "text"): f}
            ch["selected_frac_offloaded"] = {**base.selected_frac_offloaded, (key, "frame"): g, (key, "text"): g}
        if key is not None and _finite(reuse):
            r = min(1.0, max(0.0, float(reuse)))
            ch["reuse"] = {**base.reuse, (key, "frame"): r, (key, "text"): r}
        if sim_method == "resv" and _finite(tokens_per_cluster):
            ch["tokens_per_cluster"] = max(1.0, float(tokens_per_cluster))
        if sim_method == "resv" and _finite(wics_exit_frac) and float(wics_exit_frac) > 0:
            ch["wics_exit_frac"] = min(1.0, float(wics_exit_frac))
        kept = sorted({"selected_frac", "reuse", "tokens_per_cluster", "wics_exit_frac"}
                      - {k.replace("_device", "") for k in ch} - {"selected_frac_offloaded"})
        name = f"{source}" + (f"; paper-stated: {', '.join(kept)}" if kept and ch else "")
        if "selected_frac_device" in ch and not _finite(selected_frac_offloaded):
            name += "; offloaded share = the step's share of all candidates"
        return base.replace(name=name, **ch) if ch else base

    @classmethod
    def resolve(cls, workload: "Workload | str | Path") -> "Workload":
        """A Workload from what :func:`vrex_lib.perf.simulate` accepts: a Workload, ``"paper"`` or a file path."""
        if isinstance(workload, Workload):
            return workload
        if isinstance(workload, str) and workload == "paper":
            return cls.paper()
        if isinstance(workload, (str, Path)):
            return cls.from_measurement(workload)
        raise TypeError(f"workload must be a Workload, 'paper' or a path to a {SCHEMA} file, got "
                        f"{type(workload).__name__}")

    def replace(self, **changes) -> "Workload":
        """A copy with ``changes``; every changed field becomes provenance 'user'."""
        prov = dict(self.provenance)
        for k in changes:
            if k not in ("provenance", "name"):
                was = self.provenance.get(k)
                prov[k] = FieldSource("user", "Workload.replace", f"was {was.label() if was else '?'}")
        return dataclasses.replace(self, provenance=prov, **changes)

    # ---- lookups -----------------------------------------------------------------------------------------
    def selected(self, method: str, stage: str, kv_len: float, tier: str = "offloaded") -> tuple[float, str | None]:
        """(selected share of ``tier``'s candidates -- 'device' or 'offloaded' --, extrapolation used or None)."""
        if tier not in TIERS:
            raise ValueError(f"tier {tier!r}: choose one of {', '.join(TIERS)}")
        curves = self.selected_frac_device if tier == "device" else self.selected_frac_offloaded
        key = (method, stage)
        if key not in curves:
            have = ", ".join(f"{m}/{s}" for m, s in sorted(curves)) or "none"
            other = self.selected_frac_offloaded if tier == "device" else self.selected_frac_device
            hint = (f"; it has the {'offloaded' if tier == 'device' else 'on-device'} share, which is not "
                    f"substituted" if key in other else "; measure that method")
            raise KeyError(f"workload {self.name!r} has no {tier}-tier selected fraction for {method}/{stage} "
                           f"(has: {have}){hint}, measure contexts beyond the KVMU capacity for the offloaded tier, "
                           f"or pass Workload.uniform({{('{method}', '{stage}'): f}})")
        v, pol = curves[key].at(kv_len)
        return min(1.0, max(0.0, v)), pol

    def fetch_blocks_at(self, method: str, layout: str, tokens_per_block: float, kv_len: float) -> float | None:
        """Measured blocks touched per selected offloaded token for (method, layout) at ``tokens_per_block``, or None
        where the workload has no such measurement (then the granule rule applies)."""
        c = self.fetch_blocks.get((method, layout, int(round(tokens_per_block))))
        return None if c is None else max(0.0, c.at(kv_len)[0])

    def reuse_at(self, method: str, stage: str, kv_len: float) -> tuple[float, str | None]:
        c = self.reuse.get((method, stage))
        if c is None:
            return 0.0, None
        v, pol = c.at(kv_len)
        return min(1.0, max(0.0, v)), pol

    def source(self, used: Mapping[str, str] | None = None) -> str:
        """The label results carry: the workload's name, the selected-fraction provenance (both tiers) and every
        extrapolation that was used (``used``: {field: policy})."""
        dev, off = self.provenance["selected_frac_device"], self.provenance["selected_frac_offloaded"]
        s = f"{self.name}: {dev.label()}" + ("" if off == dev else f"; offloaded tier: {off.label()}")
        user = sorted(k for k, v in self.provenance.items() if v.kind == "user" and not k.startswith("selected"))
        if user and self.name != "user":
            s += "; user-set " + ", ".join(user)
        if used:
            s += "; extrapolated " + ", ".join(f"{k} '{v}'" for k, v in sorted(used.items()))
        return s

    def table(self) -> list[dict]:
        """One row per field: value summary and provenance (for notebooks and reports)."""
        rows = []
        for fld, tag in (("selected_frac_device", "selected_frac_device"),
                         ("selected_frac_offloaded", "selected_frac_offloaded"), ("reuse", "reuse")):
            for k, c in sorted(getattr(self, fld).items()):
                rows.append(_curve_row(f"{tag} {k[0]}/{k[1]}", c, self.provenance[fld]))
        for f in ("tokens_per_cluster", "wics_exit_frac"):
            rows.append(_curve_row(f, getattr(self, f), self.provenance[f]))
        for f in ("tokens_per_frame", "dense_layers", "frames", "question_tokens", "answer_tokens"):
            rows.append(dict(field=f, value=str(getattr(self, f)), range="", extrapolation=None,
                             provenance=self.provenance[f].label()))
        return rows


def _curve_row(name: str, c: Curve, prov: FieldSource) -> dict:
    return dict(field=name, value=", ".join(f"{v:.4g}" for v in c.value), range=c.range_label,
                extrapolation=None if c.is_constant else c.extrapolation, provenance=prov.label())


# ---- reading a measurement file -------------------------------------------------------------------------------

_NUMERIC = ("kv_len", "candidates", "selected_frac", "offloaded_candidates", "selected_frac_offloaded", "reuse_frac",
            "tokens_per_cluster", "wics_exit_frac")


def _read_measurement(p: Path) -> dict:
    """The file's JSON object, its schema and header checked; each problem a one-line error naming the file."""
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no workload measurement file; write one with `python -m vrex_lib.workload "
                                f"measure --profile <P> --out {p}` or use Workload.paper()")
    try:
        d = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: not valid JSON ({e}); regenerate it with `python -m vrex_lib.workload measure`") from None
    if not isinstance(d, dict):
        raise ValueError(f"{p}: holds a JSON {type(d).__name__}, not a {SCHEMA} object; regenerate it with "
                         f"`python -m vrex_lib.workload measure`")
    if d.get("schema") != SCHEMA:
        raise ValueError(f"{p}: schema {d.get('schema')!r}, expected {SCHEMA!r}; regenerate the file")
    for k in ("profile", "model", "tokens_per_frame", "dense_layers", "checkpoints"):
        if k not in d:
            raise ValueError(f"{p}: missing key {k!r} of schema {SCHEMA}; regenerate the file")
    if not isinstance(d["checkpoints"], list):
        raise ValueError(f"{p}: 'checkpoints' must be a list; regenerate the file")
    for k in ("tokens_per_frame", "dense_layers"):
        v = d[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if k == "tokens_per_frame" else 0):
            raise ValueError(f"{p}: {k} = {v!r} must be an integer >= {1 if k == 'tokens_per_frame' else 0}")
    return d


def _num(p: Path, i: int, c: dict, k: str) -> float | None:
    v = c.get(k)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{p}: checkpoint {i} field {k!r} = {v!r} is not a finite number; regenerate the file")
    return float(v)


def _tier_shares(p: Path, i: int, v: dict) -> tuple[float | None, float | None, str | None]:
    """(on-device share, offloaded share, note) of one checkpoint; None where the file does not determine it."""
    cand, f, off, g = v["candidates"], v["selected_frac"], v["offloaded_candidates"], v["selected_frac_offloaded"]
    if f is None:
        return None, g, None
    if off is None or off == 0:
        return f, None, None
    if g is None:
        return None, None, f"checkpoint {i} has selected_frac but no selected_frac_offloaded: neither tier used"
    if cand is None or cand <= off:
        return None, g, None
    dev = (f * cand - g * off) / (cand - off)
    if not -1e-6 <= dev <= 1 + 1e-6:
        raise ValueError(f"{p}: checkpoint {i}: selected_frac {f} of {cand} candidates and selected_frac_offloaded "
                         f"{g} of {off} offloaded imply an on-device share {dev:.4g} outside [0, 1]; regenerate it")
    return min(1.0, max(0.0, dev)), g, None


def _checkpoint_points(p: Path, checkpoints: list) -> tuple[dict, list[str]]:
    """{(tag, method, stage): [(kv_len, value)]} for tags dev, off, reuse, tpc, wics; and notes on what is missing."""
    pts: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    notes: list[str] = []
    for i, c in enumerate(checkpoints):
        if not isinstance(c, dict):
            raise ValueError(f"{p}: checkpoint {i} is a {type(c).__name__}, not an object; regenerate the file")
        for k in ("kv_len", "method", "stage", "selected_frac"):
            if k not in c:
                raise ValueError(f"{p}: checkpoint {i} lacks {k!r}")
        if c["stage"] not in ("frame", "text"):
            raise ValueError(f"{p}: checkpoint {i} stage {c['stage']!r} must be 'frame' or 'text'")
        v = {k: _num(p, i, c, k) for k in _NUMERIC}
        if v["kv_len"] is None or v["kv_len"] < 0:
            raise ValueError(f"{p}: checkpoint {i} kv_len {c['kv_len']!r} must be a number >= 0")
        key, kv = (c["method"], c["stage"]), v["kv_len"]
        dev, off, note = _tier_shares(p, i, v)
        if note:
            notes.append(note)
        for tag, val in (("dev", dev), ("off", off), ("reuse", v["reuse_frac"])):
            if val is not None:
                pts.setdefault((tag,) + key, []).append((kv, val))
        for fld, ok, rng in (("tokens_per_cluster", lambda x: x > 0, "> 0"),
                             ("wics_exit_frac", lambda x: 0 <= x <= 1, "in [0, 1]")):
            if v[fld] is not None and not ok(v[fld]):
                raise ValueError(f"{p}: checkpoint {i} ({c['method']}/{c['stage']} at kv {kv:g}) has {fld} = "
                                 f"{v[fld]!r}, which must be {rng}; regenerate the file with `python -m "
                                 "vrex_lib.workload measure`")
        for tag, fld in (("tpc", "tokens_per_cluster"), ("wics", "wics_exit_frac")):
            if c["method"] == "resv" and v[fld] is not None:
                pts.setdefault((tag, "resv", "any"), []).append((kv, v[fld]))
        for layout, by_tpb in (c.get("fetch_blocks_per_token") or {}).items():
            for tpb, val in (by_tpb or {}).items():
                if val is not None:
                    x = _num(p, i, {"fetch_blocks_per_token": val}, "fetch_blocks_per_token")
                    pts.setdefault(("blocks", c["method"], f"{layout}@{int(tpb)}"), []).append((kv, x))
    return pts, notes


def _curve(points: list[tuple[float, float]], extrapolation: str) -> Curve:
    by: dict[float, list[float]] = {}
    for k, v in points:
        by.setdefault(k, []).append(v)
    ks = sorted(by)
    vals = tuple(sum(by[k]) / len(by[k]) for k in ks)
    return Curve(tuple(ks), vals, extrapolation if len(ks) >= 2 else "hold")


def _use_variants(by: dict) -> list[str]:
    """The simulator's method models a predictor that runs at every step (ReKV's block scoring at frames and
    tokens, as the paper's Table II row); a file that measured that mode as a variant supplies it."""
    substituted = []
    for sim_m, src in SIM_METHOD_SOURCES.items():
        if any((src, st) in by[t] for st in ("frame", "text") for t in ("dev", "off")):
            for d_ in by.values():
                for st in ("frame", "text"):
                    if (src, st) in d_:
                        d_[(sim_m, st)] = d_[(src, st)]
            substituted.append(f"{sim_m} from {src}")
    return substituted


def _measured_provenance(p: Path, where: str, rng: str, by: dict, curves: dict) -> tuple[dict, dict]:
    """FieldSource per field of a measured workload, and the ReSV/scenario keyword values."""
    meas = FieldSource("measured", where, rng)
    no_off = sorted(f"{m}/{s}" for m, s in set(by["dev"]) - set(by["off"]))
    off_prov = (meas if not no_off else FieldSource("measured", where, rng + "; no offloaded-tier share for "
                                                   + ", ".join(no_off) + " (never offloaded when measured)"))
    dev_prov = FieldSource("measured", where, rng + "; on-device share = (f C - g O) / (C - O)")
    pw = Workload.paper()  # fields the file does not carry keep the paper's statement, labelled so
    kw: dict = {}
    prov = dict(selected_frac_device=dev_prov, selected_frac_offloaded=off_prov,
                reuse=meas if by["reuse"] else FieldSource("measured", where, "no reuse measured: 0"),
                tokens_per_frame=FieldSource("measured", where), dense_layers=FieldSource("measured", where))
    for f, tag in (("tokens_per_cluster", "tpc"), ("wics_exit_frac", "wics")):
        if (tag, "resv", "any") in curves:
            kw[f] = curves[(tag, "resv", "any")]
            prov[f] = meas
        else:
            kw[f] = getattr(pw, f)
            prov[f] = dataclasses.replace(pw.provenance[f], detail=f"not in {p.name}")
    for f in ("frames", "question_tokens", "answer_tokens"):
        kw[f] = getattr(pw, f)
        prov[f] = dataclasses.replace(pw.provenance[f], detail=f"not in {p.name}")
    return prov, kw
