"""Step 4: totals -- work, traffic, energy, the resource ledger and the :class:`SimResult`."""
from __future__ import annotations

from .. import energy as _energy
from .. import link as _link
from ..constants import const
from ..lxe import vpe_lane_ops
from ..model_ops import lm_head_op, vision_op
from .inputs import StepInputs
from .params import SimResult
from .placement import Placement, footprint_bytes
from .schedule import LayerSchedule


def _link_gaps(rows: list[tuple], total_s: float) -> list[float]:
    """Idle gaps of the PCIe engine over one step, the wrap-around gap (tail + head, steps repeat) included."""
    busy = sorted((r[3] * 1e-6, r[4] * 1e-6) for r in rows if r[2] == "pcie")
    if not busy:
        return [total_s]
    gaps = [max(0.0, b[0] - a[1]) for a, b in zip(busy, busy[1:])]
    return gaps + [max(0.0, total_s - busy[-1][1]) + busy[0][0]]


def _work(i: StepInputs, pl: Placement, sc: LayerSchedule) -> dict:
    """FLOPs, DRAM bytes, VPE lane-ops and time by limiter over the whole step."""
    L, nd = i.llm.n_layers, pl.n_dense
    n_pred = (L - nd) if i.spec.selects(i.stage) else 0
    head = lm_head_op(i.llm, i.batch, int(const("stack.eager_ops_fixed")))  # as the schedule runs it
    vop = vision_op(i.p.vision, i.batch) if i.stage == "frame" and i.p.include_vision else None
    plans = ((sc.dense, nd), (sc.sparse, L - nd))
    w = dict(llm_flops=sum(n * sum(o.flops for o in pl_.ops) for pl_, n in plans) + head.flops,
             vis_flops=vop.flops if vop else 0.0, pred_flops=n_pred * sum(o.flops for o in sc.pred.ops),
             vector_flops=sum(n * sum(o.flops for o in pl_.ops if o.kind == "vector") for pl_, n in plans),
             dram_vis=vop.dram_bytes if vop else 0.0, n_pred=n_pred,
             lane_ops=sum(n * sum(vpe_lane_ops(o.vpe) for o in pl_.ops) for pl_, n in plans)
             + (vpe_lane_ops(vop.vpe) if vop else 0.0),
             llm_s=sum(n * sum(pl_.op_s) for pl_, n in plans) + sc.costs.seconds(head))
    w["dram"] = (sum(n * sum(o.dram_bytes for o in pl_.ops) for pl_, n in plans) + head.dram_bytes
                 + n_pred * sum(o.dram_bytes for o in sc.pred.ops) + w["dram_vis"])
    limits: dict[str, float] = {}
    for pl_, n in plans:
        for dt, lim in zip(pl_.op_s, pl_.limits):
            limits[lim] = limits.get(lim, 0.0) + n * dt * 1e3
    w["limits_ms"] = limits
    ops = [(o, n) for pl_, n in plans for o in pl_.ops] + [(head, 1)] + [(o, n_pred) for o in sc.pred.ops]
    ops += [(vop, 1)] if vop else []
    parts = [(sc.costs.parts(o), n) for o, n in ops]
    w["dram_s"], w["kernel_s"], w["host_s"] = (sum(n * p_[k] for p_, n in parts) for k in (2, 3, 4))
    return w


#: The resources a step occupies: the accelerator's compute (V-Rex cores + DRE, or the GPU board), its DRAM, the
#: GPU host CPU (framework calls), the PCIe link, and the offload tier (SSD, or host DRAM on the server).
RESOURCES: tuple[str, ...] = ("compute", "dre", "dram", "host_cpu", "link", "ssd", "host_dram")


def _ledger(i: StepInputs, pl: Placement, sc: LayerSchedule, w: dict, parts: dict, busy_s: float,
            copy_s: float, pcie_bytes: float, host_copy_bytes: float) -> list[dict]:
    """One entry per (resource, term): seconds it holds the resource, joules, bytes. Every joule of ``parts`` is in
    exactly one entry; a powered-but-idle resource (cores during a stall, an idle link) holds it for the step."""
    sys, t = i.sys, sc.total_s
    e = lambda resource, term, time_s, energy_j=0.0, bytes_=0.0: dict(  # noqa: E731
        resource=resource, term=term, time_s=time_s, energy_j=energy_j, bytes=bytes_)
    out = []
    if sys.kind == "vrex":
        out += [e("compute", "LXE cores (powered for the step)", t, parts["core"]),
                e("dre", "HCU/WTU prediction (energy in the cores')", w["n_pred"] * sc.dre_s),
                e("dram", "transfers (device + PHY)", w["dram_s"], parts["dram"] + parts["dram_phy"], w["dram"]),
                e("dram", "background (standby + refresh)", t, parts["dram_background"])]
    else:
        stall = sc.stall_s
        out += [e("compute", "GPU board, working (Table I power: GPU + its DRAM)", t - stall, parts["gpu_board"]),
                e("compute", f"GPU board, waiting on the link (D427 '{i.p.gpu_stall_power}' power)", stall,
                  parts["gpu_board_stall"]),
                e("dram", "transfers (energy in the board's)", w["dram_s"], 0.0, w["dram"]),
                e("compute", "kernel start-up (within the device time)", w["kernel_s"]),
                e("host_cpu", "framework calls (host energy not in Table I)", w["host_s"])]
    end = "" if sys.kind == "vrex" else ", far end (the GPU's end is in the board power)"
    out += [e("link", "transfers" + end, busy_s, parts["pcie"], pcie_bytes),
            e("link", "idle (ASPM states)" + end, max(0.0, t - busy_s), parts["pcie_idle"])]
    if "ssd" in parts:
        act = _energy.ssd_active_j(sys, busy_s)
        out += [e("ssd", "reads (active)", busy_s, act, pcie_bytes), e("ssd", "idle", max(0.0, t - busy_s),
                                                                        parts["ssd"] - act)]
        if copy_s > 0:  # a unified-memory relay on the CPU and copy engine (D429 'cpu_ce')
            out.append(e("host_cpu", "relay copies on the CPU + copy engine (energy in the module power, D429)",
                         copy_s))
    else:
        tot = pcie_bytes + host_copy_bytes
        share = host_copy_bytes / tot if tot else 0.0
        out += [e("host_dram", "DMA reads of the offloaded KV", busy_s, parts["host_dram"] * (1 - share), pcie_bytes),
                e("host_dram", "FlexGen pinned-buffer relay copies", copy_s, parts["host_dram"] * share,
                  host_copy_bytes)]
    if "host_cpu_copy" in parts:
        # the bytes are the host DRAM's (above); the CPU holds the copies' time and their package energy
        out.append(e("host_cpu", "relay copies (host CPU package power x copy time, D428)", copy_s,
                     parts["host_cpu_copy"]))
    return out


def totals(i: StepInputs, pl: Placement, sc: LayerSchedule) -> SimResult:
    sys, p, B, L = i.sys, i.p, i.batch, i.llm.n_layers
    w = _work(i, pl, sc)
    breakdown_ms = dict(llm=w["llm_s"] * 1e3, vision_mlp=sc.vision_s * 1e3,
                        kv_prediction=w["n_pred"] * sc.pred_main_s * 1e3, retrieval_exposed=sc.stall_s * 1e3)
    fetch_b = pl.per_layer(L, "fetch_bytes")
    pcie_bytes = fetch_b + L * pl.offload_write_bytes_per_layer
    bytes_ = dict(dram=w["dram"], dram_llm=w["dram"] - w["dram_vis"], pcie=pcie_bytes, pcie_fetch=fetch_b,
                  pcie_useful=pl.per_layer(L, "useful_fetch_bytes"),
                  staging=sys.staging_copies * fetch_b * (0 if sys.kind == "vrex" else 1))
    busy_s = (pl.n_dense * sc.dense.fetch_s + (L - pl.n_dense) * sc.sparse.fetch_s
              + L * pl.offload_write_bytes_per_layer / sys.pcie)
    idle_s, idle_l0_s = _link.idle_power_frac(_link_gaps(sc.timeline, sc.total_s), p.aspm)
    copy_s = pl.n_dense * sc.dense.host_copy_s + (L - pl.n_dense) * sc.sparse.host_copy_s
    act = _energy.StepCounts(
        seconds=sc.total_s, macs=(w["llm_flops"] + w["vis_flops"] + w["pred_flops"] - w["vector_flops"]) / 2,
        vpe_ops=w["lane_ops"], dram_bytes=w["dram"], pcie_bytes=pcie_bytes, pcie_busy_s=min(busy_s, sc.total_s),
        pcie_idle_l0_s=idle_l0_s * max(0.0, sc.total_s - busy_s) / idle_s if idle_s > 0 else 0.0,
        hcu_compares=w["n_pred"] * sc.pred.hcu_compares, wtu_elems=w["n_pred"] * sc.pred.wtu_elems,
        kvmu_requests=(pl.per_layer(L, "fetch_commands") if i.engine == "dre" else 0.0),
        host_copy_bytes=2 * bytes_["staging"] if sys.offload_tier == "cpu_dram" else 0.0,
        stall_s=min(sc.stall_s, sc.total_s), host_copy_s=copy_s)
    energy_j, parts_j = _energy.step_energy(sys, act, p.gpu_stall_power)
    ledger = _ledger(i, pl, sc, w, parts_j, min(busy_s, sc.total_s), copy_s, pcie_bytes, act.host_copy_bytes)
    resident_dense = pl.n_dense * B * pl.off_tokens * i.llm.kv_bytes_per_token_layer if p.dense_resident else 0.0
    mem_bytes = (footprint_bytes(i.llm, p, i.spec, i.kv_len, B, pl.offload, i.tokens_per_frame,
                                 i.tokens_per_cluster)
                 + 2 * pl.sparse.fetch_bytes + pl.retrieved_kept_bytes + resident_dense)  # + double-buffered prefetch
    notes = dict(engine=i.engine, offloaded_tokens=pl.off_tokens, on_device_tokens=pl.on_dev_tokens,
                 moved_fraction=pl.sparse.moved_frac, fetch_ms_per_layer=sc.sparse.fetch_s * 1e3,
                 dense_fetch_ms_per_layer=sc.dense.fetch_s * 1e3, dense_layers=pl.n_dense,
                 attended_tokens=pl.sparse.attended, layout=i.spec.layout, vision_flops=w["vis_flops"],
                 retrieved_reuse=pl.reuse_frac, retrieved_kept_frac=pl.retrieved_kept_frac,
                 extrapolated=dict(i.extrapolated), tokens_per_cluster=i.tokens_per_cluster,
                 dre_cycles=sc.pred.hcu_cycles + sc.pred.wtu_cycles, selected_frac_device=i.r_dev,
                 selected_frac_offloaded=i.r_off, fetch_commands=pl.per_layer(L, "fetch_commands"),
                 limits_ms=w["limits_ms"], pcie_idle_s=idle_s, dram_eff=sys.dram_eff, granule=pl.granule_source)
    return SimResult(sys.name, i.spec.name, i.stage, i.kv_len, B, sc.total_s * 1e3, energy_j,
                     w["llm_flops"] + w["vis_flops"], w["pred_flops"], bytes_, breakdown_ms, parts_j,
                     energy_j / sc.total_s, mem_bytes, sys.dram_capacity, i.selected_frac,
                     i.source, sc.timeline, notes, ledger)
