"""Beyond the paper: the DRE's changes for the bounded ReSV (``resv_best``, :mod:`vrex_lib.resv.bounded`,
docs/DECISIONS.md D495) as three small MyHDL blocks, each bit-exact against the integer reference there.

* :func:`capped_nearest` -- the HCU's lane compare with the cluster cap (step 1): ``lanes`` cluster codes and
  their token counts per cycle; a lane whose count has reached ``cap`` (or is not valid) is out of the search;
  the nearest remaining lane by Hamming distance (ties -> lowest lane) and the strict ``< th`` join decision.
  Reference: :func:`vrex_lib.resv.bounded.capped_nearest_ref`. (The HC table's count per cluster is the WTU's
  token-count memory of Fig. 10; the HCU reads the same row it already reads for the codes.)
* :func:`best_member` -- the low-bit key store's scorer (step 2): one token a cycle, ``dim`` lanes of a signed
  INT8 query row and a signed 2-4-bit key, the dot product times the token's scale mantissa shifted by its
  exponent, and the running best within a cluster (``first`` opens a cluster). Reference:
  :func:`vrex_lib.resv.bounded.best_member_ref`.
* :func:`budget_stop` -- the WTU's budgeted stop (step 3): clusters arrive in the WTU's walk order (descending
  weight, ties -> lower index, the walk it already does for WiCSum) with their candidate counts; a cluster is
  selected while the tokens selected before it are below ``budget``; ``stop`` rises once the budget is reached
  (the walk ends there). Reference: :func:`vrex_lib.resv.bounded.budget_stop_ref`.

Each has a MyHDL simulation (``simulate_*``, a few hundred vectors) and an Icarus/Verilator check through the
shared stimulus harness (:mod:`vrex_lib.hw.harness`; :func:`run_icarus`, 3,000 vectors per block by default,
10,000 with ``VREX_HW_VECTORS=10000``), and a yosys cell count (:func:`synth_cells`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from myhdl import ResetSignal, Signal, StopSimulation, always_seq, block, instance, intbv

from ..resv.bounded import (best_member_ref, budget_stop_ref, capped_nearest_ref, quantize_keys,
                            quantize_query)
from ._sim import clock_driver, reset_pulse
from .harness import LOG, Protocol, Stimulus, convert, decode_log, simulate

#: Bulk vectors per block in the default run; ``VREX_HW_VECTORS`` raises it (10,000 opt-in).
DEFAULT_VECTORS = 3000


def bulk_vectors() -> int:
    """Vectors per block for the Verilog check: ``VREX_HW_VECTORS`` if set (>= 1), else 3,000."""
    raw = os.environ.get("VREX_HW_VECTORS", "")
    if not raw:
        return DEFAULT_VECTORS
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"VREX_HW_VECTORS={raw!r}: give a whole number of vectors >= 1, e.g. 10000")
    return int(raw)


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


@dataclass(frozen=True)
class BoundedParams:
    """Sizes of the three blocks: HCU lanes and code bits (Fig. 10: 16 lanes, 32-bit codes), count bits of the cap
    compare, the key dimension and element bits of the scorer, the token-count bits of the stop."""

    lanes: int = 16
    code_bits: int = 32
    count_bits: int = 8
    dim: int = 64
    q_bits: int = 8
    k_bits: int = 4
    mant_bits: int = 8
    exp_bits: int = 4
    budget_bits: int = 24

    @property
    def dot_bits(self) -> int:
        """Signed width of Σ q·k over ``dim`` lanes."""
        return self.q_bits + self.k_bits + max(1, (self.dim - 1).bit_length()) + 1

    @property
    def score_bits(self) -> int:
        """Signed width of (Σ q·k) · mantissa << exponent."""
        return self.dot_bits + self.mant_bits + (1 << self.exp_bits) - 1 + 1

    @property
    def dist_bits(self) -> int:
        return (self.code_bits + 1).bit_length()


# ------------------------------------------------------------------------------------------- blocks
@block
def capped_nearest(clk, rst, in_valid, code, codes, counts, lane_valid, cap, th, out_valid, best_idx, best_d, join_o,
                   p: BoundedParams):
    """One token code against ``lanes`` cluster codes a cycle (registered outputs). No open lane in reach:
    ``best_d = code_bits + 1``, ``join = 0``."""
    L, W, CB = p.lanes, p.code_bits, p.count_bits
    NONE = W + 1

    @always_seq(clk.posedge, reset=rst)
    def seq():
        bd = intbv(0, min=0, max=NONE + 1)
        bi = intbv(0, min=0, max=L)
        d = intbv(0, min=0, max=NONE + 1)
        cnt = intbv(0)[CB:]
        bd[:] = NONE
        bi[:] = 0
        for j in range(L):
            d[:] = 0
            for b in range(W):
                if code[b] != codes[j * W + b]:
                    d[:] = d + 1
            for b in range(CB):
                cnt[b] = counts[j * CB + b]
            if lane_valid[j] and cnt < cap and d < bd:
                bd[:] = d
                bi[:] = j
        out_valid.next = in_valid
        best_idx.next = bi
        best_d.next = bd
        join_o.next = bd < th and bd != NONE

    return seq


@block
def best_member(clk, rst, in_valid, first, q, k, mant, exp, out_valid, score, best, p: BoundedParams):
    """Score one low-bit key against the query row (``q``: ``dim`` signed ``q_bits`` lanes, ``k``: ``dim`` signed
    ``k_bits`` lanes, lane 0 lowest) and keep the running best of the cluster (``first`` restarts it)."""
    D, QB, KB = p.dim, p.q_bits, p.k_bits
    DB, SB = p.dot_bits, p.score_bits
    seen = Signal(bool(0))

    @always_seq(clk.posedge, reset=rst)
    def seq():
        acc = intbv(0, min=-(1 << (DB - 1)), max=1 << (DB - 1))
        qv = intbv(0, min=-(1 << (QB - 1)), max=1 << (QB - 1))
        kv = intbv(0, min=-(1 << (KB - 1)), max=1 << (KB - 1))
        s = intbv(0, min=-(1 << (SB - 1)), max=1 << (SB - 1))
        acc[:] = 0
        for i in range(D):
            qv[:] = 0
            for b in range(QB - 1):
                if q[i * QB + b]:
                    qv[:] = qv + (1 << b)
            if q[i * QB + QB - 1]:
                qv[:] = qv - (1 << (QB - 1))
            kv[:] = 0
            for b in range(KB - 1):
                if k[i * KB + b]:
                    kv[:] = kv + (1 << b)
            if k[i * KB + KB - 1]:
                kv[:] = kv - (1 << (KB - 1))
            acc[:] = acc + qv * kv
        s[:] = (acc * mant) << exp
        out_valid.next = in_valid
        if in_valid:
            score.next = s
            if first or not seen or s > best:
                best.next = s
            seen.next = 1

    return seq


@block
def budget_stop(clk, rst, in_valid, first, count, budget, out_valid, sel, acc_out, stop, p: BoundedParams):
    """One cluster a cycle in walk order: ``sel`` = tokens selected before it < ``budget``; ``acc_out`` the tokens
    selected so far (this cluster included when selected); ``stop`` = the budget is reached. ``first`` starts a
    new (row, head) walk."""
    AB = p.budget_bits
    acc = Signal(intbv(0)[AB:])

    @always_seq(clk.posedge, reset=rst)
    def seq():
        a = intbv(0)[AB:]
        n = intbv(0)[AB:]
        if first:
            a[:] = 0
        else:
            a[:] = acc
        out_valid.next = in_valid
        if in_valid:
            if a < budget:
                n[:] = a + count
                sel.next = 1
            else:
                n[:] = a
                sel.next = 0
            acc.next = n
            acc_out.next = n
            stop.next = n >= budget

    return seq


# -------------------------------------------------------------------------------------------- ports
def _s(bits: int) -> Signal:
    return Signal(intbv(0)[bits:])


def nearest_ports(p: BoundedParams) -> dict:
    return dict(clk=Signal(bool(0)), rst=ResetSignal(0, active=1, isasync=False), in_valid=Signal(bool(0)),
                code=_s(p.code_bits), codes=_s(p.lanes * p.code_bits), counts=_s(p.lanes * p.count_bits),
                lane_valid=_s(p.lanes), cap=_s(p.count_bits), th=_s(p.dist_bits), out_valid=Signal(bool(0)),
                best_idx=_s(max(1, (p.lanes - 1).bit_length())), best_d=_s(p.dist_bits), join_o=Signal(bool(0)))


def scorer_ports(p: BoundedParams) -> dict:
    sb = p.score_bits
    return dict(clk=Signal(bool(0)), rst=ResetSignal(0, active=1, isasync=False), in_valid=Signal(bool(0)),
                first=Signal(bool(0)), q=_s(p.dim * p.q_bits), k=_s(p.dim * p.k_bits), mant=_s(p.mant_bits),
                exp=_s(p.exp_bits), out_valid=Signal(bool(0)),
                score=Signal(intbv(0, min=-(1 << (sb - 1)), max=1 << (sb - 1))),
                best=Signal(intbv(0, min=-(1 << (sb - 1)), max=1 << (sb - 1))))


def stop_ports(p: BoundedParams) -> dict:
    return dict(clk=Signal(bool(0)), rst=ResetSignal(0, active=1, isasync=False), in_valid=Signal(bool(0)),
                first=Signal(bool(0)), count=_s(p.budget_bits), budget=_s(p.budget_bits), out_valid=Signal(bool(0)),
                sel=Signal(bool(0)), acc_out=_s(p.budget_bits), stop=Signal(bool(0)))


#: name -> (block, ports, outputs)
BLOCKS = {"capped_nearest": (capped_nearest, nearest_ports, ("out_valid", "best_idx", "best_d", "join_o")),
          "best_member": (best_member, scorer_ports, ("out_valid", "score", "best")),
          "budget_stop": (budget_stop, stop_ports, ("out_valid", "sel", "acc_out", "stop"))}


# ------------------------------------------------------------------------------------------ vectors
def _pack(vals, bits: int) -> int:
    x = 0
    for i, v in enumerate(vals):
        x |= (int(v) & ((1 << bits) - 1)) << (i * bits)
    return x


def random_nearest(n: int, rng: np.random.Generator, p: BoundedParams, cap: int = 8, th: int = 7) -> list[dict]:
    """Token codes near one of the lanes' codes (so joins happen), random counts around the cap, random valid
    lanes; each vector with its reference (index, distance, join)."""
    out = []
    for _ in range(n):
        codes = rng.integers(0, 1 << p.code_bits, p.lanes, dtype=np.int64)
        flips = rng.integers(0, p.code_bits, rng.integers(0, 12))
        code = int(codes[rng.integers(0, p.lanes)])
        for f in flips:
            code ^= 1 << int(f)
        counts = rng.integers(0, cap + 3, p.lanes)
        valid = rng.random(p.lanes) < 0.85
        eff = np.where(valid, counts, cap)                   # an invalid lane is as closed as a full one
        j, d, join = capped_nearest_ref(code, codes, eff, cap, th)
        out.append(dict(code=code, codes=codes, counts=counts, valid=valid, cap=cap, th=th,
                        ref=(max(j, 0), d if j >= 0 else p.code_bits + 1, join)))
    return out


def random_scorer(n: int, rng: np.random.Generator, p: BoundedParams, bits: int = 4) -> list[dict]:
    """Tokens of clusters (1-8 members each) with Gaussian keys and queries quantised as the policy does; each
    vector with its reference (score, running best)."""
    keys = rng.normal(0, rng.uniform(0.2, 6.0, (n, 1)), (n, p.dim))
    kc, m, e = quantize_keys(keys, bits)
    out, t = [], 0
    while t < n:
        size = min(int(rng.integers(1, 9)), n - t)
        qc, _ = quantize_query(rng.normal(0, 2.0, (1, p.dim)))
        first = np.zeros(size, bool)
        first[0] = True
        sl = slice(t, t + size)
        best = best_member_ref(qc[0], kc[sl], m[sl], e[sl], first)
        sc = (qc[0] @ kc[sl].astype(np.int64).T * m[sl]) << e[sl]
        for i in range(size):
            out.append(dict(q=qc[0], k=kc[t + i], mant=int(m[t + i]), exp=int(e[t + i]), first=bool(first[i]),
                            ref=(int(sc[i]), int(best[i]))))
        t += size
    return out


def random_stop(n: int, rng: np.random.Generator, p: BoundedParams) -> list[dict]:
    """Walks of 1-40 clusters (counts 1-8, the cap's range, some larger) against budgets of 1-60 tokens."""
    out, t = [], 0
    while t < n:
        size = min(int(rng.integers(1, 41)), n - t)
        counts = rng.integers(1, 9, size) * np.where(rng.random(size) < 0.05, 20, 1)
        budget = int(rng.integers(1, 61))
        sel = budget_stop_ref(counts, budget)
        acc = 0
        for i in range(size):
            acc += int(counts[i]) if sel[i] else 0
            out.append(dict(first=i == 0, count=int(counts[i]), budget=budget,
                            ref=(bool(sel[i]), acc, acc >= budget)))
        t += size
    return out


RANDOM = {"capped_nearest": random_nearest, "best_member": random_scorer, "budget_stop": random_stop}


def vector_inputs(name: str, v: dict, p: BoundedParams) -> dict:
    """The input port values of one vector."""
    if name == "capped_nearest":
        return dict(in_valid=1, code=v["code"], codes=_pack(v["codes"], p.code_bits),
                    counts=_pack(v["counts"], p.count_bits), lane_valid=_pack(v["valid"], 1), cap=v["cap"], th=v["th"])
    if name == "best_member":
        return dict(in_valid=1, first=int(v["first"]), q=_pack(v["q"], p.q_bits), k=_pack(v["k"], p.k_bits),
                    mant=v["mant"], exp=v["exp"])
    return dict(in_valid=1, first=int(v["first"]), count=v["count"], budget=v["budget"])


def vector_outputs(name: str, got: dict, p: BoundedParams) -> tuple:
    """The logged outputs of one vector in the reference's form (signed where the port is)."""
    if name == "capped_nearest":
        return int(got["best_idx"]), int(got["best_d"]), bool(got["join_o"])
    if name == "best_member":
        return _signed(got["score"], p.score_bits), _signed(got["best"], p.score_bits)
    return bool(got["sel"]), int(got["acc_out"]), bool(got["stop"])


# ---------------------------------------------------------------------------------------- simulation
def simulate_myhdl(name: str, vecs: list[dict], p: BoundedParams) -> dict:
    """The MyHDL block on ``vecs`` (one a cycle, outputs read a cycle later) -> {vectors, mismatches}."""
    make, ports, outs = BLOCKS[name]
    P = ports(p)
    got: list[tuple] = []

    @block
    def bench():
        dut = make(**P, p=p)
        clkgen = clock_driver(P["clk"])

        @instance
        def tb():
            clk = P["clk"]
            yield from reset_pulse(clk, P["rst"])
            for v in vecs:
                for k, x in vector_inputs(name, v, p).items():
                    P[k].next = x
                yield clk.negedge
                got.append(vector_outputs(name, {k: int(P[k]) for k in outs}, p))
            raise StopSimulation()

        return dut, clkgen, tb

    bench().run_sim(quiet=1)
    bad = sum(int(g != v["ref"]) for v, g in zip(vecs, got))
    return dict(vectors=len(vecs), mismatches=bad + abs(len(vecs) - len(got)))


def stimulus(name: str, vecs: list[dict], p: BoundedParams) -> tuple[Stimulus, list[dict]]:
    """The stimulus of ``vecs`` (reset, then one logged vector a cycle) and per vector its line and reference."""
    _, ports, outs = BLOCKS[name]
    stim = Stimulus(ports(p), outs)
    stim.step(rst=1)
    stim.vals["rst"] = 0
    return stim, [dict(line=stim.step(LOG, **vector_inputs(name, v, p)), ref=v["ref"]) for v in vecs]


def check_log(name: str, run, meta: list[dict], p: BoundedParams) -> dict:
    """Per vector: the outputs the Verilog logged at its line vs the reference -> {vectors, mismatches}."""
    _, ports, outs = BLOCKS[name]
    logs, _ = decode_log(run, ports(p), outs)
    bad = 0
    for m in meta:
        e = logs.get(m["line"], [])
        bad += int(len(e) != 1 or e[0] is None or vector_outputs(name, e[0], p) != m["ref"])
    return dict(vectors=len(meta), mismatches=bad)


def run_verilog(name: str, vecs: list[dict], p: BoundedParams, work: Path, simulator: str = "icarus") -> dict:
    """Convert the block, stream ``vecs`` through the stimulus testbench (one vector a cycle, logged) and compare
    every vector's outputs with the reference -> {vectors, mismatches, cycles, run_s}."""
    make, ports, outs = BLOCKS[name]
    vfile = convert(lambda P: make(**P, p=p), ports(p), name, work)
    P = ports(p)
    stim, meta = stimulus(name, vecs, p)
    run = simulate(vfile, name, P, Protocol(outs), stim, work / "sim", simulator)
    bad = check_log(name, run, meta, p)["mismatches"]
    return dict(vectors=len(vecs), mismatches=bad, cycles=run.cycles, run_s=run.run_s, simulator=simulator)


def synth_cells(name: str, p: BoundedParams, work: Path) -> dict:
    """yosys with the DRE's recipe (:data:`vrex_lib.hw.verify.YOSYS_RECIPE`): cells, flip-flops of the block."""
    from .verify import synthesise

    make, ports, _ = BLOCKS[name]
    vfile = convert(lambda P: make(**P, p=p), ports(p), name, work)
    return synthesise(vfile, name, work)


__all__ = ["BLOCKS", "BoundedParams", "DEFAULT_VECTORS", "RANDOM", "best_member", "budget_stop", "bulk_vectors",
           "capped_nearest", "random_nearest", "random_scorer", "random_stop", "run_verilog", "simulate_myhdl",
           "stimulus", "check_log", "synth_cells", "vector_inputs", "vector_outputs"]
