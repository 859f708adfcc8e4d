"""Every default of the artifact in one place: ReSV hyper-parameters, the V-Rex core, profiles, paths.

The paper's printed hyper-parameters (N_hp=32, Th_hp=7, Th_r-wics=0.3; §VI.E) and the V-Rex core
configuration (§VI.F) are *inputs* of the reproduction, so they live here as defaults. The choices
the artifact makes where the paper is silent (docs/DECISIONS.md D1–D6) are fields too, never constants.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from . import profiles as _profiles
from .profiles import PROFILES, Profile

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The workload file's schema: written by :mod:`vrex_lib.workload`, read by
#: :meth:`vrex_lib.perf.Workload.from_measurement` (its fields are listed in docs/PERF_MODEL.md).
WORKLOAD_SCHEMA = "vrex.workload/1"


#: The most hash bits a code holds: codes are packed into int64 (``vrex_lib.resv.hashing.MAX_BITS``).
MAX_HASH_BITS = 64


def check_int(owner: str, name: str, value: object, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int (a bool or a float is refused, an integral numpy scalar accepted) within [lo, hi];
    else a one-line ValueError naming ``owner.name`` and the range. For config dataclasses and policy kwargs."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if ok and (lo is None or value >= lo) and (hi is None or value <= hi):
        return int(value)
    rng = (f" in [{lo}, {hi}]" if hi is not None else f" >= {lo}") if lo is not None else ""
    raise ValueError(f"{owner}: {name} must be an integer{rng}, got {value!r}")


def check_real(owner: str, name: str, value: object, lo: float, hi: float, *, lo_open: bool = False) -> float:
    """``value`` as a finite float in [lo, hi] (``(lo, hi]`` with ``lo_open``; a bool or a string is refused);
    else a one-line ValueError naming ``owner.name`` and the range."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if ok and (float(value) > lo if lo_open else float(value) >= lo) and float(value) <= hi:
        return float(value)
    raise ValueError(f"{owner}: {name} must be a number in {'(' if lo_open else '['}{lo:g}, {hi:g}], got {value!r}")


def refuse_renamed(owner: str, given, renamed: dict[str, str]) -> None:
    """A one-line ValueError when a name in ``given`` is an old name of an option (``renamed``: old -> new), naming
    the new one: an old keyword must not silently mean something else, nor fail as merely unknown."""
    old = [k for k in given if k in renamed]
    if old:
        raise ValueError(f"{owner}: {old[0]!r} is not an option; use {renamed[old[0]]}")


def check_choice(owner: str, name: str, value: object, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices`` (compared exactly), else a one-line ValueError naming them."""
    if isinstance(value, str) and value in choices:
        return value
    raise ValueError(f"{owner}: {name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


@dataclass(frozen=True)
class ReSVConfig:
    """ReSV hyper-parameters (paper §IV, §VI.E) and the artifact's choices where it is silent (docs/DECISIONS.md
    D1–D4).

    n_hp:  N_hp, number of random hyperplanes = hash bits per key (paper: 32).
    th_hp: Th_hp (a.k.a. Th_hd), strict Hamming-distance threshold for joining a cluster (paper: 7).
    th_r_wics: Th_r-wics, WiCSum threshold ratio (paper: 0.3).
    score: how Q·K_cluster^T becomes WiCSum weights: 'softmax' (exp(s/√d − max), default, D1) or 'raw'.
    granularity: 'kv_head' (select per layer × KV head, D2), 'q_head' or 'layer'.
    hash_mode: 'per_head' (hash each KV head's key, D3) or 'concat' (hash the concatenated layer key).
    code_rule: 'founder' (cluster code = founding token's code, D4) or 'mean' (re-hash the mean key).
    seed: hyperplanes are drawn N(0,1) from seed + layer index.
    """

    n_hp: int = 32
    th_hp: int = 7
    th_r_wics: float = 0.3
    score: Literal["softmax", "raw"] = "softmax"
    granularity: Literal["kv_head", "q_head", "layer"] = "kv_head"
    hash_mode: Literal["per_head", "concat"] = "per_head"
    code_rule: Literal["founder", "mean"] = "founder"
    seed: int = 0
    #: Old keyword -> the field that holds its meaning (refused with the new name, docs/DECISIONS.md D371).
    RENAMED: ClassVar[dict[str, str]] = {"ratio": "th_r_wics"}

    def __new__(cls, *args, **kwargs):
        refuse_renamed("ReSVConfig", kwargs, cls.RENAMED)  # also reached by replace(), which builds a new one
        return super().__new__(cls)

    def __post_init__(self):
        # Checked here, where every ReSV policy, sweep and CLI flag builds its config: a wrong type or range would
        # otherwise surface mid-stream inside the attention hook (n_hp=0) or run as another point (th_r_wics=7).
        who = "ReSVConfig"
        check_int(who, "n_hp (N_hp, hash bits)", self.n_hp, 1, MAX_HASH_BITS)
        check_int(who, "th_hp (Th_hp, Hamming threshold)", self.th_hp, 0)
        check_real(who, "th_r_wics (Th_r-wics)", self.th_r_wics, 0.0, 1.0)
        check_choice(who, "score", self.score, ("softmax", "raw"))
        check_choice(who, "granularity", self.granularity, ("kv_head", "q_head", "layer"))
        check_choice(who, "hash_mode", self.hash_mode, ("per_head", "concat"))
        check_choice(who, "code_rule", self.code_rule, ("founder", "mean"))
        check_int(who, "seed", self.seed, 0)

    def replace(self, **changes) -> "ReSVConfig":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class VRexCoreConfig:
    """One V-Rex core (paper §V, §VI.F, Table I): LXE (DPE, VPE, on-chip memory) + DRE (HCU, WTU, KVMU).

    Memory sizes of the DRE follow Fig. 10: current hash-bit memory 128 B, key-cache hash-bit
    memory 4 KB (HCU), score memory 8 KB and token-count memory 8 KB (WTU) -> 20.125 KB.
    """

    n_dpe_h: int = 64
    n_dpe_w: int = 64
    n_vpe_h: int = 1
    n_vpe_w: int = 64
    n_hcu_h: int = 1
    n_hcu_w: int = 16
    n_wtu_h: int = 1
    n_wtu_w: int = 16
    freq_hz: float = 800e6
    vdd: float = 0.8
    node_nm: int = 14
    lxe_sram_bytes: int = 384 * 1024
    hcu_cur_hash_bytes: int = 128
    hcu_key_hash_bytes: int = 4 * 1024
    wtu_score_bytes: int = 8 * 1024
    wtu_count_bytes: int = 8 * 1024

    @property
    def dre_sram_bytes(self) -> int:
        return self.hcu_cur_hash_bytes + self.hcu_key_hash_bytes + self.wtu_score_bytes + self.wtu_count_bytes

    @property
    def macs_per_cycle(self) -> int:
        """MACs per cycle of the DPE MAC trees plus the VPE lanes (Table I counts both)."""
        return self.n_dpe_h * self.n_dpe_w + self.n_vpe_h * self.n_vpe_w

    @property
    def peak_flops(self) -> float:
        """Peak FLOP/s of one core: 2 FLOP per MAC per cycle."""
        return 2.0 * self.macs_per_cycle * self.freq_hz

    def replace(self, **changes) -> "VRexCoreConfig":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class RuntimeConfig:
    """The streaming runtime's choices where the paper is silent (docs/DECISIONS.md D5, D6).

    kv_capacity:    KVMU recent-window capacity in tokens per stream (D6, 4,096): positions older than the
                    newest ``kv_capacity`` are in the "host" (offloaded) tier, except the pinned sinks.
    recent_frames:  always-attended recent frame window, in frames (>= 1: at least the current frame, D5).
    dense_layers:   the first ``dense_layers`` layers attend to everything (layer 0 full, D5 / Fig. 6).
    interval_token: feed VideoLLM-online's frame interval token (',', '\\n[' before the first frame).
    measure_attn_error: also compute full attention where a policy selected and record the relative error of
                    the attention output per (layer, KV head) (a fidelity proxy; doubles attention cost).
    record_inputs:  keep every input embedding fed (fidelity tests replay them through a plain forward).
    strict:         check every Selection is a sorted subset of the candidates (tests; costs a little).
    max_kv_bytes:   refuse (before work) a sample whose whole KV cache would exceed this; None = 60% of RAM/GPU.
    paper_kv_bytes_per_elem: element size the paper's model keeps KV in (BF16 = 2) for the "as the paper's model"
                    byte columns of the trace.
    """

    kv_capacity: int = 4096
    recent_frames: int = 1
    dense_layers: int = 1
    interval_token: bool = True
    measure_attn_error: bool = False
    record_inputs: bool = False
    strict: bool = False
    max_kv_bytes: int | None = None
    paper_kv_bytes_per_elem: int = 2

    def __post_init__(self):
        if self.kv_capacity < 1 or self.recent_frames < 1 or self.dense_layers < 0:
            raise ValueError(f"RuntimeConfig: kv_capacity and recent_frames must be >= 1 and dense_layers >= 0, "
                             f"got {self.kv_capacity}, {self.recent_frames}, {self.dense_layers}")

    def replace(self, **changes) -> "RuntimeConfig":
        return dataclasses.replace(self, **changes)


def profile_config(profile: str) -> Profile:
    """The record of ``profile`` (:func:`vrex_lib.profiles.get`; the profiles are defined there)."""
    return _profiles.get(profile)


#: How notebook 06 and the simulator extend a measured workload outside its context range
#: (``vrex_lib.perf.workload``).
EXTRAPOLATIONS: tuple[str, ...] = ("hold", "loglog-fit")
#: The long-context study's grids (``vrex_lib.longctx.study_grid``): the profile's share of make reproduce, the
#: comparison with power alone (40 trials per cell, docs/DECISIONS.md D481), or all.
STUDY_GRIDS: tuple[str, ...] = ("profile", "power", "full")
#: Notebook parameters that take one of a few values: checked before any notebook runs (scripts/check_params.py,
#: docs/DECISIONS.md D330) and by the notebooks themselves.
NOTEBOOK_CHOICES: dict[str, tuple[str, ...]] = {"PROFILE": PROFILES, "GRID": STUDY_GRIDS,
                                                 "EXTRAPOLATION": EXTRAPOLATIONS, "SPLIT": ("testing", "training")}
#: The notebooks' numeric parameters and their ranges, declared once: name -> (kind 'int' | 'int_list', minimum,
#: what to pass). ``scripts/check_params.py`` checks them before `make reproduce` runs anything (the workload
#: measurement included) and the notebooks with :func:`param_range` (docs/DECISIONS.md D444).
NOTEBOOK_RANGES: dict[str, tuple[str, int, str]] = {
    "N_SAMPLES": ("int", 0, "pass -p N_SAMPLES <samples per task: an integer >= 1, or 0 for the profile's default>"),
    "KV_LEN_SIM": ("int", 0, "pass -p KV_LEN_SIM <simulated cache length: tokens >= 1, or 0 for the profile's "
                   "default>"),
    "ACTIVITY_VECTORS": ("int", 1, "pass -p ACTIVITY_VECTORS <vectors per DRE block: an integer >= 1, e.g. 2000>"),
    "SHADOW_KV": ("int_list", 1, ""),
}


def builds_from_folders(profile: str) -> bool:
    """Whether the profile's model is built from the user's checkpoint folders (VideoLLM-online's LLM, SigLIP and
    connector), which are then required (``Profile.model.requires_paths``)."""
    return profile_config(profile).model.requires_paths


#: What a profile uses instead, for the message naming an input it ignores.
_OWN_INPUTS = {"tiny": "its own tiny random model", "smollm2": "SmolLM2-135M-Instruct (or the --llm-path folder)",
               "videollm_online": "the VideoLLM-online checkpoint", "mini": "the data/coin_mini fixture",
               "user": "your COIN folder"}


def check_profile_inputs(profile: str, **given: object) -> None:
    """Refuse the path inputs (``coin_root=``, ``llm_path=``, ``vision_path=``, ``connector_path=``, ...) that
    ``profile`` does not read: one ValueError naming every such flag -- or, in a notebook,
    parameter (:func:`arg_name`) -- the profile, and the fix. Empty values (None, '') are not given. Keyed on what
    the profile is (``Profile.uses_flag``, docs/DECISIONS.md D74), never on its name."""
    pc = profile_config(profile)
    extra = [k for k, v in given.items() if v not in (None, "") and not pc.uses_flag(k)]
    if not extra:
        return
    names = ", ".join(arg_name("--" + k.replace("_", "-")) for k in extra)
    users = [p for p in PROFILES if all(profile_config(p).uses_flag(k) for k in extra)]
    data = " and " + _OWN_INPUTS[pc.coin] if "coin_root" in extra and pc.coin in _OWN_INPUTS else ""
    used = f"the {' and '.join(users)} profile{'s' if len(users) > 1 else ''}"
    raise ValueError(f"{names} {'is' if len(extra) == 1 else 'are'} used only by {used}, not {profile}, which "
                     f"runs {_OWN_INPUTS[pc.llm]}{data}: drop {names}, or select the {' or '.join(users)} profile")


def results_dir(override: str | os.PathLike | None = None) -> Path:
    """Where notebooks write: the override, else $VREX_RESULTS_DIR, else <repo>/results."""
    d = Path(override) if override else Path(os.environ.get("VREX_RESULTS_DIR", REPO_ROOT / "results"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def workload_path(profile: str, results: str | os.PathLike | None = None) -> Path:
    """The workload measurement's file of ``profile`` in a results folder (default :func:`results_dir`): the one
    place its name is made (tests/test_profiles.py holds the Makefile's ``WORKLOAD_FILE`` to it)."""
    return Path(results if results is not None else results_dir()) / "data" / f"workload_{profile}.json"


_ARG_STYLE = {"style": "cli"}


def use_notebook_arg_names(on: bool = True) -> None:
    """Make :func:`arg_name` name notebook parameters (called by ``vrex_lib.notebook.setup``)."""
    _ARG_STYLE["style"] = "notebook" if on else "cli"


def arg_name(flag: str) -> str:
    """How an error message should name an input: the CLI flag ``--vision-path``, or inside a notebook run by
    papermill / Jupyter the parameter the user actually set, ``VISION_PATH``."""
    if _ARG_STYLE["style"] == "notebook" and flag.startswith("--"):
        return "the notebook parameter " + flag[2:].replace("-", "_").upper()
    return flag


def torch_threads(default: int = 1) -> int:
    """Torch intra-op threads from ``$VREX_THREADS`` (unset or empty: ``default``); anything but a whole number
    >= 1 is a one-line ValueError naming VREX_THREADS and the fix (torch would raise on 0 and int() on 'abc')."""
    raw = os.environ.get("VREX_THREADS", "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"VREX_THREADS={raw!r} is not a torch thread count: set it to a whole number >= 1 "
                         f"(e.g. VREX_THREADS=1) or unset it for {default}")
    return int(raw)


class ParamError(ValueError):
    """A notebook parameter (papermill ``-p NAME VALUE``) of the wrong type or out of range; one line that names it."""


def _param_fail(name: str, value: object, expected: str, fix: str) -> ParamError:
    return ParamError(f"notebook parameter {name}={value!r} {expected}; {fix}")


def param_int(name: str, value: object, *, minimum: int | None = None, fix: str = "") -> int:
    """``value`` as an int (an integral float such as papermill's ``2.0`` is accepted; a bool or a string is not),
    ``>= minimum`` when given; else :class:`ParamError` naming ``name``. ``fix`` says what to pass instead."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    ok = ok or (isinstance(value, float) and value.is_integer())
    bound = "" if minimum is None else f" >= {minimum}"
    if not ok:
        raise _param_fail(name, value, "is not an integer", fix or f"pass -p {name} <an integer{bound}>")
    if minimum is not None and int(value) < minimum:
        raise _param_fail(name, value, f"must be{bound}", fix or f"pass -p {name} <an integer{bound}>")
    return int(value)


def param_int_list(name: str, value: object, *, minimum: int | None = None) -> tuple[int, ...]:
    """A list of integers given as comma-separated text (``-r SHADOW_KV 1000,5000``), or one integer (papermill's
    ``-p SHADOW_KV 1000`` arrives as an int); ``''`` is the empty tuple. Every item must be a whole number
    ``>= minimum``, else :class:`ParamError` naming ``name`` and the bad item."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (param_int(name, value, minimum=minimum),)
    text = param_str(name, value)
    bound = "" if minimum is None else f" >= {minimum}"
    fix = f"pass -r {name} with comma-separated whole numbers{bound}, e.g. 1000,5000 (or '' for the default)"
    out = []
    for item in (x.strip() for x in text.split(",")) if text.strip() else ():
        if not (item.lstrip("-").isdigit()):
            raise _param_fail(name, value, f"has {item!r}, which is not a whole number", fix)
        if minimum is not None and int(item) < minimum:
            raise _param_fail(name, value, f"has {item}, which is not{bound}", fix)
        out.append(int(item))
    return tuple(out)


def param_range(name: str, value: object) -> int | tuple[int, ...]:
    """``value`` checked against ``name``'s declared range (:data:`NOTEBOOK_RANGES`); :class:`ParamError` naming
    it and the fix."""
    kind, minimum, fix = NOTEBOOK_RANGES[name]
    if kind == "int_list":
        return param_int_list(name, value, minimum=minimum)
    return param_int(name, value, minimum=minimum, fix=fix)


def param_bool(name: str, value: object) -> bool:
    """``value`` if it is a bool, else :class:`ParamError`: papermill turns only ``True`` / ``False`` into booleans,
    so ``-p FRESH false`` arrives as the (truthy) string ``'false'``."""
    if not isinstance(value, bool):
        raise _param_fail(name, value, "is not a boolean",
                          f"pass -p {name} True or -p {name} False (papermill reads only these two as booleans)")
    return value


def param_str(name: str, value: object, *, choices: tuple[str, ...] | None = None) -> str:
    """``value`` if it is a string (and one of ``choices`` when given, compared exactly), else :class:`ParamError`."""
    if not isinstance(value, str):
        raise _param_fail(name, value, "is not a string", f"pass -p {name} <text>" if choices is None else
                          f"pass -p {name} with one of {', '.join(choices)}")
    if choices is not None and value not in choices:
        raise _param_fail(name, value, f"is not one of {', '.join(choices)}", f"pass -p {name} with one of them")
    return value


def param_path(name: str, value: object, *, kind: Literal["file", "dir"]) -> Path | None:
    """An optional path parameter: None for ``''`` (not given), else the existing file (``kind='file'``, a regular
    file) or folder (``kind='dir'``); anything else is a :class:`ParamError` naming ``name``."""
    if param_str(name, value) == "":
        return None
    path = Path(value).expanduser()
    ok = path.is_file() if kind == "file" else path.is_dir()
    if not ok:
        what = "an existing file" if kind == "file" else "an existing folder"
        state = "does not exist" if not path.exists() else f"is not {what}"
        raise _param_fail(name, value, state, f"pass -p {name} <{what}>, or leave it empty for the default")
    return path


def param_profile(name: str, value: object, profile: str, *, like: str | None = None) -> None:
    """Refuse a path parameter (``LLM_PATH``, ``COIN_ROOT``, ... : a :data:`vrex_lib.profiles.PATH_FLAGS` name in
    capitals) set under a profile whose record does not use it (docs/DECISIONS.md D74), or left empty under one that
    requires it: :class:`ParamError` naming ``name``. Empty = ``''`` or None. ``like``: the path flag whose profiles
    use ``name`` too, never requiring it (e.g. notebook 03's ``EVAL_DIR``, results on the user's COIN: like
    ``coin_root``)."""
    flag, prof = (like or name).lower(), profile_config(profile)
    given = value not in ("", None)
    if given and not prof.uses_flag(flag):
        used_by = [p for p in PROFILES if profile_config(p).uses_flag(flag)]
        raise _param_fail(name, value, f"is used only by the {' / '.join(used_by)} profile, not {profile}",
                          f"leave it empty, or pass -p PROFILE {used_by[-1]}")
    if not given and like is None and prof.requires_flag(flag):
        raise _param_fail(name, value, f"is required by the {profile} profile", f"pass -p {name} <path>")


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch so a rerun gives the same tables."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover
        pass
    try:
        import torch

        torch.manual_seed(seed)
        torch.use_deterministic_algorithms(True, warn_only=True)
    except ImportError:  # pragma: no cover
        pass
