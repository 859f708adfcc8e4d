"""What a model build loads, decided and checked before any weight is read: the full profile's three folders
(shapes from config files and safetensors headers), the device and dtype, and :class:`ModelIdentity` -- the one
record of which model ran, which every result that names a model carries (docs/DECISIONS.md D210-D212).

The full profile's folders are VideoLLM-online's layout: an HF Llama folder (with its tokenizer), an HF SigLIP
folder, and the VideoLLM-online checkpoint -- a PEFT LoRA adapter (``adapter_config.json`` +
``adapter_model.safetensors``) whose keys are ``base_model.model.<module path>.lora_A/lora_B.weight`` for the LoRA
targets (every q/k/v/o/gate/up/down projection and ``lm_head``) and ``base_model.model.connector.{0,2}.{weight,bias}``
for the connector it saves beside them (``modules_to_save``). :func:`merge_lora` folds the deltas into the base
weights (W += α/r · B·A), which is what ``PeftModel.merge_and_unload`` does, so peft is not a dependency.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from pathlib import Path

import torch
from torch import nn

from ..config import arg_name, profile_config
from ..llm_weights import GGUF_NAME, smollm2_dir

#: Names ``--dtype`` / ``build_model(dtype=...)`` accept.
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")
#: ``--device`` / ``--dtype`` help, shared by ``python -m vrex_lib.eval`` and ``python -m vrex_lib.workload``.
DEVICE_HELP = ("cpu, cuda or cuda:N (default: cuda for the full profile -- under torchrun each rank takes "
               "cuda:$LOCAL_RANK -- and cpu for smoke and default); a CUDA device on a machine without one is an "
               "error, never a silent CPU run")
DTYPE_HELP = f"one of {', '.join(DTYPES)} (default: bfloat16 for the full profile, float32 for smoke and default)"
#: The model path flags of every command that builds a model, with their help (which a profile reads: its
#: ``ModelSection.path_flags``; any other is refused, docs/DECISIONS.md D74).
MODEL_PATH_FLAGS: dict[str, str] = {
    "--llm-path": "default profile: a Llama-family HF folder instead of SmolLM2; full profile: Llama-3-8B-Instruct "
                  "HF folder",
    "--vision-path": "full profile: siglip-large-patch16-384 HF folder",
    "--connector-path": "full profile: VideoLLM-online checkpoint folder (PEFT adapter)",
}


def add_model_path_flags(parser) -> None:
    """Add :data:`MODEL_PATH_FLAGS` to an argparse parser (default None: the profile's own model)."""
    for flag, text in MODEL_PATH_FLAGS.items():
        parser.add_argument(flag, default=None, help=text)
SMOKE_NAME, SMOLLM2_NAME = "tiny-llama", "SmolLM2-135M-Instruct"
# Weight-file content enters the fingerprint through its first and last MiB (D210): a safetensors file's first
# MiB holds its header (every tensor's name, dtype, shape, offset) and the first tensors' values.
_EDGE_BYTES = 1 << 20
_FINGERPRINT_SUFFIXES = (".json", ".safetensors", ".bin", ".gguf", ".model", ".tiktoken", ".txt")


# ---------------------------------------------------------------------------------------------------------------
# device and dtype
# ---------------------------------------------------------------------------------------------------------------
def resolve_dtype(profile: str, dtype: str | torch.dtype | None) -> torch.dtype:
    """The dtype a build uses: ``dtype`` (a name of :data:`DTYPES` or a torch dtype) or the profile's default
    (``Profile.model.dtype``: bfloat16 for ``full``, float32 otherwise); a ValueError naming ``--dtype`` for
    anything else."""
    name = profile_config(profile).dtype if dtype is None else str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"{arg_name('--dtype')} {dtype!r} is not a dtype the runtime runs: choose one of "
                         f"{', '.join(DTYPES)}")
    return getattr(torch, name)


def resolve_device(profile: str, device: str | torch.device | None) -> torch.device:
    """The device a build uses: ``device`` or the profile's default (``Profile.model.device``: ``cuda`` for
    ``full``, ``cpu`` otherwise), checked against this machine: a CUDA (or MPS) device that torch cannot see is a
    one-line ValueError naming ``--device`` and the fix, raised before any weight loads."""
    flag = arg_name("--device")
    default = device is None
    want = profile_config(profile).device if default else device
    try:
        dev = torch.device(want)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"{flag} {want!r} is not a device: use cpu, cuda or cuda:N") from None
    what = f"{flag} {dev}" + (f" (the {profile} profile's default)" if default else "")
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ValueError(f"{what}: torch sees no CUDA device on this machine; pass {flag} cpu to run on the CPU "
                             "(slow for an 8B model) or run on a machine with a GPU")
        if dev.index is not None and dev.index >= n:
            raise ValueError(f"{what}: this machine has {n} CUDA device(s), cuda:0..cuda:{n - 1}")
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"{what}: torch sees no MPS device on this machine; pass {flag} cpu")
    elif dev.type != "cpu":
        raise ValueError(f"{what}: the runtime runs on cpu, cuda[:N] or mps, not {dev.type!r}")
    return dev


# ---------------------------------------------------------------------------------------------------------------
# the model's identity
# ---------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ModelIdentity:
    """Which model ran, as results, run records, workload files and the report name it (docs/DECISIONS.md D210).

    name: the short name tables and messages print ('tiny-llama', 'SmolLM2-135M-Instruct', the LLM folder's name,
      or in ``full`` the VideoLLM-online checkpoint's, :func:`checkpoint_name`); profile: the build's profile;
      llm / vision / adapter: the LLM, the vision tower and the LoRA checkpoint as loaded (adapter None outside
      ``full``); n_layers, hidden_size, n_q_heads, n_kv_heads, head_dim, vocab_size: the decoder's shape; dtype:
      the decoder's dtype ('bfloat16'); lora_r / lora_alpha: the merged adapter's rank and alpha (None when no
      LoRA was merged); fingerprint: digest of the files loaded (:func:`fingerprint`; None for the smoke profile's
      seeded random weights).
    """

    name: str
    profile: str
    llm: str
    vision: str
    adapter: str | None
    n_layers: int
    hidden_size: int
    n_q_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int | None
    dtype: str
    lora_r: int | None = None
    lora_alpha: float | None = None
    fingerprint: str | None = None

    def summary(self) -> str:
        """One line: 'ckpt (Llama-3-8B + LoRA r=128 alpha=256, vision siglip-L, 32 layers x 4096 hidden, ...)'."""
        base = "" if self.llm == self.name else self.llm
        if self.lora_r is not None:
            base += f" + LoRA r={self.lora_r} alpha={self.lora_alpha:g}"
        parts = [base.strip(" +")] if base else []
        parts += [f"vision {self.vision}", f"{self.n_layers} layers x {self.hidden_size} hidden",
                  f"{self.n_q_heads} Q / {self.n_kv_heads} KV heads x {self.head_dim}", self.dtype]
        return f"{self.name} ({', '.join(parts)})"

    def record(self) -> dict:
        """The JSON record files carry: every field, plus ``summary``."""
        return dict(dataclasses.asdict(self), summary=self.summary())


def checkpoint_name(path: str | os.PathLike) -> str:
    """How a user calls a model folder: the hub id of a Hugging Face cache snapshot
    (``.../models--org--name/snapshots/<rev>`` -> ``org/name``), ``parent/checkpoint-N`` for a trainer's
    checkpoint folder, else the folder's (or file's) own name."""
    p = Path(path).expanduser().resolve()
    if p.parent.name == "snapshots" and p.parent.parent.name.startswith("models--"):
        return p.parent.parent.name[len("models--"):].replace("--", "/")
    if re.fullmatch(r"checkpoint-\d+", p.name):
        return f"{p.parent.name}/{p.name}"
    return p.name


def fingerprint(*paths: str | os.PathLike) -> str:
    """A digest of what loading ``paths`` reads, without reading whole weight files (16 hex digits).

    Per folder, every config, tokenizer and weight file (suffixes ``.json .safetensors .bin .gguf .model
    .tiktoken .txt``; a file path stands for itself), sorted by name: the name, the size and the SHA-256 of the
    file's first and last MiB (all of it when smaller). Paths in the digest are relative, so a moved folder keeps
    its fingerprint.
    """
    h = hashlib.sha256()
    for i, p in enumerate(Path(x).expanduser() for x in paths):
        files = [p] if p.is_file() else sorted(f for f in p.iterdir() if f.is_file() and
                                               f.suffix in _FINGERPRINT_SUFFIXES)
        for f in files:
            h.update(f"{i}/{f.name}:{f.stat().st_size}:{_edges_sha256(f)}\n".encode())
    return h.hexdigest()[:16]


def _edges_sha256(path: Path) -> str:
    size = path.stat().st_size
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= 2 * _EDGE_BYTES:
            h.update(f.read())
        else:
            h.update(f.read(_EDGE_BYTES))
            f.seek(size - _EDGE_BYTES)
            h.update(f.read(_EDGE_BYTES))
    return h.hexdigest()


def make_identity(profile: str, llm_config: dict, dtype: torch.dtype, *, name: str, llm: str, vision: str,
                  adapter: str | None = None, adapter_config: dict | None = None,
                  fingerprint: str | None = None) -> ModelIdentity:
    """The one constructor of :class:`ModelIdentity`: the decoder's shape from its HF config (a dict, as in
    ``config.json`` or ``config.to_dict()``), the rest as given."""
    missing = [k for k in ("num_hidden_layers", "hidden_size", "num_attention_heads") if k not in llm_config]
    if missing:
        raise ValueError(f"the LLM's config has no {', '.join(missing)}: not a complete Llama config.json; check "
                         f"{arg_name('--llm-path')}")
    hq = int(llm_config["num_attention_heads"])
    ad = adapter_config or {}
    return ModelIdentity(
        name=name, profile=profile, llm=llm, vision=vision, adapter=adapter,
        n_layers=int(llm_config["num_hidden_layers"]), hidden_size=int(llm_config["hidden_size"]), n_q_heads=hq,
        n_kv_heads=int(llm_config.get("num_key_value_heads") or hq),
        head_dim=int(llm_config.get("head_dim") or int(llm_config["hidden_size"]) // hq),
        vocab_size=None if llm_config.get("vocab_size") is None else int(llm_config["vocab_size"]),
        dtype=str(dtype).removeprefix("torch."),
        lora_r=int(ad["r"]) if ad else None, lora_alpha=float(ad["lora_alpha"]) if ad else None,
        fingerprint=fingerprint)


def build_sources(profile: str, *, llm_path=None, vision_path=None, connector_path=None,
                  vision: str | None = None) -> dict:
    """The names and fingerprint a build of ``profile`` records (keyword arguments of :func:`make_identity`
    besides the LLM config and dtype); reads no weights."""
    m = profile_config(profile).model  # an unknown profile is an error naming the profiles
    if m.kind == "tiny":
        return dict(name=SMOKE_NAME, llm="tiny random Llama", vision=vision or m.vision)
    if m.kind == "smollm2":
        if llm_path:
            return dict(name=checkpoint_name(llm_path), llm=checkpoint_name(llm_path), vision=vision or m.vision,
                        fingerprint=fingerprint(llm_path))
        return dict(name=SMOLLM2_NAME, llm=SMOLLM2_NAME, vision=vision or m.vision,
                    fingerprint=fingerprint(smollm2_dir() / GGUF_NAME))
    return dict(name=checkpoint_name(connector_path), llm=checkpoint_name(llm_path),
                vision=checkpoint_name(vision_path), adapter=checkpoint_name(connector_path),
                fingerprint=fingerprint(llm_path, vision_path, connector_path))


# ---------------------------------------------------------------------------------------------------------------
# the full profile's folders
# ---------------------------------------------------------------------------------------------------------------
def _require_file(p: Path, why: str) -> None:
    if not p.exists():
        raise FileNotFoundError(f"{p} not found: {why}.")


def _safetensors_header(path: Path, flag: str = "") -> dict:
    """The header of a .safetensors file (tensor name -> dtype, shape, data offsets), read without any data; a
    ValueError naming the file (and ``flag``) if it is empty, cut short of the data its header promises, or not
    safetensors."""
    fix = f"re-download it{' into the ' + flag + ' folder' if flag else ''} or convert the .bin checkpoint with " \
          "safetensors"
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
            end = max([int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"] + [0])
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as err:
            raise ValueError(f"{path}: unreadable safetensors header ({type(err).__name__}); {fix}") from None
    if size < 8 + n + end:
        raise ValueError(f"{path}: cut short: its header promises {8 + n + end} bytes of tensors, the file has "
                         f"{size}; {fix}")
    return header


def _safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape from a .safetensors header (:func:`_safetensors_header`)."""
    return {k: tuple(v["shape"]) for k, v in _safetensors_header(path).items() if k != "__metadata__"}


def check_weight_files(folder: Path, flag: str) -> None:
    """Every ``*.safetensors`` of ``folder`` has a readable header and holds the bytes it promises (a cut or
    damaged download is named with ``flag`` before any weight loads, not a SafetensorError mid-load)."""
    for f in sorted(Path(folder).glob("*.safetensors")):
        _safetensors_header(f, flag)


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
    for folder, flag in ((llm_path, fl), (vision_path, fv), (connector_path, fc)):
        check_weight_files(folder, flag)
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
    r, alpha = adapter.get("r"), adapter.get("lora_alpha")
    if not (isinstance(r, int) and r > 0 and isinstance(alpha, (int, float)) and not isinstance(alpha, bool)):
        raise ValueError(f"{connector_path / 'adapter_config.json'}: r = {r!r}, lora_alpha = {alpha!r}; a PEFT LoRA "
                         f"adapter has a positive integer rank r and a numeric lora_alpha; check {fc}")
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


def load_connector(connector: nn.Module, adapter_state: dict[str, torch.Tensor], path: Path) -> None:
    """Load VideoLLM-online's connector from the adapter's ``connector.*`` tensors, strictly: a missing or an
    extra key, or a shape that differs, is a ValueError naming the file."""
    state = {_adapter_key(k).split("connector.", 1)[1]: v for k, v in adapter_state.items() if "connector" in k}
    want = connector.state_dict()
    missing, extra = sorted(set(want) - set(state)), sorted(set(state) - set(want))
    shapes = [f"{k} {tuple(state[k].shape)} (expected {tuple(want[k].shape)})" for k in sorted(set(want) & set(state))
              if tuple(state[k].shape) != tuple(want[k].shape)]
    if missing or extra or shapes:
        what = "; ".join(s for s in (f"missing connector.{', connector.'.join(missing)}" if missing else "",
                                     f"unexpected connector.{', connector.'.join(extra)}" if extra else "",
                                     f"wrong shape {', '.join(shapes)}" if shapes else "") if s)
        raise ValueError(f"{path}: the connector does not match VideoLLM-online's Linear-GELU-Linear connector "
                         f"({what}); check {arg_name('--connector-path')}")
    connector.load_state_dict(state, strict=True)
