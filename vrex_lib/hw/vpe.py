"""VPE -- the LXE's vector unit (paper §V, Table I: N_VPE-h x N_VPE-w = 1 x 64), in MyHDL.

64 lanes, each an FP32 multiply-add datapath with a small unit for the pieces of softmax, normalisation,
activation and RoPE that are not multiply-adds (``docs/DECISIONS.md D284``). One instruction per cycle applies
to all lanes (the instruction set is :func:`vrex_lib.hw.fpref.vpe_op`):

* MAD ``r = fl(+-fl(a b) + c')`` (MUL: c' = -0, ADD: b = 1): :func:`~vrex_lib.hw.bf16.fp32_mul` then
  :func:`~vrex_lib.hw.bf16.fp32_add`, two roundings (no fused multiply-add);
* MAX / MIN, FLOOR, SCALE (a 2^n, the range reduction of exp), RSQ0 / RCP0 (integer seeds of 1/sqrt and 1/x,
  refined by Newton steps of MADs), BF16 (round to BF16 for the write-back), MOVC (copy c'): :func:`vpe_misc`;
* ``c'`` is the c operand or operand a rotated by 1, 2, 4, ..., 32 lanes (:func:`rot_mux`): the cross-lane
  step of a reduction (sum or max over a row: six rotate-and-combine instructions) and RoPE's half swap.

Operands arrive as FP32 (BF16 memory words widen exactly by appending 16 zero bits); the BF16 instruction rounds
results for the write-back. The microcode of softmax, RMSNorm, SiLU and RoPE on this instruction set is
:mod:`vrex_lib.hw.vpe_programs`. Pipeline: operand registers, then the multiplier and the misc unit, then the adder
and the result select: a result leaves three cycles after its instruction (``LATENCY``); every register loads every
cycle.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from myhdl import ConcatSignal, ResetSignal, Signal, SignalType, always_comb, always_seq, block, intbv

from ..config import VRexCoreConfig
from . import fpref
from ._sim import stream_pipeline
from .bf16 import QNAN, fp32_add, fp32_mul
from .dpe import lane, pack_rows, pipe_reg, unpack_rows
from .harness import LOG, Protocol, SimRun, Stimulus, stream_mismatches, stream_outputs

Sig = SignalType
LANES = fpref.LANES
LATENCY = 3
ROTATIONS = tuple(1 << k for k in range(fpref.CSEL_MAX))  # csel 1..6 -> rotate by 1, 2, 4, ..., 32 lanes


@dataclass(frozen=True)
class VPEParams:
    """One vector unit of ``lanes`` FP32 lanes (the paper's N_VPE-w = 64; rotations are taken mod ``lanes``)."""

    lanes: int = LANES

    @classmethod
    def from_core(cls, cfg: VRexCoreConfig | None = None) -> "VPEParams":
        return cls((cfg or VRexCoreConfig()).n_vpe_w)

    @property
    def latency(self) -> int:
        return LATENCY

    def register_bits(self) -> dict[str, int]:
        """Flip-flops by role: operands a, b, c; stage-1 product, c' and misc result; results; control."""
        return dict(operands=3 * 32 * self.lanes, stage1=3 * 32 * self.lanes, results=32 * self.lanes,
                    control=3 + 1 + 3 + 3 + 1 + 3)


def vpe_ports(p: VPEParams = VPEParams()) -> dict:
    """Fresh top-level signals (port order = stimulus packing order)."""
    w = 32 * p.lanes
    return dict(clk=Signal(bool(0)), rst=ResetSignal(0, active=1, isasync=False), in_valid=Signal(bool(0)),
                op=Signal(intbv(0)[3:]), neg=Signal(bool(0)), csel=Signal(intbv(0)[3:]), a=Signal(intbv(0)[w:]),
                b=Signal(intbv(0)[w:]), c=Signal(intbv(0)[w:]), out_valid=Signal(bool(0)), r=Signal(intbv(0)[w:]))


@block
def rot_mux(csel: Sig, c: Sig, a1: Sig, a2: Sig, a4: Sig, a8: Sig, a16: Sig, a32: Sig, cc: Sig):
    """One lane's c' operand: ``c`` or the a operand of the lane 1, 2, 4, ..., 32 lanes above (mod 64)."""

    @always_comb
    def pick():
        if csel == 1:
            cc.next = a1
        elif csel == 2:
            cc.next = a2
        elif csel == 3:
            cc.next = a4
        elif csel == 4:
            cc.next = a8
        elif csel == 5:
            cc.next = a16
        elif csel == 6:
            cc.next = a32
        else:
            cc.next = c

    return pick


@block
def vpe_misc(op: Sig, neg: Sig, a: Sig, c: Sig, m: Sig):
    """The non-multiply-add results of one lane (``docs/DECISIONS.md D284``): :func:`misc_minmax`,
    :func:`misc_floor`, :func:`misc_scale` and the integer / rounding ops here, selected by ``op``; 0 for MAD."""
    mm = Signal(intbv(0)[32:])
    fl = Signal(intbv(0)[32:])
    sc = Signal(intbv(0)[32:])

    @always_comb
    def select():
        t = intbv(0)[33:]
        ad = intbv(0)[32:]
        ad[:] = a
        if a[31:23] == 0:
            ad[:] = a & 0x80000000
        if op == 1:
            m.next = mm
        elif op == 2:
            m.next = fl
        elif op == 3:
            m.next = sc
        elif op == 4:  # RSQ0
            t[:] = (fpref.RSQ_MAGIC + (1 << 32) - (a >> 1)) & 0xFFFFFFFF
            m.next = t[32:]
        elif op == 5:  # RCP0
            t[:] = (fpref.RCP_MAGIC + (1 << 32) - a) & 0xFFFFFFFF
            m.next = t[32:]
        elif op == 6:  # BF16: round to nearest even on bit 16
            if a[31:23] == 255 and a[23:0] != 0:
                m.next = QNAN
            else:
                t[:] = ad + 0x7FFF + ad[16]
                m.next = t[32:16] << 16
        elif op == 7:  # MOVC
            m.next = c
        else:
            m.next = 0

    parts = [misc_minmax(neg, a, c, mm), misc_floor(a, fl), misc_scale(a, c, sc)]
    return parts, select


@block
def misc_minmax(neg: Sig, a: Sig, c: Sig, m: Sig):
    """max(a, c) (``neg``: min) of the DAZ'd operands by their total-order keys: +0 above -0, so max(+0, -0) = +0
    and min(+0, -0) = -0; a NaN operand gives the canonical NaN."""

    @always_comb
    def cmp():
        ad = intbv(0)[32:]
        cd = intbv(0)[32:]
        ka = intbv(0)[32:]
        kc = intbv(0)[32:]
        ad[:] = a
        if a[31:23] == 0:
            ad[:] = a & 0x80000000
        cd[:] = c
        if c[31:23] == 0:
            cd[:] = c & 0x80000000
        if ad[31]:
            ka[:] = ~ad
        else:
            ka[:] = ad | 0x80000000
        if cd[31]:
            kc[:] = ~cd
        else:
            kc[:] = cd | 0x80000000
        if (a[31:23] == 255 and a[23:0] != 0) or (c[31:23] == 255 and c[23:0] != 0):
            m.next = QNAN
        elif (ka >= kc) != bool(neg):
            m.next = ad
        elif ka == kc:
            m.next = ad
        else:
            m.next = cd

    return cmp


@block
def misc_floor(a: Sig, m: Sig):
    """floor(a): the fraction bits masked off, one unit added to a negative non-integer's magnitude."""

    @always_comb
    def floor():
        t = intbv(0)[33:]
        fb = intbv(0)[5:]
        mask = intbv(0)[32:]
        ea = a[31:23]
        if ea == 255 and a[23:0] != 0:
            m.next = QNAN
        elif ea == 255 or ea >= 150:
            m.next = a
        elif ea == 0:
            m.next = a & 0x80000000
        elif ea < 127:
            if a[31]:
                m.next = 0xBF800000
            else:
                m.next = 0
        else:
            fb[:] = 150 - ea
            mask[:] = (1 << fb) - 1
            t[:] = a & ~mask
            if a[31] and (a & mask) != 0:
                t[:] = t + (1 << fb)
            m.next = t[32:]

    return floor


@block
def misc_scale(a: Sig, c: Sig, m: Sig):
    """a 2^n with n = trunc(c) clamped to [-256, 256]: an exponent add; inf on overflow, a signed zero below
    2^-126."""

    @always_comb
    def scale():
        nabs = intbv(0)[10:]
        e2 = intbv(0)[11:]  # ea + 256 +- n
        ea = a[31:23]
        ec = c[31:23]
        if ec < 127:
            nabs[:] = 0
        elif ec >= 127 + 9:
            nabs[:] = 256
        else:
            nabs[:] = (0x800000 | c[23:0]) >> (150 - ec)
            if nabs > 256:
                nabs[:] = 256
        if c[31]:
            e2[:] = ea + 256 - nabs
        else:
            e2[:] = ea + 256 + nabs
        if (ea == 255 and a[23:0] != 0) or (ec == 255 and c[23:0] != 0):
            m.next = QNAN
        elif ea == 255:
            m.next = a
        elif ea == 0:
            m.next = a & 0x80000000
        elif e2 >= 256 + 255:
            m.next = (a & 0x80000000) | 0x7F800000
        elif e2 <= 256:
            m.next = a & 0x80000000
        else:
            m.next = (a & 0x807FFFFF) | ((e2 - 256) << 23)

    return scale


@block
def vpe_glue(op: Sig, neg: Sig, p: Sig, s: Sig, mr: Sig, pn: Sig, r: Sig):
    """Stage 2 of a lane: the product's sign flip for the adder (``pn``), then the result select (``r``)."""

    @always_comb
    def flip():
        if neg:
            pn.next = p ^ 0x80000000
        else:
            pn.next = p

    @always_comb
    def select():
        if op == 0:
            r.next = s
        else:
            r.next = mr

    return flip, select


@block
def pack(lanes: list, wide: Sig):
    """The lane signals as one packed vector (lane 0 in the lowest bits)."""
    cat = ConcatSignal(*reversed(lanes))

    @always_comb
    def drive():
        wide.next = cat

    return drive


def _lane_sigs(n: int) -> list:
    return [Signal(intbv(0)[32:]) for _ in range(n)]


@block
def vpe(clk: Sig, rst: Sig, in_valid: Sig, op: Sig, neg: Sig, csel: Sig, a: Sig, b: Sig, c: Sig, out_valid: Sig,
        r: Sig):
    """The 1 x 64 vector unit (module docstring); ``len(a) // 32`` lanes."""
    n = len(a) // 32
    a_r, b_r, c_r = (Signal(intbv(0)[32 * n:]) for _ in range(3))
    op0, op1, csel0 = Signal(intbv(0)[3:]), Signal(intbv(0)[3:]), Signal(intbv(0)[3:])
    neg0, neg1, v0, v1 = (Signal(bool(0)) for _ in range(4))
    insts = [pipe_reg(clk, a, a_r), pipe_reg(clk, b, b_r), pipe_reg(clk, c, c_r)]
    al, bl, cl = _lane_sigs(n), _lane_sigs(n), _lane_sigs(n)
    insts += [lane(w, i, sig) for w, ls in ((a_r, al), (b_r, bl), (c_r, cl)) for i, sig in enumerate(ls)]
    out = _lane_sigs(n)
    for i in range(n):
        cc, p, m, p_r, cc_r, m_r, pn, s, ri = _lane_sigs(9)
        rot = [al[(i + k) % n] for k in ROTATIONS]
        insts += [rot_mux(csel0, cl[i], *rot, cc), fp32_mul(al[i], bl[i], p), vpe_misc(op0, neg0, al[i], cc, m),
                  pipe_reg(clk, p, p_r), pipe_reg(clk, cc, cc_r), pipe_reg(clk, m, m_r),
                  vpe_glue(op1, neg1, p_r, s, m_r, pn, ri), fp32_add(pn, cc_r, s), pipe_reg(clk, ri, out[i])]
    insts.append(pack(out, r))

    @always_seq(clk.posedge, reset=rst)
    def control():
        v0.next = in_valid
        v1.next = v0
        out_valid.next = v1
        op0.next = op
        neg0.next = neg
        csel0.next = csel
        op1.next = op0
        neg1.next = neg0

    return insts, control


# ---------------------------------------------------------------------------------------------- vectors
def reference(vectors: list) -> np.ndarray:
    """Result bits [V, lanes] of ``(op, neg, csel, a, b, c)`` instructions (:func:`vrex_lib.hw.fpref.vpe_op`)."""
    return np.stack([fpref.vpe_op(int(v[0]), v[3], v[4], v[5], int(v[1]), int(v[2])) for v in vectors]) \
        if vectors else np.zeros((0, LANES), np.uint32)


def _check_vectors(vectors: list, p: VPEParams) -> None:
    lanes = p.lanes
    for i, v in enumerate(vectors):
        if not (0 <= int(v[0]) < 8 and int(v[1]) in (0, 1) and 0 <= int(v[2]) <= fpref.CSEL_MAX):
            raise ValueError(f"VPE instruction {i}: op 0..7, neg 0/1, csel 0..{fpref.CSEL_MAX}; got {v[:3]}")
        if not len(v[3]) == len(v[4]) == len(v[5]) == lanes:
            raise ValueError(f"VPE instruction {i}: a, b, c need {lanes} FP32 lanes")


def simulate_vpe(vectors: list, p: VPEParams = VPEParams(), record: list | None = None) -> tuple[np.ndarray, int]:
    """MyHDL simulation of the vector unit on ``(op, neg, csel, a, b, c)`` instructions: (results [V, lanes],
    cycles)."""
    _check_vectors(vectors, p)
    lanes = p.lanes
    P = vpe_ports(p)
    packed = [pack_rows(np.stack([v[k] for v in vectors]), 32) if vectors else [] for k in (3, 4, 5)]

    def apply(i: int | None) -> None:
        if i is not None:
            v = vectors[i]
            P["op"].next, P["neg"].next, P["csel"].next = int(v[0]), bool(v[1]), int(v[2])
            P["a"].next, P["b"].next, P["c"].next = packed[0][i], packed[1][i], packed[2][i]

    out, cycles = stream_pipeline(vpe, P, P, len(vectors), LATENCY, apply, "r", record)
    return (unpack_rows(out, lanes, 32) if out else np.zeros((0, lanes), np.uint32)), cycles


def check_vpe(vectors: list, p: VPEParams = VPEParams(), record: list | None = None) -> dict:
    """MyHDL vector unit vs :func:`reference`: an instruction mismatches when any lane differs."""
    t0 = time.perf_counter()
    got, cycles = simulate_vpe(vectors, p, record)
    dt = time.perf_counter() - t0
    ref = reference(vectors)
    k = min(len(got), len(ref))
    bad = int(np.sum(np.any(got[:k] != ref[:k], axis=1))) + abs(len(ref) - len(got))
    ops = np.bincount([int(v[0]) for v in vectors], minlength=8) if vectors else np.zeros(8, int)
    return dict(vectors=len(vectors), mismatches=bad, cycles=cycles, sim_seconds=dt, results=list(got),
                actions={f"{fpref.OP_NAMES[i].lower()}_instructions": int(ops[i]) for i in range(8)})


PROTOCOL = Protocol(("out_valid", "r"), strobe=("out_valid",))


def vpe_stimulus(vectors: list, p: VPEParams = VPEParams()) -> tuple[Stimulus, list[dict]]:
    """One input line per instruction, then ``LATENCY`` idle lines; meta holds the reference results."""
    _check_vectors(vectors, p)
    s = Stimulus(vpe_ports(p), PROTOCOL.outputs)
    s.step(rst=1)
    s.vals["rst"] = 0
    packed = [pack_rows(np.stack([v[k] for v in vectors]), 32) if vectors else [] for k in (3, 4, 5)]
    for i, v in enumerate(vectors):
        s.step(in_valid=1, op=int(v[0]), neg=int(v[1]), csel=int(v[2]), a=packed[0][i], b=packed[1][i],
               c=packed[2][i])
    for _ in range(LATENCY):
        s.step(in_valid=0)
    s.lines[-1] |= LOG
    return s, [dict(ref=reference(vectors))]


def check_vpe_log(run: SimRun, meta: list[dict], p: VPEParams = VPEParams()) -> dict:
    """The results the Verilog unit produced (one per ``out_valid``, in order) vs the reference."""
    lanes = p.lanes
    got, broken = stream_outputs(run, vpe_ports(p), PROTOCOL.outputs, "r")
    g = unpack_rows(got, lanes, 32) if got else np.zeros((0, lanes), np.uint32)
    return stream_mismatches(g, meta[0]["ref"], broken)
