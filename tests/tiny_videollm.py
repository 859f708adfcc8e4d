"""Write a tiny random checkpoint in VideoLLM-online's layout, for tests of the full profile's real loader.

Three folders, as the full profile reads them (README "Running the full profile with real data"):

* ``llama/``: an HF Llama folder (``config.json``, ``model.safetensors``) with a tokenizer (``tokenizer.json``):
  a byte-level BPE over the 256 byte symbols with Llama-3's special-token names, built offline in milliseconds;
* ``siglip/``: an HF SigLIP folder holding a whole ``SiglipModel`` (text and vision towers), as
  google/siglip-large-patch16-384 does; the runtime loads its vision tower;
* ``videollm-tiny/``: a PEFT LoRA adapter as VideoLLM-online's training saves it (``get_peft_model`` over
  ``LiveLlamaForCausalLM`` with ``target_modules`` = every q/k/v/o/gate/up/down projection and ``lm_head``,
  ``modules_to_save=['connector']``): ``adapter_config.json`` and ``adapter_model.safetensors`` with
  ``base_model.model.<module>.lora_A.weight`` [r, in] / ``lora_B.weight`` [out, r] per target and
  ``base_model.model.connector.{0,2}.{weight,bias}``.

Seeded and deterministic; about a second once transformers is imported (its model classes are imported inside
the functions that build them, docs/DECISIONS.md D143). ``python tests/tiny_videollm.py DIR``
writes one (e.g. to try ``--profile full`` on a CPU).
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from vrex_lib.llm_weights import tiny_llama_config

R, ALPHA = 4, 8  # LoRA rank and alpha: scale alpha / r = 2
LORA_TARGETS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                "mlp.up_proj", "mlp.down_proj")
SPECIALS = ("<|begin_of_text|>", "<|eot_id|>")  # Llama-3-Instruct's bos and end-of-turn tokens
CONNECTOR_NAME = "videollm-tiny"


@dataclass(frozen=True)
class TinyVideoLLM:
    """The three folders (``llm``, ``vision``, ``connector``) and the CLI flags that name them."""

    llm: Path
    vision: Path
    connector: Path

    def flags(self) -> list[str]:
        return ["--llm-path", str(self.llm), "--vision-path", str(self.vision), "--connector-path", str(self.connector)]

    def kwargs(self) -> dict:
        return dict(llm_path=str(self.llm), vision_path=str(self.vision), connector_path=str(self.connector))


def _tokenizer():
    """A byte-level BPE tokenizer with no merges (every byte one token) plus Llama-3's two special tokens."""
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    for s in SPECIALS:
        vocab[s] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True) for s in SPECIALS])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIALS[0], eos_token=SPECIALS[1])


def _llama(folder: Path) -> None:
    from transformers import LlamaForCausalLM

    tok = _tokenizer()
    cfg = tiny_llama_config(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                            pad_token_id=None)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)


def _siglip(folder: Path) -> None:
    from transformers import SiglipConfig, SiglipModel

    vision = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, image_size=64,
                  patch_size=16)
    text = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=64,
                max_position_embeddings=16, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    SiglipModel(SiglipConfig(text_config=text, vision_config=vision)).save_pretrained(folder)


def _adapter(folder: Path, llm_folder: Path, vision_hidden: int) -> None:
    cfg = json.loads((llm_folder / "config.json").read_text())
    h, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd, hq, hkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    dims = {"self_attn.q_proj": (h, hq * hd), "self_attn.k_proj": (h, hkv * hd), "self_attn.v_proj": (h, hkv * hd),
            "self_attn.o_proj": (hq * hd, h), "mlp.gate_proj": (h, inter), "mlp.up_proj": (h, inter),
            "mlp.down_proj": (inter, h)}  # (in, out) of each target
    state = {}
    targets = [(f"model.layers.{i}.{t}", dims[t]) for i in range(cfg["num_hidden_layers"]) for t in LORA_TARGETS]
    for module, (n_in, n_out) in targets + [("lm_head", (h, vocab))]:
        state[f"base_model.model.{module}.lora_A.weight"] = 0.1 * torch.randn(R, n_in)
        state[f"base_model.model.{module}.lora_B.weight"] = 0.1 * torch.randn(n_out, R)
    for k, shape in (("0.weight", (h, vision_hidden)), ("0.bias", (h,)), ("2.weight", (h, h)), ("2.bias", (h,))):
        state[f"base_model.model.connector.{k}"] = 0.2 * torch.randn(*shape)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(state, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
    (folder / "adapter_config.json").write_text(json.dumps(dict(
        peft_type="LORA", task_type="CAUSAL_LM", base_model_name_or_path=llm_folder.name, r=R, lora_alpha=ALPHA,
        lora_dropout=0.05, bias="none", fan_in_fan_out=False, use_rslora=False, inference_mode=True,
        target_modules="model.*(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)|lm_head$",
        modules_to_save=["connector"]), indent=2))


def write_tiny_videollm(root: str | Path, seed: int = 0) -> TinyVideoLLM:
    """Write the three folders under ``root`` (see the module docstring); returns their paths."""
    root = Path(root)
    ck = TinyVideoLLM(root / "llama", root / "siglip", root / CONNECTOR_NAME)
    torch.manual_seed(seed)
    _llama(ck.llm)
    _siglip(ck.vision)
    _adapter(ck.connector, ck.llm, json.loads((ck.vision / "config.json").read_text())["vision_config"]["hidden_size"])
    return ck


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/tiny_videollm.py OUT_DIR")
    print(" ".join(write_tiny_videollm(sys.argv[1]).flags()))
