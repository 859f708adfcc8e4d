"""Shadow measurement: every method's policy sees the same keys and queries of one full-attention stream
(``docs/DECISIONS.md D42``).

:class:`ShadowPolicy` is a :class:`~vrex_lib.retrieval.base.RetrievalPolicy` that the runtime drives like any
other, and a step observer of the same session (:class:`~vrex_lib.runtime.session.StepObserver`: pass it as
``StreamingSession(model, shadow, cfg, observers=[shadow])``), which tells it where each step begins -- and which
KV store it reads -- and ends. ``observe`` is forwarded to every wrapped policy at every step (so their tables, block means and running
statistics grow exactly as in a real run), and while ``active`` its ``select`` asks every wrapped policy for its
selection on the step's real post-RoPE queries and keys, records what it chose, and returns ``None`` -- the stream
itself always attends to everything, so no method steers what the others see.

Per active step, per method, per layer ℓ the method is consulted at (ℓ >= ``dense_layers``, or from the policy's
own ``retrieval_from_layer`` when it sets one, as :mod:`vrex_lib.runtime.attention` consults it in a run of its
own: ReKV's reference mode from layer 0), per KV head g it records (:class:`StepRecord`):
candidates C, offloaded candidates (positions of the host tier, :meth:`KVStore.host_boundary`), selected, selected
offloaded, and the selected offloaded positions the same method also selected at the previous active step of the
same stage selected (in either tier: a token that has just crossed into the host tier was still read from the
device by the previous step, so a "Retrieved KV" region holding the last selection has it -- reuse). ReSV-family policies (those with an HC table per layer, ``.tables``) also give clusters per
head, table tokens, WiCSum exit fraction (``prefix_frac``) and the clusters opened by the step (for the HCU model).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..resv.table import HashClusterTable
from ..retrieval.base import PolicyBase
from ..runtime.attention import StepContext

#: Offload-tier block sizes, in tokens of one (layer, KV head) K or V row, at which a selection's blocks are counted:
#: 512 B, 4 KiB and 16 KiB blocks of the simulated model's 256-B token rows (the SSD granules of Fig. 16's
#: sensitivity; docs/DECISIONS.md D244).
BLOCK_TOKENS: tuple[int, ...] = (2, 16, 64)


def block_counts(offsets: np.ndarray, clusters: np.ndarray | None = None) -> dict:
    """{layout: {tokens per block: (blocks touched, contiguous runs of blocks)}} of one selection of offloaded
    tokens. ``offsets``: sorted positions of the selected offloaded tokens within the offloaded region; 'token': the
    tier in arrival order; 'cluster' (when ``clusters``, the cluster of each selected token, is given): the KVMU's
    cluster-wise reordering, each cluster's offloaded tokens in their own block-aligned extent (one run each)."""
    out: dict = {"token": {}}
    for b in BLOCK_TOKENS:
        blk = np.unique(offsets // b)
        out["token"][b] = (int(blk.size), int(blk.size and 1 + np.count_nonzero(np.diff(blk) > 1)))
    if clusters is not None:
        n = np.bincount(clusters)
        n = n[n > 0]
        out["cluster"] = {b: (int(np.sum(-(-n // b))), int(n.size)) for b in BLOCK_TOKENS}
    return out


@dataclass
class StepRecord:
    """What one method chose at one active step. Arrays are [L, Hkv] (NaN / 0 for layers not consulted)."""

    stage: str
    kind: str
    kv_len: int           # cache length when the step ran (before its own tokens)
    n_new: int
    n_cand: np.ndarray    # [L] candidates (same for every head)
    n_off_cand: np.ndarray  # [L] offloaded candidates
    sel: np.ndarray       # [L, H]
    sel_off: np.ndarray   # [L, H]
    reused_off: np.ndarray  # [L, H]; -1 = no previous step of this stage
    consulted: np.ndarray  # [L] bool
    reused_all: np.ndarray | None = None  # [L, H] selected (any tier) also selected by the previous step; -1 = none
    clusters: np.ndarray | None = None       # [L, H] clusters after the step's observe
    clusters_before: np.ndarray | None = None  # [L, H] clusters before the step's observe
    table_tokens: np.ndarray | None = None   # [L]
    prefix_frac: np.ndarray | None = None    # [L] WiCSum exit fraction
    hc_bytes: np.ndarray | None = None       # [L]
    rows: np.ndarray | None = None           # [L] query rows per KV head
    extra: dict = field(default_factory=dict)


def _is_resv_like(policy: PolicyBase) -> bool:
    """The policy keeps ReSV's HC tables (the ``tables`` hook), whose clusters the records count."""
    return policy.tables is not None


class ShadowPolicy(PolicyBase):
    """Runs ``policies`` ({method name: policy}) in shadow; see the module docstring.

    Register it as the session's policy and observer; toggle :attr:`active`; read and clear :attr:`records`
    ({method: [StepRecord]}).
    """

    name = "shadow"
    retrieves_at_frame = True

    def __init__(self, policies: dict, dense_layers: int):
        self.policies = dict(policies)
        self.dense_layers = int(dense_layers)
        #: First layer each wrapped policy is consulted at, as the runtime would consult it alone
        #: (``retrieval_from_layer`` when it sets one -- ReKV's reference mode: layer 0 -- else ``dense_layers``).
        self.first_layer = {m: _first_layer(p, self.dense_layers) for m, p in self.policies.items()}
        #: The runtime consults the shadow from the earliest of them (runtime/attention.py reads this attribute).
        self.retrieval_from_layer = min(self.first_layer.values(), default=self.dense_layers)
        self.active = False
        self.store = None
        self.records: dict[str, list[StepRecord]] = {m: [] for m in self.policies}
        self._prev: dict = {}
        self._cur: dict[str, StepRecord] | None = None
        self._before: dict = {}

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.L, self.H = n_layers, n_kv_heads
        for p in self.policies.values():
            p.reset(n_layers, n_kv_heads, head_dim)
        self.records = {m: [] for m in self.policies}
        self._prev, self._cur = {}, None

    def forget_previous(self) -> None:
        """Start a new checkpoint: reuse is measured only between consecutive active steps of one checkpoint."""
        self._prev = {}

    # ---- step boundaries (the StepObserver protocol) ---------------------------------------------------------
    def begin_step(self, step: StepContext) -> None:
        self.store = step.store
        if not self.active:
            self._cur = None
            return
        L, H = self.L, self.H
        stage, kind, kv_len = step.stage, step.kind, step.start
        self._cur = {}
        for m, p in self.policies.items():
            rec = StepRecord(stage, kind, int(kv_len), 0, np.zeros(L), np.zeros(L), np.zeros((L, H)),
                             np.zeros((L, H)), np.full((L, H), -1.0), np.zeros(L, bool), np.full((L, H), -1.0))
            if _is_resv_like(p):
                rec.clusters = np.full((L, H), np.nan)
                rec.clusters_before = np.full((L, H), np.nan)
                rec.table_tokens = np.full(L, np.nan)
                rec.prefix_frac = np.full(L, np.nan)
                rec.hc_bytes = np.full(L, np.nan)
                rec.rows = np.full(L, np.nan)
            self._cur[m] = rec

    def end_step(self, step: StepContext, row: dict) -> None:
        if self._cur is not None:
            for m, rec in self._cur.items():
                self.records[m].append(rec)
        self._cur = None

    # ---- the RetrievalPolicy protocol ----------------------------------------------------------------------
    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: str, frame_id: int | None) -> None:
        for m, p in self.policies.items():
            if self._cur is not None and _is_resv_like(p):
                t = p.tables[layer]
                before = np.zeros(self.H) if t is None else _per_head(t.n_clusters, self.H)
                self._cur[m].clusters_before[layer] = before
            p.observe(layer, new_keys, start, stage, frame_id)
            if self._cur is not None:
                self._cur[m].n_new = int(new_keys.shape[1])

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor, stage: str):
        if self._cur is None:
            return None
        s = int(keys.shape[1])
        hb = self.store.host_boundary(s)
        n_cand = int(candidates.numel())
        off_cand = candidates[candidates < hb]
        for m, p in self.policies.items():
            if layer < self.first_layer[m]:
                continue  # a layer this method alone attends densely: not consulted, as in a run of its own
            rec = self._cur[m]
            sel = p.select(layer, query, keys, candidates, stage)
            idx = [candidates] * self.H if sel is None else [i.to(candidates.device) for i in sel.indices]
            rec.consulted[layer] = True
            rec.n_cand[layer] = n_cand
            rec.n_off_cand[layer] = int(off_cand.numel())
            prev = self._prev.get((m, stage, layer))
            for g in range(self.H):
                ix = idx[g]
                o = ix[ix < hb]
                rec.sel[layer, g] = int(ix.numel())
                rec.sel_off[layer, g] = int(o.numel())
                if o.numel():
                    _add_blocks(rec, o, self.store.n_sink, p.tables[layer] if _is_resv_like(p) else None, g)
                if prev is not None:  # offloaded now and selected (in either tier) by the previous step
                    hit = torch.isin(ix, prev[g]) if ix.numel() else torch.zeros(0, dtype=torch.bool)
                    rec.reused_all[layer, g] = int(hit.sum())
                    rec.reused_off[layer, g] = int(hit[ix < hb].sum()) if ix.numel() else 0
            self._prev[(m, stage, layer)] = [ix.clone() for ix in idx]
            if _is_resv_like(p):
                t = p.tables[layer]
                rec.clusters[layer] = _per_head(t.n_clusters, self.H)
                rec.table_tokens[layer] = t.n_tokens
                rec.hc_bytes[layer] = t.nbytes()
                if sel is not None:
                    rec.prefix_frac[layer] = float(sel.stats.get("prefix_frac", np.nan))
                    rec.rows[layer] = float(sel.stats.get("rows", np.nan)) / self.H
        return None


def _add_blocks(rec: StepRecord, offloaded: torch.Tensor, n_sink: int, table, head: int) -> None:
    """Accumulate the blocks touched by one head's selected offloaded tokens into ``rec.extra['blocks']``
    ({(layout, tokens per block): [blocks, runs]}; a ReSV table adds the cluster layout)."""
    pos = np.sort(offloaded.detach().cpu().numpy().astype(np.int64))
    clusters = None
    # ReSV's HC table maps tokens to clusters by position; the bounded ReSV's capped tables (resv_best) keep no
    # positions, so its blocks are counted by token runs (its cluster runs are the cap: perf ReSVBounded).
    if isinstance(table, HashClusterTable) and table.n_tokens:
        tpos = table.positions.numpy()
        i = np.searchsorted(tpos, pos)
        ok = (i < tpos.size) & (tpos[np.minimum(i, tpos.size - 1)] == pos)
        if ok.all():
            clusters = table.assignment.numpy()[table.group_of(head)][i]
    acc = rec.extra.setdefault("blocks", {})
    for layout, by in block_counts(pos - n_sink, clusters).items():
        for b, (blocks, runs) in by.items():
            a = acc.setdefault((layout, b), [0, 0])
            a[0] += blocks
            a[1] += runs


def _first_layer(policy: PolicyBase, dense_layers: int) -> int:
    first = policy.retrieval_from_layer
    return dense_layers if first is None else int(first)


def _per_head(n_clusters: torch.Tensor, n_heads: int) -> np.ndarray:
    """Clusters per KV head from a table's per-group counts (one shared group in concat mode)."""
    v = n_clusters.detach().cpu().numpy().astype(np.float64)
    return np.broadcast_to(v, (n_heads,)).copy() if v.size == 1 else v
