"""Verify the DRE: simulate each block against the reference, convert to Verilog, replay in Icarus, run the bulk
vectors on the Verilog (Verilator), synthesise. The method is ``docs/DECISIONS.md D86``; the recipe D87.

    python -m vrex_lib.hw verify --out results/hdl [--blocks hcu wtu kvmu] [--size smoke|default]
    vrex_lib.hw.verify.run(Path("results/hdl"), blocks=None, size="default") -> dict

Per block:

1. **Reference check** — the MyHDL model at the paper's sizes runs random vectors and part of the recorded real
   traces of ``data/traces/dre_traces.npz`` (text and video-frame tokens, ``SIZES[size]["real_cap"]`` per source);
   every output is compared with the integer reference of :mod:`vrex_lib.hw.fixedpoint` (the same rules as
   :mod:`vrex_lib.resv`) -> ``vectors``, ``real_vectors``, ``mismatches``.
2. **Verilog check** — the block is converted (``<block>.v``) and the harness's stimulus testbench
   (:func:`vrex_lib.hw.harness.replay`) replays, cycle by cycle, the inputs the MyHDL run applied; every output is
   logged each cycle and compared with the MyHDL run's outputs -> ``verilog.cycles``, ``verilog.mismatches``.
3. **Bulk Verilog check** — ``SIZES[size]["bulk"]`` vectors per block (every recorded real vector, then random
   ones; 10,000 in ``default``) drive the converted Verilog from a stimulus file under Verilator (Icarus when
   Verilator is absent, with a printed and recorded warning) and every vector is checked against the reference
   (:mod:`vrex_lib.hw.bulk`) -> ``bulk``.
4. **Synthesis** — yosys, ONE fixed recipe (:data:`YOSYS_RECIPE`): generic gates AND/NAND/OR/NOR/XOR/XNOR/MUX
   (+NOT) and flip-flops, memories kept as ``$mem_v2`` cells (not flattened into flip-flops). The logic is at the
   paper's widths and lane counts; the memories are synthesised at reduced depth (``synth_params``) to keep
   yosys fast — their full-size bits are reported analytically in ``memory_bits``.

Each block is one record of :mod:`vrex_lib.hw.blocks`, so :func:`run` is a loop over them. The outputs
(``<block>.v``, ``<block>_synth.v``, ``dre.v``, ``summary.json`` last) are written atomically once every block is
done (``docs/DECISIONS.md D151``).

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

import errno
import json
import multiprocessing as mp
import shutil
import subprocess
import tempfile
import time
import warnings
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from .. import _io
from ..config import ReSVConfig, VRexCoreConfig, arg_name
from .blocks import BLOCKS, BlockSpec, OperatingPoint, spec
from .bulk import check_vectors
from .dre import dre_memory_bytes, make_dre
from .harness import SimulatorMissing, convert, pick_simulator, replay
from .hcu import HCUParams
from .vectors import load_traces
from .wtu import WTUParams

SCHEMA = 1
YOSYS_RECIPE = ("read_verilog {v}; hierarchy -top {top}; proc; flatten; opt_expr; opt_clean; "
                "opt -nodffe -nosdff; wreduce; peepopt; opt_clean; alumacc; opt -fast; memory -nomap; opt_clean; "
                "techmap; opt -fast; abc -fast -g AND,NAND,OR,NOR,XOR,XNOR,MUX; opt_clean; "
                "tee -q -o {stat} stat -json")
# Problem sizes per run size. ``random``: random vectors per block in the MyHDL check (HCU tokens, WTU rows, KVMU
# selections), of which the share ``replay`` is replayed on the Verilog in Icarus. ``bulk``: vectors per block
# checked on the converted Verilog by vrex_lib.hw.bulk -- every recorded real vector plus random ones up to this
# count (docs/DECISIONS.md D86). ``real_cap``: recorded real vectors per source in the MyHDL check (None = all);
# the bulk check takes every recorded one (``real_cap`` too where ``bulk_real_capped``). The run sizes are named
# after the profiles that use them (a profile's record names its size: ``Profile.hardware.verify_size``).
SIZES = {"smoke": dict(random=dict(hcu=64, wtu=24, kvmu=40), replay=1.0, synth=False, bulk=400,
                       real_cap=dict(hcu=12, wtu=30, kvmu=None), bulk_real_capped=True),
         "default": dict(random=dict(hcu=640, wtu=240, kvmu=400), replay=0.25, synth=True, bulk=10_000,
                         real_cap=dict(hcu=40, wtu=60, kvmu=None)),
         "full": dict(random=dict(hcu=10240, wtu=10000, kvmu=10000), replay=0.05, synth=True, bulk=100_000,
                      real_cap=dict(hcu=None, wtu=None, kvmu=None))}


def tools_available() -> dict[str, str | None]:
    return {t: shutil.which(t) for t in ("iverilog", "vvp", "yosys", "verilator")}


class VerifyError(RuntimeError):
    """A bad flag, a missing tool or an unwritable output, found before any simulation (or while writing)."""


def check_writable(out: Path) -> None:
    """Create ``out`` and prove a file can be written there, so an unwritable ``--out`` fails before the simulations."""
    try:
        _io.check_writable_dir(out, arg_name("--out"))
    except PermissionError as e:
        raise VerifyError(str(e)) from None


def check_inputs(size: str, blocks: list[str] | None, seed: int) -> list[str]:
    """The blocks to verify; a VerifyError naming the flag for a bad size, block or seed."""
    if size not in SIZES:
        raise VerifyError(f"{arg_name('--size')} {size!r}: choose one of {', '.join(SIZES)}")
    blocks = list(blocks or BLOCKS)
    for b in blocks:
        if b not in BLOCKS:
            raise VerifyError(f"{arg_name('--blocks')}: unknown block {b!r}: choose from {', '.join(BLOCKS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise VerifyError(f"{arg_name('--seed')} {seed!r}: a seed is an integer >= 0 (e.g. --seed 0)")
    return blocks


def _bulk_simulator(verilog: bool, simulator: str | None, tools: dict) -> tuple[str | None, str | None]:
    """(bulk simulator, warning) when the Verilog checks run; a VerifyError when their tools are missing."""
    if not verilog:
        return None, None
    if not (tools["iverilog"] and tools["vvp"]):
        raise VerifyError("iverilog/vvp not on PATH: the Verilog replay needs Icarus Verilog. Run `make setup` "
                          "(apt-get install iverilog verilator), or pass --no-verilog to skip the Verilog "
                          "checks (recorded in summary.json)")
    try:
        sim, warning = pick_simulator(simulator)
    except SimulatorMissing as e:
        raise VerifyError(str(e)) from None
    if warning:
        warnings.warn(warning, stacklevel=3)
    return sim, warning


# ------------------------------------------------------------------------------------- per block
def _reference_check(b: BlockSpec, S: dict, ctx: OperatingPoint, p, tr: dict | None, rng: np.random.Generator) -> dict:
    """The MyHDL check of one block: random vectors (the first ``replay`` share recorded for the Icarus
    replay), then the rest and the recorded real vectors."""
    rnd = b.random(S["random"][b.name], rng, p, ctx)
    real, tags = b.real(tr, S["real_cap"][b.name])
    k = max(1, int(len(rnd) * S["replay"]))
    record: list = []
    parts = [b.check(rnd[:k], ctx, p, record)]
    if len(rnd) > k or real:
        parts.append(b.check(rnd[k:] + real, ctx, p, None))
    allres = [x for r in parts for x in r["results"]]
    actions: dict = {}
    for r in parts:
        for a, v in r["actions"].items():
            actions[a] = actions.get(a, 0) + v
    cyc, secs = sum(r["cycles"] for r in parts), sum(r["sim_seconds"] for r in parts)
    entry = dict(vectors=sum(r["vectors"] for r in parts), real_vectors=b.count(real),
                 mismatches=sum(r["mismatches"] for r in parts), cycles=cyc,
                 sim_cycles_per_s=round(cyc / secs, 1) if secs else None, actions=actions)
    kept = dict(real=allres[len(allres) - len(real):] if real else [], real_inputs=real, real_source=tags,
                simulator="myhdl")
    return dict(entry=entry, kept=kept, record=record)


def _bulk_check(b: BlockSpec, S: dict, size: str, ctx: OperatingPoint, p, tr: dict | None, rng: np.random.Generator,
                vfile: Path, work: Path, simulator: str) -> tuple[dict, dict]:
    """The bulk Verilog check of one block: (summary entry, the per-vector results of the real vectors)."""
    real, tags = b.real(tr, S["real_cap"][b.name] if S.get("bulk_real_capped") else None)
    n_real = b.count(real)
    vecs = real + b.random(max(0, S["bulk"] - n_real), rng, p, ctx)
    bk = check_vectors(b, vecs, ctx, p, vfile, work, simulator)
    res = bk.pop("_results")
    entry = dict(bk, real_vectors=n_real, random_vectors=bk["vectors"] - n_real)
    return entry, dict(real=res[:len(real)], real_inputs=real, real_source=tags, simulator=simulator)


def _verify_block(b: BlockSpec, *, S: dict, size: str, ctx: OperatingPoint, cfg: VRexCoreConfig, tr: dict | None,
                  rng: np.random.Generator, brng: np.random.Generator, work: Path, bulk_sim: str | None,
                  synth: bool, staged: dict[str, Path]) -> tuple[dict, dict]:
    """Reference check, conversion, Icarus replay, bulk vectors and synthesis of one block: (entry, kept).
    The converted files go into ``staged`` (published to ``out`` only when the whole run succeeds)."""
    p = b.params(cfg)
    sp = b.synth_params(p)
    ref = _reference_check(b, S, ctx, p, tr, rng)
    entry = dict(params=asdict(p) if p is not None else {}, synth_params=asdict(sp) if sp is not None else {},
                 **{k: ref["entry"][k] for k in ("vectors", "real_vectors", "mismatches", "cycles",
                                                  "sim_cycles_per_s")},
                 verilog=None, synth=None, memory_bits=p.memory_bits if p is not None else 0,
                 actions=ref["entry"]["actions"], bulk=None)
    kept = ref["kept"]
    # Verilog: converted at the simulated (paper) size, then the recorded MyHDL cycles replayed in Icarus.
    ports = b.ports(p)
    vfile = convert(lambda P: b.make(P, p), ports, b.name, work / "sim")
    staged[f"{b.name}.v"] = vfile
    if bulk_sim is not None:
        entry["verilog"] = dict(file=f"{b.name}.v", **replay(vfile, b.name, ports, b.protocol.outputs,
                                                             ref["record"], work / "replay"))
        entry["bulk"], kept = _bulk_check(b, S, size, ctx, p, tr, brng, vfile, work / "bulk", bulk_sim)
    if synth:
        svfile = convert(lambda P: b.make(P, sp), b.ports(sp), b.name, work / "synth")
        staged[f"{b.name}_synth.v"] = svfile
        entry["synth"] = synthesise(svfile, b.name, work)
        entry["synth"]["memory_bits_synth"] = sp.memory_bits if sp is not None else 0
        # mirrored at the block level for the estimator (vrex_lib.estimate.synth reads these keys)
        entry["cells_by_type"] = entry["synth"]["cells_by_type"]
        entry["flip_flops"] = entry["synth"]["flip_flops"]
    return entry, kept


def synthesise(vfile: Path, top: str, work: Path, timeout_s: int = 900) -> dict:
    """yosys with :data:`YOSYS_RECIPE`: cell counts by type, flip-flops and memories of ``top``."""
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
def _dre_top(cfg: VRexCoreConfig, work: Path, icarus: bool, staged: dict[str, Path]) -> bool | None:
    """The DRE top level at the paper's sizes, converted and (with Icarus) compiled; its blocks are checked
    one by one."""
    fn, dports = make_dre(HCUParams.from_core(cfg), WTUParams.from_core(cfg))
    dv = convert(lambda P: fn(**P), dports, "dre", work)
    staged["dre.v"] = dv
    if not icarus:
        return None
    r = subprocess.run(["iverilog", "-g2005", "-o", str(work / "dre.vvp"), str(dv)], capture_output=True, text=True)
    return r.returncode == 0


def publish(out: Path, files: dict[str, bytes]) -> None:
    """Write each output atomically (``vrex_lib._io``), in order; a failure (a full disk) is a VerifyError naming
    the file, and the file keeps its previous content."""
    for name, data in files.items():
        try:
            _io.write_bytes(out / name, data)
        except OSError as e:
            why = "the disk is full" if e.errno == errno.ENOSPC else (e.strerror or str(e))
            raise VerifyError(f"cannot write {out / name}: {why}; free space there or choose another "
                              f"{arg_name('--out')} (this run's outputs were not all written)") from None


def _summary_head(size: str, seed: int, ctx: OperatingPoint, verilog: bool, bulk_sim: str | None,
                  bulk_warning: str | None) -> dict:
    return dict(schema=SCHEMA, size=size, seed=seed, th_hd=ctx.th, ratio=ctx.ratio, ratio_q=ctx.ratio_q,
                recipe=YOSYS_RECIPE.format(v="<block>.v", top="<block>", stat="<block>.stat.json"),
                tools=dict(myhdl=_version("myhdl"), yosys=_tool_version(["yosys", "-V"]),
                           iverilog=_tool_version(["iverilog", "-V"]),
                           verilator=_tool_version(["verilator", "--version"])),
                verilog_checks="run" if verilog else "skipped (--no-verilog)",
                bulk_simulator=bulk_sim, bulk_warning=bulk_warning, blocks={})


def _dre_summary(cfg: VRexCoreConfig, blocks: dict, compiles: bool | None) -> dict:
    mem = HCUParams.from_core(cfg).memory_bits + WTUParams.from_core(cfg).memory_bits
    return dict(memory_bits=mem, memory_bytes=mem // 8, verilog_compiles=compiles,
                memory_bytes_by_block=dre_memory_bytes(cfg),
                cells=sum((e["synth"] or {}).get("cells", 0) for e in blocks.values()),
                flip_flops=sum((e["synth"] or {}).get("flip_flops", 0) for e in blocks.values()),
                note="DRE = HCU + WTU + KVMU side by side (dre.py); memories of Fig. 10")


def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
            + "\n").encode()


def run(out: Path, blocks: list[str] | None = None, size: str = "default", seed: int = 0, th: int | None = None,
        ratio: float | None = None, bytes_per_token: int = 256, cfg: VRexCoreConfig | None = None,
        synth: bool | None = None, use_traces: bool = True, return_results: bool = False, verilog: bool = True,
        simulator: str | None = None) -> dict:
    """Verify the blocks and write ``out/summary.json`` and the ``.v`` files; returns the summary.

    ``th`` / ``ratio`` default to :class:`vrex_lib.config.ReSVConfig` (``th_hp``, ``ratio``). ``verilog=False``
    skips the Icarus replay and the bulk Verilog check (recorded as ``summary["verilog_checks"] = "skipped"``);
    with ``verilog=True`` a missing ``iverilog``/``vvp`` is an error raised before any simulation. ``simulator``
    forces the bulk simulator ("verilator" or "icarus"); by default Verilator, else Icarus with a warning
    recorded in ``summary["bulk_warning"]`` and printed. Every output is written atomically once every block is
    done (summary.json last), so a failed run leaves the previous outputs as they were.

    ``return_results`` adds ``summary["_results"][block] = {"real": [...], "real_inputs": [...], "real_source":
    [...], "simulator": str}`` (not written to JSON): the per-vector simulation results of the real-trace vectors
    and their source ("text" or "frame", in that order), for notebook 04 — from the bulk Verilog run (every
    recorded vector) when it ran, else from the MyHDL run.
    """
    blocks = check_inputs(size, blocks, seed)
    S = SIZES[size]
    cfg = cfg or VRexCoreConfig()
    rcfg = ReSVConfig()
    ctx = OperatingPoint(th=rcfg.th_hp if th is None else int(th),
                         ratio=rcfg.th_r_wics if ratio is None else float(ratio),
                  bytes_per_token=bytes_per_token)
    out = Path(out)
    check_writable(out)
    tools = tools_available()
    bulk_sim, bulk_warning = _bulk_simulator(verilog, simulator, tools)
    synth = bool((S["synth"] if synth is None else synth) and tools["yosys"])
    rng = np.random.default_rng(seed)
    brng = np.random.default_rng([seed, 1])  # the bulk vectors' own stream: the MyHDL vectors do not change
    tr = load_traces() if use_traces else None
    summary = _summary_head(size, seed, ctx, verilog, bulk_sim, bulk_warning)
    kept: dict = {}
    staged: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="vrex_hdl_") as tmp:
        try:
            for name in blocks:
                summary["blocks"][name], kept[name] = _verify_block(
                    spec(name), S=S, size=size, ctx=ctx, cfg=cfg, tr=tr, rng=rng, brng=brng, work=Path(tmp) / name,
                    bulk_sim=bulk_sim, synth=synth, staged=staged)
            compiles = _dre_top(cfg, Path(tmp) / "dre", bulk_sim is not None, staged)
            files = {name: f.read_bytes() for name, f in staged.items()}
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise VerifyError(f"the scratch folder {tmp} is full ({e.strerror}): free space there or point TMPDIR "
                              f"at a larger disk; nothing was written to {out}") from None
    summary["simulator_cycles_per_s"] = simulator_speeds(summary)
    summary["dre"] = _dre_summary(cfg, summary["blocks"], compiles)
    files["summary.json"] = _json_bytes(summary)
    publish(out, files)
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
    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(_run_with_results, (Path(out),), kw)


def _run_with_results(out: Path, **kw) -> dict:
    return run(out, return_results=True, **kw)


def _version(mod: str) -> str:
    try:
        return version(mod)
    except PackageNotFoundError:  # pragma: no cover
        return "?"


def _tool_version(cmd: list[str]) -> str | None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
