"""What every simulator method model shares: :class:`SimMethod`, the prediction work it returns
(:class:`PredWork`), the transfer-granularity rule and the DRE cycle models.

A method model answers, for one stage of one step, the questions the simulator asks (docs/PERF_MODEL.md):

* ``predictor(stage)`` -- the name of the selection it runs ('none': it does not select, so every offloaded token
  is fetched, or none if it evicts);
* ``prediction_work(stage, ...)`` -- the KV-prediction ops (GPU kernels, or LXE ops + DRE cycles on V-Rex);
* ``ratio_key`` / ``evicts`` -- whose selected shares of the on-device and of the offloaded candidates the Workload
  holds (the simulator's input stage looks them up; a model never reads the Workload);
* ``layout`` -- how its offloaded KV is laid out ('all', 'token', 'block' = one frame, 'cluster' = one hash cluster
  contiguous, the KVMU's reordering, §V.C) and so how many bytes a selected run spans;
* ``metadata_bytes(...)`` -- what its predictor keeps resident in device DRAM besides the KV (partial keys, block
  means, the HC table);
* ``on_system(system)`` -- the model as it runs on that system (ReSV's clusters stay in token order on a GPU).

Offloaded-KV layout (our assumption, stated in every output): per (layer, KV head), K and V each stored
token-major, so one token of one head is a ``head_dim × 2 B = 256 B`` chunk. A method fetches runs of
``run_tokens`` contiguous chunks: 1 for token-level selection (InfiniGen/P, ReSV without KVMU), one frame (10
tokens) for ReKV, one hash cluster for ReSV with KVMU (cluster-contiguous, §V.C), everything for FlexGen. The
offload tier moves whole granules (NVMe 4 KiB pages; host DRAM 64 B lines); see :func:`moved_fraction`.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from ...config import VRexCoreConfig
from ...hw import timing
from ..model_ops import LLMSpec, Op

Layout = Literal["all", "token", "block", "cluster"]


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


@dataclass(frozen=True)
class PredContext:
    """What a method's prediction of one layer depends on (per stream unless stated).

    n_new: new tokens of the step; n_cand: candidate tokens; engine: 'gpu' (kernels) or 'dre' (V-Rex's HCU/WTU);
    p: the SimParams; tokens_per_frame / tokens_per_cluster / wics_exit_frac: from the Workload; n_cores / core:
    V-Rex's cores (the DRE path)."""

    llm: LLMSpec
    batch: int
    n_new: int
    n_cand: float
    engine: str
    p: object
    tokens_per_frame: int
    tokens_per_cluster: float
    wics_exit_frac: float
    n_cores: int = 0
    core: VRexCoreConfig | None = None


@dataclass(frozen=True)
class SimMethod:
    """One method as the simulator models it; subclasses (one module each) override what differs.

    name: the simulator name (``vrex_lib.methods.Method.sim``); layout: :data:`Layout`; offload: whether the
    method offloads KV beyond the KVMU capacity at all; kv_bits: bits per stored KV element; ratio_key: the
    method whose selected fractions the Workload holds (None: it does not select); evicts: offloaded tokens are
    dropped, never fetched or attended (a sink + window cache); vrex_only: an ablation with no GPU mapping.
    """

    name: str
    layout: Layout = "all"
    offload: bool = True
    kv_bits: int = 16
    ratio_key: str | None = None
    evicts: bool = False
    vrex_only: bool = False

    def predictor(self, stage: str) -> str:
        """Name of the selection this stage runs; 'none' = no selection."""
        return "none"

    def selects(self, stage: str) -> bool:
        return self.predictor(stage) != "none"

    def engine(self, system_kind: str, stage: str) -> str:
        """'dre' when V-Rex's HCU/WTU run this stage's prediction, else 'gpu' (kernels on the main engine)."""
        return "gpu"

    def on_system(self, system_kind: str) -> "SimMethod":
        """The model as it runs on a system of ``system_kind`` ('vrex' or a GPU); an error where it cannot run."""
        if self.vrex_only and system_kind != "vrex":
            raise ValueError(f"{self.name} is a V-Rex-only ablation (the KVPU without the KVMU, Fig. 16); on a GPU use "
                             f"method {self.ratio_key or 'resv'!r}")
        return self

    def replace(self, **changes) -> "SimMethod":
        return dataclasses.replace(self, **changes)

    def prediction_work(self, stage: str, ctx: PredContext) -> PredWork:
        return PredWork([])

    def metadata_bytes(self, llm: LLMSpec, p, kv_len: int, batch: int, tokens_per_frame: int,
                       tokens_per_cluster: float) -> float:
        """Device DRAM the predictor keeps resident besides the KV (none by default)."""
        return 0.0

    def fallback_selection(self, stage: str, kv_len: int) -> tuple[float, str] | None:
        """(selected share, how it was derived) for a method the workload holds no fraction of (looked up under
        its own name when ``ratio_key`` is None); None: the workload must hold one."""
        return None

    def cluster_tokens(self, tokens_per_cluster: float) -> float:
        """Tokens per cluster as this method clusters (the workload's measured value unless the method caps it)."""
        return tokens_per_cluster

    def keys_resident(self, p) -> bool:
        """True when the method keeps every key (full head_dim) in device DRAM for its scoring, so it fetches only V."""
        return False

    def fetches_all_keys(self, p) -> bool:
        """True when the method scores every offloaded key and so fetches all of them each step (sequentially),
        then only the selected tokens' values (Fig. 19's per-token WiCSum)."""
        return False


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


def run_tokens(method: SimMethod, tokens_per_frame: int, tokens_per_cluster: float) -> float:
    """Contiguous tokens per selected run in the method's offloaded layout."""
    return {"all": math.inf, "token": 1.0, "block": float(tokens_per_frame), "cluster": float(tokens_per_cluster)}[
        method.layout]


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
