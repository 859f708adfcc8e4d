"""vrex_lib.keys: post-RoPE Q/K capture through transformers' AttentionInterface."""
import pytest
import torch
from transformers import LlamaForCausalLM

from vrex_lib.keys import capture_qk, capture_qkv
from vrex_lib.llm_weights import tiny_llama_config


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return LlamaForCausalLM(tiny_llama_config()).eval()


def test_capture_matches_cache_and_leaves_model_unchanged(tiny):
    ids = torch.randint(3, 256, (1, 12))
    with torch.no_grad():
        ref = tiny(input_ids=ids, use_cache=True)
    impl = tiny.config._attn_implementation
    rec = capture_qkv(tiny, input_ids=ids[0])
    assert tiny.config._attn_implementation == impl
    assert sorted(rec) == [0, 1]
    q, k, v = rec[1]
    assert q.shape == (4, 12, 16) and k.shape == (2, 12, 16) and v.shape == (2, 12, 16)
    layer = ref.past_key_values.layers[1] if hasattr(ref, "past_key_values") and ref.past_key_values is not None \
        else ref.cache.layers[1]
    assert torch.allclose(k, layer.keys[0].float()) and torch.allclose(v, layer.values[0].float())  # post-RoPE
    with torch.no_grad():
        again = tiny(input_ids=ids).logits
    assert torch.equal(again, ref.logits)
    # the recorded q/k/v reproduce the layer's attention: causal softmax(q k^T / sqrt d) v, each query head
    # reading its GQA group's KV head, equals what layer 1's o_proj receives
    seen = {}
    hook = tiny.model.layers[1].self_attn.o_proj.register_forward_pre_hook(
        lambda mod, args: seen.__setitem__("attn", args[0].detach()))
    try:
        with torch.no_grad():
            tiny(input_ids=ids)
    finally:
        hook.remove()
    hq, t, d = q.shape
    group = hq // k.shape[0]
    scores = q @ k.repeat_interleave(group, 0).transpose(1, 2) / d ** 0.5
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    mine = (scores.softmax(-1) @ v.repeat_interleave(group, 0)).transpose(0, 1).reshape(t, hq * d)
    assert seen["attn"].shape == (1, t, hq * d)
    torch.testing.assert_close(mine, seen["attn"][0].float(), rtol=1e-4, atol=1e-5)
    only = capture_qk(tiny, inputs_embeds=tiny.get_input_embeddings()(ids)[0], layers=[0])
    assert list(only) == [0] and len(only[0]) == 2


def test_capture_rejects_bad_arguments(tiny):
    with pytest.raises(ValueError, match="exactly one"):
        capture_qk(tiny)
    with pytest.raises(ValueError, match="out of range"):
        capture_qk(tiny, input_ids=torch.tensor([5, 6]), layers=[7])


@pytest.mark.slow
def test_real_smollm2_keys_hash_tracks_cosine():
    """Fig. 7(b) on real keys: SmolLM2-135M layer 3 over the shipped public-domain text."""
    from vrex_lib.llm_weights import load_smollm2
    from vrex_lib.resv.analysis import cosine_hamming_correlation, load_text_ids

    model, tok = load_smollm2()
    ids = load_text_ids(tok, max_tokens=256)
    q, k = capture_qk(model, input_ids=ids, layers=[3])[3]
    assert q.shape == (9, 256, 64) and k.shape == (3, 256, 64)
    r = cosine_hamming_correlation(k, 32, "per_head", layer=3)
    assert 0.5 < r <= 1.0
