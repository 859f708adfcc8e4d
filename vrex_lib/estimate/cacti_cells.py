"""The second estimate of one core: memories from CACTI, DRE logic from its synthesized cells, datapaths from
per-operation energies with a clock network and cited wire/glitch shares.

Per Table III block (docs/DECISIONS.md D123):

* **On-chip memory, HCU/WTU memories**: CACTI arrays (:mod:`.memories`) at full traffic.
* **HCU, WTU, KVMU logic**: the yosys cells of our own converted Verilog (``summary.json`` of
  ``vrex_lib.hw.verify``) x NanGate cell energies (:mod:`.cells`) x the toggle rates measured on that Verilog
  (``vrex_lib.hw.activity.block_activity``), plus the cited glitch share (the vector runs are zero-delay).
* **DPE, VPE** (no RTL here): the component model's datapath energies (Horowitz per-operation, scaled) x
  (1 + glitch share) / (1 - wire share), its leakage; every pipeline/lane register as a NanGate DFF_X1 clocked every
  cycle with its clock tree (:func:`.cells.flop_power_mw`), its stored bits changing with probability
  ``datapath_alpha`` (random BF16 operands: 0.5).

The wire and glitch shares are the cited ranges of the constants table (``wire_share`` 0-0.5, Magen et al. 2004;
``glitch_share`` 0-0.4): ``point='low'|'mid'|'high'`` takes both ends or their midpoints. Nothing here is fitted
to Table III.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..config import ReSVConfig, VRexCoreConfig
from . import constants as C
from .cells import DEFAULT_FANOUT, ActivityLike, cell_energy, flop_power_mw, logic_power
from .core import (DRE_BLOCKS, GROUP, TABLE3_BLOCKS, Activity, CorePowerModel, MicroArch, core_breakdown,
                   lxe_traffic_bits)
from .memories import SramTech, memory_table

POINTS = ("low", "mid", "high")
_REGISTER_ROWS = ("pipeline registers (bits)", "lane registers (bits)")


@dataclass(frozen=True)
class Overheads:
    """Shares the per-operation energies leave out: ``wire_share`` of all dynamic power is in interconnect,
    ``glitch_share`` is extra dynamic power from glitches (fraction of the functional dynamic power)."""

    wire_share: float
    glitch_share: float

    @classmethod
    def cited(cls, point: str = "mid") -> "Overheads":
        if point not in POINTS:
            raise ValueError(f"overhead point {point!r}: choose one of {POINTS}")
        w = [C.rows("wire_share", a)[0].energy_pJ for a in ("low", "high")]
        g = [C.rows("glitch_share", a)[0].energy_pJ for a in ("low", "high")]
        pick = {"low": lambda r: r[0], "high": lambda r: r[1], "mid": lambda r: 0.5 * (r[0] + r[1])}[point]
        return cls(pick(w), pick(g))

    @property
    def datapath_factor(self) -> float:
        """Multiplier on a datapath's per-operation dynamic power: glitches on top, wires as the missing share."""
        return (1.0 + self.glitch_share) / (1.0 - self.wire_share)


def load_summary(summary: dict | str | os.PathLike) -> dict:
    """The ``blocks`` of a ``vrex_lib.hw.verify`` summary.json (a dict or its path)."""
    if not isinstance(summary, dict):
        p = Path(summary)
        try:
            summary = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot read yosys summary {p}: {e}; regenerate it with "
                             f"`python -m vrex_lib.hw verify --out {p.parent}`") from e
    return summary.get("blocks", summary)


def _synth_cells(blocks: dict, name: str) -> dict[str, int]:
    entry = blocks.get(name.lower()) or {}
    cells = entry.get("cells_by_type") or (entry.get("synth") or {}).get("cells_by_type")
    if not cells:
        raise ValueError(f"yosys summary has no cells_by_type for block {name.lower()!r}; regenerate it with "
                         "`python -m vrex_lib.hw verify --out results/hdl`")
    return {str(k): int(v) for k, v in cells.items()}


def _datapath_rows(cfg: VRexCoreConfig, ua: MicroArch, resv: ReSVConfig, ov: Overheads, datapath_alpha: float,
                   fanout: float) -> list[dict]:
    """DPE and VPE: component datapath x overheads; registers as DFF_X1 flip-flops with their clock tree."""
    comp = core_breakdown(cfg, Activity(), uarch=ua, resv=resv)
    recs = []
    for blk in ("DPE", "VPE"):
        b = comp[comp.block == blk]
        dp = b[~b.component.isin(_REGISTER_ROWS)]
        regs = b[b.component.isin(_REGISTER_ROWS)]
        n_ff = float(regs["count"].sum())
        fl = flop_power_mw(n_ff, cfg.freq_hz, datapath_alpha, fanout)
        recs += [dict(block=blk, part="datapath (per-operation energies)", source="component x overheads",
                      area_mm2=float(dp.area_mm2.sum()), dynamic_mW=float(dp.dynamic_mW.sum()) * ov.datapath_factor,
                      clock_mW=0.0, leakage_mW=float(dp.leakage_mW.sum()),
                      note=f"x{ov.datapath_factor:.3f} = (1 + glitch {ov.glitch_share:g}) / (1 - wire "
                           f"{ov.wire_share:g})"),
                 dict(block=blk, part=f"{n_ff:.0f} register bits (DFF_X1) + clock tree", source="cells",
                      area_mm2=n_ff * cell_energy("DFF_X1", fanout).area_um2 * 1e-6, dynamic_mW=fl["data_mw"],
                      clock_mW=fl["clock_mw"], leakage_mW=fl["leakage_mw"],
                      note=f"stored bits change with probability {datapath_alpha:g} per cycle")]
    return recs


def cacti_cells_breakdown(cfg: VRexCoreConfig = VRexCoreConfig(), *, activities: Mapping[str, ActivityLike],
                          summary: dict | str | os.PathLike, uarch: MicroArch = MicroArch(),
                          resv: ReSVConfig = ReSVConfig(), tech: SramTech = SramTech(), point: str = "mid",
                          fanout: float = DEFAULT_FANOUT, datapath_alpha: float = 0.5,
                          cache_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """Per-part area and full-activity power of one core under this model.

    ``activities``: 'hcu' | 'wtu' | 'kvmu' -> a ``BlockActivity`` (vrex_lib.hw.activity); ``summary``: yosys cell
    counts. Returns columns block, group, part, source, area_mm2, dynamic_mW, clock_mW, leakage_mW, power_mW,
    note (one or more rows per Table III block)."""
    missing = [b for b in DRE_BLOCKS if b.lower() not in activities]
    if missing:
        raise ValueError(f"no measured activity for {missing}: pass vrex_lib.hw.activity.block_activity(...) for "
                         "each DRE block")
    if not 0.0 <= datapath_alpha <= 1.0:
        raise ValueError(f"datapath_alpha={datapath_alpha} must be in [0, 1]")
    ov = Overheads.cited(point)
    blocks = load_summary(summary)
    recs = _datapath_rows(cfg, uarch, resv, ov, datapath_alpha, fanout)
    mem = memory_table(cfg, uarch, n_hp=resv.n_hp, tech=tech, cache_dir=cache_dir)
    for r in mem.itertuples():
        recs.append(dict(block=r.block, part=f"{r.memory} ({r.instances} x {r.size_bytes} B, {r.width_bits}-bit)",
                         source="cacti", area_mm2=r.area_mm2, dynamic_mW=r.dynamic_mW, clock_mW=0.0,
                         leakage_mW=r.leakage_mW, note=f"CACTI {r.node_nm_cacti} nm x S-B E {r.energy_factor:.3f}"))
    for blk in DRE_BLOCKS:
        act = activities[blk.lower()]
        lp = logic_power(blk, _synth_cells(blocks, blk), act, cfg.freq_hz, fanout=fanout, glitch=ov.glitch_share)
        recs.append(dict(block=blk, part=f"logic: {lp.n_cells} cells ({lp.n_ff} flip-flops)", source="cells",
                         area_mm2=lp.area_um2 * 1e-6, dynamic_mW=lp.dynamic_mw,
                         clock_mW=lp.clock_mw, leakage_mW=lp.leakage_mw,
                         note=f"alpha {lp.alpha:.4f}, flop alpha {lp.flop_alpha:.4f} ({lp.source}); glitch "
                              f"{ov.glitch_share:g}"))
    df = pd.DataFrame.from_records(recs)
    df["power_mW"] = df.dynamic_mW + df.clock_mW + df.leakage_mW
    df.insert(1, "group", df.block.map(GROUP))
    order = {b: i for i, b in enumerate(TABLE3_BLOCKS)}
    return df.sort_values("block", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def measured_activities(n_vectors: int = 2000, seed: int = 0) -> dict[str, ActivityLike]:
    """Toggle counts of the HCU, WTU and KVMU Verilog under ``n_vectors`` vectors of real traces
    (``vrex_lib.hw.activity.block_activity``); a checkout without that module is an error naming it."""
    try:
        from ..hw.activity import block_activity  # noqa: PLC0415  (optional until the hw layer provides it)
    except ModuleNotFoundError as e:
        raise RuntimeError("vrex_lib.hw.activity (toggle counts of the DRE's Verilog vector runs) is missing from "
                           "this checkout; the CACTI + cells estimate needs it for HCU/WTU/KVMU power -- update "
                           "the checkout (it is part of the hw layer)") from e
    return {b.lower(): block_activity(b.lower(), n_vectors=n_vectors, seed=seed) for b in DRE_BLOCKS}


#: Variants of :func:`sensitivity` (label -> keyword arguments of :func:`cacti_cells_breakdown`).
VARIANTS: dict[str, dict] = {
    "default (mid shares, fan-out 2)": {},
    "wire/glitch shares low (0, 0)": dict(point="low"),
    "wire/glitch shares high (0.5, 0.4)": dict(point="high"),
    "fan-out 1": dict(fanout=1.0),
    "fan-out 4": dict(fanout=4.0),
    "datapath register activity 0.25": dict(datapath_alpha=0.25),
    "SRAM itrs-lstp cells and periphery": dict(tech=SramTech(cell="itrs-lstp", periph="itrs-lstp")),
    "SRAM at 360 K": dict(tech=SramTech(temperature_k=360)),
    "LXE SRAM 8 KB banks": dict(uarch=MicroArch(lxe_sram_bank_bytes=8 * 1024)),
    "LXE SRAM 128 KB banks": dict(uarch=MicroArch(lxe_sram_bank_bytes=128 * 1024)),
}


def sensitivity(cfg: VRexCoreConfig = VRexCoreConfig(), *, activities: Mapping[str, ActivityLike],
                summary: dict | str | os.PathLike, variants: Mapping[str, dict] | None = None,
                cache_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """Core area/power, DRE shares and per-block power of :func:`cacti_cells_breakdown` under each variant."""
    recs = []
    for label, kw in (variants or VARIANTS).items():
        df = cacti_cells_breakdown(cfg, activities=activities, summary=summary, cache_dir=cache_dir, **kw)
        blk = df.groupby("block", sort=False).power_mW.sum()
        dre = df[df.group == "DRE"]
        recs.append(dict(variant=label, area_mm2=df.area_mm2.sum(), power_mW=df.power_mW.sum(),
                         dre_area_pct=100 * dre.area_mm2.sum() / df.area_mm2.sum(),
                         dre_power_pct=100 * dre.power_mW.sum() / df.power_mW.sum(),
                         **{f"{b}_mW": float(blk.get(b, 0.0)) for b in TABLE3_BLOCKS}))
    return pd.DataFrame.from_records(recs)


def power_model(df: pd.DataFrame, cfg: VRexCoreConfig = VRexCoreConfig()) -> CorePowerModel:
    """The :class:`~vrex_lib.estimate.core.CorePowerModel` of a :func:`cacti_cells_breakdown` frame: its leakage
    and clock terms, and each activity source's full-activity dynamic power (the LXE memory's split between the DPE
    and the VPE by their share of its traffic), so the performance simulator can run this estimate."""
    dyn = df.groupby("block").dynamic_mW.sum()
    dpe_bits, vpe_bits = (sum(lxe_traffic_bits(cfg, d, v)) for d, v in ((1.0, 0.0), (0.0, 1.0)))
    mem = float(dyn.get("On-chip memory", 0.0))
    per = dict(dpe=float(dyn.get("DPE", 0.0)) + mem * dpe_bits / (dpe_bits + vpe_bits),
               vpe=float(dyn.get("VPE", 0.0)) + mem * vpe_bits / (dpe_bits + vpe_bits),
               **{b.lower(): float(dyn.get(b, 0.0)) for b in DRE_BLOCKS})
    return CorePowerModel(leakage_w=float(df.leakage_mW.sum()) * 1e-3, clock_w=float(df.clock_mW.sum()) * 1e-3,
                          dynamic_w=tuple((s, per[s] * 1e-3) for s in CorePowerModel.SOURCES))
