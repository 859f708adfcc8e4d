"""Measurements on ReSV used by notebook 02 and ``benchmarks/bench_resv.py``: Fig. 7(b) correlation, HC-table
statistics, retrieval ratio and attention-output error versus full attention, a synthetic key stream, and the
one-layer selection view of notebook 08 (:func:`selection_view`).

Shapes: q [Hq, T, D], k/v [Hkv, T, D] (post-RoPE, one sequence, as returned by ``vrex_lib.keys.capture_qkv``).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd
import torch

from ..config import REPO_ROOT, ReSVConfig
from .hashing import hamming, hash_bits, layer_seed, make_hyperplanes
from .select import select_tokens
from .table import HashClusterTable


# ------------------------------------------------------------------------------------------- Fig. 7(b)
def hashed_vectors(keys: torch.Tensor, hash_mode: str) -> list[torch.Tensor]:
    """The vectors ReSV hashes: one ``[T, D]`` per KV head ('per_head') or the concatenated ``[T, Hkv·D]``."""
    if hash_mode == "per_head":
        return [keys[h].float() for h in range(keys.shape[0])]
    if hash_mode == "concat":
        return [keys.permute(1, 0, 2).reshape(keys.shape[1], -1).float()]
    raise ValueError(f"hash_mode={hash_mode!r}: use 'per_head' or 'concat'")


def cosine_hamming_pairs(keys: torch.Tensor, n_hp: int, hash_mode: str = "per_head", seed: int = 0,
                         layer: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarity and hash-bit Hamming distance of every key pair i < j (pooled over heads).

    ``keys [Hkv, T, D]``; the hyperplanes are the layer's (``layer_seed(seed, layer)``), as in the HC table.
    """
    cos_all, ham_all = [], []
    for x in hashed_vectors(keys, hash_mode):
        T = x.shape[0]
        H = make_hyperplanes(n_hp, x.shape[1], layer_seed(seed, layer))
        codes = hash_bits(x, H)
        xn = torch.nn.functional.normalize(x.double(), dim=1)
        iu = torch.triu_indices(T, T, 1)
        cos_all.append((xn @ xn.T)[iu[0], iu[1]].numpy())
        ham_all.append(hamming(codes[:, None], codes[None, :], n_hp)[iu[0], iu[1]].numpy())
    return np.concatenate(cos_all), np.concatenate(ham_all).astype(np.float64)


def cosine_hamming_correlation(keys: torch.Tensor, n_hp: int, hash_mode: str = "per_head", seed: int = 0,
                               layer: int = 0) -> float:
    """|Pearson r| between key cosine similarity and hash Hamming distance (paper Fig. 7(b): 0.8).

    The raw r is negative (similar keys -> few differing bits); the paper reports the magnitude.
    """
    c, h = cosine_hamming_pairs(keys, n_hp, hash_mode, seed, layer)
    return float(abs(np.corrcoef(c, h)[0, 1]))


# ------------------------------------------------------------------------------------------ HC table
def stream_table(keys: torch.Tensor, cfg: ReSVConfig, layer: int = 0, frame_len: int = 10, start: int = 0,
                 stop: int | None = None, table: HashClusterTable | None = None) -> HashClusterTable:
    """Add tokens ``start..stop`` of ``keys [Hkv, T, D]`` to an HC table, ``frame_len`` tokens per frame."""
    stop = keys.shape[1] if stop is None else stop
    table = table or HashClusterTable(keys.shape[0], keys.shape[2], cfg, layer)
    for a in range(start, stop, frame_len):
        b = min(a + frame_len, stop)
        table.add_frame(keys[:, a:b], torch.arange(a, b))
    return table


def table_stats(table: HashClusterTable) -> dict:
    """Clusters, mean tokens per cluster, HC-table bytes and their share of the full KV cache (BF16)."""
    return dict(tokens=table.n_tokens, clusters=int(table.n_clusters.sum()),
                tokens_per_cluster=table.tokens_per_cluster(), hc_bytes=table.nbytes(), kv_bytes=table.kv_nbytes(),
                hc_pct_of_kv=100.0 * table.overhead())


# ------------------------------------------------------------------- attention error vs full attention
def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
                     scaling: float | None = None) -> torch.Tensor:
    """Softmax attention of ``q [Hq, Nq, D]`` over ``k, v [Hkv, S, D]`` restricted to ``allowed [Hq, Nq, S]``."""
    Hq, Hkv = q.shape[0], k.shape[0]
    grp = Hq // Hkv
    scaling = 1.0 / math.sqrt(q.shape[-1]) if scaling is None else scaling
    kk = k.double().repeat_interleave(grp, 0)
    vv = v.double().repeat_interleave(grp, 0)
    s = (q.double() @ kk.transpose(1, 2)) * scaling
    s = s.masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, -1) @ vv


def evaluate_selection(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cfg: ReSVConfig, layer: int = 0,
                       frame_len: int = 10, n_sink: int = 4, recent_frames: int = 1,
                       eval_frames: Iterable[int] | None = None, ratio: float | None = None,
                       quant_bits: int | None = None) -> list[dict]:
    """Stream a sequence through ReSV frame by frame and, at each frame in ``eval_frames``, compare the
    attention output of that frame's queries over (always-attended ∪ ReSV-selected) tokens with full causal
    attention.

    Token layout: ``[0, n_sink)`` sinks (always attended, never clustered), then frames of ``frame_len``
    tokens. The current frame and the ``recent_frames - 1`` before it are always attended (docs/DECISIONS.md D5);
    everything older is a candidate. Returns one dict per evaluated frame: ratio (selected / candidates,
    mean over heads), rel_err (‖o − o_full‖_F / ‖o_full‖_F over all heads and rows), clusters, prefix_frac.
    """
    Hq, T, D = q.shape
    starts = list(range(n_sink, T, frame_len))
    if eval_frames is None:
        eval_frames = [len(starts) - 1]
    eval_frames = sorted(set(f % len(starts) for f in eval_frames))
    table = HashClusterTable(k.shape[0], D, cfg, layer)
    pos = torch.arange(T)
    out = []
    for f, a in enumerate(starts):
        b = min(a + frame_len, T)
        table.add_frame(k[:, a:b], pos[a:b])
        if f not in eval_frames:
            continue
        recent0 = max(n_sink, a - (recent_frames - 1) * frame_len)
        cands = pos[n_sink:recent0]
        causal = pos[None, :b] <= pos[a:b, None]  # [Nq, b]
        full = masked_attention(q[:, a:b], k[:, :b], v[:, :b], causal.expand(Hq, -1, -1))
        if cands.numel() == 0:
            continue
        sel = select_tokens(q[:, a:b], table, ratio, cfg, candidates=cands, quant_bits=quant_bits)
        keep = torch.zeros(len(sel.indices), b, dtype=torch.bool)
        keep[:, :n_sink] = True
        keep[:, recent0:b] = True
        for i, idx in enumerate(sel.indices):
            keep[i, idx] = True
        if len(sel.indices) != Hq:  # per KV head (or per layer) -> every query head of the group
            keep = keep.repeat_interleave(Hq // len(sel.indices), 0)
        approx = masked_attention(q[:, a:b], k[:, :b], v[:, :b], keep[:, None, :] & causal[None])
        err = float((approx - full).norm() / full.norm())
        # Oracle at the same budget: per head, the candidates with the most true attention mass.
        oracle = _oracle_error(q[:, a:b], k[:, :b], v[:, :b], causal, cands, [len(i) for i in sel.indices],
                               n_sink, recent0, full)
        out.append(dict(frame=f, tokens=b, candidates=int(cands.numel()), ratio=sel.ratio(), rel_err=err,
                        oracle_rel_err=oracle,
                        clusters=float(np.mean(sel.stats["clusters"])), prefix_frac=sel.stats["prefix_frac"],
                        sum_nonpos_rows=sel.stats["sum_nonpos_rows"]))
    return out


def _oracle_error(q, k, v, causal, cands, n_keep, n_sink, recent0, full) -> float:
    Hq, Hkv, b = q.shape[0], k.shape[0], k.shape[1]
    heads = len(n_keep)
    grp = Hq // heads
    kk = k.double().repeat_interleave(Hq // Hkv, 0)
    p = torch.softmax((q.double() @ kk.transpose(1, 2) / math.sqrt(q.shape[-1])).masked_fill(~causal, float("-inf")),
                      -1)  # [Hq, Nq, b]
    mass = p.sum(1).view(heads, grp, b).sum(1)[:, cands]  # attention mass of each candidate per selection head
    keep = torch.zeros(heads, b, dtype=torch.bool)
    keep[:, :n_sink] = True
    keep[:, recent0:b] = True
    for h, n in enumerate(n_keep):
        keep[h, cands[mass[h].topk(n).indices]] = True
    keep = keep.repeat_interleave(grp, 0)
    approx = masked_attention(q, k, v, keep[:, None, :] & causal[None])
    return float((approx - full).norm() / full.norm())


def summarize(rows: list[dict]) -> dict:
    """Mean of every numeric field over evaluated frames."""
    if not rows:
        return {}
    return {key: float(np.mean([r[key] for r in rows])) for key in rows[0] if key != "frame"}


# ---------------------------------------------------------------------------------- synthetic stream
def drifting_keys(n_frames: int | None, n_kv_heads: int = 8, tokens_per_frame: int = 10, head_dim: int = 128,
                  rho: float = 0.995, noise: float = 0.4, bias: float = 1.0, seed: int = 0) -> Iterator[torch.Tensor]:
    """A synthetic stream of frame keys ``[Hkv, N, D]`` with realistic temporal correlation (benchmark input).

    Model: each (KV head, token slot) -- a slot is one of the frame's N spatial/CLS tokens -- follows a slowly
    drifting AR(1) process m_f = ρ·m_{f−1} + √(1−ρ²)·ξ_f (unit variance per dimension), so the same slot of
    adjacent frames is highly similar and drifts apart over ~1/(1−ρ) frames (scene change); on top sit a fixed
    per-head mean direction ``bias`` (real keys have one, which is why their cosine similarities are high) and
    i.i.d. per-token noise of std ``noise``. Not modelled: RoPE rotation and content-driven scene cuts.
    ``n_frames=None`` streams forever.
    """
    g = torch.Generator().manual_seed(seed)
    mu = torch.randn(n_kv_heads, 1, head_dim, generator=g) * bias
    m = torch.randn(n_kv_heads, tokens_per_frame, head_dim, generator=g)
    c = math.sqrt(1 - rho * rho)
    f = 0
    while n_frames is None or f < n_frames:
        f += 1
        m = rho * m + c * torch.randn(m.shape, generator=g)
        yield mu + m + noise * torch.randn(m.shape, generator=g)


# ------------------------------------------------------------------------------------------- inputs
def text_path():
    """The shipped public-domain text (``data/text/alice_ch1.txt``)."""
    return REPO_ROOT / "data" / "text" / "alice_ch1.txt"


def load_text_ids(tokenizer, max_tokens: int | None = None) -> torch.Tensor:
    """Token ids ``[T]`` of the shipped text (no special tokens), truncated to ``max_tokens``."""
    p = text_path()
    if not p.exists():
        raise FileNotFoundError(f"{p} is missing: it ships with the repository (data/text/); restore it with git.")
    ids = tokenizer.encode(p.read_text(encoding="utf-8"), add_special_tokens=False)
    ids = torch.as_tensor(ids[:max_tokens] if max_tokens else ids, dtype=torch.long)
    return ids


# ------------------------------------------------------------------------------------------- tables
CFG_FIELDS = ("n_hp", "th_hp", "th_r_wics", "score", "granularity", "hash_mode", "code_rule", "seed")

def correlation_table(keys_by_layer: dict[int, torch.Tensor], n_hps=(32, 64), modes=("per_head", "concat"),
                      seed: int = 0, source: str = "") -> pd.DataFrame:
    """Fig. 7(b) correlation for every layer × N_hp × hash mode: columns source, layer, n_hp, hash_mode, corr, pairs."""
    recs = []
    for layer, k in keys_by_layer.items():
        for n_hp in n_hps:
            for mode in modes:
                c, h = cosine_hamming_pairs(k, n_hp, mode, seed, layer)
                recs.append(dict(source=source, layer=layer, n_hp=n_hp, hash_mode=mode,
                                 corr=float(abs(np.corrcoef(c, h)[0, 1])), pairs=len(c), seed=seed))
    return pd.DataFrame(recs)


def sensitivity(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, base: ReSVConfig, grid: dict[str, list],
                layer: int = 0, source: str = "", **eval_kw) -> pd.DataFrame:
    """Vary one ReSVConfig field at a time (``grid``: field -> values) around ``base`` and evaluate each.

    Columns: source, layer, param, value, default (bool), ratio, rel_err, oracle_rel_err, clusters,
    tokens_per_cluster, hc_pct_of_kv, prefix_frac, sum_nonpos_rows, and cfg_<field> for every ReSVConfig field.
    """
    recs = []
    for param, values in grid.items():
        for val in values:
            cfg = base.replace(**{param: val})
            rows = evaluate_selection(q, k, v, cfg, layer, **eval_kw)
            st = table_stats(stream_table(k, cfg, layer, eval_kw.get("frame_len", 10),
                                          start=eval_kw.get("n_sink", 4)))
            recs.append(dict(source=source, layer=layer, param=param, value=str(val),
                             default=getattr(base, param) == val, **summarize(rows),
                             tokens_per_cluster=st["tokens_per_cluster"], hc_pct_of_kv=st["hc_pct_of_kv"],
                             **{f"cfg_{f}": getattr(cfg, f) for f in CFG_FIELDS}))
    df = pd.DataFrame(recs)
    return df.drop(columns=[c for c in ("tokens", "candidates") if c in df.columns])


# ------------------------------------------------------------------------------------------- selection view
def selection_view(cap: dict, th_hp: int, ratio: float, n_hp: int = ReSVConfig().n_hp) -> dict:
    """ReSV at (N_hp, Th_hp, Th_r-wics) on one captured layer (``cap``: :func:`vrex_lib.keys.capture_stream_qkv`),
    for the last frame's queries: selected mask [Hkv, T] (True = selected candidate), selected fraction, tokens
    per cluster, WiCSum walk fraction and the relative attention-output error vs full attention."""
    q, k, v, n_sink, fl = cap["q"], cap["k"], cap["v"], cap["n_sink"], cap["frame_len"]
    Hq, T, D = q.shape
    cfg = ReSVConfig(n_hp=int(n_hp), th_hp=int(th_hp), th_r_wics=float(ratio))
    table = HashClusterTable(k.shape[0], D, cfg, cap["layer"])
    pos = torch.arange(T)
    table.add_frame(k[:, :n_sink], pos[:n_sink])
    starts = list(range(n_sink, T, fl))
    for a in starts:
        table.add_frame(k[:, a:min(a + fl, T)], pos[a:min(a + fl, T)])
    a = starts[-1]
    cands = pos[n_sink:a]
    sel = select_tokens(q[:, a:T], table, cfg.th_r_wics, cfg, candidates=cands)
    mask = torch.zeros(len(sel.indices), T, dtype=torch.bool)
    for i, idx in enumerate(sel.indices):
        mask[i, idx] = True
    keep = mask.clone()
    keep[:, :n_sink] = True
    keep[:, a:] = True
    causal = pos[None, :T] <= pos[a:T, None]
    full = masked_attention(q[:, a:T], k, v, causal.expand(Hq, -1, -1))
    kk = keep.repeat_interleave(Hq // keep.shape[0], 0)
    approx = masked_attention(q[:, a:T], k, v, kk[:, None, :] & causal[None])
    n_cl = float(np.mean(sel.stats["clusters"]))
    return dict(mask=mask.numpy(), selected_frac=float(sel.ratio()), tokens_per_cluster=table.n_tokens / max(1.0, n_cl),
                rel_err=float((approx - full).norm() / full.norm()), n_candidates=int(cands.numel()),
                wics_exit_frac=float(sel.stats["prefix_frac"]), n_sink=n_sink, frame_start=a)
