"""Print the cell delays of a NanGate-style liberty for ``vrex_lib.estimate.constants.CELL_DELAYS``.

    python scripts/liberty_delays.py NangateOpenCellLibrary_typical.lib

Per cell (X1 drive): the delay tables (``cell_rise`` / ``cell_fall``) of every timing arc, read at the input
transition 17.19 ps (the tables' third breakpoint, as for the energies of ``CELLS``) and fitted linearly in the
output load over the first four load breakpoints (0.37-7.4 fF): ``delay = intrinsic + slope x load``. The row keeps
the slowest arc (mean of its rise and fall), so a path summed from these rows is an upper bound at that slew.
Flip-flops: the CK -> Q arc likewise, and the setup time (``setup_rising`` constraints at 17.19 ps on both pins).
Nothing at run time reads the liberty: the printed rows are pasted into the constants table with its source.
"""
from __future__ import annotations

import re
import sys

import numpy as np

CELLS = ("INV_X1", "BUF_X1", "NAND2_X1", "NOR2_X1", "AND2_X1", "OR2_X1", "XOR2_X1", "XNOR2_X1", "MUX2_X1",
         "AOI21_X1", "OAI21_X1", "AOI22_X1", "OAI22_X1", "DFF_X1")
SLEW_NS = 0.0171859


def block(text: str, start: int) -> str:
    """The brace-balanced group starting at the first '{' after ``start``."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j + 1]
    raise ValueError("unbalanced braces")


def table(group: str, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    m = re.search(name + r"\s*\([^)]*\)\s*\{", group)
    if not m:
        return None
    t = block(group, m.start())
    nums = lambda key: np.array([float(x) for x in re.search(key + r'\s*\("([^"]*)"\)', t).group(1).split(",")])  # noqa
    vals = re.search(r"values\s*\((.*?)\);", t, re.S).group(1).replace("\\", "").replace('"', "")
    v = np.array([float(x) for x in vals.replace("\n", ",").split(",") if x.strip()])
    i1, i2 = nums("index_1"), nums("index_2")
    return i1, i2, v.reshape(len(i1), len(i2))


def at_slew(tab) -> tuple[np.ndarray, np.ndarray]:
    i1, i2, v = tab
    row = np.array([np.interp(SLEW_NS, i1, v[:, j]) for j in range(len(i2))])
    return i2, row


def main(path: str) -> None:
    text = open(path).read()
    for cell in CELLS:
        m = re.search(r"cell\s*\(\s*" + cell + r"\s*\)", text)
        body = block(text, m.start())
        arcs, setup = [], []
        for tm in re.finditer(r"timing\s*\(\s*\)\s*\{", body):
            g = block(body, tm.start())
            kind = re.search(r"timing_type\s*:\s*(\w+)", g)
            kind = kind.group(1) if kind else "combinational"
            if kind.startswith("setup"):
                setup += [float(np.interp(SLEW_NS, t[0], t[2][:, 0])) for t in
                          (table(g, "rise_constraint"), table(g, "fall_constraint")) if t is not None]
                continue
            if kind not in ("combinational", "rising_edge"):
                continue
            rise, fall = table(g, "cell_rise"), table(g, "cell_fall")
            if rise is None or fall is None:
                continue
            loads, r = at_slew(rise)
            _, f = at_slew(fall)
            k, d0 = np.polyfit(loads[:4], 0.5 * (r + f)[:4], 1)
            arcs.append((d0 * 1e3, k * 1e3))
        d0, k = max(arcs, key=lambda a: a[0] + 3.84 * a[1])
        extra = f", setup_ps={1e3 * max(setup):.2f}" if setup else ""
        print(f'    "{cell}": ({d0:.2f}, {k:.3f}{extra}),  # {len(arcs)} arcs')


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/liberty_delays.py NangateOpenCellLibrary_typical.lib")
    main(sys.argv[1])
