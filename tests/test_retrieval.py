"""Retrieval policies on synthetic keys/queries (no model): contract, budgets, method semantics."""
from __future__ import annotations

import pytest
import torch

from vrex_lib.retrieval import POLICIES, TABLE2_METHODS, RetrievalPolicy, Selection, make_policy

HKV, GROUP, D, TOK = 2, 3, 16, 10  # KV heads, query heads per KV head, head dim, tokens per frame
HQ = HKV * GROUP


def _stream(policy: RetrievalPolicy, n_frames: int = 8, n_layers: int = 2, seed: int = 0) -> torch.Tensor:
    """Feed n_frames frames of random keys to every layer, as the runtime does; returns keys [L, Hkv, S, D]."""
    g = torch.Generator().manual_seed(seed)
    keys = torch.randn(n_layers, HKV, n_frames * TOK, D, generator=g)
    policy.reset(n_layers, HKV, D)
    for f in range(n_frames):
        for layer in range(n_layers):
            policy.observe(layer, keys[layer, :, f * TOK:(f + 1) * TOK], f * TOK, "frame", f)
    return keys


def _query(nq: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(HQ, nq, D, generator=torch.Generator().manual_seed(seed))


def _check_valid(sel: Selection, candidates: torch.Tensor) -> None:
    assert len(sel.indices) == HKV
    assert sel.n_candidates == candidates.numel()
    cset = set(candidates.tolist())
    for idx in sel.indices:
        assert idx.dtype == torch.int64
        lst = idx.tolist()
        assert lst == sorted(set(lst)), "indices must be sorted and unique"
        assert set(lst) <= cset, "indices must be candidates"
    assert 0.0 <= sel.ratio() <= 1.0
    for key in ("rows", "scored", "score_dims", "score_macs", "select_s"):
        assert key in sel.stats, f"missing stat {key}"


# Without a model (no RoPE, no W_q, no calibration) ReKV and InfiniGen run their model-free variants here; their
# reference modes are tested in tests/test_baselines.py.
STANDALONE = {"rekv": dict(mode="legacy"), "infinigen": dict(mode="oracle"), "infinigen_p": dict(mode="oracle"),
              "streamingllm": dict(window=TOK)}  # without a session there is no KV store to read the tiers from


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("stage", ["frame", "text"])
def test_every_policy_returns_valid_selection(name: str, stage: str) -> None:
    policy = make_policy(name, **STANDALONE.get(name, {}))
    assert isinstance(policy, RetrievalPolicy)
    keys = _stream(policy)
    s = keys.shape[2]
    candidates = torch.arange(0, s - TOK)  # the last frame is "recent" (always attended)
    sel = policy.select(1, _query(TOK if stage == "frame" else 1), keys[1], candidates, stage)
    if sel is None:
        assert name == "full" or (name == "infinigen" and stage == "frame")
        return
    _check_valid(sel, candidates)


def test_registry_names_and_errors() -> None:
    assert set(TABLE2_METHODS) <= set(POLICIES)
    for name, factory in POLICIES.items():
        assert factory().name == name
    with pytest.raises(ValueError, match="unknown retrieval method"):
        make_policy("nope")
    with pytest.raises(ValueError, match="cap"):
        make_policy("infinigen", cap=0.0)


def test_full_and_flexgen_semantics() -> None:
    full, flex = make_policy("full"), make_policy("flexgen")
    keys = _stream(full)
    _stream(flex)
    cand = torch.arange(0, 70)
    for stage in ("frame", "text"):
        assert full.select(1, _query(4), keys[1], cand, stage) is None
        sel = flex.select(1, _query(4), keys[1], cand, stage)
        assert sel.ratio() == 1.0 and all(torch.equal(i, cand) for i in sel.indices)
        assert sel.stats["score_macs"] == 0
    assert not full.retrieves_at_frame and flex.retrieves_at_frame


def test_infinigen_skips_frame_stage_and_caps_text() -> None:
    # huge alpha: every token is "critical" -> the cap binds
    pol = make_policy("infinigen", alpha=1e9, cap=0.5, mode="oracle")
    keys = _stream(pol)
    cand = torch.arange(0, 70)
    assert pol.select(1, _query(TOK), keys[1], cand, "frame") is None
    sel = pol.select(1, _query(1), keys[1], cand, "text")
    # InfiniGen's cap is int(budget x tokens in the cache) (kv_cache_mask's fetch_max): int(0.5 x 80) = 40 of the
    # 70 candidates, not int(0.5 x 70) = 35
    assert sel.n_selected == [40, 40] and sel.stats["k"] == 40 == sel.stats["cap_k"]
    assert sel.stats["score_dims"] == round(0.2 * D)


def test_infinigen_threshold_finds_planted_token() -> None:
    pol = make_policy("infinigen", alpha=5.0, partial_ratio=1.0, mode="oracle")
    keys = _stream(pol)
    q = _query(1)
    planted = 23
    for h in range(HKV):  # one key per KV head aligned with all its group's queries, far above the rest
        keys[1, h, planted] = 40.0 * q[h * GROUP:(h + 1) * GROUP, 0].sum(0)
    sel = pol.select(1, q, keys[1], torch.arange(0, 70), "text")
    assert sel.stats["k"] == 1
    assert [i.tolist() for i in sel.indices] == [[planted], [planted]]


def test_infinigen_p_fixed_topk_at_frames() -> None:
    pol = make_policy("infinigen_p", cap=0.5, partial_ratio=1.0, mode="oracle")
    keys = _stream(pol)
    cand = torch.arange(0, 70)
    q = _query(TOK)
    sel = pol.select(1, q, keys[1], cand, "frame")
    assert sel.n_selected == [35, 35] and pol.retrieves_at_frame
    # With full-dim scores the fixed top-k is the top-k of summed attention probabilities of the group's rows.
    for h in range(HKV):
        rows = q[h * GROUP:(h + 1) * GROUP].reshape(-1, D)
        p = torch.softmax(rows @ keys[1, h, cand].T / D ** 0.5, -1).sum(0)
        want = torch.sort(torch.topk(p, 35).indices).values
        assert torch.equal(sel.indices[h], cand[want])


def test_rekv_picks_whole_frames_shared_by_heads() -> None:
    pol = make_policy("rekv", topk_frac=0.5, mode="legacy")
    keys = _stream(pol, n_frames=8)
    q = _query(TOK)
    hot = 2  # make frame 2's mean key align with the summed mean query of every KV head
    qm = q.mean(1).reshape(HKV, GROUP, D).sum(1)
    keys[1, :, hot * TOK:(hot + 1) * TOK] += 30.0 * qm[:, None, :]
    pol.reset(2, HKV, D)
    for f in range(8):
        for layer in range(2):
            pol.observe(layer, keys[layer, :, f * TOK:(f + 1) * TOK], f * TOK, "frame", f)
    cand = torch.arange(0, 70)  # frames 0..6
    sel = pol.select(1, q, keys[1], cand, "frame")
    assert torch.equal(sel.indices[0], sel.indices[1]), "ReKV decides per layer, shared by heads"
    chosen = sel.indices[0].tolist()
    frames = sorted({p // TOK for p in chosen})
    assert len(chosen) == len(frames) * TOK, "whole frames only"
    assert len(frames) == int(0.5 * 7) and hot in frames
    assert sel.stats["blocks"] == 7 and sel.stats["blocks_selected"] == 3


def test_rekv_rejects_unobserved_positions() -> None:
    pol = make_policy("rekv", mode="legacy")
    keys = _stream(pol, n_frames=2)
    with pytest.raises(ValueError, match="never"):
        pol.select(0, _query(1), keys[0], torch.arange(0, 25), "text")


def test_resv_matches_direct_resv_call() -> None:
    from vrex_lib.config import ReSVConfig
    from vrex_lib.resv import HashClusterTable, select_tokens

    cfg = ReSVConfig()
    pol = make_policy("resv")
    keys = _stream(pol, n_frames=8)
    direct = HashClusterTable(HKV, D, cfg, layer=1)
    for f in range(8):
        direct.add_frame(keys[1, :, f * TOK:(f + 1) * TOK], torch.arange(f * TOK, (f + 1) * TOK))
    cand = torch.arange(0, 70)
    for stage, nq in (("frame", TOK), ("text", 1)):
        q = _query(nq, seed=nq)
        sel = pol.select(1, q, keys[1], cand, stage)
        want = select_tokens(q, direct, cfg=cfg, candidates=cand)
        assert [i.tolist() for i in sel.indices] == [i.tolist() for i in want.indices]
        assert sel.stats["clusters"] == sum(want.stats["clusters"]) == int(direct.n_clusters.sum())
        assert sel.stats["rows"] == HQ * nq


def test_resv_ratio_knob_is_monotone_and_noclust_is_per_token() -> None:
    cand = torch.arange(0, 70)
    q = _query(TOK)
    sizes = []
    for ratio in (0.1, 0.5, 0.9):
        pol = make_policy("resv", th_r_wics=ratio)
        keys = _stream(pol)
        sizes.append(sum(pol.select(1, q, keys[1], cand, "frame").n_selected))
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    # Without clustering, WiCSum over individual keys equals the cluster path on a table of singleton clusters.
    from vrex_lib.resv import HashClusterTable, select_tokens
    from vrex_lib.config import ReSVConfig

    pol = make_policy("resv_noclust")
    keys = _stream(pol)
    sel = pol.select(1, q, keys[1], cand, "frame")
    single = HashClusterTable(HKV, D, ReSVConfig(th_hp=0), layer=1)  # Th=0: nothing ever joins
    single.add_frame(keys[1], torch.arange(keys.shape[2]))
    want = select_tokens(q, single, cfg=ReSVConfig(), candidates=cand)
    assert [i.tolist() for i in sel.indices] == [i.tolist() for i in want.indices]
    assert sel.stats["scored"] == HKV * keys.shape[2]
