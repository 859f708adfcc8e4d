"""Streaming runtime: fidelity against a plain transformers forward, selection masking, KV accounting, traces."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from vrex_lib.config import RuntimeConfig
from vrex_lib.retrieval.base import PolicyBase, Selection
from vrex_lib.runtime import (ContextTooLarge, KVStore, StreamingSession, build_model, check_context, load_trace,
                              merge_lora, tokens_for, validate_full_paths)
from vrex_lib.runtime.model import frame_tokens


class SelectAll(PolicyBase):
    """Selects every candidate explicitly (exercises the per-head gather path)."""

    name, retrieves_at_frame = "select_all", True

    def reset(self, n_layers, n_kv_heads, head_dim):
        self.h = n_kv_heads

    def observe(self, layer, new_keys, start, stage, frame_id):
        pass

    def select(self, layer, query, keys, candidates, stage):
        return Selection([candidates.clone() for _ in range(self.h)], int(candidates.numel()), {"rows": 1})


class EvenPositions(SelectAll):
    """Same subset for every head: even cache positions (a plain forward can replay it as a 4D mask)."""

    name = "even"

    def select(self, layer, query, keys, candidates, stage):
        sel = candidates[candidates % 2 == 0]
        return Selection([sel.clone() for _ in range(self.h)], int(candidates.numel()))


class RandomHalf(SelectAll):
    """A seeded random half of the candidates per KV head; remembers what it chose."""

    name = "random_half"

    def reset(self, n_layers, n_kv_heads, head_dim):
        super().reset(n_layers, n_kv_heads, head_dim)
        self.g = torch.Generator().manual_seed(0)
        self.log = []

    def select(self, layer, query, keys, candidates, stage):
        idx = []
        for _ in range(self.h):
            keep = torch.rand(candidates.numel(), generator=self.g) < 0.5
            idx.append(candidates[keep])
        self.log.append((layer, keys.shape[1], idx))
        return Selection(idx, int(candidates.numel()), {"scored": [int(i.numel()) for i in idx], "note": "x"})


class OutOfRange(SelectAll):
    def select(self, layer, query, keys, candidates, stage):
        bad = torch.tensor([int(keys.shape[1]) - 1])  # the step's own last token is never a candidate
        return Selection([bad for _ in range(self.h)], int(candidates.numel()))


def _frames(n, seed=0, h=48, w=64):
    return np.random.default_rng(seed).integers(0, 256, (n, h, w, 3), dtype=np.uint8)


def _stream(model, policy, cfg, n_frames=6, question="what is it?", new_tokens=4):
    s = StreamingSession(model, policy, cfg)
    s.add_system_prompt("sys prompt")
    logits = []
    for i, f in enumerate(_frames(n_frames)):
        s.add_frame(f, t=i / 2)
        logits.append(s.next_token_logits().clone())
    if new_tokens is not None:
        s.ask(question, max_new_tokens=new_tokens)
    return s, logits


def _plain_logits(model, inputs, mask=None):
    emb = torch.cat(inputs)[None]
    with torch.inference_mode():
        return model.llm(inputs_embeds=emb, attention_mask=mask).logits[0].float()


@pytest.mark.parametrize("policy", [None, SelectAll()], ids=["no-policy", "select-all"])
def test_full_attention_equals_plain_forward(tiny, policy):
    s, frame_logits = _stream(tiny, policy, RuntimeConfig(record_inputs=True, strict=True))
    ref = _plain_logits(tiny, s.inputs)
    ends = np.cumsum([x.shape[0] for x in s.inputs]) - 1
    kinds = list(s.trace()["kind"])
    fi = [e for e, k in zip(ends, kinds) if k == "frame"]
    for got, pos in zip(frame_logits, fi):
        torch.testing.assert_close(got, ref[pos], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(s.next_token_logits(), ref[ends[-1]], rtol=1e-4, atol=1e-5)
    tr = s.trace()
    if policy is not None:
        assert tr.retrieval_ratio("frame") == 1.0 and tr.retrieval_ratio("text") == 1.0
        assert np.isfinite(tr.stats["rows"]).any()


def test_flexgen_equals_full(tiny):
    from vrex_lib.retrieval import POLICIES

    a, _ = _stream(tiny, None, RuntimeConfig())
    b, _ = _stream(tiny, POLICIES["flexgen"](), RuntimeConfig(strict=True))
    torch.testing.assert_close(a.next_token_logits(), b.next_token_logits(), rtol=1e-4, atol=1e-5)
    assert a.last_answer["ids"] == b.last_answer["ids"]


def test_selection_masking_matches_4d_mask_forward(tiny):
    """Attending to sinks ∪ even candidates ∪ recent window ∪ own (causal) == a plain forward with that mask."""
    cfg = RuntimeConfig(record_inputs=True, dense_layers=0, recent_frames=2, strict=True)
    s, _ = _stream(tiny, EvenPositions(), cfg, n_frames=5)
    tr = s.trace()
    n = s.n_tokens
    mask = torch.zeros(n, n, dtype=torch.bool)
    for st, nn_, sink, ws in zip(tr["start"], tr["n_new"], tr["n_sink"], tr["window_start"]):
        for i in range(nn_):
            row = st + i
            mask[row, :sink] = True
            mask[row, sink:ws] = torch.arange(sink, ws) % 2 == 0
            mask[row, ws:row + 1] = True
    ref = _plain_logits(tiny, s.inputs, mask[None, None])
    torch.testing.assert_close(s.next_token_logits(), ref[-1], rtol=1e-4, atol=1e-5)
    full = _plain_logits(tiny, s.inputs)
    assert not torch.allclose(full[-1], ref[-1], atol=1e-3), "the mask must change something for this test to bite"
    assert 0.4 < tr.retrieval_ratio("frame") < 0.6


def test_accounting_adds_up(tiny):
    cfg = RuntimeConfig(kv_capacity=40, measure_attn_error=True, strict=True)
    pol = RandomHalf()
    s, _ = _stream(tiny, pol, cfg, n_frames=8)
    tr = s.trace()
    L, H = tiny.n_layers, tiny.n_kv_heads
    assert tr["selected"].shape == (tr.n_steps, L, H)
    for k in range(tr.n_steps):
        S = tr["n_cache"][k]
        always = tr["n_sink"][k] + (S - tr["window_start"][k])
        for layer in range(L):
            att = tr["attended"][k, layer]
            assert (tr["device_tokens"][k, layer] + tr["host_tokens"][k, layer] == att).all()
            if tr["applied"][k, layer]:
                assert (att == always + tr["selected"][k, layer]).all()
            else:
                assert (att == S).all() and (tr["selected"][k, layer] == tr["n_candidates"][k]).all()
    # host tokens: exactly the attended positions older than the newest kv_capacity (sinks pinned on device)
    applied = [(k, l) for k in range(tr.n_steps) for l in range(L) if tr["applied"][k, l]]
    assert len(applied) == len(pol.log)
    for (k, layer), (lay, S, idx) in zip(applied, pol.log):
        assert lay == layer and S == tr["n_cache"][k]
        recent = torch.arange(tr["window_start"][k], S)
        for g in range(H):
            att = torch.cat([idx[g], recent])  # sinks are pinned on device
            exp = int(((att >= tr["n_sink"][k]) & (att < max(tr["n_sink"][k], S - 40))).sum())
            assert tr["host_tokens"][k, layer, g] == exp
    assert tr["host_tokens"].sum() > 0
    sel = tr["selected"][tr["applied"]].sum()
    cand = (tr["applied"] * tr["n_candidates"][:, None]).sum() * H
    assert tr.retrieval_ratio() == pytest.approx(sel / cand)
    np.testing.assert_array_equal(tr.bytes("host"), tr["host_tokens"] * 2 * tiny.head_dim * 4)
    np.testing.assert_array_equal(tr.bytes("host", paper_dtype=True), tr["host_tokens"] * 2 * tiny.head_dim * 2)
    llama = tr.bytes_as_model("host")
    assert llama.shape == (tr.n_steps,) and llama.sum() == pytest.approx(tr["host_tokens"].mean((1, 2)).sum() * 131072)
    err = tr["attn_err"][tr["applied"]]
    assert np.isfinite(err).all() and (err > 0).any()
    assert tr.stats["scored"].shape == (tr.n_steps, L, H)


def test_teacher_forcing_and_multi_turn(tiny):
    s, _ = _stream(tiny, None, RuntimeConfig(), new_tokens=5)
    ids = s.last_answer["ids"]
    t, _ = _stream(tiny, RandomHalf(), RuntimeConfig(), new_tokens=None)
    t.ask("what is it?", max_new_tokens=5, force_ids=ids)
    assert t.last_answer["forced"] and len(t.last_answer["agreement"]) == len(ids)
    u, _ = _stream(tiny, None, RuntimeConfig(), new_tokens=None)
    u.ask("what is it?", max_new_tokens=5, force_ids=ids)
    assert u.last_answer["agreement"] == [1] * len(ids), "the full policy reproduces its own greedy answer"
    n = u.n_tokens
    u.add_frame(_frames(1, seed=3)[0])  # frames after an answer: <eos>\n[ + frame tokens
    assert u.n_tokens == n + 1 + len(tiny.encode("\n[")) + 10
    u.ask("and now?", max_new_tokens=2)
    assert list(u.trace()["kind"]).count("question") == 2


def test_selection_outside_candidates_is_an_error(tiny):
    with pytest.raises(ValueError, match="outside the candidates"):
        _stream(tiny, OutOfRange(), RuntimeConfig(), n_frames=3)


def test_trace_roundtrip(tiny, tmp_path):
    s, _ = _stream(tiny, RandomHalf(), RuntimeConfig(), n_frames=4)
    tr = s.trace()
    p = tr.save(tmp_path / "t.npz")
    back = load_trace(p)
    for k, v in tr.arrays.items():
        np.testing.assert_array_equal(back[k], v)
    assert back.meta["n_kv_heads"] == tiny.n_kv_heads and back.meta["policy"] == "random_half"
    df = back.to_frame()
    assert len(df) == tr.n_steps * tiny.n_layers * tiny.n_kv_heads and "stat_scored" in df
    assert set(df["stage"]) == {"frame", "text"}
    # a file from another schema version is refused with a clear message
    z = dict(np.load(p))
    z["meta_json"] = np.array(json.dumps({**back.meta, "schema_version": 99}))
    np.savez(tmp_path / "old.npz", **z)
    with pytest.raises(ValueError, match="schema version"):
        load_trace(tmp_path / "old.npz")


def test_kvstore_growth_and_gather():
    st = KVStore(2, 2, 4, capacity=100, bytes_per_elem=4)
    ks = [torch.randn(1, 2, 150, 4) for _ in range(3)]
    for k in ks:
        out, _ = st.update(k, k + 1, 0)
    full = torch.cat(ks, 2)
    torch.testing.assert_close(out, full)
    st.n_sink = 5
    st.new_step()
    idx = [torch.tensor([0, 4, 5, 349, 350, 449]), torch.tensor([200])]
    (k0, v0), (k1, _) = st.gather(0, idx)
    torch.testing.assert_close(k0, full[0, 0, idx[0]])
    torch.testing.assert_close(v0, full[0, 0, idx[0]] + 1)
    # 450 tokens, capacity 100 -> host = [5, 350): positions 5 and 349 and 200 are offloaded
    assert st.ledger.host_tokens[0].tolist() == [2, 1] and st.ledger.device_tokens[0].tolist() == [4, 0]
    assert st.bytes_per_token_head == 2 * 4 * 4


def test_frame_tokens_shape(tiny):
    emb = tiny.embed_frames(_frames(3, h=30, w=50))
    assert emb.shape == (3, 10, tiny.hidden_size)
    lhs = torch.arange(2 * 16 * 1, dtype=torch.float32).reshape(2, 16, 1)
    ft = frame_tokens(lhs, torch.zeros(2, 1))
    assert ft.shape == (2, 10, 1) and ft[0, 0, 0] == 0
    with pytest.raises(ValueError, match="uint8"):
        tiny.embed_frames(np.zeros((2, 8, 8, 3), np.float32))


def test_context_guard(tiny):
    check_context(tiny, tokens_for(10), RuntimeConfig())
    with pytest.raises(ContextTooLarge, match="max_position_embeddings"):
        check_context(tiny, 10**7, RuntimeConfig())
    with pytest.raises(ContextTooLarge, match="GiB"):
        check_context(tiny, 1000, RuntimeConfig(max_kv_bytes=1000))


def test_merge_lora_and_full_path_checks(tiny, tmp_path):
    from safetensors.torch import save_file

    llm = tiny.llm
    w = llm.model.layers[0].self_attn.q_proj.weight.detach().clone()
    a, b = torch.randn(4, w.shape[1]), torch.randn(w.shape[0], 4)
    st = {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": a,
          "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": b}
    try:
        assert merge_lora(llm, st, alpha=8, r=4) == 1
        torch.testing.assert_close(llm.model.layers[0].self_attn.q_proj.weight, w + 2 * b @ a)
    finally:
        llm.model.layers[0].self_attn.q_proj.weight.data.copy_(w)
    with pytest.raises(ValueError, match="no target"):
        merge_lora(llm, {"base_model.model.model.nope.lora_A.weight": a,
                         "base_model.model.model.nope.lora_B.weight": b}, alpha=1, r=1)
    # path checks: missing folder, wrong architecture, connector shape mismatch -> clear errors before loading
    with pytest.raises(ValueError, match="--llm-path"):
        validate_full_paths(None, tmp_path, tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        validate_full_paths(tmp_path / "nope", tmp_path, tmp_path)
    llm_d, vis_d, ck_d = (tmp_path / n for n in ("llm", "vis", "ck"))
    for d in (llm_d, vis_d, ck_d):
        d.mkdir()
    (llm_d / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    (vis_d / "config.json").write_text(json.dumps({"model_type": "siglip", "vision_config": {
        "model_type": "siglip_vision_model", "hidden_size": 32}}))
    (ck_d / "adapter_config.json").write_text(json.dumps({"r": 4, "lora_alpha": 8}))
    save_file({"base_model.model.connector.0.weight": torch.zeros(64, 16)}, str(ck_d / "adapter_model.safetensors"))
    with pytest.raises(ValueError, match="does not match"):
        validate_full_paths(llm_d, vis_d, ck_d)
    save_file({"base_model.model.connector.0.weight": torch.zeros(64, 32)}, str(ck_d / "adapter_model.safetensors"))
    assert validate_full_paths(llm_d, vis_d, ck_d)["adapter"]["r"] == 4
    (llm_d / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 64}))
    with pytest.raises(ValueError, match="model_type"):
        validate_full_paths(llm_d, vis_d, ck_d)


def test_plain_forward_unaffected_by_registration(tiny):
    """With no session attached the registered attention is transformers' SDPA (shared SmolLM2 safety)."""
    x = torch.randn(1, 7, tiny.hidden_size)
    with torch.inference_mode():
        a = tiny.llm(inputs_embeds=x).logits
        tiny.llm.set_attn_implementation("sdpa")
        b = tiny.llm(inputs_embeds=x).logits
        tiny.llm.set_attn_implementation("vrex")
    torch.testing.assert_close(a, b)


@pytest.mark.slow
def test_default_profile_smollm2_full_matches_plain_forward():
    model = build_model("default")
    s = StreamingSession(model, None, RuntimeConfig(record_inputs=True))
    s.add_system_prompt()
    s.add_frames(_frames(4, h=120, w=160))
    s.ask("What is the action in the video?", max_new_tokens=3)
    ref = _plain_logits(model, s.inputs)
    torch.testing.assert_close(s.next_token_logits(), ref[-1], rtol=1e-3, atol=1e-3)
    assert model.n_layers == 30 and model.n_kv_heads == 3 and model.head_dim == 64


class SlidingHalf(SelectAll):
    """Deterministic: per KV head g, the first ``k`` candidates from offset (step counter + g) -- consecutive
    applied steps of a stage overlap in exactly k - 1 positions while the candidate range allows it."""

    name, k = "sliding", 6

    def reset(self, n_layers, n_kv_heads, head_dim):
        super().reset(n_layers, n_kv_heads, head_dim)
        self.calls = {}

    def select(self, layer, query, keys, candidates, stage):
        c = self.calls[(stage, layer)] = self.calls.get((stage, layer), -1) + 1
        return Selection([candidates[c + g:c + g + self.k].clone() for g in range(self.h)], int(candidates.numel()))


def test_reuse_counts_overlap_with_previous_step_of_same_stage(tiny, tmp_path):
    s, _ = _stream(tiny, SlidingHalf(), RuntimeConfig(strict=True), n_frames=8, new_tokens=5)
    tr = s.trace()
    H = tiny.n_kv_heads
    # Expected, replayed from the trace: per (stage, layer) the previous applied step's selection.
    prev: dict = {}
    n_checked = 0
    for k in range(tr.n_steps):
        st, cand = tr["stage"][k], np.arange(tr["n_sink"][k], tr["window_start"][k])
        for layer in range(tiny.n_layers):
            if not tr["applied"][k, layer]:
                assert (tr["reused"][k, layer] == -1).all()
                continue
            c = sum(1 for kk in range(k) if tr["stage"][kk] == st and tr["applied"][kk, layer])
            cur = [set(cand[c + g:c + g + SlidingHalf.k].tolist()) for g in range(H)]
            if (st, layer) in prev:
                exp = [len(cur[g] & prev[(st, layer)][g]) for g in range(H)]
                np.testing.assert_array_equal(tr["reused"][k, layer], exp)
                n_checked += 1
            else:
                assert (tr["reused"][k, layer] == -1).all()
            prev[(st, layer)] = cur
    assert n_checked > 0
    # Frame steps: candidates grow by a frame per step, so every repeat selection overlaps in k - 1 positions.
    fr = tr.step_mask("frame")[:, None, None] & tr["applied"][:, :, None] & (tr["reused"] >= 0)
    assert fr.any() and (tr["reused"][fr] == SlidingHalf.k - 1).all()
    assert tr.reuse_fraction("frame") == pytest.approx((SlidingHalf.k - 1) / SlidingHalf.k)
    assert 0 < tr.reuse_fraction("text") <= 1 and tr.reuse_fraction(by="head").shape == (tiny.n_layers, H)
    assert np.isnan(tr.reuse_fraction(by="layer")[0]), "layer 0 is dense: never applied"
    # save/load keeps it; a schema-1 file (no ``reused``) still loads, with reuse unknown
    back = load_trace(tr.save(tmp_path / "t.npz"))
    np.testing.assert_array_equal(back["reused"], tr["reused"])
    z = dict(np.load(tmp_path / "t.npz"))
    del z["a_reused"]
    z["meta_json"] = np.array(json.dumps({**back.meta, "schema_version": 1}))
    np.savez(tmp_path / "v1.npz", **z)
    old = load_trace(tmp_path / "v1.npz")
    assert (old["reused"] == -1).all() and np.isnan(old.reuse_fraction("frame"))
    assert old.retrieval_ratio("frame") == pytest.approx(tr.retrieval_ratio("frame"))


def test_select_all_reuses_everything_it_selected_before(tiny):
    tr = _stream(tiny, SelectAll(), RuntimeConfig(), n_frames=5)[0].trace()
    # Each frame step selects all candidates; the previous step's candidates are a prefix of this step's.
    m = tr.step_mask("frame")
    prev_cand = {}
    for k in np.nonzero(m)[0]:
        for layer in np.nonzero(tr["applied"][k])[0]:
            if layer in prev_cand:
                assert (tr["reused"][k, layer] == prev_cand[layer]).all()
            prev_cand[layer] = tr["n_candidates"][k]
    assert 0 < tr.reuse_fraction("frame") < 1


def test_a_policy_without_the_hooks_is_refused_naming_the_base_class(tiny):
    class Bare:  # reset/observe/select only: the optional hooks of the protocol are missing
        name, retrieves_at_frame = "bare", False

        def reset(self, n_layers, n_kv_heads, head_dim):
            pass

        def observe(self, layer, new_keys, start, stage, frame_id):
            pass

        def select(self, layer, query, keys, candidates, stage):
            return None

    with pytest.raises(TypeError, match=r"Bare is not a RetrievalPolicy \(missing: retrieval_from_layer, policies, "
                                        r"tables, bind, bind_store\); derive it from .*PolicyBase"):
        StreamingSession(tiny, Bare())


def test_the_runtime_calls_the_policy_hooks_and_never_probes_for_them():
    """The hooks are declared in RetrievalPolicy with defaults in PolicyBase: no hasattr/getattr on a hook name."""
    import re
    from pathlib import Path

    import vrex_lib

    pkg = Path(vrex_lib.__file__).parent
    probe = re.compile(r"""(hasattr|getattr)\([^)]*["'](bind|bind_store|retrieval_from_layer|tables|policies)["']""")
    files = [*sorted((pkg / "runtime").glob("*.py")), pkg / "workload" / "shadow.py", pkg / "longctx" / "policy.py"]
    found = [f"{f.relative_to(pkg)}:{i}" for f in files for i, ln in enumerate(f.read_text().splitlines(), 1)
             if probe.search(ln)]
    assert not found, found
