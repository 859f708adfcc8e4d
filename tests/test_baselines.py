"""ReKV and InfiniGen as their reference repositories do them; the COIN prompt layout; hand-computed cases."""
from __future__ import annotations

import pytest
import torch

from vrex_lib.retrieval import PolicyBase, make_policy
from vrex_lib.retrieval.infinigen import calibrate, partial_columns, skewing_matrix
from vrex_lib.runtime.capture import rope, unrope

HKV, GROUP, D, TOK = 2, 3, 16, 10
HQ = HKV * GROUP


@pytest.fixture(scope="module")
def tiny4():
    """A 4-layer tiny random Llama streaming model (InfiniGen needs layers beyond its dense 0-1)."""
    from transformers import LlamaForCausalLM

    from vrex_lib.llm_weights import tiny_llama_config
    from vrex_lib.runtime.attention import ATTN_IMPL, register
    from vrex_lib.runtime.model import ByteTokenizer, StreamingVideoLLM, _tiny_siglip, make_connector

    register()
    torch.manual_seed(0)
    tok = ByteTokenizer()
    llm = LlamaForCausalLM(tiny_llama_config(vocab_size=tok.vocab_size, num_hidden_layers=4)).eval()
    llm.set_attn_implementation(ATTN_IMPL)
    m = StreamingVideoLLM(llm, tok, _tiny_siglip(32, 1, 2, 64), make_connector(32, 64), "tiny4-llama", 64)
    for mod in (m.llm, m.vision, m.connector):
        mod.requires_grad_(False)
    return m


def _cos_sin(positions: torch.Tensor, d: int = D, base: float = 10000.0):
    inv = 1.0 / base ** (torch.arange(0, d, 2).float() / d)
    ang = positions.float()[:, None] * inv[None]
    emb = torch.cat([ang, ang], -1)
    return emb.cos(), emb.sin()


def test_unrope_inverts_rope():
    x = torch.randn(3, 7, D)
    c, s = _cos_sin(torch.arange(100, 107))
    assert torch.allclose(unrope(rope(x, c, s), c, s), x, atol=1e-5)


# ------------------------------------------------------------------------------------------------ ReKV


def _flat(x: torch.Tensor) -> torch.Tensor:
    """[H, N, D] -> [1, N, H*D], the layout of a q_proj / k_proj output."""
    return x.transpose(0, 1).reshape(1, x.shape[1], -1)


def _rekv_stream(pol, pre_keys: torch.Tensor, offset: int = 0):
    """Feed frames of given pre-RoPE keys [Hkv, S, D] to layer 0 of ``pol``: the captured k_proj output is the
    pre-RoPE key, ``observe`` gets it rotated at positions offset+i (what the runtime's attention receives)."""
    pre = [[None, None]]  # stands in for runtime.capture.attach_pre_rope's store: entry ℓ = [q, k] of this step
    pol._pre = pre
    pol.reset(1, HKV, D)
    n_frames = pre_keys.shape[1] // TOK
    for f in range(n_frames):
        pos = torch.arange(f * TOK, (f + 1) * TOK) + offset
        c, s = _cos_sin(pos)
        k = pre_keys[:, f * TOK:(f + 1) * TOK]
        pre[0][1] = _flat(k)
        pol.observe(0, rope(k, c, s), f * TOK, "frame", f)
    return pre


def _rekv_ask(pol, pre, pre_q: torch.Tensor, pos0: int, n_cache: int, stage="text"):
    c, s = _cos_sin(torch.arange(pos0, pos0 + pre_q.shape[1]))
    pre[0][0] = _flat(pre_q)
    keys = torch.zeros(HKV, n_cache, D)  # unused by ReKV (block means come from observe)
    return pol.select(0, rope(pre_q, c, s), keys, torch.arange(0, n_cache), stage)


def test_rekv_scores_pre_rope_keys_and_is_position_free():
    g = torch.Generator().manual_seed(3)
    pre_k = torch.randn(HKV, 8 * TOK, D, generator=g)
    pre_q = torch.randn(HQ, 4, D, generator=g)
    # by hand: block score = Σ_g (Σ_{h in g} mean_t q_h) · mean_{block} k_g, on pre-RoPE tensors
    qm = pre_q.mean(1).reshape(HKV, GROUP, D).sum(1)
    score = torch.stack([(pre_k[:, b * TOK:(b + 1) * TOK].mean(1) * qm).sum() for b in range(8)])
    want = sorted(torch.topk(score, 3).indices.tolist())
    for offset in (0, 5000):  # absolute positions change post-RoPE keys, not the pre-RoPE choice
        pol = make_policy("rekv", topk_blocks=3)
        inputs = _rekv_stream(pol, pre_k, offset)
        sel = _rekv_ask(pol, inputs, pre_q, offset + 8 * TOK, 8 * TOK)
        got = sorted({int(i) // TOK for i in sel.indices[0]})
        assert got == want and torch.equal(sel.indices[0], sel.indices[1])


def test_rekv_retrieves_once_per_question_and_anew_after_frames():
    g = torch.Generator().manual_seed(4)
    pol = make_policy("rekv", topk_blocks=2)
    pre_k = torch.randn(HKV, 6 * TOK, D, generator=g)
    inputs = _rekv_stream(pol, pre_k)
    assert _rekv_ask(pol, inputs, torch.randn(HQ, 3, D, generator=g), 60, 60, stage="frame") is None
    first = _rekv_ask(pol, inputs, torch.randn(HQ, 3, D, generator=g), 60, 60)
    assert first.stats["retrieved_now"] == 1 and len({int(i) // TOK for i in first.indices[0]}) == 2
    for q in range(3):  # generated tokens: other queries, the question's set is kept
        again = _rekv_ask(pol, inputs, torch.randn(HQ, 1, D, generator=g), 63 + q, 60)
        assert again.stats["retrieved_now"] == 0 and torch.equal(again.indices[0], first.indices[0])
    # a new frame ends the answer: the next text step retrieves again
    k = torch.randn(HKV, TOK, D, generator=g)
    inputs[0][1] = _flat(k)
    pol.observe(0, k, 60, "frame", 6)
    assert _rekv_ask(pol, inputs, torch.randn(HQ, 3, D, generator=g), 70, 70).stats["retrieved_now"] == 1


def test_rekv_budget_is_64_frames_or_all():
    pol = make_policy("rekv")
    assert pol.topk_blocks == 64 and not pol.retrieves_at_frame
    inputs = _rekv_stream(pol, torch.randn(HKV, 8 * TOK, D))
    sel = _rekv_ask(pol, inputs, torch.randn(HQ, 2, D), 80, 80)
    assert sel.ratio() == 1.0  # 8 frames <= 64: every frame
    fr = make_policy("rekv", mode="frame", topk_blocks=3)
    assert fr.retrieves_at_frame
    inputs = _rekv_stream(fr, torch.randn(HKV, 8 * TOK, D))
    s1 = _rekv_ask(fr, inputs, torch.randn(HQ, TOK, D), 80, 80, stage="frame")
    assert len(s1.indices[0]) == 3 * TOK and s1.stats["retrieved_now"] == 1
    with pytest.raises(ValueError, match="unknown mode"):
        make_policy("rekv", mode="nope")


def test_rekv_needs_rope_unless_legacy():
    pol = make_policy("rekv")
    pol.reset(1, HKV, D)
    with pytest.raises(ValueError, match="pre-RoPE.*StreamingSession"):
        pol.observe(0, torch.randn(HKV, TOK, D), 0, "frame", 0)


def _tiny_llm4(dtype: torch.dtype):
    """A 4-layer tiny random Llama streaming model in ``dtype`` (seeded: the same weights in every dtype)."""
    from transformers import LlamaForCausalLM

    from vrex_lib.llm_weights import tiny_llama_config
    from vrex_lib.runtime.attention import ATTN_IMPL, register
    from vrex_lib.runtime.model import ByteTokenizer, StreamingVideoLLM, _tiny_siglip, make_connector

    register()
    torch.manual_seed(0)
    tok = ByteTokenizer()
    llm = LlamaForCausalLM(tiny_llama_config(vocab_size=tok.vocab_size, num_hidden_layers=4)).eval().to(dtype)
    llm.set_attn_implementation(ATTN_IMPL)
    m = StreamingVideoLLM(llm, tok, _tiny_siglip(32, 1, 2, 64), make_connector(32, 64), f"tiny4-{dtype}", 64)
    for mod in (m.llm, m.vision, m.connector):
        mod.requires_grad_(False)
    return m


def _record_projections(model) -> dict:
    """The test's own record of every forward's q_proj / k_proj output per layer (independent of the policy)."""
    rec = {"q": [[] for _ in model.llm.model.layers], "k": [[] for _ in model.llm.model.layers]}
    for i, lay in enumerate(model.llm.model.layers):
        for name, proj in (("q", lay.self_attn.q_proj), ("k", lay.self_attn.k_proj)):
            proj.register_forward_hook(lambda mod, a, out, i=i, name=name: rec[name][i].append(out[0].detach()))
    return rec


def _reference_blocks(rec: dict, layer: int, q_step: int, cand_steps: list[int], topk: int, model) -> set[int]:
    """Becomebright/ReKV's choice for one layer, written out from its code: block mean and question mean in the
    model dtype (``mean(dim=-2)``, ``global_h_q.mean(dim=2)``), GQA-expanded (``_from_group_kv``), concatenated
    over heads, fp32 dot products (``get_cosine_similarity``), top-k."""
    hq, hkv, d = model.n_q_heads, model.n_kv_heads, model.head_dim
    q = rec["q"][layer][q_step]
    q_mean = q.reshape(q.shape[0], hq, d).transpose(0, 1).mean(1).reshape(-1).float()
    means = [rec["k"][layer][s].reshape(-1, hkv, d).transpose(0, 1).mean(1) for s in cand_steps]
    expanded = torch.stack([m.repeat_interleave(hq // hkv, 0).reshape(-1).float() for m in means])
    return {cand_steps[i] for i in torch.topk(expanded @ q_mean, topk).indices.tolist()}


def _rekv_question_trial(model, seed: int, n_frames: int = 8, topk: int = 3):
    """One stream (system prompt, ``n_frames`` random frames, a question) with rekv in question mode; returns
    the policy, its chosen blocks per layer, the reference's, and the test's own projection record."""
    from vrex_lib.runtime import StreamingSession

    rec = _record_projections(model) if not hasattr(model, "_test_rec") else model._test_rec
    model._test_rec = rec
    for v in rec.values():
        for lst in v:
            lst.clear()
    pol = make_policy("rekv", topk_blocks=topk)
    sess = StreamingSession(model, pol)
    sess.add_system_prompt("sys")
    g = torch.Generator().manual_seed(seed)
    for i in range(n_frames):
        sess.add_frame_embeds(torch.randn(10, model.hidden_size, generator=g), float(i))
    sess.ask("what?", max_new_tokens=1)
    # steps: 0 system, 1..n frames, n+1 question (= block ids); the last frame is the recent window
    cand = list(range(1, n_frames))
    got = [set(pol._block_of[l][pol._held[l]].tolist()) for l in range(model.n_layers)]
    want = [_reference_blocks(rec, l, n_frames + 1, cand, topk, model) for l in range(model.n_layers)]
    return pol, got, want, rec


def test_rekv_block_means_are_the_projections_bit_for_bit_in_bf16():
    """bf16 (the full profile's dtype): the block means are the model's own k_proj outputs averaged in bf16, as
    the reference keeps them -- exactly; un-rotating the post-RoPE bf16 keys would not give them."""
    from vrex_lib.runtime.capture import attach, rope, unrope

    model = _tiny_llm4(torch.bfloat16)
    store = attach(model)  # the step's (cos, sin), to rebuild what un-rotation would give
    pol, _, _, rec = _rekv_question_trial(model, seed=0)
    worst = 0.0
    for l in range(model.n_layers):
        for step in range(1, 9):
            k = rec["k"][l][step].reshape(-1, model.n_kv_heads, model.head_dim).transpose(0, 1)  # bf16 [Hkv,N,D]
            assert torch.equal(pol._means[l][step], k.mean(1))
        h, (cos, sin) = store[l]  # the question step's: rotate and un-rotate its keys as HF does in bf16
        k = rec["k"][l][-1].reshape(-1, model.n_kv_heads, model.head_dim).transpose(0, 1)
        back = unrope(rope(k, cos[0], sin[0]).float(), cos[0].float(), sin[0].float())
        worst = max(worst, float(((back - k.float()).norm() / k.float().norm())))
    assert 1e-3 < worst < 1e-2  # the bf16 round trip is lossy (measured 3.0e-3 to 3.3e-3); the capture is exact


def test_rekv_selects_the_reference_blocks_in_bf16_and_fp32():
    """60 question-time decisions (15 streams x 4 layers) per dtype, each checked against ReKV's rule written
    out from its code on the test's own record of the projections."""
    for dtype in (torch.float32, torch.bfloat16):
        model = _tiny_llm4(dtype)
        for seed in range(15):
            _, got, want, _ = _rekv_question_trial(model, seed)
            assert got == want, (dtype, seed)


def test_rekv_refuses_projections_that_are_not_the_pre_rope_tensors():
    from types import SimpleNamespace

    from vrex_lib.runtime.capture import attach_pre_rope

    attn = SimpleNamespace(q_proj=None, k_proj=None, k_norm=None)  # Qwen3-style q/k norm after the projection
    fake = SimpleNamespace(name="qk-norm-model", llm=SimpleNamespace(model=SimpleNamespace(
        layers=[SimpleNamespace(self_attn=attn)])))
    with pytest.raises(ValueError, match="qk-norm-model: its attention normalises q/k.*mode='legacy'"):
        attach_pre_rope(fake)
    pol = make_policy("rekv")
    pre = _rekv_stream(pol, torch.randn(HKV, 2 * TOK, D))
    pre[0][1] = _flat(torch.randn(HKV, TOK + 1, D))  # a capture of another step than the one observed
    with pytest.raises(ValueError, match="pre-RoPE keys hold 11 tokens, the step has 10"):
        pol.observe(0, torch.randn(HKV, TOK, D), 2 * TOK, "frame", 2)


def test_rekv_question_mode_retrieves_at_layer_0_other_modes_keep_it_dense(tiny4):
    from vrex_lib.runtime import StreamingSession

    for mode, applied0 in (("question", True), ("frame", False), ("legacy", False)):
        sess = StreamingSession(tiny4, make_policy("rekv", mode=mode, topk_blocks=1))
        sess.add_system_prompt("sys")
        for i in range(3):
            sess.add_frame_embeds(torch.randn(10, tiny4.hidden_size) * 0.02, float(i))
        sess.ask("q", max_new_tokens=2)
        tr = sess.trace()
        text = tr.step_mask("text")
        assert bool(tr["applied"][text][:, 0].any()) == applied0, mode
        assert bool(tr["applied"][text][:, 1:].any())  # every mode is consulted beyond layer 0


# ------------------------------------------------------------------------------------------------ InfiniGen


def test_skewing_matrix_hand_case():
    q = torch.tensor([[3.0, 0.0], [0.0, 1.0], [0.0, 0.0]])   # S_q = (3, 1), V_q = I (up to sign)
    k = torch.tensor([[0.0, 2.0], [1.0, 0.0]])                # S_k = (2, 1)
    a = skewing_matrix(q, k)
    # s = S_q·S_k = (6, 1); order = argsort ascending = (1, 0) -> A[:, 1] = V_q[:, 0], A[:, 0] = V_q[:, 1]
    assert torch.allclose(a.abs(), torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(40, 8, generator=g), torch.randn(30, 8, generator=g)
    a = skewing_matrix(q, k)
    assert torch.allclose(a @ a.T, torch.eye(8), atol=1e-5)
    assert torch.allclose((q @ a) @ (k @ a).T, q @ k.T, atol=1e-4)  # skewing keeps every logit


def test_partial_columns_union_of_query_and_key_tops():
    q = torch.tensor([[5.0, -1.0, 0.0, 0.0, 0.2], [1.0, 0.5, 0.1, 0.0, 0.0]])  # Σ|q| = (6, 1.5, .1, 0, .2)
    k = torch.tensor([[0.0, 0.0, 2.0, -4.0, 0.0]])                               # Σ|k| = (0, 0, 2, 4, 0)
    m = partial_columns(q, k, torch.eye(5), ratio=0.4)                           # int(5·0.4) = 2 per side
    assert m.tolist() == [True, True, True, True, False]
    m = partial_columns(q, q, torch.eye(5), ratio=0.4)                           # same tops: union of 2
    assert m.tolist() == [True, True, False, False, False]


def test_infinigen_calibration_cached_and_speculates_from_previous_layer(tiny4, tmp_path):
    from vrex_lib.runtime import StreamingSession

    cal = calibrate(tiny4, ratio=0.2, cache_dir=tmp_path)
    L, hkv, d = tiny4.n_layers, tiny4.n_kv_heads, tiny4.head_dim
    assert cal["A"].shape == (L, hkv, d, d) and cal["mask"].shape == (L, hkv, d)
    assert 0 < int(cal["mask"].sum(-1).min()) and int(cal["mask"].sum(-1).max()) <= 2 * int(d * 0.2)
    assert len(list(tmp_path.glob("*.pt"))) == 1
    again = calibrate(tiny4, ratio=0.2, cache_dir=tmp_path)
    assert again is cal or torch.equal(again["A"], cal["A"])

    pol = make_policy("infinigen")
    sess = StreamingSession(tiny4, pol)
    sess.add_system_prompt("s")
    ids = torch.randint(3, 200, (1, 12))
    for i in range(4):
        sess.add_frame_embeds(torch.randn(10, tiny4.hidden_size) * 0.02, float(i))
    sess.ask("what?", max_new_tokens=2)
    # the speculated query of layer 3: layer 2's attention input (post input-norm) × W_q of layer 3, rotated
    h2 = tiny4._vrex_attn_inputs[2][0]
    cos, sin = tiny4._vrex_attn_inputs[3][1]
    n = h2.shape[1]
    want = tiny4.llm.model.layers[3].self_attn.q_proj(h2)[0].reshape(n, -1, d).transpose(0, 1)
    want = rope(want.float(), cos[0].float(), sin[0].float())
    assert torch.allclose(pol.speculated_query(3, n), want, atol=1e-5)
    actual = tiny4.llm.model.layers[3].self_attn.q_proj(tiny4._vrex_attn_inputs[3][0])[0]
    assert not torch.allclose(actual.reshape(n, -1, d).transpose(0, 1).float(), want, atol=1e-3)
    # layers 0 and 1 dense (no selection stats), layers 2-3 select at text steps; frames never
    tr = sess.trace()
    text = tr.step_mask("text") & (tr["n_candidates"] > 0)
    k = tr.stats["k"][text]
    assert k.shape[1] == L and bool(torch.isnan(torch.as_tensor(k[:, :2])).all())
    assert bool(torch.isfinite(torch.as_tensor(k[:, 2:])).all())
    assert "k" not in tr.stats or bool(torch.isnan(torch.as_tensor(tr.stats["k"][tr.step_mask("frame")])).all())
    del ids


def test_infinigen_oracle_keeps_the_earlier_variant():
    pol = make_policy("infinigen", mode="oracle")
    assert pol.config["mode"] == "oracle"
    pol.reset(2, HKV, D)
    sel = pol.select(1, torch.randn(HQ, 1, D), torch.randn(HKV, 80, D), torch.arange(0, 70), "text")
    assert sel is not None and sel.stats["score_dims"] == round(0.2 * D)  # layer 1 selects: only layer 0 dense
    with pytest.raises(ValueError, match="needs its model"):
        p = make_policy("infinigen")
        p.reset(4, HKV, D)
        p.select(2, torch.randn(HQ, 1, D), torch.randn(HKV, 80, D), torch.arange(0, 70), "text")


def _infinigen_on(logits: torch.Tensor, n_tokens: int, **kw):
    """An InfiniGen policy whose partial logits are ``logits`` [Hkv, group·N, C] (hand-written), and its selection
    over C candidates for a step of ``n_tokens`` query tokens."""
    pol = make_policy("infinigen", mode="oracle", **kw)
    hkv, rows, c = logits.shape
    pol._logits = lambda layer, q, k, cand: (logits, 1)
    query = torch.zeros(hkv * rows // n_tokens, n_tokens, D)
    return pol._select(2, query, torch.zeros(hkv, c, D), torch.arange(c), fixed_topk=False)


def test_infinigen_threshold_per_head_or_at_head_0_hand_case():
    # one KV head, group 2, one token: rows = (query head 0, query head 1); alpha 5, cap 0.5 x 4 = 2
    logits = torch.tensor([[[10.0, 0.0, 0.0, 0.0],
                            [6.0, 5.5, 1.0, 0.0]]])
    # per head: head 0 counts {10} (>= 5), head 1 {6, 5.5, 1} (>= 1): mean 2 -> k 2
    assert _infinigen_on(logits, 1).stats["k"] == 2
    # head 0's maximum for both (kv_cache_mask's trailing [0]): thresholds 5 and 5 -> {10}, {6, 5.5}: mean 1.5 -> 1
    sel = _infinigen_on(logits, 1, threshold="head0")
    assert sel.stats["k"] == 1 and sel.indices[0].tolist() == [0]
    assert make_policy("infinigen", threshold="head0").config["threshold"] == "head0"
    with pytest.raises(ValueError, match="unknown threshold 'head1'"):
        make_policy("infinigen", threshold="head1")


def test_infinigen_head0_threshold_takes_the_same_tokens_row():
    pol = make_policy("infinigen", mode="oracle", threshold="head0")
    # 2 KV heads, group 2, 2 tokens: KV head g's rows are (h0 t0, h0 t1, h1 t0, h1 t1) of its group
    logits = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    m = pol.row_max(logits, 2)[..., 0]
    head0 = logits[0, :2].amax(-1)                                 # query head 0, tokens 0 and 1: 2, 5
    assert m.tolist() == [[2.0, 5.0, 2.0, 5.0]] * 2 and torch.equal(m[1, :2], head0)
    assert torch.equal(make_policy("infinigen", mode="oracle").row_max(logits, 2), logits.amax(-1, keepdim=True))


# ------------------------------------------------------------------------------------------------ prompt layout


def test_coin_prompt_layout_order_and_trace(tiny):
    from vrex_lib.runtime import StreamingSession
    from vrex_lib.config import RuntimeConfig

    sess = StreamingSession(tiny, None, RuntimeConfig(record_inputs=True))
    sess.add_system_prompt("SYS")
    sess.add_user_prompt("Q?")
    for i in range(2):
        sess.add_frame_embeds(torch.zeros(10, tiny.hidden_size), float(i))
    sess.answer(max_new_tokens=1)
    tr = sess.trace()
    assert tr.meta["prompt_layout"] == "coin"
    assert list(tr["kind"][:5]) == ["system", "question", "frame", "frame", "question"]
    texts = [tiny.decode(tiny.encode(t)) for t in ("\nUser: Q?", "\n[", ",", "]\nAssistant:")]
    n_user = len(tiny.encode(texts[0]))
    assert sess.n_sink == tr["n_new"][0] + n_user  # the prompt before the stream is pinned
    assert tr["n_new"][2] == len(tiny.encode("\n[")) + 10 and tr["n_new"][3] == len(tiny.encode(",")) + 10
    assert tr["n_new"][4] == len(tiny.encode("]\nAssistant:"))
    with pytest.raises(RuntimeError, match="prompt layout"):
        sess.ask("again?")
    live = StreamingSession(tiny, None)
    live.add_system_prompt("SYS")
    live.add_frame_embeds(torch.zeros(10, tiny.hidden_size), 0.0)
    live.ask("Q?", max_new_tokens=1)
    assert live.trace().meta["prompt_layout"] == "live"


# ------------------------------------------------------------------------------------------------ ratio (D7)


def _trace():
    import numpy as np

    from vrex_lib.runtime.trace import RetrievalTrace

    # 2 steps (frame stage), 2 layers (layer 0 dense: not applied), 1 KV head
    arrays = dict(kind=np.array(["frame", "frame"]), stage=np.array(["frame", "frame"]),
                  n_candidates=np.array([10, 30]), n_cache=np.array([40, 80]),
                  applied=np.array([[False, True], [False, True]]),
                  selected=np.array([[[10], [5]], [[30], [3]]]), attended=np.array([[[40], [35]], [[80], [53]]]))
    return RetrievalTrace({}, arrays)


def test_ratio_definitions_hand_computed():
    from vrex_lib.retrieval.ratio import ratio_table, retrieval_ratio

    tr = _trace()
    assert retrieval_ratio(tr, "frame") == pytest.approx(8 / 40)               # (5 + 3) / (10 + 30), layer 1 only
    assert retrieval_ratio(tr, "frame", "selected/candidates (step mean)") == pytest.approx((0.5 + 0.1) / 2)
    assert retrieval_ratio(tr, "frame", "attended/all") == pytest.approx((40 + 35 + 80 + 53) / (2 * 40 + 2 * 80))
    assert ratio_table([tr, tr], "frame")["selected/candidates"] == pytest.approx(0.2)
    assert tr.retrieval_ratio("frame") == pytest.approx(retrieval_ratio(tr, "frame"))  # the trace's own = D7
    with pytest.raises(ValueError, match="unknown retrieval-ratio definition"):
        retrieval_ratio(tr, "frame", "mean")


def test_wicsum_over_candidates_only_equals_resv_when_all_are_candidates():
    pol, ref = make_policy("resv_candwics"), make_policy("resv")
    g = torch.Generator().manual_seed(5)
    keys = torch.randn(HKV, 60, D, generator=g)
    for p in (pol, ref):
        p.reset(1, HKV, D)
        for f in range(6):
            p.observe(0, keys[:, f * TOK:(f + 1) * TOK], f * TOK, "frame", f)
    q = torch.randn(HQ, 2, D, generator=g)
    every = torch.arange(0, 60)
    a, b = pol.select(0, q, keys, every, "frame"), ref.select(0, q, keys, every, "frame")
    assert all(torch.equal(x, y) for x, y in zip(a.indices, b.indices))
    part = torch.arange(0, 30)
    c = pol.select(0, q, keys, part, "frame")
    assert all(set(i.tolist()) <= set(part.tolist()) for i in c.indices)


# ------------------------------------------------------------------------------------------------ eval: frames, layout


def test_frames_action_rules():
    from vrex_lib.eval import frames_action

    assert frames_action(1200, 1200, "videollm-online") == "keep"
    assert frames_action(1201, 1200, "videollm-online") == "cut"
    assert frames_action(1201, 1200, "skip") == "skip" and frames_action(1201, 1200, "clamp") == "clamp"
    assert frames_action(10**6, None, "videollm-online") == "keep"
    with pytest.raises(ValueError, match="unknown frames policy 'drop'"):
        frames_action(1, 1, "drop")


def _coin_copy(tmp_path, edit):
    import json
    import shutil

    from vrex_lib.config import REPO_ROOT

    root = tmp_path / "coin"
    shutil.copytree(REPO_ROOT / "data" / "coin_tiny", root)
    js = json.loads((root / "COIN.json").read_text())
    edit(js["database"])
    (root / "COIN.json").write_text(json.dumps(js))
    return root


def test_eval_cut_skip_and_short_video_are_logged(tiny, tmp_path):
    import csv

    from vrex_lib import eval as ev

    def short(db):  # tinyC's file is 12 s long: claim 30 s and a last step reaching 20 s
        db["tinyC-plane1"]["duration"] = 30.0
        db["tinyC-plane1"]["annotation"][2]["segment"] = [8.5, 20.0]

    root = _coin_copy(tmp_path, short)
    kw = dict(model=tiny, coin_root=str(root), max_new_tokens=2, progress=False, reference=None)
    out = ev.run_eval("step", "full", "full", tmp_path / "cut" / "step.jsonl", max_frames=7, **kw)
    rows = {r["sample_id"]: r for r in ev.read_jsonl(out)}
    assert len(rows) == 7  # every sample still counts (VideoLLM-online's max_frames_clip)
    cut = [r for r in rows.values() if r["frames_action"] == "cut"]
    assert cut and all(r["n_frames"] == 0 and r["n_frames_expected"] > 7 for r in cut)
    assert all(r["prompt_layout"] == "coin" for r in rows.values())
    log = list(csv.DictReader(open(out.with_name("step.skips.csv"))))
    assert sum(e["action"] == "cut" for e in log) == len(cut)
    # the short video (default max_frames 1,200): its last step is annotated with 24 frames (8.5 s .. 20 s), the
    # file's 2 fps video (ffmpeg -r 2: 26 frames, 12.5 s) has 9 -> the span is clamped to the decoded length
    # (VideoLLM-online's rule, D59), run on 9, logged with the counts
    full = ev.run_eval("step", "full", "full", tmp_path / "all" / "step.jsonl", **kw)
    r = {x["sample_id"]: x for x in ev.read_jsonl(full)}["step/tinyC-plane1/2"]
    assert r["frames_action"] == "keep" and (r["n_frames"], r["n_frames_expected"]) == (9, 9)
    log_all = list(csv.DictReader(open(full.with_name("step.skips.csv"))))
    assert [e["video_id"] for e in log_all if e["action"] == "short"] == ["tinyC-plane1"]
    assert "9 of 24 annotated frames" in [e for e in log_all if e["action"] == "short"][0]["reason"]
    out2 = ev.run_eval("step", "full", "full", tmp_path / "skip" / "step.jsonl", max_frames=7, frames_policy="skip",
                       **kw)
    assert len(ev.read_jsonl(out2)) == 7 - len(cut)
    log2 = list(csv.DictReader(open(out2.with_name("step.skips.csv"))))
    assert sum(e["action"] == "skip" and e["stage"] == "max_frames" for e in log2) == len(cut)


def test_eval_prompt_layout_and_metric_columns(tiny, tmp_path):
    from vrex_lib import eval as ev

    kw = dict(model=tiny, max_samples=1, max_new_tokens=2, progress=False, reference=None)
    coin_rec = ev.read_jsonl(ev.run_eval("procedure", "full", "smoke", tmp_path / "c" / "p.jsonl", **kw))[0]
    live_rec = ev.read_jsonl(ev.run_eval("procedure", "full", "smoke", tmp_path / "l" / "p.jsonl",
                                         prompt_layout="live", **kw))[0]
    assert coin_rec["prompt_layout"] == "coin" and live_rec["prompt_layout"] == "live"
    assert {"correct", "correct_strict"} <= set(coin_rec)
    # same frames, different token order: the cache lengths agree, the frame-step predictions need not
    assert coin_rec["n_frames"] == live_rec["n_frames"]
    with pytest.raises(ValueError, match="unknown prompt layout"):
        ev.run_eval("step", "full", "smoke", tmp_path / "x.jsonl", prompt_layout="chat", **kw)


def test_score_results_pools_procedure_steps_like_the_reference(tiny, tmp_path):
    import json

    from vrex_lib import coin
    from vrex_lib import eval as ev

    out = ev.run_eval("procedure", "full", "smoke", tmp_path / "p.jsonl", model=tiny, max_samples=2,
                      max_new_tokens=1, progress=False, reference=None)
    rows = ev.read_jsonl(out)
    samples = {s.sample_id: s for s in coin.build_task(coin.load_annotations(coin.dataset_paths("smoke")[0]),
                                                       "procedure", "testing")}
    # first sample answers its first two steps in the checkpoint's format, the second one line only
    a, b = (samples[r["sample_id"]] for r in rows)
    preds = ["\n".join(f"{k + 1}. {x}" for k, x in enumerate(a.targets[:2])), b.targets[0]]
    out.write_text("".join(json.dumps(dict(r, prediction=p)) + "\n" for r, p in zip(rows, preds)))
    c, t = coin.score_counts("procedure", preds, [a, b])
    assert t == 3 and ev.score_results(out, "smoke") == pytest.approx(100 * c / t)


def test_session_binds_members_of_a_composite_policy(tiny):
    from vrex_lib.runtime import StreamingSession

    class Composite(PolicyBase):
        name, retrieves_at_frame = "composite", True

        def __init__(self):
            self.policies = {"rekv": make_policy("rekv", mode="frame", topk_blocks=1)}

        def reset(self, *a):
            for p in self.policies.values():
                p.reset(*a)

        def observe(self, *a):
            for p in self.policies.values():
                p.observe(*a)

        def select(self, *a):
            return self.policies["rekv"].select(*a)

    comp = Composite()
    sess = StreamingSession(tiny, comp)
    sess.add_system_prompt("s")
    for i in range(3):
        sess.add_frame_embeds(torch.zeros(10, tiny.hidden_size), float(i))
    assert comp.policies["rekv"]._pre is tiny._vrex_pre_rope


def test_infinigen_speculation_leaves_rekv_pre_rope_capture_alone(tiny4):
    """Both in one shadow session (the workload measurement): InfiniGen(P)'s speculated query applies layer ℓ's W_q
    itself, which must not overwrite this step's q_proj output that ReKV scores (runtime/capture.py)."""
    from vrex_lib.config import RuntimeConfig
    from vrex_lib.runtime import StreamingSession
    from vrex_lib.workload.shadow import ShadowPolicy

    shadow = ShadowPolicy({"infinigen_p": make_policy("infinigen_p"), "rekv": make_policy("rekv", mode="frame")}, 1)
    sess = StreamingSession(tiny4, shadow, RuntimeConfig(kv_capacity=24), observers=[shadow])
    shadow.active = True
    sess.add_system_prompt("s")
    torch.manual_seed(1)
    for i in range(6):
        sess.add_frame_embeds(torch.randn(10, tiny4.hidden_size) * 0.02, float(i))
    picked = [r for r in shadow.records["rekv"] if r.stage == "frame" and r.sel.sum() > 0]
    assert picked, "ReKV selected nothing: the test no longer exercises the shared layers"
    q = tiny4._vrex_pre_rope[3][0]
    assert q.dim() == 3 and q.shape[1] == 11  # this step's tokens (interval + 10 frame tokens), with its batch dim
