"""Tables notebook 04 reports from a DRE verification run and the recorded traces (the notebook only plots).

* :func:`kv_bytes_per_token_head` — K+V bytes of one token of one KV head (the KVMU's transfer unit);
* :func:`fig10_memory_bytes` — each memory of Fig. 10 at our block sizes, keyed like ``vrex_lib.paper``;
* :func:`real_row_layers` — the decoder layer of each recorded real WTU row;
* :func:`early_exit_table` / :func:`early_exit_summary` / :func:`early_exit_breakdown` — per real WTU row: share
  of clusters consumed before exit, bucket scans, cycles; per source (video frames / text), per layer and per
  row size;
* :func:`trace_cycles_table` — HCU and WTU cycles (and µs) per recorded (layer, KV head) frame;
* :func:`kvmu_layout_table` — per recorded selection: transactions and link time, cluster-contiguous vs
  token-scattered (``docs/DECISIONS.md D85``);
* :func:`dre_cycle_sweep` — DRE cycles per layer for the paper's workload from the analytic models of
  :mod:`vrex_lib.hw.timing`;
* :func:`wtu_walk_stats` — mean bucket scans and resolve cycles per WTU row, simulated in MyHDL on the recorded
  real rows, for any (Th_r-wics, lanes, buckets) point of the design-space sweep (``vrex_lib.dse``).
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import pandas as pd

from ..config import VRexCoreConfig
from . import fixedpoint as fx
from . import timing
from .hcu import HCUParams
from .kvmu import prefetch_requests, scattered_requests, transfer_time_s
from .vectors import TRACE_FILE, load_traces, trace_key, trace_sources, trace_wtu_rows
from .wtu import WTUParams
from .wtu_driver import simulate_wtu

# The recorded traces come from SmolLM2-135M (vrex_lib/llm_weights.py: 9 query / 3 KV heads, head_dim 64).
TRACE_HEAD_DIM = 64
BF16_BYTES = 2


def kv_bytes_per_token_head(head_dim: int, bytes_per_elem: int = BF16_BYTES) -> int:
    """K and V of one token of one KV head: ``2 · head_dim · bytes_per_elem`` (SmolLM2 in BF16: 256 B)."""
    if head_dim <= 0 or bytes_per_elem <= 0:
        raise ValueError(f"head_dim={head_dim}, bytes_per_elem={bytes_per_elem}: both must be positive")
    return 2 * int(head_dim) * int(bytes_per_elem)


def fig10_memory_bytes(cfg: VRexCoreConfig | None = None, code_bits: int = 32) -> dict[str, int]:
    """Bytes of each DRE memory at our block sizes, keyed ``dre.mem_bytes.<name>`` as in ``vrex_lib.paper``:
    current and key-cache hash-bit memories (codes × code_bits / 8), score and count memories (entries × 2 B)."""
    h, w = HCUParams.from_core(cfg, code_bits), WTUParams.from_core(cfg)
    out = {"hcu_cur_hash": h.cur_depth * code_bits // 8, "hcu_key_hash": h.depth * code_bits // 8,
           "wtu_score": w.n_max * 2, "wtu_count": w.n_max * 2}
    out["total"] = sum(out.values())
    return {f"dre.mem_bytes.{k}": v for k, v in out.items()}


def early_exit_table(rows: Sequence, results: Sequence, sources: Sequence[str], layers: Sequence[int]) \
        -> pd.DataFrame:
    """One line per real WTU row: source, layer, clusters, consumed_frac (= selected / clusters: the share of
    the row consumed before the cumulative sum exceeds Th_wics), selected, scans, cycles, resolve cycles.

    ``rows`` are ``(weights, counts)``; ``results`` the WTU results (``.selected``, ``.scans``, ``.cycles``) in the
    same order, from the MyHDL or the Verilog simulation."""
    if not (len(rows) == len(results) == len(sources) == len(layers)):
        raise ValueError(f"early_exit_table: {len(rows)} rows, {len(results)} results, {len(sources)} sources, "
                         f"{len(layers)} layers: one of each per row needed")
    return pd.DataFrame(dict(
        source=np.asarray(sources), layer=np.asarray(layers, dtype=np.int64),
        clusters=[len(w) for w, _ in rows], consumed_frac=[float(r.selected.mean()) for r in results],
        selected=[int(r.selected.sum()) for r in results], scans=[int(r.scans) for r in results],
        cycles=[int(r.cycles) for r in results],
        resolve=[resolve_cycles(len(w), r.cycles, r.scans) for (w, _), r in zip(rows, results)]))


def resolve_cycles(n_clusters: int, cycles: int, scans: int, cfg: VRexCoreConfig | None = None) -> int:
    """RES_G + RES_L cycles of a WTU row, from its total cycles and scans (``timing.wtu_row_cycles`` inverted)."""
    return int(cycles) - timing.wtu_row_cycles(n_clusters, scans, 0, 0, cfg)


def early_exit_summary(ee: pd.DataFrame) -> pd.DataFrame:
    """Per source: rows, mean clusters, consumed_pct (mean over rows of the per-row share, %),
    consumed_pct_cluster_weighted (Σ selected / Σ clusters, %), mean scans, cycles and resolve cycles."""
    g = ee.groupby("source", sort=False)
    out = g.agg(rows=("clusters", "size"), clusters_mean=("clusters", "mean"), consumed_pct=("consumed_frac", "mean"),
                scans_mean=("scans", "mean"), cycles_mean=("cycles", "mean"), resolve_mean=("resolve", "mean"))
    out["consumed_pct"] *= 100
    out["consumed_pct_cluster_weighted"] = 100 * g.selected.sum() / g.clusters.sum()
    return out


def real_row_layers(tr: dict, sources: Sequence[str]) -> np.ndarray:
    """Decoder layer of each real WTU row, given the rows' source tags in the order verify returns them (the
    rows of each source are a prefix of that source's recorded rows, text first)."""
    src = np.asarray(sources)
    parts = []
    for s in dict.fromkeys(src.tolist()):
        pre = trace_key(s, "")
        parts.append(tr[pre + "hcu_frame_layer"][tr[pre + "wtu_row_frame"][:int((src == s).sum())]])
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def early_exit_breakdown(ee: pd.DataFrame, bins: Sequence[int] = (0, 4, 8, 16, 32, 64, 4096)) \
        -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per source and layer: rows, mean clusters, consumed %; per source and row size bin (clusters): rows and
    mean consumed share) of an :func:`early_exit_table`."""
    by_layer = ee.groupby(["source", "layer"], sort=False).agg(
        rows=("clusters", "size"), clusters_mean=("clusters", "mean"), consumed_pct=("consumed_frac", "mean"))
    by_layer["consumed_pct"] *= 100
    by_clusters = ee.assign(n=pd.cut(ee.clusters, list(bins))).groupby(
        ["source", "n"], sort=False, observed=True).consumed_frac.agg(["size", "mean"])
    return by_layer, by_clusters


def trace_cycles_table(results: dict, tr: dict, cfg: VRexCoreConfig | None = None) -> pd.DataFrame:
    """Per recorded (layer, KV head) frame that both blocks simulated: layer, head, clusters after the frame, HCU
    cycles of the frame, WTU cycles of its rows (summed) and their count, µs of each at the core clock, source.

    ``results``: ``verify.run(..., return_results=True)["_results"]`` (the per-vector results of the real
    vectors, each source a prefix of its recorded vectors)."""
    cfg = cfg or VRexCoreConfig()
    hres, hsrc = results["hcu"]["real"], np.asarray(results["hcu"]["real_source"])
    wres, wsrc = results["wtu"]["real"], np.asarray(results["wtu"]["real_source"])
    tables = []
    for s in ("frame", "text"):
        pre = trace_key(s, "")
        hs = [r for r, t in zip(hres, hsrc) if t == s]
        fr = pd.DataFrame(dict(layer=tr[pre + "hcu_frame_layer"][:len(hs)], head=tr[pre + "hcu_frame_head"][:len(hs)],
                               clusters=[r.n_clusters for r in hs], hcu_cycles=[r.cycles for r in hs]))
        cs = [r.cycles for r, t in zip(wres, wsrc) if t == s]
        wt = pd.DataFrame(dict(frame=tr[pre + "wtu_row_frame"][:len(cs)], wtu_cycles=cs)).groupby("frame") \
            .wtu_cycles.agg(["sum", "count"])
        wt = wt.loc[wt.index.intersection(fr.index)]  # smoke: only the first frames were simulated
        tables.append(fr.loc[wt.index].assign(wtu_cycles=wt["sum"].values, rows=wt["count"].values, source=s))
    out = pd.concat(tables).rename_axis("frame")
    out["us_hcu"] = out.hcu_cycles.map(lambda c: timing.cycles_to_us(c, cfg))
    out["us_wtu"] = out.wtu_cycles.map(lambda c: timing.cycles_to_us(c, cfg))
    return out


def kvmu_layout_table(tr: dict, bytes_per_token: int, bandwidth_bps: float, per_txn_s: float,
                      source: str = "text") -> pd.DataFrame:
    """Per recorded aggregated selection of ``source``: clusters, selected, tokens, transactions and link µs of the
    cluster-contiguous layout (:func:`prefetch_requests`) and of the token-scattered one (:func:`scattered_requests`).
    """
    pre = trace_key(source, "")
    st, sel_all, cnt_all = tr[pre + "kvmu_start"], tr[pre + "kvmu_selected"], tr[pre + "kvmu_counts"]
    ast, asg_all = tr[pre + "kvmu_assign_start"], tr[pre + "kvmu_assign"]
    out = []
    for i, (a, b) in enumerate(zip(st[:-1], st[1:])):
        sel, cnt = sel_all[a:b].astype(bool), cnt_all[a:b]
        asg = asg_all[ast[i]:ast[i + 1]]
        cont, scat = prefetch_requests(sel, cnt, bytes_per_token), scattered_requests(asg, sel, bytes_per_token)
        out.append(dict(clusters=len(cnt), selected=int(sel.sum()), tokens=int(cnt[sel].sum()),
                        txn_contiguous=len(cont), txn_scattered=len(scat),
                        bytes=int(sum(n for _, n in cont)),
                        us_contiguous=transfer_time_s(cont, bandwidth_bps, per_txn_s) * 1e6,
                        us_scattered=transfer_time_s(scat, bandwidth_bps, per_txn_s) * 1e6))
    return pd.DataFrame(out)


def txn_ratio(kvm: pd.DataFrame) -> float:
    """Token-scattered / cluster-contiguous transactions over all selections of a :func:`kvmu_layout_table`."""
    return float(kvm.txn_scattered.sum() / max(1, kvm.txn_contiguous.sum()))


def dre_cycle_sweep(kv_lens: Sequence[int], tokens_per_cluster: float, *, tokens_per_frame: int, n_kv_heads: int,
                    group: int, scans_per_row: float, resolve_per_row: float,
                    cfg: VRexCoreConfig | None = None) -> pd.DataFrame:
    """DRE cycles per layer while one frame is processed at each KV length: per KV head the HCU clusters
    ``tokens_per_frame`` tokens against ``ceil(kv / tokens_per_cluster)`` clusters and the WTU thresholds
    ``tokens_per_frame · group`` rows (query tokens × query heads of the group); heads run one after another."""
    cfg = cfg or VRexCoreConfig()
    out = []
    for n in kv_lens:
        ncl = int(np.ceil(n / tokens_per_cluster))
        h = timing.hcu_cycles(tokens_per_frame, ncl, cfg)
        w = timing.wtu_cycles(tokens_per_frame * group, ncl, scans_per_row, cfg=cfg, resolve=resolve_per_row)
        out.append(dict(kv_len=int(n), clusters=ncl, rows=tokens_per_frame * group, hcu_cycles_per_head=h,
                        wtu_cycles_per_head=w, dre_cycles_per_layer=n_kv_heads * (h + w),
                        dre_us_per_layer=timing.cycles_to_us(n_kv_heads * (h + w), cfg),
                        scans_per_row=scans_per_row, resolve_per_row=resolve_per_row,
                        source="vrex_lib.hw.timing (analytic, measured scans/resolve)"))
    return pd.DataFrame(out)


@lru_cache(maxsize=64)
def _walk_stats(ratio: float, lanes: int, n_buckets: int, n_rows: int) -> tuple[tuple[str, float], ...]:
    tr = load_traces()
    if tr is None:
        raise FileNotFoundError(f"{TRACE_FILE}: recorded DRE rows missing; rebuild with "
                                "`.venv/bin/python data/make_dre_traces.py`")
    rows = []
    for src in trace_sources(tr):
        rows += trace_wtu_rows(tr, max_rows=n_rows, source=src)
    p = WTUParams(n_max=4096, lanes=lanes, n_buckets=n_buckets)
    res, _ = simulate_wtu(rows, fx.quantize_ratio(ratio), p)
    scans = np.array([r.scans for r in res], float)
    resolve = np.array([r.state_cycles.get("RES_G", 0) + r.state_cycles.get("RES_L", 0) for r in res], float)
    return (("scans_per_row", float(scans.mean())), ("resolve_per_row", float(resolve.mean())),
            ("cycles_per_row", float(np.mean([r.cycles for r in res]))),
            ("clusters_per_row", float(np.mean([len(w) for w, _ in rows]))), ("rows", len(rows)))


def wtu_walk_stats(ratio: float, lanes: int, n_buckets: int, n_rows: int) -> dict:
    """Mean bucket scans and resolve cycles per WTU row, and mean clusters per row, from simulating the MyHDL WTU
    on the first ``n_rows`` recorded real rows of each trace source (data/traces/dre_traces.npz).

    Returns ``dict(scans_per_row, resolve_per_row, cycles_per_row, clusters_per_row, rows)``; memoised per
    process on ``(ratio, lanes, n_buckets, n_rows)``."""
    return dict(_walk_stats(round(float(ratio), 6), int(lanes), int(n_buckets), int(n_rows)))
