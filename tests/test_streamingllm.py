"""StreamingLLM (sinks + recent window, evict the rest): the seventh method, added through the method table alone.

The policy is checked against a plain forward with the mask StreamingLLM implies (sinks, the device-resident
candidates, the recent window, causal), its selection against the KV store's tier boundary, and its simulator
model against the link it never uses."""
from __future__ import annotations

import pytest
import torch

from vrex_lib import methods, perf
from vrex_lib.config import RuntimeConfig
from vrex_lib.perf import experiments as E
from vrex_lib.retrieval import make_policy

from test_runtime import _plain_logits, _stream

CAP = 40


@pytest.mark.parametrize("dense_layers", [None, 0], ids=["default-config", "dense_layers=0"])
def test_attends_sinks_device_tier_and_window_only_equal_to_a_masked_plain_forward(tiny, dense_layers):
    # The default config (dense_layers=1, as eval, notebook 03 and longctx run it) must evict at layer 0 too:
    # StreamingLLM has no dense layer, so the one mask below holds at every layer.
    extra = {} if dense_layers is None else dict(dense_layers=dense_layers)
    cfg = RuntimeConfig(kv_capacity=CAP, record_inputs=True, strict=True, **extra)
    s, _ = _stream(tiny, make_policy("streamingllm"), cfg, n_frames=8, new_tokens=None)
    tr = s.trace()
    n = s.n_tokens
    assert n > CAP + 20, "the stream must outgrow the device tier for eviction to show"
    mask = torch.zeros(n, n, dtype=torch.bool)
    for st, nn_, sink, ws, S in zip(tr["start"], tr["n_new"], tr["n_sink"], tr["window_start"], tr["n_cache"]):
        first_on_device = max(sink, S - CAP)  # KVStore.host_boundary at this step's cache length
        for i in range(nn_):
            row = st + i
            mask[row, :sink] = True
            mask[row, max(sink, first_on_device):ws] = True
            mask[row, ws:row + 1] = True
    ref = _plain_logits(tiny, s.inputs, mask[None, None])
    torch.testing.assert_close(s.next_token_logits(), ref[-1], rtol=1e-4, atol=1e-5)
    assert not torch.allclose(_plain_logits(tiny, s.inputs)[-1], ref[-1], atol=1e-3), "eviction must change something"
    assert tr["host_tokens"].sum() == 0  # nothing offloaded is ever attended, so nothing is fetched
    has_candidates = tr["n_candidates"] > 0
    assert tr["applied"][has_candidates].all(), "every layer, layer 0 included, must evict"
    assert tr["applied"].any() and (tr.stats["scored"][tr["applied"]] == 0).all()  # consulted, scored nothing


def test_a_fixed_window_and_its_checks(tiny):
    p = make_policy("streamingllm", window=5)
    p.reset(tiny.n_layers, tiny.n_kv_heads, tiny.head_dim)
    keys = torch.zeros(tiny.n_kv_heads, 30, tiny.head_dim)
    sel = p.select(1, torch.zeros(1, 1, tiny.head_dim), keys, torch.arange(4, 28), "text")
    assert [ix.tolist() for ix in sel.indices] == [[25, 26, 27]] * tiny.n_kv_heads and sel.n_candidates == 24
    with pytest.raises(ValueError, match="window must be an integer"):
        make_policy("streamingllm", window=0)
    unbound = make_policy("streamingllm")
    unbound.reset(tiny.n_layers, tiny.n_kv_heads, tiny.head_dim)
    with pytest.raises(ValueError, match="StreamingSession"):
        unbound.select(1, torch.zeros(1, 1, tiny.head_dim), keys, torch.arange(4, 28), "text")


def test_simulator_evicts_nothing_fetched_nothing_written_and_latency_flat_past_the_capacity():
    for st in ("frame", "text"):
        short = perf.simulate("agx_orin", "streamingllm", st, 4000, workload="paper")
        long = perf.simulate("agx_orin", "streamingllm", st, 40000, workload="paper")
        flex = perf.simulate("agx_orin", "flexgen", st, 40000, workload="paper")
        assert long.bytes["pcie"] == 0 and long.bytes["pcie_fetch"] == 0 and long.notes["offloaded_tokens"] > 0
        assert long.latency_ms == pytest.approx(short.latency_ms, rel=1e-9) and long.latency_ms < flex.latency_ms
        assert long.notes["attended_tokens"] < 5000  # what the device holds, not the 40K context


def test_registered_once_and_present_wherever_the_table_says():
    assert methods.get("streamingllm").role == "external"
    assert "streamingllm" in methods.STUDY and "streamingllm" in methods.LONGCTX
    assert "streamingllm" in methods.GPU_BASELINES and "streamingllm" not in methods.E2E_BASELINES
    grid = E.fig13_grid(kv_sizes=(40000,), platforms=("edge",), stages=("frame",), workload="paper")
    assert "agx_orin+streamingllm" in set(grid.label)
