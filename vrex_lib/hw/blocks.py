"""One record per block (:class:`BlockSpec`) -- the DRE's HCU, WTU, KVMU and the LXE's DPE, VPE: its parameters,
ports, MyHDL instance, testbench protocol, vectors and checks, so that the verification (``verify.run``,
``lxe.run``), the bulk Verilog vectors (``bulk.run_block``) and the activity measurement (``activity``) loop over
blocks instead of branching on them.

Checks, per block:

* ``check`` — the MyHDL model on vectors, every output against the integer reference of
  :mod:`vrex_lib.hw.fixedpoint` (the same rules as :mod:`vrex_lib.resv`) and the cycle models of
  :mod:`vrex_lib.hw.timing`;
* ``stimulus`` + ``check_log`` — the same vectors as a stimulus file for the converted Verilog
  (:mod:`vrex_lib.hw.harness`) and the decoding of its log: per vector, every output and its cycle count
  against the reference (HCU: ``timing.hcu_cycles_trace``; WTU: :func:`vrex_lib.hw.walk.wtu_walk_ref`).

A vector mismatches when any of its outputs (or its cycle count) differs.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config import VRexCoreConfig
from . import bounded
from . import fixedpoint as fx
from . import lxe_vectors, timing, vectors
from .dpe import PROTOCOL as DPE_PROTOCOL
from .dpe import DPEParams, check_dpe, check_dpe_log, dpe_ports, dpe_stimulus, dpe_tree
from .harness import LOG, WAIT, Protocol, SimRun, Stimulus, decode_log, pack_lanes
from .hcu import HCUFrameResult, HCUParams, hcu, hcu_ports, simulate_hcu
from .kvmu import kvmu, kvmu_ports, prefetch_requests, simulate_kvmu
from .vpe import PROTOCOL as VPE_PROTOCOL
from .vpe import VPEParams, check_vpe, check_vpe_log, vpe, vpe_ports, vpe_stimulus
from .walk import WalkRef, wtu_walk_ref
from .wtu import WTUParams, wtu, wtu_ports
from .wtu_driver import WTURowResult, simulate_wtu


@dataclass(frozen=True)
class OperatingPoint:
    """The operating point every block check shares: Th_hd, Th_r-wics and the KVMU's bytes per token."""

    th: int = 7
    ratio: float = 0.3
    bytes_per_token: int = 256

    @property
    def ratio_q(self) -> int:
        return fx.quantize_ratio(self.ratio)


# -------------------------------------------------------------------------------------------- HCU
def _hcu_n_before(ref: np.ndarray, n0: int) -> list[int]:
    """Clusters that exist before each token of a frame (old ones plus those its earlier tokens opened)."""
    return [n0 + len({int(x) for x in ref[:t] if x >= n0}) for t in range(len(ref))]


def check_hcu(frames: list, th: int, p: HCUParams, record: list | None = None) -> dict:
    """MyHDL HCU vs ``fx.cluster_ref`` on ``frames``: assignments and cluster counts per frame."""
    t0 = time.perf_counter()
    res = simulate_hcu(frames, th, p, record=record)
    dt = time.perf_counter() - t0
    bad, cycles, state, tokens, cmp_cycles = 0, 0, np.zeros(0, dtype=np.int64), 0, 0
    for (old, new), r in zip(frames, res):
        if old is not None:
            state = np.asarray(old, dtype=np.int64)
        ref, state_after = fx.cluster_ref(new, state, th)
        n_before = _hcu_n_before(ref, len(state))
        bad += int(np.sum(r.assignment != ref)) + int(r.n_clusters != len(state_after))
        state = state_after
        cycles += r.cycles
        tokens += len(new)
        cmp_cycles += sum(max(1, -(-n // p.lanes)) for n in n_before)
    return dict(vectors=tokens, mismatches=bad, cycles=cycles, sim_seconds=dt, results=res,
                actions=dict(xor_popcount_rows=cmp_cycles, tokens=tokens))


def hcu_stimulus(frames: list, th: int, p: HCUParams) -> tuple[Stimulus, list[dict]]:
    """Stimulus of HCU frames ``(old codes or None, new codes)``; per frame the reference and its WAIT line."""
    s = Stimulus(hcu_ports(p), HCU.protocol.outputs)
    mask = (1 << p.code_bits) - 1
    s.step(rst=1)
    s.vals["rst"] = 0
    state: list[int] = []
    meta = []
    for old, new in frames:
        new = [int(x) for x in np.ravel(new)]
        if not 1 <= len(new) <= p.cur_depth:
            raise ValueError(f"an HCU frame has {len(new)} tokens; the current hash-bit memory holds 1..{p.cur_depth}")
        if old is not None:
            state = [int(x) for x in np.ravel(old)]
            for j, c in enumerate(state):
                s.step(key_we=1, key_waddr=j, key_wdata=c & mask)
            s.vals["key_we"] = 0
        if len(state) + len(new) > p.depth:
            raise ValueError(f"{len(state)}+{len(new)} clusters exceed the HCU key memory depth {p.depth}")
        for j, c in enumerate(new):
            s.step(cur_we=1, cur_waddr=j, cur_wdata=c & mask)
        s.vals["cur_we"] = 0
        s.step(n_tok=len(new), n_cl_in=len(state), th=th, start=1)
        wait = s.step(WAIT, start=0)
        ref, after = fx.cluster_ref(np.array(new, dtype=np.int64), np.array(state, dtype=np.int64), th)
        meta.append(dict(wait=wait, ref=ref.tolist(), n_clusters=len(after),
                         cycles=timing.hcu_cycles_trace(_hcu_n_before(ref, len(state)),
                                                        VRexCoreConfig(n_hcu_w=p.lanes))))
        state = [int(x) for x in after]
    return s, meta


def check_hcu_log(run: SimRun, meta: list[dict], p: HCUParams) -> dict:
    """Per token: the cluster the Verilog HCU assigned vs :func:`fx.cluster_ref`; per frame also the cluster
    count and the cycles (vs ``timing.hcu_cycles_trace``); a frame's error counts against all its tokens."""
    logs, waits = decode_log(run, hcu_ports(p), HCU.protocol.outputs)
    tokens = bad = 0
    results = []
    for m in meta:
        got = [-1] * len(m["ref"])
        ncl, ok = None, True
        for e in logs.get(m["wait"], []):
            if e is None:
                ok = False
                continue
            if e["res_valid"] and e["res_tok"] < len(got):
                got[e["res_tok"]] = e["res_cluster"]
            if e["done"]:
                ncl = e["n_cl_out"]
        frame_ok = ok and ncl == m["n_clusters"] and waits.get(m["wait"]) == m["cycles"]
        tokens += len(got)
        bad += sum(1 for a, b in zip(got, m["ref"]) if not frame_ok or a != b)
        results.append(HCUFrameResult(np.array(got, dtype=np.int64), -1 if ncl is None else ncl,
                                      waits.get(m["wait"], -1)))
    return dict(vectors=tokens, mismatches=bad, results=results)


# -------------------------------------------------------------------------------------------- WTU
def check_wtu(rows: list, ratio: float, p: WTUParams, record: list | None = None) -> dict:
    """MyHDL WTU vs ``fx.wicsum_select_ref`` on ``rows``: the selection of every row."""
    t0 = time.perf_counter()
    res, _ = simulate_wtu(rows, fx.quantize_ratio(ratio), p, record=record)
    dt = time.perf_counter() - t0
    bad = 0
    for (w, c), r in zip(rows, res):
        bad += int(np.any(r.selected != fx.wicsum_select_ref(w, c, ratio)))
    G = sum(-(-len(w) // p.lanes) for w, _ in rows)
    return dict(vectors=len(rows), mismatches=bad, cycles=sum(r.cycles for r in res), sim_seconds=dt, results=res,
                actions=dict(rows=len(rows), row_reads=G * 2 + sum(r.scans * -(-len(w) // p.lanes)
                                                                    for (w, _), r in zip(rows, res)),
                             bucket_scans=sum(r.scans for r in res)))


def wtu_stimulus(rows: list, ratio_q: int, p: WTUParams) -> tuple[Stimulus, list[dict]]:
    """Stimulus of WTU rows ``(weights, counts)``: load, start, WAIT for done, read the selection (LOG)."""
    s = Stimulus(wtu_ports(p), WTU.protocol.outputs)
    L = p.lanes
    s.step(rst=1)
    s.vals["rst"] = 0
    meta = []
    for i, (w, c) in enumerate(rows):
        w = np.asarray(w, dtype=np.int64)
        c = np.asarray(c, dtype=np.int64)
        n = len(w)
        if not 1 <= n <= p.n_max or len(c) != n or w.min() < 0 or w.max() > fx.W_MAX or c.min() < 0 \
                or c.max() > fx.C_MAX:
            raise ValueError(f"WTU row {i}: 1..{p.n_max} 16-bit weights and as many 16-bit counts needed")
        G = -(-n // L)
        wp = np.zeros(G * L, dtype=np.int64)
        cp = np.zeros(G * L, dtype=np.int64)
        wp[:n], cp[:n] = w, c
        for r in range(G):
            s.step(s_we=1, c_we=1, w_addr=r, s_wdata=pack_lanes(wp[r * L:(r + 1) * L], fx.W_BITS),
                   c_wdata=pack_lanes(cp[r * L:(r + 1) * L], fx.C_BITS))
        s.vals["s_we"] = s.vals["c_we"] = 0
        s.step(n=n, ratio=ratio_q, start=1, first=int(i == 0))
        wait = s.step(WAIT, start=0)
        reads = [s.step(LOG, sel_raddr=r) for r in range(G)]
        meta.append(dict(wait=wait, reads=reads, n=n, ref=wtu_walk_ref(w, c, ratio_q, p)))
    return s, meta


def check_wtu_log(run: SimRun, meta: list[dict], p: WTUParams) -> dict:
    """Per row: the selection bitmask read back from the Verilog WTU vs :func:`fx.wicsum_select_ref` (through
    :func:`wtu_walk_ref`, tested equal), its bucket scans and its cycles vs :func:`wtu_walk_ref`."""
    logs, waits = decode_log(run, wtu_ports(p), WTU.protocol.outputs)
    L = p.lanes
    bad = scans_total = 0
    results = []
    for m in meta:
        ref: WalkRef = m["ref"]
        ok = waits.get(m["wait"]) == ref.cycles
        done = [e for e in logs.get(m["wait"], []) if e is not None and e["done"]]
        ok = ok and len(done) == 1 and done[0]["n_scans"] == ref.scans
        sel = np.zeros(len(m["reads"]) * L, dtype=bool)
        for r, ln in enumerate(m["reads"]):
            ev = logs.get(ln, [])
            if len(ev) != 1 or ev[0] is None:
                ok = False
                continue
            v = ev[0]["sel_rdata"]
            sel[r * L:(r + 1) * L] = [(v >> k) & 1 for k in range(L)]
        ok = ok and bool(np.array_equal(sel[:m["n"]], ref.selected))
        bad += int(not ok)
        scans_total += ref.scans
        results.append(WTURowResult(sel[:m["n"]], waits.get(m["wait"], -1), done[0]["n_scans"] if done else -1))
    return dict(vectors=len(meta), mismatches=bad, scans=scans_total, results=results)


# ------------------------------------------------------------------------------------------- KVMU
def check_kvmu(sels: list, bpt: int, record: list | None = None) -> dict:
    """MyHDL KVMU vs :func:`prefetch_requests` on ``sels``: the request stream of every selection."""
    t0 = time.perf_counter()
    res = simulate_kvmu(sels, bpt, record=record)
    dt = time.perf_counter() - t0
    bad = sum(int(r != prefetch_requests(s, c, bpt)) for (r, _), (s, c) in zip(res, sels))
    return dict(vectors=len(sels), mismatches=bad, cycles=sum(c for _, c in res), sim_seconds=dt, results=res,
                actions=dict(clusters=sum(len(c) for _, c in sels), requests=sum(len(r) for r, _ in res)))


def kvmu_stimulus(sels: list, bytes_per_token: int) -> tuple[Stimulus, list[dict]]:
    """Stimulus of KVMU selections ``(selected, counts)``: one cluster per cycle, then one idle cycle."""
    s = Stimulus(kvmu_ports(), KVMU.protocol.outputs)
    s.step(rst=1)
    s.vals["rst"] = 0
    s.vals["bpt"] = int(bytes_per_token)
    meta = []
    for sel, cnt in sels:
        C = len(cnt)
        first = len(s.lines)
        for j in range(C):
            s.step(in_valid=1, in_sel=bool(sel[j]), in_count=int(cnt[j]), in_last=int(j == C - 1))
        s.step(in_valid=0, in_last=0)
        meta.append(dict(lines=(first, len(s.lines)), ref=prefetch_requests(sel, cnt, bytes_per_token),
                         cycles=timing.kvmu_cycles(C)))
    return s, meta


def check_kvmu_log(run: SimRun, meta: list[dict]) -> dict:
    """Per selection: the Verilog KVMU's request stream vs :func:`prefetch_requests`."""
    logs, _ = decode_log(run, kvmu_ports(), KVMU.protocol.outputs)
    bad = 0
    results = []
    for m in meta:
        a, b = m["lines"]
        got, ok = [], True
        for ln in range(a, b):
            for e in logs.get(ln, []):
                if e is None:
                    ok = False
                elif e["req_valid"]:
                    got.append((e["req_addr"], e["req_len"]))
        bad += int(not ok or got != m["ref"])
        results.append((got, b - a))
    return dict(vectors=len(meta), mismatches=bad, results=results)


# ------------------------------------------------------------------------------------------ records
@dataclass(frozen=True)
class BlockSpec:
    """Everything the harness needs to know about one block. ``p`` below is the block's parameter object
    (``HCUParams`` / ``WTUParams``; None for the KVMU, which has none)."""

    name: str
    params: Callable[[VRexCoreConfig], Any]  # the paper's sizes (Fig. 10, §VI.F)
    synth_params: Callable[[Any], Any]  # reduced memory depth for yosys (the logic keeps the paper's widths)
    ports: Callable[[Any], dict]  # fresh top-level signals
    make: Callable[[dict, Any], Any]  # the MyHDL instance on those ports
    protocol: Protocol  # outputs, strobes and done of the stimulus testbench
    random: Callable[[int, np.random.Generator, Any, OperatingPoint], list]  # seeded random vectors
    trace: Callable[..., list]  # recorded real vectors of one source (vectors.trace_*)
    count: Callable[[list], int]  # vectors a list holds (an HCU frame counts its tokens)
    check: Callable[[list, OperatingPoint, Any, list | None], dict]  # MyHDL vs reference
    stimulus: Callable[[list, OperatingPoint, Any], tuple[Stimulus, list[dict]]]  # stimulus + per-vector reference
    check_log: Callable[[SimRun, list[dict], Any], dict]  # Verilog log vs reference
    longest: Callable[[list[dict]], int]  # cycles of the longest WAIT of a stimulus (0: no WAIT)
    # LXE blocks: (recorded operands, cap per source, p) -> (vectors, source tags); None: the DRE traces (``trace``)
    real_fn: Callable[[dict | None, int | None, Any], tuple[list, list]] | None = None

    def real(self, tr: dict | None, cap: int | None, p=None) -> tuple[list, list]:
        """Recorded real vectors of every source (``cap`` per source) and their source tags (``p``: the block's
        parameters, which size an LXE block's vectors)."""
        if self.real_fn is not None:
            return self.real_fn(tr, cap, p)
        return vectors.real_vectors(tr, self.trace, cap)


HCU = BlockSpec(
    name="hcu", params=HCUParams.from_core,
    synth_params=lambda p: HCUParams(p.code_bits, 4 * p.lanes, p.cur_depth, p.lanes),
    ports=hcu_ports, make=lambda P, p: hcu(**P, p=p),
    protocol=Protocol(("busy", "done", "n_cl_out", "res_valid", "res_tok", "res_cluster", "res_new"),
                      strobe=("res_valid", "done"), done="done"),
    random=lambda n, rng, p, ctx: vectors.random_hcu_frames(n, rng, p, ctx.th), trace=vectors.trace_hcu_frames,
    count=lambda v: sum(len(new) for _, new in v), check=lambda v, ctx, p, rec: check_hcu(v, ctx.th, p, rec),
    stimulus=lambda v, ctx, p: hcu_stimulus(v, ctx.th, p), check_log=check_hcu_log,
    longest=lambda meta: max([m["cycles"] for m in meta] or [0]))
WTU = BlockSpec(
    name="wtu", params=WTUParams.from_core, synth_params=lambda p: WTUParams(16 * p.lanes, p.lanes, p.n_buckets),
    ports=wtu_ports, make=lambda P, p: wtu(**P, p=p),
    protocol=Protocol(("sel_rdata", "agg_rdata", "busy", "done", "n_scans"), strobe=("done",), done="done"),
    random=lambda n, rng, p, ctx: vectors.random_wtu_rows(n, rng, p.n_max), trace=vectors.trace_wtu_rows,
    count=len, check=lambda v, ctx, p, rec: check_wtu(v, ctx.ratio, p, rec),
    stimulus=lambda v, ctx, p: wtu_stimulus(v, ctx.ratio_q, p), check_log=check_wtu_log,
    longest=lambda meta: max([m["ref"].cycles for m in meta] or [0]))
KVMU = BlockSpec(
    name="kvmu", params=lambda cfg: None, synth_params=lambda p: None, ports=lambda p: kvmu_ports(),
    make=lambda P, p: kvmu(**P),
    protocol=Protocol(("req_valid", "req_addr", "req_len", "busy_out"), strobe=("req_valid",)),
    random=lambda n, rng, p, ctx: vectors.random_kvmu_selections(n, rng), trace=vectors.trace_kvmu_selections,
    count=len, check=lambda v, ctx, p, rec: check_kvmu(v, ctx.bytes_per_token, rec),
    stimulus=lambda v, ctx, p: kvmu_stimulus(v, ctx.bytes_per_token),
    check_log=lambda run, meta, p: check_kvmu_log(run, meta), longest=lambda meta: 0)

SPECS: dict[str, BlockSpec] = {s.name: s for s in (HCU, WTU, KVMU)}
BLOCKS = tuple(SPECS)


# ------------------------------------------------------------------------------------ LXE: DPE, VPE
def _no_trace(*_a, **_k) -> list:
    raise TypeError("the LXE blocks read recorded operands through BlockSpec.real_fn, not the DRE traces")


DPE = BlockSpec(
    name="dpe", params=DPEParams.from_core, synth_params=lambda p: p, ports=dpe_ports,
    make=lambda P, p: dpe_tree(**P, p=p), protocol=DPE_PROTOCOL,
    random=lambda n, rng, p, ctx: lxe_vectors.random_dpe(n, rng, p.n), trace=_no_trace, count=len,
    check=lambda v, ctx, p, rec: check_dpe(v, p, rec), stimulus=lambda v, ctx, p: dpe_stimulus(v, p),
    check_log=check_dpe_log, longest=lambda meta: 0,
    real_fn=lambda tr, cap, p: lxe_vectors.real_dpe(tr, cap, p.n))
VPE = BlockSpec(
    name="vpe", params=VPEParams.from_core, synth_params=lambda p: p, ports=vpe_ports,
    make=lambda P, p: vpe(**P), protocol=VPE_PROTOCOL,
    random=lambda n, rng, p, ctx: lxe_vectors.random_vpe(n, rng, p.lanes), trace=_no_trace, count=len,
    check=lambda v, ctx, p, rec: check_vpe(v, p, rec), stimulus=lambda v, ctx, p: vpe_stimulus(v, p),
    check_log=check_vpe_log, longest=lambda meta: 0,
    real_fn=lambda tr, cap, p: lxe_vectors.real_vpe(tr, cap, p.lanes))
#: The LXE blocks with RTL (the DRE's verify loop, ``BLOCKS``, does not include them: ``vrex_lib.hw.lxe`` runs them).
LXE_SPECS: dict[str, BlockSpec] = {s.name: s for s in (DPE, VPE)}
LXE_BLOCKS = tuple(LXE_SPECS)


# ------------------------------------------------------------- beyond the paper: the bounded ReSV's blocks
def _bounded_spec(name: str) -> BlockSpec:
    """A block of :mod:`vrex_lib.hw.bounded` (docs/DECISIONS.md D495): random vectors only (no recorded trace of a
    method the traces do not run)."""
    make, ports, outs = bounded.BLOCKS[name]
    return BlockSpec(
        name=name, params=lambda cfg: bounded.BoundedParams(lanes=cfg.n_hcu_w), synth_params=lambda p: p,
        ports=ports, make=lambda P, p: make(**P, p=p), protocol=Protocol(outs),
        random=lambda n, rng, p, ctx: bounded.RANDOM[name](n, rng, p), trace=_no_trace, count=len,
        check=lambda v, ctx, p, rec: bounded.simulate_myhdl(name, v, p),
        stimulus=lambda v, ctx, p: bounded.stimulus(name, v, p),
        check_log=lambda run, meta, p: bounded.check_log(name, run, meta, p), longest=lambda meta: 0,
        real_fn=lambda tr, cap, p: ([], []))


#: The bounded ReSV's blocks (not in the DRE's verify loop ``BLOCKS``: ``vrex_lib.hw.bounded`` checks them).
BOUNDED_SPECS: dict[str, BlockSpec] = {n: _bounded_spec(n) for n in bounded.BLOCKS}
BOUNDED_BLOCKS = tuple(BOUNDED_SPECS)


def spec(name: str) -> BlockSpec:
    """The record of block ``name`` (a DRE, an LXE or a bounded-ReSV block); a ValueError naming the choices."""
    for specs in (SPECS, LXE_SPECS, BOUNDED_SPECS):
        if name in specs:
            return specs[name]
    raise ValueError(f"unknown block {name!r}: choose from {', '.join(BLOCKS + LXE_BLOCKS + BOUNDED_BLOCKS)}")
