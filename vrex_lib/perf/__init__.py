"""Cycle/event-level performance simulator for V-Rex and its GPU baselines (Fig. 4, Fig. 13-18).

    from vrex_lib import perf
    r = perf.simulate("vrex8", "resv", "frame", kv_len=40_000, batch=1)
    r.latency_ms, r.fps, r.energy_J, r.gops_per_w, r.bytes, r.breakdown_ms, r.timeline

Layers: workload (FLOPs/bytes per op) -> systems (Table I + efficiency factors) -> methods (prediction
work, transfer layout) -> energy (estimator constants x counts) -> sim (event timeline per layer).
"""
from .methods import METHODS, MethodSpec, load_ratios, moved_fraction
from .sim import SimParams, SimResult, e2e_coin, footprint_bytes, memory_footprint_gb, simulate
from .systems import System, get_system, systems
from .workload import LLAMA3_8B, SIGLIP_L384, COINCase, LLMSpec, VisionSpec

KV_SIZES = (1000, 5000, 10000, 20000, 40000)
GPU_METHODS = ("flexgen", "infinigen", "infinigen_p", "rekv")

__all__ = ["COINCase", "GPU_METHODS", "KV_SIZES", "LLAMA3_8B", "LLMSpec", "METHODS", "MethodSpec", "SIGLIP_L384",
           "SimParams", "SimResult", "System", "VisionSpec", "e2e_coin", "footprint_bytes", "get_system",
           "load_ratios", "memory_footprint_gb", "moved_fraction", "simulate", "systems"]
