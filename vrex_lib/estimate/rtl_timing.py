"""The timing argument of the DPE and VPE pipelines (``docs/DECISIONS.md D283``): each synthesised unit's longest
path in NanGate 45 nm delays, summed stage by stage, scaled to 14 nm / 0.8 V with Stillmaker-Baas.

Per unit: a static longest path through its generic-cell netlist, each cell adding the slowest arc of its NanGate
X1 cell at the load of its net (fan-out x mean input capacitance + the wire load; :data:`.constants.CELL_DELAYS`).
A stage is a register's CK -> Q, the units in series up to the next register (their longest paths added: an upper
bound, the worst paths need not meet), and the setup time. The pre-layout netlist is yosys's area-oriented mapping
at X1 drive (no gate sizing, no timing-driven restructuring), so every figure is an upper bound of what a
timing-driven flow (the paper's Design Compiler) would reach with the same RTL.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..hw import lxe as hw_lxe
from . import constants as C
from .cells import decompose, load_cap_ff
from .scaling import ROWS45, delay_factor

CYCLE_PS = 1250.0  # 800 MHz


def cell_delay_ps(yosys_type: str, fanout: int) -> float:
    """Delay (ps, 45 nm / 1.1 V) of one generic cell driving ``fanout`` cell inputs (and their wire)."""
    cells = decompose(yosys_type)
    load = load_cap_ff(max(1, fanout))
    return sum(C.CELL_DELAYS[c].intrinsic_ps + C.CELL_DELAYS[c].slope_ps_per_fF * load for c in cells)


def unit_paths(lxe_summary: dict, out: str | Path) -> dict[str, dict]:
    """unit -> longest path (delay_ps at 45 nm, cells on it) of every synthesised unit of the summary in ``out``."""
    res = {}
    for blk in lxe_summary["blocks"].values():
        for u, e in blk["units"].items():
            if u not in res:
                res[u] = hw_lxe.load_netlist(Path(out), e).longest_path(cell_delay_ps)
    return res


def _stages(lxe_summary: dict, levels_per_stage: int | None) -> list[tuple[str, str, list[str]]]:
    dpe = lxe_summary["blocks"]["dpe"]["params"]
    L = int(math.log2(dpe["n"]))
    k = levels_per_stage or dpe["levels_per_stage"]
    regs = [lv for lv in range(1, L + 1) if lv % k == 0 or lv == L]
    st = [("DPE", "input register -> multiplier -> product register", ["bf16_mul"])]
    prev = 0
    for lv in regs:
        adders = ["product_add" if x == 1 else "fp32_add" for x in range(prev + 1, lv + 1)]
        st.append(("DPE", f"adder tree level{'s' if lv > prev + 1 else ''} {prev + 1}" + (f"-{lv}" if lv > prev + 1
                                                                                        else ""), adders))
        prev = lv
    st.append(("DPE", "accumulator loop (add + select)", ["dpe_acc"]))
    st += [("VPE", "operands -> multiplier | rotation -> misc", ["fp32_mul|rot_mux+vpe_misc"]),
           ("VPE", "sign flip -> adder -> select", ["vpe_glue", "fp32_add", "vpe_glue"])]
    return st


def stage_table(lxe_summary: dict, out: str | Path, levels_per_stage: int | None = None) -> pd.DataFrame:
    """Per pipeline stage: its units, delay at 45 nm (ps, with the flip-flops' CK -> Q and setup), at 14 nm under
    each Stillmaker-Baas 45 nm row, and whether it fits 800 MHz (1,250 ps). ``levels_per_stage`` recounts the DPE's
    tree stages for another register spacing."""
    paths = unit_paths(lxe_summary, out)
    ff = C.CELL_DELAYS["DFF_X1"]
    overhead = ff.intrinsic_ps + ff.slope_ps_per_fF * load_cap_ff(1) + ff.setup_ps
    recs = []
    for block, name, units in _stages(lxe_summary, levels_per_stage):
        d = overhead
        for u in units:
            alts = [sum(paths[x]["delay_ps"] for x in alt.split("+")) for alt in u.split("|")]
            d += max(alts)
        rec = dict(block=block, stage=name, units=" + ".join(units), cells_on_path=sum(
            max(sum(paths[x]["cells_on_path"] for x in alt.split("+")) for alt in u.split("|")) for u in units),
            delay_ps_45nm=d)
        for row in ROWS45:
            t = d * delay_factor(45, 1.1, row45=row)
            rec[f"delay_ps_14nm_{row}"] = t
            rec[f"meets_800MHz_{row}"] = bool(t <= CYCLE_PS)
        recs.append(rec)
    return pd.DataFrame.from_records(recs)


def pipeline_summary(lxe_summary: dict, out: str | Path) -> dict:
    """The DPE's pipeline depth, its worst stage and whether every stage meets 800 MHz (LP and HP 45 nm rows)."""
    t = stage_table(lxe_summary, out)
    d = lxe_summary["blocks"]["dpe"]
    return dict(dpe_latency_cycles=d["latency"], dpe_levels_per_stage=d["params"]["levels_per_stage"],
                vpe_latency_cycles=lxe_summary["blocks"]["vpe"]["latency"],
                worst_stage=t.loc[t.delay_ps_45nm.idxmax(), "stage"], worst_ps_45nm=float(t.delay_ps_45nm.max()),
                worst_ps_14nm_lp=float(t.delay_ps_14nm_lp.max()), worst_ps_14nm_hp=float(t.delay_ps_14nm_hp.max()),
                meets_lp=bool(t.meets_800MHz_lp.all()), meets_hp=bool(t.meets_800MHz_hp.all()))
