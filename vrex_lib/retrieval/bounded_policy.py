"""Beyond the paper: ReSV variants that retrieve -- capped clusters, a bounded per-cluster score, a token-budget
stop (:mod:`vrex_lib.resv.bounded`, docs/DECISIONS.md D490-D494). The paper's ReSV is ``resv`` (unchanged).

| name             | summary per cluster                                   | default knobs (BoundedConfig)          |
|------------------|-------------------------------------------------------|----------------------------------------|
| ``resv_best``    | best member under a 4-bit per-token key copy           | cap 8, budget 1.5 %, bits 4, shortlist 1 |
| ``resv_cuboid``  | ArkVale's cuboid-mean (centre + mean abs. deviation)   | cap 8, budget 2 %                      |
| ``resv_capped``  | ReSV's centroid (only the cap and the stop change)     | cap 8, budget 1 %                      |

Each takes ``cfg`` (a :class:`~vrex_lib.config.ReSVConfig`: N_hp, Th_hp, seed of the hashing; its WiCSum fields
are not used) and ``bounded`` (a :class:`~vrex_lib.resv.bounded.BoundedConfig`); keyword overrides go to whichever
record has the field (``resv_best(budget=0.02, bits=2)``).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ..config import ReSVConfig
from ..resv.bounded import BoundedConfig, CappedClusterTable, bounded_select_head
from ..resv.table import single_thread, to_numpy
from ._common import Stopwatch, kv_rows
from .base import PolicyBase, Selection, Stage

_RESV_FIELDS = {f.name for f in dataclasses.fields(ReSVConfig)}
_BOUNDED_FIELDS = {f.name for f in dataclasses.fields(BoundedConfig)}


class BoundedReSV(PolicyBase):
    """Capped clusters + a bounded summary + a budgeted stop, per layer × KV head (the class of all three rows)."""

    name = "resv_best"
    retrieves_at_frame = True
    defaults = BoundedConfig()

    def __init__(self, cfg: ReSVConfig | None = None, bounded: BoundedConfig | None = None, **overrides):
        if cfg is not None and not isinstance(cfg, ReSVConfig):
            raise ValueError(f"{self.name}: cfg must be a ReSVConfig, got {type(cfg).__name__}")
        if bounded is not None and not isinstance(bounded, BoundedConfig):
            raise ValueError(f"{self.name}: bounded must be a BoundedConfig, got {type(bounded).__name__}")
        unknown = sorted(set(overrides) - _RESV_FIELDS - _BOUNDED_FIELDS)
        if unknown:
            raise ValueError(f"{self.name}: unknown option(s) {', '.join(unknown)}; BoundedConfig has "
                             f"{', '.join(sorted(_BOUNDED_FIELDS))}, ReSVConfig {', '.join(sorted(_RESV_FIELDS))}")
        self.cfg = (cfg or ReSVConfig()).replace(**{k: v for k, v in overrides.items() if k in _RESV_FIELDS})
        self.bounded = (bounded or self.defaults).replace(**{k: v for k, v in overrides.items()
                                                             if k in _BOUNDED_FIELDS})
        self.counters = dict(lowbit_keys=0, candidates=0)

    @property
    def config(self) -> dict:
        return dataclasses.asdict(self.bounded)

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.n_kv_heads, self.head_dim = n_kv_heads, head_dim
        self.tables: list[CappedClusterTable | None] = [None] * n_layers

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        if self.tables[layer] is None:
            self.tables[layer] = CappedClusterTable(self.n_kv_heads, self.head_dim, self.cfg, self.bounded, layer)
        t = self.tables[layer]
        if start != t.n_tokens:
            raise ValueError(f"{self.name}: layer {layer} observed position {start}, expected {t.n_tokens} "
                             "(observe must see every appended token in order; call reset() per stream)")
        with single_thread():
            t.add(to_numpy(new_keys, np.float32))

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        if candidates.numel() == 0:
            return None
        t = self.tables[layer]
        if t is None:
            raise ValueError(f"{self.name}: layer {layer} has no cluster table yet (observe before select)")
        hkv = keys.shape[0]
        with Stopwatch() as sw, single_thread():
            rows = to_numpy(kv_rows(query.detach(), hkv), np.float64)
            k = to_numpy(keys, np.float32)
            cand = to_numpy(candidates, np.int64)
            out, acc = [], dict(clusters=0, clusters_scored=0, clusters_selected=0, lowbit_keys=0)
            for h in range(hkv):
                means = t.means[h].astype(np.float64)
                sel, st = bounded_select_head(self.bounded, rows[h], k[h], t.assign[h], means, cand, t.lowbit[h])
                out.append(torch.from_numpy(sel).to(candidates.device))
                for f in acc:
                    acc[f] += st[f]
        self.counters["lowbit_keys"] += acc["lowbit_keys"]
        self.counters["candidates"] += int(candidates.numel()) * hkv
        r = rows.shape[1]
        stats = dict(rows=hkv * r, scored=acc["clusters_scored"], score_dims=self.head_dim,
                     score_macs=r * (acc["clusters_scored"] + acc["lowbit_keys"]) * self.head_dim, **acc,
                     table_tokens=t.n_tokens, select_s=sw.seconds)
        return Selection(out, int(candidates.numel()), stats)


class BoundedReSVCuboid(BoundedReSV):
    """``resv_cuboid``: capped clusters scored by ArkVale's cuboid-mean, 2 % budget."""

    name = "resv_cuboid"
    defaults = BoundedConfig(summary="cuboid", budget=0.02)


class BoundedReSVCentroid(BoundedReSV):
    """``resv_capped``: capped clusters scored by their centroid, 1 % budget (the cap and the stop alone)."""

    name = "resv_capped"
    defaults = BoundedConfig(summary="centroid", budget=0.01)
