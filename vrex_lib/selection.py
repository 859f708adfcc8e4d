"""The result of one KV selection, shared by ReSV (``vrex_lib.resv``) and every retrieval policy.

It lives below both so that ``resv`` (which must not import the policies above it) and ``retrieval``
return the very same type to the runtime.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class Selection:
    """What one (layer, step) selected.

    indices:      per KV head, sorted unique cache positions chosen among the candidates.
    n_candidates: how many positions were selectable (the denominator of the retrieval ratio).
    stats:        method-specific counters for the hardware/performance models, e.g. ``rows`` (query
                  rows scored), ``scored`` (keys or clusters scored per head), ``clusters`` (clusters in
                  the table), ``clusters_selected``, ``prefix_frac`` (ReSV: mean fraction of a row's
                  clusters in its WiCSum prefix).
    rows:         None (every query token of the step attends ``indices``), or per KV head one sorted index
                  set per query token of the step, ``rows[g][t]`` ⊆ ``indices[g]``: token t attends only its own
                  set (InfiniGen's per-row selection, docs/DECISIONS.md D61). ``indices[g]`` is then the union
                  of head g's sets, what is fetched and counted.
    """

    indices: list[torch.Tensor]
    n_candidates: int
    stats: dict = field(default_factory=dict)
    rows: list[list[torch.Tensor]] | None = None

    @classmethod
    def per_row(cls, rows: list[list[torch.Tensor]], n_candidates: int, stats: dict | None = None) -> "Selection":
        """A per-row selection: ``indices`` are the union of each KV head's row sets."""
        union = [torch.unique(torch.cat(r)) if r else torch.zeros(0, dtype=torch.int64) for r in rows]
        return cls(union, n_candidates, stats or {}, rows)

    @property
    def n_selected(self) -> list[int]:
        return [int(i.numel()) for i in self.indices]

    def ratio(self) -> float:
        """Mean over heads of selected / candidates (1.0 when there is nothing to select from)."""
        if self.n_candidates == 0 or not self.indices:
            return 1.0
        return sum(self.n_selected) / (len(self.indices) * self.n_candidates)
