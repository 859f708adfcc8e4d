"""Switching activity of the DRE blocks, measured on their converted Verilog: the toggle counts that turn the
energy estimator's per-block dynamic power into one driven by this design's own signals.

    act = block_activity("wtu", n_vectors=2000, seed=0)     # cached under results/hdl/activity/
    act.alpha, act.flop_alpha                                  # toggles per bit per cycle

How it is measured (``docs/DECISIONS.md D150``): the block's Verilog (converted at the paper's sizes, as in
``verify``) runs in the one stimulus testbench of :mod:`vrex_lib.hw.harness` under Icarus Verilog (or
Verilator with ``--trace``), dumping a VCD of the block's own scope; every vector is checked against the
reference on the way (``mismatches``). The vectors are those the harness checks: a prefix of the
recorded real vectors of each trace source (text, video frames; an equal share each), then seeded random ones up
to ``n_vectors``. :func:`count_toggles` counts, per signal of the block's scope (every ``reg`` and ``wire`` of
the converted Verilog; memories are SRAM macros and are not dumped), the 0->1 and 1->0 bit transitions between
successive dumped values after time 0; the flip-flops are the signals the Verilog assigns with ``<=``.
"""
from __future__ import annotations

import json
import re
import tempfile
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np

from .. import _io
from ..config import ReSVConfig, VRexCoreConfig, results_dir
from .blocks import BLOCKS, BlockSpec, OperatingPoint, spec
from .bulk import check_vectors
from .harness import Protocol, Stimulus, convert, pick_simulator, simulate
from .vectors import TRACE_FILE, load_traces

SCHEMA = "vrex.hw.activity/1"
_SOURCES = ("activity.py", "blocks.py", "harness.py", "vectors.py")  # code that decides the stimulus and count


@dataclass(frozen=True)
class BlockActivity:
    """Toggle counts of one block over one simulated vector set."""

    block: str  # "hcu" | "wtu" | "kvmu"
    cycles: int  # clock cycles simulated
    vectors: int  # input vectors applied
    signal_bits: int  # bits of all signals counted (registers and wires of the converted Verilog)
    toggles: int  # 0->1 and 1->0 transitions over those bits and cycles
    flop_bits: int  # register bits
    flop_toggles: int  # transitions of register bits
    source: str  # how it was measured (simulator, vectors, seed)
    real_vectors: int = 0  # of ``vectors``, recorded real ones (the rest are random)
    simulator: str = ""  # "verilator" | "icarus"
    mismatches: int = 0  # vectors whose outputs differed from the reference during the run (expected 0)

    @property
    def alpha(self) -> float:
        """Mean toggles per signal bit per cycle."""
        return self.toggles / (self.signal_bits * self.cycles) if self.signal_bits and self.cycles else 0.0

    @property
    def flop_alpha(self) -> float:
        """Mean toggles per register bit per cycle."""
        return self.flop_toggles / (self.flop_bits * self.cycles) if self.flop_bits and self.cycles else 0.0


# ---------------------------------------------------------------------------------------------- VCD
def _vcd_vars(header: str, scope: str) -> dict[str, list[tuple[str, int]]]:
    """{VCD id: [(name, width), ...]} of the variables declared directly in a scope named ``scope`` (memory
    words, which Verilator dumps as ``mem[i]``, left out)."""
    stack: list[str] = []
    ids: dict[str, list[tuple[str, int]]] = {}
    for tok in re.finditer(r"\$(scope|upscope|var)\b(.*?)\$end", header, re.S):
        kind, body = tok.group(1), tok.group(2).split()
        if kind == "scope":
            stack.append(body[1])
        elif kind == "upscope":
            stack.pop()
        elif stack and stack[-1] == scope and "[" not in body[3]:  # "mem[3]": a memory word, not a signal
            ids.setdefault(body[2], []).append((body[3], int(body[1])))
    return ids


def count_toggles(vcd: Path, scope: str = "dut") -> dict[str, tuple[int, int]]:
    """{signal name: (bits, toggles)} of every variable declared directly in ``scope`` of the VCD file.

    A toggle is one bit changing 0->1 or 1->0 between two successive dumped values; changes at time 0 (the
    initial settling) are not counted, and a change from or to an X/Z value is not counted either."""
    with open(vcd, "rb") as f:
        header = []
        for ln in f:
            header.append(ln)
            if b"$enddefinitions" in ln:
                break
        else:
            raise ValueError(f"{vcd}: not a VCD file (no $enddefinitions)")
        ids = _vcd_vars(b"".join(header).decode(errors="replace"), scope)
        want = {k.encode() for k in ids}
        prev: dict[bytes, int | None] = {}
        tog = dict.fromkeys(want, 0)
        t0 = True
        for ln in f:
            c = ln[0] if len(ln) > 1 else 36
            if c == 36:  # '$' (dumpvars, end) or an empty line
                continue
            if c == 35:  # '#' a time
                t0 = t0 and int(ln[1:]) == 0
                continue
            if c in (98, 66):  # 'b' a vector value
                v, ident = ln[1:].split(maxsplit=1)
                ident = ident.strip()
            else:
                v, ident = ln[:1], ln[1:].strip()
            if ident not in want:
                continue
            x = int(v, 2) if not v.strip(b"01") else None
            p = prev.get(ident)
            if not t0 and p is not None and x is not None:
                tog[ident] += (p ^ x).bit_count()
            prev[ident] = x
    return {name: (width, tog[k.encode()]) for k, names in ids.items() for name, width in names}


def flop_names(verilog: str) -> set[str]:
    """Registers of a converted Verilog module: the targets of nonblocking (``<=``) assignments, memories
    excluded (their words are SRAM, not flip-flops)."""
    memories = set(re.findall(r"^\s*reg\s+(?:\[[^\]]*\]\s*)?(\w+)\s*\[", verilog, re.M))
    targets = set(re.findall(r"^\s*(\w+)\s*(?:\[[^\]]*\])?\s*<=", verilog, re.M))
    return targets - memories


def measure(vfile: Path, top: str, ports: dict, proto: Protocol, stim: Stimulus, work: Path,
            simulator: str) -> dict:
    """Simulate ``stim`` on ``vfile`` with a VCD and count: dict(cycles, signal_bits, toggles, flop_bits,
    flop_toggles, run)."""
    vcd = work / "activity.vcd"
    run = simulate(vfile, top, ports, proto, stim, work, simulator, vcd=vcd)
    return dict(run=run, **summarise(count_toggles(vcd), flop_names(Path(vfile).read_text()), run.cycles))


def summarise(counts: dict[str, tuple[int, int]], flops: set[str], cycles: int) -> dict:
    """Totals of :func:`count_toggles` over all signals and over the registers ``flops``."""
    return dict(cycles=int(cycles), signal_bits=sum(b for b, _ in counts.values()),
                toggles=sum(t for _, t in counts.values()),
                flop_bits=sum(b for n, (b, _) in counts.items() if n in flops),
                flop_toggles=sum(t for n, (_, t) in counts.items() if n in flops))


# ------------------------------------------------------------------------------------------- vectors
def activity_vectors(b: BlockSpec, n_vectors: int, seed: int, p, ctx: OperatingPoint, tr: dict | None) \
        -> tuple[list, int, dict[str, int]]:
    """(vectors, real count, real count per source): a prefix of each trace source's recorded vectors (an
    equal share of ``n_vectors`` each), then random vectors from ``default_rng([seed, 2])`` up to
    ``n_vectors``."""
    vecs: list = []
    per: dict[str, int] = {}
    real, tags = b.real(tr, None)
    sources = list(dict.fromkeys(tags))
    for src in sources:
        budget, used = n_vectors // len(sources), 0
        for v in (v for v, t in zip(real, tags) if t == src):
            if used + b.count([v]) > budget:
                break
            vecs.append(v)
            used += b.count([v])
        per[src] = used
    n_real = b.count(vecs)
    vecs += b.random(max(0, n_vectors - n_real), np.random.default_rng([seed, 2]), p, ctx)
    return vecs, n_real, per


# ---------------------------------------------------------------------------------------------- cache
def inputs_key(block: str, n_vectors: int, seed: int, simulator: str, params: dict, ctx: OperatingPoint,
               trace_file: Path = TRACE_FILE) -> str:
    """What decides a measurement: the block, its parameters, the vector count, seed, simulator, operating
    point, the recorded trace and the code of ``vrex_lib/hw`` (the RTL, the stimulus and the counting)."""
    here = Path(__file__).parent
    return _io.reuse_key(code=[f"vrex_lib.hw.{f.stem}" for f in sorted(here.glob("*.py")) if f.stem != "__init__"],
                         inputs=[trace_file] if trace_file.exists() else [],
                         args=dict(block=block, params=params, n_vectors=int(n_vectors), seed=int(seed),
                                   simulator=simulator, ctx=asdict(ctx)), schema=SCHEMA, myhdl=version("myhdl"))


def _cached(path: Path, key: str) -> BlockActivity | None:
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict) or d.get("schema") != SCHEMA or d.get("inputs_key") != key:
        return None
    try:
        return BlockActivity(**d["activity"])
    except (KeyError, TypeError):
        return None


def _check_args(block: str, n_vectors: int, seed: int) -> BlockSpec:
    if block not in BLOCKS:  # the LXE's DPE/VPE have their gate-level activity from vrex_lib.hw.lxe
        raise ValueError(f"block_activity: unknown block {block!r}: choose from {', '.join(BLOCKS)} (the DPE and "
                         "VPE's activity comes from vrex_lib.hw.lxe)")
    b = spec(block)
    if isinstance(n_vectors, bool) or not isinstance(n_vectors, (int, np.integer)) or n_vectors < 1:
        raise ValueError(f"block_activity: n_vectors={n_vectors!r}: a vector count is an integer >= 1")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"block_activity: seed={seed!r}: a seed is an integer >= 0")
    return b


def block_activity(block: str, *, n_vectors: int = 2000, seed: int = 0, out: str | Path | None = None,
                   simulator: str | None = None, cfg: VRexCoreConfig | None = None) -> BlockActivity:
    """Toggle counts of ``block`` ("hcu", "wtu", "kvmu") over ``n_vectors`` vectors, measured on its converted
    Verilog (paper sizes); cached in ``<out or results>/hdl/activity/<block>.json`` under its inputs key, so a
    second call with the same inputs reads the file. ``simulator``: "icarus" (default) or "verilator" (its trace
    leaves out signals it optimises away, e.g. the HCU's replicated code word, so it counts fewer bits; the
    choice is part of the key). ``cfg`` sizes the block (default: the paper's :class:`VRexCoreConfig`)."""
    b = _check_args(block, n_vectors, seed)
    sim = simulator or "icarus"
    pick_simulator(sim)
    cfg = cfg or VRexCoreConfig()
    rc = ReSVConfig()
    ctx = OperatingPoint(th=rc.th_hp, ratio=rc.th_r_wics)
    p = b.params(cfg)
    path = results_dir(out) / "hdl" / "activity" / f"{block}.json"
    key = inputs_key(block, n_vectors, seed, sim, asdict(p) if p is not None else {}, ctx)
    hit = _cached(path, key)
    if hit is not None:
        return hit
    vecs, n_real, per = activity_vectors(b, n_vectors, seed, p, ctx, load_traces())
    with tempfile.TemporaryDirectory(prefix="vrex_act_") as tmp:
        vfile = convert(lambda P: b.make(P, p), b.ports(p), block, Path(tmp) / "v")
        act = _measure_block(b, vecs, n_real, per, ctx, p, vfile, Path(tmp) / "run", sim, seed)
    try:
        _io.write_json(path, dict(schema=SCHEMA, inputs_key=key, activity=asdict(act)))
    except OSError as e:
        raise OSError(e.errno, f"cannot write the activity cache {path}: {e.strerror or e}; free space there or "
                      "pass another out=") from None
    return act


def _measure_block(b: BlockSpec, vecs: list, n_real: int, per: dict[str, int], ctx: OperatingPoint, p, vfile: Path,
                   work: Path, simulator: str, seed: int) -> BlockActivity:
    vcd = work / "activity.vcd"
    chk = check_vectors(b, vecs, ctx, p, vfile, work, simulator, vcd=vcd)
    tot = summarise(count_toggles(vcd), flop_names(vfile.read_text()), chk["cycles"])
    vcd.unlink()
    real = ", ".join(f"{n} {s}" for s, n in per.items()) or "none recorded"
    n = b.count(vecs)
    src = (f"{simulator} VCD of the converted {b.name}.v (paper sizes, vrex_lib.hw.activity); {n} vectors: "
           f"{n_real} recorded real ({real}) + {n - n_real} random (seed {seed})")
    return BlockActivity(block=b.name, vectors=n, source=src, real_vectors=n_real, simulator=simulator,
                         mismatches=chk["mismatches"], **tot)
