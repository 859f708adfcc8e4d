"""The simulator: workload × system × method × stage -> latency, energy, bytes per tier, per-layer timeline.

``simulate`` is pure: every input is an argument (the Workload, the System, the SimParams overrides); it reads no
file the caller did not name, keeps no cache and changes no global. It runs in four small steps:

1. :func:`step_inputs` -- resolve system, method, workload, parameters; the selected fractions of the on-device and
   of the offloaded candidates at this length (and which extrapolation, if any, was used);
2. :func:`placement` -- tokens per tier, selected tokens, granule-amplified fetch bytes and NVMe commands per layer
   (dense layers read and fetch everything), reuse of the previous step's retrieved KV, memory footprint;
3. :func:`schedule` -- the per-layer event timeline (main engine, DRE, PCIe);
4. :func:`totals` -- work, traffic, energy and the :class:`SimResult`.

Model (docs/PERF_MODEL.md; modelling choices are docs/DECISIONS.md D20-D28 and D100-D107):

* Each op's DRAM time is the sum over its access streams of bytes / (peak x the stream's sustained efficiency from
  the technology's bank-level model, :mod:`vrex_lib.perf.dram`). On V-Rex an op takes ``max(DRAM, DPE, VPE)`` from
  the per-core LXE model (:mod:`vrex_lib.perf.lxe`); on a GPU ``max(max(FLOPs / achieved FLOP/s, DRAM + kernel
  start-ups), host calls x host time per call)`` -- each of the op's kernels (its stack's count) pays a measured
  start-up, and the eager host stack issues each framework call while the GPU runs the previous (D240); the step
  outside the layers costs the host its measured time (``System.host_fixed_s``, D247).
* Every second and joule of the step is booked on the resource it occupies (:data:`RESOURCES`, ``SimResult.ledger``).
* Per decoder layer ℓ the main engine runs QKV → KV prediction for layer ℓ+1 → attention → out-proj → FFN.
  The PCIe engine fetches layer ℓ+1's selected offloaded KV as soon as its prediction is known (on V-Rex:
  after the DRE's HCU/WTU finish, which run concurrently with the LXE) and the link is free; attention of
  ℓ+1 waits for its fetch. The first ``dense_layers`` layers need no prediction: they attend to every token and
  fetch every offloaded one, issued ahead (during the vision tower for layer 0). ``prefetch=False`` serialises
  prediction → fetch → attention.
* Placement: per stream the newest ``recent_capacity`` tokens sit in accelerator DRAM, older ones in the
  offload tier (SSD on the edge, CPU DDR4 on the server); the newest ``recent_window`` tokens are always
  attended, the rest are candidates of which the method selects the Workload's on-device share and offloaded share.
* The offload tier moves whole granules (:func:`methods.moved_fraction`) in NVMe commands (:mod:`vrex_lib.perf.link`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..config import ReSVConfig, RuntimeConfig
from . import energy as _energy
from . import link as _link
from .dram import StreamRates
from .lxe import lxe_time, vpe_lane_ops
from .workload import SIM_METHOD, Workload
from .methods import PredContext, PredWork, SimMethod, get_method, moved_fraction, run_tokens
from .systems import System, get_system
from .model_ops import (LLAMA3_8B, SIGLIP_L384, LLMSpec, Op, VisionSpec, decoder_layer_ops, lm_head_op,
                        stack_counts, vision_op)
from .constants import const


#: The granule rules of :class:`SimParams` (docs/DECISIONS.md D244).
GRANULE_RULES: tuple[str, ...] = ("extent", "packed", "independent")


@dataclass(frozen=True)
class SimParams:
    """Modelling choices (not the workload); pass any field to :func:`simulate` as a keyword override.

    recent_capacity: KVMU capacity before offload, tokens per stream (``RuntimeConfig.kv_capacity``,
      docs/DECISIONS.md D6).
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

    def __post_init__(self) -> None:
        if self.retrieved_cache not in ("kvmu", "all", "none"):
            raise ValueError(f"retrieved_cache must be 'kvmu', 'all' or 'none', got {self.retrieved_cache!r}")
        if self.recent_capacity < 1:
            raise ValueError(f"recent_capacity must be >= 1, got {self.recent_capacity}")
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


class OpCosts:
    """Op timing on one system for one step (DRAM stream rates computed once per stream within the step; each op's
    time and its parts computed once, :meth:`parts`)."""

    def __init__(self, sys: System) -> None:
        self.sys = sys
        self.rates = StreamRates(sys.dram_timing, sys.mem_side_eff)
        self._memo: dict[int, tuple] = {}

    def dram_s(self, op: Op) -> float:
        r = self.rates.rate
        return ((op.weight_bytes + op.act_bytes + op.kv_bytes) / r()
                + (op.sel_kv_bytes / r(op.sel_run_bytes) if op.sel_kv_bytes else 0.0)
                + (op.kv_write_bytes / r(op.kv_write_run_bytes, True) if op.kv_write_bytes else 0.0)
                + (op.dma_bytes / r(op.dma_run_bytes, True) if op.dma_bytes else 0.0))

    def parts(self, op: Op) -> tuple[float, str, float, float, float]:
        """(seconds, what limits the op, DRAM seconds, kernel start-up seconds, host seconds), once per op."""
        hit = self._memo.get(id(op))
        if hit is not None and hit[0] is op:
            return hit[1]
        sys, dram_s = self.sys, self.dram_s(op)
        if sys.kind == "vrex":
            t = lxe_time(op.gemms, op.vpe, dram_s, sys.core, sys.n_cores, sys.core_port_bytes_per_cycle)
            out = (t.time_s, t.limit, dram_s, 0.0, 0.0)
        else:
            (sec, lim), pr = self.gpu_parts(op, dram_s)
            out = (sec, lim, dram_s, pr["kernel"], pr["host"])
        self._memo[id(op)] = (op, out)
        return out

    def time(self, op: Op) -> tuple[float, str]:
        """(seconds, what limits the op: dram / dpe / vpe on V-Rex, dram / kernel / compute / host on a GPU)."""
        return self.parts(op)[:2]

    def gpu_parts(self, op: Op, dram_s: float | None = None) -> tuple[tuple[float, str], dict]:
        """A GPU op: the device runs its kernels, each paying its fixed start-up (``kernel_*_s``) on top of its DRAM
        streaming, unless compute binds; the eager host issues its calls meanwhile. ((seconds, limit), parts)."""
        sys = self.sys
        dram_s = self.dram_s(op) if dram_s is None else dram_s
        calls, kernels, dram_k = stack_counts(sys.stack, op)
        fixed_s = dram_k * sys.kernel_dram_s + (kernels - dram_k) * sys.kernel_small_s
        # The step outside the layers is charged its measured host time as a whole, not per framework call: much
        # of it (generate()'s logits processors and stopping criteria) is Python (docs/DECISIONS.md D247).
        host_s = sys.host_fixed_s if op.name == "lm_head" else calls * sys.host_op_s
        parts = dict(compute=op.flops / sys.flops, dram=dram_s, kernel=fixed_s, host=host_s)
        device_s = max(parts["compute"], dram_s + fixed_s)
        if parts["host"] >= device_s:
            return (parts["host"], "host"), parts
        lim = "compute" if parts["compute"] >= dram_s + fixed_s else ("kernel" if fixed_s > dram_s else "dram")
        return (device_s, lim), parts

    def seconds(self, op: Op) -> float:
        return self.parts(op)[0]


def _op_time_s(op: Op, sys: System) -> float:
    """One op's time on ``sys`` (see :class:`OpCosts`)."""
    return OpCosts(sys).seconds(op)


# ---------------------------------------------------------------------------------------------------------------
# Step 1: inputs.

@dataclass(frozen=True)
class StepInputs:
    """Everything one step depends on, resolved. ``extrapolated``: {field: policy} used at this length.
    ``r_dev`` / ``r_off``: selected share of the on-device / offloaded candidates (1 for methods that do not
    select; ``r_off`` = ``r_dev`` when nothing is offloaded, where it is unused); ``dense_layers``: layers that
    attend to everything."""

    sys: System
    spec: SimMethod
    p: SimParams
    wl: Workload
    llm: LLMSpec
    stage: str
    kv_len: int
    batch: int
    n_new: int
    r_dev: float
    r_off: float
    reuse_frac: float
    tokens_per_cluster: float
    wics_exit_frac: float
    engine: str
    dense_layers: int
    extrapolated: dict

    @property
    def selected_frac(self) -> float:
        """The offloaded-tier share (what the link moves), kept as the result's ``ratio``."""
        return self.r_off


def _check_step_args(stage: str, kv_len, batch) -> tuple[int, int]:
    if stage not in ("frame", "text"):
        raise ValueError(f"stage must be 'frame' or 'text', got {stage!r}")
    for name, v in (("kv_len", kv_len), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v):
            raise ValueError(f"simulate: {name} must be a finite whole number, got {v!r}")
    if kv_len < 0 or batch < 1:
        raise ValueError(f"simulate: kv_len must be >= 0 and batch >= 1 (got {kv_len}, {batch})")
    return int(kv_len), int(batch)


def step_inputs(system: str | System, method: str | SimMethod, stage: str, kv_len: int, batch: int,
                workload: Workload | str | Path, overrides: dict) -> StepInputs:
    kv_len, batch = _check_step_args(stage, kv_len, batch)
    sys = get_system(system)
    overrides = dict(overrides)
    sys_changes = {k[len("system_"):]: overrides.pop(k) for k in list(overrides) if k.startswith("system_")}
    if sys_changes:
        sys = dataclasses.replace(sys, **sys_changes)
    unknown = set(overrides) - {f.name for f in dataclasses.fields(SimParams)}
    if unknown:
        raise TypeError(f"simulate: unknown override(s) {sorted(unknown)}; SimParams fields or system_<field>. "
                        "Workload quantities (selected fraction, reuse, tokens per cluster) belong in the Workload")
    spec = get_method(method).on_system(sys.kind)
    p = SimParams(**overrides)
    wl = Workload.resolve(workload)
    used: dict[str, str] = {}
    offload = spec.offload if p.offload is None else (p.offload and spec.offload)
    # Below the KVMU capacity nothing is offloaded: the offloaded share is not needed (nor looked up).
    r_dev, r_off = spec.selection(wl, stage, kv_len, offloaded=offload and kv_len > p.recent_capacity, used=used)
    reuse, pol = wl.reuse_at(spec.ratio_key, stage, kv_len) if spec.ratio_key else (0.0, None)
    if pol:
        used[f"reuse {spec.ratio_key}/{stage}"] = pol
    tpc, pol = wl.tokens_per_cluster.at(kv_len)
    tpc = spec.cluster_tokens(tpc)
    if pol and spec.ratio_key == "resv":
        used["tokens_per_cluster"] = pol
    wics, pol = wl.wics_exit_frac.at(kv_len)
    if pol and spec.ratio_key == "resv":
        used["wics_exit_frac"] = pol
    n_new = (p.n_new or wl.tokens_per_frame) if stage == "frame" else 1
    engine = spec.engine(sys.kind, stage)
    dense = wl.dense_layers if p.dense_layers is None else p.dense_layers
    return StepInputs(sys, spec, p, wl, dataclasses.replace(p.llm, kv_bits=spec.kv_bits), stage, kv_len, batch, n_new,
                      r_dev, r_off, reuse, max(1.0, tpc), min(1.0, max(0.0, wics)), engine,
                      min(dense, p.llm.n_layers), used)


# ---------------------------------------------------------------------------------------------------------------
# Step 2: placement and traffic per tier.

@dataclass(frozen=True)
class LayerTraffic:
    """One layer's tokens and offload traffic (per stream unless ``_bytes`` / ``commands``: whole batch).

    attended: tokens attention reads; sel_dev: selected on-device tokens read in runs of ``sel_run_bytes`` (the rest
    is contiguous); fetch_bytes / fetch_commands: what the link moves for this layer and in how many NVMe reads;
    useful_fetch_bytes: the selected bytes among them; moved_frac: share of the offloaded region moved."""

    dense: bool
    attended: float
    sel_dev: float
    sel_run_bytes: float
    fetch_bytes: float
    fetch_commands: float
    dma_run_bytes: float
    useful_fetch_bytes: float
    moved_frac: float


@dataclass(frozen=True)
class Placement:
    """Tokens per tier (per stream) and the traffic of the dense and the sparse (selecting) layers."""

    offload: bool
    on_dev_tokens: int
    off_tokens: int
    always_tokens: int
    cand_tokens: int
    sel_off_tokens: float
    n_dense: int
    dense: LayerTraffic
    sparse: LayerTraffic
    fetch_kv_share: float
    reuse_frac: float
    retrieved_kept_frac: float
    offload_write_bytes_per_layer: float
    retrieved_kept_bytes: float
    granule_source: str = ""

    def layer(self, ell: int) -> LayerTraffic:
        return self.dense if ell < self.n_dense else self.sparse

    def per_layer(self, n_layers: int, attr: str) -> float:
        """Sum of ``attr`` over the model's layers."""
        nd = min(self.n_dense, n_layers)
        return nd * getattr(self.dense, attr) + (n_layers - nd) * getattr(self.sparse, attr)


def _fetch(i: StepInputs, off: int, frac: float, reuse: float, share: float, layout: str,
           run_bytes: float, chunk_bytes: float) -> tuple[float, float, float]:
    """(bytes, NVMe commands, DMA run bytes) the link moves for one layer."""
    b = i.batch * off * i.llm.kv_bytes_per_token_layer * frac * (1.0 - reuse) * share
    if b <= 0:
        return 0.0, 0.0, math.inf
    if i.sys.offload_tier != "ssd":
        return b, 0.0, math.inf if layout == "all" else run_bytes
    g = max(i.sys.offload_granule, chunk_bytes)
    if layout == "cluster" and i.p.granule_rule == "extent":
        cmd = g * math.ceil(run_bytes / g)  # one command per cluster extent
    else:
        cmd = _link.command_bytes(layout, run_bytes, chunk_bytes, i.sys.offload_granule)
    return b, b / cmd, cmd


def _moved(i: StepInputs, run_bytes: float, chunk_bytes: float) -> tuple[float, str]:
    """(share of the offloaded region the tier moves, how it was found): the workload's measured blocks per selected
    token for this layout and granule where the file has them, else the granule rule (:data:`GRANULE_RULES`)."""
    spec, g = i.spec, max(i.sys.offload_granule, chunk_bytes)
    if i.r_off <= 0:
        return 0.0, "nothing selected"
    if spec.layout == "all" or i.r_off >= 1:
        return 1.0, "whole tier"
    layout = "cluster" if spec.layout == "cluster" else "token"
    measured = i.wl.fetch_blocks_at(spec.ratio_key, layout, g / chunk_bytes, i.kv_len) if spec.ratio_key else None
    if measured is not None:
        return min(1.0, i.r_off * measured * g / chunk_bytes), f"measured blocks per token ({layout} layout)"
    rule = i.p.granule_rule if layout == "cluster" else "independent"
    if rule == "extent":
        return min(1.0, i.r_off * g * math.ceil(run_bytes / g) / run_bytes), "extent rule"
    return moved_fraction(i.r_off, run_bytes, chunk_bytes, i.sys.offload_granule, aligned=rule == "packed"), \
        f"{rule} rule"


def placement(i: StepInputs) -> Placement:
    p, spec, sys, llm, B = i.p, i.spec, i.sys, i.llm, i.batch
    offload = spec.offload if p.offload is None else (p.offload and spec.offload)
    on_dev = i.kv_len if not offload else min(i.kv_len, p.recent_capacity)
    off = i.kv_len - on_dev
    window = p.recent_window if p.recent_window is not None else i.wl.tokens_per_frame
    always = min(i.kv_len, window)
    n_cand = i.kv_len - always
    cand_dev = max(0, on_dev - always)
    sel_dev, sel_off = i.r_dev * cand_dev, i.r_off * off
    kvb = llm.kv_bytes_per_token_layer
    chunk_bytes = llm.head_dim * spec.kv_bits / 8
    run_bytes = min(run_tokens(spec, i.wl.tokens_per_frame, i.tokens_per_cluster) * chunk_bytes,
                    max(off, cand_dev, 1) * chunk_bytes)
    frac, granule_src = _moved(i, run_bytes, chunk_bytes) if off > 0 else (0.0, "nothing offloaded")
    # Who keeps the previous step's retrieved KV in device DRAM (SimParams.retrieved_cache).
    has_cache = (spec.layout == "cluster" if p.retrieved_cache == "kvmu" else
                 p.retrieved_cache == "all" and offload and spec.selects(i.stage))
    reuse = i.reuse_frac if has_cache else 0.0
    # A method that keeps every key in device DRAM for its scoring (InfiniGenP full-key) fetches only V.
    share = 0.5 if spec.keys_resident(p) else 1.0
    n_dense = i.dense_layers if spec.selects(i.stage) else 0
    full_bytes = B * off * kvb
    # The retrieved-KV region keeps every sparse layer's selected offloaded KV until the next step, in the DRAM
    # left over after weights, recent KV, predictor metadata and the prefetch buffers (two sparse layers' fetch;
    # a dense layer's KV streams through attention in chunks); what does not fit is fetched again.
    mem_base = (footprint_bytes(llm, p, spec, i.kv_len, B, offload, i.wl.tokens_per_frame, i.tokens_per_cluster)
                + 2 * full_bytes * frac * share)
    need = (llm.n_layers - n_dense) * B * sel_off * kvb * share if reuse > 0 else 0.0
    kept = min(need, max(0.0, sys.dram_capacity - mem_base))
    kept_frac = kept / need if need else float("nan")
    if need > 0:
        reuse *= kept_frac
    fb, fc, fr = _fetch(i, off, frac, reuse, share, spec.layout, run_bytes, chunk_bytes)
    if spec.fetches_all_keys(p) and off > 0:
        # every offloaded key streams in for scoring (K: half of K+V, sequential); then the selected values
        kb, kc, _ = _fetch(i, off, 1.0, 0.0, 0.5, "all", run_bytes, chunk_bytes)
        vb, vc, vr = _fetch(i, off, frac, reuse, 0.5, spec.layout, run_bytes, chunk_bytes)
        fb, fc, fr = kb + vb, kc + vc, vr
    layout_runs = spec.layout != "all" and spec.selects(i.stage) and i.r_dev < 1.0
    sparse = LayerTraffic(False, always + sel_dev + sel_off + i.n_new, sel_dev if layout_runs else 0.0, run_bytes,
                          fb, fc, fr, B * sel_off * kvb * share, frac)
    db, dc, dr = (_fetch(i, off, 1.0, 0.0, 1.0, "all", run_bytes, chunk_bytes) if not p.dense_resident
                  else (0.0, 0.0, math.inf))
    dense = LayerTraffic(True, i.kv_len + i.n_new, 0.0, math.inf, db, dc, dr, db, 1.0 if db else 0.0)
    # The oldest tokens leave for the offload tier (an evicting method drops them instead).
    write = B * i.n_new * kvb if off > 0 and not spec.evicts else 0.0
    return Placement(offload, on_dev, off, always, n_cand, sel_off, n_dense, dense, sparse, share, reuse, kept_frac,
                     write, kept, granule_src)


# ---------------------------------------------------------------------------------------------------------------
# Step 3: per-layer event schedule.

@dataclass
class LayerPlan:
    """One class of layers (dense or sparse): its ops and their times, and its fetch time."""

    ops: list
    op_s: list
    limits: list
    fetch_s: float
    traffic: LayerTraffic
    dram: list = field(default_factory=list)
    host_copy_s: float = 0.0


@dataclass
class LayerSchedule:
    total_s: float
    stall_s: float
    vision_s: float
    pred_main_s: float
    dre_s: float
    dense: LayerPlan
    sparse: LayerPlan
    pred: PredWork
    timeline: list
    costs: OpCosts


def _layer_plan(i: StepInputs, tr: LayerTraffic, costs: OpCosts, write_bytes: float) -> LayerPlan:
    llm, B = i.llm, i.batch
    ops = decoder_layer_ops(llm, i.n_new, B, tr.attended, n_selected=tr.sel_dev, sel_run_bytes=tr.sel_run_bytes)
    ops[1].dma_bytes, ops[1].dma_run_bytes = tr.fetch_bytes, tr.dma_run_bytes  # lands before attention
    ops[1].kv_write_bytes = write_bytes  # the oldest tokens read out for the offload tier
    if i.sys.unified_memory and i.sys.staging_copies and tr.fetch_bytes:
        # FlexGen's host copies of each fetched byte (read + write per copy) share the GPU's LPDDR5.
        n = i.sys.staging_copies * tr.fetch_bytes
        ops.append(Op("staging", "staging", 0.0, act_bytes=n, kv_write_bytes=n, kernels=0, host_ops=0))
    times = [costs.time(o) for o in ops]
    sys = i.sys
    ssd = sys.offload_store if sys.offload_tier == "ssd" else None
    fetch_s = _link.fetch_time_s(tr.fetch_bytes, tr.fetch_commands, link_bytes_s=sys.pcie, ssd=ssd is not None,
                                 queue_depth=sys.nvme_queue_depth, read_iops=ssd.read_iops if ssd else None,
                                 read_latency_s=ssd.read_latency_s if ssd else None)
    # FlexGen's pinned-buffer relay in host DRAM (server): each fetched byte is copied before its DMA can start.
    copy_s = (sys.staging_copies * tr.fetch_bytes / sys.host_copy_bytes_s
              if sys.staging_copies and not sys.unified_memory and sys.kind != "vrex" and tr.fetch_bytes else 0.0)
    return LayerPlan(ops, [t for t, _ in times], [lim for _, lim in times], fetch_s, tr, [o.dram_bytes for o in ops],
                     copy_s)


class _Timeline:
    """The main engine's clock ``t``, the PCIe engine's free time and the phase rows (start/end in seconds)."""

    def __init__(self) -> None:
        self.t = 0.0
        self.pcie_free = 0.0
        self.host_free = 0.0
        self.fetch_done: dict[int, float] = {}
        self.rows: list[tuple] = []

    def add(self, layer: int, phase: str, engine: str, start: float, end: float, dram: float = 0.0,
            pcie: float = 0.0) -> None:
        self.rows.append((layer, phase, engine, start * 1e6, end * 1e6, dram, pcie))

    def run(self, layer: int, phase: str, dt: float, dram: float = 0.0) -> None:
        self.rows.append((layer, phase, "main", self.t * 1e6, (self.t + dt) * 1e6, dram, 0.0))
        self.t += dt

    def fetch(self, layer: int, ready_s: float, plan: LayerPlan) -> None:
        """The link moves ``plan``'s fetch once its selection is known (``ready_s``) and the link is free; a host relay
        copy (``host_copy_s``) runs on the host memory first, pipelined over layers."""
        if plan.fetch_s <= 0:
            self.fetch_done[layer] = ready_s
            return
        if plan.host_copy_s > 0:
            c0 = max(self.host_free, ready_s)
            self.host_free = c0 + plan.host_copy_s
            self.add(layer, "host_copy", "host", c0, self.host_free)
            ready_s = self.host_free
        start = max(self.pcie_free, ready_s)
        self.pcie_free = start + plan.fetch_s
        self.fetch_done[layer] = self.pcie_free
        b = plan.traffic.fetch_bytes
        self.add(layer, "kv_fetch", "pcie", start, self.pcie_free, b, b)


def schedule(i: StepInputs, pl: Placement) -> LayerSchedule:
    sys, p, L = i.sys, i.p, i.llm.n_layers
    costs = OpCosts(sys)
    dense = _layer_plan(i, pl.dense, costs, pl.offload_write_bytes_per_layer)
    sparse = _layer_plan(i, pl.sparse, costs, pl.offload_write_bytes_per_layer)
    pred = i.spec.prediction_work(i.stage, PredContext(
        i.llm, i.batch, i.n_new, pl.cand_tokens, i.engine, p, tokens_per_frame=i.wl.tokens_per_frame,
        tokens_per_cluster=i.tokens_per_cluster, wics_exit_frac=i.wics_exit_frac, n_cores=sys.n_cores, core=sys.core))
    pred_main_s = sum(costs.seconds(o) for o in pred.ops)
    dre_s = (pred.hcu_cycles + pred.wtu_cycles) / sys.freq_hz if i.engine == "dre" else 0.0
    predicted = lambda ell: i.spec.selects(i.stage) and ell >= pl.n_dense  # noqa: E731
    tl = _Timeline()
    vision_s = 0.0
    if i.stage == "frame" and p.include_vision:
        vop = vision_op(p.vision, i.batch)
        vision_s = costs.seconds(vop)
        tl.run(-1, "vision_mlp", vision_s, vop.dram_bytes)

    pred_dram = sum(o.dram_bytes for o in pred.ops)

    def run_pred(target: int) -> float:
        """Prediction for layer ``target`` on the main engine (+ DRE); returns when its selection is known."""
        tl.run(target, "kv_prediction", pred_main_s, pred_dram)
        if dre_s > 0:
            tl.add(target, "kv_prediction_dre", "dre", tl.t, tl.t + dre_s)
        return tl.t + dre_s

    if p.prefetch and not predicted(0):
        tl.fetch(0, 0.0, dense if pl.n_dense else sparse)  # nothing to predict: streams in during the vision tower
    stall_s = 0.0
    for ell in range(L):
        plan, layer_start = (dense if ell < pl.n_dense else sparse), tl.t
        tl.run(ell, "qkv", plan.op_s[0], plan.dram[0])
        if ell not in tl.fetch_done:
            tl.fetch(ell, run_pred(ell) if predicted(ell) else layer_start, plan)
        if p.prefetch and ell + 1 < L:
            nxt = dense if ell + 1 < pl.n_dense else sparse
            tl.fetch(ell + 1, run_pred(ell + 1) if predicted(ell + 1) else layer_start, nxt)
        wait = max(tl.t, tl.fetch_done.get(ell, tl.t))
        if wait > tl.t:
            stall_s += wait - tl.t
            tl.add(ell, "stall", "main", tl.t, wait)
            tl.t = wait
        for k in range(1, len(plan.ops)):
            tl.run(ell, plan.ops[k].name, plan.op_s[k], plan.dram[k])
    head = lm_head_op(i.llm, i.batch, int(const("stack.eager_ops_fixed")))
    tl.run(L, "lm_head", costs.seconds(head), head.dram_bytes)
    return LayerSchedule(tl.t, stall_s, vision_s, pred_main_s, dre_s, dense, sparse, pred, tl.rows, costs)


# ---------------------------------------------------------------------------------------------------------------
# Step 4: totals and energy.

def _link_gaps(rows: list[tuple], total_s: float) -> list[float]:
    """Idle gaps of the PCIe engine over one step, the wrap-around gap (tail + head, steps repeat) included."""
    busy = sorted((r[3] * 1e-6, r[4] * 1e-6) for r in rows if r[2] == "pcie")
    if not busy:
        return [total_s]
    gaps = [max(0.0, b[0] - a[1]) for a, b in zip(busy, busy[1:])]
    return gaps + [max(0.0, total_s - busy[-1][1]) + busy[0][0]]


def _work(i: StepInputs, pl: Placement, sc: LayerSchedule) -> dict:
    """FLOPs, DRAM bytes, VPE lane-ops and time by limiter over the whole step."""
    L, nd = i.llm.n_layers, pl.n_dense
    n_pred = (L - nd) if i.spec.selects(i.stage) else 0
    head = lm_head_op(i.llm, i.batch, int(const("stack.eager_ops_fixed")))  # as the schedule runs it
    vop = vision_op(i.p.vision, i.batch) if i.stage == "frame" and i.p.include_vision else None
    plans = ((sc.dense, nd), (sc.sparse, L - nd))
    w = dict(llm_flops=sum(n * sum(o.flops for o in pl_.ops) for pl_, n in plans) + head.flops,
             vis_flops=vop.flops if vop else 0.0, pred_flops=n_pred * sum(o.flops for o in sc.pred.ops),
             vector_flops=sum(n * sum(o.flops for o in pl_.ops if o.kind == "vector") for pl_, n in plans),
             dram_vis=vop.dram_bytes if vop else 0.0, n_pred=n_pred,
             lane_ops=sum(n * sum(vpe_lane_ops(o.vpe) for o in pl_.ops) for pl_, n in plans)
             + (vpe_lane_ops(vop.vpe) if vop else 0.0),
             llm_s=sum(n * sum(pl_.op_s) for pl_, n in plans) + sc.costs.seconds(head))
    w["dram"] = (sum(n * sum(o.dram_bytes for o in pl_.ops) for pl_, n in plans) + head.dram_bytes
                 + n_pred * sum(o.dram_bytes for o in sc.pred.ops) + w["dram_vis"])
    limits: dict[str, float] = {}
    for pl_, n in plans:
        for dt, lim in zip(pl_.op_s, pl_.limits):
            limits[lim] = limits.get(lim, 0.0) + n * dt * 1e3
    w["limits_ms"] = limits
    ops = [(o, n) for pl_, n in plans for o in pl_.ops] + [(head, 1)] + [(o, n_pred) for o in sc.pred.ops]
    ops += [(vop, 1)] if vop else []
    parts = [(sc.costs.parts(o), n) for o, n in ops]
    w["dram_s"], w["kernel_s"], w["host_s"] = (sum(n * p_[k] for p_, n in parts) for k in (2, 3, 4))
    return w


#: The resources a step occupies: the accelerator's compute (V-Rex cores + DRE, or the GPU board), its DRAM, the
#: GPU host CPU (framework calls), the PCIe link, and the offload tier (SSD, or host DRAM on the server).
RESOURCES: tuple[str, ...] = ("compute", "dre", "dram", "host_cpu", "link", "ssd", "host_dram")


def _ledger(i: StepInputs, pl: Placement, sc: LayerSchedule, w: dict, parts: dict, busy_s: float,
            copy_s: float, pcie_bytes: float, host_copy_bytes: float) -> list[dict]:
    """One entry per (resource, term): seconds it holds the resource, joules, bytes. Every joule of ``parts`` is in
    exactly one entry; a powered-but-idle resource (cores during a stall, an idle link) holds it for the step."""
    sys, t = i.sys, sc.total_s
    e = lambda resource, term, time_s, energy_j=0.0, bytes_=0.0: dict(  # noqa: E731
        resource=resource, term=term, time_s=time_s, energy_j=energy_j, bytes=bytes_)
    out = []
    if sys.kind == "vrex":
        out += [e("compute", "LXE cores (powered for the step)", t, parts["core"]),
                e("dre", "HCU/WTU prediction (energy in the cores')", w["n_pred"] * sc.dre_s),
                e("dram", "transfers (device + PHY)", w["dram_s"], parts["dram"] + parts["dram_phy"], w["dram"]),
                e("dram", "background (standby + refresh)", t, parts["dram_background"])]
    else:
        out += [e("compute", "GPU board (Table I power: GPU + its DRAM)", t, parts["gpu_board"]),
                e("dram", "transfers (energy in the board's)", w["dram_s"], 0.0, w["dram"]),
                e("compute", "kernel start-up (within the device time)", w["kernel_s"]),
                e("host_cpu", "framework calls (host energy not in Table I)", w["host_s"])]
    out += [e("link", "transfers", busy_s, parts["pcie"], pcie_bytes),
            e("link", "idle (ASPM states)", max(0.0, t - busy_s), parts["pcie_idle"])]
    if "ssd" in parts:
        act = _energy.ssd_active_j(sys, busy_s)
        out += [e("ssd", "reads (active)", busy_s, act, pcie_bytes), e("ssd", "idle", max(0.0, t - busy_s),
                                                                        parts["ssd"] - act)]
    else:
        tot = pcie_bytes + host_copy_bytes
        share = host_copy_bytes / tot if tot else 0.0
        out += [e("host_dram", "DMA reads of the offloaded KV", busy_s, parts["host_dram"] * (1 - share), pcie_bytes),
                e("host_dram", "FlexGen pinned-buffer relay copies", copy_s, parts["host_dram"] * share,
                  host_copy_bytes)]
    return out


def totals(i: StepInputs, pl: Placement, sc: LayerSchedule) -> SimResult:
    sys, p, B, L = i.sys, i.p, i.batch, i.llm.n_layers
    w = _work(i, pl, sc)
    breakdown_ms = dict(llm=w["llm_s"] * 1e3, vision_mlp=sc.vision_s * 1e3,
                        kv_prediction=w["n_pred"] * sc.pred_main_s * 1e3, retrieval_exposed=sc.stall_s * 1e3)
    fetch_b = pl.per_layer(L, "fetch_bytes")
    pcie_bytes = fetch_b + L * pl.offload_write_bytes_per_layer
    bytes_ = dict(dram=w["dram"], dram_llm=w["dram"] - w["dram_vis"], pcie=pcie_bytes, pcie_fetch=fetch_b,
                  pcie_useful=pl.per_layer(L, "useful_fetch_bytes"),
                  staging=sys.staging_copies * fetch_b * (0 if sys.kind == "vrex" else 1))
    busy_s = (pl.n_dense * sc.dense.fetch_s + (L - pl.n_dense) * sc.sparse.fetch_s
              + L * pl.offload_write_bytes_per_layer / sys.pcie)
    idle_s, idle_l0_s = _link.idle_power_frac(_link_gaps(sc.timeline, sc.total_s), p.aspm)
    act = _energy.StepCounts(
        seconds=sc.total_s, macs=(w["llm_flops"] + w["vis_flops"] + w["pred_flops"] - w["vector_flops"]) / 2,
        vpe_ops=w["lane_ops"], dram_bytes=w["dram"], pcie_bytes=pcie_bytes, pcie_busy_s=min(busy_s, sc.total_s),
        pcie_idle_l0_s=idle_l0_s * max(0.0, sc.total_s - busy_s) / idle_s if idle_s > 0 else 0.0,
        hcu_compares=w["n_pred"] * sc.pred.hcu_compares, wtu_elems=w["n_pred"] * sc.pred.wtu_elems,
        kvmu_requests=(pl.per_layer(L, "fetch_commands") if i.engine == "dre" else 0.0),
        host_copy_bytes=2 * bytes_["staging"] if sys.offload_tier == "cpu_dram" else 0.0)
    energy_j, parts_j = _energy.step_energy(sys, act)
    copy_s = pl.n_dense * sc.dense.host_copy_s + (L - pl.n_dense) * sc.sparse.host_copy_s
    ledger = _ledger(i, pl, sc, w, parts_j, min(busy_s, sc.total_s), copy_s, pcie_bytes, act.host_copy_bytes)
    resident_dense = pl.n_dense * B * pl.off_tokens * i.llm.kv_bytes_per_token_layer if p.dense_resident else 0.0
    mem_bytes = (footprint_bytes(i.llm, p, i.spec, i.kv_len, B, pl.offload, i.wl.tokens_per_frame,
                                 i.tokens_per_cluster)
                 + 2 * pl.sparse.fetch_bytes + pl.retrieved_kept_bytes + resident_dense)  # + double-buffered prefetch
    notes = dict(engine=i.engine, offloaded_tokens=pl.off_tokens, on_device_tokens=pl.on_dev_tokens,
                 moved_fraction=pl.sparse.moved_frac, fetch_ms_per_layer=sc.sparse.fetch_s * 1e3,
                 dense_fetch_ms_per_layer=sc.dense.fetch_s * 1e3, dense_layers=pl.n_dense,
                 attended_tokens=pl.sparse.attended, layout=i.spec.layout, vision_flops=w["vis_flops"],
                 retrieved_reuse=pl.reuse_frac, retrieved_kept_frac=pl.retrieved_kept_frac,
                 extrapolated=dict(i.extrapolated), tokens_per_cluster=i.tokens_per_cluster,
                 dre_cycles=sc.pred.hcu_cycles + sc.pred.wtu_cycles, selected_frac_device=i.r_dev,
                 selected_frac_offloaded=i.r_off, fetch_commands=pl.per_layer(L, "fetch_commands"),
                 limits_ms=w["limits_ms"], pcie_idle_s=idle_s, dram_eff=sys.dram_eff, granule=pl.granule_source)
    return SimResult(sys.name, i.spec.name, i.stage, i.kv_len, B, sc.total_s * 1e3, energy_j,
                     w["llm_flops"] + w["vis_flops"], w["pred_flops"], bytes_, breakdown_ms, parts_j,
                     energy_j / sc.total_s, mem_bytes, sys.dram_capacity, i.selected_frac,
                     i.wl.source(i.extrapolated), sc.timeline, notes, ledger)


def simulate(system: str | System, method: str | SimMethod, stage: str, kv_len: int, batch: int = 1, *,
             workload: Workload | str | Path, **overrides) -> SimResult:
    """Simulate one batched step of ``stage`` ('frame' or 'text') with ``kv_len`` cached tokens per stream.

    ``workload``: a :class:`Workload`, ``"paper"`` (:meth:`Workload.paper`) or the path of a workload measurement
    file (:meth:`Workload.from_measurement`, extrapolation 'hold'). ``overrides``: any :class:`SimParams` field,
    or ``system_<field>`` to replace a field of the system (e.g. ``system_pcie_bw=8e9``).
    """
    i = step_inputs(system, method, stage, kv_len, batch, workload, overrides)
    pl = placement(i)
    sc = schedule(i, pl)
    return totals(i, pl, sc)


def footprint_bytes(llm: LLMSpec, p: SimParams, spec: SimMethod, kv_len: int, batch: int, offload: bool,
                    tokens_per_frame: int, tokens_per_cluster: float) -> float:
    """Accelerator DRAM in use: weights (LLM + vision) + on-device KV + the predictor's resident metadata."""
    on_dev = kv_len if not offload else min(kv_len, p.recent_capacity)
    kv = batch * on_dev * llm.kv_bytes_per_token
    meta = spec.metadata_bytes(llm, p, kv_len, batch, tokens_per_frame, tokens_per_cluster)
    return llm.weight_bytes + p.vision.weight_bytes + kv + meta


def memory_footprint_gb(minutes: float, fps: float = 10.0, batch: int = 4, llm: LLMSpec = LLAMA3_8B,
                        vision: VisionSpec = SIGLIP_L384) -> dict:
    """Fig. 4(a): GB of model parameters and of the (un-offloaded) KV cache after ``minutes`` of streaming."""
    tokens = minutes * 60 * fps * vision.tokens_per_frame
    return dict(minutes=minutes, params_gb=(llm.weight_bytes + vision.weight_bytes) / 1e9,
                kv_gb=batch * tokens * llm.kv_bytes_per_token / 1e9)


def e2e_coin(system: str | System, method: str, kv_len: int, batch: int = 1, *, workload: Workload | str | Path,
             case=None, text_points: int = 4, **overrides) -> dict:
    """Fig. 4(b)/14: end-to-end latency of the workload's scenario on a pre-computed ``kv_len`` cache.

    ``workload.frames`` frames (each: vision + frame prefill), the question prefill (``question_tokens`` new tokens,
    frame-stage retrieval, no vision tower) and ``answer_tokens`` answer tokens (TPOT integrated over the growing
    cache with ``text_points`` samples). ``case`` (a :class:`~vrex_lib.perf.model_ops.COINCase`) replaces the
    scenario's three lengths. Returns ms split into prefill, generation, vision_mlp and their retrieval parts.
    """
    wl = Workload.resolve(workload)
    frames, q_tok, a_tok = ((case.frames, case.question_tokens, case.answer_tokens) if case is not None
                            else (wl.frames, wl.question_tokens, wl.answer_tokens))
    sys = get_system(system)
    out = dict(prefill=0.0, generation=0.0, vision_mlp=0.0, prefill_retrieval=0.0, generation_retrieval=0.0)
    step = max(1, frames // 4)
    tpf = wl.tokens_per_frame
    sources: list[str] = []
    for f in range(0, frames, step):
        n = min(step, frames - f)
        r = simulate(sys, method, "frame", kv_len + f * tpf, batch, workload=wl, **overrides)
        sources.append(r.workload_source)
        out["vision_mlp"] += n * r.breakdown_ms["vision_mlp"]
        out["prefill"] += n * (r.latency_ms - r.breakdown_ms["vision_mlp"])
        out["prefill_retrieval"] += n * (r.breakdown_ms["kv_prediction"] + r.breakdown_ms["retrieval_exposed"])
    kv_q = kv_len + frames * tpf
    rq = simulate(sys, method, "frame", kv_q, batch, workload=wl, **{**overrides, "include_vision": False,
                                                                      "n_new": q_tok})
    out["prefill"] += rq.latency_ms
    out["prefill_retrieval"] += rq.breakdown_ms["kv_prediction"] + rq.breakdown_ms["retrieval_exposed"]
    kv_a = kv_q + q_tok
    n = max(1, text_points)
    for k in range(n):
        rt = simulate(sys, method, "text", kv_a + int((k + 0.5) * a_tok / n), batch, workload=wl, **overrides)
        sources += [rq.workload_source, rt.workload_source]
        out["generation"] += a_tok / n * rt.latency_ms
        out["generation_retrieval"] += a_tok / n * (rt.breakdown_ms["kv_prediction"]
                                                    + rt.breakdown_ms["retrieval_exposed"])
    out["total"] = out["prefill"] + out["generation"] + out["vision_mlp"]
    out["workload_source"] = " | ".join(dict.fromkeys(sources))  # every distinct label, in order
    return out


def simulate_measured(system, method: str, stage: str, kv_len: int, *, selected_frac: float | None,
                      selected_frac_offloaded: float | None = None, tokens_per_cluster: float | None = None,
                      wics_exit_frac: float | None = None, reuse: float | None = None, source: str = "measured",
                      batch: int = 1, **overrides) -> SimResult:
    """One simulated step of ``method`` (a runtime policy name or simulator method) with one step's measured
    statistics (:meth:`Workload.from_stats`). ``overrides``: any :class:`SimParams` field or ``system_<field>``.
    The result's ``workload_source`` names the provenance."""
    wl = Workload.from_stats(method, selected_frac=selected_frac, selected_frac_offloaded=selected_frac_offloaded,
                             tokens_per_cluster=tokens_per_cluster, wics_exit_frac=wics_exit_frac, reuse=reuse,
                             source=source)
    return simulate(system, SIM_METHOD.get(method, method), stage, int(kv_len), batch, workload=wl, **overrides)


def step_latency_ms(systems, method: str, stage: str, kv_len: int, *, selected_frac: float | None,
                    tokens_per_cluster: float | None = None, wics_exit_frac: float | None = None,
                    source: str = "measured") -> dict[str, float]:
    """Latency (ms) of one simulated step on each of ``systems`` with one step's measured statistics
    (:func:`simulate_measured`): the per-step view of ``python -m vrex_lib.live`` and notebook 08."""
    return {s: float(simulate_measured(s, method, stage, int(kv_len), selected_frac=selected_frac,
                                       tokens_per_cluster=tokens_per_cluster, wics_exit_frac=wics_exit_frac,
                                       source=source).latency_ms) for s in systems}
