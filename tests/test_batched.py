"""Batched multi-session decoding (vrex_lib.runtime.batch, docs/DECISIONS.md D480): the methods of one trial in
lockstep, one forward per step, give the greedy tokens, selections and records of their runs one after another."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from vrex_lib import longctx
from vrex_lib.config import ReSVConfig, RuntimeConfig
from vrex_lib.retrieval import make_policy
from vrex_lib.runtime import LockstepAborted, StreamingSession, lockstep

GRID = longctx.study_grid("smoke")
CFG = RuntimeConfig(kv_capacity=GRID.kv_capacity, interval_token=False)
#: Fields of a study record that are this machine's times or say how the record was computed.
_TIMING = {"prefill_s", "answer_s", "batched"}


class SelectionLog:
    """Wraps a policy and keeps every selection it returns: (layer, stage, per-head index arrays, candidates)."""

    def __init__(self, inner):
        self.inner, self.log = inner, []

    def __getattr__(self, item):
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    def select(self, layer, query, keys, candidates, stage):
        sel = self.inner.select(layer, query, keys, candidates, stage)
        self.log.append((layer, stage, None if sel is None else [ix.numpy().copy() for ix in sel.indices],
                         int(candidates.numel())))
        return sel


#: Budgets small enough that the tiny model's short streams are not selected whole.
_KW = {"rekv": dict(topk_blocks=2), "infinigen": dict(dense_layers=1, alpha=1.0), "streamingllm": {}, "flexgen": {}}


def _session(tiny, name: str) -> tuple[StreamingSession, SelectionLog]:
    pol = SelectionLog(make_policy(name, **_KW[name]) if name != "resv" else make_policy("resv", cfg=ReSVConfig()))
    return StreamingSession(tiny, pol, CFG), pol


def _stream(embeds, question: str, n_new: int):
    def fn(sess):
        sess.add_system_prompt("You are a helpful assistant.")
        for e in embeds:
            sess.add_frame_embeds(e)
        text = sess.ask(question, max_new_tokens=n_new)
        return text, list(sess.last_answer["step_argmax"]), sess.last_answer["first_logits"]
    return fn


@pytest.mark.parametrize("seed", [0, 1])
def test_lockstep_rows_select_and_answer_as_each_session_alone(tiny, seed):
    """Every method streams frames, a question and a greedy answer; the lockstep batch and the runs one after another
    return the same greedy tokens, the same index sets at every (step, layer) and the same trace counts. Logits may
    differ in the last bits of fp32 (a [B, N] matrix product instead of [1, N]): tolerance 1e-5 relative."""
    names = ["resv", "infinigen", "rekv", "streamingllm", "flexgen", "rekv", "infinigen"]
    # each row its own frames: a policy reading another row's captured inputs (ReKV's pre-RoPE keys, InfiniGen's
    # previous-layer input) would select differently
    gens = [torch.Generator().manual_seed(100 * seed + i) for i in range(len(names))]
    embeds = [[torch.randn(10, tiny.hidden_size, generator=g) for _ in range(16)] for g in gens]
    got = {}
    for batched in (False, True):
        rows = [_session(tiny, n) for n in names]
        out = lockstep([(s, _stream(e, "What is in the video?", 6)) for (s, _), e in zip(rows, embeds)],
                       batched=batched)
        got[batched] = (out, [p.log for _, p in rows], [s.trace() for s, _ in rows])
    (seq, seq_sel, seq_tr), (bat, bat_sel, bat_tr) = got[False], got[True]
    for n, a, b in zip(names, seq, bat):
        assert a[0] == b[0] and a[1] == b[1], n
        torch.testing.assert_close(a[2], b[2], rtol=1e-5, atol=1e-5)
    for n, la, lb in zip(names, seq_sel, bat_sel):
        assert len(la) == len(lb) > 0, n
        if n != "flexgen":  # the budgets leave something out: a selection that reads another row's inputs differs
            assert any(i is not None and sum(map(len, i)) < len(i) * c for _, _, i, c in la), n
        for (l1, s1, i1, _), (l2, s2, i2, _) in zip(la, lb):
            assert (l1, s1) == (l2, s2) and (i1 is None) == (i2 is None), n
            if i1 is not None:
                assert all(np.array_equal(x, y) for x, y in zip(i1, i2)), (n, l1, s1)
    for a, b in zip(seq_tr, bat_tr):
        for f in ("selected", "attended", "host_tokens", "device_tokens", "reused", "argmax", "applied"):
            assert np.array_equal(a[f], b[f]), f


def test_study_trial_records_are_the_same_batched_or_not(tiny):
    """run_trial on every method of the smoke grid (shared prefill, streaming methods, the exact reference): the
    records of the lockstep batch equal those of the methods one after another, timings aside."""
    specs = longctx.method_specs(GRID.methods)
    recs = {}
    for batched in (False, True):
        out = []
        longctx.run_trial(tiny, GRID, ("needle", 384, 0.5, 0), specs, resv=ReSVConfig(), cfg=CFG,
                          on_record=out.append, batched=batched)
        recs[batched] = out
    assert [r["method"] for r in recs[True]] == [s.name for s in specs]
    for a, b in zip(recs[False], recs[True]):
        assert a["batched"] is False and b["batched"] is True
        ka = {k: v for k, v in a.items() if k not in _TIMING}
        kb = {k: v for k, v in b.items() if k not in _TIMING}
        assert ka.keys() == kb.keys()
        for k in ka:
            va, vb = ka[k], kb[k]
            if isinstance(va, np.ndarray):
                assert np.array_equal(va, vb, equal_nan=True), (a["method"], k)
            else:
                assert va == vb, (a["method"], k)


def test_rows_that_stop_early_leave_the_batch(tiny):
    """Answers of 1, 3 and 5 forced tokens: each row gets exactly its own steps; the system prompt, frame and
    question run as one forward each, the decode steps as long as any row still decodes (4)."""
    e = [torch.full((10, tiny.hidden_size), 0.01)]

    def forced(n):
        def fn(sess):
            sess.add_system_prompt("x")
            sess.add_frame_embeds(e[0])
            sess.ask("Say it.", max_new_tokens=n, force_ids=[7] * n)
            return len(sess.stats)
        return fn

    rows = [StreamingSession(tiny, None, CFG) for _ in range(3)]
    stats = {}
    out = lockstep([(s, forced(n)) for s, n in zip(rows, (1, 3, 5))], stats=stats)
    assert out == [3, 5, 7]
    assert stats == dict(forwards=7, row_steps=15)


def test_a_failing_row_stops_the_lockstep_with_its_error(tiny):
    e = [torch.full((10, tiny.hidden_size), 0.01)]

    def bad(sess):
        sess.add_system_prompt("x")
        raise ValueError("row failed on purpose")

    rows = [StreamingSession(tiny, None, CFG) for _ in range(3)]
    with pytest.raises(ValueError, match="on purpose"):
        lockstep([(rows[0], _stream(e, "q", 4)), (rows[1], bad), (rows[2], _stream(e, "q", 4))])
    assert all(s.lockstep is None for s in rows)
    with pytest.raises(ValueError, match="listed twice"):
        lockstep([(rows[0], bad), (rows[0], bad)])
    assert issubclass(LockstepAborted, RuntimeError)
