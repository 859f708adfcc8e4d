"""The seam between the runtime and every KV-retrieval method: :class:`RetrievalPolicy`.

The runtime (``vrex_lib.runtime``) never knows which method it runs. For every layer and every
forward step (one frame prefill, a question prefill, one generated token) its attention function

1. calls ``policy.observe(layer, new_keys, start, stage, frame_id)`` with the step's new post-RoPE
   keys, which now sit in the cache at positions ``start .. start+N-1``;
2. calls ``policy.select(layer, query, keys, candidates, stage)`` where ``candidates`` are the cache
   positions the policy may choose from: everything except the always-attended tokens (prompt/system
   sinks, the recent frame window, the step's own new tokens), which are the runtime's business;
3. attends over always-attended ∪ selected positions (per KV head), and counts the bytes of the
   selected positions by tier in the KV store.

The optional hooks are declared in the protocol too, with their defaults in :class:`PolicyBase` (a policy class
derives from it and overrides what it needs; the runtime calls every hook, it never asks whether one exists):

* ``bind(model)``: :class:`~vrex_lib.runtime.StreamingSession` calls it once, before ``reset``, with its model,
  for what post-RoPE tensors do not carry (ReKV's pre-RoPE scoring needs the q/k projections, InfiniGen its
  calibration, ``W_q`` and the previous layer's attention input; see :mod:`vrex_lib.runtime.capture`). Such
  policies used without a session raise an error naming the fix. Default: nothing.
* ``bind_store(store)``: the session passes its :class:`~vrex_lib.runtime.KVStore` after every ``reset``, so a
  policy that decides by tier reads ``store.host_boundary(seq_len)`` (StreamingLLM keeps the device-resident
  candidates and drops the offloaded ones). Default: nothing.
* ``retrieval_from_layer``: the first layer the runtime consults the policy at; ``None`` (default) means
  ``RuntimeConfig.dense_layers`` (ReKV's reference mode and StreamingLLM set 0).
* ``policies``: the member policies of a composite (the shadow measurement, the long-context study), which the
  session binds like its own policy. Default: none.
* ``tables``: ReSV's per-layer HC tables (:class:`vrex_lib.resv.HashClusterTable`, ``None`` for a layer not
  observed yet) for the instruments that read them; ``None`` (default) for a policy that keeps none.

Shapes (batch 1; the runtime loops over batch if ever needed):
    new_keys   [Hkv, N, D]      keys:  [Hkv, S, D] (whole cache, post-RoPE, this step included)
    query      [Hq, Nq, D]      post-RoPE queries of this step (Hq = Hkv * group)
    candidates [C] int64        sorted cache positions
"""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

import torch

from ..selection import Selection

Stage = Literal["frame", "text"]


@runtime_checkable
class RetrievalPolicy(Protocol):
    """One KV-retrieval method. Implementations live in ``vrex_lib/retrieval/<name>.py`` and derive from
    :class:`PolicyBase`, which gives the optional hooks their defaults."""

    name: str
    #: True if the method also retrieves during frame prefill (Table II "Retrieval @ frame").
    retrieves_at_frame: bool
    #: First layer the runtime consults the policy at; None = ``RuntimeConfig.dense_layers``.
    retrieval_from_layer: int | None
    #: Member policies of a composite policy, bound by the session like the policy itself.
    policies: Mapping[str, Any]
    #: ReSV's per-layer HC tables, or None for a policy that keeps none.
    tables: list | None

    def bind(self, model) -> None:
        """Once per session, before ``reset``: what the policy needs from the model beyond post-RoPE tensors."""

    def bind_store(self, store) -> None:
        """After every ``reset``: the session's KV store (its tiers)."""

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        """Forget everything (a new video stream)."""

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        """New tokens' post-RoPE keys [Hkv, N, D] were appended at cache positions start..start+N-1."""

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        """Positions each KV head attends to among ``candidates``; ``None`` means all of them."""


class PolicyBase:
    """The defaults of :class:`RetrievalPolicy`'s optional hooks; every policy derives from it.

    A subclass sets ``name`` and ``retrieves_at_frame`` and implements ``reset``, ``observe`` and ``select``; it
    overrides a hook only when it needs one (module docstring)."""

    name: str = "policy"
    retrieves_at_frame: bool = False
    retrieval_from_layer: int | None = None
    policies: Mapping[str, Any] = MappingProxyType({})
    tables: list | None = None

    def bind(self, model) -> None:
        """No model access needed."""

    def bind_store(self, store) -> None:
        """No use for the KV store's tiers."""


def check_policy(policy: object) -> None:
    """A TypeError naming the fix when ``policy`` does not implement :class:`RetrievalPolicy` (every method and
    hook: deriving from :class:`PolicyBase` gives the hooks)."""
    if not isinstance(policy, RetrievalPolicy):
        missing = [k for k in ("name", "retrieves_at_frame", "retrieval_from_layer", "policies", "tables", "bind",
                               "bind_store", "reset", "observe", "select") if not hasattr(policy, k)]
        raise TypeError(f"{type(policy).__name__} is not a RetrievalPolicy (missing: {', '.join(missing)}); derive it "
                        "from vrex_lib.retrieval.base.PolicyBase, which gives the optional hooks their defaults")
