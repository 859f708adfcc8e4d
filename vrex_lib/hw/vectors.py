"""Input vectors of the DRE blocks: the real traces recorded from SmolLM2 keys (``data/traces/dre_traces.npz``,
made by ``data/make_dre_traces.py``) and seeded random vectors that cover the edge cases.

A vector is what one check counts: an HCU *frame* (``(old codes or None, new codes)``, counted per token), a WTU
*row* (``(weights, counts)``, 16-bit integers) or a KVMU *selection* (``(selected, counts)``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import REPO_ROOT
from . import fixedpoint as fx
from .hcu import HCUParams

TRACE_FILE = REPO_ROOT / "data" / "traces" / "dre_traces.npz"
SOURCES = ("text", "frame")


# ------------------------------------------------------------------------------------------- random
def random_hcu_frames(n_tokens: int, rng: np.random.Generator, p: HCUParams, th: int = 7) -> list:
    """Frames of clustered random codes: centres plus a few flipped bits, so joins, ties and opens all occur."""
    frames, left = [], n_tokens
    while left > 0:
        n_old = int(rng.integers(0, min(96, p.depth - p.cur_depth)))
        n_new = int(min(left, rng.integers(1, p.cur_depth + 1)))
        centres = rng.integers(0, 1 << p.code_bits, size=max(1, int(rng.integers(1, 8))), dtype=np.uint64)
        old = np.array([int(centres[rng.integers(len(centres))]) ^ _flips(rng, p.code_bits, 2 * th)
                        for _ in range(n_old)], dtype=np.int64)
        new = np.array([int(centres[rng.integers(len(centres))]) ^ _flips(rng, p.code_bits, 2 * th)
                        for _ in range(n_new)], dtype=np.int64)
        frames.append((old, new))
        left -= n_new
    return frames


def _flips(rng: np.random.Generator, bits: int, most: int) -> int:
    k = int(rng.integers(0, most + 1))
    return int(sum(1 << int(b) for b in rng.choice(bits, size=min(k, bits), replace=False)))


def random_kvmu_selections(n: int, rng: np.random.Generator) -> list:
    """KVMU selections of 1..63 clusters: random selection density, counts 0..5 (empty clusters included)."""
    sels = []
    for _ in range(n):
        C = int(rng.integers(1, 64))
        sels.append((rng.random(C) < rng.random(), rng.integers(0, 6, C)))
    return sels


def _random_weights(kind: int, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == 0:
        return rng.integers(0, fx.W_MAX + 1, n)
    if kind == 1:
        return np.full(n, int(rng.integers(0, fx.W_MAX + 1)))
    if kind == 2:
        return rng.integers(0, 4, n) * int(rng.integers(1, 20000))
    if kind == 3:
        return fx.quantize_weights(np.exp(-rng.exponential(rng.uniform(0.5, 6), n)))
    if kind == 4:
        return rng.integers(fx.W_MAX - 16, fx.W_MAX + 1, n)
    return fx.quantize_weights(np.exp(-np.abs(rng.standard_normal(n)) * 4))


def random_wtu_rows(n_rows: int, rng: np.random.Generator, n_max: int) -> list:
    """Rows covering the edge cases: uniform, all equal, few levels (ties), softmax-like skew, near-max
    values (accumulator range), zero counts, single cluster."""
    rows = []
    for i in range(n_rows):
        n = 1 if i % 17 == 0 else int(rng.integers(1, min(n_max, 300) + 1))
        w = _random_weights(i % 6, n, rng)
        c = rng.integers(0, 64, n)
        if i % 5 == 0:
            c[rng.random(n) < 0.5] = 0
        if i % 11 == 0:
            c = np.full(n, fx.C_MAX)  # accumulator range
        if i % 13 == 0:
            c = np.zeros(n, dtype=np.int64)  # Sum = 0 -> select all
        rows.append((np.asarray(w, dtype=np.int64), np.asarray(c, dtype=np.int64)))
    return rows


# -------------------------------------------------------------------------------------------- traces
def load_traces(path: Path = TRACE_FILE) -> dict | None:
    """Real traces recorded from SmolLM2 keys (``data/make_dre_traces.py``); None when absent."""
    if not Path(path).exists():
        return None
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def trace_sources(tr: dict) -> list[str]:
    """Sources recorded in the trace: ``"text"`` (unprefixed keys) and, in newer files, ``"frame"`` (video frame
    tokens of the default-profile streaming model, keys prefixed ``frame_``)."""
    return [str(s) for s in tr["meta_sources"]] if "meta_sources" in tr else ["text"]


def trace_key(source: str, name: str) -> str:
    """The array name of ``name`` for ``source`` (text: unprefixed; frame: ``frame_`` prefix)."""
    if source not in SOURCES:
        raise ValueError(f"trace source {source!r}: choose 'text' or 'frame'")
    return name if source == "text" else f"frame_{name}"


def _key(tr: dict, source: str, name: str) -> np.ndarray:
    key = trace_key(source, name)
    if key not in tr:
        raise KeyError(f"{TRACE_FILE} has no {key!r}: regenerate it with `.venv/bin/python data/make_dre_traces.py`")
    return tr[key]


def trace_hcu_frames(tr: dict, max_frames: int | None = None, source: str = "text") -> list:
    """HCU frames of the trace: ``(old codes or None, new codes)`` per recorded (layer, head) frame sequence."""
    frames = []
    starts, firsts, codes = (_key(tr, source, k) for k in ("hcu_frame_start", "hcu_frame_first", "hcu_codes"))
    for i in range(len(starts) - 1 if max_frames is None else min(max_frames, len(starts) - 1)):
        a, b = int(starts[i]), int(starts[i + 1])
        frames.append((np.zeros(0, dtype=np.int64) if bool(firsts[i]) else None, codes[a:b]))
    return frames


def trace_wtu_rows(tr: dict, max_rows: int | None = None, source: str = "text") -> list:
    """WTU rows of the trace: ``(weights, counts)`` as 16-bit integers."""
    off, w, c = (_key(tr, source, k) for k in ("wtu_row_start", "wtu_weights", "wtu_counts"))
    n = len(off) - 1 if max_rows is None else min(max_rows, len(off) - 1)
    return [(w[off[i]:off[i + 1]], c[off[i]:off[i + 1]]) for i in range(n)]


def trace_kvmu_selections(tr: dict, source: str = "text") -> list:
    """KVMU inputs of the trace: ``(selected, counts)`` per recorded aggregated selection."""
    st, sel, cnt = (_key(tr, source, k) for k in ("kvmu_start", "kvmu_selected", "kvmu_counts"))
    return [(sel[a:b], cnt[a:b]) for a, b in zip(st[:-1], st[1:])]


def real_vectors(tr: dict | None, fn, cap: int | None) -> tuple[list, list]:
    """Real vectors ``fn(tr, source=...)`` of every recorded source (the first ``cap`` of each; None = all) and
    their source tags, text first."""
    if tr is None:
        return [], []
    vecs, tags = [], []
    for src in trace_sources(tr):
        v = fn(tr, source=src)[:cap]
        vecs += v
        tags += [src] * len(v)
    return vecs, tags
