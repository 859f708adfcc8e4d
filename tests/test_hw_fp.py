"""The LXE's floating-point reference (hw/fpref.py) on hand-worked cases, and the MyHDL arithmetic blocks, DPE tree
and VPE against it at small sizes (the 64-wide RTL in Verilator: tests/test_hw_lxe.py, notebook 05)."""
from __future__ import annotations

import numpy as np
import pytest
from myhdl import Signal, StopSimulation, block, delay, instance, intbv

from vrex_lib.hw import dpe
from vrex_lib.hw import fpref as F
from vrex_lib.hw import lxe_vectors as L
from vrex_lib.hw import vpe_programs as VP
from vrex_lib.hw.bf16 import bf16_mul, fp32_add, fp32_mul
from vrex_lib.hw.dpe import DPEParams, check_dpe
from vrex_lib.hw.vpe import VPEParams, check_vpe

b32 = lambda x: int(F.bits32(np.float32(x)))  # noqa: E731
MIN_NORMAL, TINY_MUL = 2.0 ** -126, 2.0 ** -126 - 2.0 ** -151


def test_reference_by_hand():
    one, two, three = (int(F.to_bf16(v)) for v in (1.0, 2.0, 3.0))
    assert F.mul_bf16(np.uint16(three), np.uint16(two)) == b32(6.0)
    inf, nan, sub = np.uint16(0x7F80), np.uint16(0x7FC1), np.uint16(0x0001)
    assert F.mul_bf16(inf, np.uint16(0)) == F.F32_QNAN  # inf x 0
    assert F.mul_bf16(np.uint16(0xFFC5), np.uint16(one)) == F.F32_QNAN  # any NaN -> the canonical one
    assert F.mul_bf16(sub, np.uint16(one)) == 0  # DAZ
    assert F.mul_bf16(np.uint16(0x8001), np.uint16(one)) == 0x80000000  # DAZ keeps the sign
    assert F.mul_bf16(np.uint16(0x7F00), np.uint16(0x7F00)) == 0x7F800000  # 2^127 x 2^127 overflows
    assert F.mul_bf16(np.uint16(0x0100), np.uint16(0x8100)) == 0x80000000  # 2^-125 x -2^-125: flushed, signed
    assert F.add_f32(b32(1.5), b32(-1.5)) == 0 and F.add_f32(b32(-0.0), b32(-0.0)) == 0x80000000
    assert F.add_f32(b32(np.inf), b32(-np.inf)) == F.F32_QNAN and F.add_f32(inf.astype(np.uint32) << 16, 0) \
        == 0x7F800000
    # ties to even: 1 + 2^-24 is a tie between 1 and 1 + 2^-23 -> 1 (even); 1 + 3 2^-24 -> 1 + 2^-22
    assert F.add_f32(b32(1.0), b32(2.0 ** -24)) == b32(1.0)
    assert F.add_f32(b32(1.0 + 2.0 ** -23), b32(2.0 ** -24)) == b32(1.0 + 2.0 ** -22)
    # a sum just below 2^-126 is flushed; 2^-126 itself kept
    assert F.add_f32(b32(1.5 * MIN_NORMAL), b32(-1.25 * MIN_NORMAL)) == 0
    assert F.add_f32(b32(-1.5 * MIN_NORMAL), b32(1.25 * MIN_NORMAL)) == 0x80000000
    assert F.add_f32(b32(2.5 * MIN_NORMAL), b32(-1.5 * MIN_NORMAL)) == b32(MIN_NORMAL)
    assert F.add_f32(b32(1.0), b32(-0.75 * MIN_NORMAL)) == b32(1.0)  # a subnormal operand reads as zero


def test_tininess_is_after_rounding():
    # (1 - 2^-23)(1 + 2^-23) 2^-126 = (1 - 2^-46) 2^-126 rounds (24 bits) up to 2^-126: kept
    x, y = np.float32((1 - 2.0 ** -23) * 2.0 ** -63), np.float32((1 + 2.0 ** -23) * 2.0 ** -63)
    assert TINY_MUL <= float(x) * float(y) < MIN_NORMAL and F.mul_f32(F.bits32(x), F.bits32(y)) == b32(MIN_NORMAL)
    # (1 - 2^-24) 2^-126 is exact at 24 bits, below 2^-126: flushed -- although IEEE's subnormal rounding (a tie,
    # to even) gives 2^-126, which a flush after NumPy's rounding would keep
    a, b = np.float32((1 - 2.0 ** -24) * 2.0 ** -63), np.float32(2.0 ** -63)
    q = float(a) * float(b)
    assert q == MIN_NORMAL - 2.0 ** -150 and F.mul_f32(F.bits32(a), F.bits32(b)) == 0
    assert F.finish32(np.float32(q)) == b32(MIN_NORMAL)


def test_vpe_ops_by_hand():
    lanes = lambda *v: np.array([b32(x) for x in v] + [0] * (64 - len(v)), dtype=np.uint32)  # noqa: E731
    z = np.zeros(64, np.uint32)
    r = F.vpe_op(F.MAX, lanes(0.0, -1.0, 2.0), z, lanes(-0.0, 3.0, np.nan))
    assert list(r[:3]) == [b32(0.0), b32(3.0), F.F32_QNAN]
    assert F.vpe_op(F.MAX, lanes(0.0), z, lanes(-0.0), neg=1)[0] == 0x80000000  # min(+0, -0) = -0
    assert list(F.vpe_op(F.FLOOR, lanes(-2.5, 2.5, -0.25, 0.25, -0.0), z, z)[:5]) == \
        [b32(-3.0), b32(2.0), b32(-1.0), b32(0.0), 0x80000000]
    s = F.vpe_op(F.SCALE, lanes(1.5, 1.5, 1.5, 1.0, 1.0), z, lanes(3.0, -3.9, 300.0, -126.0, -127.0))
    assert list(s[:5]) == [b32(12.0), b32(0.1875), 0x7F800000, b32(MIN_NORMAL), 0]  # trunc(-3.9) = -3; 2^-127 flushed
    assert F.vpe_op(F.BF16, lanes(1.0 + 2.0 ** -8), z, z)[0] == b32(1.0)  # a tie rounds to even
    assert F.vpe_op(F.BF16, lanes(1.0 + 3 * 2.0 ** -8), z, z)[0] == b32(1.0 + 2.0 ** -6)
    a = np.arange(64, dtype=np.uint32)
    assert list(F.vpe_op(F.MOVC, a, z, z, csel=6)[:3]) == [32, 33, 34]  # rotation by 32 lanes
    assert F.vpe_op(F.MAD, lanes(2.0), lanes(3.0), lanes(1.0), neg=1)[0] == b32(-5.0)
    assert F.vpe_op(F.RCP0, np.full(64, 0x3F800000, np.uint32), z, z)[0] == 0x7EF311C3 - 0x3F800000


def _sim(blk, width: int, a, b) -> np.ndarray:
    sa, sb, p = Signal(intbv(0)[width:]), Signal(intbv(0)[width:]), Signal(intbv(0)[32:])
    out = []

    @block
    def tb():
        dut = blk(sa, sb, p)

        @instance
        def drive():
            for x, y in zip(a, b):
                sa.next, sb.next = int(x), int(y)
                yield delay(1)
                out.append(int(p))
            raise StopSimulation()

        return dut, drive

    tb().run_sim(quiet=1)
    return np.array(out, dtype=np.uint32)


def _operands(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    a = np.concatenate([L._random_f32(rng, 64) for _ in range(n // 64)])
    b = np.concatenate([L._random_f32(rng, 64) for _ in range(n // 64)])
    b[: n // 8] = (a[: n // 8] ^ np.uint32(0x80000000)) ^ rng.integers(0, 4, n // 8).astype(np.uint32)  # cancellation
    hand = [b32(v) for v in (1.0, 2.0 ** -24, 1.0 + 2.0 ** -23, np.inf, -np.inf, 0.0, -0.0, MIN_NORMAL)]
    return np.concatenate([hand, a]).astype(np.uint32), np.concatenate([hand[::-1], b]).astype(np.uint32)


@pytest.mark.parametrize("blk, width, ref", [(fp32_add, 32, F.add_f32), (fp32_mul, 32, F.mul_f32),
                                             (bf16_mul, 16, F.mul_bf16)], ids=["fp32_add", "fp32_mul", "bf16_mul"])
def test_arithmetic_blocks_match_the_reference(blk, width, ref):
    a, b = _operands(640, np.random.default_rng(3))
    if width == 16:
        a, b = (a >> 16).astype(np.uint16), (b >> 16).astype(np.uint16)
    assert np.array_equal(_sim(blk, width, a, b), ref(a, b))


def test_dpe_tree_and_vpe_match_the_reference_small():
    rng = np.random.default_rng(4)
    p = DPEParams(8, 2)
    v = L.random_dpe(20, rng, 8) + L.real_dpe(L.load_operands(), 72, 8)[0][:12]
    r = check_dpe(v, p)
    assert r["vectors"] == 32 and r["mismatches"] == 0 and r["cycles"] == 32 + p.latency
    vv = L.random_vpe(12, rng, 4) + L.real_vpe(L.load_operands(), 2, 4)[0]
    r = check_vpe(vv, VPEParams(4))
    assert r["vectors"] == len(vv) and r["mismatches"] == 0


def test_the_dpe_check_can_fail():
    # the MyHDL tree's accumulators against the reference of the same operands with one dot product split in two
    p = DPEParams(4, 1)
    v = L.random_dpe(12, np.random.default_rng(5), 4)
    got, _ = dpe.simulate_dpe(v, p)
    bad = [(w, x, (not c) if i == 5 else c) for i, (w, x, c) in enumerate(v)]
    assert np.array_equal(got, dpe.reference(v)) and not np.array_equal(got, dpe.reference(bad))


def test_vpe_programs_compute_their_functions():
    ops = L.load_operands()
    f = lambda b16: F.f64(F.bf16_to_f32(b16))  # noqa: E731
    tr = VP.Trace()
    x = ops["l3_scores"][-1]
    sm = F.f64(VP.softmax(tr, F.bf16_to_f32(x)))
    ex = np.exp(f(x) - f(x).max())
    assert np.allclose(sm, ex / ex.sum(), rtol=8e-3, atol=1e-6) and abs(sm.sum() - 1) < 0.02
    r, g = ops["l3_resid"][0], ops["l3_gamma"]
    want = f(r) / np.sqrt(np.mean(f(r) ** 2) + 1e-5) * f(g)
    assert np.allclose(F.f64(VP.rmsnorm(tr, F.bf16_to_f32(r), F.bf16_to_f32(g))), want, rtol=8e-3, atol=1e-3)
    gate = ops["l3_gate"][0]
    assert np.allclose(F.f64(VP.silu(tr, F.bf16_to_f32(gate))), f(gate) / (1 + np.exp(-f(gate))), rtol=8e-3,
                       atol=1e-3)
    q, c, s = ops["l3_q_pre"][0, :64], ops["cos"][0], ops["sin"][0]
    rh = np.concatenate([-f(q)[32:], f(q)[:32]])
    assert np.allclose(F.f64(VP.rope(tr, *(F.bf16_to_f32(v) for v in (q, c, s)))), f(q) * f(c) + rh * f(s),
                       rtol=8e-3, atol=1e-3)
    assert {o[0] for o in tr.ops} == set(range(8))  # every instruction is used by the four programs
