"""The one place where the explorers (``vrex_lib.stream``, ``vrex_lib.dse``) call the simulator with a *measured*
workload, written against the ``Workload`` / ``simulate(..., workload=...)`` contract of :mod:`vrex_lib.perf`.

:func:`simulate_measured` simulates one step of the paper's model (Llama-3-8B + SigLIP-L, Table I systems) with
the selection statistics a runtime step or a design point measured: the selected fraction of the candidates, the
mean tokens per ReSV cluster, the WiCSum walk fraction and the retrieved-KV reuse. When :mod:`vrex_lib.perf` has a
``Workload`` class it builds a user Workload (provenance ``user``, labelled with ``source``) and passes it as
``workload=``; otherwise it passes the same numbers as the simulator's keyword overrides (``ratios``,
``tokens_per_cluster``, ``wics_exit_frac``, ``retrieved_reuse``) -- the same model inputs, named differently.
``result.workload_source`` always says which path ran and where the numbers came from.
"""
from __future__ import annotations

import inspect
import math

from . import perf

#: Runtime policy name -> simulator method (``resv_noclust`` has no hardware mapping in the simulator).
SIM_METHOD = {"resv": "resv", "infinigen": "infinigen", "infinigen_p": "infinigen_p", "rekv": "rekv",
              "flexgen": "flexgen", "full": "full"}


def _has_workload_api() -> bool:
    return hasattr(perf, "Workload") and "workload" in inspect.signature(perf.simulate).parameters


def _finite(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def simulate_measured(system, method: str, stage: str, kv_len: int, *, selected_frac: float | None,
                      tokens_per_cluster: float | None = None, wics_exit_frac: float | None = None,
                      reuse: float | None = None, source: str = "measured", batch: int = 1, **overrides):
    """One simulated step of ``method`` (a runtime policy name or simulator method) with measured selection stats.

    ``selected_frac``: fraction of the candidates selected (None/NaN = the method does not select in this stage,
    or nothing was measured: the simulator's own ratio source is used). Other stats None = simulator defaults.
    ``overrides``: any :class:`vrex_lib.perf.SimParams` field or ``system_<field>``. Returns the simulator's
    ``SimResult`` with ``workload_source`` set.
    """
    sim_method = SIM_METHOD.get(method, method)
    if sim_method not in perf.METHODS:
        raise ValueError(f"method {method!r} has no simulator model; choose one of {', '.join(SIM_METHOD)}")
    spec = perf.METHODS[sim_method]
    if _has_workload_api():  # contract B: a user Workload carries the measured numbers
        fields = {}
        params = {f for f in getattr(perf.Workload, "__dataclass_fields__", {})}
        for name, val in (("selected_frac", selected_frac), ("tokens_per_cluster", tokens_per_cluster),
                          ("wics_exit_frac", wics_exit_frac), ("reuse_frac", reuse)):
            if _finite(val) and name in params:
                fields[name] = float(val)
        try:
            wl = perf.Workload(**fields)
            r = perf.simulate(system, sim_method, stage, kv_len, batch, workload=wl, **overrides)
            r.workload_source = getattr(r, "workload_source", "") + f" ({source})"
            return r
        except TypeError:
            pass  # a Workload with other field names: fall through to the keyword path
    kw = dict(overrides)
    ratios = None
    if _finite(selected_frac) and spec.ratio_key is not None:
        f = min(1.0, max(0.0, float(selected_frac)))
        ratios = {(spec.ratio_key, st): f for st in ("frame", "text")}
    if _finite(tokens_per_cluster):
        kw["tokens_per_cluster"] = max(1.0, float(tokens_per_cluster))
    if _finite(wics_exit_frac):
        kw["wics_exit_frac"] = min(1.0, max(0.0, float(wics_exit_frac)))
    if _finite(reuse) and spec.ratio_key is not None:
        kw["retrieved_reuse"] = {(spec.ratio_key, stage): min(1.0, max(0.0, float(reuse)))}
    r = perf.simulate(system, sim_method, stage, kv_len, batch, ratios=ratios, **kw)
    r.workload_source = (f"{source}, passed as simulator overrides" if ratios is not None
                         else f"simulator default ratios ({r.ratio_source})")
    return r
