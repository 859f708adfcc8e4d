"""Run one simulator experiment over a choice's admissible range (:mod:`vrex_lib.choices`).

    from vrex_lib import choices
    from vrex_lib.perf.sweep import sweep_choice
    rows = sweep_choice(choices.get("D6"), lambda **ov: simulate("vrex8", "resv", "frame", 40000,
                                                              workload="paper", **ov).latency_ms)
    # [(2048, 612.3), (4096, 554.1), ...]: (value, what ``run`` returned with the choice at that value)

``run`` receives the choice's simulator override as a keyword (``recent_capacity=8192``); a choice whose override
is not a simulator keyword (a ``workload.`` or ``resv.`` field, or None) cannot be swept here.
"""
from __future__ import annotations

from collections.abc import Callable

from ..choices import Choice


def sweep_choice(choice: Choice, run: Callable[..., object], values: tuple | None = None) -> list[tuple]:
    """[(value, run(**{override: value}))] over ``values`` (default: the choice's admissible range, in order)."""
    key = choice.override
    if key is None or "." in key:
        raise ValueError(f"choice {choice.id} ({choice.name}) enters through {key!r}, not a simulator keyword")
    return [(v, run(**{key: v})) for v in (choice.admissible if values is None else values)]
