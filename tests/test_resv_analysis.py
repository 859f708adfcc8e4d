"""vrex_lib.resv.analysis: the measurements behind notebook 02 and the benchmark."""
import numpy as np
import torch

from vrex_lib.config import ReSVConfig
from vrex_lib.resv import analysis as A


def _seq(seed=0, Hq=4, Hkv=2, T=64, D=8):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(Hkv, 1, D, generator=g)
    k = base + 0.7 * torch.randn(Hkv, T, D, generator=g)
    return torch.randn(Hq, T, D, generator=g), k, torch.randn(Hkv, T, D, generator=g)


def test_full_ratio_reproduces_full_attention():
    q, k, v = _seq()
    rows = A.evaluate_selection(q, k, v, ReSVConfig(th_r_wics=1.0), n_sink=4, eval_frames=[-1, -2])
    assert len(rows) == 2
    for r in rows:
        assert r["ratio"] == 1.0 and r["rel_err"] < 1e-12 and r["oracle_rel_err"] < 1e-12
    low = A.summarize(A.evaluate_selection(q, k, v, ReSVConfig(th_r_wics=0.05), n_sink=4, eval_frames=[-1]))
    assert 0 < low["ratio"] < 1 and low["rel_err"] > 0


def test_correlation_and_stats():
    _, k, _ = _seq(T=40)
    c, h = A.cosine_hamming_pairs(k, 32, "per_head")
    assert len(c) == 2 * 40 * 39 // 2 and h.min() >= 0 and h.max() <= 32
    assert A.cosine_hamming_correlation(k, 64, "concat") > 0.5  # SimHash: distance tracks the angle
    st = A.table_stats(A.stream_table(k, ReSVConfig(), start=0))
    assert st["tokens"] == 40 and st["clusters"] >= 2 and st["hc_bytes"] > 0 and 0 < st["hc_pct_of_kv"]
    df = A.sensitivity(*_seq(), ReSVConfig(), {"th_hp": [3, 7]}, n_sink=4, eval_frames=[-1])
    assert list(df.value) == ["3", "7"] and df.default.tolist() == [False, True] and "cfg_seed" in df


def test_drifting_keys_seeded_and_correlated():
    a = list(A.drifting_keys(3, 2, 10, 16, seed=1))
    b = list(A.drifting_keys(3, 2, 10, 16, seed=1))
    assert all(torch.equal(x, y) for x, y in zip(a, b)) and a[0].shape == (2, 10, 16)
    cos = torch.nn.functional.cosine_similarity(a[0], a[1], dim=-1)
    assert float(cos.mean()) > 0.8  # the same slot in adjacent frames is similar
    assert np.isfinite(float(next(A.drifting_keys(None)).sum()))
