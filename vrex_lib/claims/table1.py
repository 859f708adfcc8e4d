"""Table I's peak throughput, derived from the core configuration (§VI.F), as notebook 00's claim rows.

Peak = (DPE MACs + VPE MACs) × 2 FLOP × f per core, × the core count of V-Rex8 / V-Rex48. The inputs are the
paper's own (§VI.F, Table I core counts), so a miss on the paper's configuration is the paper's: the printed
peak lies outside the arithmetic on its stated configuration (``paper-inconsistent``); on another configuration
it is that configuration (``model``).
"""
from __future__ import annotations

from .. import paper, report
from ..config import VRexCoreConfig

#: Table I's systems and their core counts (``table1.n_cores.*``, specifications the paper defines).
SYSTEMS: tuple[str, ...] = ("vrex8", "vrex48")
_CORE_FIELDS = ("n_dpe_h", "n_dpe_w", "n_vpe_h", "n_vpe_w")


def config_differences(core: VRexCoreConfig) -> list[str]:
    """The fields of ``core`` that enter the peak and differ from §VI.F (``core.*`` inputs), as 'name=ours (paper)'."""
    diffs = [f"{f}={getattr(core, f)} (§VI.F {paper.spec(f'core.{f}'):g})" for f in _CORE_FIELDS
             if getattr(core, f) != paper.spec(f"core.{f}")]
    if core.freq_hz != paper.spec("core.freq_mhz") * 1e6:
        diffs.append(f"freq={core.freq_hz / 1e6:g} MHz (§VI.F {paper.spec('core.freq_mhz'):g} MHz)")
    return diffs


def dpe_only_tflops(core: VRexCoreConfig) -> float:
    """Peak TFLOPS of one core counting the DPE's MAC trees alone (no VPE)."""
    return 2 * core.n_dpe_h * core.n_dpe_w * core.freq_hz / 1e12


def _peak_cause(core: VRexCoreConfig) -> tuple[str, str]:
    diffs = config_differences(core)
    if diffs:
        return "model", "the core configuration differs from §VI.F: " + ", ".join(diffs)
    return ("paper-inconsistent", "the printed peak is outside (DPE + VPE) MACs x 2 FLOP x f of §VI.F's own "
            "configuration: row core.peak_tflops (DPE + VPE) and row derived.peak_tflops.vrex8_dpe_only (DPE alone) "
            "show both countings")


def peak_rows(core: VRexCoreConfig | None = None) -> list[report.Row]:
    """Rows of ``table1_peak``: per-core peak, V-Rex8 / V-Rex48 peak (judged), V-Rex8 DPE-only (INFO)."""
    core = core or VRexCoreConfig()
    per_core_tflops = core.peak_flops / 1e12
    cause, detail = _peak_cause(core)
    same = "arithmetic on §VI.F's configuration ((DPE + VPE) MACs x 2 FLOP x 800 MHz x cores): it checks the counting, "
    same += "not a measurement"
    rows = [report.row("core.peak_tflops", per_core_tflops, quantity="peak per core (DPE+VPE)", cause=cause,
                       cause_detail=detail, consistent=same)]
    for name in SYSTEMS:
        n = paper.spec(f"table1.n_cores.{name}")
        rows.append(report.row(f"table1.peak_tflops.{name}", n * per_core_tflops, quantity=f"peak {name}",
                               cause=cause, cause_detail=detail, consistent=same))
    n8 = paper.spec("table1.n_cores.vrex8")
    rows.append(report.info_row("derived.peak_tflops.vrex8_dpe_only", "peak V-Rex8, DPE only", "TFLOPS",
                                n8 * dpe_only_tflops(core),
                                note="52.4 would mean Table I does not count the VPE; 53.3 means it does"))
    return rows
