"""The simulator: workload × system × method × stage -> latency, energy, bytes per tier, per-layer timeline.

Model (event level where overlap matters, closed form per op):

* Every op on the main engine (GPU, or V-Rex's LXE) takes ``max(flops / achieved FLOP/s, DRAM bytes /
  achieved DRAM B/s) + kernels × launch overhead`` (roofline per op).
* Per decoder layer ℓ the main engine runs QKV → KV prediction for layer ℓ+1 → attention → out-proj → FFN.
  The PCIe engine fetches layer ℓ+1's selected offloaded KV as soon as its prediction is known (on V-Rex:
  after the DRE's HCU/WTU finish, which run concurrently with the LXE) and the link is free; attention of
  ℓ+1 waits for its fetch. Layer 0's fetch cannot be predicted earlier and is exposed (methods without
  prediction fetch it during the vision tower). ``prefetch=False`` serialises prediction → fetch → attention.
* Placement: per stream the newest ``recent_capacity`` tokens sit in accelerator DRAM, older ones in the
  offload tier (SSD on the edge, CPU DDR4 on the server); the newest ``recent_window`` tokens are always
  attended, the rest are candidates of which the method selects ``ratio`` (uniformly over the tiers).
* PCIe moves whole granules of the offload tier (:func:`methods.moved_fraction`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..config import VRexCoreConfig
from . import energy as _energy
from .methods import MethodSpec, get_method, load_ratios, moved_fraction, prediction_work, run_tokens, stage_ratio
from .systems import System, get_system
from .workload import LLAMA3_8B, SIGLIP_L384, LLMSpec, Op, VisionSpec, decoder_layer_ops, lm_head_op, vision_op


@dataclass(frozen=True)
class SimParams:
    """Workload and modelling choices; pass any field to :func:`simulate` as a keyword override.

    recent_capacity: KVMU capacity before offload, tokens per stream (digest §10f default 4096).
    recent_window:   newest tokens always attended (one frame).
    tokens_per_cluster: ReSV mean cluster size (paper §VI.B reports 32; notebook 03 measures ours).
    infinigen_partial_frac: InfiniGen's partial key/query fraction of head_dim (runtime default 0.2).
    infinigen_p_key_frac:   InfiniGenP's frame-stage scoring key fraction (1.0 = full-key Q·K^T).
    topk_passes / sort_passes: read passes of a GPU radix top-k / radix sort over the scores.
    wics_exit_frac: fraction of a WiCSum row processed before early exit (used for WTU energy).
    ratio_exponent / ratio_ref_len: the measured ratio holds at ``ratio_ref_len`` tokens (COIN videos are a few
      thousand tokens long); beyond it the selected count grows as kv_len^exponent. A float applies to every
      method, a mapping {method ratio key: exponent} per method (missing = 1). Default 1.0 = constant ratio (no
      extrapolation); :func:`vrex_lib.perf.measured.measure_trace_params` fits it from runtime traces.
    retrieved_reuse: fraction of a step's selected offloaded KV already in device DRAM from the previous step of
      the same stage -- the KVMU's "Retrieved KV" region (Fig. 12) -- so not fetched again. A float applies to
      every method that has such a cache, a mapping {(method ratio key, stage): fraction} per method and stage
      (missing = 0). Default 0 (no reuse): the paper does not give it; the runtime trace measures it. The region
      holds every layer's selected offloaded KV in the DRAM left free (counted in memory); when it does not all fit
      the reuse shrinks in proportion (``notes['retrieved_kept_frac']``) -- the cache never causes an OOM.
    retrieved_cache: which methods keep the previous step's retrieved KV in device DRAM: 'kvmu' (default: only
      V-Rex's KVMU, i.e. ReSV's cluster layout on V-Rex, as in Fig. 12), 'all' (also every selecting, offloading
      GPU baseline, in GPU DRAM), 'none'. A cache holds every layer's selected offloaded KV (counted in memory).
    n_new: new tokens per stream in a frame-stage step (default: one frame's tokens; the question prefill uses
      the question length).
    prefetch: overlap the fetch of layer ℓ+1 with layer ℓ (False = serial, for ablation/tests).
    offload: None = the method's own behaviour; False forces no offload (Fig. 15 AGX without offload).
    """

    llm: LLMSpec = LLAMA3_8B
    vision: VisionSpec = SIGLIP_L384
    recent_capacity: int = 4096
    recent_window: int = 10
    tokens_per_cluster: float = 32.0
    n_hp: int = 32
    infinigen_partial_frac: float = 0.2
    infinigen_p_key_frac: float = 1.0
    topk_passes: int = 4
    sort_passes: int = 8
    wics_exit_frac: float = 0.16
    ratio_exponent: float | Mapping = 1.0
    ratio_ref_len: int = 4000
    retrieved_reuse: float | Mapping = 0.0
    retrieved_cache: str = "kvmu"
    prefetch: bool = True
    offload: bool | None = None
    include_vision: bool = True
    n_new: int | None = None
    # Filled by simulate() from the system (V-Rex core count and configuration for DRE timing).
    n_cores: int = 0
    core: VRexCoreConfig | None = None

    @property
    def tokens_per_frame(self) -> int:
        return self.vision.tokens_per_frame


@dataclass
class SimResult:
    """One simulated step: a batched frame prefill (every stream adds one frame) or one generated token.

    latency_ms: per frame (frame stage) or per output token (text stage, TPOT).
    breakdown_ms: llm, vision_mlp, kv_prediction (main-engine time), retrieval_exposed (stall waiting for
      PCIe) -- they sum to latency_ms.
    bytes: dram (accelerator DRAM traffic), pcie (offload-tier traffic, both directions), pcie_fetch.
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
    ratio_source: str
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
        """Useful work (LLM + vision FLOPs, prediction excluded) per joule, in GOPS/W."""
        return self.flops / self.energy_J / 1e9

    @property
    def op_intensity(self) -> float:
        """FLOP per byte of accelerator DRAM traffic (the x-axis of a DRAM roofline), vision included.

        Review fix (issue 8): this used to divide by DRAM + PCIe-fetched bytes. The fetched KV is already in
        ``bytes['dram']`` twice (written where it lands, read by attention), and PCIe bytes belong to another
        roof, so adding them counted the fetch a third time against the DRAM roof the figure draws."""
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
                 oom=self.oom, mem_gb=self.mem_bytes / 1e9,
                 ratio=self.ratio, ratio_source=self.ratio_source)
        d.update({f"{k}_ms": v for k, v in self.breakdown_ms.items()})
        d.update({f"{k}_bytes": v for k, v in self.bytes.items()})
        return d


def _lookup(value, key, default: float) -> float:
    """A SimParams field that is either one float for everyone or a mapping keyed per method (and stage)."""
    if isinstance(value, Mapping):
        return float(value.get(key, default))
    return float(value)


def _op_time(op: Op, sys: System) -> float:
    return max(op.flops / sys.flops, op.dram_bytes / sys.dram) + op.kernels * sys.kernel_launch_s


_RATIO_CACHE: dict = {}


def simulate(system: str | System, method: str | MethodSpec, stage: str, kv_len: int, batch: int = 1, *,
             ratios: dict | None = None, **overrides) -> SimResult:
    """Simulate one batched step of ``stage`` ('frame' or 'text') with ``kv_len`` cached tokens per stream.

    ``ratios``: {(method, stage): fraction}; default notebook 03's measurement, else Table II (labelled in
    ``ratio_source``). ``overrides``: any :class:`SimParams` field, or ``system_<field>`` to replace a field of
    the system (e.g. ``system_pcie_bw=8e9``).
    """
    if stage not in ("frame", "text"):
        raise ValueError(f"stage must be 'frame' or 'text', got {stage!r}")
    if kv_len < 0 or batch < 1:
        raise ValueError(f"kv_len must be >= 0 and batch >= 1 (got {kv_len}, {batch})")
    sys = get_system(system)
    sys_changes = {k[len("system_"):]: overrides.pop(k) for k in list(overrides) if k.startswith("system_")}
    if sys_changes:
        sys = dataclasses.replace(sys, **sys_changes)
    spec = get_method(method)
    p = SimParams(**overrides)
    p = dataclasses.replace(p, n_cores=sys.n_cores, core=sys.core)
    llm = dataclasses.replace(p.llm, kv_bits=spec.kv_bits)
    if ratios is None:
        from ..config import results_dir

        csv = results_dir() / "data" / "retrieval_ratios.csv"
        key = (str(csv), csv.stat().st_mtime if csv.exists() else None)  # reload when notebook 03 rewrites it
        if key not in _RATIO_CACHE:
            _RATIO_CACHE[key] = load_ratios(csv)
        ratios, rsrc = _RATIO_CACHE[key]
    else:
        rsrc = "caller-supplied"
    if spec.predictor(stage) == "none":
        rsrc = "no selection (all tokens)"
    r = stage_ratio(spec, stage, ratios)
    expo = _lookup(p.ratio_exponent, spec.ratio_key, 1.0)
    if r < 1.0 and expo != 1.0 and kv_len > p.ratio_ref_len:
        # Selected tokens grow as kv_len^exponent beyond the length the ratio was measured at.
        r = min(1.0, r * (kv_len / p.ratio_ref_len) ** (expo - 1.0))
    engine = "dre" if (sys.kind == "vrex" and spec.predictor(stage) == "resv") else "gpu"
    if spec.name == "resv_kvpu" and sys.kind != "vrex":
        raise ValueError("resv_kvpu is the V-Rex KVPU-only ablation; on a GPU use method 'resv' (GPU+ReSV)")

    B = batch
    N = (p.n_new or p.tokens_per_frame) if stage == "frame" else 1
    L = llm.n_layers
    offload = spec.offload if p.offload is None else (p.offload and spec.offload)
    on_dev = kv_len if not offload else min(kv_len, p.recent_capacity)
    off = kv_len - on_dev
    always = min(kv_len, p.recent_window)
    n_cand = kv_len - always
    cand_dev = max(0, on_dev - always)
    sel_dev, sel_off = r * cand_dev, r * off
    attended = always + sel_dev + sel_off + N
    kvb = llm.kv_bytes_per_token_layer
    chunk = llm.head_dim * spec.kv_bits / 8
    layout = spec.layout
    if layout == "cluster" and sys.kind != "vrex":
        # No KVMU on a GPU: ReSV's clusters stay scattered in token order (§V.C: online reordering is impractical).
        layout = "token"
        spec = dataclasses.replace(spec, layout="token")
    run = run_tokens(spec, p.tokens_per_frame, p.tokens_per_cluster) * chunk
    frac = (moved_fraction(r, min(run, max(off, 1) * chunk), chunk, sys.offload_granule, aligned=layout == "cluster")
            if off > 0 else 0.0)
    if p.retrieved_cache not in ("kvmu", "all", "none"):
        raise ValueError(f"retrieved_cache must be 'kvmu', 'all' or 'none', got {p.retrieved_cache!r}")
    # Who keeps the previous step's retrieved KV in device DRAM (see SimParams.retrieved_cache).
    has_cache = (layout == "cluster" if p.retrieved_cache == "kvmu" else
                 p.retrieved_cache == "all" and offload and spec.predictor(stage) != "none")
    reuse = _lookup(p.retrieved_reuse, (spec.ratio_key, stage), 0.0) if has_cache else 0.0
    if not 0.0 <= reuse <= 1.0:
        raise ValueError(f"retrieved_reuse {reuse} for {spec.name}/{stage} must be in [0, 1]")
    # Review fix (issue 8): a method whose predictor keeps a copy of *every* key in device DRAM (InfiniGenP's
    # full-key scoring, ``infinigen_p_key_frac >= 1``; the copy is in footprint_bytes) already holds the selected
    # tokens' K there, so only their V crosses PCIe. Fetching K again double-counted it (and the bytes of the copy).
    fetch_kv_share = 0.5 if keys_resident(spec, p) else 1.0
    # The retrieved-KV region keeps every layer's selected offloaded KV until the next step, in the DRAM left over
    # after weights, recent KV, predictor metadata and the prefetch buffers; what does not fit is fetched again.
    mem_base = footprint_bytes(llm, p, spec, kv_len, B, offload) + 2 * B * off * kvb * frac * fetch_kv_share
    retrieved_need = L * B * sel_off * kvb * fetch_kv_share if reuse > 0 else 0.0
    retrieved_kept = min(retrieved_need, max(0.0, sys.dram_capacity - mem_base))
    if retrieved_need > 0:
        reuse *= retrieved_kept / retrieved_need
    fetch_bytes = B * off * kvb * frac * (1.0 - reuse) * fetch_kv_share  # per layer
    t_fetch = fetch_bytes / sys.pcie
    offload_write = B * N * kvb if off > 0 else 0.0  # the oldest tokens leave for the offload tier, per layer

    layer_ops = decoder_layer_ops(llm, N, B, attended)
    # Fetched KV lands in DRAM before attention reads it.
    layer_ops[1].kv_bytes += fetch_bytes + offload_write
    pw = prediction_work(spec.predictor(stage), llm, B, N, n_cand, engine, p)
    t_ops = [_op_time(o, sys) for o in layer_ops]
    t_pred_main = sum(_op_time(o, sys) for o in pw.ops)
    t_dre = (pw.hcu_cycles + pw.wtu_cycles) / sys.freq_hz if engine == "dre" else 0.0
    predicts = spec.predictor(stage) != "none"

    tl: list[dict] = []
    t = 0.0
    t_vis = 0.0
    if stage == "frame" and p.include_vision:
        vop = vision_op(p.vision, B)
        t_vis = _op_time(vop, sys)
        tl.append(dict(layer=-1, phase="vision_mlp", engine="main", start=0.0, end=t_vis, dram_bytes=vop.dram_bytes,
                       pcie_bytes=0.0))
        t = t_vis
    pcie_free = 0.0
    fetch_done: dict[int, float] = {}

    def schedule_fetch(layer: int, ready: float) -> None:
        nonlocal pcie_free
        if t_fetch <= 0:
            fetch_done[layer] = ready
            return
        s = max(pcie_free, ready)
        pcie_free = s + t_fetch
        fetch_done[layer] = pcie_free
        tl.append(dict(layer=layer, phase="kv_fetch", engine="pcie", start=s, end=pcie_free, dram_bytes=fetch_bytes,
                       pcie_bytes=fetch_bytes))

    def run_pred(target: int) -> float:
        """Prediction for layer ``target`` on the main engine (+ DRE); returns when its selection is known."""
        nonlocal t
        if not predicts:
            return t
        s = t
        t += t_pred_main
        tl.append(dict(layer=target, phase="kv_prediction", engine="main", start=s, end=t,
                       dram_bytes=sum(o.dram_bytes for o in pw.ops), pcie_bytes=0.0))
        if t_dre > 0:
            tl.append(dict(layer=target, phase="kv_prediction_dre", engine="dre", start=t, end=t + t_dre,
                           dram_bytes=0.0, pcie_bytes=0.0))
        return t + t_dre

    stall_total = 0.0
    names = [o.name for o in layer_ops]
    if not predicts and p.prefetch:
        schedule_fetch(0, 0.0)  # nothing to predict: layer 0's KV streams in during the vision tower
    for layer in range(L):
        layer_start = t
        s = t
        t += t_ops[0]
        tl.append(dict(layer=layer, phase="qkv", engine="main", start=s, end=t, dram_bytes=layer_ops[0].dram_bytes,
                       pcie_bytes=0.0))
        if layer == 0 or not p.prefetch:
            if layer not in fetch_done:
                ready = run_pred(layer)
                schedule_fetch(layer, ready)
        if p.prefetch and layer + 1 < L:
            ready = run_pred(layer + 1) if predicts else layer_start
            schedule_fetch(layer + 1, ready)
        start_attn = max(t, fetch_done.get(layer, t))
        stall_total += start_attn - t
        if start_attn > t:
            tl.append(dict(layer=layer, phase="stall", engine="main", start=t, end=start_attn, dram_bytes=0.0,
                           pcie_bytes=0.0))
        t = start_attn
        for name, op, dt in zip(names[1:], layer_ops[1:], t_ops[1:]):
            tl.append(dict(layer=layer, phase=name, engine="main", start=t, end=t + dt, dram_bytes=op.dram_bytes,
                           pcie_bytes=0.0))
            t += dt
    head = lm_head_op(llm, B)
    t_head = _op_time(head, sys)
    tl.append(dict(layer=L, phase="lm_head", engine="main", start=t, end=t + t_head, dram_bytes=head.dram_bytes,
                   pcie_bytes=0.0))
    t += t_head
    total = t

    n_pred_layers = L if predicts else 0
    pred_main_total = n_pred_layers * t_pred_main
    llm_time = L * sum(t_ops) + t_head
    breakdown = dict(llm=llm_time * 1e3, vision_mlp=t_vis * 1e3, kv_prediction=pred_main_total * 1e3,
                     retrieval_exposed=stall_total * 1e3)

    # Work and traffic totals.
    llm_flops = L * sum(o.flops for o in layer_ops) + head.flops
    vis_flops = vision_op(p.vision, B).flops if (stage == "frame" and p.include_vision) else 0.0
    pred_flops = n_pred_layers * sum(o.flops for o in pw.ops)
    dram = (L * sum(o.dram_bytes for o in layer_ops) + head.dram_bytes
            + n_pred_layers * sum(o.dram_bytes for o in pw.ops)
            + (vision_op(p.vision, B).dram_bytes if vis_flops else 0.0))
    pcie_fetch = L * fetch_bytes
    pcie = pcie_fetch + L * offload_write
    macs_main = (llm_flops + vis_flops + pred_flops) / 2
    dram_vis = vision_op(p.vision, B).dram_bytes if vis_flops else 0.0
    bytes_ = dict(dram=dram, dram_llm=dram - dram_vis, pcie=pcie, pcie_fetch=pcie_fetch,
                  pcie_useful=L * B * sel_off * kvb * fetch_kv_share)

    # Memory footprint on the accelerator.
    mem = footprint_bytes(llm, p, spec, kv_len, B, offload)
    mem += 2 * fetch_bytes + retrieved_kept  # double-buffered prefetch + the retrieved-KV region

    act = _energy.Activity(
        seconds=total, macs=macs_main, dram_bytes=dram, pcie_bytes=pcie,
        pcie_busy_s=L * t_fetch + L * offload_write / sys.pcie,
        hcu_compares=n_pred_layers * pw.hcu_compares, wtu_elems=n_pred_layers * pw.wtu_elems,
        dre_busy_s=n_pred_layers * t_dre)
    e_total, e_parts = _energy.step_energy(sys, act)
    notes = dict(engine=engine, offloaded_tokens=off, on_device_tokens=on_dev, moved_fraction=frac,
                 fetch_ms_per_layer=t_fetch * 1e3, dre_source=pw.dre_source, energy_source=_energy.SOURCE,
                 attended_tokens=attended, layout=spec.layout, vision_flops=vis_flops, retrieved_reuse=reuse,
                 retrieved_kept_frac=retrieved_kept / retrieved_need if retrieved_need else float("nan"),
                 ratio_exponent=expo)
    for row in tl:
        row["start_us"], row["end_us"] = row.pop("start") * 1e6, row.pop("end") * 1e6
    return SimResult(sys.name, spec.name, stage, kv_len, B, total * 1e3, e_total, llm_flops + vis_flops, pred_flops,
                     bytes_, breakdown, e_parts, e_total / total, mem, sys.dram_capacity, r, rsrc, tl, notes)


def keys_resident(spec: MethodSpec, p: SimParams) -> bool:
    """True when the method keeps all keys (full head_dim) in device DRAM for scoring: InfiniGenP with
    ``infinigen_p_key_frac >= 1`` (footprint_bytes counts that copy in every stage)."""
    return "full_key" in (spec.frame_predictor, spec.text_predictor) and p.infinigen_p_key_frac >= 1.0


def footprint_bytes(llm: LLMSpec, p: SimParams, spec: MethodSpec, kv_len: int, batch: int, offload: bool) -> float:
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
        meta = batch * kv_len / p.tokens_per_frame * L * Hkv * D * 2
    elif "resv" in preds:
        # HC table: per cluster a BF16 centroid + 32-bit code + 16-bit count, plus a 32-bit index per token.
        meta = batch * L * Hkv * (kv_len / p.tokens_per_cluster * (D * 2 + 6) + kv_len * 4)
    return llm.weight_bytes + p.vision.weight_bytes + kv + meta


def memory_footprint_gb(minutes: float, fps: float = 10.0, batch: int = 4, llm: LLMSpec = LLAMA3_8B,
                        vision: VisionSpec = SIGLIP_L384) -> dict:
    """Fig. 4(a): GB of model parameters and of the (un-offloaded) KV cache after ``minutes`` of streaming."""
    tokens = minutes * 60 * fps * vision.tokens_per_frame
    return dict(minutes=minutes, params_gb=(llm.weight_bytes + vision.weight_bytes) / 1e9,
                kv_gb=batch * tokens * llm.kv_bytes_per_token / 1e9)


def e2e_coin(system: str | System, method: str, kv_len: int, case=None, batch: int = 1, *, ratios=None,
             text_points: int = 4, **overrides) -> dict:
    """Fig. 4(b)/14: end-to-end latency of the average COIN case on a pre-computed ``kv_len`` cache.

    frames (each: vision + frame prefill), the question prefill (frame-stage retrieval, no vision tower) and answer
    tokens (TPOT integrated over the growing cache with
    ``text_points`` samples). The question is one prefill step of ``question_tokens`` new tokens. Returns ms
    split into prefill, generation, vision_mlp, and their retrieval parts.
    """
    from .workload import COINCase

    case = case or COINCase()
    out = dict(prefill=0.0, generation=0.0, vision_mlp=0.0, prefill_retrieval=0.0, generation_retrieval=0.0)
    step = max(1, case.frames // 4)
    for f in range(0, case.frames, step):
        n = min(step, case.frames - f)
        kv_f = kv_len + f * overrides.get("vision", SIGLIP_L384).tokens_per_frame
        r = simulate(system, method, "frame", kv_f, batch, ratios=ratios, **overrides)
        out["vision_mlp"] += n * r.breakdown_ms["vision_mlp"]
        out["prefill"] += n * (r.latency_ms - r.breakdown_ms["vision_mlp"])
        out["prefill_retrieval"] += n * (r.breakdown_ms["kv_prediction"] + r.breakdown_ms["retrieval_exposed"])
    tpf = overrides.get("vision", SIGLIP_L384).tokens_per_frame
    kv_q = kv_len + case.frames * tpf
    rq = simulate(system, method, "frame", kv_q, batch, ratios=ratios, include_vision=False,
                  n_new=case.question_tokens, **overrides)
    out["prefill"] += rq.latency_ms
    out["prefill_retrieval"] += rq.breakdown_ms["kv_prediction"] + rq.breakdown_ms["retrieval_exposed"]
    kv_a = kv_q + case.question_tokens
    n = max(1, text_points)
    for i in range(n):
        k = kv_a + int((i + 0.5) * case.answer_tokens / n)
        rt = simulate(system, method, "text", k, batch, ratios=ratios, **overrides)
        out["generation"] += case.answer_tokens / n * rt.latency_ms
        out["generation_retrieval"] += case.answer_tokens / n * (rt.breakdown_ms["kv_prediction"]
                                                                 + rt.breakdown_ms["retrieval_exposed"])
    out["total"] = out["prefill"] + out["generation"] + out["vision_mlp"]
    return out
