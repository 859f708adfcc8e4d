"""Microcode of the VPE's four operation classes (paper §V: softmax, normalisation, activation, RoPE) on its
instruction set (:func:`vrex_lib.hw.fpref.vpe_op`), run on the bit-exact reference; each run records the
instruction stream a 1 x 64 VPE executes, which drives the RTL's bulk check and toggle counts.

Rows live in 64-lane chunks (a row of L elements is ceil(L / 64) vectors). Reductions are lane-wise over the
chunks, then six rotate-and-combine instructions (rotations by 32, 16, ..., 1 lanes) leave the row's result in
every lane. ``docs/DECISIONS.md D285``:

* **softmax**: max (MAX), then per chunk exp(x - max) = 2^t, t = (x - max) log2(e) clamped to >= -126,
  split t = i + f (FLOOR), 2^f by a cubic (three MADs, coefficients fitted once on [0, 1)), times 2^i (SCALE);
  sum (MAD); 1/sum from RCP0 and three Newton steps y <- y (2 - s y); out = e y rounded to BF16;
* **RMSNorm**: sum of squares (MAD), ms = sum / L + eps, 1/sqrt(ms) from RSQ0 and two Newton steps
  y <- y (1.5 - ms/2 y^2), out = x y gamma rounded to BF16;
* **SiLU**: x / (1 + e^-x) with e^-x as in softmax (t clamped to [-126, 126]) and 1/(1 + e^-x) by RCP0 + Newton;
* **RoPE** (one 64-dimensional head per vector, HF's rotate-half layout): out = x cos + rot32(x) sin', sin' =
  (-sin, +sin) on the two halves, rot32 the 32-lane rotation (MOVC).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import fpref as F

LANES = F.LANES
REDUCE_CSEL = tuple(range(F.CSEL_MAX, 0, -1))  # rotate by 32, 16, ..., 1 lanes


def bc(x: float) -> np.ndarray:
    """A constant broadcast to the 64 lanes, as FP32 bits."""
    return np.full(LANES, F.bits32(np.float32(x)), dtype=np.uint32)


ZERO, NZERO, ONE, TWO, HALF, THREE_HALVES = bc(0.0), bc(-0.0), bc(1.0), bc(2.0), bc(0.5), bc(1.5)
LOG2E, NLOG2E = bc(np.log2(np.e)), bc(-np.log2(np.e))
T_LO, T_HI = bc(-126.0), bc(126.0)
_f = 0.5 + 0.5 * np.cos(np.pi * (np.arange(64) + 0.5) / 64)  # Chebyshev nodes on [0, 1]
EXP2_POLY = tuple(bc(c) for c in np.polyfit(_f, np.exp2(_f), 3))  # c3, c2, c1, c0: 2^f for f in [0, 1)


@dataclass
class Trace:
    """The instructions a program issued: ``(op, neg, csel, a, b, c)`` each, in order."""

    ops: list = field(default_factory=list)

    def run(self, op: int, a: np.ndarray, b: np.ndarray = ZERO, c: np.ndarray = ZERO, neg: int = 0,
            csel: int = 0) -> np.ndarray:
        a, b, c = (np.asarray(v, dtype=np.uint32) for v in (a, b, c))
        self.ops.append((op, neg, csel, a, b, c))
        return F.vpe_op(op, a, b, c, neg, csel)

    # the instructions by role
    def mul(self, a, b):
        return self.run(F.MAD, a, b, NZERO)

    def add(self, a, c):
        return self.run(F.MAD, a, ONE, c)

    def sub(self, c, a):  # c - a
        return self.run(F.MAD, a, ONE, c, neg=1)

    def mad(self, a, b, c, neg=0):
        return self.run(F.MAD, a, b, c, neg)

    def reduce(self, v, op: int = F.MAD):
        """The row's sum (MAD) or max (MAX) of the lane partials ``v``, in every lane."""
        for k in REDUCE_CSEL:
            v = self.run(op, v, ONE if op == F.MAD else ZERO, ZERO, 0, k)
        return v

    def exp2(self, t):
        """2^t for t >= -126 (range reduction + cubic + SCALE)."""
        fi = self.run(F.FLOOR, t)
        f = self.sub(t, fi)
        c3, c2, c1, c0 = EXP2_POLY
        p = self.mad(f, c3, c2)
        p = self.mad(p, f, c1)
        p = self.mad(p, f, c0)
        return self.run(F.SCALE, p, ZERO, fi)

    def recip(self, d, steps: int = 3):
        y = self.run(F.RCP0, d)
        for _ in range(steps):
            y = self.mul(y, self.mad(d, y, TWO, neg=1))
        return y

    def rsqrt(self, m, steps: int = 2):
        y = self.run(F.RSQ0, m)
        h = self.mul(m, HALF)
        for _ in range(steps):
            y = self.mul(y, self.mad(self.mul(y, y), h, THREE_HALVES, neg=1))
        return y

    def bf16(self, v):
        return self.run(F.BF16, v)


def chunks(row: np.ndarray, pad: int) -> list[np.ndarray]:
    """A row of FP32 bits [L] as 64-lane vectors, the last padded with the bit pattern ``pad``."""
    row = np.asarray(row, dtype=np.uint32)
    n = -(-len(row) // LANES)
    out = np.full(n * LANES, pad, dtype=np.uint32)
    out[:len(row)] = row
    return list(out.reshape(n, LANES))


def softmax(tr: Trace, row: np.ndarray) -> np.ndarray:
    """softmax of FP32 bits ``row`` [L] (-inf entries are masked), rounded to BF16 (as FP32 bits) [L]."""
    xs = chunks(row, 0xFF800000)
    m = xs[0]
    for x in xs[1:]:
        m = tr.run(F.MAX, x, ZERO, m)
    m = tr.reduce(m, F.MAX)
    es, s = [], None
    for x in xs:
        t = tr.mul(tr.sub(x, m), LOG2E)
        e = tr.exp2(tr.run(F.MAX, t, ZERO, T_LO))
        es.append(e)
        s = e if s is None else tr.add(e, s)
    y = tr.recip(tr.reduce(s))
    return np.concatenate([tr.bf16(tr.mul(e, y)) for e in es])[:len(row)]


def rmsnorm(tr: Trace, x: np.ndarray, gamma: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * gamma of FP32 bits [L], rounded to BF16 [L]."""
    xs, gs = chunks(x, 0), chunks(gamma, 0)
    s = None
    for v in xs:
        s = tr.mul(v, v) if s is None else tr.mad(v, v, s)
    ms = tr.mad(tr.reduce(s), bc(1.0 / len(x)), bc(eps))
    y = tr.rsqrt(ms)
    return np.concatenate([tr.bf16(tr.mul(tr.mul(v, y), g)) for v, g in zip(xs, gs)])[:len(x)]


def silu(tr: Trace, x: np.ndarray) -> np.ndarray:
    """x / (1 + e^-x) of FP32 bits [L], rounded to BF16 [L]."""
    out = []
    for v in chunks(x, 0):
        t = tr.mul(v, NLOG2E)
        t = tr.run(F.MAX, tr.run(F.MAX, t, ZERO, T_LO), ZERO, T_HI, neg=1)
        e = tr.exp2(t)
        out.append(tr.bf16(tr.mul(v, tr.recip(tr.add(e, ONE)))))
    return np.concatenate(out)[:len(x)]


def rope(tr: Trace, x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """One head (64 lanes, HF rotate-half): x cos + rotate_half(x) sin, rounded to BF16 [64]."""
    if len(x) != LANES:
        raise ValueError(f"rope: one {LANES}-dimensional head per vector, got {len(x)}")
    half = LANES // 2
    sin_signed = np.concatenate([F.neg32(sin[:half]), np.asarray(sin[half:], dtype=np.uint32)])
    xr = tr.run(F.MOVC, x, ZERO, ZERO, 0, F.CSEL_MAX)
    return tr.bf16(tr.mad(xr, sin_signed, tr.mul(x, cos)))
