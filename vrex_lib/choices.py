"""The choices the paper leaves open that can move a verdict: one :class:`Choice` per decision, with its default,
its admissible range and why the range is what it is (docs/DECISIONS.md names each one, ``Dnn``).

A verdict that depends on such a choice is re-graded over the choice's whole admissible range: ``robust`` when it
holds at every admissible value, ``depends on Dnn`` otherwise (the claims' robustness column). A choice reaches
the code it moves through ``override``: a keyword of :func:`vrex_lib.perf.simulate` (a ``SimParams`` field, or
``system_<field>``), a ``workload.<field>`` of the :class:`~vrex_lib.perf.Workload`, or a ``resv.<field>`` of
:class:`~vrex_lib.config.ReSVConfig`.

    from vrex_lib import choices
    choices.get("D6").admissible        # the KVMU capacities a designer could pick
    choices.table()                     # id, name, default, admissible, override, why
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import pandas as pd


@dataclass(frozen=True)
class Choice:
    """One open decision.

    id: its docs/DECISIONS.md entry ('D6'); name: what is chosen, in words; default: the artifact's value;
    admissible: every value a careful designer or reader could defend, ordered, the default among them; why: the
    reason for the range (what bounds it on each side); override: where the value enters the code (see the module
    docstring; None for a reading that selects a named variant instead); unit: of the values ('' = none).
    """

    id: str
    name: str
    default: object
    admissible: tuple
    why: str
    override: str | None = None
    unit: str = ""

    def __post_init__(self) -> None:
        if self.default not in self.admissible:
            raise ValueError(f"choice {self.id}: the default {self.default!r} must be one of its admissible values")


_ROWS: tuple[Choice, ...] = (
    Choice("D6", "KVMU capacity: recent KV kept on the device per stream before offloading", 4096,
           (2048, 4096, 8192, 16384, 32768),
           "the paper gives none (§V.C 'predefined maximum capacity'); below ~2K tokens a COIN step segment (26 "
           "frames x 10 tokens) plus its question does not stay on the device; above 32K the edge system's 32 GB "
           "LPDDR5, less the 16 GB of weights, holds no second stream", "recent_capacity", "tokens"),
    Choice("D101", "V-Rex core's DRAM/NoC port width", 64, (32, 64, 128),
           "one core design serves V-Rex8 and V-Rex48: 32 B/cycle is V-Rex8's per-core share of 204.8 GB/s at "
           "800 MHz, 64 covers V-Rex48's 40.3 GB/s per core, 128 is the next power of two", "system_core_port",
           "B/cycle"),
    Choice("D103", "dense layers' KV: offloaded and re-fetched every step, or kept resident on the device",
           False, (False, True),
           "Fig. 6 draws layer 0 with full attention and says nothing of where its KV lives; a designer may keep "
           "it resident (1/32 of the cache) or treat it like every other layer", "dense_resident"),
    Choice("D104", "cross-step reuse of the previous step's retrieved KV (the KVMU's 'Retrieved KV', Fig. 12)",
           "kvmu", ("none", "kvmu", "all"),
           "the paper draws the region but gives no reuse; none (every step fetches afresh), the KVMU only "
           "(V-Rex), or every selecting method", "retrieved_cache"),
)

#: id -> :class:`Choice`, in table order.
CHOICES: MappingProxyType = MappingProxyType({c.id: c for c in _ROWS})


def get(choice_id: str) -> Choice:
    """The choice ``choice_id`` ('D6'); an unknown one is an error listing the ids."""
    if choice_id not in CHOICES:
        raise ValueError(f"unknown choice {choice_id!r}: choose one of {', '.join(CHOICES)}")
    return CHOICES[choice_id]


def table() -> pd.DataFrame:
    """The choices as a DataFrame: id, name, default, admissible, unit, override, why."""
    return pd.DataFrame([dict(id=c.id, name=c.name, default=c.default, admissible=c.admissible, unit=c.unit,
                              override=c.override, why=c.why) for c in _ROWS])


__all__ = ["CHOICES", "Choice", "get", "table"]
