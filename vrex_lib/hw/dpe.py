"""DPE -- one MAC tree of the LXE's dot-product engine (paper §V, Table I: N_DPE-h = 64 trees of N_DPE-w = 64 BF16
inputs), in MyHDL.

Per cycle the tree takes a vector of ``n`` BF16 weights ``w`` and ``n`` BF16 activations ``x`` (the DPE broadcasts
one activation vector to all its trees, each tree holding its own weight row) and adds their dot product into an
FP32 accumulator:

* ``n`` :func:`~vrex_lib.hw.bf16.bf16_mul` multipliers (exact FP32 products);
* a binary tree of ``n - 1`` :func:`~vrex_lib.hw.bf16.fp32_add` adders (level ``l`` adds neighbours ``2i``,
  ``2i + 1`` of level ``l - 1``), FP32 throughout (``docs/DECISIONS.md D281``);
* the accumulator (:func:`dpe_acc`): ``acc = t`` when the vector is the first of a dot product (``in_clear``),
  else ``acc = acc + t``, one FP32 add per cycle.

Pipeline (``docs/DECISIONS.md D283``): an input register (w, x), a product register, a register after every
``levels_per_stage``-th tree level and after the last one, and the accumulator: a vector applied at cycle t shows
its accumulator value (``out_valid``) after cycle ``t + latency - 1`` (:attr:`DPEParams.latency` cycles later).
Every register loads every cycle (no clock gating); only the accumulator holds while ``in_valid`` is low.
The reference is :func:`vrex_lib.hw.fpref.dpe_stream` (same products, same tree order, same rounding).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from myhdl import ResetSignal, Signal, SignalType, always, always_comb, always_seq, block, intbv

from ..config import VRexCoreConfig
from . import fpref
from ._sim import stream_pipeline
from .bf16 import bf16_mul, fp32_add
from .harness import LOG, Protocol, SimRun, Stimulus, stream_mismatches, stream_outputs

Sig = SignalType


@dataclass(frozen=True)
class DPEParams:
    """One MAC tree: ``n`` inputs (a power of two), a register after every ``levels_per_stage`` adder levels."""

    n: int = 64
    levels_per_stage: int = 1

    @classmethod
    def from_core(cls, cfg: VRexCoreConfig | None = None, levels_per_stage: int = 1) -> "DPEParams":
        return cls((cfg or VRexCoreConfig()).n_dpe_w, levels_per_stage)

    def check(self) -> None:
        if self.n < 2 or self.n & (self.n - 1):
            raise ValueError(f"DPEParams.n={self.n} must be a power of two >= 2")
        if not 1 <= self.levels_per_stage <= self.levels:
            raise ValueError(f"DPEParams.levels_per_stage={self.levels_per_stage} must be in 1..{self.levels}")

    @property
    def levels(self) -> int:
        return int(math.log2(self.n))

    @property
    def registered_levels(self) -> tuple[int, ...]:
        """Adder-tree levels followed by a pipeline register (every k-th and the last)."""
        k = self.levels_per_stage
        return tuple(lv for lv in range(1, self.levels + 1) if lv % k == 0 or lv == self.levels)

    @property
    def latency(self) -> int:
        """Cycles from a vector's input cycle to the cycle its accumulator value is out: input, product, tree
        registers, accumulator."""
        return 3 + len(self.registered_levels)

    def register_bits(self, with_x: bool = True) -> dict[str, int]:
        """Flip-flops of one tree by role (``with_x``: the activation input register, shared by all trees of a
        DPE); the valid/clear pipeline is two bits per stage. A product register keeps 24 flip-flops: the 8 low
        mantissa bits of a BF16 x BF16 product are always zero, and synthesis removes their flip-flops."""
        out = dict(w_in=16 * self.n, x_in=16 * self.n if with_x else 0, products=24 * self.n,
                   tree=32 * sum(self.n >> lv for lv in self.registered_levels), acc=32,
                   control=2 * (self.latency - 1))
        return out


def dpe_ports(p: DPEParams) -> dict:
    """Fresh top-level signals of one tree (port order = stimulus packing order)."""
    return dict(clk=Signal(bool(0)), rst=ResetSignal(0, active=1, isasync=False), in_valid=Signal(bool(0)),
                in_clear=Signal(bool(0)), w=Signal(intbv(0)[16 * p.n:]), x=Signal(intbv(0)[16 * p.n:]),
                out_valid=Signal(bool(0)), out_acc=Signal(intbv(0)[32:]))


@block
def pipe_reg(clk: Sig, d: Sig, q: Sig):
    """A datapath register: loads every cycle, no reset."""

    @always(clk.posedge)
    def load():
        q.next = d

    return load


@block
def lane(wide: Sig, i: int, out: Sig):
    """Lane ``i`` of a packed vector (lane 0 in the lowest bits): a named wire per lane for the converter."""
    bits = len(out)
    lo, hi = bits * i, bits * (i + 1)

    @always_comb
    def pick():
        out.next = wide[hi:lo]

    return pick


@block
def dpe_acc(clear: Sig, acc: Sig, t: Sig, nxt: Sig):
    """The accumulator's next value: ``t`` on the first vector of a dot product, else ``acc + t`` (FP32)."""
    s = Signal(intbv(0)[32:])
    add = fp32_add(acc, t, s)

    @always_comb
    def select():
        if clear:
            nxt.next = t
        else:
            nxt.next = s

    return add, select


@block
def product_add(a: Sig, b: Sig, s: Sig):
    """A level-1 adder of the tree as synthesis sees it: its operands are BF16 x BF16 products, whose 8 low
    mantissa bits are always zero, so only their 24 high bits (``a``, ``b``) reach it (the unit the synthesis by
    count uses for level 1; the RTL instantiates :func:`fp32_add` and the tool propagates the zeros)."""
    a32, b32 = Signal(intbv(0)[32:]), Signal(intbv(0)[32:])
    add = fp32_add(a32, b32, s)

    @always_comb
    def widen():
        a32.next = a << 8
        b32.next = b << 8

    return widen, add


@block
def ctrl_pipe(clk: Sig, rst: Sig, vin: Sig, cin: Sig, vs: Sig, cs: Sig):
    """Valid and clear bits moving with the data: ``vs[j]``/``cs[j]`` are the flags of the vector in stage j."""
    d = len(vs)

    @always_seq(clk.posedge, reset=rst)
    def shift():
        if d > 1:
            vs.next = (vs[d - 1:0] << 1) | vin
            cs.next = (cs[d - 1:0] << 1) | cin
        else:
            vs.next = vin
            cs.next = cin

    return shift


@block
def dpe_tree(clk: Sig, rst: Sig, in_valid: Sig, in_clear: Sig, w: Sig, x: Sig, out_valid: Sig, out_acc: Sig,
             p: DPEParams):
    """One MAC tree (see the module docstring); ``out_acc`` is the accumulator register."""
    p.check()
    n = p.n
    w_r, x_r = Signal(intbv(0)[16 * n:]), Signal(intbv(0)[16 * n:])
    insts = [pipe_reg(clk, w, w_r), pipe_reg(clk, x, x_r)]
    stages = 1 + len(p.registered_levels) + 1  # input, product, tree registers before the accumulator
    vs, cs = Signal(intbv(0)[stages:]), Signal(intbv(0)[stages:])
    insts.append(ctrl_pipe(clk, rst, in_valid, in_clear, vs, cs))
    cur = []
    for i in range(n):
        wi, xi = Signal(intbv(0)[16:]), Signal(intbv(0)[16:])
        prod, q = Signal(intbv(0)[32:]), Signal(intbv(0)[32:])
        insts += [lane(w_r, i, wi), lane(x_r, i, xi), bf16_mul(wi, xi, prod), pipe_reg(clk, prod, q)]
        cur.append(q)
    for lv in range(1, p.levels + 1):
        nxt = [Signal(intbv(0)[32:]) for _ in range(len(cur) // 2)]
        insts += [fp32_add(cur[2 * i], cur[2 * i + 1], nxt[i]) for i in range(len(nxt))]
        if lv in p.registered_levels:
            regd = [Signal(intbv(0)[32:]) for _ in nxt]
            insts += [pipe_reg(clk, a, b) for a, b in zip(nxt, regd)]
            nxt = regd
        cur = nxt
    acc_next = Signal(intbv(0)[32:])
    v_top, c_top = Signal(bool(0)), Signal(bool(0))
    insts.append(dpe_acc(c_top, out_acc, cur[0], acc_next))

    @always_comb
    def top_flags():
        v_top.next = vs[stages - 1]
        c_top.next = cs[stages - 1]

    @always_seq(clk.posedge, reset=rst)
    def accumulate():
        out_valid.next = v_top
        if v_top:
            out_acc.next = acc_next

    return insts, top_flags, accumulate


# ---------------------------------------------------------------------------------------------- vectors
def pack_rows(a: np.ndarray, bits: int) -> list[int]:
    """Rows of ``a`` [V, n] as integers, lane 0 in the lowest ``bits`` bits (the harness's packing)."""
    dt = {16: "<u2", 32: "<u4"}[bits]
    b = np.ascontiguousarray(np.asarray(a).astype(dt))
    return [int.from_bytes(r.tobytes(), "little") for r in b]


def unpack_rows(vals: list[int], n: int, bits: int) -> np.ndarray:
    dt = {16: np.uint16, 32: np.uint32}[bits]
    return np.array([np.frombuffer(int(v).to_bytes(n * bits // 8, "little"), dtype=dt) for v in vals], dtype=dt)


def as_arrays(vectors: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(w [V, n] uint16, x [V, n] uint16, clear [V] bool) of a list of ``(w, x, clear)`` vectors."""
    if not vectors:
        return np.zeros((0, 1), np.uint16), np.zeros((0, 1), np.uint16), np.zeros(0, bool)
    w = np.stack([np.asarray(v[0], dtype=np.uint16) for v in vectors])
    x = np.stack([np.asarray(v[1], dtype=np.uint16) for v in vectors])
    return w, x, np.array([bool(v[2]) for v in vectors])


def reference(vectors: list) -> np.ndarray:
    """Accumulator bits after each vector (:func:`vrex_lib.hw.fpref.dpe_stream`)."""
    w, x, c = as_arrays(vectors)
    return fpref.dpe_stream(w, x, c)[0] if len(c) else np.zeros(0, np.uint32)


def _check_vectors(vectors: list, p: DPEParams) -> None:
    for i, v in enumerate(vectors):
        if len(v[0]) != p.n or len(v[1]) != p.n:
            raise ValueError(f"DPE vector {i}: w and x need {p.n} BF16 lanes, got {len(v[0])} and {len(v[1])}")
    if vectors and not vectors[0][2]:
        raise ValueError("DPE vector 0 must start a dot product (clear=1): the accumulator holds nothing before it")


def simulate_dpe(vectors: list, p: DPEParams, record: list | None = None) -> tuple[np.ndarray, int]:
    """MyHDL simulation of one tree on ``(w, x, clear)`` vectors: (accumulator bits per vector, cycles)."""
    _check_vectors(vectors, p)
    P = dpe_ports(p)
    w_int, x_int = pack_rows(as_arrays(vectors)[0], 16), pack_rows(as_arrays(vectors)[1], 16)

    def apply(i: int | None) -> None:
        P["in_clear"].next = bool(vectors[i][2]) if i is not None else False
        if i is not None:
            P["w"].next, P["x"].next = w_int[i], x_int[i]

    out, cycles = stream_pipeline(dpe_tree, dict(P, p=p), P, len(vectors), p.latency, apply, "out_acc", record)
    return np.array(out, dtype=np.uint32), cycles


def check_dpe(vectors: list, p: DPEParams, record: list | None = None) -> dict:
    """MyHDL tree vs :func:`reference`: a vector mismatches when its accumulator value (or its presence) differs."""
    t0 = time.perf_counter()
    got, cycles = simulate_dpe(vectors, p, record)
    dt = time.perf_counter() - t0
    ref = reference(vectors)
    bad = int(np.sum(got[:len(ref)] != ref[:len(got)])) + abs(len(ref) - len(got))
    return dict(vectors=len(vectors), mismatches=bad, cycles=cycles, sim_seconds=dt, results=list(got),
                actions=dict(macs=len(vectors) * p.n, tree_adds=len(vectors) * (p.n - 1)))


PROTOCOL = Protocol(("out_valid", "out_acc"), strobe=("out_valid",))


def dpe_stimulus(vectors: list, p: DPEParams) -> tuple[Stimulus, list[dict]]:
    """One input line per vector, then ``latency`` idle lines; meta holds the reference accumulator values."""
    _check_vectors(vectors, p)
    s = Stimulus(dpe_ports(p), PROTOCOL.outputs)
    s.step(rst=1)
    s.vals["rst"] = 0
    w, x, c = as_arrays(vectors)
    for wi, xi, ci in zip(pack_rows(w, 16), pack_rows(x, 16), c):
        s.step(in_valid=1, in_clear=int(ci), w=wi, x=xi)
    for _ in range(p.latency):
        s.step(in_valid=0, in_clear=0)
    s.lines[-1] |= LOG  # the end of the stream is logged: a missing or extra out_valid shows in the count
    return s, [dict(ref=reference(vectors))]


def check_dpe_log(run: SimRun, meta: list[dict], p: DPEParams) -> dict:
    """The accumulator values the Verilog tree produced (one per ``out_valid``, in order) vs the reference."""
    got, broken = stream_outputs(run, dpe_ports(p), PROTOCOL.outputs, "out_acc")
    return stream_mismatches(np.array(got, dtype=np.uint32), meta[0]["ref"], broken)
