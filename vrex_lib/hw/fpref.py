"""Bit-exact NumPy/torch reference of the LXE's floating-point arithmetic (the DPE's MAC tree, the VPE's lane ops).

Operands and results are IEEE bit patterns (``uint16`` BF16, ``uint32`` FP32), vectorised over any leading shape.
The rules are those of the RTL (:mod:`vrex_lib.hw.bf16`; ``docs/DECISIONS.md D280-D282``):

* **Round to nearest, ties to even** at every FP32 result (IEEE 754 default).
* **Subnormals are flushed** (FTZ/DAZ): a subnormal operand is read as a zero of its sign, and a result whose
  magnitude, rounded to 24 significant bits with an unbounded exponent, is below 2^-126 is a zero of its sign
  (tininess after rounding, as x86 and Arm FTZ modes detect it). BF16 shares FP32's exponent range, so no BF16
  operand the runtime produces from trained weights or activations is subnormal in practice; flushing saves the
  normalisation shifters of every adder and multiplier.
* **Infinities and NaN** as IEEE 754: inf x 0, inf - inf -> NaN; an overflowing result -> inf of its sign; every NaN
  result is the one canonical quiet NaN ``0x7FC00000`` (BF16: ``0x7FC0``), whatever the NaN operands held.
* **Zeros**: x + (-x) = +0, (-0) + (-0) = -0, the sign of a product is the XOR of its operands' signs.

FP32 additions come from NumPy's float32 ``+`` (IEEE RNE with gradual underflow) followed by the flush; that is
exact for FTZ because the sum of two normal FP32 numbers below 2^-126 is a multiple of 2^-149 and so exactly a
subnormal (no rounding happened that FTZ would do differently). Products are formed exactly in float64 (24 x 24 = 48
significant bits) and rounded once to float32 after the tininess test, so the sliver just below 2^-126 that IEEE
gradual underflow rounds up to 2^-126 is flushed as the hardware flushes it. BF16 conversion is torch's RNE.

The DPE order (:func:`dpe_tree`): 64 exact BF16 x BF16 products (16 significant bits: exact in FP32), then a fixed
binary tree, level ``l`` adding neighbours ``2i`` and ``2i + 1`` of level ``l - 1`` (RNE at each add), then the FP32
accumulator ``acc = t`` on the first vector of a dot product and ``acc = acc + t`` after (:func:`dpe_stream`).
"""
from __future__ import annotations

import numpy as np

F32_QNAN = np.uint32(0x7FC00000)
BF16_QNAN = np.uint16(0x7FC0)
SIGN32 = np.uint32(0x80000000)
EXP32 = np.uint32(0x7F800000)
MAN32 = np.uint32(0x007FFFFF)
# The smallest magnitude that rounds (24 bits, unbounded exponent, ties to even) to at least 2^-126.
_TINY = 2.0 ** -126 - 2.0 ** -151


def u32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.uint32)


def f32(bits) -> np.ndarray:
    """FP32 values of bit patterns."""
    return u32(bits).view(np.float32)


def f64(bits) -> np.ndarray:
    """float64 values of FP32 bit patterns (exact; a signalling NaN becomes a NaN without a warning)."""
    with np.errstate(invalid="ignore"):
        return f32(bits).astype(np.float64)


def bits32(x) -> np.ndarray:
    """Bit patterns of float32 values."""
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def is_nan32(bits) -> np.ndarray:
    b = u32(bits)
    return ((b & EXP32) == EXP32) & ((b & MAN32) != 0)


def daz32(bits) -> np.ndarray:
    """Subnormal operands read as a zero of their sign (exponent field 0)."""
    b = u32(bits)
    return np.where((b & EXP32) == 0, b & SIGN32, b).astype(np.uint32)


def finish32(x: np.ndarray) -> np.ndarray:
    """float32 results -> bits: subnormal results flushed to a zero of their sign, every NaN canonical."""
    b = bits32(x)
    b = np.where((b & EXP32) == 0, b & SIGN32, b)
    return np.where(is_nan32(b), F32_QNAN, b).astype(np.uint32)


def round_exact(y: np.ndarray) -> np.ndarray:
    """An exactly computed float64 result -> FP32 bits, rounded once (RNE), tininess after rounding -> signed zero."""
    y = np.asarray(y, dtype=np.float64)
    tiny = np.abs(y) < _TINY
    with np.errstate(over="ignore", invalid="ignore"):
        b = bits32(y.astype(np.float32))
    b = np.where(tiny & ~np.isnan(y), b & SIGN32, b)
    return np.where(is_nan32(b), F32_QNAN, b).astype(np.uint32)


# ------------------------------------------------------------------------------------------- BF16
def bf16_to_f32(b16) -> np.ndarray:
    """BF16 bit patterns as the FP32 bit patterns of the same value (exact: the low 16 bits are zero)."""
    return np.asarray(b16, dtype=np.uint16).astype(np.uint32) << np.uint32(16)


def f32_to_bf16(bits) -> np.ndarray:
    """FP32 bit patterns -> BF16 bit patterns, round to nearest even (torch), NaN -> ``0x7FC0``."""
    import torch

    x = f32(bits)
    t = torch.from_numpy(np.ascontiguousarray(x.reshape(-1)).copy()).to(torch.bfloat16)
    out = t.view(torch.int16).numpy().astype(np.uint16).reshape(x.shape)
    return np.where(is_nan32(bf16_to_f32(out)), BF16_QNAN, out).astype(np.uint16)


def to_bf16(x) -> np.ndarray:
    """float values -> BF16 bit patterns (RNE), e.g. SmolLM2 weights and activations."""
    return f32_to_bf16(bits32(np.asarray(x, dtype=np.float32)))


# ------------------------------------------------------------------------------------------ scalar ops
def mul_bf16(a16, b16) -> np.ndarray:
    """BF16 x BF16 -> FP32 bits: exact (8 x 8 significant bits), DAZ, FTZ, inf/NaN as IEEE."""
    a = f64(daz32(bf16_to_f32(a16)))
    b = f64(daz32(bf16_to_f32(b16)))
    with np.errstate(invalid="ignore", over="ignore"):
        return round_exact(a * b)


def mul_f32(a, b) -> np.ndarray:
    """FP32 x FP32 -> FP32 bits (exact product in float64, one RNE rounding), DAZ, FTZ."""
    x = f64(daz32(a))
    y = f64(daz32(b))
    with np.errstate(invalid="ignore", over="ignore"):
        return round_exact(x * y)


def add_f32(a, b) -> np.ndarray:
    """FP32 + FP32 -> FP32 bits (NumPy float32 RNE, then the flush; exact for FTZ, see the module docstring)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return finish32(f32(daz32(a)) + f32(daz32(b)))


def neg32(bits) -> np.ndarray:
    return (u32(bits) ^ SIGN32).astype(np.uint32)


# ------------------------------------------------------------------------------------------------ DPE
def dpe_tree(w16: np.ndarray, x16: np.ndarray) -> list[np.ndarray]:
    """The MAC tree on ``w16``, ``x16`` [..., n] (n a power of two): [products [..., n], level 1 [..., n/2], ...,
    root [..., 1]] as FP32 bits, in the RTL's fixed order (level l adds neighbours 2i, 2i+1 of level l-1)."""
    n = w16.shape[-1]
    if n < 2 or n & (n - 1) or x16.shape != w16.shape:
        raise ValueError(f"dpe_tree: w and x must have the same shape [..., n], n a power of two >= 2; got "
                         f"{w16.shape} and {x16.shape}")
    levels = [mul_bf16(w16, x16)]
    while levels[-1].shape[-1] > 1:
        v = levels[-1]
        levels.append(add_f32(v[..., 0::2], v[..., 1::2]))
    return levels


def dpe_stream(w16: np.ndarray, x16: np.ndarray, clear: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Accumulator value after each vector of a stream ``w16``, ``x16`` [V, n], ``clear`` [V] (1: the first
    vector of a dot product, acc = tree output; 0: acc = acc + tree output); returns (acc [V], tree levels)."""
    levels = dpe_tree(w16, x16)
    t = levels[-1][:, 0]
    acc = np.zeros(len(t), dtype=np.uint32)
    cur = np.uint32(0)
    clear = np.asarray(clear, dtype=bool)
    for i in range(len(t)):
        cur = t[i] if clear[i] else add_f32(cur, t[i])
        acc[i] = cur
    return acc, levels


# ------------------------------------------------------------------------------------------------ VPE
MAD, MAX, FLOOR, SCALE, RSQ0, RCP0, BF16, MOVC = range(8)
OP_NAMES = ("MAD", "MAX", "FLOOR", "SCALE", "RSQ0", "RCP0", "BF16", "MOVC")
RSQ_MAGIC = 0x5F3759DF  # inverse square root seed (Lomont 2003)
RCP_MAGIC = 0x7EF311C3  # reciprocal seed (the same trick for 1/x)
LANES = 64
CSEL_MAX = 6  # csel k in 1..6: c = a rotated by 2^(k-1) lanes


def csel_source(a: np.ndarray, c: np.ndarray, csel: int) -> np.ndarray:
    """The c operand of a VPE op: ``c`` (csel 0) or ``a`` rotated by 2^(csel-1) lanes (lane i gets a[i + s])."""
    if csel == 0:
        return c
    if not 1 <= csel <= CSEL_MAX:
        raise ValueError(f"csel={csel}: 0 (operand c) or 1..{CSEL_MAX} (a rotated by 1..32 lanes)")
    return np.roll(a, -(1 << (csel - 1)), axis=-1)


def _max32(a: np.ndarray, c: np.ndarray, smaller: bool) -> np.ndarray:
    """max (``smaller``: min) of DAZ'd operands; equal values (+0, -0) give +0 for max, -0 for min."""
    a, c = daz32(a), daz32(c)
    fa, fc = f32(a), f32(c)
    pos_a = (a & SIGN32) == 0
    if smaller:
        r = np.where(fa < fc, a, np.where(fc < fa, c, np.where(pos_a, c, a)))
    else:
        r = np.where(fa > fc, a, np.where(fc > fa, c, np.where(pos_a, a, c)))
    return np.where(is_nan32(a) | is_nan32(c), F32_QNAN, r).astype(np.uint32)


def _floor32(a: np.ndarray) -> np.ndarray:
    a = daz32(a)
    with np.errstate(invalid="ignore"):
        return np.where(is_nan32(a), F32_QNAN, bits32(np.floor(f32(a)))).astype(np.uint32)


def scale_exponent(c: np.ndarray) -> np.ndarray:
    """The SCALE op's n: c truncated toward zero and clamped to [-256, 256] (inf -> +-256; NaN handled apart)."""
    v = f64(daz32(c))
    with np.errstate(invalid="ignore"):
        return np.clip(np.trunc(np.nan_to_num(v, nan=0.0, posinf=256.0, neginf=-256.0)), -256, 256)


def _scale32(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    a = daz32(a)
    with np.errstate(invalid="ignore"):
        r = round_exact(f64(a) * np.exp2(scale_exponent(c)))  # exact: a 24-bit significand times a power of two
    return np.where(is_nan32(a) | is_nan32(c), F32_QNAN, r).astype(np.uint32)


def _bf16_op(a: np.ndarray) -> np.ndarray:
    return bf16_to_f32(f32_to_bf16(daz32(a)))


def vpe_op(op: int, a: np.ndarray, b: np.ndarray, c: np.ndarray, neg: int = 0, csel: int = 0) -> np.ndarray:
    """One VPE instruction on FP32 bit vectors ``a``, ``b``, ``c`` [..., 64] -> result bits [..., 64].

    MAD r = fl(+-fl(a b) + c') (``neg`` negates the product; MUL is c' = -0, ADD is b = 1.0); MAX r = max(a, c')
    (``neg``: min); FLOOR r = floor(a); SCALE r = a 2^n, n = trunc(c') clamped to [-256, 256]; RSQ0 / RCP0 the
    integer seeds ``0x5F3759DF - (a >> 1)`` / ``0x7EF311C3 - a`` (mod 2^32); BF16 r = a rounded to BF16 (RNE), as FP32;
    MOVC r = c'. ``c'`` is ``c`` or, with ``csel`` k > 0, ``a`` rotated by 2^(k-1) lanes.
    """
    a, b, c = u32(a), u32(b), u32(c)
    cc = csel_source(a, c, csel)
    if op == MAD:
        p = mul_f32(a, b)
        return add_f32(neg32(p) if neg else p, cc)
    if op == MAX:
        return _max32(a, cc, bool(neg))
    if op == FLOOR:
        return _floor32(a)
    if op == SCALE:
        return _scale32(a, cc)
    if op == RSQ0:
        return ((np.uint64(RSQ_MAGIC) - (a >> np.uint32(1)).astype(np.uint64)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    if op == RCP0:
        return ((np.uint64(RCP_MAGIC) + np.uint64(1 << 32) - a.astype(np.uint64)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    if op == BF16:
        return _bf16_op(a)
    if op == MOVC:
        return cc.astype(np.uint32)
    raise ValueError(f"VPE op {op!r}: choose one of {', '.join(f'{i}={n}' for i, n in enumerate(OP_NAMES))}")
