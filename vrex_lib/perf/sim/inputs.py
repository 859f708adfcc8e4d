"""Step 1: inputs. Every quantity the later stages need from the system, the method, the Workload and the
parameters is resolved here; placement, schedule and totals read :class:`StepInputs` and never the Workload."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from ..methods import SimMethod, get_method
from ..model_ops import LLMSpec
from ..systems import System, get_system
from ..workload import Workload
from .params import SimParams


@dataclass(frozen=True)
class StepInputs:
    """Everything one step depends on, resolved. ``extrapolated``: {field: policy} used at this length.
    ``r_dev`` / ``r_off``: selected share of the on-device / offloaded candidates (1 for methods that do not
    select; ``r_off`` = ``r_dev`` when nothing is offloaded, where it is unused); ``dense_layers``: layers that
    attend to everything; ``offload``: whether KV beyond the capacity leaves the device; ``tokens_per_frame``: the
    Workload's; ``fetch_blocks``: the Workload's measured blocks touched per selected offloaded token in the
    method's offloaded layout at this system's granule (None: not measured, the granule rule applies);
    ``source``: the Workload's provenance label with every extrapolation used; ``queue_depth``: NVMe reads in
    flight on this system (D105, D422). On a GPU ``p.recent_capacity`` is the baselines' own capacity (D420)."""

    sys: System
    spec: SimMethod
    p: SimParams
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
    offload: bool
    tokens_per_frame: int
    fetch_blocks: float | None
    source: str
    queue_depth: int

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


def _selection(spec: SimMethod, wl: Workload, stage: str, kv_len: int, *, offloaded: bool,
               used: dict) -> tuple[float, float]:
    """(on-device share, offloaded share) of the candidates ``spec`` attends to at ``kv_len``; both 1 when it does
    not select (offloaded 0 when it evicts). ``offloaded``: whether the offloaded share is needed (else it equals
    the on-device share and is not looked up). Extrapolation policies used are added to ``used``."""
    if not spec.selects(stage):
        return (1.0, 0.0) if spec.evicts else (1.0, 1.0)
    key = spec.ratio_key or spec.name
    try:
        r_dev, pol = wl.selected(key, stage, kv_len, "device")
        if pol:
            used[f"selected_frac_device {key}/{stage}"] = pol
        if not offloaded:
            return r_dev, r_dev
        r_off, pol = wl.selected(key, stage, kv_len, "offloaded")
    except KeyError:
        fallback = spec.fallback_selection(stage, kv_len)
        if fallback is None:
            raise
        used[f"selected_frac {spec.name}/{stage}"] = fallback[1]
        return fallback[0], fallback[0]
    if pol:
        used[f"selected_frac_offloaded {key}/{stage}"] = pol
    return r_dev, r_off


def _split_overrides(sys: System, overrides: dict) -> tuple[System, SimParams]:
    """The system with its ``system_<field>`` overrides applied, and the SimParams of the rest."""
    overrides = dict(overrides)
    sys_changes = {k[len("system_"):]: overrides.pop(k) for k in list(overrides) if k.startswith("system_")}
    if sys_changes:
        sys = dataclasses.replace(sys, **sys_changes)
    unknown = set(overrides) - {f.name for f in dataclasses.fields(SimParams)}
    if unknown:
        raise TypeError(f"simulate: unknown override(s) {sorted(unknown)}; SimParams fields or system_<field>. "
                        "Workload quantities (selected fraction, reuse, tokens per cluster) belong in the Workload")
    return sys, SimParams(**overrides)


def baseline_capacity_tokens(p: SimParams, sys: System, llm: LLMSpec, kv_len: int, batch: int,
                             n_new: int) -> int:
    """The GPU baselines' GPU-resident KV per stream (docs/DECISIONS.md D420): ``p.baseline_kv_capacity`` tokens, or
    for 'fit' what FlexGen's policy keeps in the GPU memory left after the weights (LLM + vision), one layer's
    activations and attention scores, the double-buffered per-layer KV it streams in, and on unified memory the host's
    pinned relay buffers for one layer (they share the device's DRAM)."""
    cap = p.baseline_kv_capacity
    if cap != "fit":
        return int(cap)
    kv_layer = batch * kv_len * llm.kv_bytes_per_token_layer
    act = batch * n_new * (3 * llm.hidden + 2 * llm.ffn) * llm.bytes_per_param + batch * llm.n_q_heads * n_new * kv_len * 4
    buffers = 2 * kv_layer + (sys.staging_copies * kv_layer if sys.unified_memory else 0.0)
    free = sys.dram_capacity - llm.weight_bytes - p.vision.weight_bytes - act - buffers
    return int(min(kv_len, max(0.0, free // (batch * llm.kv_bytes_per_token))))


def step_inputs(system: str | System, method: str | SimMethod, stage: str, kv_len: int, batch: int,
                workload: Workload | str | Path, overrides: dict) -> StepInputs:
    kv_len, batch = _check_step_args(stage, kv_len, batch)
    sys, p = _split_overrides(get_system(system), overrides)
    spec = get_method(method).on_system(sys.kind)
    wl = Workload.resolve(workload)
    used: dict[str, str] = {}
    offload = spec.offload if p.offload is None else (p.offload and spec.offload)
    llm = dataclasses.replace(p.llm, kv_bits=spec.kv_bits)
    n_new = (p.n_new or wl.tokens_per_frame) if stage == "frame" else 1
    if sys.kind != "vrex":
        cap = baseline_capacity_tokens(p, sys, llm, kv_len, batch, n_new)
        p = p if cap == p.recent_capacity else dataclasses.replace(p, recent_capacity=cap)
    # Below the KVMU capacity nothing is offloaded: the offloaded share is not needed (nor looked up).
    r_dev, r_off = _selection(spec, wl, stage, kv_len, offloaded=offload and kv_len > p.recent_capacity, used=used)
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
    engine = spec.engine(sys.kind, stage)
    dense = wl.dense_layers if p.dense_layers is None else p.dense_layers
    chunk_bytes = llm.head_dim * spec.kv_bits / 8
    layout = "cluster" if spec.layout == "cluster" else "token"
    # Looked up only where the granule rule would otherwise apply: something offloaded and a strict subset selected.
    partial = offload and kv_len > p.recent_capacity and 0 < r_off < 1 and spec.layout != "all"
    blocks = (wl.fetch_blocks_at(spec.ratio_key, layout, max(sys.offload_granule, chunk_bytes) / chunk_bytes, kv_len)
              if spec.ratio_key and partial else None)
    return StepInputs(sys, spec, p, llm, stage, kv_len, batch, n_new, r_dev, r_off, reuse, max(1.0, tpc),
                      min(1.0, max(0.0, wics)), engine, min(dense, p.llm.n_layers), used, offload,
                      wl.tokens_per_frame, blocks, wl.source(used),
                      sys.nvme_queue_depth if sys.kind == "vrex" or p.gpu_queue_depth is None else p.gpu_queue_depth)
