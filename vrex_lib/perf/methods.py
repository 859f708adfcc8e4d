"""The KV-retrieval methods as the simulator sees them: what KV prediction costs, where it runs, what it reads,
what it fetches over PCIe and in which layout.

Methods (paper §VI.A): ``flexgen`` (fetch all offloaded KV), ``infinigen`` (speculative partial-key scoring,
text generation only), ``infinigen_p`` (the authors' prefill extension: full-key Q·K^T over all keys + top-k on
the GPU during frame prefill), ``rekv`` (frame-block mean-key scoring), ``resv`` (hash + HCU clustering +
Q·K_cluster^T + WiCSum; on V-Rex the HCU/WTU run it, on a GPU kernels do). Ablations for Fig. 16:
``resv`` on ``agx_orin`` = GPU+ReSV; ``resv_kvpu`` on V-Rex = KVPU without KVMU (clusters scattered in token
order); ``resv`` on V-Rex = all. ``oaken`` = no offload, 4-bit KV (Fig. 15); ``full`` = no offload, no selection.

Offloaded-KV layout (our assumption, stated in every output): per (layer, KV head), K and V each stored
token-major, so one token of one head is a ``head_dim × 2 B = 256 B`` chunk. A method fetches runs of
``run_tokens`` contiguous chunks: 1 for token-level selection (InfiniGen/P, ReSV without KVMU), one frame
(10 tokens) for ReKV, one hash cluster for ReSV with KVMU (cluster-contiguous, §V.C), everything for FlexGen.
The offload tier moves whole granules (NVMe 4 KiB pages; host DRAM 64 B lines); see :func:`moved_fraction`.
InfiniGenP keeps every key in device DRAM for its full-key scoring, so it fetches only the selected V (:func:`vrex_lib.perf.sim.keys_resident`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .. import paper
from .workload import BF16, LLMSpec, Op

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
    ratio_key: str | None = None  # method name in Table II / notebook 03's csv

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
# Retrieval ratios: notebook 03's measurement when present, else Table II (labelled).

def load_ratios(path: str | Path | None = None) -> tuple[dict[tuple[str, str], float], str]:
    """{(method, stage): ratio in [0, 1]} and a label saying where they come from.

    ``path`` (default ``<results>/data/retrieval_ratios.csv``, columns method, task, stage, retrieval_ratio,
    profile; ratio as a fraction or percent) is averaged over tasks; methods it lacks fall back to Table II.
    """
    from ..config import results_dir

    out: dict[tuple[str, str], float] = {}
    for m in ("infinigen", "infinigen_p", "rekv", "resv"):
        for st in ("frame", "text"):
            out[(m, st)] = paper.value(f"table2.ratio.{m}.{st}.avg") / 100.0
    label = "Table II averages (paper)"
    p = Path(path) if path else results_dir() / "data" / "retrieval_ratios.csv"
    if p.exists():
        import pandas as pd

        df = pd.read_csv(p)
        need = {"method", "stage", "retrieval_ratio"}
        if not need <= set(df.columns):
            raise ValueError(f"{p}: needs columns {sorted(need)}; rerun notebook 03")
        g = df.groupby(["method", "stage"])["retrieval_ratio"].mean()
        measured = []
        for (m, st), v in g.items():
            if (m, st) in out:
                out[(m, st)] = float(v) / (100.0 if v > 1.0 else 1.0)
                measured.append(f"{m}/{st}")
        if measured:
            prof = ",".join(sorted(str(x) for x in df.get("profile", pd.Series(["?"])).unique()))
            label = (f"measured by notebook 03 ({p.name}, profile {prof}) for {len(measured)} method-stages; "
                     "rest Table II")
    return out, label


def stage_ratio(spec: MethodSpec, stage: str, ratios: dict[tuple[str, str], float]) -> float:
    """Fraction of candidate tokens a method attends/fetches in this stage (1.0 when it does not select)."""
    if spec.predictor(stage) == "none":
        return 1.0
    key = (spec.ratio_key, stage)
    if key not in ratios:
        raise KeyError(f"no retrieval ratio for {key}; pass ratios={{('{spec.ratio_key}', '{stage}'): r}}")
    r = float(ratios[key])
    if not 0.0 <= r <= 1.0:
        raise ValueError(f"retrieval ratio {key}={r} must be in [0, 1]")
    return r


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
# DRE timing: vrex_lib.hw.timing when the hardware helper's module exists, else a marked placeholder.

def _placeholder_hcu_cycles(n_tokens: int, n_clusters: int, n_hcu_w: int = 16) -> int:
    """PLACEHOLDER until ``vrex_lib.hw.timing`` exists, following the HCU's documented schedule (hw/hcu.py): token
    t scans max(1, ceil(n_t / N_HCU-w)) rows of cluster codes and decides in the last one; +1 cycle DONE."""
    return int(n_tokens * max(1, math.ceil(n_clusters / n_hcu_w)) + 1)


def _placeholder_wtu_cycles(n_rows: int, n_clusters: int, n_wtu_w: int = 16, scans: int = 2) -> int:
    """PLACEHOLDER following the WTU's documented schedule (hw/wtu.py): per row 1 + G (PRE) + 1 (TH) + scans·G
    (bucket walk) + G (resolve, upper bound) + G (MARK) + 1, G = ceil(n / N_WTU-w); ``scans`` bucket scans."""
    g = math.ceil(max(n_clusters, 1) / n_wtu_w)
    return int(n_rows * (3 + (scans + 3) * g))


def _call_by_names(fn, values: dict):
    """Call ``fn`` mapping its parameter names onto our quantities (tokens / clusters / rows / config)."""
    import inspect

    kwargs = {}
    for name, prm in inspect.signature(fn).parameters.items():
        low = name.lower()
        if "tok" in low:
            kwargs[name] = values["tokens"]
        elif "row" in low:
            kwargs[name] = values["rows"]
        elif "cl" in low or low in ("n", "n_entries"):
            kwargs[name] = values["clusters"]
        elif low in ("cfg", "core", "config"):
            kwargs[name] = values["core"]
        elif prm.default is inspect.Parameter.empty:
            raise TypeError(f"cannot map parameter {name!r} of {fn.__name__}")
    return fn(**kwargs)


def dre_cycles(n_tokens: int, n_clusters_recent: int, n_rows: int, n_clusters: int, core) -> tuple[int, int, str]:
    """(HCU cycles, WTU cycles, source) for one layer's work on one core's DRE: the hardware helper's
    ``vrex_lib.hw.timing.hcu_cycles / wtu_cycles`` when present, else the placeholders above."""
    try:
        from ..hw import timing  # type: ignore[attr-defined]

        hcu = int(_call_by_names(timing.hcu_cycles,
                                 dict(tokens=n_tokens, clusters=n_clusters_recent, rows=1, core=core)))
        wtu = int(_call_by_names(timing.wtu_cycles, dict(tokens=0, clusters=n_clusters, rows=n_rows, core=core)))
        return hcu, wtu, "vrex_lib.hw.timing"
    except (ImportError, AttributeError, TypeError, ValueError):
        return (_placeholder_hcu_cycles(n_tokens, n_clusters_recent, core.n_hcu_w),
                _placeholder_wtu_cycles(n_rows, n_clusters, core.n_wtu_w), "placeholder (hw.timing absent)")


# ---------------------------------------------------------------------------------------------------------------
# Prediction work per layer.

@dataclass
class PredWork:
    """KV-prediction work of one layer for one batched step.

    ops: on the main engine (GPU kernels, or the LXE's hash generation and Q·K_cluster^T);
    hcu_cycles / wtu_cycles: on the DRE (V-Rex only; run concurrently with the LXE); counts for energy.
    resident_bytes_per_token: GPU/accelerator DRAM the predictor keeps per cached token per layer.
    """

    ops: list[Op]
    hcu_cycles: int = 0
    wtu_cycles: int = 0
    dre_source: str = ""
    hcu_compares: float = 0.0
    wtu_elems: float = 0.0


def prediction_work(pred: Predictor, llm: LLMSpec, batch: int, n_new: int, n_cand: float, engine: str,
                    p) -> PredWork:
    """Work to pick layer ℓ's tokens among ``n_cand`` candidates per stream (``p``: SimParams).

    engine 'gpu' runs everything as kernels; 'dre' puts clustering and WiCSum on the HCU/WTU.
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
        blocks = n_cand / p.tokens_per_frame
        score = Op("pred_score", "pred", 2.0 * rows_q * D * blocks, kv_bytes=B * blocks * Hkv * D * BF16,
                   act_bytes=rows_q * blocks * 4, kernels=1)
        topk = Op("pred_topk", "pred", 0.0, act_bytes=(1 + p.topk_passes) * B * Hkv * blocks * 4,
                  kernels=1 + p.topk_passes)
        return PredWork([score, topk])
    if pred != "resv":
        raise ValueError(f"unknown predictor {pred!r}")
    C = n_cand / p.tokens_per_cluster  # clusters per (stream, KV head)
    C_recent = max(1.0, min(n_cand, p.recent_capacity) / p.tokens_per_cluster)
    hashg = Op("pred_hash", "pred", 2.0 * B * N * Hkv * D * p.n_hp, act_bytes=B * N * Hkv * (D * BF16 + p.n_hp / 8),
               weight_bytes=p.n_hp * D * BF16, kernels=1)
    score = Op("pred_score", "pred", 2.0 * rows_q * D * C, kv_bytes=B * C * Hkv * (D * BF16 + 4 + 2),
               act_bytes=rows_q * C * (4 if engine == "gpu" else BF16), kernels=1)
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
    units = max(1, p.n_cores)
    per_unit_tokens = math.ceil(B * Hkv * N / units)
    per_unit_rows = math.ceil(rows_q / units)
    hcu, wtu, src = dre_cycles(per_unit_tokens, int(round(C_recent)), per_unit_rows, int(math.ceil(C)), p.core)
    return PredWork([hashg, score, hcmap], hcu_cycles=hcu, wtu_cycles=wtu, dre_source=src,
                    hcu_compares=compares, wtu_elems=rows_q * C * (1 + p.wics_exit_frac))


def ratio_growth_exponent(traces, method_stage: str = "frame") -> dict:
    """Fit how the number of selected tokens grows with the candidate count in runtime traces
    (``vrex_lib.runtime.trace.RetrievalTrace``): log(selected) = a + exponent · log(candidates), least squares
    over the steps of ``method_stage`` where the policy was applied. Exponent 1 = constant ratio.

    Returns dict(exponent, n_steps, cand_min, cand_max); exponent NaN if fewer than 3 usable steps or the
    candidate counts span less than a factor 2 (too short a range to extrapolate from).
    """
    import numpy as np

    xs, ys = [], []
    for tr in traces:
        m = tr.step_mask(method_stage)
        sel = tr.arrays["selected"][m].astype(float)  # [n, L, H]
        app = tr.arrays["applied"][m]  # [n, L]
        cand = tr.arrays["n_candidates"][m].astype(float)
        for i in range(sel.shape[0]):
            if cand[i] <= 0 or not app[i].any():
                continue
            s = sel[i][app[i]].mean()
            if s > 0:
                xs.append(np.log(cand[i]))
                ys.append(np.log(s))
    out = dict(exponent=float("nan"), n_steps=len(xs), cand_min=float("nan"), cand_max=float("nan"))
    if len(xs) >= 3:
        x, y = np.asarray(xs), np.asarray(ys)
        out.update(cand_min=float(np.exp(x.min())), cand_max=float(np.exp(x.max())))
        if x.max() - x.min() >= np.log(2):
            out["exponent"] = float(np.polyfit(x, y, 1)[0])
    return out
