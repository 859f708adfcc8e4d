"""``flexgen`` — FlexGen-style offloading (Sheng et al., ICML 2023): no token selection at all.

Every offloaded token is fetched back at every step, so attention equals ``full``; the difference is
only in accounting: the runtime counts every candidate's bytes as moved (FlexGen is the paper's
"baseline" in Fig. 13/14).
"""
from __future__ import annotations

import torch

from ._common import all_of
from .base import PolicyBase, Selection, Stage


class FlexGen(PolicyBase):
    name = "flexgen"
    #: FlexGen fetches (all of) the offloaded KV at frame steps too; it just never *selects*.
    retrieves_at_frame = True

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.n_kv_heads = n_kv_heads

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        pass

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection:
        # No prediction work: zero rows scored.
        return all_of(candidates, keys.shape[0], dict(rows=0, scored=0, score_dims=0, score_macs=0, select_s=0.0))
