"""ReSV's mechanism on one study trial: the instruments of :mod:`vrex_lib.resv.mechanism` read at the question step
(docs/DECISIONS.md D261).

    df = longctx.mechanism.probe(model, grid, ("passkey", 1000, 0.25, 0))   # one row per (layer, KV head)

The document is encoded densely (as ``resv@text``), ReSV's HC tables are built as usual, and at the question's
prefill each consulted (layer, KV head) reports, over its query rows: per key digit its cluster size, own score,
centroid score and its cluster's dilution factor (medians over the digits and rows), the exact and ReSV-estimated
share of the always-attended tokens (medians over rows) and the share of rows whose WiCSum stops at one cluster.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ..config import ReSVConfig, RuntimeConfig
from ..resv.mechanism import always_attended_share, token_report
from ..retrieval import make_policy
from ..runtime import StreamingSession
from .grid import StudyGrid
from .run import DOC_PREFIX, STOP_STRINGS, prefill_document, system_tokens
from .task import make_trial


class _Probe:
    """ReSV at the question only (frames dense), reading the instruments at the first text step's select."""

    retrieves_at_frame = False
    name = "resv_probe"

    def __init__(self, cfg: ReSVConfig):
        self.inner = make_policy("resv", cfg=cfg)
        self.cfg = cfg
        self.targets: torch.Tensor | None = None
        self.rows: list[dict] = []
        self._done: set[int] = set()

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.inner.reset(n_layers, n_kv_heads, head_dim)

    def observe(self, layer, new_keys, start, stage, frame_id) -> None:
        self.inner.observe(layer, new_keys, start, stage, frame_id)

    def select(self, layer, query, keys, candidates, stage):
        if stage == "frame" or candidates.numel() == 0:
            return None
        if self.targets is not None and layer not in self._done:
            self._done.add(layer)
            t = self.inner.table(layer)
            for h in range(keys.shape[0]):
                tr = token_report(query, keys, t, h, self.targets)
                share = always_attended_share(query, keys, t, h, candidates, self.cfg.th_r_wics)
                self.rows.append(dict(
                    layer=layer, head=h, cluster_size=float(np.median([r.cluster_size for r in tr])),
                    own_score=float(np.median([r.own_score for r in tr])),
                    centroid_score=float(np.median([r.centroid_score for r in tr])),
                    score_gap=float(np.median([r.own_score - r.centroid_score for r in tr])),
                    dilution=float(np.median([r.dilution for r in tr])),
                    always_exact=float(np.median(share["exact"])),
                    always_estimated=float(np.median(share["estimated"])),
                    rows_one_cluster=float(share["one_cluster"].mean())))
        return self.inner.select(layer, query, keys, candidates, stage)


def probe(model, grid: StudyGrid, cell: tuple[str, int, float, int], cfg: ReSVConfig | None = None) -> pd.DataFrame:
    """The mechanism rows of one trial ``cell`` = (task, length, depth, seed) (module docstring)."""
    task, n, depth, seed = cell
    trial = make_trial(model, task, n - system_tokens(model, grid.system_prompt), depth, seed, prefix=DOC_PREFIX)
    pol = _Probe(cfg or ReSVConfig())
    sess = StreamingSession(model, pol, RuntimeConfig(kv_capacity=grid.kv_capacity, interval_token=False))
    prefill_document(sess, model, trial, grid)
    offset = sess.n_tokens - trial.n_tokens
    pol.targets = torch.tensor([offset + p for p in trial.value_positions], dtype=torch.long)
    sess.ask(trial.question, max_new_tokens=1, stop_strings=STOP_STRINGS)
    df = pd.DataFrame(pol.rows)
    df.insert(0, "trial", f"{task}/{n}/{depth:g}/{seed}")
    return df
