"""A VideoLLM-online-shaped streaming video LLM on Hugging Face transformers.

    frames uint8 [T, H, W, 3] ── SigLIP vision tower ──► last_hidden_state [T, P, Hv], pooler_output [T, Hv]
        ── per frame: CLS (SigLIP's attention-pooling head output, as VideoLLM-online's ``_siglip_vision_encode``
           uses ``pooler_output``: SigLIP has no CLS token) + 3×3 adaptive-average-pooled patch grid = 10 tokens
        ── MLP connector (Linear → GELU → Linear, VideoLLM-online's ``connector``) ──► [T, 10, hidden]
        ── Llama decoder (frames are prefilled one at a time by :class:`~vrex_lib.runtime.session.StreamingSession`)

One code path, three builds (:func:`build_model`):

* ``full``: the user's Llama-3-8B-Instruct + SigLIP-L/16-384 + the VideoLLM-online checkpoint (a PEFT LoRA
  adapter holding the connector), all from local paths, checked and merged by :mod:`vrex_lib.runtime.checkpoint`
  (W += α/r · B·A, as ``PeftModel.merge_and_unload``; peft is not a dependency).
* ``default``: the real SmolLM2-135M-Instruct (offline, :func:`vrex_lib.llm_weights.load_smollm2`), the
  content-preserving patch-embedding stand-in for the vision tower (``vision='patch-dct'``,
  :mod:`vrex_lib.runtime.vision`, docs/DECISIONS.md D40) and a seeded connector; ``vision='siglip-random'``
  keeps the earlier small randomly initialised SigLIP.
* ``smoke``: a tiny random Llama + tiny SigLIP (or ``vision='patch-dct'``) + a byte-level toy tokenizer (CI speed).

The untrained connector of ``default``/``smoke`` is rescaled once (seeded, deterministic) so its outputs have
the RMS of the LLM's token embeddings: the decoder then sees inputs of the scale it was trained on. Every build
carries its :class:`~vrex_lib.runtime.checkpoint.ModelIdentity` (docs/DECISIONS.md D210); :func:`identify` gives
the same identity from config files alone.
"""
from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn

from .. import _io
from ..config import arg_name, profile_config
from ..llm_weights import GGUF_NAME, load_smollm2, smollm2_dir, tiny_llama_config
from .attention import ATTN_IMPL, register
from .checkpoint import (ModelIdentity, _read_json, _require_file, build_sources, check_weight_files,
                         load_connector, make_identity, merge_lora, resolve_device, resolve_dtype,
                         validate_full_paths)
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
    (``nn.Sequential``), name (``identity.name``), image_size (vision input side, pixels), vision_name (which
    encoder), identity (:class:`~vrex_lib.runtime.checkpoint.ModelIdentity`: what was loaded; ``build_model``
    sets it, a model assembled by hand gets one from its modules' shapes, named ``name``, profile 'custom').
    """

    llm: nn.Module
    tokenizer: object
    vision: nn.Module
    connector: nn.Module
    name: str
    image_size: int
    vision_name: str = "siglip"
    identity: ModelIdentity | None = None
    #: the files the weights were read from (``build_model`` sets them) and the seed of its random modules
    weight_files: tuple[Path, ...] = ()
    build_seed: int | None = None

    def __post_init__(self) -> None:
        if self.identity is None:
            self.identity = make_identity("custom", self.llm.config.to_dict(), self.dtype, name=self.name,
                                          llm=self.name, vision=self.vision_name)

    def reuse_record(self) -> dict:
        """What a result this model made is keyed on (:func:`vrex_lib._io.reuse_key`, docs/DECISIONS.md D440): the
        identity, the full LLM and vision configs (every field, e.g. ``rms_norm_eps``), the weight files by content,
        the seed of the random modules and the dtype -- never the name alone."""
        vcfg = getattr(self.vision, "config", None)
        return dict(identity=self.identity.record(), llm_config=self.llm.config.to_dict(),
                    vision_config=vcfg.to_dict() if hasattr(vcfg, "to_dict") else repr((vcfg, self.vision)),
                    connector=repr(self.connector), image_size=self.image_size, vision_name=self.vision_name,
                    weights=_io.files_digest(self.weight_files), seed=self.build_seed, dtype=str(self.dtype),
                    n_params=sum(p.numel() for p in self.llm.parameters()))

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

    ``device`` / ``dtype``: :func:`~vrex_lib.runtime.checkpoint.resolve_device` / ``resolve_dtype`` (default: cuda
    and bfloat16 for ``full``, cpu and float32 otherwise), checked before any weight loads. ``vision`` (default and
    smoke only): 'patch-dct' (the stand-in of :mod:`vrex_lib.runtime.vision`; the default profile's default) or
    'siglip-random' (a seeded random SigLIP tower; the smoke profile's default). The full profile always uses the
    user's pretrained SigLIP. The model's :attr:`StreamingVideoLLM.identity` names what was loaded.
    """
    kind = profile_config(profile).model.kind  # an unknown profile is an error naming the profiles
    if kind == "videollm_online" and vision not in (None, "siglip"):
        raise ValueError(f"build_model: the {profile} profile uses the pretrained SigLIP-L/16-384 (--vision-path); "
                         f"vision={vision!r} applies to the profiles with a stand-in vision tower only")
    dev, dt = resolve_device(profile, device), resolve_dtype(profile, dtype)
    register()
    if kind == "tiny":
        model = _build_smoke(profile, vision, seed, dt)
    elif kind == "smollm2":
        model = _build_default(profile, llm_path, vision, seed, dt)
    else:
        model = _build_full(profile, llm_path, vision_path, connector_path, dt)
    model.weight_files = tuple(Path(p) for p in (llm_path, vision_path, connector_path) if p) if llm_path else (
        (smollm2_dir() / GGUF_NAME,) if kind == "smollm2" else ())
    model.build_seed = seed
    for m in (model.llm, model.vision, model.connector):
        m.to(dev)
        m.eval()
        m.requires_grad_(False)
    # Shared SmolLM2 instance: only the attention implementation name changes; with no runtime step attached the
    # registered function is exactly transformers' SDPA, so other users of the shared model are unaffected.
    model.llm.set_attn_implementation(ATTN_IMPL)
    return model


def _build_smoke(profile: str, vision: str | None, seed: int, dtype: torch.dtype) -> StreamingVideoLLM:
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    tok = ByteTokenizer()
    llm = LlamaForCausalLM(tiny_llama_config(vocab_size=tok.vocab_size)).eval()
    enc, hv, vname = _vision(vision or profile_config(profile).model.vision, (32, 1, 2), 64)
    src = build_sources(profile, vision=vname)
    model = StreamingVideoLLM(llm, tok, enc, make_connector(hv, llm.config.hidden_size), src["name"], 64, vname)
    _match_embedding_rms(model, seed)  # in float32, then cast: the same weights in every dtype
    model.llm.to(dtype)
    model.connector.to(dtype)
    model.identity = make_identity(profile, llm.config.to_dict(), model.dtype, **src)
    return model


def _build_default(profile: str, llm_path, vision: str | None, seed: int, dtype: torch.dtype) -> StreamingVideoLLM:
    if llm_path:
        llm, tok = _load_hf_llm(Path(llm_path), dtype)
    else:
        llm, tok = load_smollm2(str(dtype).removeprefix("torch."))
    torch.manual_seed(seed)
    enc, hv, vname = _vision(vision or profile_config(profile).model.vision, (192, 4, 3), 224)
    src = build_sources(profile, llm_path=llm_path, vision=vname)
    model = StreamingVideoLLM(llm, tok, enc, make_connector(hv, llm.config.hidden_size), src["name"], 224, vname)
    model.connector.to(model.dtype)
    _match_embedding_rms(model, seed)
    model.identity = make_identity(profile, llm.config.to_dict(), model.dtype, **src)
    return model


def _build_full(profile: str, llm_path, vision_path, connector_path, dtype: torch.dtype) -> StreamingVideoLLM:
    from transformers import SiglipVisionModel

    cfgs = validate_full_paths(llm_path, vision_path, connector_path)
    llm, tok = _load_hf_llm(Path(llm_path), dtype)
    with _named_load_errors(Path(vision_path), arg_name("--vision-path")):
        vision, info = SiglipVisionModel.from_pretrained(vision_path, dtype=dtype, output_loading_info=True)
    if info.get("missing_keys"):
        raise ValueError(f"{vision_path}: SigLIP weights missing {info['missing_keys'][:3]} ...; check "
                         f"{arg_name('--vision-path')}")
    adapter_file = Path(connector_path) / "adapter_model.safetensors"
    with _named_load_errors(adapter_file, arg_name("--connector-path")):
        state = load_file(str(adapter_file))
    ad = cfgs["adapter"]
    merge_lora(llm, state, float(ad["lora_alpha"]), int(ad["r"]), bool(ad.get("use_rslora", False)))
    conn = make_connector(vision.config.hidden_size, llm.config.hidden_size).to(dtype)
    load_connector(conn, state, adapter_file)
    src = build_sources(profile, llm_path=llm_path, vision_path=vision_path, connector_path=connector_path)
    model = StreamingVideoLLM(llm, tok, vision.eval(), conn, src["name"], int(vision.config.image_size),
                              src["vision"])
    model.identity = make_identity(profile, llm.config.to_dict(), model.dtype, adapter_config=ad, **src)
    return model


def _load_hf_llm(path: Path, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _require_file(path / "config.json", f"the LLM folder ({arg_name('--llm-path')}) must be a Hugging Face model "
                  "folder")
    _read_json(path / "config.json", arg_name("--llm-path"))
    check_weight_files(path, arg_name("--llm-path"))
    tok = _load_tokenizer(path, AutoTokenizer)  # seconds, before the weights (minutes for 16 GB)
    with _named_load_errors(path, arg_name("--llm-path")):
        llm = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    return llm, tok


def _load_tokenizer(path: Path, auto):
    """The LLM folder's tokenizer, or a ValueError naming the file (a deleted or cut ``tokenizer.json``) and the
    fix, before any weight loads."""
    flag, tj = arg_name("--llm-path"), path / "tokenizer.json"
    fix = "copy the tokenizer files (tokenizer.json, tokenizer_config.json) of this checkpoint back into it"
    if not tj.is_file() and not (path / "tokenizer.model").is_file():
        raise ValueError(f"{flag} {path}: {tj.name} is missing (no tokenizer.model either), so the tokenizer cannot "
                         f"load; {fix}")
    try:
        return auto.from_pretrained(path)
    except (OSError, ValueError, TypeError, KeyError) as err:  # JSONDecodeError is a ValueError
        what = tj if tj.is_file() else path / "tokenizer.model"
        raise ValueError(f"{flag} {path}: the tokenizer does not load from {what} ({type(err).__name__}: "
                         f"{str(err).splitlines()[0][:160]}): the file is damaged or cut; {fix}") from None


@contextlib.contextmanager
def _named_load_errors(path: Path, flag: str):
    """A weight or tokenizer file that passed the header checks but fails to load (damaged inside) is a one-line
    ValueError naming ``path`` and ``flag``, not safetensors' or transformers' traceback."""
    try:
        yield
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{flag} {path}: loading failed ({type(err).__name__}: {str(err).splitlines()[0][:200]}); "
                         "the files are damaged or incomplete: re-download them") from None


def identify(profile: str, *, llm_path=None, vision_path=None, connector_path=None,
             dtype: str | torch.dtype | None = None, vision: str | None = None) -> ModelIdentity:
    """The :class:`ModelIdentity` that ``build_model`` with these arguments gives its model, from config files
    alone (no weight is read): what an evaluation keys its results on before 16 GB of weights load."""
    dt = resolve_dtype(profile, dtype)
    m = profile_config(profile).model
    if m.kind == "videollm_online":
        cfgs = validate_full_paths(llm_path, vision_path, connector_path)
        src = build_sources(profile, llm_path=llm_path, vision_path=vision_path, connector_path=connector_path)
        return make_identity(profile, cfgs["llm"], dt, adapter_config=cfgs["adapter"], **src)
    src = build_sources(profile, llm_path=llm_path if "llm_path" in m.path_flags else None, vision=vision)
    if m.kind == "tiny":
        cfg = tiny_llama_config(vocab_size=ByteTokenizer.vocab_size).to_dict()
    elif llm_path:
        cfg = _read_json(Path(llm_path) / "config.json", arg_name("--llm-path"))
    else:
        cfg = _smollm2_config()
    return make_identity(profile, cfg, dt, **src)


@functools.lru_cache(maxsize=1)
def _smollm2_config() -> dict:
    """SmolLM2's HF config read from the GGUF header the way transformers reads it to load the weights (~2 s)."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(smollm2_dir(), gguf_file=GGUF_NAME).to_dict()
