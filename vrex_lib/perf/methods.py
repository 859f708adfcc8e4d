"""The KV-retrieval methods as the simulator sees them: what KV prediction costs, where it runs, what it reads,
what it fetches over PCIe and in which layout.

Methods (paper §VI.A), each as the software runs on its GPU (docs/DECISIONS.md D22):

* ``flexgen`` -- FlexGen's KV placement (Sheng et al., ICML 2023, §4): the KV cache is split between GPU memory
  and the offload tier; per layer the offloaded part is streamed to the GPU, overlapped with the previous layer's
  compute (FlexGen's block schedule), and attention runs on the GPU over all of it. The GPU share is the newest
  ``recent_capacity`` tokens (the same capacity every method gets). FlexGen's CPU delegation of attention needs
  the KV in host DRAM next to a host CPU; on the edge the KV is on an SSD, so it does not apply there, and it is
  not modelled on the server either (stated in docs/PERF_MODEL.md).
* ``infinigen`` -- speculative partial-key scoring (InfiniGen, OSDI 2024): a partial query projection and a
  partial Q·K^T over a resident copy of the partial keys, softmax/aggregation kernels and a radix top-k,
  then a fetch of the selected tokens; text generation only (frame prefill fetches everything).
* ``infinigen_p`` -- the V-Rex authors' prefill extension: full-key Q·K^T over every key + top-k on the GPU
  during frame prefill.
* ``rekv`` -- ReKV's frame-block mean-key scoring and top-k of blocks, fetching whole frames.
* ``resv`` -- hash + HCU clustering + Q·K_cluster^T + WiCSum; on V-Rex the HCU/WTU run it, on a GPU kernels do.

Each GPU kernel pays the device's launch overhead (:mod:`vrex_lib.perf.constants`). Ablations for Fig. 16:
``resv`` on ``agx_orin`` = GPU+ReSV; ``resv_kvpu`` on V-Rex = KVPU without KVMU (clusters scattered in token
order); ``resv`` on V-Rex = all. ``oaken`` = no offload, 4-bit KV (Fig. 15); ``full`` = no offload, no selection.

Offloaded-KV layout (our assumption, stated in every output): per (layer, KV head), K and V each stored
token-major, so one token of one head is a ``head_dim × 2 B = 256 B`` chunk. A method fetches runs of
``run_tokens`` contiguous chunks: 1 for token-level selection (InfiniGen/P, ReSV without KVMU), one frame
(10 tokens) for ReKV, one hash cluster for ReSV with KVMU (cluster-contiguous, §V.C), everything for FlexGen.
The offload tier moves whole granules (NVMe 4 KiB pages; host DRAM 64 B lines); see :func:`moved_fraction`.
InfiniGenP keeps every key in device DRAM for its full-key scoring, so it fetches only the selected V
(:func:`vrex_lib.perf.sim.keys_resident`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..config import VRexCoreConfig
from ..hw import timing
from .model_ops import BF16, Gemm, LLMSpec, Op

Predictor = Literal["none", "partial_key", "full_key", "block_mean", "resv"]


@dataclass(frozen=True)
class MethodSpec:
    """How one method behaves per stage. ``predictor[stage]`` 'none' = no selection (fetch all offloaded)."""

    name: str
    frame_predictor: Predictor
    text_predictor: Predictor
    layout: Literal["all", "token", "block", "cluster"]
    offload: bool = True
    kv_bits: int = 16
    ratio_key: str | None = None  # method whose selected fraction the Workload holds

    def predictor(self, stage: str) -> Predictor:
        return self.frame_predictor if stage == "frame" else self.text_predictor


METHODS: dict[str, MethodSpec] = {
    "flexgen": MethodSpec("flexgen", "none", "none", "all", ratio_key=None),
    "infinigen": MethodSpec("infinigen", "none", "partial_key", "token", ratio_key="infinigen"),
    "infinigen_p": MethodSpec("infinigen_p", "full_key", "partial_key", "token", ratio_key="infinigen_p"),
    "rekv": MethodSpec("rekv", "block_mean", "block_mean", "block", ratio_key="rekv"),
    "resv": MethodSpec("resv", "resv", "resv", "cluster", ratio_key="resv"),
    "resv_kvpu": MethodSpec("resv_kvpu", "resv", "resv", "token", ratio_key="resv"),
    "oaken": MethodSpec("oaken", "none", "none", "all", offload=False, kv_bits=4),
    "full": MethodSpec("full", "none", "none", "all", offload=False),
}


def get_method(method: str | MethodSpec) -> MethodSpec:
    if isinstance(method, MethodSpec):
        return method
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: choose one of {', '.join(METHODS)}")
    return METHODS[method]


# ---------------------------------------------------------------------------------------------------------------
# Transfer granularity.

def moved_fraction(ratio: float, run_bytes: float, chunk_bytes: float, granule: float, aligned: bool = False) -> float:
    """Fraction of the offloaded region the tier actually moves when ``ratio`` of it is selected in runs of
    ``run_bytes`` (aligned to ``chunk_bytes``) and the tier moves whole ``granule`` s.

    A run of b bytes spans on average 1 + (b - c)/g granules (c = alignment); treating runs as independent,
    a granule is untouched with probability (1 - ratio)^((g + b - c)/b). Limits: ratio 1 -> 1; g <= c -> ratio
    (no amplification); token-level selection on 4 KiB pages -> 1 - (1 - ratio)^16. ``aligned`` runs (the
    KVMU places each cluster at a granule boundary) span b/g + 1/2 granules on average instead.
    """
    if ratio <= 0:
        return 0.0
    if ratio >= 1:
        return 1.0
    g = max(granule, chunk_bytes)
    span = run_bytes + g / 2 if aligned else g + run_bytes - chunk_bytes
    expo = span / run_bytes
    return min(1.0, 1.0 - (1.0 - ratio) ** expo)


def run_tokens(spec: MethodSpec, tokens_per_frame: int, tokens_per_cluster: float) -> float:
    return {"all": math.inf, "token": 1.0, "block": float(tokens_per_frame), "cluster": float(tokens_per_cluster)}[
        spec.layout]


# ---------------------------------------------------------------------------------------------------------------
# DRE timing: vrex_lib.hw.timing, the cycle models equal to the MyHDL blocks' cycle counts.

def dre_cycles(n_tokens: int, n_clusters_recent: int, n_opened: int, n_rows: int, n_clusters: int,
               core: VRexCoreConfig) -> tuple[int, int]:
    """(HCU cycles, WTU cycles) for one layer's work on one core's DRE (:mod:`vrex_lib.hw.timing`).

    HCU: ``n_tokens`` new tokens against ``n_clusters_recent`` clusters, ``n_opened`` of them opened during the
    frame (timing's upper bound). WTU: ``n_rows`` query rows of ``n_clusters`` clusters each, the measured mean
    bucket scans and resolve cycles of the hardware model.
    """
    hcu = timing.hcu_cycles(n_new_tokens=n_tokens, n_clusters=n_clusters_recent, cfg=core, n_opened=n_opened)
    wtu = timing.wtu_cycles(n_rows=n_rows, n_clusters=n_clusters, cfg=core)
    return int(hcu), int(wtu)


# ---------------------------------------------------------------------------------------------------------------
# Prediction work per layer.

@dataclass
class PredWork:
    """KV-prediction work of one layer for one batched step.

    ops: on the main engine (GPU kernels, or the LXE's hash generation and Q·K_cluster^T);
    hcu_cycles / wtu_cycles: on the DRE (V-Rex only; run concurrently with the LXE); counts for energy.
    """

    ops: list[Op]
    hcu_cycles: int = 0
    wtu_cycles: int = 0
    hcu_compares: float = 0.0
    wtu_elems: float = 0.0


def prediction_work(pred: Predictor, llm: LLMSpec, batch: int, n_new: int, n_cand: float, engine: str,
                    p, *, tokens_per_frame: int, tokens_per_cluster: float, wics_exit_frac: float,
                    n_cores: int = 0, core: VRexCoreConfig | None = None) -> PredWork:
    """Work to pick layer ℓ's tokens among ``n_cand`` candidates per stream (``p``: SimParams; the ReSV statistics
    and tokens per frame come from the Workload).

    engine 'gpu' runs everything as kernels; 'dre' puts clustering and WiCSum on the HCU/WTU of ``n_cores`` cores.
    """
    if pred == "none" or n_cand <= 0:
        return PredWork([])
    B, N, D = batch, n_new, llm.head_dim
    Hq, Hkv = llm.n_q_heads, llm.n_kv_heads
    rows_q = B * N * Hq
    if pred in ("partial_key", "full_key"):
        f = p.infinigen_partial_frac if pred == "partial_key" else p.infinigen_p_key_frac
        dp = max(1.0, f * D)
        qproj = Op("pred_qproj", "pred", 2.0 * B * N * llm.hidden * Hq * dp,
                   weight_bytes=llm.hidden * Hq * dp * BF16) if pred == "partial_key" else None
        score = Op("pred_score", "pred", 2.0 * rows_q * dp * n_cand,
                   kv_bytes=B * n_cand * Hkv * dp * BF16, act_bytes=rows_q * n_cand * 4, kernels=1)
        # Softmax/aggregate over the query heads of each KV head, then a radix top-k reading the scores
        # ``topk_passes`` times.
        reduce_ = Op("pred_reduce", "pred", 3.0 * rows_q * n_cand, act_bytes=rows_q * n_cand * 4 + B * Hkv * n_cand * 4,
                     kernels=2)
        topk = Op("pred_topk", "pred", 0.0, act_bytes=p.topk_passes * B * Hkv * n_cand * 4, kernels=p.topk_passes)
        return PredWork([o for o in (qproj, score, reduce_, topk) if o is not None])
    if pred == "block_mean":
        blocks = n_cand / tokens_per_frame
        score = Op("pred_score", "pred", 2.0 * rows_q * D * blocks, kv_bytes=B * blocks * Hkv * D * BF16,
                   act_bytes=rows_q * blocks * 4, kernels=1)
        topk = Op("pred_topk", "pred", 0.0, act_bytes=(1 + p.topk_passes) * B * Hkv * blocks * 4,
                  kernels=1 + p.topk_passes)
        return PredWork([score, topk])
    if pred != "resv":
        raise ValueError(f"unknown predictor {pred!r}")
    C = n_cand / tokens_per_cluster  # clusters per (stream, KV head)
    C_recent = max(1.0, min(n_cand, p.recent_capacity) / tokens_per_cluster)
    # On the LXE (DPE): keys [N, D] x hyperplanes [D, N_hp] per KV head; Q [N*group, D] x K_cluster^T [D, C].
    hashg = Op("pred_hash", "pred", 2.0 * B * N * Hkv * D * p.n_hp, act_bytes=B * N * Hkv * (D * BF16 + p.n_hp / 8),
               weight_bytes=p.n_hp * D * BF16, kernels=1, gemms=(Gemm(N, D, p.n_hp, B * Hkv),))
    score = Op("pred_score", "pred", 2.0 * rows_q * D * C, kv_bytes=B * C * Hkv * (D * BF16 + 4 + 2),
               act_bytes=rows_q * C * (4 if engine == "gpu" else BF16), kernels=1,
               gemms=(Gemm(N * llm.group, D, max(1, math.ceil(C)), B * Hkv),))
    # Mapping selected clusters back to token indices through the HC table (4 B per token index).
    hcmap = Op("pred_hcmap", "pred", 0.0, kv_bytes=B * Hkv * n_cand * 4 * 0.5, kernels=1)
    compares = B * N * Hkv * C_recent
    if engine == "gpu":
        # Clustering: tokens join clusters in arrival order (a dependency chain), one kernel per new token.
        clus = Op("pred_cluster", "pred", 2.0 * compares, act_bytes=B * Hkv * N * C_recent * 4 * 2, kernels=N)
        # WiCSum on a GPU: sort each row (radix sort of 32-bit scores + payload: sort_passes read+write
        # passes), cumulative sum, threshold, union over rows.
        wics = Op("pred_wicsum", "pred", 4.0 * rows_q * C, act_bytes=rows_q * C * 8 * (p.sort_passes + 2),
                  kernels=p.sort_passes + 4)
        return PredWork([hashg, clus, score, wics, hcmap])
    # DRE: per core, the layer's (stream, KV head) pairs are spread over the cores' HCU/WTU.
    if core is None or n_cores < 1:
        raise ValueError("prediction on the DRE needs the V-Rex core configuration and core count")
    per_unit_tokens = math.ceil(B * Hkv * N / n_cores)
    per_unit_rows = math.ceil(rows_q / n_cores)
    opened = math.ceil(per_unit_tokens / tokens_per_cluster)
    hcu, wtu = dre_cycles(per_unit_tokens, int(round(C_recent)), opened, per_unit_rows, int(math.ceil(C)), core)
    # WTU elements: one pass over the row's clusters to find min/max and Sum, then the walk up to the early exit.
    return PredWork([hashg, score, hcmap], hcu_cycles=hcu, wtu_cycles=wtu,
                    hcu_compares=compares, wtu_elems=rows_q * C * (1 + wics_exit_frac))
