"""ReSV KV prediction vs full-key scoring at Llama-3-8B layer shapes, in one run (target: >= 50x at 40K).

One decoder layer of Llama-3-8B: 8 KV heads x 128, 32 query heads, 10 new tokens per frame (VideoLLM-online).
A KV cache of L tokens (1K..40K) is built by streaming frames of synthetic keys with temporal correlation
(``vrex_lib.resv.analysis.drifting_keys``: per token slot a slowly drifting AR(1) process, rho=0.995, plus a
per-head mean direction and per-token noise std 0.4; RoPE not modelled) through a ``HashClusterTable``. At each L we
time, for the next frame:

  ReSV  = hash the frame's 10 keys + cluster them into the HC table (``add_frame``)
          + Q·Key_cluster^T + WiCSum per row + union -> token positions (``select_tokens``, Th_r-wics 0.3)
  full  = Q·K^T over all L keys (float32) + per-row top-k + union per KV head (InfiniGenP-style), with k =
          the number of tokens ReSV selected per head at that L (same budget)

Both run with the same torch thread count (default 1: the box is shared; see --threads), median of --repeats.
Peak memory = growth of the process RSS above its level before the call, sampled every ~0.2 ms by a thread.
The first line is the machine calibration (:func:`vrex_lib.envcheck.calibration_line`); after the table, a cProfile
breakdown of the ReSV prediction at the largest length (hashing, clustering, scores, WiCSum's stages, positions).

    .venv/bin/python benchmarks/bench_resv.py [--lengths 1000,5000,10000,20000,40000] [--repeats 5]

Last line: ``resv_vs_full_scoring_speedup_40k=<ratio>`` (the largest length if 40000 is not in --lengths).
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from _profile import RESV_PREDICT_PARTS, breakdown, format_breakdown, profile, total_ms  # noqa: E402

from vrex_lib.config import ReSVConfig  # noqa: E402
from vrex_lib.envcheck import calibration_line  # noqa: E402
from vrex_lib.resv import HashClusterTable, select_tokens  # noqa: E402
from vrex_lib.resv.analysis import drifting_keys  # noqa: E402

HKV, HQ, D, N = 8, 32, 128, 10
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def peak_rss_growth(fn) -> int:
    """Peak RSS above the pre-call level while ``fn`` runs (bytes; sampled)."""
    base, peak, done = rss(), [0], threading.Event()

    def poll():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.0002)

    th = threading.Thread(target=poll)
    th.start()
    try:
        fn()
    finally:
        done.set()
        th.join()
    return max(0, max(peak[0], rss()) - base)


def full_scoring(q: torch.Tensor, keys: torch.Tensor, k: int) -> list[torch.Tensor]:
    """Q·K^T over every key + per-row top-k, union per KV head: ``q [Hq,N,D]``, ``keys [Hkv,L,D]``."""
    grp = q.shape[0] // keys.shape[0]
    rows = q.reshape(keys.shape[0], grp * q.shape[1], q.shape[2])  # query heads of a group are adjacent
    scores = rows @ keys.transpose(1, 2)  # [Hkv, rows, L]
    top = scores.topk(min(k, keys.shape[1]), dim=-1).indices  # [Hkv, rows, k]
    out = []
    for h in range(keys.shape[0]):
        mask = torch.zeros(keys.shape[1], dtype=torch.bool)
        mask[top[h].reshape(-1)] = True
        out.append(mask.nonzero().squeeze(1))
    return out


def timed(fn, repeats: int, setup=None) -> tuple[float, object]:
    ts, res = [], None
    for _ in range(repeats):
        arg = setup() if setup else None
        t0 = time.perf_counter()
        res = fn(arg)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), res


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", default="1000,5000,10000,20000,40000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    lengths = sorted(int(x) for x in args.lengths.split(","))
    torch.set_num_threads(args.threads)
    print(calibration_line(), flush=True)
    cfg = ReSVConfig()
    print(f"# ReSV vs full-key scoring, Llama-3-8B layer: {HKV} KV heads x {D}, {HQ} query heads, {N} tokens/frame; "
          f"N_hp={cfg.n_hp} Th_hp={cfg.th_hp} Th_r-wics={cfg.th_r_wics} score={cfg.score} hash_mode={cfg.hash_mode}; "
          f"torch threads={torch.get_num_threads()}, repeats={args.repeats}, seed={args.seed}")
    stream = drifting_keys(None, HKV, N, D, seed=args.seed)
    g = torch.Generator().manual_seed(args.seed + 1)
    table = HashClusterTable(HKV, D, cfg, layer=1)
    keys = torch.empty(HKV, lengths[-1] + N, D)
    L = 0
    hdr = ("L", "clusters/head", "tok/cluster", "resv_ms", "hash+cluster_ms", "score+wicsum_ms", "full_ms",
           "full_matmul_ms", "k", "ratio", "speedup", "resv_peakMB", "full_peakMB", "hc_MB", "keys_MB")
    print(" ".join(f"{h:>15}" for h in hdr))
    speedup = float("nan")
    t_build = time.perf_counter()
    for target in lengths:
        while L < target:  # stream frames up to the target length
            kf = next(stream)
            n = min(N, target - L)
            table.add_frame(kf[:, :n], torch.arange(L, L + n))
            keys[:, L:L + n] = kf[:, :n]
            L += n
        new_k = next(stream)  # the frame being predicted for: its keys and (correlated) queries
        q = new_k.repeat_interleave(HQ // HKV, 0) + torch.randn(HQ, N, D, generator=g)
        keys[:, L:L + N] = new_k
        pos = torch.arange(L, L + N)

        def resv(tab):
            tab.add_frame(new_k, pos)
            return select_tokens(q, tab, cfg=cfg, candidates=None)

        def resv_parts(tab):
            t0 = time.perf_counter()
            tab.add_frame(new_k, pos)
            t1 = time.perf_counter()
            select_tokens(q, tab, cfg=cfg)
            return t1 - t0, time.perf_counter() - t1

        fresh = lambda: copy.deepcopy(table)  # noqa: E731 -- every repeat predicts on the same table state
        t_resv, sel = timed(resv, args.repeats, fresh)
        parts = [resv_parts(fresh()) for _ in range(args.repeats)]
        t_hc = statistics.median(p[0] for p in parts)
        t_sw = statistics.median(p[1] for p in parts)
        k = max(1, round(sum(sel.n_selected) / len(sel.n_selected)))
        kv = keys[:, :L + N]
        t_full, _ = timed(lambda _: full_scoring(q, kv, k), args.repeats)
        t_mm, _ = timed(lambda _: q.reshape(HKV, -1, D) @ kv.transpose(1, 2), args.repeats)
        tab2 = fresh()
        m_resv = peak_rss_growth(lambda: resv(tab2))
        m_full = peak_rss_growth(lambda: full_scoring(q, kv, k))
        speedup = t_full / t_resv
        row = (L + N, f"{float(table.n_clusters.float().mean()):.0f}", f"{table.tokens_per_cluster():.1f}",
               f"{1e3 * t_resv:.2f}", f"{1e3 * t_hc:.2f}", f"{1e3 * t_sw:.2f}", f"{1e3 * t_full:.2f}",
               f"{1e3 * t_mm:.2f}", k, f"{sel.ratio():.3f}", f"{speedup:.1f}", f"{m_resv / 2**20:.1f}",
               f"{m_full / 2**20:.1f}", f"{table.nbytes() / 2**20:.2f}", f"{kv.numel() * 2 / 2**20:.1f}")
        print(" ".join(f"{str(x):>15}" for x in row), flush=True)
    tabs = iter([fresh() for _ in range(args.repeats)])
    st = profile(lambda: resv(next(tabs)), args.repeats)
    print(f"# table build (streaming {L} tokens): {time.perf_counter() - t_build:.1f} s; hc_MB/keys_MB in BF16; "
          f"ratio = ReSV tokens selected / tokens in cache")
    print(format_breakdown(f"ReSV prediction at {L + N} tokens", breakdown(st, RESV_PREDICT_PARTS, args.repeats),
                           total_ms(st, args.repeats)))
    print(f"resv_vs_full_scoring_speedup_40k={speedup:.2f}")
    return speedup


if __name__ == "__main__":
    main()
