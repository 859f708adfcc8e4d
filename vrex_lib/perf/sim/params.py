"""The simulator's modelling choices (:class:`SimParams`) and its result (:class:`SimResult`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...config import ReSVConfig, RuntimeConfig
from .. import energy as _energy
from .. import link as _link
from ..model_ops import LLAMA3_8B, SIGLIP_L384, LLMSpec, VisionSpec

#: The granule rules of :class:`SimParams` (docs/DECISIONS.md D244).
GRANULE_RULES: tuple[str, ...] = ("extent", "packed", "independent")
#: The token layout's fetch rules of :class:`SimParams` (docs/DECISIONS.md D421).
TOKEN_FETCH_RULES: tuple[str, ...] = ("independent", "sector", "selected")
#: Where a unified-memory GPU's relay copies run (docs/DECISIONS.md D429).
RELAY_COPY_ENGINES: tuple[str, ...] = ("gpu", "cpu_ce")
#: NVMe logical block of the 'sector' token rule: the 512-B LBA format every NVMe drive offers besides 4 KiB.
SECTOR_BYTES = 512


@dataclass(frozen=True)
class SimParams:
    """Modelling choices (not the workload); pass any field to :func:`simulate` as a keyword override.

    recent_capacity: V-Rex's KVMU capacity before offload, tokens per stream (``RuntimeConfig.kv_capacity``,
      docs/DECISIONS.md D6); on a GPU the input stage sets it to ``baseline_kv_capacity``.
    recent_window:   newest tokens always attended (None = one frame: the Workload's tokens per frame).
    dense_layers:    first layers that attend to and fetch everything (None = the Workload's, which is
      ``RuntimeConfig.dense_layers`` for the paper-stated workload and the measurement's own for a file).
    dense_resident:  keep the dense layers' whole KV in device DRAM (default: what a designer builds, 1/32 of the
      cache for one dense layer) instead of offloading and re-fetching it every step (docs/DECISIONS.md D103; the
      runtime offloads every layer alike, the measurement of the selecting layers is unaffected).
    n_hp: ReSV hash bits (``ReSVConfig.n_hp``, §VI.E).
    infinigen_partial_frac: InfiniGen's partial key/query fraction of head_dim (InfiniGen's default 0.2).
    infinigen_p_key_frac:   InfiniGenP's frame-stage scoring key fraction (1.0 = full-key Q·K^T).
    topk_passes / sort_passes: read passes of a GPU radix top-k / radix sort over the scores.
    retrieved_cache: which methods keep the previous step's retrieved KV in device DRAM: 'kvmu' (default: only
      V-Rex's KVMU, i.e. ReSV's cluster layout on V-Rex, as in Fig. 12), 'all' (also every selecting, offloading
      GPU baseline), 'none'. The reuse fraction itself is the Workload's.
    n_new: new tokens per stream in a frame-stage step (None = one frame; the question prefill passes its length).
    prefetch: overlap the fetch of layer ℓ+1 with layer ℓ (False = serial, for ablation/tests).
    offload: None = the method's own behaviour; False forces no offload (Fig. 15 AGX without offload).
    include_vision: run the vision tower in a frame step.
    aspm: PCIe link power management while idle: 'l1' (L0s then L1.2), 'l0s', 'off' (L0: the upper bound).
    granule_rule: how the KVMU's cluster-wise reordering places a selected cluster's offloaded tokens in the tier's
      granules (docs/DECISIONS.md D244): 'extent' (each cluster in its own granule-aligned extent: ceil(run / g)
      granules, one command per cluster), 'packed' (clusters back to back, D85: a run spans run/g + 1/2 granules),
      'independent' (runs at independent offsets, the upper bound). A workload file's measured blocks per selected
      token replace the rule where it has them.
    noclust_keys: Fig. 19's per-token ablation fetches every offloaded key to score it ('fetch') or keeps all keys
      on the device ('resident') (docs/DECISIONS.md D246).
    baseline_kv_capacity: the GPU baselines' GPU-resident KV per stream, apart from V-Rex's ``recent_capacity``
      (docs/DECISIONS.md D420): tokens (0 = the paper's full offload, §II.B), or 'fit' (what FlexGen's policy keeps
      in the GPU memory left after weights, activations and its buffers at that batch).
    token_fetch_rule: what a token-layout fetch (GPU+ReSV, the KVPU-only ablation, InfiniGen) moves
      (docs/DECISIONS.md D421): 'independent' (selected tokens at independent offsets in 4-KiB blocks), 'sector'
      (the same on the drive's 512-B LBA format), 'selected' (only the selected tokens' bytes, in whole blocks).
    gpu_queue_depth: NVMe reads a GPU host keeps in flight (None = the system's, D105; docs/DECISIONS.md D422).
    gpu_resv_host_calls: eager host calls (each one kernel) per new token and KV head of GPU+ReSV's clustering, on
      top of its one kernel per new token (docs/DECISIONS.md D423).
    decode_dram_eff: the share of the DRAM peak a long read stream (weights, activations, KV) reaches at decode
      rate, for every system alike: 'model' (the bank-level model x the system's memory-side factor) or a published
      decode measurement's share, taken as a ceiling on the model's (docs/DECISIONS.md D424).
    gpu_stall_power: a GPU board's power while the GPU waits on the link (docs/DECISIONS.md D427): 'idle' (its
      bare idle), 'context' (that plus a held CUDA context's step, the default), 'board' (Table I's busy power).
    relay_copy_engine: where FlexGen's relay copies run on a unified-memory GPU (the Orin; docs/DECISIONS.md D429):
      'gpu' (their LPDDR5 traffic in line with the GPU's kernels: every copied byte delays the GPU's DRAM-bound
      stream, the upper end) or 'cpu_ce' (FlexGen's copy worker: the CPU copy and the copy engine's cudaMemcpy after
      the SSD read, beside the kernels, at the LPDDR5's copy rate: the lower end, no contention charged).
    """

    llm: LLMSpec = LLAMA3_8B
    vision: VisionSpec = SIGLIP_L384
    recent_capacity: int = field(default_factory=lambda: RuntimeConfig().kv_capacity)
    recent_window: int | None = None
    dense_layers: int | None = None
    dense_resident: bool = True
    n_hp: int = field(default_factory=lambda: ReSVConfig().n_hp)
    infinigen_partial_frac: float = 0.2
    infinigen_p_key_frac: float = 1.0
    topk_passes: int = 4
    sort_passes: int = 8
    retrieved_cache: str = "kvmu"
    prefetch: bool = True
    offload: bool | None = None
    include_vision: bool = True
    n_new: int | None = None
    aspm: str = "l1"
    granule_rule: str = "extent"
    noclust_keys: str = "fetch"
    baseline_kv_capacity: int | str = field(default_factory=lambda: RuntimeConfig().kv_capacity)
    token_fetch_rule: str = "independent"
    gpu_queue_depth: int | None = None
    gpu_resv_host_calls: int = 0
    decode_dram_eff: float | str = "model"
    gpu_stall_power: str = "context"
    relay_copy_engine: str = "gpu"

    def __post_init__(self) -> None:
        if self.retrieved_cache not in ("kvmu", "all", "none"):
            raise ValueError(f"retrieved_cache must be 'kvmu', 'all' or 'none', got {self.retrieved_cache!r}")
        if self.recent_capacity < 0:
            raise ValueError(f"recent_capacity must be >= 0 (0: everything offloaded), got {self.recent_capacity}")
        if self.dense_layers is not None and not 0 <= self.dense_layers <= self.llm.n_layers:
            raise ValueError(f"dense_layers must be in [0, {self.llm.n_layers}], got {self.dense_layers}")
        if self.noclust_keys not in ("fetch", "resident"):
            raise ValueError(f"noclust_keys must be 'fetch' or 'resident', got {self.noclust_keys!r}")
        if self.granule_rule not in GRANULE_RULES:
            raise ValueError(f"granule_rule {self.granule_rule!r}: choose one of {', '.join(GRANULE_RULES)}")
        if self.aspm not in _link.ASPM_POLICIES:
            raise ValueError(f"aspm {self.aspm!r}: choose one of {', '.join(_link.ASPM_POLICIES)}")
        if self.n_new is not None and self.n_new < 1:
            raise ValueError(f"n_new must be >= 1, got {self.n_new}")
        self._check_hw_choices()

    def _check_hw_choices(self) -> None:
        """The choices of docs/DECISIONS.md D420-D424, D427 and D429, each with the fix in its message."""
        cap = self.baseline_kv_capacity
        if cap != "fit" and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
            raise ValueError(f"baseline_kv_capacity must be tokens >= 0 or 'fit', got {cap!r}")
        if self.token_fetch_rule not in TOKEN_FETCH_RULES:
            raise ValueError(f"token_fetch_rule {self.token_fetch_rule!r}: choose one of {', '.join(TOKEN_FETCH_RULES)}")
        if self.gpu_queue_depth is not None and self.gpu_queue_depth < 1:
            raise ValueError(f"gpu_queue_depth must be >= 1 (or None for the system's), got {self.gpu_queue_depth}")
        if self.gpu_resv_host_calls < 0:
            raise ValueError(f"gpu_resv_host_calls must be >= 0, got {self.gpu_resv_host_calls}")
        eff = self.decode_dram_eff
        if eff != "model" and not (isinstance(eff, float) and 0 < eff <= 1):
            raise ValueError(f"decode_dram_eff must be 'model' or a share in (0, 1], got {eff!r}")
        if self.relay_copy_engine not in RELAY_COPY_ENGINES:
            raise ValueError(f"relay_copy_engine {self.relay_copy_engine!r}: choose one of "
                             f"{', '.join(RELAY_COPY_ENGINES)}")
        if self.gpu_stall_power not in _energy.STALL_POWER_LEVELS:
            raise ValueError(f"gpu_stall_power {self.gpu_stall_power!r}: choose one of "
                             f"{', '.join(_energy.STALL_POWER_LEVELS)}")


@dataclass
class SimResult:
    """One simulated step: a batched frame prefill (every stream adds one frame) or one generated token.

    latency_ms: per frame (frame stage) or per output token (text stage, TPOT).
    breakdown_ms: llm, vision_mlp, kv_prediction (main-engine time), retrieval_exposed (stall waiting for
      PCIe) -- they sum to latency_ms.
    bytes: dram (accelerator DRAM traffic), pcie (offload-tier traffic, both directions), pcie_fetch.
    ratio: the selected share of the offloaded candidates used (the on-device share when nothing is offloaded,
      then not looked up; both are in ``notes``); workload_source: the Workload's provenance and every
      extrapolation used for this step.
    timeline: one dict per phase (layer, phase, engine, start_us, end_us, dram_bytes, pcie_bytes), built on first
    access from ``timeline_rows`` (the same fields as tuples).
    ledger: the resource ledger (:data:`RESOURCES`): one dict per (resource, term) with the seconds it held the
    resource, the joules it cost and the bytes it moved; its energies sum to ``energy_J`` (docs/PERF_MODEL.md).
    """

    system: str
    method: str
    stage: str
    kv_len: int
    batch: int
    latency_ms: float
    energy_J: float
    flops: float
    pred_flops: float
    bytes: dict
    breakdown_ms: dict
    energy_breakdown_J: dict
    power_w: float
    mem_bytes: float
    mem_capacity: float
    ratio: float
    workload_source: str
    timeline_rows: list = field(default_factory=list, repr=False)
    notes: dict = field(default_factory=dict)
    ledger: list = field(default_factory=list, repr=False)

    @property
    def timeline(self) -> list[dict]:
        if "_timeline" not in self.__dict__:
            keys = ("layer", "phase", "engine", "start_us", "end_us", "dram_bytes", "pcie_bytes")
            self.__dict__["_timeline"] = [dict(zip(keys, r)) for r in self.timeline_rows]
        return self.__dict__["_timeline"]

    @property
    def oom(self) -> bool:
        return self.mem_bytes > self.mem_capacity

    @property
    def fps(self) -> float:
        """Frames per second per stream (frame stage): one frame of every stream per step."""
        return 1000.0 / self.latency_ms

    @property
    def achieved_tflops(self) -> float:
        return (self.flops + self.pred_flops) / (self.latency_ms * 1e-3) / 1e12

    @property
    def gops_per_w(self) -> float:
        """Useful work per joule in GOPS/W. One operation count for every system and method: the LLM decoder,
        LM head and vision-tower FLOPs of the step (2 per MAC); KV-prediction work is excluded, so a method
        that spends more on prediction gains nothing from it (docs/PERF_MODEL.md)."""
        return self.flops / self.energy_J / 1e9

    @property
    def op_intensity(self) -> float:
        """FLOP per byte of accelerator DRAM traffic (the x-axis of a DRAM roofline), vision included. The
        fetched KV is already in ``bytes['dram']`` (written where it lands, read by attention); PCIe bytes belong
        to another roof and are not added."""
        return (self.flops + self.pred_flops) / max(1.0, self.bytes["dram"])

    @property
    def llm_achieved_tflops(self) -> float:
        """LLM decoder (+ prediction, + LM head) FLOP/s over the step time without the vision tower: the same
        scope as :attr:`llm_op_intensity`, so the pair is one point on a roofline."""
        llm_flops = self.flops - self.notes.get("vision_flops", 0.0)
        t = (self.latency_ms - self.breakdown_ms.get("vision_mlp", 0.0)) * 1e-3
        return (llm_flops + self.pred_flops) / t / 1e12

    @property
    def llm_op_intensity(self) -> float:
        """FLOP per DRAM byte of the LLM decoder alone (vision tower excluded; prediction included)."""
        llm_flops = self.flops - self.notes.get("vision_flops", 0.0)
        return (llm_flops + self.pred_flops) / max(1.0, self.bytes["dram_llm"])

    def row(self) -> dict:
        d = dict(system=self.system, method=self.method, stage=self.stage, kv_len=self.kv_len, batch=self.batch,
                 latency_ms=self.latency_ms, fps=self.fps if self.stage == "frame" else float("nan"),
                 energy_J=self.energy_J, gops_per_w=self.gops_per_w, achieved_tflops=self.achieved_tflops,
                 op_intensity=self.op_intensity, llm_op_intensity=self.llm_op_intensity, power_w=self.power_w,
                 oom=self.oom, mem_gb=self.mem_bytes / 1e9, ratio=self.ratio, workload_source=self.workload_source,
                 dram_eff=self.notes.get("dram_eff", float("nan")))
        d.update({f"{k}_ms": v for k, v in self.breakdown_ms.items()})
        d.update({f"limit_{k}_ms": v for k, v in self.notes.get("limits_ms", {}).items()})
        d.update({f"{k}_bytes": v for k, v in self.bytes.items()})
        return d

