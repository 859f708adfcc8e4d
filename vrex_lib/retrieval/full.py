"""``full`` — no retrieval: every layer attends to the whole cache (the VideoLLM-Online row of Table II)."""
from __future__ import annotations

import torch

from .base import PolicyBase, Selection, Stage


class FullAttention(PolicyBase):
    """Selects nothing and fetches nothing: ``select`` returns ``None`` (= attend to all candidates)."""

    name = "full"
    retrieves_at_frame = False

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        pass

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        pass

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        return None
