"""The retrieval trace: what one streamed sample leaves for the hardware and performance models
(vrex_lib.hw, vrex_lib.perf).

Per forward step (system prompt, each frame, the question, each generated token) and per (layer, KV head):
tokens in cache, candidates, selected, tokens attended, tokens read from each tier and their bytes, whether the
policy was consulted, the attention-output error when measured, and the policy's own counters (clusters,
rows, scored keys, ...) when it reports them.

Saved as one ``.npz`` (schema-versioned, written atomically) and read back with :func:`load_trace`.

Arrays (n = steps, L = layers, H = KV heads):
    kind [n] str ('system'|'frame'|'question'|'decode'), stage [n] str ('frame'|'text'), frame_id [n] (-1 if
    none), time_s [n] (frame time in the video, NaN if none), start [n], n_new [n], n_cache [n] (after the step),
    n_sink [n], window_start [n], n_candidates [n], wall_s [n] (measured forward time of the step),
    argmax [n] (the step's next-token argmax);
    applied [n, L] bool; selected, attended, device_tokens, host_tokens [n, L, H] int64; attn_err [n, L, H];
    reused [n, L, H] int64 (selected positions the previous applied step of the same stage also selected in that
    (layer, KV head); -1 = no previous step or unknown -- schema-1 traces, which predate it, load with all -1);
    stats: {name: [n, L] or [n, L, H] float64 (NaN where not reported)}.
"""
from __future__ import annotations

import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import _io

SCHEMA_VERSION = 2
_READABLE_VERSIONS = (1, 2)  # 2 added ``reused``; a version-1 file loads with reused = -1 (unknown)
_STEP_FIELDS = ("kind", "stage", "frame_id", "time_s", "start", "n_new", "n_cache", "n_sink", "window_start",
                "n_candidates", "wall_s", "argmax")
_CELL_FIELDS = ("selected", "attended", "device_tokens", "host_tokens", "attn_err", "reused")


_AXES = {"all": None, "layer": (0, 2), "head": (0,), "step": (1, 2)}


def pooled_counts(num, den, mask, axes: tuple[int, ...] | None = None) -> tuple:
    """(Σ num, Σ den) over the cells where ``mask`` holds (arrays broadcast together; ``axes`` None = all),
    as float64: the terms of :func:`pooled_fraction`."""
    num, den, mask = np.broadcast_arrays(np.asarray(num, np.float64), np.asarray(den, np.float64), mask)
    return np.where(mask, num, 0.0).sum(axes), np.where(mask, den, 0.0).sum(axes)


def _fraction(num, den):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def pooled_fraction(num, den, mask, axes: tuple[int, ...] | None = None):
    """The one definition of every count ratio of a stream (selected / candidates, reused / selected, table tokens
    / clusters): Σ num / Σ den over the (step, layer, KV head) cells where ``mask`` holds -- token-weighted, so a
    step with many candidates weighs more than one with few (docs/DECISIONS.md D7). Float for ``axes`` None,
    else an array over the remaining axes; NaN where Σ den is 0 (nothing counts)."""
    r = _fraction(*pooled_counts(num, den, mask, axes))
    return float(r) if axes is None else r


def _nanmean(a) -> float:
    a = np.asarray(a, np.float64)
    return float(np.nanmean(a)) if np.isfinite(a).any() else math.nan


def _tokens_per_cluster(stats: dict, i, n_kv_heads: int) -> float:
    """Mean over layers of table tokens × KV heads / clusters (over all KV heads) at step ``i``."""
    if "clusters" not in stats or "table_tokens" not in stats:
        return math.nan
    cl = np.asarray(stats["clusters"][i], np.float64).reshape(-1)
    tt = np.asarray(stats["table_tokens"][i], np.float64).reshape(-1)
    ok = np.isfinite(cl) & np.isfinite(tt) & (cl > 0)
    return float(np.mean(tt[ok] * n_kv_heads / cl[ok])) if ok.any() else math.nan


def step_stats(row: dict, n_kv_heads: int) -> dict[str, float]:
    """The statistics of one step (a :class:`TraceBuilder` row, e.g. ``session.stats[-1]``): ``selected_frac``
    (Σ selected / Σ candidates over the (layer, KV head) cells where the policy ran, :func:`pooled_fraction`),
    ``tokens_per_cluster`` (ReSV: mean over layers of table tokens per cluster of one KV head) and
    ``wics_exit_frac`` (mean WiCSum walk fraction over layers); NaN where not measured."""
    st = {k: np.asarray(v, np.float64)[None] for k, v in (row.get("stats") or {}).items()}
    applied = np.asarray(row["applied"], bool)[:, None]
    sel = pooled_fraction(row["selected"], row["n_candidates"], applied & (row["n_candidates"] > 0))
    return dict(selected_frac=sel, tokens_per_cluster=_tokens_per_cluster(st, 0, n_kv_heads),
                wics_exit_frac=_nanmean(st["prefix_frac"]) if "prefix_frac" in st else math.nan)


@dataclass
class RetrievalTrace:
    """One sample's trace; see the module docstring for the arrays. ``meta`` holds the model's KV shape
    (n_layers, n_kv_heads, head_dim, bytes_per_elem, paper_bytes_per_elem), the runtime config and the policy."""

    meta: dict
    arrays: dict[str, np.ndarray]
    stats: dict[str, np.ndarray] = field(default_factory=dict)

    # ---- accessors -----------------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name] if name in self.arrays else self.stats[name]

    @property
    def n_steps(self) -> int:
        return int(self.arrays["kind"].shape[0])

    @property
    def bytes_per_token_head(self) -> int:
        return 2 * int(self.meta["head_dim"]) * int(self.meta["bytes_per_elem"])

    def bytes(self, tier: str = "host", paper_dtype: bool = False) -> np.ndarray:
        """Bytes read per (step, layer, KV head) from ``tier`` ('host'|'device'), [n, L, H] int64.
        ``paper_dtype``: as if KV were in the paper model's dtype (BF16) instead of ours."""
        elem = int(self.meta["paper_bytes_per_elem" if paper_dtype else "bytes_per_elem"])
        return self.arrays[f"{tier}_tokens"] * (2 * int(self.meta["head_dim"]) * elem)

    def bytes_as_model(self, tier: str = "host", *, n_layers: int = 32, n_kv_heads: int = 8, head_dim: int = 128,
                       bytes_per_elem: int = 2) -> np.ndarray:
        """Bytes per step [n] if a model of this shape (default: Llama-3-8B in BF16, the paper's LLM) read the
        same *fraction* of each (layer, KV head): the mean tokens per (layer, head) × K+V bytes of all its heads."""
        per_cell = self.arrays[f"{tier}_tokens"].reshape(self.n_steps, -1).mean(1)
        return per_cell * (n_layers * n_kv_heads * 2 * head_dim * bytes_per_elem)

    def step_mask(self, stage: str | None = None, kind: str | None = None) -> np.ndarray:
        m = np.ones(self.n_steps, bool)
        if stage is not None:
            m &= self.arrays["stage"] == stage
        if kind is not None:
            m &= self.arrays["kind"] == kind
        return m

    def retrieval_counts(self, stage: str | None = None, *, by: str = "all", applied_only: bool = True):
        """(Σ selected, Σ candidates) over the (step, layer, KV head) cells of ``stage`` (None = all) where the
        policy was consulted (when ``applied_only``) and there were candidates. by: 'all'|'layer'|'head'|'step'."""
        m = self.step_mask(stage)
        sel = self.arrays["selected"][m]                                       # [n', L, H]
        cand = self.arrays["n_candidates"][m][:, None, None]
        w = (self.arrays["applied"][m][:, :, None] if applied_only else True) & (cand > 0)
        return pooled_counts(sel, cand, w, _AXES[by])

    def retrieval_ratio(self, stage: str | None = None, *, by: str = "all", applied_only: bool = True):
        """Selected / candidates, summed over the steps of ``stage`` (None = all): :func:`pooled_fraction` of
        :meth:`retrieval_counts` (docs/DECISIONS.md D7).

        by='all' -> float; 'layer' -> [L]; 'head' -> [L, H]; 'step' -> [n'] (one ratio per step). Only (step,
        layer) cells where the policy was consulted count when ``applied_only`` (the dense layer-0 and
        candidate-free steps are excluded); NaN when nothing counts. Always-attended tokens are not candidates,
        so they are in neither term.
        """
        r = _fraction(*self.retrieval_counts(stage, by=by, applied_only=applied_only))
        return float(r) if by == "all" else r

    def reuse_counts(self, stage: str | None = None, *, by: str = "all"):
        """(Σ reused, Σ selected) over the (step, layer, KV head) cells of ``stage`` (None = all) where the policy
        was consulted and the same stage had an earlier applied step (``reused`` >= 0). by: 'all'|'layer'|'head'."""
        m = self.step_mask(stage)
        reu = self.arrays["reused"][m]
        w = self.arrays["applied"][m][:, :, None] & (reu >= 0)
        return pooled_counts(reu, self.arrays["selected"][m], w, _AXES[by])

    def reuse_fraction(self, stage: str | None = None, *, by: str = "all"):
        """Σ reused / Σ selected (see :meth:`reuse_counts`): the share of a step's selection that a cache of the
        previous selection ("Retrieved KV", Fig. 12) already holds. by='all' -> float; 'layer' -> [L];
        'head' -> [L, H]. NaN when nothing counts (e.g. a schema-1 trace, or a dense layer)."""
        r = _fraction(*self.reuse_counts(stage, by=by))
        return float(r) if by == "all" else r

    def attention_error(self, stage: str | None = None) -> float:
        """Mean relative error of the attention output against full attention over the (step, layer, KV head) cells
        of ``stage`` (None = all) where it was measured (``RuntimeConfig.measure_attn_error``: cells whose policy
        restricted attention; the others hold NaN); NaN when none was."""
        err = self.arrays["attn_err"][self.step_mask(stage)].astype(np.float64)
        return float(err[np.isfinite(err)].mean()) if np.isfinite(err).any() else math.nan

    def tokens_per_cluster(self, step: int) -> float:
        """ReSV tokens per cluster of one step (:func:`step_stats`); NaN for a policy without an HC table."""
        return _tokens_per_cluster(self.stats, step, int(self.meta["n_kv_heads"]))

    def wics_exit_fraction(self, stage: str | None = None) -> float:
        """Mean WiCSum walk fraction (``prefix_frac``: share of a row walked before the early exit) over the
        (step, layer) cells of ``stage`` where ReSV reported it; NaN when none did."""
        if "prefix_frac" not in self.stats:
            return math.nan
        return _nanmean(self.stats["prefix_frac"][self.step_mask(stage)])

    def to_frame(self) -> pd.DataFrame:
        """Long table: one row per (step, layer, KV head) with every per-step and per-cell column."""
        n, L, H = self.arrays["selected"].shape
        st, la, he = np.meshgrid(np.arange(n), np.arange(L), np.arange(H), indexing="ij")
        d = {"step": st.ravel(), "layer": la.ravel(), "head": he.ravel()}
        for f in _STEP_FIELDS:
            d[f] = self.arrays[f][st.ravel()]
        d["applied"] = self.arrays["applied"][st.ravel(), la.ravel()]
        for f in _CELL_FIELDS:
            d[f] = self.arrays[f].ravel()
        d["host_bytes"] = self.bytes("host").ravel()
        d["device_bytes"] = self.bytes("device").ravel()
        for k, v in self.stats.items():
            d[f"stat_{k}"] = v[st.ravel(), la.ravel()] if v.ndim == 2 else v.ravel()
        return pd.DataFrame(d)

    # ---- I/O ------------------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write ``path`` (.npz) atomically: temp file in the same folder + rename."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {f"a_{k}": v for k, v in self.arrays.items()}
        payload.update({f"s_{k}": v for k, v in self.stats.items()})
        payload["meta_json"] = np.array(json.dumps({"schema_version": SCHEMA_VERSION, **self.meta}, default=str))
        buf = io.BytesIO()
        np.savez_compressed(buf, **payload)
        _io.write_bytes(path, buf.getvalue())
        return path


def load_trace(path: str | os.PathLike) -> RetrievalTrace:
    """Read a trace written by :meth:`RetrievalTrace.save`; a wrong schema version is a clear error."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no retrieval trace here; run the runtime/eval with traces enabled first")
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta_json"]))
        ver = meta.get("schema_version")
        if ver not in _READABLE_VERSIONS:
            raise ValueError(f"{path}: trace schema version {ver}, this code reads {_READABLE_VERSIONS}; "
                             "regenerate it")
        arrays = {k[2:]: z[k] for k in z.files if k.startswith("a_")}
        stats = {k[2:]: z[k] for k in z.files if k.startswith("s_")}
    if "reused" not in arrays:  # schema 1: reuse was not recorded
        arrays["reused"] = np.full(arrays["selected"].shape, -1, np.int64)
    return RetrievalTrace(meta, arrays, stats)


class TraceBuilder:
    """Accumulates :class:`~vrex_lib.runtime.attention.StepContext` records into a :class:`RetrievalTrace`."""

    def __init__(self, meta: dict, n_layers: int, n_kv_heads: int):
        self.meta, self.L, self.H = meta, n_layers, n_kv_heads
        self.rows: list[dict] = []

    def add(self, step, ledger, n_cache: int, time_s: float | None, wall_s: float, argmax: int) -> None:
        self.rows.append(dict(
            kind=step.kind, stage=step.stage, frame_id=-1 if step.frame_id is None else int(step.frame_id),
            time_s=np.nan if time_s is None else float(time_s), start=step.start, n_new=step.n_new,
            n_cache=n_cache, n_sink=step.n_sink, window_start=step.window_start, n_candidates=step.n_candidates,
            wall_s=float(wall_s), argmax=int(argmax),
            applied=step.applied, selected=step.selected, attended=step.attended,
            device_tokens=ledger.device_tokens, host_tokens=ledger.host_tokens, attn_err=step.attn_err,
            reused=step.reused,
            stats=step.stats))

    def build(self) -> RetrievalTrace:
        n = len(self.rows)
        arrays: dict[str, np.ndarray] = {}
        for f in _STEP_FIELDS:
            vals = [r[f] for r in self.rows]
            if f in ("kind", "stage"):
                arrays[f] = np.array(vals, dtype="U8") if n else np.zeros(0, "U8")
            elif f in ("time_s", "wall_s"):
                arrays[f] = np.array(vals, np.float64)
            else:
                arrays[f] = np.array(vals, np.int64)
        arrays["applied"] = np.stack([r["applied"] for r in self.rows]) if n else np.zeros((0, self.L), bool)
        for f in _CELL_FIELDS:
            dt = np.float32 if f == "attn_err" else np.int64
            arrays[f] = np.stack([r[f] for r in self.rows]).astype(dt) if n else np.zeros((0, self.L, self.H), dt)
        stats: dict[str, np.ndarray] = {}
        names = sorted({k for r in self.rows for k in r["stats"]})
        for k in names:
            shape = next(r["stats"][k].shape for r in self.rows if k in r["stats"])
            arr = np.full((n, *shape), np.nan)
            for i, r in enumerate(self.rows):
                v = r["stats"].get(k)
                if v is not None and v.shape == shape:
                    arr[i] = v
            stats[k] = arr
        return RetrievalTrace(dict(self.meta), arrays, stats)
