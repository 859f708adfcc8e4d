"""ReSV's fast path selects exactly what the reference selects, on the benchmarks' own seeded streams.

Oracle: :mod:`vrex_lib.resv.reference` (loops, written to be obviously correct). Streams: ``bench_resv``'s
(``drifting_keys`` at Llama-3-8B layer shapes, its query rule) and ``bench_runtime``'s (its synthetic frame
embeddings through the streaming runtime, on the smoke model). Every stage of the compiled float WiCSum is
forced in turn (docs/DECISIONS.md D369): σ(0) alone, the top binary orders of the weight, the whole of σ.
"""
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import vrex_lib.resv.select as S
import vrex_lib.resv.wicsum as W
from vrex_lib.config import ReSVConfig, RuntimeConfig
from vrex_lib.resv import HashClusterTable, HashClusterTableRef, select_tokens, select_tokens_ref
from vrex_lib.resv.analysis import drifting_keys
from vrex_lib.resv.reference import wicsum_select_ref
from vrex_lib.retrieval.resv_policy import ReSV

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"

# the float WiCSum's stages (vrex_lib.resv.kernels._row_float): all, without the σ(0) shortcut, the whole of σ
STAGES = {"default": 1, "levels": 2, "whole_sigma": 0}


@pytest.fixture(params=list(STAGES))
def stage(request, monkeypatch):
    monkeypatch.setattr(S, "_EARLY_EXIT", STAGES[request.param])
    return request.param


@pytest.fixture(scope="module")
def bench_resv_stream():
    """bench_resv's stream (seed 0): 8 KV heads x 128, 10 tokens per frame, 120 frames into both tables, then
    the predicted frame's keys and bench_resv's queries (the keys repeated per query head + N(0, 1))."""
    cfg = ReSVConfig()
    stream = drifting_keys(None, 8, 10, 128, seed=0)
    fast, ref = HashClusterTable(8, 128, cfg, layer=1), HashClusterTableRef(8, 128, cfg, layer=1)
    for f in range(121):  # the 121st is the frame being predicted for, added first as bench_resv does
        k = next(stream)
        pos = torch.arange(10 * f, 10 * f + 10)
        assert fast.add_frame(k, pos).tolist() == ref.add_frame(k.numpy(), pos.tolist())
    q = k.repeat_interleave(4, 0) + torch.randn(32, 10, 128, generator=torch.Generator().manual_seed(1))
    return fast, ref, q, cfg


@pytest.mark.parametrize("quant_bits", [None, 16])
def test_bench_resv_stream_selects_as_the_reference(bench_resv_stream, stage, quant_bits):
    fast, ref, q, cfg = bench_resv_stream
    got = select_tokens(q, fast, cfg=cfg, quant_bits=quant_bits)
    assert [i.tolist() for i in got.indices] == select_tokens_ref(q.numpy(), ref, cfg=cfg, quant_bits=quant_bits)
    assert int(fast.n_clusters.min()) > 40 and 0 < got.ratio() < 1  # a real prediction, not all or nothing


class _ShadowReSV(ReSV):
    """The runtime's ``resv`` policy, each selection checked against the reference on the same keys/queries."""

    def reset(self, n_layers, n_kv_heads, head_dim):
        super().reset(n_layers, n_kv_heads, head_dim)
        self.refs = [HashClusterTableRef(n_kv_heads, head_dim, self.cfg, layer) for layer in range(n_layers)]
        self.checked = 0

    def observe(self, layer, new_keys, start, stage, frame_id):
        super().observe(layer, new_keys, start, stage, frame_id)
        n = new_keys.shape[1]
        assert self.refs[layer].add_frame(new_keys.numpy(), list(range(start, start + n))) == \
            self.tables[layer].assignment[:, start:].tolist()

    def select(self, layer, query, keys, candidates, stage):
        sel = super().select(layer, query, keys, candidates, stage)
        exp = select_tokens_ref(query.numpy(), self.refs[layer], cfg=self.cfg, quant_bits=self.quant_bits)
        lo, hi = int(candidates[0]), int(candidates[-1])
        assert [i.tolist() for i in sel.indices] == [[p for p in e if lo <= p <= hi] for e in exp]
        self.checked += 1
        return sel


@pytest.mark.parametrize("quant_bits", [None, 16])
def test_bench_runtime_stream_selects_as_the_reference(tiny, stage, quant_bits, monkeypatch):
    """bench_runtime's synthetic frame stream (seed 0) through the runtime: prefill in chunks, then frame steps."""
    from vrex_lib.runtime import DEFAULT_SYSTEM_PROMPT, StreamingSession

    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.delitem(sys.modules, "bench_runtime", raising=False)
    import bench_runtime

    pol = _ShadowReSV(quant_bits=quant_bits)
    sess = StreamingSession(tiny, pol, RuntimeConfig())
    sess.add_system_prompt(DEFAULT_SYSTEM_PROMPT)
    frames = bench_runtime.synthetic_frame_stream(tiny, 0)
    with torch.inference_mode():
        bench_runtime.prefill_to(sess, frames, 500, 12)
        for _ in range(3):
            sess.add_frame_embeds(next(frames))
    assert pol.checked >= 4 and int(pol.tables[1].n_clusters.max()) > 64


def _rows_ref(w, counts, ratio, n_valid):
    out = np.zeros(w.shape, bool)
    for i in range(w.shape[0]):
        c = int(n_valid[i])
        if c:
            out[i, :c] = wicsum_select_ref(w[i:i + 1, :c], counts[i, :c], ratio)[0]
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), C=st.integers(1, 300), rows=st.integers(1, 40),
       ratio=st.sampled_from([0.0, 0.3, 0.7, 0.99]), kind=st.sampled_from(["softmax", "flat", "quant", "ties"]),
       early_exit=st.sampled_from([0, 1, 2]))
def test_every_wicsum_stage_equals_the_reference(seed, C, rows, ratio, kind, early_exit):
    """Each stage of the compiled WiCSum, on peaked, flat, quantised and tied weights, with padding."""
    rng = np.random.default_rng(seed)
    n_valid = rng.integers(1, C + 1, rows)
    n_valid[0] = C
    valid = np.arange(C)[None, :] < n_valid[:, None]
    counts = np.where(valid, rng.integers(1, 80, (rows, C)), 0)
    s = rng.normal(0, {"softmax": 3.0, "flat": 0.3, "quant": 2.0, "ties": 1.0}[kind], (rows, C))
    w = np.where(valid, np.exp(s - np.where(valid, s, -np.inf).max(1, keepdims=True)), 0)
    if kind == "quant":
        w = W.quantize_weights(w)
    elif kind == "ties":
        w = np.round(w * 4) / 4
    mask, n_sel = W.wicsum_rows(w, counts, ratio, n_valid, early_exit=early_exit)
    ref = _rows_ref(w, counts, ratio, n_valid)
    assert np.array_equal(mask, ref)
    assert n_sel.tolist() == ref.sum(1).tolist()


def test_a_threshold_the_index_order_sum_cannot_place_goes_to_the_whole_of_sigma():
    """Added in column order, the 1024 tiny weights come first and survive (Sum = 1 + 2^-44); in σ order they come
    last and round away (Sum = 1.0), so the reference stops at σ(0) (0.5 + 2^-50 > 0.5·1.0) while a rule trusting
    the column-order Sum would take two clusters. Only the bounds of D51 send the row to the whole of σ."""
    w = np.concatenate([np.full(1024, 2.0 ** -54), [0.5 + 2.0 ** -50, 0.5 - 2.0 ** -50]])[None, :]
    counts = np.ones_like(w, dtype=np.int64)
    ref = wicsum_select_ref(w, counts[0], 0.5)
    assert ref.sum() == 1 and ref[0, 1024]
    column_sum = 0.0
    for x in w[0]:
        column_sum += float(x)
    naive = np.cumsum(np.sort(w[0])[::-1]) > 0.5 * column_sum  # σ-order Acc against the column-order Sum
    assert int(naive.argmax()) + 1 == 2  # the trap is real: trusting that Sum selects a different set
    for early_exit in (0, 1, 2):
        mask, n_sel = W.wicsum_rows(w, counts, 0.5, early_exit=early_exit)
        assert np.array_equal(mask, ref) and n_sel.tolist() == [1]
