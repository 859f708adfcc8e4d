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
from ..retrieval import PolicyBase, make_policy
from ..runtime import StreamingSession
from .grid import StudyGrid
from .run import DOC_PREFIX, STOP_STRINGS, prefill_document, system_tokens
from .task import make_trial


class Probe(PolicyBase):
    """ReSV at the question only (frames dense), reading the instruments at the first text step's select. In a
    study trial it is one more member of the shared dense prefill (:func:`~vrex_lib.longctx.run.run_trial`), whose
    fork asks the question for one step (:meth:`read`)."""

    retrieves_at_frame = False
    name = "resv_probe"

    def __init__(self, cfg: ReSVConfig, inner=None):
        # ``inner``: a ReSV policy another member of the same prefill already feeds (its tables are shared, not
        # built twice); the probe then observes only from :meth:`read` on, in its own fork.
        self.inner = make_policy("resv", cfg=cfg) if inner is None else inner
        self.observing = inner is None
        self.cfg = cfg
        self.targets: torch.Tensor | None = None
        self.rows: list[dict] = []
        self._done: set[int] = set()

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        if self.observing:
            self.inner.reset(n_layers, n_kv_heads, head_dim)

    def observe(self, layer, new_keys, start, stage, frame_id) -> None:
        if self.observing:
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

    def read(self, sess, trial) -> list[dict]:
        """Ask ``trial``'s question in ``sess`` (its document prefilled with this probe observing) for one step and
        return the mechanism rows (one per consulted (layer, KV head))."""
        offset = sess.n_tokens - trial.n_tokens
        self.targets = torch.tensor([offset + p for p in trial.value_positions], dtype=torch.long)
        self.rows, self._done, self.observing = [], set(), True
        sess.ask(trial.question, max_new_tokens=1, stop_strings=STOP_STRINGS)
        return self.rows


def probe(model, grid: StudyGrid, cell: tuple[str, int, float, int], cfg: ReSVConfig | None = None) -> pd.DataFrame:
    """The mechanism rows of one trial ``cell`` = (task, length, depth, seed) (module docstring)."""
    task, n, depth, seed = cell
    trial = make_trial(model, task, n - system_tokens(model, grid.system_prompt), depth, seed, prefix=DOC_PREFIX)
    pol = Probe(cfg or ReSVConfig())
    sess = StreamingSession(model, pol, RuntimeConfig(kv_capacity=grid.kv_capacity, interval_token=False))
    prefill_document(sess, model, trial, grid)
    df = pd.DataFrame(pol.read(sess, trial))
    df.insert(0, "trial", f"{task}/{n}/{depth:g}/{seed}")
    return df


#: The instruments summarised over trials (:func:`over_trials`).
QUANTITIES: tuple[str, ...] = ("dilution", "cluster_size", "always_exact", "always_estimated", "rows_one_cluster",
                               "score_gap")


def over_trials(records: list[dict]) -> pd.DataFrame:
    """ReSV's mechanism over every trial that carries it (study records with ``mechanism`` rows, D483): per
    quantity and context length, the trials, the mean over trials of each trial's median over its consulted
    (layer, KV head) cells, and a 95 % interval of that mean (normal approximation over trials: mean ± 1.96·s/√n),
    with the quartiles over trials."""
    per = []
    for r in records:
        if r.get("mechanism"):
            m = pd.DataFrame(r["mechanism"])
            per.append(dict(context_tokens=r.get("context_tokens"), task=r.get("task"),
                            **{q: float(np.nanmedian(m[q])) for q in QUANTITIES if q in m}))
    if not per:
        return pd.DataFrame()
    t = pd.DataFrame(per)
    rows = []
    for n, g in t.groupby("context_tokens"):
        for q in QUANTITIES:
            v = g[q].dropna().to_numpy() if q in g else np.zeros(0)
            if not v.size:
                continue
            half = 1.96 * v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
            rows.append(dict(quantity=q, context_tokens=int(n), trials=int(v.size), mean=float(v.mean()),
                             lo=float(v.mean() - half), hi=float(v.mean() + half), q25=float(np.quantile(v, 0.25)),
                             median=float(np.median(v)), q75=float(np.quantile(v, 0.75))))
    return pd.DataFrame(rows)
