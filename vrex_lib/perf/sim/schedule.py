"""Step 3: the per-layer event schedule of one step (main engine, DRE, PCIe; docs/PERF_MODEL.md)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import link as _link
from ..constants import const
from ..methods import PredContext, PredWork
from ..model_ops import Op, decoder_layer_ops, lm_head_op, vision_op
from .costs import OpCosts
from .inputs import StepInputs
from .placement import LayerTraffic, Placement


@dataclass
class LayerPlan:
    """One class of layers (dense or sparse): its ops and their times, and its fetch time."""

    ops: list
    op_s: list
    limits: list
    fetch_s: float
    traffic: LayerTraffic
    dram: list = field(default_factory=list)
    host_copy_s: float = 0.0
    copy_after_fetch: bool = False


@dataclass
class LayerSchedule:
    total_s: float
    stall_s: float
    vision_s: float
    pred_main_s: float
    dre_s: float
    dense: LayerPlan
    sparse: LayerPlan
    pred: PredWork
    timeline: list
    costs: OpCosts


def _layer_plan(i: StepInputs, tr: LayerTraffic, costs: OpCosts, write_bytes: float) -> LayerPlan:
    llm, B = i.llm, i.batch
    ops = decoder_layer_ops(llm, i.n_new, B, tr.attended, n_selected=tr.sel_dev, sel_run_bytes=tr.sel_run_bytes)
    ops[1].dma_bytes, ops[1].dma_run_bytes = tr.fetch_bytes, tr.dma_run_bytes  # lands before attention
    ops[1].kv_write_bytes = write_bytes  # the oldest tokens read out for the offload tier
    sys = i.sys
    relay = bool(sys.unified_memory and sys.staging_copies and tr.fetch_bytes)
    if relay and i.p.relay_copy_engine == "gpu":
        # FlexGen's host copies of each fetched byte (read + write per copy) share the GPU's LPDDR5 (D429's upper end).
        n = sys.staging_copies * tr.fetch_bytes
        ops.append(Op("staging", "staging", 0.0, act_bytes=n, kv_write_bytes=n, kernels=0, host_ops=0))
    times = [costs.time(o) for o in ops]
    ssd = sys.offload_store if sys.offload_tier == "ssd" else None
    fetch_s = _link.fetch_time_s(tr.fetch_bytes, tr.fetch_commands, link_bytes_s=sys.pcie, ssd=ssd is not None,
                                 queue_depth=i.queue_depth, read_iops=ssd.read_iops if ssd else None,
                                 read_latency_s=ssd.read_latency_s if ssd else None)
    # FlexGen's pinned-buffer relay in host DRAM (server): each fetched byte is copied before its DMA can start.
    copy_s = (sys.staging_copies * tr.fetch_bytes / sys.host_copy_bytes_s
              if sys.staging_copies and not sys.unified_memory and sys.kind != "vrex" and tr.fetch_bytes else 0.0)
    if relay and i.p.relay_copy_engine == "cpu_ce":
        # FlexGen's copy worker after the SSD read lands: the CPU copies page cache -> pinned buffer, the copy engine
        # pinned buffer -> GPU tensor; each reads and writes every byte of the LPDDR5 at its long-stream rate (D429).
        copy_s = sys.staging_copies * tr.fetch_bytes * 2 / costs.long_rate
    return LayerPlan(ops, [t for t, _ in times], [lim for _, lim in times], fetch_s, tr, [o.dram_bytes for o in ops],
                     copy_s, copy_after_fetch=relay)


class _Timeline:
    """The main engine's clock ``t``, the PCIe engine's free time and the phase rows (start/end in seconds)."""

    def __init__(self) -> None:
        self.t = 0.0
        self.pcie_free = 0.0
        self.host_free = 0.0
        self.fetch_done: dict[int, float] = {}
        self.rows: list[tuple] = []

    def add(self, layer: int, phase: str, engine: str, start: float, end: float, dram: float = 0.0,
            pcie: float = 0.0) -> None:
        self.rows.append((layer, phase, engine, start * 1e6, end * 1e6, dram, pcie))

    def run(self, layer: int, phase: str, dt: float, dram: float = 0.0) -> None:
        self.rows.append((layer, phase, "main", self.t * 1e6, (self.t + dt) * 1e6, dram, 0.0))
        self.t += dt

    def fetch(self, layer: int, ready_s: float, plan: LayerPlan) -> None:
        """The link moves ``plan``'s fetch once its selection is known (``ready_s``) and the link is free; a host relay
        copy (``host_copy_s``) runs on the host memory first, pipelined over layers."""
        if plan.fetch_s <= 0:
            self.fetch_done[layer] = ready_s
            return
        if plan.host_copy_s > 0 and plan.copy_after_fetch:
            self._fetch_then_copy(layer, ready_s, plan)
            return
        if plan.host_copy_s > 0:
            c0 = max(self.host_free, ready_s)
            self.host_free = c0 + plan.host_copy_s
            self.add(layer, "host_copy", "host", c0, self.host_free)
            ready_s = self.host_free
        start = max(self.pcie_free, ready_s)
        self.pcie_free = start + plan.fetch_s
        self.fetch_done[layer] = self.pcie_free
        b = plan.traffic.fetch_bytes
        self.add(layer, "kv_fetch", "pcie", start, self.pcie_free, b, b)


    def _fetch_then_copy(self, layer: int, ready_s: float, plan: LayerPlan) -> None:
        """A unified-memory relay (D429 'cpu_ce'): the link reads into host pages, then the CPU and copy engine copy
        them on (engine 'host'), pipelined over layers; attention waits for the copy."""
        start = max(self.pcie_free, ready_s)
        self.pcie_free = start + plan.fetch_s
        b = plan.traffic.fetch_bytes
        self.add(layer, "kv_fetch", "pcie", start, self.pcie_free, b, b)
        c0 = max(self.host_free, self.pcie_free)
        self.host_free = c0 + plan.host_copy_s
        self.add(layer, "host_copy", "host", c0, self.host_free)
        self.fetch_done[layer] = self.host_free


def schedule(i: StepInputs, pl: Placement) -> LayerSchedule:
    sys, p, L = i.sys, i.p, i.llm.n_layers
    costs = OpCosts(sys, p.decode_dram_eff)
    dense = _layer_plan(i, pl.dense, costs, pl.offload_write_bytes_per_layer)
    sparse = _layer_plan(i, pl.sparse, costs, pl.offload_write_bytes_per_layer)
    pred = i.spec.prediction_work(i.stage, PredContext(
        i.llm, i.batch, i.n_new, pl.cand_tokens, i.engine, p, tokens_per_frame=i.tokens_per_frame,
        tokens_per_cluster=i.tokens_per_cluster, wics_exit_frac=i.wics_exit_frac, n_cores=sys.n_cores, core=sys.core))
    pred_main_s = sum(costs.seconds(o) for o in pred.ops)
    dre_s = (pred.hcu_cycles + pred.wtu_cycles) / sys.freq_hz if i.engine == "dre" else 0.0
    predicted = lambda ell: i.spec.selects(i.stage) and ell >= pl.n_dense  # noqa: E731
    tl = _Timeline()
    vision_s = 0.0
    if i.stage == "frame" and p.include_vision:
        vop = vision_op(p.vision, i.batch)
        vision_s = costs.seconds(vop)
        tl.run(-1, "vision_mlp", vision_s, vop.dram_bytes)

    pred_dram = sum(o.dram_bytes for o in pred.ops)

    def run_pred(target: int) -> float:
        """Prediction for layer ``target`` on the main engine (+ DRE); returns when its selection is known."""
        tl.run(target, "kv_prediction", pred_main_s, pred_dram)
        if dre_s > 0:
            tl.add(target, "kv_prediction_dre", "dre", tl.t, tl.t + dre_s)
        return tl.t + dre_s

    if p.prefetch and not predicted(0):
        tl.fetch(0, 0.0, dense if pl.n_dense else sparse)  # nothing to predict: streams in during the vision tower
    stall_s = 0.0
    for ell in range(L):
        plan, layer_start = (dense if ell < pl.n_dense else sparse), tl.t
        tl.run(ell, "qkv", plan.op_s[0], plan.dram[0])
        if ell not in tl.fetch_done:
            tl.fetch(ell, run_pred(ell) if predicted(ell) else layer_start, plan)
        if p.prefetch and ell + 1 < L:
            nxt = dense if ell + 1 < pl.n_dense else sparse
            tl.fetch(ell + 1, run_pred(ell + 1) if predicted(ell + 1) else layer_start, nxt)
        wait = max(tl.t, tl.fetch_done.get(ell, tl.t))
        if wait > tl.t:
            stall_s += wait - tl.t
            tl.add(ell, "stall", "main", tl.t, wait)
            tl.t = wait
        for k in range(1, len(plan.ops)):
            tl.run(ell, plan.ops[k].name, plan.op_s[k], plan.dram[k])
    head = lm_head_op(i.llm, i.batch, int(const("stack.eager_ops_fixed")))
    tl.run(L, "lm_head", costs.seconds(head), head.dram_bytes)
    return LayerSchedule(tl.t, stall_s, vision_s, pred_main_s, dre_s, dense, sparse, pred, tl.rows, costs)

