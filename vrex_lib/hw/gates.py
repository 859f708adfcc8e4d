"""The synthesised netlist of a combinational block as data: evaluate it bit-parallel on vector streams (a
zero-delay gate-level simulation), count every net's toggles, and find its longest path.

    net = Netlist.from_yosys(json_module)        # yosys ``write_json`` of one flattened module, generic cells
    out, act = net.evaluate({"a": a, "b": b})    # a, b: integer arrays [V]; out: {port: uint64 [V]}
    net.longest_path(delay_ps)                   # delay_ps(cell_type, fanout) -> ps

Vectors are packed 64 to a ``uint64`` word, so every gate is one NumPy bitwise operation over V/64 words. A
toggle is a net changing between consecutive vectors of a stream; ``segments`` splits the input into independent
streams of equal length (one per instance of the block: lane 0's stream, then lane 1's, ...) so that the step
from one stream's last vector to the next one's first is not counted. The activity is summarised for the energy
estimator (:mod:`vrex_lib.estimate.rtl`) by cell type (toggles of the cells' outputs) and by net fan-out (toggles
of nets with that many cell inputs; the block's input ports included, its output ports loading one more pin: the
register or the next block).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
# The generic cells of the synthesis recipe (hw.verify.YOSYS_RECIPE), by their input pins, as word functions.
_FUNCS: dict[str, tuple[tuple[str, ...], Callable]] = {
    "$_NOT_": (("A",), lambda a: ~a),
    "$_BUF_": (("A",), lambda a: a),
    "$_AND_": (("A", "B"), lambda a, b: a & b),
    "$_NAND_": (("A", "B"), lambda a, b: ~(a & b)),
    "$_OR_": (("A", "B"), lambda a, b: a | b),
    "$_NOR_": (("A", "B"), lambda a, b: ~(a | b)),
    "$_XOR_": (("A", "B"), lambda a, b: a ^ b),
    "$_XNOR_": (("A", "B"), lambda a, b: ~(a ^ b)),
    "$_ANDNOT_": (("A", "B"), lambda a, b: a & ~b),
    "$_ORNOT_": (("A", "B"), lambda a, b: a | ~b),
    "$_MUX_": (("A", "B", "S"), lambda a, b, s: (a & ~s) | (b & s)),
    "$_NMUX_": (("A", "B", "S"), lambda a, b, s: ~((a & ~s) | (b & s))),
    "$_AOI3_": (("A", "B", "C"), lambda a, b, c: ~((a & b) | c)),
    "$_OAI3_": (("A", "B", "C"), lambda a, b, c: ~((a | b) & c)),
    "$_AOI4_": (("A", "B", "C", "D"), lambda a, b, c, d: ~((a & b) | (c & d))),
    "$_OAI4_": (("A", "B", "C", "D"), lambda a, b, c, d: ~((a | b) & (c | d))),
}


@dataclass(frozen=True)
class Cell:
    type: str
    inputs: tuple  # net ids (int) or constants "0"/"1"/"x"
    output: int


@dataclass
class Activity:
    """Toggles of one evaluation: per cell type (its output nets) and per net fan-out, over ``patterns`` vectors
    in ``segments`` streams (toggle opportunities: ``patterns - segments``)."""

    patterns: int
    segments: int
    by_cell: dict[str, int] = field(default_factory=dict)
    by_fanout: dict[int, int] = field(default_factory=dict)
    nets: int = 0
    net_toggles: int = 0

    @property
    def steps(self) -> int:
        """Consecutive-vector steps per stream times streams: the cycles the toggles are spread over."""
        return self.patterns - self.segments

    @property
    def alpha(self) -> float:
        """Mean toggles per net per step."""
        return self.net_toggles / (self.nets * self.steps) if self.nets and self.steps > 0 else 0.0

    def as_dict(self) -> dict:
        return dict(patterns=self.patterns, segments=self.segments, steps=self.steps, nets=self.nets,
                    net_toggles=self.net_toggles, alpha=self.alpha, by_cell=dict(self.by_cell),
                    by_fanout={str(k): v for k, v in sorted(self.by_fanout.items())})


class Netlist:
    """One flattened combinational module of generic cells (no flip-flops, no memories)."""

    def __init__(self, ports: dict[str, tuple[str, list]], cells: list[Cell]):
        self.inputs = {k: bits for k, (d, bits) in ports.items() if d == "input"}
        self.outputs = {k: bits for k, (d, bits) in ports.items() if d == "output"}
        self.cells = _topological(cells, {b for bits in self.inputs.values() for b in bits if isinstance(b, int)})
        fo: dict = defaultdict(int)
        for c in self.cells:
            for b in c.inputs:
                if isinstance(b, int):
                    fo[b] += 1
        for bits in self.outputs.values():
            for b in bits:
                if isinstance(b, int):
                    fo[b] += 1  # the register (or next block) the output drives
        self.fanout = dict(fo)

    @classmethod
    def from_yosys(cls, module: Mapping) -> "Netlist":
        """From one module of yosys's ``write_json`` (after the recipe's ``abc -g ...``)."""
        ports = {k: (v["direction"], v["bits"]) for k, v in module["ports"].items()}
        cells = []
        for name, c in module["cells"].items():
            t = c["type"]
            if t not in _FUNCS:
                raise ValueError(f"cell {name} of type {t}: only combinational generic cells can be evaluated "
                                 f"({', '.join(_FUNCS)}); synthesise the block without registers or memories")
            pins, _ = _FUNCS[t]
            out = c["connections"]["Y"][0]
            cells.append(Cell(t, tuple(c["connections"][p][0] for p in pins), out))
        return cls(ports, cells)

    @property
    def cell_counts(self) -> dict[str, int]:
        out: dict = defaultdict(int)
        for c in self.cells:
            out[c.type] += 1
        return dict(out)

    def evaluate(self, inputs: Mapping[str, np.ndarray], segments: int = 1) -> tuple[dict[str, np.ndarray], Activity]:
        """Outputs (uint64 per vector) and the toggle activity of the input streams ``inputs`` (port -> integer
        array [V]; ``segments`` equal streams, see the module docstring)."""
        missing = set(self.inputs) - set(inputs)
        if missing:
            raise ValueError(f"netlist inputs {sorted(missing)} not given")
        V = len(next(iter(inputs.values())))
        if V % segments or any(len(v) != V for v in inputs.values()):
            raise ValueError(f"every input needs the same length, a multiple of segments={segments}")
        val: dict = {}
        for k, bits in self.inputs.items():
            x = np.asarray(inputs[k]).astype(np.uint64)
            for i, b in enumerate(bits):
                if isinstance(b, int):
                    val[b] = _pack((x >> np.uint64(i)) & np.uint64(1))
        W = -(-V // 64)
        const = {"0": np.zeros(W, np.uint64), "1": np.full(W, _ONES), "x": np.zeros(W, np.uint64)}
        for c in self.cells:
            val[c.output] = _FUNCS[c.type][1](*(val[b] if isinstance(b, int) else const[b] for b in c.inputs))
        act = Activity(V, segments)
        driver = {c.output: c.type for c in self.cells}
        by_cell: dict = defaultdict(int)
        by_fo: dict = defaultdict(int)
        for b, f in self.fanout.items():
            t = _toggles(val[b], V, segments)
            act.nets += 1
            act.net_toggles += t
            by_fo[f] += t
            if b in driver:
                by_cell[driver[b]] += t
        act.by_cell, act.by_fanout = dict(by_cell), dict(by_fo)
        outs = {}
        for k, bits in self.outputs.items():
            acc = np.zeros(V, np.uint64)
            for i, b in enumerate(bits):
                v = _unpack(val[b], V) if isinstance(b, int) else np.full(V, b == "1")
                acc |= v.astype(np.uint64) << np.uint64(i)
            outs[k] = acc
        return outs, act

    def longest_path(self, delay_ps: Callable[[str, int], float]) -> dict:
        """Latest arrival (ps) at any output with inputs at 0 and each cell adding ``delay_ps(type, fanout of its
        output)``; also the cells on that path."""
        t: dict = {b: 0.0 for bits in self.inputs.values() for b in bits if isinstance(b, int)}
        depth: dict = {b: 0 for b in t}
        for c in self.cells:
            ins = [b for b in c.inputs if isinstance(b, int)]
            a = max((t[b] for b in ins), default=0.0)
            t[c.output] = a + delay_ps(c.type, self.fanout.get(c.output, 1))
            depth[c.output] = max((depth[b] for b in ins), default=0) + 1
        outs = [b for bits in self.outputs.values() for b in bits if isinstance(b, int)]
        worst = max(outs, key=lambda b: t.get(b, 0.0))
        return dict(delay_ps=float(t.get(worst, 0.0)), cells_on_path=int(depth.get(worst, 0)),
                    max_depth=int(max((depth[b] for b in outs), default=0)))


def _topological(cells: list[Cell], sources: set) -> list[Cell]:
    by_out = {c.output: c for c in cells}
    done = set(sources)
    order, seen = [], set()
    for c in cells:
        stack = [(c, False)]
        while stack:
            cur, expanded = stack.pop()
            if cur.output in done:
                continue
            if expanded:
                done.add(cur.output)
                order.append(cur)
                continue
            if cur.output in seen:
                raise ValueError(f"combinational loop through net {cur.output}")
            seen.add(cur.output)
            stack.append((cur, True))
            for b in cur.inputs:
                if isinstance(b, int) and b not in done:
                    if b not in by_out:
                        raise ValueError(f"net {b} has no driver (not an input, not a cell output)")
                    stack.append((by_out[b], False))
    return order


def _pack(bits: np.ndarray) -> np.ndarray:
    """A 0/1 array [V] as uint64 words, vector i in bit i % 64 of word i // 64."""
    V = len(bits)
    b = np.zeros(-(-V // 64) * 64, np.uint8)
    b[:V] = bits.astype(np.uint8)
    return np.packbits(b, bitorder="little").view(np.uint64)


def _unpack(words: np.ndarray, V: int) -> np.ndarray:
    return np.unpackbits(words.view(np.uint8), bitorder="little")[:V].astype(bool)


def _toggles(words: np.ndarray, V: int, segments: int) -> int:
    b = _unpack(words, V).reshape(segments, V // segments)
    return int(np.count_nonzero(b[:, 1:] != b[:, :-1]))
