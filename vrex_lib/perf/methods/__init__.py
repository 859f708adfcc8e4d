"""The simulator's model of each KV-retrieval method, one module per model, found by the registry below.

Each module defines ``MODELS``, a tuple of :class:`~.base.SimMethod` objects; :data:`METHODS` collects every
module's models by name. A row of the method table (:mod:`vrex_lib.methods`) names its model by ``sim``; adding a
method's model is adding a module here (docs/ARCHITECTURE.md, "Add a method").

Models (paper §VI.A), each as the software runs on its GPU (docs/DECISIONS.md D22):

* ``flexgen`` -- FlexGen's KV placement: every offloaded token streamed back per layer (:mod:`.flexgen`);
* ``infinigen`` / ``infinigen_p`` -- speculative partial-key scoring at text steps; the authors' prefill
  extension scores every full key at frame steps (:mod:`.infinigen`);
* ``rekv`` -- frame-block mean-key scoring, whole frames fetched (:mod:`.rekv`);
* ``resv`` / ``resv_kvpu`` -- hash + HCU clustering + Q·K_cluster^T + WiCSum; on V-Rex the HCU/WTU run it, with the
  KVMU's cluster-contiguous layout (``resv``) or without it (``resv_kvpu``, Fig. 16) (:mod:`.resv`);
* ``resv_noclust`` -- Fig. 19's ablation: every candidate key scored, WiCSum over tokens, token fetch
  (:mod:`.resv_noclust`);
* ``full`` / ``oaken`` -- no offload (Fig. 15; Oaken with 4-bit KV) (:mod:`.full`);
* ``streamingllm`` -- attention sinks + a recent window; everything older is evicted, nothing fetched
  (:mod:`.streamingllm`).
"""
from __future__ import annotations

import importlib
import pkgutil
from types import MappingProxyType

from .base import Layout, PredContext, PredWork, SimMethod, dre_cycles, moved_fraction, run_tokens


def _collect() -> dict[str, SimMethod]:
    found: dict[str, SimMethod] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name == "base":
            continue
        for m in getattr(importlib.import_module(f"{__name__}.{info.name}"), "MODELS", ()):
            if m.name in found:
                raise ValueError(f"simulator method {m.name!r} is defined twice (perf/methods/{info.name}.py)")
            found[m.name] = m
    return found


#: simulator name -> model, from every module of this package.
METHODS: MappingProxyType = MappingProxyType(_collect())


def get_method(method: str | SimMethod) -> SimMethod:
    """The model named ``method`` (a model passes through); an unknown name lists the choices."""
    if isinstance(method, SimMethod):
        return method
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} for the simulator: choose one of {', '.join(METHODS)}")
    return METHODS[method]


__all__ = ["METHODS", "Layout", "PredContext", "PredWork", "SimMethod", "dre_cycles", "get_method", "moved_fraction",
           "run_tokens"]
