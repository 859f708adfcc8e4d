"""BF16 / FP32 arithmetic building blocks of the LXE in MyHDL (combinational; the DPE and VPE register around them).

* :func:`bf16_mul` -- BF16 x BF16 -> FP32, exact (8 x 8 significand bits = 16 <= 24);
* :func:`fp32_add` -- FP32 + FP32, round to nearest even, with three extra bits (guard, round, sticky);
* :func:`fp32_mul` -- FP32 x FP32 (24 x 24 significand multiplier), round to nearest even.

Every block follows the rules of :mod:`vrex_lib.hw.fpref` (``docs/DECISIONS.md D280``): subnormal operands read as
signed zeros, a result below 2^-126 after rounding is a signed zero, overflow is inf, every NaN result is
``0x7FC00000``, x + (-x) = +0. Exponents are carried with a bias of :data:`EB` so that every intermediate is an
unsigned integer (no signed arithmetic for the converter to size).
"""
from __future__ import annotations

from myhdl import Signal, SignalType, always_comb, block, intbv

Sig = SignalType
QNAN = 0x7FC00000
EB = 64  # extra exponent bias of the intermediates (covers the adder's -26 normalisation)


@block
def bf16_mul(a: Sig, b: Sig, p: Sig):
    """``p`` = ``a`` x ``b``: BF16 operands (16 bits), the exact FP32 product (32 bits)."""

    @always_comb
    def mul():
        sig = intbv(0)[16:]
        man = intbv(0)[23:]
        e = intbv(0)[10:]  # ea + eb (+1), bias 254 = 2 x 127
        s = bool(a[15] ^ b[15])
        ea = a[15:7]
        eb = b[15:7]
        ma = a[7:0]
        mb = b[7:0]
        za = ea == 0
        zb = eb == 0
        ia = ea == 255 and ma == 0
        ib = eb == 255 and mb == 0
        na = ea == 255 and ma != 0
        nb = eb == 255 and mb != 0
        sig[:] = (0x80 | ma) * (0x80 | mb)
        if sig[15]:
            man[:] = sig[15:0] << 8
            e[:] = ea + eb + 1
        else:
            man[:] = sig[14:0] << 9
            e[:] = ea + eb
        if na or nb or (ia and zb) or (ib and za):
            p.next = QNAN
        elif ia or ib:
            p.next = (int(s) << 31) | 0x7F800000
        elif za or zb:
            p.next = int(s) << 31
        elif e >= 127 + 255:  # biased result exponent >= 255: overflow
            p.next = (int(s) << 31) | 0x7F800000
        elif e <= 127:  # result exponent <= 0: flushed (an exact product, so tiny before = after rounding)
            p.next = int(s) << 31
        else:
            p.next = (int(s) << 31) | ((e - 127) << 23) | man

    return mul


@block
def fp32_add(a: Sig, b: Sig, s: Sig):
    """``s`` = ``a`` + ``b`` (FP32): :func:`fp32_add_align` (swap, align with a sticky bit, add or subtract; the
    special cases) then :func:`fp32_add_round` (normalise, round to nearest even, flush / overflow). Every step is
    log-depth (no priority chains)."""
    big = Signal(intbv(0)[32:])
    sp = Signal(intbv(0)[32:])
    r = Signal(intbv(0)[28:])
    is_sp = Signal(bool(0))
    align = fp32_add_align(a, b, big, r, sp, is_sp)
    rnd = fp32_add_round(big, r, sp, is_sp, s)
    return align, rnd


@block
def fp32_add_align(a: Sig, b: Sig, big: Sig, r: Sig, sp: Sig, is_sp: Sig):
    """The larger operand ``big`` (|big| >= |small|), the 28-bit sum or difference ``r`` of the significands with
    three extra bits (the smaller aligned by a 54-bit right shift whose low half is the sticky bit), and the result
    ``sp`` of the special cases (NaN, inf, zero operands) when ``is_sp``."""

    @always_comb
    def align():
        bg = intbv(0)[32:]
        sm = intbv(0)[32:]
        d = intbv(0)[8:]
        lsig = intbv(0)[27:]
        wide = intbv(0)[54:]
        ssh = intbv(0)[27:]
        ea = a[31:23]
        eb = b[31:23]
        za = ea == 0
        zb = eb == 0
        ia = ea == 255 and a[23:0] == 0
        ib = eb == 255 and b[23:0] == 0
        na = ea == 255 and a[23:0] != 0
        nb = eb == 255 and b[23:0] != 0
        if b[31:0] > a[31:0]:
            bg[:] = b
            sm[:] = a
        else:
            bg[:] = a
            sm[:] = b
        d[:] = bg[31:23] - sm[31:23]
        lsig[:] = (0x800000 | bg[23:0]) << 3
        wide[:] = (0x800000 | sm[23:0]) << 30
        if d >= 27:
            ssh[:] = 1  # S lies wholly below the guard bits: only its sticky bit remains
        else:
            wide[:] = wide >> d
            ssh[:] = wide[54:27]
            if wide[27:0] != 0:
                ssh[0] = 1
        if a[31] != b[31]:
            r.next = lsig - ssh
        else:
            r.next = lsig + ssh
        big.next = bg
        is_sp.next = True
        if na or nb or (ia and ib and a[31] != b[31]):
            sp.next = QNAN
        elif ia:
            sp.next = a
        elif ib:
            sp.next = b
        elif za and zb:
            sp.next = int(a[31] and b[31]) << 31
        elif za:
            sp.next = b
        elif zb:
            sp.next = a
        else:
            sp.next = 0
            is_sp.next = False

    return align


@block
def fp32_add_round(big: Sig, r: Sig, sp: Sig, is_sp: Sig, s: Sig):
    """Normalise ``r`` (one right shift after a carry, or a binary-search leading-zero shift: 16, 8, 4, 2, 1), round
    to nearest even, then the result: ``sp`` for the special cases, +0 for an exact cancellation, inf on overflow,
    a zero of ``big``'s sign below 2^-126."""

    @always_comb
    def norm_round():
        y = intbv(0)[32:]
        n = intbv(0)[27:]
        lz = intbv(0)[5:]
        e = intbv(0)[10:]  # biased by 127 + EB
        m25 = intbv(0)[25:]
        if r[27]:
            n[:] = r[28:1]
            if r[0]:
                n[0] = 1
            e[:] = big[31:23] + EB + 1
        else:
            y[:] = r[27:0] << 5
            lz[:] = 0
            if y[32:16] == 0:
                y[:] = y[16:0] << 16
                lz[:] = lz + 16
            if y[32:24] == 0:
                y[:] = y[24:0] << 8
                lz[:] = lz + 8
            if y[32:28] == 0:
                y[:] = y[28:0] << 4
                lz[:] = lz + 4
            if y[32:30] == 0:
                y[:] = y[30:0] << 2
                lz[:] = lz + 2
            if not y[31]:
                y[:] = y[31:0] << 1
                lz[:] = lz + 1
            n[:] = y[32:5]
            e[:] = big[31:23] + EB - lz
        m25[:] = n[27:3]
        if n[2] and (n[1] or n[0] or n[3]):
            m25[:] = m25 + 1
        if m25[24]:
            e[:] = e + 1
        if is_sp:
            s.next = sp
        elif r == 0:
            s.next = 0
        elif e >= 255 + EB:
            s.next = (int(big[31]) << 31) | 0x7F800000
        elif e <= EB:
            s.next = int(big[31]) << 31
        else:
            s.next = (int(big[31]) << 31) | ((e - EB) << 23) | m25[23:0]

    return norm_round


@block
def fp32_mul(a: Sig, b: Sig, p: Sig):
    """``p`` = ``a`` x ``b`` (FP32): a 24 x 24 significand multiplier, one-bit normalisation, round to nearest
    even on the 48-bit product, then the exponent checks (tininess after rounding)."""

    @always_comb
    def mul():
        sig = intbv(0)[48:]
        m25 = intbv(0)[25:]
        e = intbv(0)[10:]  # ea + eb (+1), bias 254
        s = bool(a[31] ^ b[31])
        g = False
        st = False
        ea = a[31:23]
        eb = b[31:23]
        ma = a[23:0]
        mb = b[23:0]
        za = ea == 0
        zb = eb == 0
        ia = ea == 255 and ma == 0
        ib = eb == 255 and mb == 0
        na = ea == 255 and ma != 0
        nb = eb == 255 and mb != 0
        sig[:] = (0x800000 | ma) * (0x800000 | mb)
        if sig[47]:
            m25[:] = sig[48:24]
            g = bool(sig[23])
            st = sig[23:0] != 0
            e[:] = ea + eb + 1
        else:
            m25[:] = sig[47:23]
            g = bool(sig[22])
            st = sig[22:0] != 0
            e[:] = ea + eb
        if g and (st or m25[0]):
            m25[:] = m25 + 1
        if m25[24]:
            e[:] = e + 1
        if na or nb or (ia and zb) or (ib and za):
            p.next = QNAN
        elif ia or ib:
            p.next = (int(s) << 31) | 0x7F800000
        elif za or zb:
            p.next = int(s) << 31
        elif e >= 127 + 255:
            p.next = (int(s) << 31) | 0x7F800000
        elif e <= 127:
            p.next = int(s) << 31
        else:
            p.next = (int(s) << 31) | ((e - 127) << 23) | m25[23:0]

    return mul
