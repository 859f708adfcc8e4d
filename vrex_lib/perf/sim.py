"""The simulator: workload × system × method × stage -> latency, energy, bytes per tier, per-layer timeline.

``simulate`` is pure: every input is an argument (the Workload, the System, the SimParams overrides); it reads no
file the caller did not name, keeps no cache and changes no global. It runs in four small steps:

1. :func:`step_inputs` -- resolve system, method, workload, parameters; the selected fraction at this length
   (and which extrapolation, if any, was used);
2. :func:`placement` -- tokens per tier, selected tokens, granule-amplified PCIe bytes per layer, reuse of the
   previous step's retrieved KV, accelerator memory footprint;
3. :func:`schedule` -- the per-layer event timeline (main engine, DRE, PCIe);
4. :func:`totals` -- work, traffic, energy and the :class:`SimResult`.

Model (docs/PERF_MODEL.md; modelling choices are docs/DECISIONS.md D20):

* Every op on the main engine (GPU, or V-Rex's LXE) takes ``max(flops / achieved FLOP/s, DRAM bytes /
  achieved DRAM B/s) + kernels × launch overhead`` (roofline per op).
* Per decoder layer ℓ the main engine runs QKV → KV prediction for layer ℓ+1 → attention → out-proj → FFN.
  The PCIe engine fetches layer ℓ+1's selected offloaded KV as soon as its prediction is known (on V-Rex:
  after the DRE's HCU/WTU finish, which run concurrently with the LXE) and the link is free; attention of
  ℓ+1 waits for its fetch. Layer 0's fetch cannot be predicted earlier and is exposed (methods without
  prediction fetch it during the vision tower). ``prefetch=False`` serialises prediction → fetch → attention.
* Placement: per stream the newest ``recent_capacity`` tokens sit in accelerator DRAM, older ones in the
  offload tier (SSD on the edge, CPU DDR4 on the server); the newest ``recent_window`` tokens are always
  attended, the rest are candidates of which the method selects the Workload's fraction (uniformly over tiers).
* PCIe moves whole granules of the offload tier (:func:`methods.moved_fraction`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from ..config import ReSVConfig, RuntimeConfig
from . import energy as _energy
from .workload import SIM_METHOD, Workload
from .methods import MethodSpec, PredWork, get_method, moved_fraction, prediction_work, run_tokens
from .systems import System, get_system
from .model_ops import LLAMA3_8B, SIGLIP_L384, LLMSpec, Op, VisionSpec, decoder_layer_ops, lm_head_op, vision_op


@dataclass(frozen=True)
class SimParams:
    """Modelling choices (not the workload); pass any field to :func:`simulate` as a keyword override.

    recent_capacity: KVMU capacity before offload, tokens per stream (``RuntimeConfig.kv_capacity``,
      docs/DECISIONS.md D6).
    recent_window:   newest tokens always attended (None = one frame: the Workload's tokens per frame).
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
    """

    llm: LLMSpec = LLAMA3_8B
    vision: VisionSpec = SIGLIP_L384
    recent_capacity: int = field(default_factory=lambda: RuntimeConfig().kv_capacity)
    recent_window: int | None = None
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

    def __post_init__(self) -> None:
        if self.retrieved_cache not in ("kvmu", "all", "none"):
            raise ValueError(f"retrieved_cache must be 'kvmu', 'all' or 'none', got {self.retrieved_cache!r}")
        if self.recent_capacity < 1:
            raise ValueError(f"recent_capacity must be >= 1, got {self.recent_capacity}")


@dataclass
class SimResult:
    """One simulated step: a batched frame prefill (every stream adds one frame) or one generated token.

    latency_ms: per frame (frame stage) or per output token (text stage, TPOT).
    breakdown_ms: llm, vision_mlp, kv_prediction (main-engine time), retrieval_exposed (stall waiting for
      PCIe) -- they sum to latency_ms.
    bytes: dram (accelerator DRAM traffic), pcie (offload-tier traffic, both directions), pcie_fetch.
    ratio: the selected fraction of offloaded candidates used; workload_source: the Workload's provenance and
      every extrapolation used for this step.
    timeline: one dict per phase (layer, phase, engine, start_us, end_us, dram_bytes, pcie_bytes).
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
    timeline: list = field(default_factory=list, repr=False)
    notes: dict = field(default_factory=dict)

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
                 oom=self.oom, mem_gb=self.mem_bytes / 1e9, ratio=self.ratio, workload_source=self.workload_source)
        d.update({f"{k}_ms": v for k, v in self.breakdown_ms.items()})
        d.update({f"{k}_bytes": v for k, v in self.bytes.items()})
        return d


def _op_time_s(op: Op, sys: System) -> float:
    return max(op.flops / sys.flops, op.dram_bytes / sys.dram) + op.kernels * sys.kernel_launch_s


# ---------------------------------------------------------------------------------------------------------------
# Step 1: inputs.

@dataclass(frozen=True)
class StepInputs:
    """Everything one step depends on, resolved. ``extrapolated``: {field: policy} used at this length."""

    sys: System
    spec: MethodSpec
    p: SimParams
    wl: Workload
    llm: LLMSpec
    stage: str
    kv_len: int
    batch: int
    n_new: int
    selected_frac: float
    reuse_frac: float
    tokens_per_cluster: float
    wics_exit_frac: float
    engine: str
    extrapolated: dict


def step_inputs(system: str | System, method: str | MethodSpec, stage: str, kv_len: int, batch: int,
                workload: Workload | str | Path, overrides: dict) -> StepInputs:
    if stage not in ("frame", "text"):
        raise ValueError(f"stage must be 'frame' or 'text', got {stage!r}")
    if kv_len < 0 or batch < 1:
        raise ValueError(f"kv_len must be >= 0 and batch >= 1 (got {kv_len}, {batch})")
    sys = get_system(system)
    overrides = dict(overrides)
    sys_changes = {k[len("system_"):]: overrides.pop(k) for k in list(overrides) if k.startswith("system_")}
    if sys_changes:
        sys = dataclasses.replace(sys, **sys_changes)
    unknown = set(overrides) - {f.name for f in dataclasses.fields(SimParams)}
    if unknown:
        raise TypeError(f"simulate: unknown override(s) {sorted(unknown)}; SimParams fields or system_<field>. "
                        "Workload quantities (selected fraction, reuse, tokens per cluster) belong in the Workload")
    spec = get_method(method)
    p = SimParams(**overrides)
    wl = Workload.resolve(workload)
    if spec.name == "resv_kvpu" and sys.kind != "vrex":
        raise ValueError("resv_kvpu is the V-Rex KVPU-only ablation; on a GPU use method 'resv' (GPU+ReSV)")
    used: dict[str, str] = {}
    if spec.predictor(stage) == "none":
        r = 1.0
    else:
        r, pol = wl.selected(spec.ratio_key, stage, kv_len)
        if pol:
            used[f"selected_frac {spec.ratio_key}/{stage}"] = pol
    reuse, pol = wl.reuse_at(spec.ratio_key, stage, kv_len) if spec.ratio_key else (0.0, None)
    if pol:
        used[f"reuse {spec.ratio_key}/{stage}"] = pol
    tpc, pol = wl.tokens_per_cluster.at(kv_len)
    if pol and spec.ratio_key == "resv":
        used["tokens_per_cluster"] = pol
    wics, pol = wl.wics_exit_frac.at(kv_len)
    if pol and spec.ratio_key == "resv":
        used["wics_exit_frac"] = pol
    n_new = (p.n_new or wl.tokens_per_frame) if stage == "frame" else 1
    engine = "dre" if (sys.kind == "vrex" and spec.predictor(stage) == "resv") else "gpu"
    if spec.layout == "cluster" and sys.kind != "vrex":
        # No KVMU on a GPU: ReSV's clusters stay scattered in token order (§V.C: online reordering is impractical).
        spec = dataclasses.replace(spec, layout="token")
    return StepInputs(sys, spec, p, wl, dataclasses.replace(p.llm, kv_bits=spec.kv_bits), stage, kv_len, batch, n_new,
                      r, reuse, max(1.0, tpc), min(1.0, max(0.0, wics)), engine, used)


# ---------------------------------------------------------------------------------------------------------------
# Step 2: placement and traffic per tier.

@dataclass(frozen=True)
class Placement:
    """Tokens per tier and bytes per layer for one step (per stream unless ``_all`` / ``_bytes`` says batch)."""

    offload: bool
    on_dev_tokens: int
    off_tokens: int
    always_tokens: int
    cand_tokens: int
    sel_off_tokens: float
    attended_tokens: float
    moved_frac: float
    fetch_kv_share: float
    reuse_frac: float
    retrieved_kept_frac: float
    fetch_bytes_per_layer: float
    offload_write_bytes_per_layer: float
    retrieved_kept_bytes: float
    useful_fetch_bytes_per_layer: float


def placement(i: StepInputs) -> Placement:
    p, spec, sys, llm, B = i.p, i.spec, i.sys, i.llm, i.batch
    offload = spec.offload if p.offload is None else (p.offload and spec.offload)
    on_dev = i.kv_len if not offload else min(i.kv_len, p.recent_capacity)
    off = i.kv_len - on_dev
    window = p.recent_window if p.recent_window is not None else i.wl.tokens_per_frame
    always = min(i.kv_len, window)
    n_cand = i.kv_len - always
    cand_dev = max(0, on_dev - always)
    r = i.selected_frac
    sel_dev, sel_off = r * cand_dev, r * off
    attended = always + sel_dev + sel_off + i.n_new
    kvb = llm.kv_bytes_per_token_layer
    chunk_bytes = llm.head_dim * spec.kv_bits / 8
    run_bytes = run_tokens(spec, i.wl.tokens_per_frame, i.tokens_per_cluster) * chunk_bytes
    frac = (moved_fraction(r, min(run_bytes, max(off, 1) * chunk_bytes), chunk_bytes, sys.offload_granule,
                           aligned=spec.layout == "cluster") if off > 0 else 0.0)
    # Who keeps the previous step's retrieved KV in device DRAM (SimParams.retrieved_cache).
    has_cache = (spec.layout == "cluster" if p.retrieved_cache == "kvmu" else
                 p.retrieved_cache == "all" and offload and spec.predictor(i.stage) != "none")
    reuse = i.reuse_frac if has_cache else 0.0
    # A method that keeps every key in device DRAM for its scoring (InfiniGenP full-key) fetches only V.
    fetch_kv_share = 0.5 if keys_resident(spec, p) else 1.0
    # The retrieved-KV region keeps every layer's selected offloaded KV until the next step, in the DRAM left over
    # after weights, recent KV, predictor metadata and the prefetch buffers; what does not fit is fetched again.
    mem_base = (footprint_bytes(llm, p, spec, i.kv_len, B, offload, i.wl.tokens_per_frame, i.tokens_per_cluster)
                + 2 * B * off * kvb * frac * fetch_kv_share)
    need = llm.n_layers * B * sel_off * kvb * fetch_kv_share if reuse > 0 else 0.0
    kept = min(need, max(0.0, sys.dram_capacity - mem_base))
    kept_frac = kept / need if need else float("nan")
    if need > 0:
        reuse *= kept_frac
    fetch = B * off * kvb * frac * (1.0 - reuse) * fetch_kv_share
    write = B * i.n_new * kvb if off > 0 else 0.0  # the oldest tokens leave for the offload tier
    return Placement(offload, on_dev, off, always, n_cand, sel_off, attended, frac, fetch_kv_share, reuse, kept_frac,
                     fetch, write, kept, B * sel_off * kvb * fetch_kv_share)


# ---------------------------------------------------------------------------------------------------------------
# Step 3: per-layer event schedule.

@dataclass
class Schedule:
    total_s: float
    stall_s: float
    vision_s: float
    pred_main_s: float
    dre_s: float
    fetch_s: float
    layer_ops: list
    pred: PredWork
    timeline: list


def schedule(i: StepInputs, pl: Placement) -> Schedule:
    sys, p, llm, B, L = i.sys, i.p, i.llm, i.batch, i.llm.n_layers
    layer_ops = decoder_layer_ops(llm, i.n_new, B, pl.attended_tokens)
    layer_ops[1].kv_bytes += pl.fetch_bytes_per_layer + pl.offload_write_bytes_per_layer  # lands before attention
    pred = prediction_work(i.spec.predictor(i.stage), llm, B, i.n_new, pl.cand_tokens, i.engine, p,
                           tokens_per_frame=i.wl.tokens_per_frame, tokens_per_cluster=i.tokens_per_cluster,
                           wics_exit_frac=i.wics_exit_frac, n_cores=sys.n_cores, core=sys.core)
    op_s = [_op_time_s(o, sys) for o in layer_ops]
    pred_main_s = sum(_op_time_s(o, sys) for o in pred.ops)
    dre_s = (pred.hcu_cycles + pred.wtu_cycles) / sys.freq_hz if i.engine == "dre" else 0.0
    fetch_s = pl.fetch_bytes_per_layer / sys.pcie
    predicts = i.spec.predictor(i.stage) != "none"
    tl: list[dict] = []
    t = 0.0
    vision_s = 0.0
    if i.stage == "frame" and p.include_vision:
        vop = vision_op(p.vision, B)
        vision_s = _op_time_s(vop, sys)
        tl.append(dict(layer=-1, phase="vision_mlp", engine="main", start=0.0, end=vision_s,
                       dram_bytes=vop.dram_bytes, pcie_bytes=0.0))
        t = vision_s
    pcie_free = 0.0
    fetch_done: dict[int, float] = {}

    def schedule_fetch(layer: int, ready_s: float) -> None:
        nonlocal pcie_free
        if fetch_s <= 0:
            fetch_done[layer] = ready_s
            return
        start = max(pcie_free, ready_s)
        pcie_free = start + fetch_s
        fetch_done[layer] = pcie_free
        tl.append(dict(layer=layer, phase="kv_fetch", engine="pcie", start=start, end=pcie_free,
                       dram_bytes=pl.fetch_bytes_per_layer, pcie_bytes=pl.fetch_bytes_per_layer))

    def run_pred(target: int) -> float:
        """Prediction for layer ``target`` on the main engine (+ DRE); returns when its selection is known."""
        nonlocal t
        if not predicts:
            return t
        start = t
        t += pred_main_s
        tl.append(dict(layer=target, phase="kv_prediction", engine="main", start=start, end=t,
                       dram_bytes=sum(o.dram_bytes for o in pred.ops), pcie_bytes=0.0))
        if dre_s > 0:
            tl.append(dict(layer=target, phase="kv_prediction_dre", engine="dre", start=t, end=t + dre_s,
                           dram_bytes=0.0, pcie_bytes=0.0))
        return t + dre_s

    stall_s = 0.0
    names = [o.name for o in layer_ops]
    if not predicts and p.prefetch:
        schedule_fetch(0, 0.0)  # nothing to predict: layer 0's KV streams in during the vision tower
    for layer in range(L):
        layer_start = t
        tl.append(dict(layer=layer, phase="qkv", engine="main", start=t, end=t + op_s[0],
                       dram_bytes=layer_ops[0].dram_bytes, pcie_bytes=0.0))
        t += op_s[0]
        if (layer == 0 or not p.prefetch) and layer not in fetch_done:
            schedule_fetch(layer, run_pred(layer))
        if p.prefetch and layer + 1 < L:
            schedule_fetch(layer + 1, run_pred(layer + 1) if predicts else layer_start)
        start_attn = max(t, fetch_done.get(layer, t))
        stall_s += start_attn - t
        if start_attn > t:
            tl.append(dict(layer=layer, phase="stall", engine="main", start=t, end=start_attn, dram_bytes=0.0,
                           pcie_bytes=0.0))
        t = start_attn
        for name, op, dt in zip(names[1:], layer_ops[1:], op_s[1:]):
            tl.append(dict(layer=layer, phase=name, engine="main", start=t, end=t + dt, dram_bytes=op.dram_bytes,
                           pcie_bytes=0.0))
            t += dt
    head = lm_head_op(llm, B)
    head_s = _op_time_s(head, sys)
    tl.append(dict(layer=L, phase="lm_head", engine="main", start=t, end=t + head_s, dram_bytes=head.dram_bytes,
                   pcie_bytes=0.0))
    t += head_s
    for row in tl:
        row["start_us"], row["end_us"] = row.pop("start") * 1e6, row.pop("end") * 1e6
    return Schedule(t, stall_s, vision_s, pred_main_s, dre_s, fetch_s, layer_ops, pred, tl)


# ---------------------------------------------------------------------------------------------------------------
# Step 4: totals and energy.

def totals(i: StepInputs, pl: Placement, sc: Schedule) -> SimResult:
    sys, p, llm, B, L = i.sys, i.p, i.llm, i.batch, i.llm.n_layers
    predicts = i.spec.predictor(i.stage) != "none"
    n_pred_layers = L if predicts else 0
    head = lm_head_op(llm, B)
    op_s = [_op_time_s(o, sys) for o in sc.layer_ops]
    llm_s = L * sum(op_s) + _op_time_s(head, sys)
    breakdown_ms = dict(llm=llm_s * 1e3, vision_mlp=sc.vision_s * 1e3,
                        kv_prediction=n_pred_layers * sc.pred_main_s * 1e3, retrieval_exposed=sc.stall_s * 1e3)
    has_vision = i.stage == "frame" and p.include_vision
    vop = vision_op(p.vision, B) if has_vision else None
    llm_flops = L * sum(o.flops for o in sc.layer_ops) + head.flops
    vis_flops = vop.flops if vop else 0.0
    pred_flops = n_pred_layers * sum(o.flops for o in sc.pred.ops)
    dram_vis_bytes = vop.dram_bytes if vop else 0.0
    dram_bytes = (L * sum(o.dram_bytes for o in sc.layer_ops) + head.dram_bytes
                  + n_pred_layers * sum(o.dram_bytes for o in sc.pred.ops) + dram_vis_bytes)
    pcie_fetch_bytes = L * pl.fetch_bytes_per_layer
    pcie_bytes = pcie_fetch_bytes + L * pl.offload_write_bytes_per_layer
    bytes_ = dict(dram=dram_bytes, dram_llm=dram_bytes - dram_vis_bytes, pcie=pcie_bytes, pcie_fetch=pcie_fetch_bytes,
                  pcie_useful=L * pl.useful_fetch_bytes_per_layer)
    mem_bytes = (footprint_bytes(llm, p, i.spec, i.kv_len, B, pl.offload, i.wl.tokens_per_frame, i.tokens_per_cluster)
                 + 2 * pl.fetch_bytes_per_layer + pl.retrieved_kept_bytes)  # + double-buffered prefetch
    vector_elems = sum(o.flops for o in sc.layer_ops if o.kind == "vector") * L
    act = _energy.Activity(
        seconds=sc.total_s, macs=(llm_flops + vis_flops + pred_flops - vector_elems) / 2, vpe_ops=vector_elems,
        dram_bytes=dram_bytes, pcie_bytes=pcie_bytes,
        pcie_busy_s=L * sc.fetch_s + L * pl.offload_write_bytes_per_layer / sys.pcie,
        hcu_compares=n_pred_layers * sc.pred.hcu_compares, wtu_elems=n_pred_layers * sc.pred.wtu_elems,
        kvmu_requests=(pcie_bytes / sys.offload_granule) if i.engine == "dre" else 0.0)
    energy_j, parts_j = _energy.step_energy(sys, act)
    notes = dict(engine=i.engine, offloaded_tokens=pl.off_tokens, on_device_tokens=pl.on_dev_tokens,
                 moved_fraction=pl.moved_frac, fetch_ms_per_layer=sc.fetch_s * 1e3, attended_tokens=pl.attended_tokens,
                 layout=i.spec.layout, vision_flops=vis_flops, retrieved_reuse=pl.reuse_frac,
                 retrieved_kept_frac=pl.retrieved_kept_frac, extrapolated=dict(i.extrapolated),
                 tokens_per_cluster=i.tokens_per_cluster, dre_cycles=sc.pred.hcu_cycles + sc.pred.wtu_cycles)
    return SimResult(sys.name, i.spec.name, i.stage, i.kv_len, B, sc.total_s * 1e3, energy_j, llm_flops + vis_flops,
                     pred_flops, bytes_, breakdown_ms, parts_j, energy_j / sc.total_s, mem_bytes, sys.dram_capacity,
                     i.selected_frac, i.wl.source(i.extrapolated), sc.timeline, notes)


def simulate(system: str | System, method: str | MethodSpec, stage: str, kv_len: int, batch: int = 1, *,
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


def keys_resident(spec: MethodSpec, p: SimParams) -> bool:
    """True when the method keeps all keys (full head_dim) in device DRAM for scoring: InfiniGenP with
    ``infinigen_p_key_frac >= 1`` (footprint_bytes counts that copy in every stage)."""
    return "full_key" in (spec.frame_predictor, spec.text_predictor) and p.infinigen_p_key_frac >= 1.0


def footprint_bytes(llm: LLMSpec, p: SimParams, spec: MethodSpec, kv_len: int, batch: int, offload: bool,
                    tokens_per_frame: int, tokens_per_cluster: float) -> float:
    """Accelerator DRAM in use: weights (LLM + vision) + on-device KV + the predictor's resident metadata."""
    on_dev = kv_len if not offload else min(kv_len, p.recent_capacity)
    kv = batch * on_dev * llm.kv_bytes_per_token
    L, Hkv, D = llm.n_layers, llm.n_kv_heads, llm.head_dim
    meta = 0.0
    preds = {spec.frame_predictor, spec.text_predictor}
    if "full_key" in preds:
        meta = batch * kv_len * L * Hkv * D * p.infinigen_p_key_frac * 2
    elif "partial_key" in preds:
        meta = batch * kv_len * L * Hkv * D * p.infinigen_partial_frac * 2
    elif "block_mean" in preds:
        meta = batch * kv_len / tokens_per_frame * L * Hkv * D * 2
    elif "resv" in preds:
        # HC table: per cluster a BF16 centroid + 32-bit code + 16-bit count, plus a 32-bit index per token.
        meta = batch * L * Hkv * (kv_len / tokens_per_cluster * (D * 2 + 6) + kv_len * 4)
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
                      tokens_per_cluster: float | None = None, wics_exit_frac: float | None = None,
                      reuse: float | None = None, source: str = "measured", batch: int = 1, **overrides) -> SimResult:
    """One simulated step of ``method`` (a runtime policy name or simulator method) with one step's measured
    statistics (:meth:`Workload.from_stats`). ``overrides``: any :class:`SimParams` field or ``system_<field>``.
    The result's ``workload_source`` names the provenance."""
    wl = Workload.from_stats(method, selected_frac=selected_frac, tokens_per_cluster=tokens_per_cluster,
                             wics_exit_frac=wics_exit_frac, reuse=reuse, source=source)
    return simulate(system, SIM_METHOD.get(method, method), stage, int(kv_len), batch, workload=wl, **overrides)


def step_latency_ms(systems, method: str, stage: str, kv_len: int, *, selected_frac: float | None,
                    tokens_per_cluster: float | None = None, wics_exit_frac: float | None = None,
                    source: str = "measured") -> dict[str, float]:
    """Latency (ms) of one simulated step on each of ``systems`` with one step's measured statistics
    (:func:`simulate_measured`): the per-step view of ``python -m vrex_lib.live`` and notebook 08."""
    return {s: float(simulate_measured(s, method, stage, int(kv_len), selected_frac=selected_frac,
                                       tokens_per_cluster=tokens_per_cluster, wics_exit_frac=wics_exit_frac,
                                       source=source).latency_ms) for s in systems}
