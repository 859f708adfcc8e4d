"""What an evaluation run is, decided before any weight loads: shards, the configuration and its key, the model's
identity and device, how ``max_frames`` applies to a span, and the checks of flags, paths and context size."""
from __future__ import annotations

import hashlib
import os
import types

import torch

from .. import _io
from ..coin import FRAME_SAMPLING, FRAMES_POLICIES
from ..config import PROFILES, RuntimeConfig, check_profile_inputs, profile_config
from ..llm_weights import GGUF_NAME, smollm2_dir
from ..runtime import ModelIdentity, check_context, identify, resolve_device, tokens_for


#: Greedy tokens per answer by default, per profile (its ``eval`` section).
MAX_NEW_TOKENS = {p: profile_config(p).eval.max_new_tokens for p in PROFILES}
PROMPT_LAYOUTS: tuple[str, ...] = ("coin", "live")


def shard_from_env(num_shards: int | None, shard_index: int | None) -> tuple[int, int]:
    """(num_shards, shard_index): explicit arguments win, else torchrun's WORLD_SIZE/RANK, else (1, 0). Under
    torchrun ``--num-shards`` alone takes this rank's shard from $RANK (not shard 0 on every rank)."""
    env_rank, env_world = "RANK" in os.environ, "WORLD_SIZE" in os.environ
    if num_shards is None and env_rank and not env_world:
        raise ValueError(f"$RANK={os.environ['RANK']} is set but $WORLD_SIZE is not: launch with torchrun (which sets "
                         "both), unset RANK, or pass --num-shards and --shard-index")
    from_env = []
    if num_shards is None:
        num_shards = _env_int("WORLD_SIZE", 1)
        from_env.append(f"$WORLD_SIZE={num_shards}" if env_world else "")
    if shard_index is None and env_rank:
        shard_index = _env_int("RANK", 0)
        from_env.append(f"$RANK={shard_index}")
    shard_index = 0 if shard_index is None else shard_index
    src = ", ".join(x for x in from_env if x)
    if num_shards < 1:
        raise ValueError(f"--num-shards must be >= 1 (the number of parallel runs), got {num_shards}"
                         + (f" from {src}" if src else ""))
    if not 0 <= shard_index < num_shards:
        raise ValueError(f"--shard-index {shard_index} must be in [0, {num_shards}) for --num-shards {num_shards}"
                         + (f" (from {src}: pass --num-shards equal to torchrun's --nproc-per-node, or leave both "
                            "flags out under torchrun)" if src else ""))
    return num_shards, shard_index


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name, str(default))
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"${name}={v!r} is not an integer (set by torchrun); unset it or pass --num-shards and "
                         "--shard-index") from None


def model_identity(profile: str, model=None, llm_path=None, vision_path=None, connector_path=None,
                   dtype: str | torch.dtype | None = None) -> ModelIdentity:
    """Which model the run uses (:class:`~vrex_lib.runtime.ModelIdentity`): the prebuilt ``model``'s, else the one
    ``build_model`` will give it, read from config files before any weight loads."""
    if model is not None:
        return model.identity
    return identify(profile, llm_path=llm_path, vision_path=vision_path, connector_path=connector_path, dtype=dtype)


def model_files(profile: str, model=None, llm_path=None, vision_path=None, connector_path=None) -> dict[str, str]:
    """{file: SHA-256} of every file the run's model is read from (config, tokenizer, weights; docs/DECISIONS.md
    D440): the prebuilt ``model``'s, else the profile's paths (SmolLM2's GGUF by default; none for the smoke
    model, whose seeded weights follow from the code)."""
    if model is not None:
        return _io.files_digest(getattr(model, "weight_files", ()))
    paths = [p for p in (llm_path, vision_path, connector_path) if p]
    if not paths and profile_config(profile).model.kind == "smollm2":
        paths = [smollm2_dir() / GGUF_NAME]
    return _io.files_digest(paths)


def run_config(*, task: str, method: str, method_kwargs: dict | None, profile: str, model: ModelIdentity, split: str,
               data_file: str | os.PathLike, max_new_tokens: int, max_frames: int | None,
               runtime_cfg: RuntimeConfig, seed: int, prompt_layout: str = "coin",
               frames_policy: str = "videollm-online", frame_sampling: str = FRAME_SAMPLING,
               weights: dict | None = None) -> dict:
    """Everything that decides a sample's result line, plus its hash ``config_key`` (resume and merge key on it).

    The data file enters by its SHA-256, so an edited or different COIN.json never resumes an old file; the model
    by its name and its whole identity record (``model_identity``: shape, dtype, adapter, fingerprint), so results
    of another checkpoint or dtype never resume or merge with these (docs/DECISIONS.md D210); the model's files by
    content (``weights``, :func:`model_files`) and the code by :func:`vrex_lib._io.code_digest`, so a line written
    by other weights of the same shape or by other code is never resumed (D440).
    """
    h = hashlib.sha256()
    with open(data_file, "rb") as f:
        for blk in iter(lambda: f.read(1 << 20), b""):
            h.update(blk)
    cfg = dict(task=task, method=method, method_kwargs=method_kwargs or {}, profile=profile, model=model.name,
               model_identity=model.record(), split=split, data_file=str(data_file), data_sha256=h.hexdigest(),
               max_new_tokens=max_new_tokens, max_frames=max_frames, runtime_config=repr(runtime_cfg), seed=seed,
               prompt_layout=prompt_layout, frames_policy=frames_policy, frame_sampling=frame_sampling,
               weights_sha256=dict(weights or {}), code=_io.code_digest("vrex_lib.eval.run"))
    keyed = {k: v for k, v in cfg.items() if k != "data_file"}  # the same bytes elsewhere are the same data
    cfg["config_key"] = _digest(keyed)
    # What a 'full' reference run must share with this run: everything but the method and its options.
    cfg["reference_key"] = _digest({k: v for k, v in keyed.items() if k not in NOT_REFERENCE_KEYED})
    return cfg


def run_device(profile: str, device: str | torch.device | None) -> torch.device:
    """The device this rank builds the model on: ``device`` or the profile's default, checked against the machine
    before anything loads (:func:`~vrex_lib.runtime.resolve_device`); under torchrun a plain ``cuda`` is this
    rank's GPU, ``cuda:$LOCAL_RANK``."""
    dev = resolve_device(profile, device)
    if dev.type == "cuda" and dev.index is None and "LOCAL_RANK" in os.environ:
        dev = resolve_device(profile, f"cuda:{_env_int('LOCAL_RANK', 0)}")
    return dev


#: Configuration fields a reference run may differ in (docs/DECISIONS.md D70): it is the ``full`` method's run.
NOT_REFERENCE_KEYED: tuple[str, ...] = ("method", "method_kwargs")
#: Fields of ``<stem>.run.json`` that describe the run's progress, not its configuration.
RUN_RECORD_FIELDS: tuple[str, ...] = ("config_key", "reference_key", "data_file", "shard_index", "num_shards",
                                      "n_total", "indices", "skipped", "complete", "merged_from", "device")


def _digest(fields: dict) -> str:
    return _io.reuse_key(args=fields)[:16]


def config_diff(old: dict, new: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """The configuration fields two run records (or :func:`run_config` dicts) disagree on, as
    ``"name: <old> there, <new> now"``; fields absent from either side and :data:`RUN_RECORD_FIELDS` are left out."""
    skip = set(RUN_RECORD_FIELDS) | set(ignore)
    return [f"{k}: {old[k]!r} there, {new[k]!r} now" for k in new if k not in skip and k in old and old[k] != new[k]]


def frames_action(n_frames: int, max_frames: int | None, frames_policy: str) -> str:
    """What ``max_frames`` does to a span of ``n_frames``: 'keep', 'clamp' (last ``max_frames`` frames),
    'cut' (no frames: VideoLLM-online's ``max_frames_clip`` drops the whole stream) or 'skip' (sample not run)."""
    if frames_policy not in FRAMES_POLICIES:
        raise ValueError(f"unknown frames policy {frames_policy!r}: choose one of {', '.join(FRAMES_POLICIES)}")
    if max_frames is None or n_frames <= max_frames:
        return "keep"
    return {"videollm-online": "cut", "skip": "skip", "clamp": "clamp"}[frames_policy]


class NoSamplesEvaluated(RuntimeError):
    """Every sample of a run was skipped (unreadable videos): an empty results file would look like success."""


def _check_profile_args(profile: str, **paths) -> None:
    """Flags a profile does not use are an error, never silently ignored
    (:func:`vrex_lib.config.check_profile_inputs`)."""
    check_profile_inputs(profile, **paths)


def _shape_from_config(cfg: dict, identity: ModelIdentity, device: torch.device):
    """What check_context needs of a model, before it loads: its identity's KV shape and dtype, the device, and
    the trained positions from its config.json."""
    return types.SimpleNamespace(
        name=identity.name, n_layers=identity.n_layers, n_kv_heads=identity.n_kv_heads, head_dim=identity.head_dim,
        kv_bytes_per_elem=torch.finfo(getattr(torch, identity.dtype)).bits // 8, device=device,
        config=types.SimpleNamespace(max_position_embeddings=int(cfg.get("max_position_embeddings", 1 << 30))))


def _check_all(model, mine, max_frames, max_new_tokens, runtime_cfg, frames_policy: str = "clamp") -> None:
    """Every sample of this shard must fit (positions and KV memory) -- checked before the first one runs."""
    for _, s in mine:
        act = frames_action(s.num_frames(), max_frames, frames_policy)
        if act == "skip":
            continue
        nf = {"keep": s.num_frames(), "clamp": max_frames, "cut": 0}[act]
        check_context(model, tokens_for(nf, max_new_tokens=max_new_tokens), runtime_cfg,
                      what=f"sample {s.sample_id} ({nf} frames)")
