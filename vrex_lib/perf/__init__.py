"""Event-level performance and energy simulator for V-Rex and its GPU baselines (Fig. 4, Fig. 13-18).

    from vrex_lib import perf
    r = perf.simulate("vrex8", "resv", "frame", kv_len=40_000, batch=1, workload="paper")
    r.latency_ms, r.fps, r.energy_J, r.gops_per_w, r.bytes, r.breakdown_ms, r.timeline, r.workload_source

Layers: workload (the :class:`Workload`: what the model and data do) -> model_ops (FLOPs, bytes per DRAM stream,
GEMM shapes and VPE work per op) -> constants (the one cited table) -> dram (one bank-level model per memory
technology), lxe (per-core DPE tiles, VPE, ports), link (NVMe commands, ASPM) -> systems (Table I) -> methods
(prediction work, transfer layout) -> energy (estimator constants x counts) -> sim (event timeline per layer) ->
experiments, validation. The comparison with the paper is :mod:`vrex_lib.claims.performance` (one layer up).
docs/PERF_MODEL.md describes the model.
"""
from .workload import EXTRAPOLATIONS, SIM_METHOD, Curve, FieldSource, Workload
from .methods import METHODS, SimMethod, moved_fraction
from .sim import SimParams, SimResult, e2e_coin, footprint_bytes, memory_footprint_gb, simulate, simulate_measured
from .systems import System, get_system, systems
from .model_ops import LLAMA3_8B, SIGLIP_L384, COINCase, LLMSpec, VisionSpec

from .experiments import GPU_METHODS, KV_SIZES

__all__ = ["COINCase", "Curve", "EXTRAPOLATIONS", "GPU_METHODS", "KV_SIZES", "LLAMA3_8B", "LLMSpec", "METHODS",
           "SimMethod", "FieldSource", "SIGLIP_L384", "SimParams", "SimResult", "System", "VisionSpec", "Workload",
           "e2e_coin", "footprint_bytes", "get_system", "memory_footprint_gb", "moved_fraction", "simulate",
           "simulate_measured", "systems", "SIM_METHOD"]
