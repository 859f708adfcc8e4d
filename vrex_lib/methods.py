"""The method table: every KV-retrieval method this artifact runs, by name, and what each name means elsewhere.

One row per method (:class:`Method`) is the whole registration of a method: the runtime policy that implements it
(``module.Class`` under :mod:`vrex_lib.retrieval`, named as a string so this module imports nothing heavy and
:mod:`vrex_lib.perf` can read it without torch), the performance simulator's model of it (a key of
``vrex_lib.perf.methods.METHODS``, one module per model), its place in the paper (the Table II row, a figure, or
none), the stages at which it retrieves KV, and the studies and figures it runs in (``runs_in``). Every list of
method names in the library is derived from :data:`METHODS` (``tests/test_methods.py`` fails on a hand-written one):

===================== ==================================================================================
:data:`NAMES`          every method (``vrex_lib.retrieval.POLICIES``, ``--method`` of eval and live)
:data:`TABLE2`         the Table II rows, in the paper's row order
:data:`SIMULATED`      the methods with a simulator model (``python -m vrex_lib.workload measure`` default)
:data:`SIM_METHOD`     runtime name -> simulator method (``vrex_lib.perf.SIM_METHOD``)
:data:`STUDY`          what notebook 03's accuracy study runs (``runs_in`` 'study')
:data:`RATIO_ROWS`     Table II's rows with a printed retrieval ratio (every row but VideoLLM-Online)
:data:`FIG19`          Fig. 19's ablation bars (``runs_in`` 'fig19'), the ablation first
:data:`LONGCTX`        what notebook 09's retrieval study runs (``runs_in`` 'longctx')
:data:`GPU_BASELINES`  the GPU methods of the Fig. 13 grid (``runs_in`` 'fig13'), as simulator names
:data:`E2E_BASELINES`  the AGX Orin methods of Fig. 14's end-to-end comparison (``runs_in`` 'fig14')
:data:`VARIANTS`       named policy variants measured beside their method (``rekv@frame``)
===================== ==================================================================================

    from vrex_lib import methods
    methods.METHODS["rekv"].label          # 'ReKV'
    methods.TABLE2                          # ('full', 'infinigen', 'infinigen_p', 'rekv', 'resv')
    methods.in_family("infinigen")          # ('infinigen', 'infinigen_p'): the rows one policy module implements
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

Role = Literal["table2", "baseline", "ablation", "reading", "alternative", "external"]
#: Where a method runs besides its own CLI: notebook 03's accuracy study, notebook 09's long-context study, the GPU
#: grid of Fig. 13, the AGX Orin end-to-end comparison of Fig. 14, Fig. 19's ablation. (The workload measurement runs
#: every method with a simulator model, :data:`SIMULATED`.)
RUNS_IN: tuple[str, ...] = ("study", "longctx", "fig13", "fig14", "fig19")


@dataclass(frozen=True)
class Budget:
    """The knob along which a method's equal-budget curves run (docs/DECISIONS.md D482, D484): the policy option it
    sets, the long-context study's tag letter for it (``method@<tag><value>``), the option's type, and the values the
    study's text-stage curves and the frame-stage comparison sweep (empty: not swept there)."""

    option: str
    tag: str
    kind: type = float
    study: tuple = ()
    frame: tuple = ()


@dataclass(frozen=True)
class Method:
    """One retrieval method.

    name: the runtime name (policy registry key, ``--method``, the ``method`` of a workload checkpoint);
    policy: ``module.Class`` of the policy under :mod:`vrex_lib.retrieval`; label: the name the paper prints;
    role: 'table2' (a Table II row), 'baseline' (a comparison system only: FlexGen, Fig. 13/14), 'ablation'
    (Fig. 19), 'reading' (another reading of a step the paper leaves open, no paper counterpart), 'alternative'
    (this artifact's own variant beyond the paper, no paper counterpart) or 'external' (a published
    method the paper does not compare, run beside it); where: the paper place (or docs/DECISIONS.md entry) that
    defines it; stages: the stages at which the method as the paper runs it retrieves KV from the offload tier
    ('frame': frame prefill, 'text': question and answer), so "Retrieval @ frame" of Table II is
    ``'frame' in stages``; sim: the simulator method (None = no hardware mapping); sim_source: the measured name
    whose statistics the simulator uses for it (a :data:`VARIANTS` key when the default policy differs from the
    paper's behaviour; None = the method itself); runs_in: members of :data:`RUNS_IN`; budget: its equal-budget
    knob (:class:`Budget`; None = not swept).
    """

    name: str
    policy: str
    label: str
    role: Role
    where: str
    stages: tuple[str, ...]
    sim: str | None = None
    sim_source: str | None = None
    runs_in: frozenset[str] = frozenset()
    budget: Budget | None = None

    def __post_init__(self) -> None:
        unknown = set(self.runs_in) - set(RUNS_IN)
        if unknown or "." not in self.policy:
            raise ValueError(f"method {self.name!r}: runs_in must be a subset of {RUNS_IN} (got {sorted(unknown)}) and "
                             f"policy a 'module.Class' under vrex_lib.retrieval (got {self.policy!r})")

    @property
    def retrieves_at_frame(self) -> bool:
        return "frame" in self.stages

    @property
    def family(self) -> str:
        """The policy module that implements it (InfiniGen and InfiniGenP share 'infinigen')."""
        return self.policy.split(".")[0]


_ALL = frozenset({"study", "longctx", "fig13", "fig14"})
_ROWS: tuple[Method, ...] = (
    Method("full", "full.FullAttention", "VideoLLM-Online", "table2", "Table II row 1 (no retrieval)", (), sim="full",
           runs_in=frozenset({"study", "longctx"})),
    Method("flexgen", "flexgen.FlexGen", "FlexGen", "baseline", "Fig. 13/14 baseline (fetches every offloaded token)",
           ("frame", "text"), sim="flexgen", runs_in=_ALL),
    Method("infinigen", "infinigen.InfiniGen", "InfiniGen", "table2", "Table II", ("text",), sim="infinigen",
           runs_in=frozenset({"study", "longctx", "fig13"}), budget=Budget("alpha", "a", float, study=(1, 3, 8, 12))),
    Method("infinigen_p", "infinigen.InfiniGenP", "InfiniGenP", "table2", "Table II", ("frame", "text"),
           sim="infinigen_p", runs_in=_ALL, budget=Budget("cap", "c", float, frame=(0.05, 0.2, 0.5))),
    # The reference ReKV retrieves once per question (docs/DECISIONS.md D60); Table II's row retrieves during
    # frame processing too, which is the 'frame' mode measured as rekv@frame.
    Method("rekv", "rekv.ReKV", "ReKV", "table2", "Table II", ("frame", "text"), sim="rekv", sim_source="rekv@frame",
           runs_in=_ALL),
    Method("resv", "resv_policy.ReSV", "V-Rex's ReSV", "table2", "Table II; §IV", ("frame", "text"), sim="resv",
           runs_in=frozenset({"study", "longctx", "fig19"}),
           budget=Budget("th_r_wics", "r", float, study=(0.1, 0.5, 0.7, 0.9), frame=(0.1, 0.3, 0.7))),
    Method("resv_noclust", "resv_policy.ReSVNoClustering", "ReSV w/o clustering", "ablation", "Fig. 19",
           ("frame", "text"), sim="resv_noclust", runs_in=frozenset({"study", "fig19"})),
    Method("resv_candwics", "ratio.ReSVCandidatesWiCSum", "ReSV, WiCSum over candidates", "reading",
           "docs/DECISIONS.md D7", ("frame", "text")),
    Method("resv_rescore", "resv_policy.ReSVRescore", "ReSV, clusters as shortlist + exact re-score", "alternative",
           "docs/DECISIONS.md D262 (beyond the paper)", ("frame", "text")),
    # Beyond the paper (docs/DECISIONS.md D490-D494): capped clusters, a bounded cluster score, a token-budget stop.
    Method("resv_best", "bounded_policy.BoundedReSV", "ReSV, capped clusters + 4-bit best member + budget",
           "alternative", "docs/DECISIONS.md D490 (beyond the paper)", ("frame", "text"), sim="resv_best",
           runs_in=frozenset({"longctx"}), budget=Budget("budget", "b", float, frame=(0.01, 0.02, 0.04, 0.08, 0.16))),
    Method("resv_cuboid", "bounded_policy.BoundedReSVCuboid", "ReSV, capped clusters + cuboid-mean + budget",
           "alternative", "docs/DECISIONS.md D490 (beyond the paper)", ("frame", "text")),
    Method("resv_capped", "bounded_policy.BoundedReSVCentroid", "ReSV, capped clusters + centroid + budget",
           "alternative", "docs/DECISIONS.md D490 (beyond the paper)", ("frame", "text")),
    Method("streamingllm", "streamingllm.StreamingLLM", "StreamingLLM", "external",
           "Xiao et al., ICLR 2024 (sinks + recent window; docs/DECISIONS.md D300)", (), sim="streamingllm",
           runs_in=frozenset({"study", "longctx", "fig13"}),
           budget=Budget("window", "w", int, study=(256, 768, 1024), frame=(256, 1024))),
)

#: name -> :class:`Method`, in table order (Table II's methods in the paper's row order).
METHODS: MappingProxyType = MappingProxyType({m.name: m for m in _ROWS})
NAMES: tuple[str, ...] = tuple(METHODS)
TABLE2: tuple[str, ...] = tuple(m.name for m in _ROWS if m.role == "table2")
SIMULATED: tuple[str, ...] = tuple(m.name for m in _ROWS if m.sim is not None)
SIM_METHOD: MappingProxyType = MappingProxyType({m.name: m.sim for m in _ROWS if m.sim is not None})


def runs_in(place: str) -> tuple[str, ...]:
    """The methods that run in ``place`` (one of :data:`RUNS_IN`), in table order."""
    if place not in RUNS_IN:
        raise ValueError(f"unknown place {place!r}: choose one of {', '.join(RUNS_IN)}")
    return tuple(m.name for m in _ROWS if place in m.runs_in)


def in_family(family: str) -> tuple[str, ...]:
    """The methods whose policy lives in module ``family`` of :mod:`vrex_lib.retrieval`, in table order."""
    return tuple(m.name for m in _ROWS if m.family == family)


STUDY: tuple[str, ...] = runs_in("study")
#: Table II's rows that retrieve at some stage (every row but VideoLLM-Online): those with a printed retrieval ratio.
RATIO_ROWS: tuple[str, ...] = tuple(m for m in TABLE2 if METHODS[m].stages)
#: This artifact's own variants (no paper counterpart): other readings of the paper and those beyond it.
ALTERNATIVES: tuple[str, ...] = tuple(m.name for m in _ROWS if m.role in ("reading", "alternative"))
#: Fig. 19's bars after VideoLLM-Online: the ablation(s) first, then ReSV.
FIG19: tuple[str, ...] = tuple(sorted(runs_in("fig19"), key=lambda m: METHODS[m].role != "ablation"))
LONGCTX: tuple[str, ...] = runs_in("longctx")
#: Simulator names of the Fig. 13 GPU methods and of Fig. 14's AGX Orin methods (the table's order).
GPU_BASELINES: tuple[str, ...] = tuple(SIM_METHOD[m] for m in runs_in("fig13"))
E2E_BASELINES: tuple[str, ...] = tuple(SIM_METHOD[m] for m in runs_in("fig14"))
#: Variant name -> (method, policy kwargs): measured beside the method whenever it is measured.
VARIANTS: MappingProxyType = MappingProxyType({"rekv@frame": ("rekv", MappingProxyType({"mode": "frame"}))})
#: Simulator method -> the measured variant whose statistics it uses when a workload file has them.
SIM_SOURCES: MappingProxyType = MappingProxyType({m.sim: m.sim_source for m in _ROWS if m.sim_source})


def get(name: str) -> Method:
    """The row of ``name``; an unknown name is an error listing the choices."""
    if name not in METHODS:
        raise ValueError(f"unknown retrieval method {name!r}: choose one of {', '.join(NAMES)}")
    return METHODS[name]


def variants_of(names) -> dict[str, tuple[str, dict]]:
    """The :data:`VARIANTS` of the methods in ``names``: {variant: (method, kwargs)} (fresh dicts)."""
    return {v: (m, dict(kw)) for v, (m, kw) in VARIANTS.items() if m in names}


__all__ = ["ALTERNATIVES", "E2E_BASELINES", "FIG19", "GPU_BASELINES", "LONGCTX", "METHODS", "Method", "NAMES",
           "RATIO_ROWS", "RUNS_IN", "SIMULATED", "SIM_METHOD", "SIM_SOURCES", "STUDY", "TABLE2", "VARIANTS", "get",
           "in_family", "runs_in", "variants_of"]
