"""The simulator: workload × system × method × stage -> latency, energy, bytes per tier, per-layer timeline.

``simulate`` is pure: every input is an argument (the Workload, the System, the SimParams overrides); it reads no
file the caller did not name, keeps no cache and changes no global. It runs in four small steps, one module each:

1. :func:`step_inputs` (:mod:`.inputs`) -- resolve system, method, workload, parameters; the selected fractions of
   the on-device and of the offloaded candidates at this length (and which extrapolation, if any, was used), and
   every other Workload quantity the later steps use (tokens per frame and cluster, WiCSum exit, reuse, measured
   blocks per token, the provenance label): the later steps never read the Workload;
2. :func:`placement` (:mod:`.placement`) -- tokens per tier, selected tokens, granule-amplified fetch bytes and NVMe
   commands per layer (dense layers read and fetch everything), reuse of the previous step's retrieved KV, memory
   footprint;
3. :func:`schedule` (:mod:`.schedule`) -- the per-layer event timeline (main engine, DRE, PCIe), op times from
   :class:`OpCosts` (:mod:`.costs`);
4. :func:`totals` (:mod:`.totals`) -- work, traffic, energy, the resource ledger and the :class:`SimResult`.

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

from pathlib import Path

from ..model_ops import LLAMA3_8B, SIGLIP_L384, LLMSpec, VisionSpec
from ..systems import System, get_system
from ..methods import SimMethod
from ..workload import SIM_METHOD, Workload
from .costs import OpCosts, _op_time_s
from .inputs import StepInputs, step_inputs
from .params import GRANULE_RULES, SimParams, SimResult
from .placement import LayerTraffic, Placement, footprint_bytes, placement
from .schedule import LayerPlan, LayerSchedule, schedule
from .totals import RESOURCES, totals


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


__all__ = ["GRANULE_RULES", "LayerPlan", "LayerSchedule", "LayerTraffic", "OpCosts", "Placement", "RESOURCES",
           "SimParams", "SimResult", "StepInputs", "e2e_coin", "footprint_bytes", "memory_footprint_gb", "placement",
           "schedule", "simulate", "simulate_measured", "step_inputs", "step_latency_ms", "totals"]
