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
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import _io

SCHEMA_VERSION = 2
_READABLE_VERSIONS = (1, 2)  # 2 added ``reused``; a version-1 file loads with reused = -1 (unknown)
_STEP_FIELDS = ("kind", "stage", "frame_id", "time_s", "start", "n_new", "n_cache", "n_sink", "window_start",
                "n_candidates", "wall_s", "argmax")
_CELL_FIELDS = ("selected", "attended", "device_tokens", "host_tokens", "attn_err", "reused")


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

    def retrieval_ratio(self, stage: str | None = None, *, by: str = "all", applied_only: bool = True):
        """Selected / candidates, summed over the steps of ``stage`` (None = all).

        by='all' -> float; 'layer' -> [L]; 'head' -> [L, H]. Only (step, layer) cells where the policy was
        consulted count when ``applied_only`` (the dense layer-0 and candidate-free steps are excluded); NaN
        when nothing counts. Always-attended tokens are not candidates, so they are in neither term.
        """
        m = self.step_mask(stage)
        sel = self.arrays["selected"][m].astype(np.float64)  # [n', L, H]
        cand = np.broadcast_to(self.arrays["n_candidates"][m][:, None, None], sel.shape).astype(np.float64)
        w = np.broadcast_to(self.arrays["applied"][m][:, :, None], sel.shape) if applied_only else np.ones_like(sel)
        w = w & (cand > 0)
        sel, cand = np.where(w, sel, 0.0), np.where(w, cand, 0.0)
        axes = {"all": (0, 1, 2), "layer": (0, 2), "head": (0,)}[by]
        num, den = sel.sum(axes), cand.sum(axes)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = num / den
        return float(r) if by == "all" else r

    def reuse_counts(self, stage: str | None = None, *, by: str = "all"):
        """(Σ reused, Σ selected) over the (step, layer, KV head) cells of ``stage`` (None = all) where the policy
        was consulted and the same stage had an earlier applied step (``reused`` >= 0). by: 'all'|'layer'|'head'."""
        m = self.step_mask(stage)
        sel = self.arrays["selected"][m].astype(np.float64)
        reu = self.arrays["reused"][m].astype(np.float64)
        w = np.broadcast_to(self.arrays["applied"][m][:, :, None], sel.shape) & (reu >= 0)
        axes = {"all": (0, 1, 2), "layer": (0, 2), "head": (0,)}[by]
        return np.where(w, reu, 0.0).sum(axes), np.where(w, sel, 0.0).sum(axes)

    def reuse_fraction(self, stage: str | None = None, *, by: str = "all"):
        """Σ reused / Σ selected (see :meth:`reuse_counts`): the share of a step's selection that a cache of the
        previous selection ("Retrieved KV", Fig. 12) already holds. by='all' -> float; 'layer' -> [L];
        'head' -> [L, H]. NaN when nothing counts (e.g. a schema-1 trace, or a dense layer)."""
        num, den = self.reuse_counts(stage, by=by)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        return float(r) if by == "all" else r

    def to_frame(self):
        """Long table: one row per (step, layer, KV head) with every per-step and per-cell column."""
        import pandas as pd

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
