"""The third estimate of one core (``docs/DECISIONS.md D288``): the DPE and the VPE from their own RTL -- yosys
cells of the synthesised units x NanGate 45 nm energies x the toggles of their gate-level netlists on real
SmolLM2 operands, registers as NanGate flip-flops with a clock tree -- scaled to 14 nm / 0.8 V by Stillmaker-Baas;
the on-chip memory and the DRE as in the CACTI + cells estimate.

Per synthesised unit (``vrex_lib.hw.lxe`` summary: cells by type, gate-level activity), per instance and cycle:

    E_45 = sum_types toggles(type's outputs) x E_internal(type)  +  sum_nets toggles(net) x 1/2 C(fan-out) V^2

at the NanGate corner (45 nm, 1.1 V): ``E_internal`` the cell's internal energy per output transition and ``C`` the
net's load (its fan-out x the mean input capacitance + the library's wire load, :func:`.cells.load_cap_ff`), each
net at its own fan-out in the netlist (``fanout=None``) or all at one fan-out (the D122 convention). Then

    E_14 = E_45 x (1 + glitch) x S-B(45 nm 1.1 V -> 14 nm 0.8 V)

The zero-delay activity has no glitches: the cited glitch share is added as for the DRE's logic (mid 0.2).
Registers: every bit a DFF_X1 clocked every cycle (its CK pin and pin net) and its captured changes (the
flip-flop's internal energy; the Q net's load is the next unit's input net, counted there), plus the clock tree
over all flip-flops of the block (:func:`.cells.clock_tree_pj_per_cycle`). Leakage and area: every cell and
flip-flop, scaled. The DPE is ``n_dpe_h`` trees sharing one activation input register; the VPE ``n_vpe_h`` units.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

import pandas as pd

from ..config import VRexCoreConfig
from .cacti_cells import Overheads, cacti_cells_breakdown
from .cells import _cell, clock_tree_pj_per_cycle, decompose, load_cap_ff
from .core import GROUP, TABLE3_BLOCKS
from .scaling import TARGET_NODE_NM, TARGET_VDD, area_factor, energy_factor

LXE_RTL_BLOCKS = ("DPE", "VPE")
_NG = _cell("DFF_X1")


@dataclass(frozen=True)
class RTLOptions:
    """The choices of the RTL estimate, each varied in notebook 05 (``docs/DECISIONS.md D288``).

    glitch: extra combinational dynamic energy as a share of the zero-delay one (cited 0-0.4; None: the midpoint);
    fanout: None = each net at its fan-out in the netlist; a number = every net at that fan-out;
    operands: 'real' (SmolLM2) or 'random' toggles;
    row45: the Stillmaker-Baas 45 nm row ('lp', the energy rows of every other estimate, or 'hp');
    levels_per_stage: None = the RTL's pipeline; k = the DPE's tree registers recounted for a register every k levels.
    """

    glitch: float | None = None
    fanout: float | None = None
    operands: str = "real"
    row45: str = "lp"
    levels_per_stage: int | None = None

    @property
    def glitch_share(self) -> float:
        return Overheads.cited("mid").glitch_share if self.glitch is None else float(self.glitch)

    def check(self) -> None:
        if self.operands not in ("real", "random"):
            raise ValueError(f"RTLOptions.operands={self.operands!r}: 'real' or 'random'")
        if self.glitch is not None and self.glitch < 0:
            raise ValueError(f"RTLOptions.glitch={self.glitch}: a share >= 0")
        if self.fanout is not None and self.fanout <= 0:
            raise ValueError(f"RTLOptions.fanout={self.fanout}: a positive fan-out")


def _ef(opts: RTLOptions) -> float:
    return energy_factor(_NG.node_nm, _NG.vdd, TARGET_NODE_NM, TARGET_VDD, opts.row45)


def _cells(cells_by_type: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t, n in cells_by_type.items():
        for c, k in decompose(t).items():
            out[c] = out.get(c, 0) + n * k
    return out


def unit_energy(u: dict, opts: RTLOptions = RTLOptions()) -> dict[str, float]:
    """One unit of a summary: per instance and cycle, its zero-delay dynamic energy at 45 nm (fJ, internal and net
    parts) and at 14 nm with the glitch share (pJ); per instance its leakage (uW, 14 nm) and area (um2, 14 nm)."""
    act = u["activity"] if opts.operands == "real" else (u.get("random_activity") or u["activity"])
    steps = act["steps"]
    if steps <= 0:
        raise ValueError(f"unit {u.get('netlist')}: its activity has no consecutive vectors")
    internal = sum(t * sum(_cell(c).internal_fJ * k for c, k in decompose(ty).items())
                   for ty, t in act["by_cell"].items()) / steps
    v2 = _NG.vdd ** 2
    if opts.fanout is None:
        net = sum(t * 0.5 * load_cap_ff(int(f)) * v2 for f, t in act["by_fanout"].items()) / steps
    else:
        net = sum(act["by_fanout"].values()) * 0.5 * load_cap_ff(opts.fanout) * v2 / steps
    cells = _cells(u["cells_by_type"])
    return dict(internal_fj_45=internal, net_fj_45=net, dyn_fj_45=internal + net,
                dyn_pj_14=(internal + net) * (1 + opts.glitch_share) * _ef(opts) * 1e-3,
                leakage_uw=sum(_cell(c).leakage_nW * n for c, n in cells.items()) * 1e-3 * _ef(opts),
                area_um2=sum(_cell(c).area_um2 * n for c, n in cells.items()) * area_factor(45), cells=sum(cells.values()),
                alpha=act["alpha"])


def register_counts(name: str, blk: dict, cfg: VRexCoreConfig, opts: RTLOptions) -> dict[str, tuple[float, float]]:
    """role -> (flip-flops, captured changes per cycle) of the whole DPE or VPE (``n_dpe_h`` trees sharing the
    activation register; ``n_vpe_h`` units), with the DPE's tree registers recounted for ``levels_per_stage``."""
    V = blk["activity"]["vectors"]
    regs = {k: (r["bits"], r["toggles"] / V) for k, r in blk["registers"].items()}
    if name == "DPE" and opts.levels_per_stage is not None:
        n = blk["params"]["n"]
        L = int(math.log2(n))
        k = opts.levels_per_stage
        keep = [lv for lv in range(1, L + 1) if lv % k == 0 or lv == L]
        lev = blk["level_toggles"]
        regs["tree"] = (32 * sum(n >> lv for lv in keep), sum(lev[lv - 1] for lv in keep) / V)
        ctrl_bits = 2 * (2 + len(keep)) + 1
        regs["control"] = (ctrl_bits, regs["control"][1] * ctrl_bits / max(1, blk["registers"]["control"]["bits"]))
    n_units = cfg.n_dpe_h if name == "DPE" else cfg.n_vpe_h
    return {k: (b if k == "x_in" else b * n_units, t if k == "x_in" else t * n_units) for k, (b, t) in regs.items()}


def block_parts(name: str, blk: dict, cfg: VRexCoreConfig = VRexCoreConfig(),
                opts: RTLOptions = RTLOptions()) -> list[dict]:
    """Rows (block, part, source, area_mm2, dynamic_mW, clock_mW, leakage_mW, note, e45_fj, e14_pj) of the DPE or
    VPE from its summary entry ``blk``: one per unit (all instances of the block), registers, the clock tree."""
    opts.check()
    n_units = cfg.n_dpe_h if name == "DPE" else cfg.n_vpe_h
    mw = cfg.freq_hz * 1e-9  # pJ per cycle -> mW
    rows = []
    for u, e in blk["units"].items():
        ue = unit_energy(e, opts)
        k = e["count"] * n_units
        rows.append(dict(block=name, part=f"{u} x {k} ({ue['cells']} cells each)", source="rtl cells",
                         area_mm2=k * ue["area_um2"] * 1e-6, dynamic_mW=k * ue["dyn_pj_14"] * mw, clock_mW=0.0,
                         leakage_mW=k * ue["leakage_uw"] * 1e-3, e45_fj=k * ue["dyn_fj_45"], e14_pj=k * ue["dyn_pj_14"],
                         note=f"gate-level alpha {ue['alpha']:.3f} ({opts.operands} operands), internal "
                              f"{ue['internal_fj_45']:.1f} + nets {ue['net_fj_45']:.1f} fJ at 45 nm per instance-cycle"))
    regs = register_counts(name, blk, cfg, opts)
    n_ff = sum(b for b, _ in regs.values())
    ef = _ef(opts)
    clock45 = _NG.clock_fJ_per_cycle + _NG.clock_cap_fF * _NG.vdd ** 2
    data45 = sum(t for _, t in regs.values()) * _NG.internal_fJ
    tree_pj = clock_tree_pj_per_cycle(n_ff) * ef / energy_factor(_NG.node_nm, _NG.vdd)
    rows.append(dict(block=name, part=f"{n_ff:.0f} register bits (DFF_X1)", source="rtl registers",
                     area_mm2=n_ff * _NG.area_um2 * area_factor(45) * 1e-6, dynamic_mW=data45 * ef * 1e-3 * mw,
                     clock_mW=n_ff * clock45 * ef * 1e-3 * mw, leakage_mW=n_ff * _NG.leakage_nW * ef * 1e-6,
                     e45_fj=data45 + n_ff * clock45, e14_pj=(data45 + n_ff * clock45) * ef * 1e-3,
                     note=", ".join(f"{k} {b:.0f}" for k, (b, _) in regs.items()) + "; every bit clocked every cycle"))
    rows.append(dict(block=name, part="clock tree (CLKBUF_X3, 16 pins per leaf, fan-out 4)", source="rtl registers",
                     area_mm2=0.0, dynamic_mW=0.0, clock_mW=tree_pj * mw, leakage_mW=0.0, e45_fj=tree_pj / ef * 1e3,
                     e14_pj=tree_pj, note=f"over {n_ff:.0f} flip-flops"))
    return rows


def lxe_rtl(lxe_summary: dict, cfg: VRexCoreConfig = VRexCoreConfig(), opts: RTLOptions = RTLOptions()) -> pd.DataFrame:
    """The DPE and VPE rows of the RTL estimate (:func:`block_parts` of each), with ``power_mW``."""
    recs = []
    for name in LXE_RTL_BLOCKS:
        recs += block_parts(name, lxe_summary["blocks"][name.lower()], cfg, opts)
    df = pd.DataFrame.from_records(recs)
    df["power_mW"] = df.dynamic_mW + df.clock_mW + df.leakage_mW
    return df


def rtl_breakdown(cfg: VRexCoreConfig = VRexCoreConfig(), *, lxe_summary: dict, activities, summary,
                  opts: RTLOptions = RTLOptions(), cache_dir: str | os.PathLike | None = None, **kw) -> pd.DataFrame:
    """Per-part area and full-activity power of one core under the RTL estimate: DPE and VPE from
    :func:`lxe_rtl`, the on-chip memory and the DRE from :func:`~.cacti_cells.cacti_cells_breakdown` (same columns,
    block order of Table III)."""
    cc = cacti_cells_breakdown(cfg, activities=activities, summary=summary, cache_dir=cache_dir, **kw)
    rest = cc[~cc.block.isin(LXE_RTL_BLOCKS)].drop(columns=["group"])
    df = pd.concat([lxe_rtl(lxe_summary, cfg, opts).drop(columns=["e45_fj", "e14_pj"]), rest], ignore_index=True)
    df.insert(1, "group", df.block.map(GROUP))
    order = {b: i for i, b in enumerate(TABLE3_BLOCKS)}
    return df.sort_values("block", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def energy_steps(lxe_summary: dict, cfg: VRexCoreConfig = VRexCoreConfig(),
                 opts: RTLOptions = RTLOptions()) -> pd.DataFrame:
    """The DPE's energy per MAC-cycle and the VPE's per lane-cycle, step by step: the units' zero-delay dynamic
    energy at 45 nm / 1.1 V, the glitch share, the Stillmaker-Baas factor, the registers, the clock tree,
    leakage; columns block, step, value, unit, note."""
    df = lxe_rtl(lxe_summary, cfg, opts)
    ef = _ef(opts)
    recs = []
    for name, per in (("DPE", cfg.n_dpe_h * cfg.n_dpe_w), ("VPE", cfg.n_vpe_h * cfg.n_vpe_w)):
        b = df[df.block == name]
        units, regs = b[b.source == "rtl cells"], b[b.part.str.contains("register bits")]
        tree = b[b.part.str.startswith("clock tree")]
        u45 = units.e45_fj.sum() / per
        leak_pj = b.leakage_mW.sum() / (cfg.freq_hz * 1e-9) / per
        total = b.power_mW.sum() / (cfg.freq_hz * 1e-9) / per
        for step, v, unit, note in (
                ("units' zero-delay switching at 45 nm / 1.1 V", u45, "fJ", "NanGate internal + net energy x toggles"),
                ("x (1 + glitch share)", 1 + opts.glitch_share, "factor", "cited midpoint unless varied"),
                (f"x Stillmaker-Baas 45 nm/1.1 V -> 14 nm/0.8 V ({opts.row45.upper()} 45 nm row)", ef, "factor", ""),
                ("= units at 14 nm", units.e14_pj.sum() / per, "pJ", ""),
                ("+ registers (clock pins + captured changes) at 14 nm", regs.e14_pj.sum() / per, "pJ", ""),
                ("+ clock tree at 14 nm", tree.e14_pj.sum() / per, "pJ", ""),
                ("+ leakage per cycle at 14 nm", leak_pj, "pJ", ""),
                ("= total per cycle", total, "pJ", f"{b.power_mW.sum():.1f} mW at {cfg.freq_hz / 1e6:.0f} MHz")):
            recs.append(dict(block=name, step=step, value=v, unit=unit,
                             note=note or ("per MAC-cycle" if name == "DPE" else "per lane-cycle")))
    return pd.DataFrame.from_records(recs)


#: Variants of :func:`sensitivity` (label -> RTLOptions changes).
VARIANTS: dict[str, dict] = {
    "default (real operands, nets at their fan-out, glitch 0.2, LP 45 nm row)": {},
    "glitch 0": dict(glitch=0.0),
    "glitch 0.4 (cited high)": dict(glitch=0.4),
    "every net at fan-out 2 (D122)": dict(fanout=2.0),
    "every net at fan-out 4": dict(fanout=4.0),
    "random operands": dict(operands="random"),
    "Stillmaker-Baas HP 45 nm row": dict(row45="hp"),
    "DPE register after every tree level": dict(levels_per_stage=1),
    "DPE register after every 2 tree levels": dict(levels_per_stage=2),
    "DPE register after every 3 tree levels": dict(levels_per_stage=3),
}


def sensitivity(lxe_summary: dict, cfg: VRexCoreConfig = VRexCoreConfig(),
                variants: dict[str, dict] | None = None) -> pd.DataFrame:
    """DPE and VPE power (mW), area (mm2) and energy per MAC-/lane-cycle (pJ) under each variant."""
    recs = []
    for label, kw in (variants or VARIANTS).items():
        opts = replace(RTLOptions(), **kw)
        if opts.operands == "random" and not all(u.get("random_activity") for b in lxe_summary["blocks"].values()
                                                 for u in b["units"].values()):
            continue
        df = lxe_rtl(lxe_summary, cfg, opts)
        s = df.groupby("block").agg(power_mW=("power_mW", "sum"), area_mm2=("area_mm2", "sum"))
        recs.append(dict(variant=label, DPE_mW=s.loc["DPE", "power_mW"], VPE_mW=s.loc["VPE", "power_mW"],
                         DPE_mm2=s.loc["DPE", "area_mm2"], VPE_mm2=s.loc["VPE", "area_mm2"],
                         DPE_pJ_per_MAC=s.loc["DPE", "power_mW"] / (cfg.freq_hz * 1e-9) / (cfg.n_dpe_h * cfg.n_dpe_w),
                         VPE_pJ_per_lane=s.loc["VPE", "power_mW"] / (cfg.freq_hz * 1e-9) / (cfg.n_vpe_h * cfg.n_vpe_w)))
    return pd.DataFrame.from_records(recs)

