"""Cross-check of the DRE's logic area against yosys cell counts of our own converted Verilog.

Each yosys generic cell ($_AND_, $_XOR_, $_MUX_, $_DFF_P_, ...) is weighted by the area of the
matching NanGate 45 nm Open Cell Library cell (X1 drive) in NAND2 equivalents (GE), and one GE is
the NanGate NAND2_X1 (0.798 um2) scaled 45 -> 14 nm with the Stillmaker-Baas area factor (x0.17):
**0.136 um2 per GE at 14 nm**. Flip-flops with enable / synchronous reset add the MUX2 / AND2 that
a library without such flops needs. No wiring or placement overhead (pre-layout, as the paper's DC).
Kept memories (``$mem*`` cells) weigh 0 here: on both sides the SRAMs are costed by the SRAM model. If a recipe
maps memories to flip-flops instead, the logic area includes them -- :func:`yosys_area` reports
``memory_in_flops`` so the notebook can say so.

Input: ``summary.json`` written by ``vrex_lib.hw.verify.run`` (per-block cell counts by type, flip-flops,
memory bits). The reader accepts ``{"blocks": {name: {...}}}`` or ``{name: {...}}`` with the counts
under ``cells_by_type`` (or ``cells`` when that is a dict) and memory under ``memory_bits``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from . import constants as C
from .scaling import TARGET_NODE_NM, area_factor

# NanGate 45 nm X1 cell areas (um2) by yosys internal cell; GE = area / NAND2_X1 (0.798 um2).
_NAND2, _INV, _AND2, _XOR2, _MUX2, _AOI21, _AOI22, _DFF, _DFFR = 0.798, 0.532, 1.064, 1.596, 1.862, 1.064, 1.330, \
    4.522, 5.320
CELL_AREA_45NM_UM2: dict[str, float] = {
    "$_NOT_": _INV, "$_BUF_": _INV, "$_NAND_": _NAND2, "$_NOR_": _NAND2, "$_AND_": _AND2, "$_OR_": _AND2,
    "$_ANDNOT_": _AND2, "$_ORNOT_": _AND2, "$_XOR_": _XOR2, "$_XNOR_": _XOR2, "$_MUX_": _MUX2,
    "$_NMUX_": _MUX2, "$_AOI3_": _AOI21, "$_OAI3_": _AOI21, "$_AOI4_": _AOI22, "$_OAI4_": _AOI22,
}


def cell_area_45nm_um2(cell: str) -> float:
    """NanGate-45 area of one yosys generic cell; flip-flop variants by their features."""
    if cell in CELL_AREA_45NM_UM2:
        return CELL_AREA_45NM_UM2[cell]
    if cell.startswith("$mem"):
        return 0.0  # kept memories ($mem_v2 under `memory -nomap`): costed as SRAM from memory_bits, not as cells
    c = cell.upper()
    if "DFF" in c or "DLATCH" in c:
        area = _DFF
        if c.startswith(("$_DFFR", "$_DFFSR", "$_ADFF")):
            area = _DFFR  # async reset flop
        if "SDFF" in c:
            area += _AND2  # synchronous reset gate
        if "E_" in c.replace("$_", "") or c.endswith("E") or "DFFE" in c or "SDFFCE" in c:
            area += _MUX2  # enable = feedback mux
        return area
    raise KeyError(f"yosys cell {cell!r} has no NanGate weight; add it to CELL_AREA_45NM_UM2")


def ge_area_um2() -> float:
    """Area of one NAND2 gate equivalent at 14 nm (NanGate NAND2_X1 x Stillmaker-Baas 45->14)."""
    row = C.rows("nand2_eq")[0]
    return row.area_um2 * area_factor(row.node_nm, TARGET_NODE_NM)


def _blocks(summary: dict) -> dict:
    return summary.get("blocks", summary)


def _cells(entry: dict) -> dict[str, int]:
    for k in ("cells_by_type", "cell_types", "cells"):
        if isinstance(entry.get(k), dict):
            return {str(t): int(n) for t, n in entry[k].items()}
    raise ValueError("summary.json block entry has no cell counts by type ('cells_by_type' or 'cells' dict); "
                     "regenerate it with `python -m vrex_lib.hw verify --out results/hdl`")


def yosys_area(summary: dict | str | Path) -> pd.DataFrame:
    """Per-block area at 14 nm from yosys cell counts: columns block, cells, gate_equivalents, area_um2,
    flip_flops, memory_bits, memory_in_flops, logic_area_um2, note (a block without cell counts is a row with no
    area and the reason in ``note``)."""
    if not isinstance(summary, dict):
        p = Path(summary)
        try:
            summary = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"cannot read yosys summary {p}: {e}; regenerate it with "
                             f"`python -m vrex_lib.hw verify --out {p.parent}`") from e
    ge = ge_area_um2()
    recs = []
    for name, entry in _blocks(summary).items():
        if not isinstance(entry, dict):
            continue
        try:
            cells = _cells(entry)
        except ValueError as e:  # kept as a row with no area and the reason: never a silent skip
            recs.append(dict(block=name, note=str(e)))
            continue
        area45 = sum(n * cell_area_45nm_um2(t) for t, n in cells.items())
        n_ge = area45 / _NAND2
        ffs = sum(n for t, n in cells.items() if "DFF" in t.upper())
        mem_bits = int(entry.get("memory_bits", entry.get("mem_bits", 0)) or 0)
        kept = any(t.startswith("$mem") for t in cells)
        in_ffs = bool(mem_bits and not kept and ffs >= mem_bits)
        # Memory mapped to enable-flops: take those flops out again (their read muxes stay in -- an overestimate).
        mem_um2 = mem_bits * cell_area_45nm_um2("$_DFFE_PP_") / _NAND2 * ge if in_ffs else 0.0
        recs.append(dict(block=name, cells=sum(cells.values()), gate_equivalents=n_ge, area_um2=n_ge * ge,
                         flip_flops=int(entry.get("flip_flops", ffs)), memory_bits=mem_bits, memory_in_flops=in_ffs,
                         logic_area_um2=n_ge * ge - mem_um2, note=""))
    return pd.DataFrame.from_records(recs, columns=["block", "cells", "gate_equivalents", "area_um2", "flip_flops",
                                                    "memory_bits", "memory_in_flops", "logic_area_um2", "note"])


def model_logic_area_um2(breakdown: pd.DataFrame) -> pd.Series:
    """Logic (non-SRAM) area per DRE block from a :func:`~vrex_lib.estimate.core.core_breakdown` frame."""
    dre = breakdown[(breakdown["group"] == "DRE") & ~breakdown["component"].str.contains("SRAM")]
    return dre.groupby("block", sort=False)["area_mm2"].sum() * 1e6


def unsynthesised(path: Path) -> str:
    """Why the ``vrex_lib.hw.verify`` summary at ``path`` holds no cell counts ('' when every block has them): the
    smoke size never synthesises, and no size does without yosys. A file that is not such a summary is a
    ValueError naming it."""
    try:
        summary = json.loads(Path(path).read_text())
        blocks = _blocks(summary)
        missing = [b for b, e in blocks.items()
                   if not isinstance(e.get("cells_by_type") or (e.get("synth") or {}).get("cells_by_type"), dict)]
    except (OSError, ValueError, AttributeError, TypeError) as err:
        raise ValueError(f"{path}: not a summary.json of vrex_lib.hw.verify ({type(err).__name__}); regenerate it "
                         f"with `python -m vrex_lib.hw verify --out {Path(path).parent}`") from None
    if not missing and blocks:
        return ""
    yosys = (summary.get("tools") or {}).get("yosys")
    cause = ("yosys was not installed when it ran" if not yosys else
             f"it was written at size {summary.get('size')!r}, which does not synthesise")
    return (f"{path} has no cell counts for {', '.join(missing) or 'any block'} ({cause}); "
            f"`python -m vrex_lib.hw verify --out {Path(path).parent}` (size default) writes them")


def ensure_summary(summary_path: Path, *, run_if_missing: bool) -> tuple[Path | None, str]:
    """(path of a yosys summary with every block's cell counts, '') or (None, why not): a summary without them
    (:func:`unsynthesised`, e.g. notebook 04's in the smoke profile) is not one. Runs ``vrex_lib.hw.verify.run``
    into the summary's folder when the file is missing, ``run_if_missing`` is set and yosys is installed; a
    failure of that run propagates (it is a bug to fix, not a reason to skip)."""
    p = Path(summary_path)
    if p.is_file():
        why = unsynthesised(p)
        return (None, why) if why else (p, "")
    if not run_if_missing:
        return None, f"no yosys summary at {p}; run `python -m vrex_lib.hw verify --out {p.parent}` first"
    from ..hw import verify

    if not verify.tools_available()["yosys"]:
        return None, "yosys is not installed (apt-get install yosys); the cross-check needs it"
    verify.run(p.parent)
    if not p.is_file():
        return None, f"vrex_lib.hw.verify.run wrote no {p.name} in {p.parent}"
    why = unsynthesised(p)
    return (None, why) if why else (p, "")


def dre_area_share_with_yosys(breakdown: pd.DataFrame, ys: pd.DataFrame) -> dict | None:
    """The DRE area share again, with the component model's logic area of each synthesised DRE block replaced by
    its yosys logic area (SRAMs stay the SRAM model's on both sides). None when no block has both numbers.

    Returns dict(area_pct, blocks, delta_mm2)."""
    model = model_logic_area_um2(breakdown)
    ys = ys.assign(Block=ys["block"].str.upper().str.replace("_TOP", "", regex=False))
    both = ys.merge(model.rename("model_logic_um2"), left_on="Block", right_index=True).dropna(
        subset=["logic_area_um2", "model_logic_um2"])
    if both.empty:
        return None
    delta_mm2 = float((both.logic_area_um2 - both.model_logic_um2).sum()) * 1e-6
    dre_mm2 = float(breakdown[breakdown.group == "DRE"].area_mm2.sum()) + delta_mm2
    return dict(area_pct=100 * dre_mm2 / (float(breakdown.area_mm2.sum()) + delta_mm2), blocks=list(both.Block),
                delta_mm2=delta_mm2)
