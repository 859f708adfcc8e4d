"""The paper's printed values -- the only place in vrex where paper numbers live.

Each section module registers :class:`PaperValue` s (value, unit, where printed, the point, its quantity kind):
``hardware`` (Table I, §VI.A/F inputs), ``coin`` (COIN working scenario), ``resv`` (§IV, §VI.B
algorithm statistics), ``accuracy`` (Table II, Fig. 19, Fig. 20), ``dre`` (Fig. 10/11, DRE
memories, early exit), ``area_power`` (Table III), ``performance`` (Fig. 4, Fig. 13–18, headline).

    >>> from vrex_lib import paper
    >>> paper.get("table1.peak_tflops.vrex8").value
    53.3
    >>> paper.spec("table1.dram_bw_gbs.edge")   # model inputs: kind 'input' only
    204.8
"""
from __future__ import annotations

import importlib
import pkgutil

from ._core import INFO, QUANTITY_KINDS, REGISTRY, PaperValue, Tolerance, pv, register
from ._core import PLAUSIBLE_TERM  # noqa: F401  (the one plausibility rule of a model term)

# Import every section module so REGISTRY is complete whichever one a caller needs.
for _m in pkgutil.iter_modules(__path__):
    if not _m.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_m.name}")


def get(key: str) -> PaperValue:
    """The paper value registered under ``key``; KeyError names close matches."""
    try:
        return REGISTRY[key]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(key, REGISTRY, n=5)
        raise KeyError(f"no paper value {key!r}; close: {close}") from None


def value(key: str) -> float:
    return get(key).value


def spec(key: str) -> float:
    """A value the paper *defines* as a specification (kind ``input``: Table I systems, the core configuration,
    3 W per PCIe lane, the average COIN scenario). The only entry point for model code: a paper *result* (kind
    ``result`` or ``derived``) raises, because a result must never become a model input.
    """
    v = get(key)
    if v.kind != "input":
        raise ValueError(f"paper value {key!r} is a {v.kind}, not a specification the paper defines; model code may "
                         "read only kind='input' values (paper results enter only through "
                         "vrex_lib.perf.Workload.paper() and comparison code)")
    return v.value


def select(prefix: str) -> dict[str, PaperValue]:
    """All values whose key starts with ``prefix`` (e.g. ``'table2.acc.'``), in registration order."""
    return {k: v for k, v in REGISTRY.items() if k.startswith(prefix)}


def table() -> "pandas.DataFrame":  # noqa: F821
    """Every registered value as a DataFrame (key, value, unit, where, kind, tolerance, note)."""
    import pandas as pd

    return pd.DataFrame(
        [dict(key=v.key, value=v.value, unit=v.unit, where=v.where, point=v.at, kind=v.kind, quantity_kind=v.qkind,
              tolerance=str(v.tol), note=v.note) for v in REGISTRY.values()]
    )


__all__ = ["INFO", "QUANTITY_KINDS", "REGISTRY", "PaperValue", "Tolerance", "get", "pv", "register", "select", "spec", "table", "value"]
