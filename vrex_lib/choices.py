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
           "one core design serves V-Rex8 and V-Rex48 (Table III is one core): 32 B/cycle is V-Rex8's per-core share "
           "of 204.8 GB/s at 800 MHz (Table I), 64 the next power of two above V-Rex48's 1935/48 = 40.3 GB/s = 50.4 "
           "B/cycle, 128 a generous design", "system_core_port_bytes_per_cycle", "B/cycle"),
    Choice("D103", "dense layers' KV: kept resident on the device, or offloaded and re-fetched every step",
           True, (False, True),
           "Fig. 6 draws layer 0 with full attention and says nothing of where its KV lives; a designer keeps it "
           "resident (1/32 of the cache, read in full every step) rather than move 147 MB per frame over the 4 GB/s "
           "link at 40K; the literal reading (every layer offloaded alike) is the other end", "dense_resident"),
    Choice("D244", "fetch granule rule: how the KVMU's cluster-wise reordering places a selected cluster's offloaded "
           "tokens in the SSD's blocks (a measured workload's blocks per token replace it)", "extent",
           ("extent", "packed", "independent"),
           "§V.C makes one cluster's tokens contiguous but gives no placement: each cluster in its own block-aligned "
           "extent (what a designer reading whole clusters from an SSD builds; ceil(run / block) blocks), clusters "
           "packed back to back (D85's hardware model, runs span run/block + 1/2 blocks), or runs at independent "
           "offsets (the upper bound of the waste)", "granule_rule"),
    Choice("D246", "Fig. 19's per-token ablation: where the offloaded keys it scores come from", "fetch",
           ("fetch", "resident"),
           "§VI.E: clustering 'avoids fetching/computing the full key for WiCSum', so without it every offloaded key "
           "is fetched each step; a designer could instead keep every key on the device (InfiniGenP's choice)",
           "noclust_keys"),
    Choice("D243", "host memory copy rate for FlexGen's pinned-buffer relay on the server", 102.4e9,
           (25.6e9, 51.2e9, 102.4e9),
           "the relay copy runs on the host CPU: at most the socket's 8 x DDR4-3200 = 204.8 GB/s split between the "
           "read and the write (102.4 GB/s copied); one DDR4-3200 channel (25.6 GB/s) is a single-threaded copy's "
           "order", "system_host_copy_bytes_s", "B/s"),
    Choice("D104", "cross-step reuse of the previous step's retrieved KV (the KVMU's 'Retrieved KV', Fig. 12)",
           "kvmu", ("none", "kvmu", "all"),
           "the paper draws the region but gives no reuse; none (every step fetches afresh), the KVMU only "
           "(V-Rex), or every selecting method", "retrieved_cache"),
    Choice("D221", "frame-to-frame reuse: the share of a step's selected offloaded KV already on the device from the "
           "previous step, as the implied-by-printed checks allow it", 0.0, (0.0, 0.3, 0.6),
           "Table II prints a per-step retrieval ratio and no reuse: 0 is the literal reading; 0.6 is the "
           "frame-to-frame overlap of the selection this artifact measures on its stand-in streams (notebook 02), "
           "the most a reader can defend; the checks of claims.causes read it (no simulator keyword)", None),
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
