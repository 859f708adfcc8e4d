"""A VideoLLM-online-shaped streaming video LLM on Hugging Face transformers.

    frames uint8 [T, H, W, 3] ── SigLIP vision tower ──► last_hidden_state [T, P, Hv], pooler_output [T, Hv]
        ── per frame: CLS (SigLIP's attention-pooling head output, as VideoLLM-online's ``_siglip_vision_encode``
           uses ``pooler_output``: SigLIP has no CLS token) + 3×3 adaptive-average-pooled patch grid = 10 tokens
        ── MLP connector (Linear → GELU → Linear, VideoLLM-online's ``connector``) ──► [T, 10, hidden]
        ── Llama decoder (frames are prefilled one at a time by :class:`~vrex_lib.runtime.session.StreamingSession`)

One code path, three builds (:func:`build_model`):

* ``full``: the user's Llama-3-8B-Instruct + SigLIP-L/16-384 + the VideoLLM-online checkpoint (a PEFT LoRA
  adapter holding the connector), all from local paths. peft is not a dependency: the LoRA deltas are merged
  into the base weights here (W += α/r · B·A), which is what ``PeftModel.merge_and_unload`` does.
* ``default``: the real SmolLM2-135M-Instruct (offline, :func:`vrex_lib.llm_weights.load_smollm2`), the
  content-preserving patch-embedding stand-in for the vision tower (``vision='patch-dct'``,
  :mod:`vrex_lib.runtime.vision`, docs/DECISIONS.md D40) and a seeded connector; ``vision='siglip-random'``
  keeps the earlier small randomly initialised SigLIP.
* ``smoke``: a tiny random Llama + tiny SigLIP (or ``vision='patch-dct'``) + a byte-level toy tokenizer (CI speed).

The untrained connector of ``default``/``smoke`` is rescaled once (seeded, deterministic) so its outputs have
the RMS of the LLM's token embeddings: the decoder then sees inputs of the scale it was trained on.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

from ..config import arg_name
from ..llm_weights import load_smollm2, tiny_llama_config
from .attention import ATTN_IMPL, register
from .vision import VISION_ENCODERS, PatchEmbedEncoder, smooth_calibration_frames

# transformers' model classes are imported inside the builds: importing one loads transformers.modeling_utils
# (~4 s on the 2-core machine), which code that only reads traces or checks paths should not pay.

FRAME_POOL = (3, 3)  # VideoLLM-online live1+: CLS + 3x3 pooled = 10 tokens per frame
FRAME_TOKENS = 1 + FRAME_POOL[0] * FRAME_POOL[1]
SIGLIP_MEAN = SIGLIP_STD = 0.5  # SigLIP normalisation (VideoLLM-online's _siglip_vision_encode)


class ByteTokenizer:
    """A byte-level toy tokenizer for the smoke profile: ids 0 pad, 1 bos, 2 eos, byte b -> b + 3."""

    pad_token_id, bos_token_id, eos_token_id = 0, 1, 2
    bos_token, eos_token = "<s>", "</s>"
    vocab_size = 259

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = [b + 3 for b in text.encode("utf-8")]
        return [self.bos_token_id] + ids if add_special_tokens else ids

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return bytes(int(i) - 3 for i in ids if int(i) >= 3).decode("utf-8", errors="replace")

    def __len__(self) -> int:
        return self.vocab_size


def make_connector(vision_hidden: int, hidden: int) -> nn.Sequential:
    """VideoLLM-online's connector: Linear(Hv, H) -> GELU -> Linear(H, H)."""
    return nn.Sequential(nn.Linear(vision_hidden, hidden, bias=True), nn.GELU(), nn.Linear(hidden, hidden, bias=True))


@dataclass
class StreamingVideoLLM:
    """The model the runtime streams through. ``llm`` is a ``LlamaForCausalLM``-like decoder.

    Attributes: llm, tokenizer, vision (``SiglipVisionModel`` or the stand-in ``PatchEmbedEncoder``), connector
    (``nn.Sequential``), name (build tag), image_size (vision input side, pixels), vision_name (which encoder).
    """

    llm: nn.Module
    tokenizer: object
    vision: nn.Module
    connector: nn.Module
    name: str
    image_size: int
    vision_name: str = "siglip"

    # ---- shapes --------------------------------------------------------------------------------------------
    @property
    def config(self):
        return self.llm.config

    @property
    def n_layers(self) -> int:
        return int(self.config.num_hidden_layers)

    @property
    def n_kv_heads(self) -> int:
        return int(self.config.num_key_value_heads)

    @property
    def n_q_heads(self) -> int:
        return int(self.config.num_attention_heads)

    @property
    def head_dim(self) -> int:
        return int(getattr(self.config, "head_dim", None) or self.config.hidden_size // self.n_q_heads)

    @property
    def hidden_size(self) -> int:
        return int(self.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return next(self.llm.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.llm.parameters()).dtype

    @property
    def kv_bytes_per_elem(self) -> int:
        return torch.finfo(self.dtype).bits // 8

    @property
    def eos_token_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    @property
    def bos_token_id(self) -> int | None:
        b = getattr(self.tokenizer, "bos_token_id", None)
        return None if b is None else int(b)

    # ---- embeddings ----------------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    @torch.inference_mode()
    def embed_text(self, ids: list[int] | torch.Tensor) -> torch.Tensor:
        """Token ids [N] -> input embeddings [N, hidden]."""
        ids = torch.as_tensor(ids, dtype=torch.long, device=self.device)
        return self.llm.get_input_embeddings()(ids)

    @torch.inference_mode()
    def embed_frames(self, frames) -> torch.Tensor:
        """Frames uint8 [T, H, W, 3] (numpy or torch) -> frame tokens [T, 10, hidden] in the LLM's dtype.

        Each frame is zero-padded to a square (as VideoLLM-online's preprocessing pads to max side 384) and
        resized to the vision tower's input size.
        """
        x = torch.as_tensor(frames)
        if x.ndim != 4 or x.shape[-1] != 3 or x.dtype != torch.uint8:
            raise ValueError(f"embed_frames expects uint8 frames [T, H, W, 3], got {tuple(x.shape)} {x.dtype}")
        vdev = next(self.vision.parameters()).device
        vdtype = next(self.vision.parameters()).dtype
        x = x.to(vdev).permute(0, 3, 1, 2).float()  # [T, 3, H, W]
        h, w = x.shape[-2:]
        s = max(h, w)
        if h != w:
            x = F.pad(x, (0, s - w, 0, s - h))
        if s != self.image_size:
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear", antialias=True,
                              align_corners=False)
        x = ((x / 255.0 - SIGLIP_MEAN) / SIGLIP_STD).to(vdtype)
        out = self.vision(pixel_values=x)
        tokens = frame_tokens(out.last_hidden_state, out.pooler_output)  # [T, 10, Hv]
        cdtype = next(self.connector.parameters()).dtype
        emb = self.connector(tokens.to(device=next(self.connector.parameters()).device, dtype=cdtype))
        return emb.to(device=self.device, dtype=self.dtype)


def frame_tokens(last_hidden_state: torch.Tensor, pooler_output: torch.Tensor | None) -> torch.Tensor:
    """SigLIP outputs -> per-frame tokens [T, 1 + 3*3, Hv]: CLS (pooler output) then the pooled patch grid."""
    t, p, hv = last_hidden_state.shape
    s = int(math.isqrt(p))
    if s * s != p:
        raise ValueError(f"vision tower returned {p} patch tokens, not a square grid")
    grid = last_hidden_state.reshape(t, s, s, hv).permute(0, 3, 1, 2)
    pooled = F.adaptive_avg_pool2d(grid, FRAME_POOL).flatten(2).transpose(1, 2)  # [T, 9, Hv]
    cls = pooler_output if pooler_output is not None else last_hidden_state.mean(1)
    return torch.cat([cls[:, None], pooled], dim=1)


# ---------------------------------------------------------------------------------------------------------------
# builds
# ---------------------------------------------------------------------------------------------------------------
def _tiny_siglip(hidden: int, layers: int, heads: int, image_size: int):
    from transformers import SiglipVisionConfig, SiglipVisionModel

    cfg = SiglipVisionConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                             intermediate_size=4 * hidden, image_size=image_size, patch_size=16)
    return SiglipVisionModel(cfg).eval()


def _vision(kind: str, siglip_dims: tuple[int, int, int], image_size: int) -> tuple[nn.Module, int, str]:
    """(vision module, its hidden size, its name) for ``build_model(vision=kind)``."""
    if kind == "patch-dct":
        enc = PatchEmbedEncoder(k=8, image_size=image_size).eval()
        return enc, enc.hidden_size, kind
    if kind == "siglip-random":
        return _tiny_siglip(*siglip_dims, image_size), siglip_dims[0], kind
    raise ValueError(f"build_model: unknown vision encoder {kind!r}; choose one of {', '.join(VISION_ENCODERS)}")


@torch.inference_mode()
def _match_embedding_rms(model: StreamingVideoLLM, seed: int) -> None:
    """Rescale the untrained connector's last layer so frame tokens have the RMS of the token embeddings.

    Calibrated on seeded noise frames for the random SigLIP (as before) and on seeded smooth frames for the
    patch-embedding stand-in, whose pooled tokens of white noise would be near zero (patches cancel out).
    """
    g = torch.Generator().manual_seed(seed)
    if model.vision_name == "patch-dct":
        frames = smooth_calibration_frames(8, model.image_size, seed)
    else:
        frames = torch.randint(0, 256, (4, model.image_size, model.image_size, 3), generator=g, dtype=torch.uint8)
    emb = model.embed_frames(frames).float()
    target = model.llm.get_input_embeddings().weight.float().pow(2).mean().sqrt()
    scale = float(target / emb.pow(2).mean().sqrt().clamp_min(1e-12))
    last = model.connector[-1]
    last.weight.mul_(scale)
    last.bias.mul_(scale)


def build_model(profile: str, *, llm_path: str | Path | None = None, vision_path: str | Path | None = None,
                connector_path: str | Path | None = None, device: str | torch.device | None = None,
                dtype: torch.dtype | str | None = None, seed: int = 0,
                vision: str | None = None) -> StreamingVideoLLM:
    """Build the streaming video LLM of a profile ('smoke', 'default', 'full'); see the module docstring.

    ``full`` needs ``llm_path`` (Llama-3-8B-Instruct HF folder), ``vision_path`` (siglip-large-patch16-384 HF
    folder) and ``connector_path`` (VideoLLM-online checkpoint folder: adapter_config.json +
    adapter_model.safetensors); every path and shape is checked before any weight is loaded. In ``default`` an
    ``llm_path`` replaces SmolLM2 by any local Llama-family HF folder.

    ``vision`` (default and smoke only): 'patch-dct' (the stand-in of :mod:`vrex_lib.runtime.vision`; the default
    profile's default) or 'siglip-random' (a seeded random SigLIP tower; the smoke profile's default). The full
    profile always uses the user's pretrained SigLIP-L/16-384.
    """
    register()
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    if profile == "smoke":
        from transformers import LlamaForCausalLM

        torch.manual_seed(seed)
        tok = ByteTokenizer()
        llm = LlamaForCausalLM(tiny_llama_config(vocab_size=tok.vocab_size)).eval()
        enc, hv, vname = _vision(vision or "siglip-random", (32, 1, 2), 64)
        model = StreamingVideoLLM(llm, tok, enc, make_connector(hv, llm.config.hidden_size), "tiny-llama", 64, vname)
        _match_embedding_rms(model, seed)
    elif profile == "default":
        if llm_path:
            llm, tok = _load_hf_llm(Path(llm_path), dtype or torch.float32)
            name = Path(llm_path).name
        else:
            llm, tok = load_smollm2("float32" if dtype is None else str(dtype).replace("torch.", ""))
            name = "SmolLM2-135M-Instruct"
        torch.manual_seed(seed)
        enc, hv, vname = _vision(vision or "patch-dct", (192, 4, 3), 224)
        model = StreamingVideoLLM(llm, tok, enc, make_connector(hv, llm.config.hidden_size), name, 224, vname)
        model.connector.to(model.dtype)
        _match_embedding_rms(model, seed)
    elif profile == "full":
        if vision not in (None, "siglip"):
            raise ValueError(f"build_model: the full profile uses the pretrained SigLIP-L/16-384 (--vision-path); "
                             f"vision={vision!r} applies to the smoke and default profiles only")
        model = _build_full(llm_path, vision_path, connector_path, dtype or torch.bfloat16)
    else:
        raise ValueError(f"build_model: unknown profile {profile!r}; choose smoke, default or full")
    if device is not None:
        model.llm.to(device)
        model.vision.to(device)
        model.connector.to(device)
    for m in (model.llm, model.vision, model.connector):
        m.eval()
        m.requires_grad_(False)
    # Shared SmolLM2 instance: only the attention implementation name changes; with no runtime step attached the
    # registered function is exactly transformers' SDPA, so other users of the shared model are unaffected.
    model.llm.set_attn_implementation(ATTN_IMPL)
    return model


def _load_hf_llm(path: Path, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _require_file(path / "config.json", f"the LLM folder ({arg_name('--llm-path')}) must be a Hugging Face model "
                  "folder")
    _read_json(path / "config.json", arg_name("--llm-path"))
    llm = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    tok = AutoTokenizer.from_pretrained(path)
    return llm, tok


def _require_file(p: Path, why: str) -> None:
    if not p.exists():
        raise FileNotFoundError(f"{p} not found: {why}.")


def _safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape from a .safetensors header, without loading any data; a ValueError naming the file
    if it is empty, truncated or not safetensors."""
    fix = "re-download it or convert the .bin checkpoint with safetensors"
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size < 8:
            raise ValueError(f"{path}: {size} bytes, too short for a safetensors file (empty or truncated); {fix}")
        n = int.from_bytes(f.read(8), "little")
        if n > size - 8:
            raise ValueError(f"{path}: header claims {n} bytes but the file has {size}: truncated or not a "
                             f"safetensors file; {fix}")
        try:
            header = json.loads(f.read(n))
            return {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise ValueError(f"{path}: unreadable safetensors header ({type(err).__name__}); {fix}") from None


def _read_json(path: Path, what: str) -> dict:
    """A JSON config file as a dict; a ValueError naming the file (and the flag it came from) if it is not."""
    try:
        obj = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a valid JSON file ({err}); {what} must point at an unmodified Hugging Face "
                         "folder -- re-download it") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(obj).__name__}; {what} must point at an "
                         "unmodified Hugging Face folder")
    return obj


_PEFT_PREFIX = re.compile(r"^(base_model\.model\.)+")


def _adapter_key(k: str) -> str:
    """PEFT state-dict key -> the plain module path ('model.layers.0.self_attn.q_proj.lora_A.weight', ...)."""
    k = _PEFT_PREFIX.sub("", k)
    return k.replace(".modules_to_save.default", "").replace(".default.weight", ".weight")


def validate_full_paths(llm_path, vision_path, connector_path) -> dict:
    """Check the full profile's three folders and their shapes agree; returns their configs. Loads no weights.

    Messages name the flag (``--vision-path``) or, in a notebook, the parameter (``VISION_PATH``).
    """
    fl, fv, fc = arg_name("--llm-path"), arg_name("--vision-path"), arg_name("--connector-path")
    missing = [n for n, p in ((fl, llm_path), (fv, vision_path), (fc, connector_path)) if not p]
    if missing:
        raise ValueError(f"the full profile needs {', '.join(missing)}: local folders of Llama-3-8B-Instruct, "
                         "google/siglip-large-patch16-384 and the VideoLLM-online checkpoint "
                         "(chenjoya/videollm-online-8b-v1plus or your COIN-trained one)")
    llm_path, vision_path, connector_path = Path(llm_path), Path(vision_path), Path(connector_path)
    for p, what, flag in ((llm_path, "LLM", fl), (vision_path, "SigLIP", fv),
                          (connector_path, "VideoLLM-online checkpoint", fc)):
        if not p.is_dir():
            raise FileNotFoundError(f"{flag} {p} does not exist or is not a folder ({what}); pass the local folder")
    _require_file(llm_path / "config.json", f"{fl} must hold a Hugging Face Llama model (config.json)")
    _require_file(vision_path / "config.json", f"{fv} must hold a Hugging Face SigLIP model (config.json)")
    _require_file(connector_path / "adapter_config.json",
                  f"{fc} must hold the VideoLLM-online PEFT checkpoint (adapter_config.json)")
    _require_file(connector_path / "adapter_model.safetensors",
                  f"{fc} must hold adapter_model.safetensors (convert a .bin with safetensors first)")
    llm_cfg = _read_json(llm_path / "config.json", fl)
    if llm_cfg.get("model_type") != "llama":
        raise ValueError(f"{llm_path / 'config.json'}: model_type is {llm_cfg.get('model_type')!r}, expected "
                         f"'llama' (VideoLLM-online uses Llama-3-8B-Instruct); check {fl}")
    vis_cfg = _read_json(vision_path / "config.json", fv)
    vis_cfg = vis_cfg.get("vision_config", vis_cfg)
    if "siglip" not in str(vis_cfg.get("model_type", "siglip")):
        raise ValueError(f"{vision_path / 'config.json'}: not a SigLIP config (model_type "
                         f"{vis_cfg.get('model_type')!r}); check {fv}")
    adapter = _read_json(connector_path / "adapter_config.json", fc)
    shapes = _safetensors_shapes(connector_path / "adapter_model.safetensors")
    conn = {_adapter_key(k): s for k, s in shapes.items() if "connector" in k}
    w0 = [s for k, s in conn.items() if k.endswith("connector.0.weight")]
    if not w0:
        raise ValueError(f"{connector_path / 'adapter_model.safetensors'} has no connector.0.weight: not a "
                         f"VideoLLM-online checkpoint (the connector is saved with the LoRA adapter); check {fc}")
    if "hidden_size" not in llm_cfg:
        raise ValueError(f"{llm_path / 'config.json'} has no hidden_size: not a complete Llama config; check {fl}")
    hv, h = int(vis_cfg.get("hidden_size", 0)), int(llm_cfg["hidden_size"])
    if tuple(w0[0]) != (h, hv):
        raise ValueError(f"connector.0.weight has shape {w0[0]}, but the LLM hidden size is {h} and SigLIP's is "
                         f"{hv}: the checkpoint does not match these base models ({fl}, {fv}, {fc})")
    return dict(llm=llm_cfg, vision=vis_cfg, adapter=adapter)


def merge_lora(llm: nn.Module, adapter_state: dict[str, torch.Tensor], alpha: float, r: int,
               use_rslora: bool = False) -> int:
    """Merge PEFT LoRA deltas into ``llm`` in place: W += s · B @ A, s = α/r (α/√r with rsLoRA).

    Non-LoRA tensors (modules_to_save other than the connector) overwrite the matching weights. Returns the
    number of merged LoRA pairs; raises naming the first key that has no target in the model.
    """
    scale = alpha / math.sqrt(r) if use_rslora else alpha / r
    params = dict(llm.named_parameters())
    merged = 0
    keys = {_adapter_key(k): v for k, v in adapter_state.items() if "connector" not in k}
    for k, a in keys.items():
        if ".lora_A." not in k:
            continue
        base = k.replace(".lora_A.weight", ".weight")
        b = keys.get(k.replace(".lora_A.", ".lora_B."))
        if base not in params or b is None:
            raise ValueError(f"LoRA tensor {k} has no target {base} (or no lora_B) in the LLM: wrong base model")
        w = params[base]
        w.data += (scale * (b.float() @ a.float())).to(w.dtype).to(w.device)
        merged += 1
    for k, v in keys.items():
        if ".lora_" in k:
            continue
        if k not in params:
            raise ValueError(f"checkpoint tensor {k} has no counterpart in the LLM: wrong base model")
        params[k].data.copy_(v.to(params[k].dtype))
    return merged


def _build_full(llm_path, vision_path, connector_path, dtype: torch.dtype) -> StreamingVideoLLM:
    from transformers import SiglipVisionModel

    cfgs = validate_full_paths(llm_path, vision_path, connector_path)
    llm, tok = _load_hf_llm(Path(llm_path), dtype)
    vision, info = SiglipVisionModel.from_pretrained(vision_path, dtype=dtype, output_loading_info=True)
    if info.get("missing_keys"):
        raise ValueError(f"{vision_path}: SigLIP weights missing {info['missing_keys'][:3]} ...")
    state = load_file(str(Path(connector_path) / "adapter_model.safetensors"))
    ad = cfgs["adapter"]
    merge_lora(llm, state, float(ad.get("lora_alpha", 1)), int(ad.get("r", 1)), bool(ad.get("use_rslora", False)))
    conn = make_connector(vision.config.hidden_size, llm.config.hidden_size).to(dtype)
    conn_state = {_adapter_key(k).split("connector.", 1)[1]: v for k, v in state.items() if "connector" in k}
    conn.load_state_dict(conn_state, strict=True)
    return StreamingVideoLLM(llm, tok, vision.eval(), conn, "videollm-online-8b", int(vision.config.image_size),
                             "siglip-large-patch16-384")
