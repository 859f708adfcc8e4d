"""Notebook 05's claim rows: Table III block by block under both estimates, the DRE shares, V-Rex8/48 area, and
Table I's system power recomputed with the estimator's core and DRAM energies; each row that can FAIL says why.

Three estimates of one core (docs/DECISIONS.md D24, D123, D288):

* ``component``: :func:`vrex_lib.estimate.core_breakdown` -- cited per-operation constants x counts;
* ``cacti+cells``: :func:`vrex_lib.estimate.cacti_cells.cacti_cells_breakdown` -- CACTI memories, the DRE's
  synthesized cells at measured toggle rates, datapaths with a clock network and cited wire/glitch shares;
* ``rtl``: :func:`vrex_lib.estimate.rtl.rtl_breakdown` -- the DPE and VPE from their own RTL (synthesised units x
  gate-level toggles on real operands, registers, clock tree), the rest as ``cacti+cells``.

Every FAIL row of a Table III table names its responsible term, its share, the value it would need for a PASS and
whether that is plausible (:func:`vrex_lib.claims.terms.fail_terms`, D289).

Table I's system power (V-Rex + DRAM + PCIe + storage) is rebuilt from the simulator's peak parts
(:func:`vrex_lib.perf.energy.peak_power_w`) with the core replaced by an estimate above and the DRAM energy by
:func:`vrex_lib.estimate.dram.dram_energy` (CACTI-IO + the IDD core model) where CACTI-IO models the interface.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

import pandas as pd

from .. import memtech, paper, report
from . import causes
from . import terms as T
from ..config import VRexCoreConfig
from ..estimate import offchip, synth
from ..estimate.core import DRE_BLOCKS, TABLE3_BLOCKS, chip_area_mm2
from ..estimate.dram import dram_energy
from ..perf.energy import peak_power_w
from ..perf.systems import get_system

KEY = {"DPE": "dpe", "VPE": "vpe", "On-chip memory": "onchip_mem", "HCU": "hcu", "WTU": "wtu", "KVMU": "kvmu"}
MODELS = {"component": "component model", "cacti+cells": "CACTI + cells", "rtl": "RTL DPE/VPE + CACTI + cells"}


def block_sums(df: pd.DataFrame) -> pd.DataFrame:
    """Area (mm2) and power (mW) per Table III block of a breakdown frame (either model), with % of the total."""
    b = df.groupby("block", sort=False)[["area_mm2", "power_mW"]].sum().reindex(list(TABLE3_BLOCKS)).fillna(0.0)
    b["area_pct"] = 100 * b.area_mm2 / b.area_mm2.sum()
    b["power_pct"] = 100 * b.power_mW / b.power_mW.sum()
    return b


def dre_share(df: pd.DataFrame) -> dict[str, float]:
    """DRE (HCU + WTU + KVMU) share of core area and power (%) of a breakdown frame of either model."""
    b = block_sums(df)
    dre = b.loc[list(DRE_BLOCKS)]
    return dict(area_pct=float(dre.area_pct.sum()), power_pct=float(dre.power_pct.sum()))


def _per_mac_pj(power_mw: float, units: int, freq_hz: float) -> float:
    return power_mw * 1e-3 / (units * freq_hz) * 1e12


def implied_pj_per_cycle(block: str, cfg: VRexCoreConfig = VRexCoreConfig()) -> float:
    """Table III's power of the DPE (per MAC-cycle: / (64 x 64 MACs x 800 MHz)) or the VPE (per lane-cycle), pJ."""
    units = {"DPE": cfg.n_dpe_h * cfg.n_dpe_w, "VPE": cfg.n_vpe_h * cfg.n_vpe_w}[block]
    return _per_mac_pj(paper.value(f"table3.power_mw.{KEY[block]}"), units, cfg.freq_hz)


def _causes(cfg: VRexCoreConfig, b: pd.DataFrame, detail: dict[str, str], model: str = "component") -> dict[str, str]:
    """cause_detail per '<block>.area' | '<block>.power': the likely reason a row misses, with our numbers beside
    the paper's; ``detail`` adds the model's own reasons under the same keys."""
    f = cfg.freq_hz
    macs, lanes = cfg.n_dpe_h * cfg.n_dpe_w, cfg.n_vpe_h * cfg.n_vpe_w
    paper_dpe = paper.value("table3.power_mw.dpe")
    paper_vpe = paper.value("table3.power_mw.vpe")
    rtl = model == "rtl"
    why_dpe = ("our RTL's MAC tree (64 exact BF16 products, 63 FP32 adders, FP32 accumulator) as NanGate 45 nm cells "
               "at their gate-level toggles, scaled to 14 nm" if rtl else "the BF16 multiply/add energies are "
               "Horowitz 45 nm FP16 figures scaled to 14 nm (no BF16 MAC-tree RTL in this estimate)")
    out = {
        "DPE.power": f"{_per_mac_pj(b.loc['DPE', 'power_mW'], macs, f):.3f} pJ per MAC-cycle here vs "
                     f"{_per_mac_pj(paper_dpe, macs, f):.3f} pJ implied by Table III ({paper_dpe} mW / ({macs} MACs x "
                     f"{f / 1e6:.0f} MHz)); {why_dpe}",
        "VPE.power": f"{_per_mac_pj(b.loc['VPE', 'power_mW'], lanes, f):.3f} pJ per lane-cycle here vs "
                     f"{_per_mac_pj(paper_vpe, lanes, f):.3f} pJ implied by Table III; "
                     + ("our RTL's 64 FP32 multiply-add lanes on real softmax/RMSNorm/SiLU/RoPE instruction streams"
                        if rtl else "FP32 lanes from Horowitz per-operation energies (no VPE RTL in this estimate)"),
        "DPE.area": ("an FP32 adder at every tree node (63 per tree) is most of the tree; a BF16 or fused "
                     "(align-then-add) tree would be smaller" if rtl else
                     "BF16 tree adders booked as full FP16-class adders per tree node (Horowitz's FP16 adder is larger "
                     "than its multiplier); a synthesized multi-operand tree would be smaller"),
        "VPE.area": "our RTL's FP32 lanes in NanGate cells scaled to 14 nm" if rtl else
                    "FP32 lanes from Horowitz areas scaled to 14 nm",
        "On-chip memory.area": "array efficiency and bank organisation of the paper's memory macros are not stated",
        "On-chip memory.power": "the paper's memory macros, banking and operand traffic are not stated",
    }
    for blk in DRE_BLOCKS:
        for q in ("area", "power"):
            out[f"{blk}.{q}"] = ("the DRE micro-architecture is ours (docs/DECISIONS.md D80-D87; Fig. 10 only "
                                 "sketches it)")
    for k, v in detail.items():
        out[k] = f"{out[k]}; {v}" if k in out else v
    return out


_LABEL = {"area_mm2": "area", "area_pct": "area share", "power_mw": "power", "power_pct": "power share"}


def _block_rows(b: pd.DataFrame, causes: dict[str, str], suffix: str) -> list[report.Row]:
    rows = []
    for blk, k in KEY.items():
        for q, col, unit_q in (("area_mm2", "area_mm2", "area"), ("area_pct", "area_pct", "area"),
                               ("power_mw", "power_mW", "power"), ("power_pct", "power_pct", "power")):
            rows.append(report.row(f"table3.{q}.{k}", b.loc[blk, col], quantity=f"{blk} {_LABEL[q]}{suffix}",
                                   cause="model", cause_detail=causes.get(f"{blk}.{unit_q}", "")))
    return rows


#: The estimates from the most faithful down (docs/DECISIONS.md D404): the one that ran first in this order is the
#: estimate of record of every Table III claim; the others are INFO cross-checks (:func:`cross_check`).
RECORD_ORDER: tuple[str, ...] = ("rtl", "cacti+cells", "component")


def record_model(ran: Iterable[str]) -> str:
    """The estimate of record among the estimates that ran (:data:`RECORD_ORDER`); none ran is an error."""
    ran = set(ran)
    bad = ran - set(MODELS)
    if bad:
        raise ValueError(f"unknown estimate(s) {sorted(bad)}: choose from {sorted(MODELS)}")
    for m in RECORD_ORDER:
        if m in ran:
            return m
    raise ValueError("record_model: no Table III estimate ran")


def cross_check(rows: list[report.Row], model: str, record: str,
                record_rows: Iterable[report.Row] = ()) -> list[report.Row]:
    """``rows`` of the estimate ``model`` as graded where it is the estimate of record; otherwise each row whose
    claim ``record_rows`` (the record's rows) grade becomes an INFO cross-check beside the printed value, with a note
    naming the estimate of record (a claim only this estimate answers stays graded)."""
    if model == record:
        return rows
    graded = {r.claim for r in record_rows if r.paper is not None and r.reproduced is not None}
    for r in rows:
        if r.claim in graded and r.reproduced is not None:
            r.tolerance = paper.INFO
            r.note = "; ".join(x for x in (f"INFO cross-check: the estimate of record is the {MODELS[record]} (D404)",
                                           r.note) if x)
    return rows


def table3_rows(model: str, df: pd.DataFrame, cfg: VRexCoreConfig = VRexCoreConfig(), *,
                detail: dict[str, str] | None = None, gap: str = "") -> list[report.Row]:
    """Table III per block (area, area share, power, power share), core totals and the DRE shares for one
    ``model`` ('component' | 'cacti+cells' | 'rtl') from its breakdown frame ``df``; ``gap`` (e.g.
    :func:`gap_statement`) is appended to the core-power row's cause."""
    if model not in MODELS:
        raise ValueError(f"model {model!r}: choose one of {sorted(MODELS)}")
    b = block_sums(df)
    suffix = "" if model == "component" else f" ({MODELS[model]})"
    causes = _causes(cfg, b, detail or {}, model)
    s = dre_share(df)
    dpe_note = causes["DPE.power"]
    dre_why = "numerator (DRE) and denominator (core) are both estimates: see the per-block rows"
    rows = _block_rows(b, causes, suffix)
    rows += [report.row("table3.area_mm2.total", b.area_mm2.sum(), quantity=f"core area{suffix}", cause="model",
                        cause_detail="DPE area dominates: " + causes["DPE.area"]),
             report.row("table3.power_mw.total", b.power_mW.sum(), quantity=f"core power{suffix}", cause="model",
                        cause_detail="the DPE dominates: " + dpe_note + (f"; {gap}" if gap else "")),
             report.row("dre.area_share_pct", s["area_pct"], quantity=f"DRE share of core area{suffix}",
                        cause="model", cause_detail=dre_why),
             report.row("dre.power_share_pct", s["power_pct"], quantity=f"DRE share of core power{suffix}",
                        cause="model", cause_detail=dre_why),
             report.row("dre.power_share_pct_body", s["power_pct"],
                        quantity=f"DRE share of power (body text 2.4%){suffix}")]
    return T.annotate(rows, T.fail_terms(df, rows, KEY))


def model_terms(model: str, df: pd.DataFrame, cfg: VRexCoreConfig = VRexCoreConfig()) -> dict[str, dict]:
    """claim -> the responsible term of each FAIL row of ``table3_rows(model, df)`` as data (term, kind, share,
    value, needs, factor, unit, target, plausible, why): the input of a structured 'model' cause."""
    rows = table3_rows(model, df, cfg)
    return T.fail_terms(df, rows, KEY)


def chip_rows(cfg: VRexCoreConfig = VRexCoreConfig()) -> list[report.Row]:
    """V-Rex8 / V-Rex48 area (n x the component model's core) and their ratio to the GPUs' dies."""
    a8, a48 = chip_area_mm2(8, cfg), chip_area_mm2(48, cfg)
    why = "n x the core area (no NoC, PHY or pads, as the paper's 8 x 1.89 mm2): see the core-area row"
    return [report.row("chip.area_mm2.vrex8", a8, quantity="V-Rex8 area", cause="model", cause_detail=why),
            report.row("chip.area_mm2.vrex48", a48, quantity="V-Rex48 area", cause="model", cause_detail=why),
            report.info_row("chip.area_vs_agx_pct", "V-Rex8 area / AGX Orin area (paper's 200 mm2)", "%",
                            100 * a8 / paper.value("chip.area_mm2.agx_orin")),
            report.info_row("chip.area_vs_a100_pct", "V-Rex48 area / A100 area (paper's 826 mm2)", "%",
                            100 * a48 / paper.value("chip.area_mm2.a100"))]


def not_run_rows(why: str, suffix: str = " (CACTI + cells)") -> list[report.Row]:
    """Every ``table3_rows`` claim as NOT RUN, with ``why`` (e.g. no yosys summary in the smoke profile)."""
    rows = [report.row(f"table3.{q}.{k}", None, quantity=f"{blk} {_LABEL[q]}{suffix}", cause="not-run",
                       cause_detail=why)
            for blk, k in KEY.items() for q in ("area_mm2", "area_pct", "power_mw", "power_pct")]
    return rows + [report.row(k, None, quantity=f"{k}{suffix}", cause="not-run", cause_detail=why)
                   for k in ("table3.area_mm2.total", "table3.power_mw.total", "dre.area_share_pct",
                             "dre.power_share_pct")]


def system_power_parts(system: str, core_w: float, *, cache_dir: str | os.PathLike | None = None) -> dict[str, float]:
    """Peak system power parts (W) of 'vrex8' | 'vrex48': the simulator's peak (every unit busy, DRAM streaming at
    its achieved bandwidth, link busy, SSD active / host DDR4 at the link's rate) with one core's power ``core_w``
    and the CACTI-IO + IDD DRAM energy where CACTI-IO models the interface (LPDDR5 device, host DDR4; HBM2e keeps
    the simulator's cited rows)."""
    sys_ = get_system(system)
    parts = {k: v for k, v in peak_power_w(sys_).items() if k != "total"}
    parts["core"] = core_w * sys_.n_cores
    if sys_.memory.cacti_io is not None:
        e = dram_energy(sys_.memory.name, cache_dir=cache_dir)
        parts["dram"] = sys_.dram * 8 * e.device_pj_per_bit * 1e-12
        parts["dram_phy"] = sys_.dram * 8 * e.phy_pj_per_bit * 1e-12
    if "host_dram" in parts:
        parts["host_dram"] = (sys_.pcie * 8 * dram_energy(sys_.offload_store.name, cache_dir=cache_dir)
                              .total_pj_per_bit * 1e-12)
    parts["total"] = sum(parts.values())
    return parts


def system_power_estimate_rows(core_w: dict[str, float], *,
                               cache_dir: str | os.PathLike | None = None) -> list[report.Row]:
    """Table I's V-Rex8 / V-Rex48 system power with each core estimate (``core_w``: model -> W per core)."""
    rows = []
    for s in ("vrex8", "vrex48"):
        for model, w in core_w.items():
            p = system_power_parts(s, w, cache_dir=cache_dir)
            note = ", ".join(f"{k} {v:.1f} W" for k, v in p.items() if k != "total")
            mem = get_system(s).memory
            if mem.cacti_io is None:  # said, not skipped: this technology keeps its cited DRAM rows
                note += f"; {mem.name} DRAM energy from its cited rows: {mem.cacti_io_none}"
            r = report.row(f"table1.power_w.{s}", p["total"], quantity=f"{s} system power, "
                           f"{MODELS[model]} core, CACTI-IO DRAM", note=note, cause="model",
                           cause_detail=f"core {p['core']:.1f} W of {p['total']:.1f} W: see table3 core "
                                        "power; DRAM energy per bit from CACTI-IO and the IDD model "
                                        "(table dram_energy)")
            if r.verdict() == report.FAIL:  # the one part whose change alone reaches the tolerance edge
                r.term = causes.sum_term({k: v for k, v in p.items() if k != "total"}, p["total"],
                                         r.paper, r.tolerance, "W")
            rows.append(r)
    return rows


def dram_rows(*, cache_dir: str | os.PathLike | None = None) -> list[report.Row]:
    """DRAM energy per bit read (INFO): IDD core + CACTI-IO interface per kind, the constants rows they replace in
    the notes."""
    rows = []
    for kind in memtech.DRAM:
        m = memtech.dram(kind)
        if m.cacti_io is None:
            rows.append(report.info_row(f"dram.pj_per_bit.{kind}.total", f"{kind} energy per bit read (CACTI-IO)",
                                        "pJ/bit", None, note=f"not run: {m.cacti_io_none}", cause="not-run",
                                        cause_detail=m.cacti_io_none))
            continue
        e = dram_energy(kind, cache_dir=cache_dir)
        old = offchip.dram_pj_per_bit(kind) + (offchip.dram_phy_pj_per_bit(kind) if m.phy_pj_per_bit else 0.0)
        for part, v in (("core_read", e.core_read), ("activate", e.activate), ("io_dynamic", e.io_dynamic),
                        ("io_termination", e.io_termination), ("phy", e.phy), ("total", e.total_pj_per_bit)):
            note = f"{e.device}; {e.interface}"
            if part == "total":
                note += f"; the assumption rows of docs/DECISIONS.md D25 give {old:g} pJ/bit"
            rows.append(report.info_row(f"dram.pj_per_bit.{kind}.{part}",
                                        f"{kind} {part.replace('_', ' ')} energy per bit read", "pJ/bit", v, note=note))
    return rows


def cacti_cells_detail(df: pd.DataFrame, activities: dict) -> dict[str, str]:
    """The CACTI + cells model's own reasons per block ('<block>.power' / '<block>.area'), from its breakdown
    ``df`` and the measured ``activities`` (block -> BlockActivity), for :func:`table3_rows`' ``detail``."""
    out = {}
    dp = df[df.part.str.startswith("datapath")]
    if len(dp):
        out["DPE.power"] = out["VPE.power"] = f"datapath energies {dp.note.iloc[0]} (cited midpoints)"
    mem = df[(df.source == "cacti") & (df.block == "On-chip memory")]
    if len(mem):
        out["On-chip memory.power"] = f"CACTI 22 nm arrays scaled to 14 nm: {mem.part.iloc[0]}"
        out["On-chip memory.area"] = ("CACTI's arrays at 22 nm scaled by Stillmaker-Baas; the paper's macros are "
                                      "not stated")
    for blk in DRE_BLOCKS:
        a = activities.get(blk.lower())
        logic = df[(df.block == blk) & (df.source == "cells")]
        if a is None or not len(logic):
            continue
        out[f"{blk}.power"] = (f"{logic.part.iloc[0]} of our Verilog at measured toggle rate {a.alpha:.4f} per bit "
                               f"per cycle ({a.source})")
        out[f"{blk}.area"] = f"{logic.part.iloc[0]} (NanGate X1 areas scaled) + CACTI arrays"
    return out


def logic_area_crosscheck(df: pd.DataFrame, ys: pd.DataFrame | None, why_not: str = "") -> tuple[list[report.Row],
                                                                                               pd.DataFrame]:
    """The DRE's logic area from yosys cell counts of our RTL beside the component model: (rows, table).

    ``df``: a :func:`~vrex_lib.estimate.core.core_breakdown` frame; ``ys``: :func:`vrex_lib.estimate.synth.yosys_area`
    of the hw summary, or None (then every block is NOT RUN with ``why_not``). The rows are INFO (no printed
    counterpart) except the DRE area share recomputed with yosys's logic areas, held against Table III."""
    model_logic = synth.model_logic_area_um2(df)
    quantity = "{} logic area from yosys cells"
    if ys is None:
        why = why_not or "no blocks with cell counts"
        table = pd.DataFrame(dict(block=list(model_logic.index), model_logic_um2=model_logic.values))
        rows = [report.info_row(f"dre.logic_area_um2.yosys.{b}", quantity.format(b), "um2", None,
                                note=f"not run: {why}", cause="not-run",
                                cause_detail=f"needs notebook 04's yosys summary (results/hdl/summary.json): {why}")
                for b in model_logic.index]
        return rows, table
    ys = ys.assign(Block=ys["block"].str.upper().str.replace("_TOP", "", regex=False))
    table = ys.merge(model_logic.rename("model_logic_um2"), left_on="Block", right_index=True, how="outer")
    table["yosys_over_model"] = table["logic_area_um2"] / table["model_logic_um2"]
    rows = [report.info_row(f"dre.logic_area_um2.yosys.{r.Block}", quantity.format(r.Block), "um2", r.logic_area_um2,
                            note=f"{int(r.cells)} cells, {r.gate_equivalents:.0f} GE"
                            + (", memory mapped to flops (removed; read muxes kept)" if r.memory_in_flops else "")
                            + f"; component model {r.model_logic_um2:.0f} um2")
            for r in table.itertuples() if not pd.isna(r.logic_area_um2)]
    # Blocks the summary lists without cell counts, and model blocks yosys did not synthesise: NOT RUN, with why.
    for r in table.itertuples():
        if pd.isna(r.logic_area_um2):
            why = r.note if isinstance(r.note, str) and r.note else "not in the yosys summary"
            rows.append(report.info_row(f"dre.logic_area_um2.yosys.{r.Block}", quantity.format(r.Block), "um2", None,
                                        note=why, cause="not-run", cause_detail=f"yosys gave no cells: {why}"))
    share = synth.dre_area_share_with_yosys(df, ys)
    if share is not None:
        rows.append(report.row("dre.area_share_pct", share["area_pct"],
                               quantity=f"DRE area share, logic of {'/'.join(share['blocks'])} from yosys",
                               cause="model", cause_detail="the DRE micro-architecture is ours (D80-D87)"))
    return rows, table


# ------------------------------------------------------------------------------------------- the RTL estimate
def rtl_detail(df: pd.DataFrame, lxe_summary: dict, activities: dict) -> dict[str, str]:
    """The RTL estimate's own reasons per block ('<block>.power' / '<block>.area'): for the DPE and VPE their units,
    registers and the real vectors their toggles come from; the rest as :func:`cacti_cells_detail`."""
    out = cacti_cells_detail(df, activities)
    for blk in ("DPE", "VPE"):
        b = df[df.block == blk]
        e = lxe_summary["blocks"][blk.lower()]
        units = b[b.source == "rtl cells"].sort_values("power_mW", ascending=False)
        regs = b[b.source == "rtl registers"]
        src = ", ".join(f"{k} {v}" for k, v in e["activity"]["sources"].items())
        out[f"{blk}.power"] = ("; ".join(f"{r.part}: {r.power_mW:.1f} mW" for r in units.itertuples())
                               + f"; registers + clock tree {regs.power_mW.sum():.1f} mW; toggles of "
                                 f"{e['activity']['vectors']} real vectors ({src})")
        out[f"{blk}.area"] = ("; ".join(f"{r.part}: {r.area_mm2:.3f} mm2" for r in units.itertuples())
                              + f"; registers {regs.area_mm2.sum():.3f} mm2 (NanGate X1 areas x Stillmaker-Baas)")
    return out


def energy_rows(steps: pd.DataFrame) -> list[report.Row]:
    """INFO rows of :func:`vrex_lib.estimate.rtl.energy_steps`: the DPE's energy per MAC-cycle and the VPE's per
    lane-cycle from RTL toggles, one row per scaling step (the last beside Table III's implied figure)."""
    implied = {b: implied_pj_per_cycle(b) for b in ("DPE", "VPE")}
    rows = []
    for blk, g in steps.groupby("block", sort=False):
        per = "MAC-cycle" if blk == "DPE" else "lane-cycle"
        for i, r in enumerate(g.itertuples()):
            note, total = r.note, r.step.startswith("= total")
            if total:
                note += f"; Table III implies {implied[blk]:.3f} pJ per {per}"
            claim = f"rtl.{blk.lower()}.pj_per_cycle" if total else f"rtl.{blk.lower()}.energy_step{i}"
            rows.append(report.info_row(claim, f"{blk} per {per} (RTL): {r.step}", r.unit, r.value, note=note))
    return rows


def energy_not_run_rows(why: str) -> list[report.Row]:
    """The totals of :func:`energy_rows` as NOT RUN, with ``why``."""
    return [report.info_row(f"rtl.{blk.lower()}.pj_per_cycle", f"{blk} energy per cycle (RTL)", "pJ", None,
                            cause="not-run", cause_detail=why) for blk in ("DPE", "VPE")]


def rtl_gap(df: pd.DataFrame, sens: pd.DataFrame | None = None) -> dict:
    """How far the RTL estimate's core power is from Table III's 2.61 W and why, as data: core and paper power,
    the relative gap, the DPE's share, the factor on the DPE's energy that closes it, and the span of the RTL
    sensitivity variants (``sens``: :func:`vrex_lib.estimate.rtl.sensitivity`) on the DPE."""
    b = block_sums(df)
    core, target = float(b.power_mW.sum()), paper.value("table3.power_mw.total")
    dpe = float(b.loc["DPE", "power_mW"])
    tol = paper.get("table3.power_mw.total").tol.value
    edge = target * (1 - tol) if core < target else target * (1 + tol)
    out = dict(core_mW=core, paper_mW=target, rel_gap=(core - target) / target, dpe_mW=dpe, dpe_share=dpe / core,
               dpe_factor_to_paper=(dpe + target - core) / dpe, dpe_factor_to_pass=(dpe + edge - core) / dpe,
               within_tolerance=bool(abs(core - target) <= tol * target))
    if sens is not None and len(sens):
        base = float(sens.DPE_mW.iloc[0])
        out["dpe_variant_span"] = (float(sens.DPE_mW.min()) / base, float(sens.DPE_mW.max()) / base)
    return out


def gap_statement(g: dict) -> str:
    """:func:`rtl_gap` as the sentence the core-power row and the notebook carry."""
    span = g.get("dpe_variant_span")
    s = (f"RTL core power {g['core_mW']:.0f} mW is {100 * g['rel_gap']:+.0f} % from Table III's {g['paper_mW']:.0f} mW; "
         f"the DPE is {100 * g['dpe_share']:.0f} % of it and would need x{g['dpe_factor_to_paper']:.2f} of its energy "
         f"to match (x{g['dpe_factor_to_pass']:.2f} to reach the ±30 % band)")
    if span:
        s += f"; the RTL variants move the DPE by x{span[0]:.2f}-x{span[1]:.2f}"
    return (s + ". What remains is the library and the flow: NanGate 45 nm X1 cells scaled by one Stillmaker-Baas "
            "factor (x0.079; their HP 45 nm fit gives x0.092) stand in for a 14 nm FinFET library; Design Compiler "
            "at 14 nm would size cells and buffer high fan-out nets for 800 MHz (our netlist is unsized and "
            "unbuffered), and its power report adds what its switching model assigns to the nets; and the paper's "
            "RTL may hold more per MAC (operand buffers, wider trees) than ours")
