"""The identical combinational units the DPE and VPE are composed of, the input stream each instance sees, and
the registers between them -- what synthesis-by-count and the gate-level activity need (``docs/DECISIONS.md D287``).

A DPE tree is ``n`` :func:`~vrex_lib.hw.bf16.bf16_mul`, ``n / 2`` level-1 adders (:func:`~vrex_lib.hw.dpe.product_add`:
an FP32 adder whose operands' 8 low bits are the products' constant zeros), ``n / 2 - 1``
:func:`~vrex_lib.hw.bf16.fp32_add` and one :func:`~vrex_lib.hw.dpe.dpe_acc` between pipeline registers (the lane
slices are wires); a VPE is ``lanes`` times
(:func:`~vrex_lib.hw.vpe.rot_mux`, :func:`~vrex_lib.hw.bf16.fp32_mul`, :func:`~vrex_lib.hw.vpe.vpe_misc`,
:func:`~vrex_lib.hw.vpe.vpe_glue`, :func:`~vrex_lib.hw.bf16.fp32_add`) between registers. Each unit is synthesised
once; the block is the units times their counts plus its registers (:data:`COMPOSITION`).

:func:`dpe_streams` / :func:`vpe_streams` give, for a stream of vectors, every unit's inputs instance by instance
(one segment per instance, from the bit-exact reference's intermediate values) with the outputs they must produce;
:func:`dpe_register_toggles` / :func:`vpe_register_toggles` the bits and toggles of each register role, counted
from the values the registers hold (from reset, as a VCD of the run counts them).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from myhdl import Signal, intbv

from . import fpref as F
from .bf16 import bf16_mul, fp32_add, fp32_mul
from .dpe import DPEParams, as_arrays, dpe_acc, product_add
from .vpe import ROTATIONS, VPEParams, rot_mux, vpe_glue, vpe_misc


def _s(bits: int) -> Signal:
    return Signal(bool(0)) if bits == 1 else Signal(intbv(0)[bits:])


@dataclass(frozen=True)
class Unit:
    """One combinational unit: its port widths (inputs then outputs, the block's argument order) and block."""

    name: str
    ports: tuple[tuple[str, int], ...]
    outputs: tuple[str, ...]
    block: Callable

    def signals(self) -> dict:
        return {k: _s(w) for k, w in self.ports}

    def make(self, P: dict):
        return self.block(**P)


_ROT_PORTS = (("csel", 3), ("c", 32)) + tuple((f"a{k}", 32) for k in ROTATIONS) + (("cc", 32),)
UNITS: dict[str, Unit] = {u.name: u for u in (
    Unit("bf16_mul", (("a", 16), ("b", 16), ("p", 32)), ("p",), bf16_mul),
    Unit("fp32_add", (("a", 32), ("b", 32), ("s", 32)), ("s",), fp32_add),
    Unit("product_add", (("a", 24), ("b", 24), ("s", 32)), ("s",), product_add),
    Unit("dpe_acc", (("clear", 1), ("acc", 32), ("t", 32), ("nxt", 32)), ("nxt",), dpe_acc),
    Unit("fp32_mul", (("a", 32), ("b", 32), ("p", 32)), ("p",), fp32_mul),
    Unit("vpe_misc", (("op", 3), ("neg", 1), ("a", 32), ("c", 32), ("m", 32)), ("m",), vpe_misc),
    Unit("rot_mux", _ROT_PORTS, ("cc",), rot_mux),
    Unit("vpe_glue", (("op", 3), ("neg", 1), ("p", 32), ("s", 32), ("mr", 32), ("pn", 32), ("r", 32)), ("pn", "r"),
         vpe_glue),
)}


def composition(block: str, p) -> dict[str, int]:
    """Instances of each unit in one DPE tree (``p``: DPEParams) or one VPE (``p``: VPEParams)."""
    if block == "dpe":
        return {"bf16_mul": p.n, "product_add": p.n // 2, "fp32_add": p.n // 2 - 1, "dpe_acc": 1}
    if block == "vpe":
        return {u: p.lanes for u in ("rot_mux", "fp32_mul", "vpe_misc", "vpe_glue", "fp32_add")}
    raise ValueError(f"composition: block {block!r} is 'dpe' or 'vpe'")


COMPOSITION = {"dpe": lambda p: composition("dpe", p), "vpe": lambda p: composition("vpe", p)}


def _lanes(a: np.ndarray) -> np.ndarray:
    """[V, k] -> [k * V]: instance 0's stream, then instance 1's, ... (segments of V)."""
    return np.ascontiguousarray(np.asarray(a).T).reshape(-1)


def _prev(a: np.ndarray) -> np.ndarray:
    """The value before each vector: the register's, 0 from reset."""
    return np.concatenate([np.zeros((1,) + a.shape[1:], a.dtype), a[:-1]])


# ----------------------------------------------------------------------------------------------- DPE
def dpe_streams(vectors: list) -> dict[str, tuple[dict, int, dict]]:
    """unit -> (inputs {port: [k V]}, segments k, expected outputs) of one tree over ``vectors``."""
    w, x, clear = as_arrays(vectors)
    acc, levels = F.dpe_stream(w, x, clear)
    p = levels[0] >> np.uint32(8)
    up = levels[1:-1]  # the outputs of levels 1 .. L-1 feed the adders of levels 2 .. L
    out = {"bf16_mul": (dict(a=_lanes(w), b=_lanes(x)), w.shape[1], dict(p=_lanes(levels[0]))),
           "product_add": (dict(a=_lanes(p[:, 0::2]), b=_lanes(p[:, 1::2])), p.shape[1] // 2,
                           dict(s=_lanes(levels[1])))}
    if up:
        a = np.concatenate([lv[:, 0::2] for lv in up], axis=1)
        b = np.concatenate([lv[:, 1::2] for lv in up], axis=1)
        out["fp32_add"] = (dict(a=_lanes(a), b=_lanes(b)), a.shape[1], dict(s=_lanes(np.concatenate(levels[2:], 1))))
    return {**out,
            "dpe_acc": (dict(clear=clear.astype(np.uint32), acc=_prev(acc), t=levels[-1][:, 0]), 1, dict(nxt=acc))}


def _toggles(vals: np.ndarray, width: int) -> int:
    """Bit changes of a register holding ``vals`` [V, ...] in turn, from 0 (reset / initial value)."""
    v = np.asarray(vals).astype(np.uint64).reshape(len(vals), -1) & np.uint64((1 << width) - 1)
    return int(np.bitwise_count(v ^ _prev(v)).sum())


def _flag_bits(seq: np.ndarray, stages: int) -> int:
    """Toggles of a ``stages``-bit shift register of one flag per cycle, from 0 and back to 0 after the stream."""
    s = np.concatenate([[0], np.asarray(seq, dtype=np.int64), [0]])
    return stages * int(np.count_nonzero(s[1:] != s[:-1]))


def dpe_register_toggles(vectors: list, p: DPEParams) -> dict[str, tuple[int, int]]:
    """role -> (bits, toggles) of one tree's registers over ``vectors`` (then idle cycles: inputs held)."""
    w, x, clear = as_arrays(vectors)
    acc, levels = F.dpe_stream(w, x, clear)
    regd = [levels[lv] for lv in p.registered_levels]
    bits = p.register_bits()
    stages = 1 + len(p.registered_levels) + 1
    ctrl = _flag_bits(np.ones(len(clear)), stages) + _flag_bits(clear, stages) + 2  # vs, cs, out_valid
    return dict(w_in=(bits["w_in"], _toggles(w, 16)), x_in=(bits["x_in"], _toggles(x, 16)),
                products=(bits["products"], _toggles(levels[0], 32)),  # the 8 constant bits never toggle
                tree=(bits["tree"], sum(_toggles(r, 32) for r in regd)), acc=(32, _toggles(acc, 32)),
                control=(2 * stages + 1, ctrl))


def dpe_level_toggles(vectors: list) -> list[int]:
    """Toggles of a register after each adder-tree level (1..log2 n) of one tree, whether or not the RTL has one
    there: the estimator recounts the tree registers of another pipeline from these."""
    w, x, clear = as_arrays(vectors)
    _, levels = F.dpe_stream(w, x, clear)
    return [_toggles(lv, 32) for lv in levels[1:]]


# ----------------------------------------------------------------------------------------------- VPE
def vpe_values(vectors: list) -> dict[str, np.ndarray]:
    """Every per-lane value of the VPE pipeline [V, lanes] (a, b, c, c', product, misc result, product with its
    sign flipped, sum, result) and the instruction fields [V]."""
    op = np.array([int(v[0]) for v in vectors])
    neg = np.array([int(v[1]) for v in vectors])
    csel = np.array([int(v[2]) for v in vectors])
    a, b, c = (np.stack([np.asarray(v[k], dtype=np.uint32) for v in vectors]) for k in (3, 4, 5))
    cc = np.stack([F.csel_source(a[i], c[i], int(csel[i])) for i in range(len(op))])
    p = F.mul_f32(a, b)
    r = np.stack([F.vpe_op(int(op[i]), a[i], b[i], c[i], int(neg[i]), int(csel[i])) for i in range(len(op))])
    m = np.where((op == F.MAD)[:, None], np.uint32(0), r).astype(np.uint32)
    pn = np.where(neg[:, None] == 1, F.neg32(p), p).astype(np.uint32)
    return dict(op=op, neg=neg, csel=csel, a=a, b=b, c=c, cc=cc, p=p, m=m, pn=pn, s=F.add_f32(pn, cc), r=r)


def vpe_streams(vectors: list) -> dict[str, tuple[dict, int, dict]]:
    """unit -> (inputs, segments, expected outputs) of the VPE's lanes over ``vectors``."""
    v = vpe_values(vectors)
    L = v["a"].shape[1]
    bc = lambda f: np.tile(np.asarray(f, dtype=np.uint32), L)  # noqa: E731  (a per-instruction field, every lane)
    rot = {f"a{k}": _lanes(np.roll(v["a"], -k, axis=1)) for k in ROTATIONS}
    return {"rot_mux": (dict(csel=bc(v["csel"]), c=_lanes(v["c"]), **rot), L, dict(cc=_lanes(v["cc"]))),
            "fp32_mul": (dict(a=_lanes(v["a"]), b=_lanes(v["b"])), L, dict(p=_lanes(v["p"]))),
            "vpe_misc": (dict(op=bc(v["op"]), neg=bc(v["neg"]), a=_lanes(v["a"]), c=_lanes(v["cc"])), L,
                         dict(m=_lanes(v["m"]))),
            "vpe_glue": (dict(op=bc(v["op"]), neg=bc(v["neg"]), p=_lanes(v["p"]), s=_lanes(v["s"]), mr=_lanes(v["m"])),
                         L, dict(pn=_lanes(v["pn"]), r=_lanes(v["r"]))),
            "fp32_add": (dict(a=_lanes(v["pn"]), b=_lanes(v["cc"])), L, dict(s=_lanes(v["s"])))}


def vpe_register_toggles(vectors: list, p: VPEParams) -> dict[str, tuple[int, int]]:
    """role -> (bits, toggles) of the VPE's registers over ``vectors`` (then idle cycles: inputs held)."""
    v = vpe_values(vectors)
    bits = p.register_bits()
    fields = _toggles(v["op"], 3) + _toggles(v["neg"], 1) + _toggles(v["csel"], 3)
    ctrl = 2 * fields - _toggles(v["csel"], 3) + _flag_bits(np.ones(len(v["op"])), 3)  # stage 0, stage 1, valid
    return dict(operands=(bits["operands"], sum(_toggles(v[k], 32) for k in "abc")),
                stage1=(bits["stage1"], sum(_toggles(v[k], 32) for k in ("p", "cc", "m"))),
                results=(bits["results"], _toggles(v["r"], 32)), control=(bits["control"], ctrl))
