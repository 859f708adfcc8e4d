"""Technology scaling of energy and area: Stillmaker & Baas (2017), implemented from the paper's tables.

Source: A. Stillmaker, B. Baas, "Scaling equations for the accurate prediction of CMOS device
performance from 180 nm to 7 nm", Integration, the VLSI Journal 58 (2017) 74-81,
doi:10.1016/j.vlsi.2017.02.002.

* Energy: the paper fits, per node, energy relative to a reference as a quadratic in Vdd,
  ``e(node, V) = a V^2 + b V + c`` (general-purpose/HP fits). Scaling node A at Va to node B at Vb
  multiplies energy by ``e(B, Vb) / e(A, Va)``. Between tabulated nodes we interpolate *linearly in
  the node size* (this reproduces the published 45->28 nm factor 0.513; interpolating in the table
  index instead would give 0.367).
* Area: the paper's node-to-node area factor table, interpolated linearly in node size on both axes.
* Leakage power is scaled with the energy factor (the convention of Accelergy/hwcomponents); the
  paper has separate leakage fits we do not use -- stated in the notebook as a limitation.
* Delay: the paper's cubic-in-Vdd fits per node, ``d(node, V) = a V^3 + b V^2 + c V + d``, on the same rows as the
  energy fits (45 and 32 nm: the low-power rows, as ENERGY_POLY; the fits as transcribed in the MIT-licensed
  nodeScale tool of UCLA NanoCAD, github.com/wromaszkan/nodeScale). The 45 nm high-performance row (``row45="hp"``)
  is the alternative for NanGate's FreePDK45 cells (whose 1.1 V nominal supply matches the LP row); it scales
  energy by x0.092 instead of x0.079 and delay by x0.33 instead of x0.10 (45 nm / 1.1 V -> 14 nm / 0.8 V).

Checks (tests/test_estimate_scaling.py), all at 0.8 V: 45->16 nm energy x0.174 area x0.19;
45->28 nm x0.513 / x0.377; 45->7 nm x0.094 / x0.059; 65->45 nm energy x0.81.
"""
from __future__ import annotations

import numpy as np

#: Nodes of the Stillmaker-Baas tables, nm (largest first, as printed).
NODES_NM: tuple[int, ...] = (130, 90, 65, 45, 32, 20, 16, 14, 10, 7)

#: Area factor table: AREA_FACTOR[i][j] multiplies an area at NODES_NM[i] to get it at NODES_NM[j].
AREA_FACTOR: tuple[tuple[float, ...], ...] = (
    (1, 0.44, 0.23, 0.16, 0.072, 0.033, 0.03, 0.027, 0.016, 0.0092),
    (2.3, 1, 0.53, 0.35, 0.16, 0.075, 0.067, 0.061, 0.036, 0.021),
    (4.3, 1.9, 1, 0.66, 0.31, 0.14, 0.13, 0.12, 0.068, 0.039),
    (6.4, 2.8, 1.5, 1, 0.46, 0.21, 0.19, 0.17, 0.1, 0.059),
    (14, 6.1, 3.3, 2.2, 1, 0.46, 0.41, 0.38, 0.22, 0.13),
    (30, 13, 7.1, 4.7, 2.2, 1, 0.89, 0.82, 0.48, 0.28),
    (34, 15, 7.9, 5.3, 2.4, 1.1, 1, 0.91, 0.54, 0.31),
    (37, 16, 8.7, 5.8, 2.7, 1.2, 1.1, 1, 0.59, 0.34),
    (63, 28, 15, 9.8, 4.5, 2.1, 1.9, 1.7, 1, 0.58),
    (110, 48, 25, 17, 7.8, 3.6, 3.2, 2.9, 1.7, 1),
)

#: Energy fit coefficients (a, b, c) per node: relative energy = a*V^2 + b*V + c.
ENERGY_POLY: tuple[tuple[float, float, float], ...] = (
    (7.171, -6.709, 2.904),
    (4.762, -4.781, 2.092),
    (3.755, -4.398, 1.975),
    (1.103, -0.362, 0.2767),
    (0.9559, -0.7823, 0.471),
    (0.373, -0.1582, 0.04104),
    (0.2958, -0.1241, 0.03024),
    (0.2363, -0.09675, 0.02239),
    (0.2068, -0.09311, 0.02375),
    (0.1776, -0.09097, 0.02447),
)

#: Delay fit coefficients (a, b, c, d) per node, the same rows as ENERGY_POLY: delay = a V^3 + b V^2 + c V + d.
DELAY_POLY: tuple[tuple[float, float, float, float], ...] = (
    (-76.65, 334.9, -493.4, 275.8),
    (-60.34, 262.5, -384.2, 210.9),
    (-53.3, 230.4, -333.9, 178.6),
    (-285.7, 1239.0, -1795.0, 898.8),
    (-325.9, 1374.0, -1922.0, 913.2),
    (0.0, 34.63, -66.37, 41.15),
    (0.0, 24.8, -47.52, 28.87),
    (-40.66, 109.2, -100.6, 35.92),
    (-34.95, 93.65, -85.99, 30.4),
    (-28.58, 76.6, -70.26, 24.69),
)
#: The 45 nm high-performance rows (energy, delay), the alternative to the LP rows above.
HP45_ENERGY = (1.018, -0.3107, 0.1539)
HP45_DELAY = (-501.6, 1567.0, -1619.0, 566.1)
ROWS45 = ("lp", "hp")

TARGET_NODE_NM = 14
TARGET_VDD = 0.8


def _check_node(node_nm: float) -> None:
    if not (min(NODES_NM) <= node_nm <= max(NODES_NM)):
        raise ValueError(f"node {node_nm} nm outside the Stillmaker-Baas range {min(NODES_NM)}-{max(NODES_NM)} nm")


def _rows(poly: tuple, hp45: tuple, row45: str) -> list[tuple]:
    if row45 not in ROWS45:
        raise ValueError(f"row45={row45!r}: the 45 nm Stillmaker-Baas row is 'lp' or 'hp'")
    rows = list(poly)
    if row45 == "hp":
        rows[NODES_NM.index(45)] = hp45
    return rows


def _at(node_nm: float, vdd: float, per_node: list[float]) -> float:
    _check_node(node_nm)
    if not 0.3 <= vdd <= 1.5:
        raise ValueError(f"vdd {vdd} V outside the range the fits were made for")
    # np.interp needs increasing x: reverse the (decreasing) node list.
    return float(np.interp(node_nm, NODES_NM[::-1], per_node[::-1]))


def relative_energy(node_nm: float, vdd: float, row45: str = "lp") -> float:
    """Stillmaker-Baas relative switching energy at ``node_nm`` and supply ``vdd`` (V)."""
    return _at(node_nm, vdd, [a * vdd**2 + b * vdd + c for a, b, c in _rows(ENERGY_POLY, HP45_ENERGY, row45)])


def relative_delay(node_nm: float, vdd: float, row45: str = "lp") -> float:
    """Stillmaker-Baas relative gate delay at ``node_nm`` and supply ``vdd`` (V)."""
    return _at(node_nm, vdd, [a * vdd**3 + b * vdd**2 + c * vdd + d
                              for a, b, c, d in _rows(DELAY_POLY, HP45_DELAY, row45)])


def energy_factor(from_nm: float, from_vdd: float, to_nm: float = TARGET_NODE_NM,
                  to_vdd: float = TARGET_VDD, row45: str = "lp") -> float:
    """Multiply an energy at (from_nm, from_vdd) by this to get it at (to_nm, to_vdd)."""
    return relative_energy(to_nm, to_vdd, row45) / relative_energy(from_nm, from_vdd, row45)


def delay_factor(from_nm: float, from_vdd: float, to_nm: float = TARGET_NODE_NM,
                 to_vdd: float = TARGET_VDD, row45: str = "lp") -> float:
    """Multiply a delay at (from_nm, from_vdd) by this to get it at (to_nm, to_vdd)."""
    return relative_delay(to_nm, to_vdd, row45) / relative_delay(from_nm, from_vdd, row45)


def area_factor(from_nm: float, to_nm: float = TARGET_NODE_NM) -> float:
    """Multiply an area at ``from_nm`` by this to get it at ``to_nm`` (bilinear in node size)."""
    _check_node(from_nm)
    _check_node(to_nm)
    nodes = np.asarray(NODES_NM[::-1], dtype=float)
    table = np.asarray(AREA_FACTOR, dtype=float)[::-1, ::-1]
    # Interpolate each source row at the target node, then across source nodes.
    col = np.array([np.interp(to_nm, nodes, row) for row in table])
    return float(np.interp(from_nm, nodes, col))
