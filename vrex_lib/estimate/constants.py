"""ONE table of component-action energies and component areas, each row with its source.

Pattern of Accelergy/hwcomponents (ERT: component -> action -> energy; ART: component -> area).
We cannot use ``hwcomponents`` itself: every release on PyPI requires Python >= 3.12 and this
project is pinned to 3.11 (``pip download --no-deps hwcomponents`` -> "Requires-Python >=3.12";
checked 2026-11-29). So the values are kept here, at their *native* node and supply, and scaled to
14 nm / 0.8 V by :mod:`vrex_lib.estimate.scaling` when used (:mod:`vrex_lib.estimate.library`).

Columns: component, action, energy_pJ (per action, native), area_um2 (native), leakage_uW (native),
node_nm, vdd, width (bits the row is for), source (key of :data:`SOURCES`), note.
Rows whose value we could not check against the primary document say **unverified** in the note.
"""
from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace

import pandas as pd

SOURCES: dict[str, str] = {
    "horowitz2014": "M. Horowitz, 'Computing's energy problem (and what we can do about it)', ISSCC 2014, "
                    "pp. 10-14, energy/area table (45 nm, 0.9 V). Energies as reproduced in Han et al. "
                    "(EIE, ISCA 2016) and PMC8934428 Table 3; the areas (um2) are the slide's as commonly "
                    "reproduced -- unverified against the primary here",
    "aladdin2014": "Y. S. Shao, B. Reagen, G.-Y. Wei, D. Brooks, 'Aladdin: a pre-RTL, power-performance "
                   "accelerator simulator', ISCA 2014; functional-unit constants of gem5-aladdin "
                   "power_func.h (TSMC 40G, 1 GHz) as listed in hwcomponents-library aladdin.py",
    "natarajan2014": "S. Natarajan et al., 'A 14nm logic technology featuring 2nd-generation FinFET ... "
                     "0.0588 um2 SRAM cell size', IEDM 2014",
    "nangate45": "NanGate FreePDK45 Open Cell Library (45 nm, 1.1 V nominal): cell areas NAND2_X1 0.798, "
                 "INV_X1 0.532, AND2_X1 1.064, XOR2_X1 1.596, MUX2_X1 1.862, DFF_X1 4.522 um2",
    "oconnor2017": "M. O'Connor et al., 'Fine-grained DRAM: energy-efficient DRAM for extreme bandwidth "
                   "systems', MICRO 2017 (HBM2 ~3.9 pJ/bit)",
    "vrex_paper": "V-Rex (arXiv 2512.12284) §VI.A: PCIe power 3 W per lane (an input of the paper)",
    "kioxia_bg6": "KIOXIA BG6 series client NVMe SSD product brief (PCIe 4.0 x4, M.2)",
    "dramsim3": "S. Li, Z. Yang, D. Reddy, A. Srivastava, B. Jacob, 'DRAMsim3: a cycle-accurate, thermal-capable "
                "DRAM simulator', IEEE Computer Architecture Letters 2020; IDD/VDD/timing of its shipped configs "
                "configs/LPDDR3_8Gb_x32_1866.ini and configs/HBM2_8Gb_x128.ini (github.com/umd-memsys/DRAMsim3); "
                "the V-Rex paper itself uses DRAMSim3 for HBM2e (§VI.A)",
    "kim2018_lpddr4": "M. Kim, J.-H. Chae, S. Choi, G.-M. Hong, H. Ko, D.-K. Jeong, S. Kim, 'A 4266 Mb/s/pin LPDDR4 "
                      "interface with an asynchronous feedback CTLE and an adaptive 3-step eye detection algorithm "
                      "for memory controller', IEEE TCAS-II 65(12), 2018 (65 nm): controller-side interface 1.83 "
                      "pJ/bit burst read, 5.68 pJ/bit burst write",
    "hbm_phy_vlsi2022": "'A 68.7-fJ/b/mm 375-GB/s/mm single-ended PAM-4 interface with per-pin training sequence for "
                        "the next-generation HBM controller', IEEE VLSI Symposium 2022 (IEEE Xplore 9830454), 40 nm: "
                        "0.41 pJ/b transceiver efficiency",
    "anandtech_xg6": "B. Tallis, 'The Toshiba XG6 1TB SSD review', AnandTech 2018, NVMe power-state table (PS0 6.0 W "
                     "active ... PS3 50 mW idle, PS4 5 mW); XG6 is the BG6's Kioxia client sibling",
    "pcie_l0": "PCIe link in L0 with no traffic keeps its SerDes running (logical idle symbols, SKP ordered sets); "
               "power is saved only in L0s/L1 under ASPM, which is typically disabled outside mobile systems "
               "(Intel lesswatts.org 'PCIe ASPM'); Intel Arria 10 Transceiver PHY User Guide, 'Power state "
               "management': the PIPE PHY implements no power saving in P0s/P1/P2 beyond TX electrical idle",
    "assumption": "vrex modelling assumption (no published source); varied in notebook 05's sensitivity",
}


@dataclass(frozen=True)
class ComponentRow:
    component: str
    action: str
    energy_pJ: float
    area_um2: float
    leakage_uW: float
    node_nm: float
    vdd: float
    width: int
    source: str
    note: str = ""


_H = dict(node_nm=45, vdd=0.9, source="horowitz2014")
# Aladdin's library is TSMC 40G; the nominal core supply of that process (0.9 V) is our reading,
# the source does not print it.
_A = dict(node_nm=40, vdd=0.9, source="aladdin2014")
_NAN = math.nan

ROWS: tuple[ComponentRow, ...] = (
    # --- Horowitz ISSCC 2014, 45 nm / 0.9 V: arithmetic (energy per op, area per unit). No leakage given.
    ComponentRow("int_adder", "add", 0.03, 36, 0.0, width=8, **_H),
    ComponentRow("int_adder", "add", 0.05, 67, 0.0, width=16, **_H),
    ComponentRow("int_adder", "add", 0.1, 137, 0.0, width=32, **_H),
    ComponentRow("int_multiplier", "multiply", 0.2, 282, 0.0, width=8, **_H),
    ComponentRow("int_multiplier", "multiply", 3.1, 3495, 0.0, width=32, **_H),
    ComponentRow("fp_adder", "add", 0.4, 1360, 0.0, width=16, **_H, note="FP16 (11-bit significand)"),
    ComponentRow("fp_adder", "add", 0.9, 4184, 0.0, width=32, **_H, note="FP32"),
    ComponentRow("fp_multiplier", "multiply", 1.1, 1640, 0.0, width=16, **_H, note="FP16"),
    ComponentRow("fp_multiplier", "multiply", 3.7, 7700, 0.0, width=32, **_H, note="FP32"),
    ComponentRow("sram_8kb", "read", 10.0, _NAN, 0.0, width=64, **_H, note="64-bit read, 8 KB array"),
    ComponentRow("sram_32kb", "read", 20.0, _NAN, 0.0, width=64, **_H, note="64-bit read, 32 KB array"),
    ComponentRow("sram_1mb", "read", 100.0, _NAN, 0.0, width=64, **_H, note="64-bit read, 1 MB array"),
    ComponentRow("dram_generic", "read", 1950.0, _NAN, 0.0, width=64, **_H,
                 note="1.3-2.6 nJ per 64-bit access, midpoint; not scaled (I/O dominated); reference only"),
    # --- Aladdin (TSMC 40G, 1 GHz): energy per op, area, leakage. Widths as characterised.
    ComponentRow("int_adder", "add", 0.21, 278, 2.4, width=32, **_A),
    ComponentRow("int_multiplier", "multiply", 12.68, 6350, 80.0, width=32, **_A, note="32x32; ~4x Horowitz"),
    ComponentRow("comparator", "compare", 0.02947, 71, 0.0251, width=32, **_A),
    ComponentRow("counter", "count", 0.25074, 495.5, 0.3213, width=32, **_A),
    ComponentRow("register", "clock", 0.009, 5.98, 0.074, width=1, **_A,
                 note="per bit per clocked cycle (internal+switching power at 1 GHz); leakage 7.4e-5 mW"),
    ComponentRow("bitwise", "xor", 0.0181, 50.4, 0.611, width=32, **_A, note="AND/OR/XOR unit"),
    ComponentRow("fp_adder", "add", 16.7, 4360, 53.1, width=32, **_A, note="FP32, 3-cycle pipelined"),
    ComponentRow("fp_multiplier", "multiply", 35.3, 8970, 120.0, width=32, **_A, note="FP32, 3-cycle pipelined"),
    # --- SRAM bit cell at the target node (area only).
    ComponentRow("sram_bitcell", "-", _NAN, 0.0588, 0.0, node_nm=14, vdd=0.8, width=1, source="natarajan2014",
                 note="Intel 14 nm high-density 6T cell"),
    ComponentRow("sram_array_efficiency", "-", _NAN, 0.70, 0.0, node_nm=14, vdd=0.8, width=0, source="assumption",
                 note="cell-area fraction of a large macro; CACTI-style, falls as sqrt(1 KB / size) for small "
                      "macros (area_um2 column holds the dimensionless efficiency) -- unverified"),
    # --- Standard cells (45 nm NanGate OCL) for the yosys cell-count cross-check.
    ComponentRow("nand2_eq", "-", _NAN, 0.798, 0.0, node_nm=45, vdd=1.1, width=1, source="nangate45",
                 note="NAND2_X1 = 1 gate equivalent"),
    ComponentRow("dff", "-", _NAN, 4.522, 0.0, node_nm=45, vdd=1.1, width=1, source="nangate45", note="DFF_X1"),
    # --- Off-chip: not scaled (interface/array dominated); pJ per bit transferred.
    ComponentRow("dram_lpddr5", "transfer", 5.0, _NAN, 0.0, node_nm=_NAN, vdd=_NAN, width=1, source="assumption",
                 note="midpoint of the often-quoted 4-6 pJ/bit for LPDDR4/5 -- unverified (docs/DECISIONS.md D25)"),
    ComponentRow("dram_hbm2e", "transfer", 3.9, _NAN, 0.0, node_nm=_NAN, vdd=_NAN, width=1, source="oconnor2017",
                 note="HBM2 figure used for HBM2e -- unverified"),
    ComponentRow("dram_ddr4", "transfer", 15.0, _NAN, 0.0, node_nm=_NAN, vdd=_NAN, width=1, source="assumption",
                 note="DDR4 DIMM incl. I/O, order of magnitude -- unverified"),
    # Accelerator-side DRAM interface (controller PHY): pJ per bit moved, on top of the DRAM device's own
    # transfer energy above (which includes the DRAM-side I/O). Not scaled (I/O dominated).
    ComponentRow("dram_phy_lpddr5", "transfer", 1.83, _NAN, 0.0, node_nm=65, vdd=_NAN, width=1,
                 source="kim2018_lpddr4", note="LPDDR4 controller interface, burst-read figure (the workload is "
                 "read-dominated; write is 5.68 pJ/bit); LPDDR4 used for LPDDR5 -- unverified as an LPDDR5 PHY"),
    ComponentRow("dram_phy_hbm2e", "transfer", 0.41, _NAN, 0.0, node_nm=40, vdd=_NAN, width=1,
                 source="hbm_phy_vlsi2022", note="research PAM-4 HBM-controller transceiver; a lower bound for an "
                 "HBM2e PHY + controller -- unverified as representative"),
    # Device powers: the leakage_uW column holds the device's (static) power draw.
    # DRAM background = active standby (VDD x IDD3N) + refresh (VDD x (IDD5AB - IDD3N) x tRFC / tREFI), per
    # device of the cited config; 'width' holds the device capacity in Gbit so power scales with capacity.
    ComponentRow("dram_lpddr5", "background", _NAN, _NAN, 34.66e3, node_nm=_NAN, vdd=1.2, width=8,
                 source="dramsim3", note="LPDDR3_8Gb_x32_1866: 1.2 V x 22 mA = 26.4 mW + refresh 1.2 V x (150-22) "
                 "mA x 196/3645 = 8.26 mW per 8 Gb x32 device; LPDDR3 config used for LPDDR5 (no LPDDR5 config "
                 "ships; LPDDR5 runs at lower VDD, so likely high) -- unverified"),
    ComponentRow("dram_hbm2e", "background", _NAN, _NAN, 81.6e3, node_nm=_NAN, vdd=1.2, width=8,
                 source="dramsim3", note="HBM2_8Gb_x128: 1.2 V x 55 mA = 66.0 mW + refresh 1.2 V x (250-55) mA x "
                 "260/3900 = 15.6 mW per 128-bit channel of 1 GB (channel_size 1024 MB); HBM2 used for HBM2e "
                 "(16 Gb dies would give about half per GB) -- unverified"),
    ComponentRow("ssd", "active", _NAN, _NAN, 4.0e6, node_nm=_NAN, vdd=_NAN, width=0, source="kioxia_bg6",
                 note="active power 4.0 W -- unverified against the datasheet (XG6 sibling: <4.5 W typical read)"),
    ComponentRow("ssd", "idle", _NAN, _NAN, 0.05e6, node_nm=_NAN, vdd=_NAN, width=0, source="anandtech_xg6",
                 note="idle (PS3) power 50 mW of the XG6 sibling; BG6's own table not found offline -- unverified "
                      "for the BG6"),
    # PCIe link with no traffic (L0 idle), as a fraction of the paper's 3 W/lane at full load (energy_pJ column
    # holds the dimensionless fraction).
    ComponentRow("pcie_lane", "idle_fraction", 1.0, _NAN, 0.0, node_nm=_NAN, vdd=_NAN, width=1, source="pcie_l0",
                 note="L0 without ASPM: SerDes keep transmitting idle symbols, so PHY power ~ full-load power; "
                      "an upper bound if ASPM L0s/L1 were enabled -- unverified (no measured per-lane idle figure)"),
)


def table() -> pd.DataFrame:
    """The constants table as a DataFrame (one row per component/action/width/source)."""
    return pd.DataFrame([asdict(r) for r in ROWS])


#: Rows whose area column holds a dimensionless factor, not an area: never node-scaled.
DIMENSIONLESS_AREA = ("sram_array_efficiency",)


def scaled_table() -> pd.DataFrame:
    """:func:`table` plus what the estimator uses at 14 nm / 0.8 V: ``scaled_energy_pJ`` (Stillmaker-Baas energy
    factor; rows without a node -- off-chip, device powers -- are not scaled) and ``scaled_area_um2`` (area factor;
    dimensionless rows as they are)."""
    from .scaling import area_factor, energy_factor

    t = table()
    e, a = [], []
    for r in t.itertuples():
        if math.isnan(r.node_nm):
            e.append(r.energy_pJ)
            a.append(r.area_um2)
            continue
        e.append(r.energy_pJ * energy_factor(r.node_nm, r.vdd) if not math.isnan(r.vdd) else math.nan)
        a.append(r.area_um2 if r.component in DIMENSIONLESS_AREA else r.area_um2 * area_factor(r.node_nm))
    return t.assign(scaled_energy_pJ=e, scaled_area_um2=a)


#: Active perturbations for sensitivity studies: (component glob, field) -> factor. Empty in normal use.
_PERTURB: dict[tuple[str, str], float] = {}
#: Callbacks that drop caches built from the rows (registered by the modules that cache).
CACHE_CLEARERS: list[Callable[[], None]] = []


@contextmanager
def perturbed(component_glob: str, field: str, factor: float) -> Iterator[None]:
    """Temporarily multiply ``field`` ('energy_pJ' | 'area_um2' | 'leakage_uW') of every row whose component
    matches ``component_glob`` (fnmatch, e.g. 'sram_*kb') by ``factor`` -- for the tornado plot."""
    if field not in ("energy_pJ", "area_um2", "leakage_uW"):
        raise ValueError(f"cannot perturb field {field!r}")
    if not any(fnmatch.fnmatch(r.component, component_glob) for r in ROWS):
        raise KeyError(f"no constants row matches {component_glob!r}")
    key = (component_glob, field)
    old = _PERTURB.get(key)
    _PERTURB[key] = factor * (old or 1.0)
    for clear in CACHE_CLEARERS:
        clear()
    try:
        yield
    finally:
        if old is None:
            _PERTURB.pop(key)
        else:
            _PERTURB[key] = old
        for clear in CACHE_CLEARERS:
            clear()


def _apply(r: ComponentRow) -> ComponentRow:
    for (glob, field), k in _PERTURB.items():
        if fnmatch.fnmatch(r.component, glob):
            r = replace(r, **{field: getattr(r, field) * k})
    return r


def rows(component: str, action: str | None = None, source: str | None = None) -> list[ComponentRow]:
    out = [_apply(r) for r in ROWS if r.component == component and (action is None or r.action == action)
           and (source is None or r.source == source)]
    if not out:
        raise KeyError(f"no constants row for component={component!r} action={action!r} source={source!r}; "
                       f"known components: {sorted({r.component for r in ROWS})}")
    return out
