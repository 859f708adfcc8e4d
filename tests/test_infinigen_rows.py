"""InfiniGen's per-query-row selection on multi-token steps (docs/DECISIONS.md D61): each (row, head) set equals the
reference's ``kv_cache_mask`` rule, the runtime attends each row to its own set (a 4D-mask forward replays it), and
single-token steps select as before."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from vrex_lib.config import RuntimeConfig
from vrex_lib.retrieval import PolicyBase, make_policy
from vrex_lib.retrieval._common import row_probs, topk_sorted
from vrex_lib.runtime import StreamingSession
from vrex_lib.selection import Selection

D = 16


def _reference_sets(attn: torch.Tensor, alpha: float, cap: float) -> list[list[list[int]]]:
    """snu-comparch/InfiniGen ``kv_cache_mask`` on one step, transcribed for heads [H, N, C] of logits over the
    C candidates (the step's own tokens are the runtime's, always attended): per row t the count of logits
    >= the row's own maximum - alpha, averaged over heads and truncated, capped at int(cap * src_len) (src_len: the
    keys the step attends over, here the C candidates: the keys passed hold nothing else), then per (head,
    row) the top of that row. Returns [head][row] -> sorted candidate indices."""
    h, n, c = attn.shape
    count = (attn >= attn.amax(-1, keepdim=True) - alpha).sum(-1).float()          # [H, N]
    k = torch.clamp(count.mean(0).to(torch.int32), max=int(c * cap))               # [N]
    return [[sorted(torch.topk(attn[g, t], int(k[t])).indices.tolist()) for t in range(n)] for g in range(h)]


def _select(logits: torch.Tensor, n_tokens: int, **kw) -> Selection:
    """The InfiniGen policy's selection when its partial logits are ``logits`` [Hkv, group·N, C]."""
    pol = make_policy("infinigen", mode="oracle", **kw)
    hkv, rows, c = logits.shape
    pol._logits = lambda layer, q, k, cand: (logits, 1)
    query = torch.zeros(hkv * rows // n_tokens, n_tokens, D)
    return pol._select(2, query, torch.zeros(hkv, c, D), torch.arange(c), fixed_topk=False)


def test_the_cap_counts_every_token_in_the_cache_as_the_reference_does():
    """kv_cache_mask caps at fetch_max = int(src_len x budget), src_len = every key of the step (its own tokens
    included). In a run the candidates leave out the sinks, the recent window and the step's own tokens: 314 keys,
    310 candidates, cap 0.5 keep int(0.5 x 314) = 157 when every key is critical, not int(0.5 x 310) = 155."""
    hkv, group, n_cache = 2, 3, 314
    cand = torch.arange(2, 312)                                     # 2 sinks, 2 own/recent tokens left out
    pol = make_policy("infinigen", mode="oracle", alpha=1e9, cap=0.5)
    logits = _logits(hkv, group, cand.numel(), seed=3)
    pol._logits = lambda layer, q, k, c: (logits, 1)
    sel = pol._select(2, torch.zeros(hkv * group, 1, D), torch.zeros(hkv, n_cache, D), cand, fixed_topk=False)
    assert sel.stats["cap_k"] == 157 == int(0.5 * n_cache) and sel.stats["k"] == 157
    assert sel.n_selected == [157, 157]
    # the rows of a multi-token step take the same cap (every row critical everywhere: k_t = the cap)
    logits2 = _logits(hkv, group * 2, cand.numel(), seed=4)
    pol._logits = lambda layer, q, k, c: (logits2, 1)
    rows = pol._select(2, torch.zeros(hkv * group, 2, D), torch.zeros(hkv, n_cache, D), cand, fixed_topk=False)
    assert all(len(r) == 157 for head in rows.rows for r in head) and rows.stats["k"] == 157


def _jaccard(a: list[int], b: list[int]) -> float:
    return len(set(a) & set(b)) / len(set(a) | set(b)) if (a or b) else 1.0


def _logits(h: int, n: int, c: int, seed: int = 0) -> torch.Tensor:
    """Attention-like logits: a few strong keys per row, different across rows (so per-row sets differ)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(h, n, c, generator=g)
    x += 6 * (torch.rand(h, n, c, generator=g) < 0.15)
    return x


def test_multi_token_rows_equal_infinigens_rule_mha():
    # 32 heads x 4 query tokens = 128 (row, head) sets, MHA (group 1) as the reference's Llama-2
    logits = _logits(32, 4, 60)
    sel = _select(logits, 4)
    ref = _reference_sets(logits, alpha=5.0, cap=0.5)
    got = [[r.tolist() for r in head] for head in sel.rows]
    assert sum(got[g][t] == ref[g][t] for g in range(32) for t in range(4)) == 128
    # what is fetched and counted is each head's union, and every row set lies in it
    for g in range(32):
        assert sel.indices[g].tolist() == sorted(set().union(*got[g]))
    # the single-set-per-step rule (per_row=False) misses: this test can fail
    one = _select(logits, 4, per_row=False)
    jac = [_jaccard(one.indices[g].tolist(), ref[g][t]) for g in range(32) for t in range(4)]
    assert one.rows is None and np.mean(jac) < 0.6 and sum(j == 1.0 for j in jac) < 10


def test_multi_token_rows_under_gqa_rank_by_the_groups_summed_probabilities():
    hkv, group, n, c = 2, 3, 4, 40
    logits = _logits(hkv, group * n, c, seed=1)
    sel = _select(logits, n)
    probs = row_probs(logits).reshape(hkv, group, n, c)
    crit = (logits >= logits.amax(-1, keepdim=True) - 5.0).sum(-1).float().reshape(hkv, group, n)
    for t in range(n):
        k_t = min(int(crit[:, :, t].mean()), int(0.5 * c))
        for g in range(hkv):
            want = topk_sorted(torch.arange(c), probs[g, :, t].sum(0), k_t)
            assert torch.equal(sel.rows[g][t], want)
    assert sel.stats["k"] == pytest.approx(np.mean([min(int(crit[:, :, t].mean()), 20) for t in range(n)]))


def test_single_token_steps_select_as_before():
    """A decode step: one set per KV head, k = the count averaged over its group's heads, ranked by summed
    probabilities -- the rule before per-row selection existed, whatever per_row says."""
    hkv, group, c = 2, 4, 50
    logits = _logits(hkv, group, c, seed=2)
    a, b = _select(logits, 1), _select(logits, 1, per_row=False)
    crit = logits >= logits.amax(-1, keepdim=True) - 5.0
    k = min(int(crit.sum(-1).float().mean()), int(0.5 * c))
    score = row_probs(logits).sum(1)
    for sel in (a, b):
        assert sel.rows is None and sel.stats["k"] == k
        assert all(torch.equal(sel.indices[g], topk_sorted(torch.arange(c), score[g], k)) for g in range(hkv))
    with pytest.raises(ValueError, match="per_row must be true or false"):
        make_policy("infinigen", per_row="yes")


class _RowPattern(PolicyBase):
    """Per-row sets: query token t of a multi-token step sees the candidates p with (p + t) % 3 == 0, the same for
    every KV head (so a plain forward can replay it as one 4D mask); single-token steps see every third one."""

    name, retrieves_at_frame = "row_pattern", True

    def reset(self, n_layers, n_kv_heads, head_dim):
        self.h = n_kv_heads

    def observe(self, layer, new_keys, start, stage, frame_id):
        pass

    def select(self, layer, query, keys, candidates, stage):
        n = query.shape[1]
        rows = [candidates[(candidates + t) % 3 == 0] for t in range(n)]
        return Selection.per_row([[r.clone() for r in rows] for _ in range(self.h)], int(candidates.numel()))


def test_per_row_attention_matches_a_4d_mask_forward(tiny):
    from test_runtime import _plain_logits, _stream

    cfg = RuntimeConfig(record_inputs=True, dense_layers=0, recent_frames=2, strict=True)
    s, _ = _stream(tiny, _RowPattern(), cfg, n_frames=5)
    tr = s.trace()
    n = s.n_tokens
    mask = torch.zeros(n, n, dtype=torch.bool)
    for st, nn_, sink, ws in zip(tr["start"], tr["n_new"], tr["n_sink"], tr["window_start"]):
        for i in range(nn_):
            row = st + i
            mask[row, :sink] = True
            mask[row, sink:ws] = (torch.arange(sink, ws) + i) % 3 == 0
            mask[row, ws:row + 1] = True
    ref = _plain_logits(tiny, s.inputs, mask[None, None])
    torch.testing.assert_close(s.next_token_logits(), ref[-1], rtol=1e-4, atol=1e-5)
    # one set for all rows (the union) is another attention: the per-row mask is what made them agree
    union = mask.clone()
    for st, nn_, sink, ws in zip(tr["start"], tr["n_new"], tr["n_sink"], tr["window_start"]):
        if nn_ > 1:
            any_row = ((torch.arange(sink, ws)[None] + torch.arange(nn_)[:, None]) % 3 == 0).any(0)
            union[st:st + nn_, sink:ws] = any_row
    assert not torch.allclose(_plain_logits(tiny, s.inputs, union[None, None])[-1], ref[-1], atol=1e-4)


def test_infinigen_session_selects_per_row_on_the_question(tiny):
    seen = []
    pol = make_policy("infinigen", mode="oracle")
    inner = pol._select

    def spy(layer, query, keys, candidates, fixed_topk):
        sel = inner(layer, query, keys, candidates, fixed_topk)
        seen.append((query.shape[1], sel.rows is not None))
        return sel

    pol._select = spy
    s = StreamingSession(tiny, pol, RuntimeConfig(recent_frames=1, strict=True))
    s.add_system_prompt("sys")
    for i, f in enumerate(np.random.default_rng(0).integers(0, 256, (6, 48, 64, 3), dtype=np.uint8)):
        s.add_frame(f, t=i / 2)
    s.ask("what is it?", max_new_tokens=3)
    assert any(n > 1 and rows for n, rows in seen) and all(rows == (n > 1) for n, rows in seen)
