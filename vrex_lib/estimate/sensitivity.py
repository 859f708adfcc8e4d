"""Which constants dominate the estimate, and how the result moves with the constants' source.

* :func:`tornado` -- multiply one group of constants rows by ``low`` and ``high`` (default x0.5 / x2)
  and record the metrics (total area, total power, DRE area and power shares).
* :func:`by_source` -- the whole estimate under each arithmetic source (Horowitz / Aladdin / geomean).
* :func:`by_microarch` -- the estimate under alternative micro-architecture assumptions.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from . import constants as C
from .core import MicroArch, block_table, core_breakdown, dre_share

#: (label, component glob, field) groups perturbed in the tornado plot.
GROUPS: tuple[tuple[str, str, str], ...] = (
    ("FP multiplier energy", "fp_multiplier", "energy_pJ"),
    ("FP multiplier area", "fp_multiplier", "area_um2"),
    ("FP adder energy", "fp_adder", "energy_pJ"),
    ("FP adder area", "fp_adder", "area_um2"),
    ("register energy", "register", "energy_pJ"),
    ("register area", "register", "area_um2"),
    ("SRAM access energy", "sram_*", "energy_pJ"),
    ("SRAM bit-cell area", "sram_bitcell", "area_um2"),
    ("SRAM array efficiency", "sram_array_efficiency", "area_um2"),
    ("int multiplier energy", "int_multiplier", "energy_pJ"),
    ("int multiplier area", "int_multiplier", "area_um2"),
    ("int adder energy", "int_adder", "energy_pJ"),
    ("int adder area", "int_adder", "area_um2"),
    ("comparator energy", "comparator", "energy_pJ"),
    ("counter energy", "counter", "energy_pJ"),
    ("XOR energy", "bitwise", "energy_pJ"),
)


def metrics(df: pd.DataFrame) -> dict[str, float]:
    s = dre_share(df)
    return dict(area_mm2=float(df["area_mm2"].sum()), power_mW=float(df["power_mW"].sum()),
                dre_area_pct=float(s["area_pct"]), dre_power_pct=float(s["power_pct"]))


def tornado(low: float = 0.5, high: float = 2.0, groups: Sequence[tuple[str, str, str]] = GROUPS,
            run: Callable[[], pd.DataFrame] = core_breakdown) -> pd.DataFrame:
    """One row per (group, metric): base, value at ``low``, value at ``high``, swing = |high - low|."""
    base = metrics(run())
    recs = []
    for label, glob, field in groups:
        vals = {}
        for k in (low, high):
            with C.perturbed(glob, field, k):
                vals[k] = metrics(run())
        for m in base:
            recs.append(dict(constant=label, component=glob, field=field, metric=m, base=base[m], low=vals[low][m],
                             high=vals[high][m], swing=abs(vals[high][m] - vals[low][m])))
    return pd.DataFrame.from_records(recs)


def by_source(sources: Sequence[str] = ("horowitz", "aladdin", "geomean")) -> pd.DataFrame:
    """Per-block area/power and DRE shares under each arithmetic source (long format)."""
    frames = []
    for s in sources:
        df = core_breakdown(arith=s)
        b = block_table(df).reset_index()
        b["source"] = s
        m = metrics(df)
        frames.append(pd.concat([b, pd.DataFrame([dict(block="Total", area_mm2=m["area_mm2"], power_mW=m["power_mW"],
                                                       area_pct=100.0, power_pct=100.0, source=s)])]))
    return pd.concat(frames, ignore_index=True)


VARIANTS: dict[str, MicroArch] = {
    "default": MicroArch(),
    "FP32 tree adders": MicroArch(dpe_tree_adder="fp32"),
    "pipeline every 2nd tree level": MicroArch(dpe_pipeline_every=2),
    "BF16 VPE lanes": MicroArch(vpe_lane_format="bf16"),
    "LXE SRAM 8 KB banks": MicroArch(lxe_sram_bank_bytes=8 * 1024),
    "LXE SRAM 128 KB banks": MicroArch(lxe_sram_bank_bytes=128 * 1024),
    "KVMU queue 128 x 64 b": MicroArch(kvmu_queue_depth=128),
    "WTU 32-bit scores": MicroArch(score_bits=32),
}


def by_microarch(variants: dict[str, MicroArch] = VARIANTS, arith: str = "horowitz") -> pd.DataFrame:
    return pd.DataFrame([dict(variant=k, **metrics(core_breakdown(arith=arith, uarch=v))) for k, v in variants.items()])
