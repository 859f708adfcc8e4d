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

import numpy as np
import pandas as pd

from .. import memtech

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
    "nangate45_lib": "NanGate FreePDK45 Open Cell Library, NangateOpenCellLibrary_typical.lib (revision 1.0, "
                     "2011-02-10; typical corner TypTyp, 1.1 V, 25 C; NLDM tables), as distributed in OpenSTA "
                     "(github.com/The-OpenROAD-Project/OpenSTA, examples/nangate45_typ.lib.gz at d1b2b39): X1 cells' "
                     "area, cell_leakage_power, input pin capacitance, internal_power tables and the default wire "
                     "load '5K_hvratio_1_1'",
    "cacti7": "CACTI 7 (Balasubramonian, Kahng, Muralimanohar, Shafiee, Srinivas, ACM TACO 14(2), 2017) with "
              "CACTI-IO (Jouppi, Kahng, Muralimanohar, Srinivas, ICCAD 2012), as shipped in the zigzag-dse 3.9.1 "
              "wheel: run by vrex_lib.estimate.cacti",
    "magen2004": "N. Magen, A. Kolodny, U. Weiser, N. Shamir, 'Interconnect-power dissipation in a microprocessor', "
                 "SLIP 2004: interconnect is over 50 % of the dynamic power of a 130 nm Intel microprocessor "
                 "(abstract)",
    "synopsys_glitch": "Synopsys, 'What is glitch power?' (synopsys.com/ai/what-is-glitch-power.html): glitches "
                       "can add up to 40 % to dynamic power; H. Veendrick, 'Nanometer CMOS ICs' (textbook), "
                       "glitching up to 30 % in an 8-bit ripple adder -- both unverified against the primary here",
    "jedec_lpddr5": "JEDEC JESD209-5 (LPDDR5): data rates up to 6400 MT/s per pin, VDDQ 0.5 V -- unverified "
                    "against the standard here (not available offline)",
    "jedec_ddr4": "JEDEC JESD79-4 (DDR4): DDR4-3200 = 3200 MT/s per pin on a 1600 MHz clock, x8 devices with one "
                  "differential DQS pair each -- unverified against the standard here",
    "stillmaker2017": "A. Stillmaker, B. Baas, 'Scaling equations for the accurate prediction of CMOS device "
                      "performance from 180 nm to 7 nm', Integration 58 (2017): one set of node/Vdd fits for all "
                      "circuits; their 16 nm and smaller nodes are FinFET predictions (our reading, unverified "
                      "against the primary here), used for SRAM as for logic as Accelergy/hwcomponents do",
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

def _memtech_rows() -> tuple[ComponentRow, ...]:
    """The off-chip rows of every memory technology, from its :mod:`vrex_lib.memtech` record: ``dram_<tech>`` /
    transfer (device pJ per bit transferred, including the DRAM-side I/O), ``dram_phy_<tech>`` / transfer (the
    accelerator-side interface, where one exists), ``dram_<tech>`` / background (standby + refresh of one device;
    ``width`` holds the device capacity in Gbit so power scales with capacity, the leakage_uW column the power) and
    the SSD's active / idle power."""
    rows: list[ComponentRow] = []
    for name in memtech.DRAM:
        m = memtech.dram(name)
        rows.append(ComponentRow(f"dram_{name}", "transfer", m.device_pj_per_bit, _NAN, 0.0, node_nm=_NAN, vdd=_NAN,
                                 width=1, source=m.device_pj_source, note=m.device_pj_note))
        if m.phy_pj_per_bit is not None:
            rows.append(ComponentRow(f"dram_phy_{name}", "transfer", m.phy_pj_per_bit, _NAN, 0.0,
                                     node_nm=m.phy_node_nm, vdd=_NAN, width=1, source=m.phy_source, note=m.phy_note))
        if m.background_w is not None:
            rows.append(ComponentRow(f"dram_{name}", "background", _NAN, _NAN, m.background_w * 1e6, node_nm=_NAN,
                                     vdd=m.background_vdd, width=int(m.background_device_gbit),
                                     source=m.background_source, note=m.background_note))
    ssd = memtech.NVME_SSD
    rows.append(ComponentRow("ssd", "active", _NAN, _NAN, ssd.active_w * 1e6, node_nm=_NAN, vdd=_NAN, width=0,
                             source="kioxia_bg6", note=ssd.sources["active_w"].split(": ", 1)[-1]))
    rows.append(ComponentRow("ssd", "idle", _NAN, _NAN, ssd.idle_w * 1e6, node_nm=_NAN, vdd=_NAN, width=0,
                             source="anandtech_xg6", note=ssd.sources["idle_w"].split(": ", 1)[-1]))
    return tuple(rows)


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
    # --- Off-chip: not scaled (interface/array dominated). DRAM device/PHY energies, DRAM background power and the
    # SSD's powers are read from the memory-technology records (vrex_lib.memtech): _memtech_rows() below.
    *_memtech_rows(),
    # PCIe link with no traffic (L0 idle), as a fraction of the paper's 3 W/lane at full load (energy_pJ column
    # holds the dimensionless fraction).
    ComponentRow("pcie_lane", "idle_fraction", 1.0, _NAN, 0.0, node_nm=_NAN, vdd=_NAN, width=1, source="pcie_l0",
                 note="L0 without ASPM: SerDes keep transmitting idle symbols, so PHY power ~ full-load power; "
                      "an upper bound if ASPM L0s/L1 were enabled -- unverified (no measured per-lane idle figure)"),
    # What per-operation datapath energies leave out, as cited ranges (energy_pJ column holds the dimensionless
    # share; 'low'/'high' the ends of the range). Interconnect: share of all dynamic power spent in wires; glitch:
    # extra dynamic power from spurious transitions, as a fraction of the functional dynamic power.
    ComponentRow("wire_share", "low", 0.0, _NAN, 0.0, node_nm=_NAN, vdd=_NAN, width=0, source="magen2004",
                 note="0: the per-operation energy already includes every wire it drives"),
    ComponentRow("wire_share", "high", 0.5, _NAN, 0.0, node_nm=_NAN, vdd=_NAN, width=0, source="magen2004",
                 note="'over 50 %' of dynamic power in interconnect (130 nm microprocessor)"),
    ComponentRow("glitch_share", "low", 0.0, _NAN, 0.0, node_nm=_NAN, vdd=_NAN, width=0, source="synopsys_glitch",
                 note="0: a glitch-free (balanced, registered) datapath"),
    ComponentRow("glitch_share", "high", 0.4, _NAN, 0.0, node_nm=_NAN, vdd=_NAN, width=0, source="synopsys_glitch",
                 note="'up to 40 %' additional dynamic power -- unverified against the primary here"),
)


@dataclass(frozen=True)
class CellRow:
    """One standard cell at its native node: area (um2), leakage (nW), mean input-pin capacitance (fF) and internal
    energy per output transition (fJ); flip-flops add the clock-pin internal energy per clock cycle and the extra
    internal energy of one captured data change (Q/QN stages + D pin), in fJ. yosys: the generic cells mapped to it.
    """

    cell: str
    yosys: tuple[str, ...]
    area_um2: float
    leakage_nW: float
    input_cap_fF: float
    internal_fJ: float
    node_nm: float
    vdd: float
    source: str
    clock_fJ_per_cycle: float = _NAN
    clock_cap_fF: float = _NAN
    note: str = ""


_NG = dict(node_nm=45, vdd=1.1, source="nangate45_lib")
#: Internal energies: mean over the cell's internal_power arcs (every related pin and 'when' state) of the rise and
#: fall tables, read at input transition 17.19 ps (the tables' third breakpoint) and output load 3.84 fF (the net
#: load of cells.load_cap_ff at fan-out 2: two mean combinational inputs plus the default wire load); inputs: mean
#: of the input pins' 'capacitance'. Flip-flops: internal_fJ is the extra energy of a captured data change (CK-pin arc with D != Q
#: minus D == Q, plus the Q and QN arcs, plus the D-pin arcs while CK is low); clock_fJ_per_cycle the CK-pin
#: rise + fall arcs with D == Q (mean over states).
CELLS: tuple[CellRow, ...] = (
    CellRow("INV_X1", ("$_NOT_",), 0.532, 14.353185, 1.70023, 0.9485, **_NG),
    CellRow("BUF_X1", ("$_BUF_",), 0.798, 21.438247, 0.974659, 2.3535, **_NG),
    CellRow("NAND2_X1", ("$_NAND_",), 0.798, 17.39336, 1.631616, 1.3424, **_NG),
    CellRow("NOR2_X1", ("$_NOR_",), 0.798, 21.199545, 1.682908, 1.3517, **_NG),
    CellRow("AND2_X1", ("$_AND_", "$_ANDNOT_"), 1.064, 25.066064, 0.946388, 2.5859, **_NG),
    CellRow("OR2_X1", ("$_OR_", "$_ORNOT_"), 1.064, 22.694975, 0.944377, 2.4955, **_NG),
    CellRow("XOR2_X1", ("$_XOR_",), 1.596, 36.163718, 2.321799, 2.9720, **_NG),
    CellRow("XNOR2_X1", ("$_XNOR_",), 1.596, 36.441009, 2.403181, 2.9172, **_NG),
    CellRow("MUX2_X1", ("$_MUX_", "$_NMUX_"), 1.862, 35.92839, 1.270379, 3.2660, **_NG),
    CellRow("AOI21_X1", ("$_AOI3_",), 1.064, 27.858395, 1.650069, 2.0718, **_NG),
    CellRow("OAI21_X1", ("$_OAI3_",), 1.064, 22.619394, 1.634886, 1.9778, **_NG),
    CellRow("AOI22_X1", ("$_AOI4_",), 1.33, 32.611944, 1.646075, 2.2294, **_NG),
    CellRow("OAI22_X1", ("$_OAI4_",), 1.33, 34.026125, 1.634071, 2.2071, **_NG),
    CellRow("DFF_X1", ("$_DFF_P_", "$_DFF_N_"), 4.522, 79.112308, 1.14029, 11.9033, clock_fJ_per_cycle=7.2239,
            clock_cap_fF=0.949653, **_NG),
    CellRow("DFFR_X1", ("$_DFF_PP0_", "$_DFF_PN0_", "$_DFF_PP1_", "$_DFF_PN1_"), 5.32, 86.21278, 1.128277, 13.9322,
            clock_fJ_per_cycle=7.2025, clock_cap_fF=0.976605, **_NG, note="asynchronous-reset flip-flop"),
    CellRow("CLKBUF_X3", (), 1.33, 30.558215, 1.421162, 5.2282, **_NG,
            note="clock-tree buffer; internal energy at a 24.4 fF load: 16 DFF_X1 clock pins + their wire"),
)


@dataclass(frozen=True)
class WireLoad:
    """A liberty wire-load model: net capacitance = cap_per_length_fF x length(fan-out); beyond the table the
    length grows by ``slope`` per extra fan-out (the liberty rule)."""

    name: str
    cap_per_length_fF: float
    fanout_length: tuple[tuple[int, float], ...]
    slope: float
    source: str

    def cap_fF(self, fanout: float) -> float:
        if fanout <= 0:
            raise ValueError(f"fan-out must be positive, got {fanout}")
        pts = dict(self.fanout_length)
        top = max(pts)
        if fanout >= top:
            return self.cap_per_length_fF * (pts[top] + self.slope * (fanout - top))
        xs = sorted(pts)
        return self.cap_per_length_fF * float(np.interp(fanout, xs, [pts[x] for x in xs]))


@dataclass(frozen=True)
class CellDelay:
    """One cell's propagation delay at its native node: ``intrinsic_ps + slope_ps_per_fF x load``, the slowest
    timing arc (mean of its rise and fall) at input transition 17.19 ps; flip-flops: the CK -> Q arc and the setup
    time."""

    cell: str
    intrinsic_ps: float
    slope_ps_per_fF: float
    node_nm: float
    vdd: float
    source: str
    setup_ps: float = 0.0


#: NanGate 45 nm typical (1.1 V, 25 C) X1 delays, printed by ``scripts/liberty_delays.py`` from the liberty of the
#: ``nangate45_lib`` source (linear fit over the first four load breakpoints, 0.37-7.4 fF).
CELL_DELAYS: dict[str, CellDelay] = {c: CellDelay(c, d0, k, 45, 1.1, "nangate45_lib", su) for c, d0, k, su in (
    ("INV_X1", 8.65, 2.240, 0.0), ("BUF_X1", 24.43, 2.095, 0.0), ("NAND2_X1", 14.11, 2.364, 0.0),
    ("NOR2_X1", 15.74, 3.546, 0.0), ("AND2_X1", 30.37, 2.253, 0.0), ("OR2_X1", 36.18, 2.364, 0.0),
    ("XOR2_X1", 46.58, 3.592, 0.0), ("XNOR2_X1", 37.30, 2.483, 0.0), ("MUX2_X1", 51.98, 2.573, 0.0),
    ("AOI21_X1", 22.52, 3.486, 0.0), ("OAI21_X1", 20.32, 3.786, 0.0), ("AOI22_X1", 28.48, 3.819, 0.0),
    ("OAI22_X1", 27.59, 3.790, 0.0), ("DFF_X1", 86.02, 1.873, 43.33))}


WIRE_LOAD = WireLoad("5K_hvratio_1_1", 0.1774, ((1, 1.7460), (2, 3.9394), (3, 6.4626), (4, 9.2201), (5, 11.9123),
                                                (6, 14.8358), (7, 18.6155), (8, 22.6727), (9, 25.4842),
                                                (11, 27.0320)), 5.0, "nangate45_lib")


#: The IDD energy model's device and CACTI-IO's channel per DRAM kind, from the memory-technology records
#: (:mod:`vrex_lib.memtech`; a kind without one says why in its record: HBM2e has no CACTI-IO model).
DramDevice = memtech.IddDevice
DramInterface = memtech.CactiIoChannel
DRAM_DEVICES: dict[str, DramDevice] = {n: memtech.dram(n).idd for n in memtech.DRAM if memtech.dram(n).idd}
DRAM_INTERFACES: dict[str, DramInterface] = {n: memtech.dram(n).cacti_io for n in memtech.DRAM
                                             if memtech.dram(n).cacti_io}


def table() -> pd.DataFrame:
    """The constants table as a DataFrame (one row per component/action/width/source)."""
    return pd.DataFrame([asdict(r) for r in ROWS])


def cells_table() -> pd.DataFrame:
    """:data:`CELLS` as a DataFrame (native node; :mod:`vrex_lib.estimate.cells` scales them)."""
    return pd.DataFrame([{**asdict(c), "yosys": " ".join(c.yosys)} for c in CELLS])


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


def perturbation(component: str, field: str) -> float:
    """The product of the active :func:`perturbed` factors on ``field`` of ``component`` (1.0 in normal use), for a
    value read from its record rather than from :data:`ROWS` (the memory-technology records)."""
    k = 1.0
    for (glob, f), v in _PERTURB.items():
        if f == field and fnmatch.fnmatch(component, glob):
            k *= v
    return k


def rows(component: str, action: str | None = None, source: str | None = None) -> list[ComponentRow]:
    out = [_apply(r) for r in ROWS if r.component == component and (action is None or r.action == action)
           and (source is None or r.source == source)]
    if not out:
        raise KeyError(f"no constants row for component={component!r} action={action!r} source={source!r}; "
                       f"known components: {sorted({r.component for r in ROWS})}")
    return out
