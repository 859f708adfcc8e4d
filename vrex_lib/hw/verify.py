"""Verify the DRE: simulate each block against the reference, convert to Verilog, replay in Icarus, run the bulk
vectors on the Verilog (Verilator), synthesise. The method is ``docs/DECISIONS.md D86``; the recipe D87.

    python -m vrex_lib.hw verify --out results/hdl [--blocks hcu wtu kvmu] [--size smoke|default]
    vrex_lib.hw.verify.run(Path("results/hdl"), blocks=None, size="default") -> dict

Per block:

1. **Reference check** — the MyHDL model at the paper's sizes runs random vectors and part of the recorded real
   traces of ``data/traces/dre_traces.npz`` (text and video-frame tokens, ``SIZES[size]["real_cap"]`` per source);
   every output is compared with the integer reference of :mod:`vrex_lib.hw.fixedpoint` (the same rules as
   :mod:`vrex_lib.resv`) -> ``vectors``, ``real_vectors``, ``mismatches``.
2. **Verilog check** — the block is converted (``<block>.v``) and a generated self-checking-style testbench
   replays, cycle by cycle, the inputs the MyHDL run applied (``$readmemh``); every output is written each
   cycle and compared with the MyHDL run's outputs -> ``verilog.cycles``, ``verilog.mismatches``.
3. **Bulk Verilog check** — ``SIZES[size]["bulk"]`` vectors per block (every recorded real vector, then random
   ones; 10,000 in ``default``) drive the converted Verilog from a stimulus file under Verilator (Icarus when
   Verilator is absent, with a printed and recorded warning) and every vector is checked against the reference
   (:mod:`vrex_lib.hw.bulk`) -> ``bulk``.
4. **Synthesis** — yosys, ONE fixed recipe (:data:`YOSYS_RECIPE`): generic gates AND/NAND/OR/NOR/XOR/XNOR/MUX
   (+NOT) and flip-flops, memories kept as ``$mem_v2`` cells (not flattened into flip-flops). The logic is at the
   paper's widths and lane counts; the memories are synthesised at reduced depth (``synth_params``) to keep
   yosys fast — their full-size bits are reported analytically in ``memory_bits``.

``summary.json`` schema (version 1), read by the energy/area estimator:

    {"schema": 1, "size": str, "recipe": str, "tools": {"myhdl", "yosys", "iverilog", "verilator"},
     "th_hd": int, "ratio": float, "ratio_q": int,                       # from ReSVConfig unless given
     "verilog_checks": "run" | "skipped (--no-verilog)",
     "bulk_simulator": "verilator" | "icarus" | null, "bulk_warning": str | null,
     "simulator_cycles_per_s": {"myhdl"|"icarus"|"verilator": {<block>: float | null}},
     "blocks": {<name>: {
         "params": {...}, "synth_params": {...},
         "vectors": int, "real_vectors": int, "mismatches": int,          # MyHDL vs reference
         "cycles": int, "sim_cycles_per_s": float,                       # cycles of the checked vectors
         "verilog": {"file": str, "cycles": int, "mismatches": int, "run_s": float,
                     "cycles_per_s": float} | null,                       # Icarus replay of the MyHDL run
         "bulk": {"simulator": str, "vectors": int, "real_vectors": int, "random_vectors": int,
                  "mismatches": int, "cycles": int, "compile_s": float, "run_s": float,
                  "cycles_per_s": float} | null,
         "synth": {"cells": int, "cells_by_type": {type: n}, "flip_flops": int, "memories": int,
                   "memory_bits_synth": int, "seconds": float} | null,
         "cells_by_type": {...}, "flip_flops": int,                       # = synth.*, when synthesised
         "memory_bits": int,                                              # full size (Fig. 10)
         "actions": {...}}},                                              # per-vector activity counts
     "dre": {"memory_bits": int, "memory_bytes": int, "memory_bytes_by_block": {...}, "verilog_compiles": bool,
             "cells": int, "flip_flops": int}}                            # cells/FFs: sum of the blocks
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .. import _io
from ..config import REPO_ROOT, ReSVConfig, VRexCoreConfig
from . import bulk
from . import fixedpoint as fx
from .dre import dre_memory_bytes, make_dre
from .hcu import HCUParams, hcu, hcu_ports, simulate_hcu
from .kvmu import kvmu, kvmu_ports, prefetch_requests, simulate_kvmu
from .wtu import WTUParams, simulate_wtu, wtu, wtu_ports

SCHEMA = 1
BLOCKS = ("hcu", "wtu", "kvmu")
TRACE_FILE = REPO_ROOT / "data" / "traces" / "dre_traces.npz"
YOSYS_RECIPE = ("read_verilog {v}; hierarchy -top {top}; proc; flatten; opt_expr; opt_clean; "
                "opt -nodffe -nosdff; wreduce; peepopt; opt_clean; alumacc; opt -fast; memory -nomap; opt_clean; "
                "techmap; opt -fast; abc -fast -g AND,NAND,OR,NOR,XOR,XNOR,MUX; opt_clean; "
                "tee -q -o {stat} stat -json")
# Problem sizes per run size: (random HCU tokens, random WTU rows, random KVMU selections, Verilog-replay share)
# ``bulk``: vectors per block (HCU tokens, WTU rows, KVMU selections) checked on the converted Verilog by
# :mod:`vrex_lib.hw.bulk` -- every recorded real vector plus random ones up to this count (docs/DECISIONS.md D86).
# ``real_cap``: recorded real vectors per source in the MyHDL check (HCU frames, WTU rows; None = all); the bulk
# check always takes every recorded one (``real_cap`` too in smoke).
SIZES = {"smoke": dict(hcu_tokens=64, wtu_rows=24, kvmu_sel=40, replay=1.0, synth=False, bulk=400,
                       real_cap=(12, 30)),
         "default": dict(hcu_tokens=640, wtu_rows=240, kvmu_sel=400, replay=0.25, synth=True, bulk=10_000,
                         real_cap=(40, 60)),
         "full": dict(hcu_tokens=10240, wtu_rows=10000, kvmu_sel=10000, replay=0.05, synth=True, bulk=100_000,
                      real_cap=(None, None))}


def tools_available() -> dict[str, str | None]:
    return {t: shutil.which(t) for t in ("iverilog", "vvp", "yosys", "verilator")}


class VerifyError(RuntimeError):
    """A bad flag, a missing tool or an unwritable output, found before any simulation."""


def check_writable(out: Path) -> None:
    """Create ``out`` and prove a file can be written there, so an unwritable ``--out`` fails before the simulations."""
    try:
        _io.check_writable_dir(out, "--out")
    except PermissionError as e:
        raise VerifyError(str(e)) from None


# ------------------------------------------------------------------------------------- vectors
def random_hcu_frames(n_tokens: int, rng: np.random.Generator, p: HCUParams, th: int = 7) -> list:
    """Frames of clustered random codes: centres plus a few flipped bits, so joins, ties and opens all occur."""
    frames, left = [], n_tokens
    while left > 0:
        n_old = int(rng.integers(0, min(96, p.depth - p.cur_depth)))
        n_new = int(min(left, rng.integers(1, p.cur_depth + 1)))
        centres = rng.integers(0, 1 << p.code_bits, size=max(1, int(rng.integers(1, 8))), dtype=np.uint64)
        old = np.array([int(centres[rng.integers(len(centres))]) ^ _flips(rng, p.code_bits, 2 * th)
                        for _ in range(n_old)], dtype=np.int64)
        new = np.array([int(centres[rng.integers(len(centres))]) ^ _flips(rng, p.code_bits, 2 * th)
                        for _ in range(n_new)], dtype=np.int64)
        frames.append((old, new))
        left -= n_new
    return frames


def _flips(rng: np.random.Generator, bits: int, most: int) -> int:
    k = int(rng.integers(0, most + 1))
    return int(sum(1 << int(b) for b in rng.choice(bits, size=min(k, bits), replace=False)))


def random_kvmu_selections(n: int, rng: np.random.Generator) -> list:
    """KVMU selections of 1..63 clusters: random selection density, counts 0..5 (empty clusters included)."""
    sels = []
    for _ in range(n):
        C = int(rng.integers(1, 64))
        sels.append((rng.random(C) < rng.random(), rng.integers(0, 6, C)))
    return sels


def random_wtu_rows(n_rows: int, rng: np.random.Generator, n_max: int) -> list:
    """Rows covering the edge cases: uniform, all equal, few levels (ties), softmax-like skew, near-max
    values (accumulator range), zero counts, single cluster."""
    rows = []
    for i in range(n_rows):
        n = 1 if i % 17 == 0 else int(rng.integers(1, min(n_max, 300) + 1))
        kind = i % 6
        if kind == 0:
            w = rng.integers(0, fx.W_MAX + 1, n)
        elif kind == 1:
            w = np.full(n, int(rng.integers(0, fx.W_MAX + 1)))
        elif kind == 2:
            w = rng.integers(0, 4, n) * int(rng.integers(1, 20000))
        elif kind == 3:
            w = fx.quantize_weights(np.exp(-rng.exponential(rng.uniform(0.5, 6), n)))
        elif kind == 4:
            w = rng.integers(fx.W_MAX - 16, fx.W_MAX + 1, n)
        else:
            w = fx.quantize_weights(np.exp(-np.abs(rng.standard_normal(n)) * 4))
        c = rng.integers(0, 64, n)
        if i % 5 == 0:
            c[rng.random(n) < 0.5] = 0
        if i % 11 == 0:
            c = np.full(n, fx.C_MAX)  # accumulator range
        if i % 13 == 0:
            c = np.zeros(n, dtype=np.int64)  # Sum = 0 -> select all
        rows.append((np.asarray(w, dtype=np.int64), np.asarray(c, dtype=np.int64)))
    return rows


def load_traces(path: Path = TRACE_FILE) -> dict | None:
    """Real traces recorded from SmolLM2 keys (``data/make_dre_traces.py``); None when absent."""
    if not Path(path).exists():
        return None
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def trace_sources(tr: dict) -> list[str]:
    """Sources recorded in the trace: ``"text"`` (unprefixed keys) and, in newer files, ``"frame"`` (video frame
    tokens of the default-profile streaming model, keys prefixed ``frame_``)."""
    return [str(s) for s in tr["meta_sources"]] if "meta_sources" in tr else ["text"]


def _key(tr: dict, source: str, name: str) -> np.ndarray:
    if source not in ("text", "frame"):
        raise ValueError(f"trace source {source!r}: choose 'text' or 'frame'")
    key = name if source == "text" else f"frame_{name}"
    if key not in tr:
        raise KeyError(f"{TRACE_FILE} has no {key!r}: regenerate it with `.venv/bin/python data/make_dre_traces.py`")
    return tr[key]


def trace_hcu_frames(tr: dict, max_frames: int | None = None, source: str = "text") -> list:
    """HCU frames of the trace: ``(old codes or None, new codes)`` per recorded (layer, head) frame sequence."""
    frames = []
    starts, firsts, codes = (_key(tr, source, k) for k in ("hcu_frame_start", "hcu_frame_first", "hcu_codes"))
    for i in range(len(starts) - 1 if max_frames is None else min(max_frames, len(starts) - 1)):
        a, b = int(starts[i]), int(starts[i + 1])
        new = codes[a:b]
        frames.append((np.zeros(0, dtype=np.int64) if bool(firsts[i]) else None, new))
    return frames


def trace_wtu_rows(tr: dict, max_rows: int | None = None, source: str = "text") -> list:
    """WTU rows of the trace: ``(weights, counts)`` as 16-bit integers."""
    off, w, c = (_key(tr, source, k) for k in ("wtu_row_start", "wtu_weights", "wtu_counts"))
    n = len(off) - 1 if max_rows is None else min(max_rows, len(off) - 1)
    return [(w[off[i]:off[i + 1]], c[off[i]:off[i + 1]]) for i in range(n)]


def trace_kvmu_selections(tr: dict, source: str = "text") -> list:
    """KVMU inputs of the trace: ``(selected, counts)`` per recorded aggregated selection."""
    st, sel, cnt = (_key(tr, source, k) for k in ("kvmu_start", "kvmu_selected", "kvmu_counts"))
    return [(sel[a:b], cnt[a:b]) for a, b in zip(st[:-1], st[1:])]


def _real(tr: dict | None, fn, cap: int | None) -> tuple[list, list]:
    """Real vectors of every source (``cap`` of each in smoke) and their source tags."""
    if tr is None:
        return [], []
    vecs, tags = [], []
    for src in trace_sources(tr):
        v = fn(tr, source=src)[:cap]
        vecs += v
        tags += [src] * len(v)
    return vecs, tags


# ------------------------------------------------------------------------------------ checkers
def check_hcu(frames: list, th: int, p: HCUParams, record: list | None = None) -> dict:
    t0 = time.perf_counter()
    res = simulate_hcu(frames, th, p, record=record)
    dt = time.perf_counter() - t0
    bad, cycles, state, tokens, cmp_cycles = 0, 0, np.zeros(0, dtype=np.int64), 0, 0
    for (old, new), r in zip(frames, res):
        if old is not None:
            state = np.asarray(old, dtype=np.int64)
        ref, state_after = fx.cluster_ref(new, state, th)
        n_before = [len(state) + len({int(x) for x in ref[:t] if x >= len(state)}) for t in range(len(new))]
        bad += int(np.sum(r.assignment != ref)) + int(r.n_clusters != len(state_after))
        state = state_after
        cycles += r.cycles
        tokens += len(new)
        cmp_cycles += sum(max(1, -(-n // p.lanes)) for n in n_before)
    return dict(vectors=tokens, mismatches=bad, cycles=cycles, sim_seconds=dt, results=res,
                actions=dict(xor_popcount_rows=cmp_cycles, tokens=tokens))


def check_wtu(rows: list, ratio: float, p: WTUParams, record: list | None = None) -> dict:
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


def check_kvmu(sels: list, bpt: int, record: list | None = None) -> dict:
    t0 = time.perf_counter()
    res = simulate_kvmu(sels, bpt, record=record)
    dt = time.perf_counter() - t0
    bad = sum(int(r != prefetch_requests(s, c, bpt)) for (r, _), (s, c) in zip(res, sels))
    return dict(vectors=len(sels), mismatches=bad, cycles=sum(c for _, c in res), sim_seconds=dt, results=res,
                actions=dict(clusters=sum(len(c) for _, c in sels), requests=sum(len(r) for r, _ in res)))


# -------------------------------------------------------------------------------- Verilog replay
def _port_widths(ports: dict) -> dict[str, int]:
    return {k: len(v) if len(v) else 1 for k, v in ports.items()}


def replay_verilog(vfile: Path, top: str, ports: dict, outputs: list[str], record: list, work: Path) -> dict:
    """Replay recorded MyHDL port values on the converted Verilog in Icarus; count cycles whose outputs differ."""
    names = [k for k in ports if k != "clk"]
    widths = _port_widths(ports)
    ins = [k for k in names if k not in outputs]
    pos = {k: i for i, k in enumerate(names)}

    def pack(vals, keys):
        x, off = 0, 0
        for k in keys:
            x |= (int(vals[pos[k]]) & ((1 << widths[k]) - 1)) << off
            off += widths[k]
        return x

    inw = sum(widths[k] for k in ins)
    outw = sum(widths[k] for k in outputs)
    n = len(record)
    (work / "stim.hex").write_text("".join(f"{pack(r, ins):x}\n" for r in record))
    decl = bulk.port_wires(ins, outputs, widths, "cur", 0)
    conns = ", ".join(f".{k}({k})" for k in ["clk"] + names)
    outcat = "{" + ", ".join(reversed(outputs)) + "}"
    tb = f"""`timescale 1ns/10ps
module tb_replay;
reg clk = 0;
reg [{inw - 1}:0] stim [0:{n - 1}];
reg [{inw - 1}:0] cur;
{chr(10).join(decl)}
{top} dut({conns});
integer i, f;
initial begin
  $readmemh("{work / 'stim.hex'}", stim);
  f = $fopen("{work / 'out.hex'}", "w");
  cur = stim[0];
  for (i = 0; i < {n}; i = i + 1) begin
    #5 clk = 1;
    #5 clk = 0;
    #0;
    $fwrite(f, "%h\\n", {outcat});
    if (i + 1 < {n}) cur = stim[i + 1];
  end
  $fclose(f);
  $finish;
end
endmodule
"""
    (work / "tb_replay.v").write_text(tb)
    exe = work / "replay.vvp"
    subprocess.run(["iverilog", "-g2005", "-o", str(exe), str(work / "tb_replay.v"), str(vfile)], check=True,
                   capture_output=True, text=True)
    t0 = time.perf_counter()
    subprocess.run(["vvp", "-n", str(exe)], check=True, capture_output=True, text=True, cwd=work)
    run_s = time.perf_counter() - t0
    got = (work / "out.hex").read_text().split()
    bad = 0
    for j, r in enumerate(record):
        want = pack(r, outputs)
        if j >= len(got) or "x" in got[j].lower() or int(got[j], 16) != want:
            bad += 1
    return dict(cycles=n, mismatches=bad, outputs_bits=outw, run_s=round(run_s, 3),
                cycles_per_s=round(n / run_s, 1) if run_s > 0 else None)


def _convert(inst_fn, ports: dict, params, top: str, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    inst = inst_fn(**ports, p=params) if params is not None else inst_fn(**ports)
    with warnings.catch_warnings():  # unread/undriven top-level port warnings are expected
        warnings.simplefilter("ignore")
        inst.convert(hdl="Verilog", path=str(out), name=top, initial_values=True)
    tbf = out / f"tb_{top}.v"
    if tbf.exists():  # the MyHDL cosimulation wrapper is not used
        tbf.unlink()
    return out / f"{top}.v"


def synthesise(vfile: Path, top: str, work: Path, timeout_s: int = 900) -> dict:
    stat = work / f"{top}.stat.json"
    script = YOSYS_RECIPE.format(v=vfile, top=top, stat=stat)
    t0 = time.perf_counter()
    subprocess.run(["yosys", "-q", "-p", script], check=True, capture_output=True, text=True, timeout=timeout_s)
    d = json.loads(stat.read_text())["design"]
    by = {k: int(v) for k, v in d["num_cells_by_type"].items()}
    return dict(cells=int(d["num_cells"]), cells_by_type=by,
                flip_flops=sum(v for k, v in by.items() if "DFF" in k.upper()),
                memories=sum(v for k, v in by.items() if k.startswith("$mem")),
                seconds=round(time.perf_counter() - t0, 2))


# ------------------------------------------------------------------------------------------ run
OUTPUTS = {
    "hcu": ["busy", "done", "n_cl_out", "res_valid", "res_tok", "res_cluster", "res_new"],
    "wtu": ["sel_rdata", "agg_rdata", "busy", "done", "n_scans"],
    "kvmu": ["req_valid", "req_addr", "req_len", "busy_out"],
}


def run(out: Path, blocks: list[str] | None = None, size: str = "default", seed: int = 0, th: int | None = None,
        ratio: float | None = None, bytes_per_token: int = 256, cfg: VRexCoreConfig | None = None,
        synth: bool | None = None, use_traces: bool = True, return_results: bool = False, verilog: bool = True,
        simulator: str | None = None) -> dict:
    """Verify the blocks and write ``out/summary.json`` and the ``.v`` files; returns the summary.

    ``th`` / ``ratio`` default to :class:`vrex_lib.config.ReSVConfig` (``th_hp``, ``ratio``). ``verilog=False``
    skips the Icarus replay and the bulk Verilog check (recorded as ``summary["verilog_checks"] = "skipped"``);
    with ``verilog=True`` a missing ``iverilog``/``vvp`` is an error raised before any simulation. ``simulator``
    forces the bulk simulator ("verilator" or "icarus"); by default Verilator, else Icarus with a warning
    recorded in ``summary["bulk_warning"]`` and printed.

    ``return_results`` adds ``summary["_results"][block] = {"real": [...], "real_inputs": [...], "real_source":
    [...], "simulator": str}`` (not written to JSON): the per-vector simulation results of the real-trace vectors
    and their source ("text" or "frame", in that order), for notebook 04 — from the bulk Verilog run (every
    recorded vector) when it ran, else from the MyHDL run.
    """
    if size not in SIZES:
        raise ValueError(f"size={size!r}: choose one of {', '.join(SIZES)}")
    blocks = list(blocks or BLOCKS)
    for b in blocks:
        if b not in BLOCKS:
            raise ValueError(f"unknown block {b!r}: choose from {BLOCKS}")
    S = SIZES[size]
    synth = S["synth"] if synth is None else synth
    cfg = cfg or VRexCoreConfig()
    rcfg = ReSVConfig()
    th = rcfg.th_hp if th is None else int(th)
    ratio = rcfg.ratio if ratio is None else float(ratio)
    out = Path(out)
    check_writable(out)
    tools = tools_available()
    have_iv = bool(tools["iverilog"] and tools["vvp"])
    bulk_sim, bulk_warning = None, None
    if verilog:
        if not have_iv:
            raise VerifyError("iverilog/vvp not on PATH: the Verilog replay needs Icarus Verilog. Run `make setup` "
                              "(apt-get install iverilog verilator), or pass --no-verilog to skip the Verilog "
                              "checks (recorded in summary.json)")
        try:
            bulk_sim, bulk_warning = bulk.pick_simulator(simulator)
        except bulk.SimulatorMissing as e:
            raise VerifyError(str(e)) from None
        if bulk_warning:
            warnings.warn(bulk_warning, stacklevel=2)
    else:
        have_iv = False
    brng = np.random.default_rng([seed, 1])  # the bulk vectors' own stream: the MyHDL vectors do not change
    have_yosys = bool(tools["yosys"])
    rng = np.random.default_rng(seed)
    tr = load_traces() if use_traces else None
    rq = fx.quantize_ratio(ratio)
    summary: dict = dict(schema=SCHEMA, size=size, seed=seed, th_hd=th, ratio=ratio, ratio_q=rq,
                         recipe=YOSYS_RECIPE.format(v="<block>.v", top="<block>", stat="<block>.stat.json"),
                         tools=dict(myhdl=_version("myhdl"), yosys=_tool_version(["yosys", "-V"]),
                                    iverilog=_tool_version(["iverilog", "-V"]),
                                    verilator=_tool_version(["verilator", "--version"])),
                         verilog_checks="run" if verilog else "skipped (--no-verilog)",
                         bulk_simulator=bulk_sim, bulk_warning=bulk_warning, blocks={})
    kept: dict = {}
    with tempfile.TemporaryDirectory(prefix="vrex_hdl_") as tmp:
        tmp = Path(tmp)
        for b in blocks:
            work = tmp / b
            work.mkdir()
            rec: list = []
            if b == "hcu":
                p = HCUParams.from_core(cfg)
                sp = HCUParams(p.code_bits, 4 * p.lanes, p.cur_depth, p.lanes)
                frames = random_hcu_frames(S["hcu_tokens"], rng, p, th)
                n_rand = len(frames)
                real, tags = _real(tr, trace_hcu_frames, S["real_cap"][0])
                k = max(1, int(len(frames) * S["replay"]))
                # the replayed part (random, recorded) first, then the rest and the real traces
                r1 = check_hcu(frames[:k], th, p, record=rec)
                r2 = check_hcu(frames[k:] + real, th, p) if len(frames) > k or real else None
                parts = [r for r in (r1, r2) if r]
                ports_fn, inst_fn = hcu_ports, hcu
                real_vectors = sum(len(n) for _, n in real)
                bulk_real, bulk_tags = _real(tr, trace_hcu_frames, S["real_cap"][0] if size == "smoke" else None)
                n_real = sum(len(n) for _, n in bulk_real)
                bulk_vecs = bulk_real + random_hcu_frames(max(0, S["bulk"] - n_real), brng, p, th)
                bulk_kw = dict(th=th, p=p)
            elif b == "wtu":
                p = WTUParams.from_core(cfg)
                sp = WTUParams(16 * p.lanes, p.lanes, p.n_buckets)
                rows = random_wtu_rows(S["wtu_rows"], rng, p.n_max)
                real, tags = _real(tr, trace_wtu_rows, S["real_cap"][1])
                k = max(1, int(len(rows) * S["replay"]))
                r1 = check_wtu(rows[:k], ratio, p, record=rec)
                r2 = check_wtu(rows[k:] + real, ratio, p) if len(rows) > k or real else None
                parts = [r for r in (r1, r2) if r]
                ports_fn, inst_fn = wtu_ports, wtu
                real_vectors = len(real)
                bulk_real, bulk_tags = _real(tr, trace_wtu_rows, S["real_cap"][1] if size == "smoke" else None)
                n_real = len(bulk_real)
                bulk_vecs = bulk_real + random_wtu_rows(max(0, S["bulk"] - n_real), brng, p.n_max)
                bulk_kw = dict(ratio_q=rq, p=p)
            else:
                p, sp = None, None
                sels = random_kvmu_selections(S["kvmu_sel"], rng)
                real, tags = _real(tr, trace_kvmu_selections, None)
                k = max(1, int(len(sels) * S["replay"]))
                r1 = check_kvmu(sels[:k], bytes_per_token, record=rec)
                r2 = check_kvmu(sels[k:] + real, bytes_per_token) if len(sels) > k or real else None
                parts = [r for r in (r1, r2) if r]
                ports_fn, inst_fn = kvmu_ports, kvmu
                real_vectors = len(real)
                bulk_real, bulk_tags = _real(tr, trace_kvmu_selections, None)
                n_real = len(bulk_real)
                bulk_vecs = bulk_real + random_kvmu_selections(max(0, S["bulk"] - n_real), brng)
                bulk_kw = dict(bytes_per_token=bytes_per_token)
            allres = [x for r in parts for x in r["results"]]
            kept[b] = dict(real=allres[len(allres) - len(real):] if real else [], real_inputs=real,
                           real_source=tags, simulator="myhdl")
            cyc = sum(r["cycles"] for r in parts)
            secs = sum(r["sim_seconds"] for r in parts)
            actions: dict = {}
            for r in parts:
                for a, v in r["actions"].items():
                    actions[a] = actions.get(a, 0) + v
            entry = dict(params=asdict(p) if p is not None else {}, synth_params=asdict(sp) if sp is not None else {},
                         vectors=sum(r["vectors"] for r in parts), real_vectors=real_vectors,
                         mismatches=sum(r["mismatches"] for r in parts), cycles=cyc,
                         sim_cycles_per_s=round(cyc / secs, 1) if secs else None, verilog=None, synth=None,
                         memory_bits=p.memory_bits if p is not None else 0, actions=actions)
            # Verilog: convert at the simulated (paper) size and replay the recorded cycles in Icarus.
            ports = ports_fn(p) if p is not None else ports_fn()
            vfile = _convert(inst_fn, ports, p, b, work / "sim")
            shutil.copy(vfile, out / f"{b}.v")
            if have_iv:
                entry["verilog"] = dict(file=f"{b}.v", **replay_verilog(vfile, b, ports, OUTPUTS[b], rec, work))
            entry["bulk"] = None
            if bulk_sim is not None:
                bk = bulk.run_block(b, bulk_vecs, vfile, work / "bulk", bulk_sim, **bulk_kw)
                bres = bk.pop("_results")
                entry["bulk"] = dict(bk, real_vectors=n_real, random_vectors=bk["vectors"] - n_real)
                # the notebook's per-vector results of the real traces: all of them, from the Verilog run
                kept[b] = dict(real=bres[:len(bulk_real)], real_inputs=bulk_real, real_source=bulk_tags,
                               simulator=bulk_sim)
            if synth and have_yosys:
                sports = ports_fn(sp) if sp is not None else ports_fn()
                svfile = _convert(inst_fn, sports, sp, b, work / "synth")
                shutil.copy(svfile, out / f"{b}_synth.v")
                entry["synth"] = synthesise(svfile, b, work)
                entry["synth"]["memory_bits_synth"] = sp.memory_bits if sp is not None else 0
                # mirrored at the block level for the estimator (vrex_lib.estimate.synth reads these keys)
                entry["cells_by_type"] = entry["synth"]["cells_by_type"]
                entry["flip_flops"] = entry["synth"]["flip_flops"]
            summary["blocks"][b] = entry
        # The DRE top level at the paper's sizes: converted and compiled by Icarus (its blocks are checked above).
        fn, dports = make_dre(HCUParams.from_core(cfg), WTUParams.from_core(cfg))
        dv = _convert(lambda **kw: fn(**kw), dports, None, "dre", tmp / "dre")
        shutil.copy(dv, out / "dre.v")
        compiles = None
        if have_iv:
            r = subprocess.run(["iverilog", "-g2005", "-o", str(tmp / "dre.vvp"), str(dv)], capture_output=True,
                               text=True)
            compiles = r.returncode == 0
    summary["simulator_cycles_per_s"] = simulator_speeds(summary)
    mem = HCUParams.from_core(cfg).memory_bits + WTUParams.from_core(cfg).memory_bits
    summary["dre"] = dict(memory_bits=mem, memory_bytes=mem // 8, verilog_compiles=compiles,
                          memory_bytes_by_block=dre_memory_bytes(cfg),
                          cells=sum((e["synth"] or {}).get("cells", 0) for e in summary["blocks"].values()),
                          flip_flops=sum((e["synth"] or {}).get("flip_flops", 0)
                                         for e in summary["blocks"].values()),
                          note="DRE = HCU + WTU + KVMU side by side (dre.py); memories of Fig. 10")
    _io.write_json(out / "summary.json", summary)
    if return_results:
        summary["_results"] = kept
    return summary


def simulator_speeds(summary: dict) -> dict[str, dict[str, float | None]]:
    """Simulated clock cycles per wall-clock second of each simulator, per block: MyHDL (the reference check),
    Icarus (the replay of the MyHDL run's cycles, or the bulk run when it fell back to Icarus) and Verilator
    (the bulk run). None where that simulator did not run."""
    out: dict = {"myhdl": {}, "icarus": {}, "verilator": {}}
    for b, e in summary["blocks"].items():
        out["myhdl"][b] = e.get("sim_cycles_per_s")
        out["icarus"][b] = (e.get("verilog") or {}).get("cycles_per_s")
        out["verilator"][b] = None
        bk = e.get("bulk") or {}
        if bk.get("simulator") == "verilator":
            out["verilator"][b] = bk["cycles_per_s"]
        elif bk.get("simulator") == "icarus":
            out["icarus"][b] = bk["cycles_per_s"]
    return out


def mismatches_total(summary: dict) -> int:
    """Every mismatch of a summary: MyHDL vs reference, Verilog replay vs MyHDL, bulk Verilog vs reference."""
    return sum(e["mismatches"] + ((e.get("verilog") or {}).get("mismatches") or 0)
               + ((e.get("bulk") or {}).get("mismatches") or 0) for e in summary["blocks"].values())


def run_isolated(out: Path, **kw) -> dict:
    """:func:`run` (with ``return_results=True``) in a fresh spawned interpreter, returning its summary.

    MyHDL elaborates and simulates several times slower inside a Jupyter kernel than in a plain interpreter
    (measured ~4x on the smoke size); notebooks call this instead of :func:`run`.
    """
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(_run_with_results, (Path(out),), kw)


def _run_with_results(out: Path, **kw) -> dict:
    return run(out, return_results=True, **kw)


def _version(mod: str) -> str:
    try:
        from importlib.metadata import version

        return version(mod)
    except Exception:  # pragma: no cover
        return "?"


def _tool_version(cmd: list[str]) -> str | None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except Exception:
        return None
