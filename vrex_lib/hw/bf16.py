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

from myhdl import SignalType, always_comb, block, intbv

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
    """``s`` = ``a`` + ``b`` (FP32): swap to |L| >= |S|, align S with a sticky bit, add or subtract, normalise
    (one right shift or a leading-zero count), round to nearest even, flush / overflow."""

    @always_comb
    def add():
        mag_a = intbv(0)[31:]
        mag_b = intbv(0)[31:]
        big = intbv(0)[32:]
        sml = intbv(0)[32:]
        d = intbv(0)[8:]
        lsig = intbv(0)[27:]
        ssig = intbv(0)[27:]
        ssh = intbv(0)[27:]
        r = intbv(0)[28:]
        n = intbv(0)[27:]
        lz = intbv(0)[5:]
        e = intbv(0)[10:]  # biased by 127 + EB
        m25 = intbv(0)[25:]
        sticky = False
        ea = a[31:23]
        eb = b[31:23]
        za = ea == 0
        zb = eb == 0
        ia = ea == 255 and a[23:0] == 0
        ib = eb == 255 and b[23:0] == 0
        na = ea == 255 and a[23:0] != 0
        nb = eb == 255 and b[23:0] != 0
        mag_a[:] = a[31:0]
        mag_b[:] = b[31:0]
        if mag_b > mag_a:
            big[:] = b
            sml[:] = a
        else:
            big[:] = a
            sml[:] = b
        d[:] = big[31:23] - sml[31:23]
        lsig[:] = (0x800000 | big[23:0]) << 3
        ssig[:] = (0x800000 | sml[23:0]) << 3
        if d >= 27:
            ssh[:] = 0
            sticky = True
        else:
            ssh[:] = ssig >> d
            for i in range(27):
                if i < d and ssig[i]:
                    sticky = True
        if sticky:
            ssh[0] = 1
        if a[31] != b[31]:
            r[:] = lsig - ssh
        else:
            r[:] = lsig + ssh
        lz[:] = 0
        if r[27]:
            n[:] = r[28:1]
            if r[0]:
                n[0] = 1
            e[:] = big[31:23] + EB + 1
        else:
            for i in range(27):
                if r[i]:
                    lz[:] = 26 - i
            n[:] = r[27:0] << lz
            e[:] = big[31:23] + EB - lz
        m25[:] = n[27:3]
        if n[2] and (n[1] or n[0] or n[3]):
            m25[:] = m25 + 1
        if m25[24]:
            e[:] = e + 1
        if na or nb or (ia and ib and a[31] != b[31]):
            s.next = QNAN
        elif ia:
            s.next = a
        elif ib:
            s.next = b
        elif za and zb:
            s.next = int(a[31] and b[31]) << 31
        elif za:
            s.next = b
        elif zb:
            s.next = a
        elif r == 0:
            s.next = 0
        elif e >= 255 + EB:
            s.next = (int(big[31]) << 31) | 0x7F800000
        elif e <= EB:
            s.next = int(big[31]) << 31
        else:
            s.next = (int(big[31]) << 31) | ((e - EB) << 23) | m25[23:0]

    return add


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
