"""The one place where the explorers (``vrex_lib.stream``, ``vrex_lib.dse``) turn measured selection statistics
into a simulator :class:`~vrex_lib.perf.Workload` (provenance ``user``) and simulate one step of the paper's model
(Llama-3-8B + SigLIP-L, Table I systems) with it.

Fields that were measured replace the paper's statement (:meth:`Workload.paper`); fields that were not (a step
with no candidates yet, a method that does not cluster) keep the paper-stated value, labelled so in the
result's ``workload_source``. Measured fractions are dimensionless and are applied to the simulated model as-is,
held constant at other context lengths (docs/DECISIONS.md D90).
"""
from __future__ import annotations

import math

from . import perf

#: Runtime policy name -> simulator method (``resv_noclust`` has no hardware mapping in the simulator).
SIM_METHOD = {"resv": "resv", "infinigen": "infinigen", "infinigen_p": "infinigen_p", "rekv": "rekv",
              "flexgen": "flexgen", "full": "full"}


def _finite(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def measured_workload(method: str, *, selected_frac: float | None, tokens_per_cluster: float | None = None,
                      wics_exit_frac: float | None = None, reuse: float | None = None,
                      source: str = "measured") -> "perf.Workload":
    """The paper's workload with every measured statistic of ``method`` replaced (both stages, constant in
    kv_len). None/NaN keeps the paper-stated value."""
    sim_method = SIM_METHOD.get(method, method)
    if sim_method not in perf.METHODS:
        raise ValueError(f"method {method!r} has no simulator model; choose one of {', '.join(SIM_METHOD)}")
    key = perf.METHODS[sim_method].ratio_key
    base = perf.Workload.paper()
    ch: dict = {}
    if key is not None and _finite(selected_frac):
        f = min(1.0, max(0.0, float(selected_frac)))
        ch["selected_frac"] = {**base.selected_frac, (key, "frame"): f, (key, "text"): f}
    if key is not None and _finite(reuse):
        r = min(1.0, max(0.0, float(reuse)))
        ch["reuse"] = {**base.reuse, (key, "frame"): r, (key, "text"): r}
    if sim_method == "resv" and _finite(tokens_per_cluster):
        ch["tokens_per_cluster"] = max(1.0, float(tokens_per_cluster))
    if sim_method == "resv" and _finite(wics_exit_frac) and float(wics_exit_frac) > 0:
        ch["wics_exit_frac"] = min(1.0, float(wics_exit_frac))
    kept = sorted({"selected_frac", "reuse", "tokens_per_cluster", "wics_exit_frac"} - set(ch))
    name = f"{source}" + (f"; paper-stated: {', '.join(kept)}" if kept and ch else "")
    return base.replace(name=name, **ch) if ch else base


def simulate_measured(system, method: str, stage: str, kv_len: int, *, selected_frac: float | None,
                      tokens_per_cluster: float | None = None, wics_exit_frac: float | None = None,
                      reuse: float | None = None, source: str = "measured", batch: int = 1, **overrides):
    """One simulated step of ``method`` (a runtime policy name or simulator method) with measured statistics
    (:func:`measured_workload`). ``overrides``: any :class:`vrex_lib.perf.SimParams` field or ``system_<field>``.
    Returns the simulator's ``SimResult`` (``workload_source`` names the provenance)."""
    wl = measured_workload(method, selected_frac=selected_frac, tokens_per_cluster=tokens_per_cluster,
                           wics_exit_frac=wics_exit_frac, reuse=reuse, source=source)
    return perf.simulate(system, SIM_METHOD.get(method, method), stage, int(kv_len), batch, workload=wl, **overrides)
