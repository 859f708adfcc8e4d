"""Step 2: placement -- tokens per tier, selected tokens, granule-amplified fetch bytes and NVMe commands per layer
(dense layers read and fetch everything), reuse of the previous step's retrieved KV, memory footprint."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import link as _link
from ..methods import SimMethod, moved_fraction, run_tokens
from ..model_ops import LLMSpec
from .inputs import StepInputs
from .params import SECTOR_BYTES, SimParams


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
    elif layout == "token" and i.p.token_fetch_rule != "independent":
        # D421: the 512-B LBA format's commands, or the selected tokens packed into whole blocks
        cmd = (_link.command_bytes(layout, run_bytes, chunk_bytes, SECTOR_BYTES)
               if i.p.token_fetch_rule == "sector" else g)
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
    measured = i.fetch_blocks
    if measured is not None:
        return min(1.0, i.r_off * measured * g / chunk_bytes), f"measured blocks per token ({layout} layout)"
    if spec.layout == "token" and i.p.token_fetch_rule != "independent":  # D421
        if i.p.token_fetch_rule == "selected":
            return i.r_off, "selected-only rule"
        return moved_fraction(i.r_off, run_bytes, chunk_bytes, SECTOR_BYTES), "independent rule, 512-B sectors"
    rule = i.p.granule_rule if layout == "cluster" else "independent"
    if rule == "extent":
        return min(1.0, i.r_off * g * math.ceil(run_bytes / g) / run_bytes), "extent rule"
    return moved_fraction(i.r_off, run_bytes, chunk_bytes, i.sys.offload_granule, aligned=rule == "packed"), \
        f"{rule} rule"


def placement(i: StepInputs) -> Placement:
    p, spec, sys, llm, B = i.p, i.spec, i.sys, i.llm, i.batch
    offload = i.offload
    on_dev = i.kv_len if not offload else min(i.kv_len, p.recent_capacity)
    off = i.kv_len - on_dev
    window = p.recent_window if p.recent_window is not None else i.tokens_per_frame
    always = min(i.kv_len, window)
    n_cand = i.kv_len - always
    cand_dev = max(0, on_dev - always)
    sel_dev, sel_off = i.r_dev * cand_dev, i.r_off * off
    kvb = llm.kv_bytes_per_token_layer
    chunk_bytes = llm.head_dim * spec.kv_bits / 8
    run_bytes = min(run_tokens(spec, i.tokens_per_frame, i.tokens_per_cluster) * chunk_bytes,
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
    mem_base = (footprint_bytes(llm, p, spec, i.kv_len, B, offload, i.tokens_per_frame, i.tokens_per_cluster)
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



def footprint_bytes(llm: LLMSpec, p: SimParams, spec: SimMethod, kv_len: int, batch: int, offload: bool,
                    tokens_per_frame: int, tokens_per_cluster: float) -> float:
    """Accelerator DRAM in use: weights (LLM + vision) + on-device KV + the predictor's resident metadata."""
    on_dev = kv_len if not offload else min(kv_len, p.recent_capacity)
    kv = batch * on_dev * llm.kv_bytes_per_token
    meta = spec.metadata_bytes(llm, p, kv_len, batch, tokens_per_frame, tokens_per_cluster)
    return llm.weight_bytes + p.vision.weight_bytes + kv + meta

