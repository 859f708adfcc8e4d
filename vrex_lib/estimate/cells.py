"""Logic power from synthesized cells: yosys cell counts x NanGate 45 nm cell energies x measured toggle rates.

Per-cell data (area, leakage, input capacitance, internal energy per output transition; flip-flop clock and data
energies) are rows of :data:`vrex_lib.estimate.constants.CELLS`, read from the NanGate Open Cell Library's typical
liberty (45 nm, 1.1 V, 25 C) and scaled to 14 nm / 0.8 V with Stillmaker-Baas like every other row.

Energy of one transition of a cell's output net (45 nm, at the library's supply V):

    E_toggle = E_internal(cell) + 1/2 C_load V^2,   C_load = fanout x C_in(mean X1 input) + C_wire(fanout)

with the wire from the library's default wire-load model. A block of synthesized cells at clock f then draws

    P = f x [ (1 + glitch) x sum_c n_c x alpha x E_toggle(c)                     combinational cells
              + n_ff x (E_clock + flop_alpha x (E_data + 1/2 C_load V^2))      flip-flops
              + clock tree ]                                                    buffers + clock nets
        + sum_c n_c x leakage(c)

``alpha`` (transitions per signal bit per cycle) and ``flop_alpha`` come from the vector runs of the converted
Verilog (:class:`BlockActivity`, ``vrex_lib.hw.activity``): the RTL signals' toggle rate stands in for the
gate-level nets' (zero-delay, so glitches are the separate, cited ``glitch`` share). The clock network has no
gating (every flip-flop is clocked every cycle). The clock tree is costed from the same library: leaf
CLKBUF_X3 buffers each driving ``ffs_per_leaf`` clock pins plus their wire, then a fan-out-4 buffer tree.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Protocol

from . import constants as C
from .scaling import TARGET_NODE_NM, TARGET_VDD, area_factor, energy_factor

#: Fan-out assumed for every net of synthesized logic (docs/DECISIONS.md D122); notebook 05 varies it.
DEFAULT_FANOUT = 2.0
#: Clock pins per leaf clock buffer, and the fan-out of the buffer tree above the leaves (D122).
FFS_PER_LEAF = 16
TREE_FANOUT = 4


class ActivityLike(Protocol):
    """What this module reads from ``vrex_lib.hw.activity.BlockActivity``."""

    block: str
    cycles: int
    source: str

    @property
    def alpha(self) -> float: ...

    @property
    def flop_alpha(self) -> float: ...


def _cell(name: str) -> C.CellRow:
    for c in C.CELLS:
        if c.cell == name:
            return c
    raise KeyError(f"no cell {name!r} in constants.CELLS")


def decompose(yosys_type: str) -> dict[str, int]:
    """Library cells one yosys generic cell becomes: a combinational cell by its mapping; a flip-flop as DFF_X1
    (DFFR_X1 with an asynchronous reset) plus the AND2 of a synchronous reset and the MUX2 of an enable (NanGate has
    no such flops). ``$mem*`` cells are the SRAMs, costed by CACTI: empty here."""
    if yosys_type.startswith("$mem"):
        return {}
    for c in C.CELLS:
        if yosys_type in c.yosys:
            return {c.cell: 1}
    m = re.fullmatch(r"\$_(S?DFF(?:SR)?C?E?)_([PN01]+)_", yosys_type)
    if m is None:
        raise KeyError(f"yosys cell {yosys_type!r} has no NanGate cell; add it to constants.CELLS")
    kind, pol = m.groups()
    sync, enable = kind.startswith("S"), kind.endswith("E")
    # Polarity letters: clock, [reset, reset value,] [enable]; three or more besides the enable = a reset.
    async_reset = not sync and ("SR" in kind or len(pol) - enable >= 3)
    out = {"DFFR_X1" if async_reset else "DFF_X1": 1}
    if sync:
        out["AND2_X1"] = 1
    if enable:
        out["MUX2_X1"] = 1
    return out


def is_flop(cell: str) -> bool:
    return not math.isnan(_cell(cell).clock_fJ_per_cycle)


@dataclass(frozen=True)
class CellEnergy:
    """One library cell at 14 nm / 0.8 V: energy per output transition at ``fanout`` (pJ), leakage (uW), area (um2);
    flip-flops also the clock energy per cycle of their clock pin and its net share (pJ)."""

    cell: str
    toggle_pj: float
    leakage_uw: float
    area_um2: float
    clock_pj_per_cycle: float


def load_cap_ff(fanout: float = DEFAULT_FANOUT) -> float:
    """Net load at 45 nm (fF): ``fanout`` mean combinational-cell inputs + the default wire load."""
    comb = [c.input_cap_fF for c in C.CELLS if math.isnan(c.clock_fJ_per_cycle) and c.yosys]
    return fanout * sum(comb) / len(comb) + C.WIRE_LOAD.cap_fF(fanout)


def cell_energy(name: str, fanout: float = DEFAULT_FANOUT) -> CellEnergy:
    """:class:`CellEnergy` of library cell ``name`` scaled from its liberty corner to 14 nm / 0.8 V."""
    c = _cell(name)
    ef = energy_factor(c.node_nm, c.vdd, TARGET_NODE_NM, TARGET_VDD)
    switch_fj = 0.5 * load_cap_ff(fanout) * c.vdd ** 2
    clock_fj = 0.0
    if not math.isnan(c.clock_fJ_per_cycle):
        # The clock pin's own net charge (C V^2 per cycle) is booked to the flip-flop; the tree's wire and
        # buffers to clock_tree_pj_per_cycle.
        clock_fj = c.clock_fJ_per_cycle + c.clock_cap_fF * c.vdd ** 2
    return CellEnergy(name, (c.internal_fJ + switch_fj) * 1e-3 * ef, c.leakage_nW * 1e-3 * ef,
                      c.area_um2 * area_factor(c.node_nm, TARGET_NODE_NM), clock_fj * 1e-3 * ef)


def clock_tree_pj_per_cycle(n_ff: float) -> float:
    """Energy per cycle (pJ, 14 nm / 0.8 V) of the clock tree above ``n_ff`` flip-flop clock pins: leaf buffers
    (``FFS_PER_LEAF`` pins each, their wire from the wire-load model) and a ``TREE_FANOUT`` buffer tree to one root;
    every net charges and discharges once per cycle, every buffer switches twice."""
    if n_ff <= 0:
        return 0.0
    buf = _cell("CLKBUF_X3")
    v = buf.vdd
    # Leaf nets: their flip-flop pins are booked to the flip-flops (CellEnergy.clock_pj_per_cycle); wire only.
    leaves = math.ceil(n_ff / FFS_PER_LEAF)
    fj = leaves * (C.WIRE_LOAD.cap_fF(min(n_ff, FFS_PER_LEAF)) * v ** 2 + 2 * buf.internal_fJ)
    level = leaves
    while level > 1:
        drivers = math.ceil(level / TREE_FANOUT)
        per = level / drivers
        fj += drivers * ((per * buf.input_cap_fF + C.WIRE_LOAD.cap_fF(per)) * v ** 2 + 2 * buf.internal_fJ)
        level = drivers
    fj += buf.input_cap_fF * v ** 2  # the root buffer's input, driven by the clock source
    return fj * 1e-3 * energy_factor(buf.node_nm, buf.vdd, TARGET_NODE_NM, TARGET_VDD)


@dataclass(frozen=True)
class LogicPower:
    """Power (mW) of one block's synthesized logic at one clock, split by term, and what it came from."""

    block: str
    dynamic_mw: float       # combinational cells and flip-flop data changes, glitch share included
    clock_mw: float         # flip-flop clock pins + clock tree
    leakage_mw: float
    area_um2: float
    n_cells: int
    n_ff: int
    alpha: float
    flop_alpha: float
    source: str

    @property
    def total_mw(self) -> float:
        return self.dynamic_mw + self.clock_mw + self.leakage_mw


def logic_power(block: str, cells_by_type: dict[str, int], act: ActivityLike, freq_hz: float, *,
                fanout: float = DEFAULT_FANOUT, glitch: float = 0.0) -> LogicPower:
    """Power of ``cells_by_type`` (yosys generic cell -> count) switching at ``act``'s toggle rates at ``freq_hz``.

    ``glitch``: extra combinational dynamic power as a fraction of the functional (zero-delay) one."""
    if freq_hz <= 0:
        raise ValueError(f"freq_hz must be positive, got {freq_hz}")
    if glitch < 0:
        raise ValueError(f"glitch share must be >= 0, got {glitch}")
    for name in ("alpha", "flop_alpha"):
        if not 0.0 <= getattr(act, name) <= 1.0:
            raise ValueError(f"{act.block}: activity {name}={getattr(act, name)} outside [0, 1]; check its "
                             "toggle and bit counts")
    comb_pj = data_pj = clock_pj = leak_uw = area = 0.0
    n_cells = n_ff = 0
    for ytype, n in cells_by_type.items():
        for cell, k in decompose(ytype).items():
            e = cell_energy(cell, fanout)
            cnt = n * k
            n_cells += cnt
            leak_uw += cnt * e.leakage_uw
            area += cnt * e.area_um2
            if is_flop(cell):
                n_ff += cnt
                data_pj += cnt * act.flop_alpha * e.toggle_pj
                clock_pj += cnt * e.clock_pj_per_cycle
            else:
                comb_pj += cnt * act.alpha * e.toggle_pj
    clock_pj += clock_tree_pj_per_cycle(n_ff)
    mw = freq_hz * 1e-9  # pJ per cycle x Hz = 1e-12 W = 1e-9 mW
    return LogicPower(block, ((1 + glitch) * comb_pj + data_pj) * mw, clock_pj * mw, leak_uw * 1e-3, area, n_cells,
                      n_ff, act.alpha, act.flop_alpha, act.source)


def flop_power_mw(n_ff: float, freq_hz: float, data_alpha: float, fanout: float = DEFAULT_FANOUT) -> dict[str, float]:
    """Clock (flip-flop pins + clock tree), data and leakage power (mW) of ``n_ff`` DFF_X1 flip-flops whose
    stored bits change with probability ``data_alpha`` per cycle -- the clock-network term of blocks without RTL."""
    e = cell_energy("DFF_X1", fanout)
    mw = freq_hz * 1e-9
    return dict(clock_mw=(n_ff * e.clock_pj_per_cycle + clock_tree_pj_per_cycle(n_ff)) * mw,
                data_mw=n_ff * data_alpha * e.toggle_pj * mw, leakage_mw=n_ff * e.leakage_uw * 1e-3)
