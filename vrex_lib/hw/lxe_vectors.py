"""Input vectors of the LXE blocks: real operands recorded from SmolLM2 (``data/traces/lxe_operands.npz``, made by
``data/make_lxe_operands.py``) and seeded random vectors that cover the IEEE corner cases.

A DPE vector is one cycle of one MAC tree: ``(w [n] BF16 bits, x [n] BF16 bits, clear)``; a VPE vector one
instruction: ``(op, neg, csel, a [64], b [64], c [64] FP32 bits)``.

Real DPE streams are matrix-vector products in the order a tree sees them (``docs/DECISIONS.md D286``): for each
token, for each weight row, the row's 64-element chunks with the token's matching activation chunks (``clear`` on
the first chunk). Real VPE streams are the instructions of :mod:`vrex_lib.hw.vpe_programs` on real inputs:
softmax over attention-score rows, RMSNorm of the residual stream with its gamma, SiLU of gate_proj's outputs,
RoPE of q_proj's outputs at their positions.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import REPO_ROOT
from . import fpref as F
from . import vpe_programs as VP

OPERAND_FILE = REPO_ROOT / "data" / "traces" / "lxe_operands.npz"
DPE_SOURCES = (("q_proj", "q_in"), ("gate_proj", "mlp_in"), ("down_proj", "down_in"))  # weight, its input
VPE_SOURCES = ("softmax", "rmsnorm", "silu", "rope")


def load_operands(path: Path = OPERAND_FILE) -> dict | None:
    """The recorded operands (bit patterns), None when the file is absent."""
    if not Path(path).exists():
        return None
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _layers(ops: dict) -> list[int]:
    return [int(x) for x in ops["meta_layers"]]


def _need(ops: dict, key: str) -> np.ndarray:
    if key not in ops:
        raise KeyError(f"{OPERAND_FILE} has no {key!r}: regenerate it with `.venv/bin/python data/make_lxe_operands.py`")
    return ops[key]


# ----------------------------------------------------------------------------------------------- DPE
def gemv_vectors(w_rows: np.ndarray, x_tok: np.ndarray, n: int) -> list:
    """The tree's stream of ``W x`` for each token: per token, per row, the row's n-element chunks (zero-padded)."""
    L = w_rows.shape[1]
    k = -(-L // n)
    pad = lambda a: np.pad(a, [(0, 0), (0, k * n - L)])  # noqa: E731
    w, x = pad(np.asarray(w_rows, np.uint16)), pad(np.asarray(x_tok, np.uint16))
    return [(w[r, j * n:(j + 1) * n], x[t, j * n:(j + 1) * n], j == 0)
            for t in range(len(x)) for r in range(len(w)) for j in range(k)]


def real_dpe(ops: dict | None, cap: int | None, n: int = 64) -> tuple[list, list]:
    """Real DPE vectors of every (layer, projection) source (the first ``cap`` of each, whole dot products only)
    and their tags ``l<layer>.<projection>``."""
    if ops is None:
        return [], []
    vecs, tags = [], []
    for layer in _layers(ops):
        for wname, xname in DPE_SOURCES:
            v = gemv_vectors(_need(ops, f"l{layer}_{wname}"), _need(ops, f"l{layer}_{xname}"), n)
            if cap is not None and len(v) > cap:
                k = -(-_need(ops, f"l{layer}_{wname}").shape[1] // n)
                v = v[:max(k, cap // k * k)]
            vecs += v
            tags += [f"l{layer}.{wname}"] * len(v)
    return vecs, tags


def _special16(rng: np.random.Generator, size: int) -> np.ndarray:
    """BF16 corner cases: +-0, +-inf, NaNs, subnormals, the largest and smallest normals."""
    pool = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x0001, 0x807F, 0x7F7F, 0xFF7F, 0x0080,
                     0x8080], dtype=np.uint16)
    return pool[rng.integers(0, len(pool), size)]


def _random_bf16(kind: int, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    if kind == 1:  # any exponent: overflow to inf and flush to zero both occur
        e = rng.integers(1, 255, (2, n)).astype(np.uint16)
        bits = (rng.integers(0, 2, (2, n)).astype(np.uint16) << 15) | (e << 7) | rng.integers(0, 128, (2, n)).astype(np.uint16)
        return bits[0], bits[1]
    if kind == 4:  # exponents near the ends of the range
        hi = rng.random((2, n)) < 0.5
        e = np.where(hi, rng.integers(190, 255, (2, n)), rng.integers(1, 70, (2, n))).astype(np.uint16)
        bits = (rng.integers(0, 2, (2, n)).astype(np.uint16) << 15) | (e << 7) | rng.integers(0, 128, (2, n)).astype(np.uint16)
        return bits[0], bits[1]
    if kind == 5:  # few distinct values: ties to even in the adders
        return (F.to_bf16(rng.choice([0.5, 1.0, 1.5, 3.0, -1.0, 2.0 ** -8, 1 + 2.0 ** -7], n)),
                F.to_bf16(rng.choice([1.0, -1.0, 2.0 ** 7, 1 + 2.0 ** -7], n)))
    w = F.to_bf16(rng.standard_normal(n) * 10.0 ** rng.uniform(-4, 4))
    x = F.to_bf16(rng.standard_normal(n) * 10.0 ** rng.uniform(-4, 4))
    if kind == 2:  # a few special lanes
        m = rng.random((2, n)) < 0.06
        w, x = np.where(m[0], _special16(rng, n), w), np.where(m[1], _special16(rng, n), x)
    if kind == 3:  # exact cancellation: odd lanes are minus the even ones
        w[1::2], x[1::2] = w[0::2] ^ np.uint16(0x8000), x[0::2]
    return w.astype(np.uint16), x.astype(np.uint16)


def random_dpe(n_vectors: int, rng: np.random.Generator, n: int = 64) -> list:
    """Dot products of 1..12 vectors each, every one of six operand kinds: normal values over 8 decades, any
    exponent, special lanes, exact cancellation, exponents near the range ends, few distinct values (ties)."""
    out: list = []
    while len(out) < n_vectors:
        g = int(rng.integers(1, 13))
        for j in range(min(g, n_vectors - len(out))):
            w, x = _random_bf16(int(rng.integers(0, 6)), rng, n)
            out.append((w, x, j == 0))
    return out


# ----------------------------------------------------------------------------------------------- VPE
def vpe_program_trace(ops: dict, program: str, layer: int, cap: int | None = None) -> list:
    """The instructions of ``program`` (one of :data:`VPE_SOURCES`) on layer ``layer``'s recorded inputs, whole
    rows until ``cap`` instructions are reached."""
    tr = VP.Trace()
    w = lambda key: F.bf16_to_f32(_need(ops, f"l{layer}_{key}"))  # noqa: E731
    if program == "softmax":
        rows = [lambda tr, r=r: VP.softmax(tr, r) for r in w("scores")]
    elif program == "rmsnorm":
        g = w("gamma")
        rows = [lambda tr, r=r: VP.rmsnorm(tr, r, g) for r in w("resid")]
    elif program == "silu":
        rows = [lambda tr, r=r: VP.silu(tr, r) for r in w("gate")]
    elif program == "rope":
        q, cos, sin = w("q_pre"), F.bf16_to_f32(_need(ops, "cos")), F.bf16_to_f32(_need(ops, "sin"))
        rows = [lambda tr, t=t, h=h: VP.rope(tr, q[t, 64 * h:64 * (h + 1)], cos[t], sin[t])
                for t in range(len(q)) for h in range(q.shape[1] // 64)]
    else:
        raise ValueError(f"VPE program {program!r}: choose one of {', '.join(VPE_SOURCES)}")
    for fn in rows:
        if cap is not None and len(tr.ops) >= cap:
            break
        fn(tr)
    return tr.ops


def real_vpe(ops: dict | None, cap: int | None, lanes: int = VP.LANES) -> tuple[list, list]:
    """Real VPE instructions of every (layer, program) source (the first ``cap`` of each: a prefix of a program's
    instruction stream is what the unit executes first) and their tags. A unit narrower than the programs' 64
    lanes gets each instruction's first ``lanes`` lanes (its results are then those of the narrower rotation)."""
    if ops is None:
        return [], []
    vecs, tags = [], []
    for layer in _layers(ops):
        for prog in VPE_SOURCES:
            v = [(o, n, c, a[:lanes], b[:lanes], cc[:lanes])
                 for o, n, c, a, b, cc in vpe_program_trace(ops, prog, layer, cap)[:cap]]
            vecs += v
            tags += [f"l{layer}.{prog}"] * len(v)
    return vecs, tags


def _random_f32(rng: np.random.Generator, n: int) -> np.ndarray:
    kind = int(rng.integers(0, 6))
    if kind == 0:  # any bit pattern
        return rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    if kind == 1:  # integers and halves (FLOOR, SCALE's exponent)
        return F.bits32((np.round(rng.standard_normal(n) * 40) / rng.choice([1, 2, 4], n)).astype(np.float32))
    if kind == 2:  # near the ends of the exponent range
        e = np.where(rng.random(n) < 0.5, rng.integers(200, 255, n), rng.integers(1, 50, n)).astype(np.uint32)
        return (rng.integers(0, 2, n).astype(np.uint32) << 31) | (e << 23) | rng.integers(0, 1 << 23, n).astype(np.uint32)
    x = F.bits32((rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32))
    if kind == 3:  # special lanes: +-0, +-inf, NaN, subnormals
        pool = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFA00001, 0x00000001, 0x807FFFFF,
                         0x00800000], dtype=np.uint32)
        m = rng.random(n) < 0.15
        x = np.where(m, pool[rng.integers(0, len(pool), n)], x)
    return x.astype(np.uint32)


def random_vpe(n_vectors: int, rng: np.random.Generator, lanes: int = 64) -> list:
    """Random instructions: every op (MAD most often), neg, csel (half of them 0), operands of six kinds."""
    ops = rng.choice(8, n_vectors, p=[0.3, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1])
    return [(int(o), int(rng.integers(0, 2)), int(rng.integers(1, 7)) if rng.random() < 0.5 else 0,
             _random_f32(rng, lanes), _random_f32(rng, lanes), _random_f32(rng, lanes)) for o in ops]
