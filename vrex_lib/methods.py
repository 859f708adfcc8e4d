"""The method table: every KV-retrieval method this artifact runs, by name, and what each name means elsewhere.

One row per method (:class:`Method`): the runtime policy that implements it (a class of :mod:`vrex_lib.retrieval`,
named as a string so this module imports nothing heavy and :mod:`vrex_lib.perf` can read it without torch), the
performance simulator's model of it (a key of ``vrex_lib.perf.methods.METHODS``), its place in the paper (the
Table II row, a figure, or none), and the stages at which it retrieves KV. Every list of method names in the
library is derived from :data:`METHODS`:

===================== ==================================================================================
:data:`NAMES`          every method (``vrex_lib.retrieval.POLICIES``, ``--method`` of eval and live)
:data:`TABLE2`         the Table II rows, in the paper's row order
:data:`SIMULATED`      the methods with a simulator model (``python -m vrex_lib.workload measure`` default)
:data:`SIM_METHOD`     runtime name -> simulator method (``vrex_lib.perf.SIM_METHOD``)
:data:`STUDY`          what notebook 03's accuracy study runs: Table II, the FlexGen baseline, Fig. 19's ablation
:data:`VARIANTS`       named policy variants measured beside their method (``rekv@frame``)
===================== ==================================================================================

    from vrex_lib import methods
    methods.METHODS["rekv"].label          # 'ReKV'
    methods.TABLE2                          # ('full', 'infinigen', 'infinigen_p', 'rekv', 'resv')
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

Role = Literal["table2", "baseline", "ablation", "alternative"]


@dataclass(frozen=True)
class Method:
    """One retrieval method.

    name: the runtime name (policy registry key, ``--method``, the ``method`` of a workload checkpoint);
    policy: the class in :mod:`vrex_lib.retrieval` that implements it; label: the name the paper prints;
    role: 'table2' (a Table II row), 'baseline' (a comparison system only: FlexGen, Fig. 13/14), 'ablation'
    (Fig. 19) or 'alternative' (this artifact's own variant, no paper counterpart); where: the paper place (or
    docs/DECISIONS.md entry) that defines it; stages: the stages at which the method as the paper runs it
    retrieves KV from the offload tier ('frame': frame prefill, 'text': question and answer), so "Retrieval @
    frame" of Table II is ``'frame' in stages``; sim: the simulator method (None = no hardware mapping);
    sim_source: the measured name whose statistics the simulator uses for it (a :data:`VARIANTS` key when the
    default policy differs from the paper's behaviour; None = the method itself).
    """

    name: str
    policy: str
    label: str
    role: Role
    where: str
    stages: tuple[str, ...]
    sim: str | None = None
    sim_source: str | None = None

    @property
    def retrieves_at_frame(self) -> bool:
        return "frame" in self.stages


_ROWS: tuple[Method, ...] = (
    Method("full", "FullAttention", "VideoLLM-Online", "table2", "Table II row 1 (no retrieval)", (), sim="full"),
    Method("flexgen", "FlexGen", "FlexGen", "baseline", "Fig. 13/14 baseline (fetches every offloaded token)",
           ("frame", "text"), sim="flexgen"),
    Method("infinigen", "InfiniGen", "InfiniGen", "table2", "Table II", ("text",), sim="infinigen"),
    Method("infinigen_p", "InfiniGenP", "InfiniGenP", "table2", "Table II", ("frame", "text"), sim="infinigen_p"),
    # The reference ReKV retrieves once per question (docs/DECISIONS.md D60); Table II's row retrieves during
    # frame processing too, which is the 'frame' mode measured as rekv@frame.
    Method("rekv", "ReKV", "ReKV", "table2", "Table II", ("frame", "text"), sim="rekv", sim_source="rekv@frame"),
    Method("resv", "ReSV", "V-Rex's ReSV", "table2", "Table II; §IV", ("frame", "text"), sim="resv"),
    Method("resv_noclust", "ReSVNoClustering", "ReSV w/o clustering", "ablation", "Fig. 19", ("frame", "text")),
    Method("resv_candwics", "ReSVCandidatesWiCSum", "ReSV, WiCSum over candidates", "alternative",
           "docs/DECISIONS.md D7", ("frame", "text")),
)

#: name -> :class:`Method`, in table order (Table II's methods in the paper's row order).
METHODS: MappingProxyType = MappingProxyType({m.name: m for m in _ROWS})
NAMES: tuple[str, ...] = tuple(METHODS)
TABLE2: tuple[str, ...] = tuple(m.name for m in _ROWS if m.role == "table2")
SIMULATED: tuple[str, ...] = tuple(m.name for m in _ROWS if m.sim is not None)
SIM_METHOD: MappingProxyType = MappingProxyType({m.name: m.sim for m in _ROWS if m.sim is not None})
STUDY: tuple[str, ...] = tuple(m.name for m in _ROWS if m.role != "alternative")
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


__all__ = ["METHODS", "Method", "NAMES", "SIMULATED", "SIM_METHOD", "SIM_SOURCES", "STUDY", "TABLE2", "VARIANTS",
           "get", "variants_of"]
