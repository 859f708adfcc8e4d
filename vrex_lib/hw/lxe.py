"""Verify, synthesise and measure the LXE's RTL (the DPE's MAC tree, the 1 x 64 VPE) -> ``summary.json`` for the
energy/area estimator (``docs/DECISIONS.md D286-D288``).

    python -m vrex_lib.hw lxe --out results/hdl/lxe [--size smoke|default|full] [--seed 0]
    vrex_lib.hw.lxe.run(Path("results/hdl/lxe"), size="default") -> dict     # cached under its inputs key

Per block (records ``blocks.DPE`` / ``blocks.VPE``):

1. **MyHDL check** -- random and real vectors on the MyHDL model, every output against the bit-exact reference
   (:mod:`vrex_lib.hw.fpref`); the run is recorded for
2. **the Icarus replay** -- the converted Verilog replays it cycle by cycle and must reproduce every output;
3. **bulk** -- ``SIZES[size]["bulk"]`` vectors (real ones, capped per source, then random) on the converted Verilog
   under Verilator (Icarus in ``smoke`` or when Verilator is absent), each checked against the reference. The same
   compiled testbench first runs the **activity vectors** (real operands only, an equal share per source) with a
   VCD: its register toggles must equal those counted from the values the reference says the registers hold;
4. **synthesis by units** -- every identical combinational unit (:mod:`vrex_lib.hw.lxe_units`) once, with the
   DRE's yosys recipe (D87) plus ``write_json``; each netlist is cached by the SHA-256 of its Verilog under
   ``<out>/netlists/``;
5. **gate-level activity** -- each unit's netlist evaluated on the input streams of all its instances over the
   activity vectors (:mod:`vrex_lib.hw.gates`): its outputs must equal the reference's (an equivalence check of the
   netlist on those vectors); toggles by cell type and by net fan-out. The random part of the bulk vectors gives
   the same counts for random operands (a sensitivity).

The summary (schema ``vrex.hw.lxe/1``) is written atomically; a second call with the same inputs (RTL and harness
code, fixture, sizes, seed, tools) reads it instead of rerunning.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path

import numpy as np

from .. import _io
from ..config import VRexCoreConfig, arg_name
from . import activity, gates, lxe_units
from .blocks import LXE_BLOCKS, BlockSpec, spec
from .bulk import check_runs
from .harness import SimulatorMissing, convert, pick_simulator, replay
from .lxe_vectors import OPERAND_FILE, load_operands
from .verify import YOSYS_RECIPE, VerifyError, check_writable, publish

SCHEMA = "vrex.hw.lxe/1"
SUMMARY = "summary.json"
#: Vector counts per size: ``myhdl`` vectors of the MyHDL check (half real), ``bulk`` vectors on the Verilog
#: (``bulk_real`` real ones per source at most, then random), ``activity`` real vectors per source of the
#: activity run, ``simulator`` of the bulk run (None: Verilator, Icarus with a warning where it is absent).
#: ``default`` runs 3,000 vectors per block in Icarus (about 40 s) rather than 10,000 in Verilator, whose two
#: compiles alone take about two CPU-minutes (about 90 CPU-seconds saved, docs/DECISIONS.md D286); ``10k`` is that
#: Verilator run (`pytest --lxe-10k`). The random part (>= the activity vectors) feeds the
#: random-operand activity.
SIZES = {"smoke": dict(myhdl=4, bulk=dict(dpe=120, vpe=60), bulk_real=10, activity=dict(dpe=27, vpe=20),
                       simulator="icarus"),
         "default": dict(myhdl=6, bulk=dict(dpe=3000, vpe=3000), bulk_real=200, activity=dict(dpe=216, vpe=160),
                         simulator="icarus"),
         "10k": dict(myhdl=6, bulk=dict(dpe=10_000, vpe=10_000), bulk_real=1000, activity=dict(dpe=216, vpe=160),
                     simulator=None),
         "full": dict(myhdl=24, bulk=dict(dpe=100_000, vpe=100_000), bulk_real=None, activity=dict(dpe=1000, vpe=800),
                      simulator=None)}
_CODE = ("fpref.py", "bf16.py", "dpe.py", "vpe.py", "vpe_programs.py", "lxe_vectors.py", "lxe_units.py", "gates.py",
         "lxe.py", "harness.py", "bulk.py", "blocks.py", "_sim.py", "activity.py")
STREAMS = {"dpe": (lxe_units.dpe_streams, lxe_units.dpe_register_toggles),
           "vpe": (lxe_units.vpe_streams, lxe_units.vpe_register_toggles)}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tool(cmd: list[str]) -> str | None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def tools() -> dict[str, str | None]:
    return dict(myhdl=version("myhdl"), yosys=_tool(["yosys", "-V"]), iverilog=_tool(["iverilog", "-V"]),
                verilator=_tool(["verilator", "--version"]))


def inputs_key(size: str, seed: int, cfg: VRexCoreConfig, simulator: str, tool_versions: dict) -> str:
    """What decides a summary: the RTL, reference, vectors and harness code, the operand fixture, the sizes, the
    seed, the core configuration, the simulator and the tools."""
    return _io.reuse_key(code=["vrex_lib.hw.lxe", *(f"vrex_lib.hw.{f.removesuffix('.py')}" for f in _CODE)],
                         inputs=[OPERAND_FILE] if OPERAND_FILE.exists() else [],
                         args=dict(size=SIZES[size], seed=int(seed), cfg=asdict(cfg), simulator=simulator),
                         schema=SCHEMA, tools=tool_versions, recipe=YOSYS_RECIPE)


def cached(out: Path, key: str) -> dict | None:
    """The summary in ``out`` when it was made with inputs ``key`` and every netlist it names is still there (the
    estimates read them back), else None."""
    try:
        d = json.loads((Path(out) / SUMMARY).read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(d, dict) and d.get("schema") == SCHEMA and d.get("inputs_key") == key):
        return None
    names = [u.get("netlist") for b in d.get("blocks", {}).values() for u in b.get("units", {}).values()]
    return d if all(n and (Path(out) / "netlists" / n).is_file() for n in names) else None


# -------------------------------------------------------------------------------------------- synthesis
def synthesise_unit(name: str, netdir: Path, work: Path, timeout_s: int = 900) -> dict:
    """One unit through yosys (D87 recipe + ``write_json``), cached in ``netdir`` by its Verilog's SHA-256."""
    u = lxe_units.UNITS[name]
    vfile = convert(u.make, u.signals(), name, work / name)
    sha = _sha(vfile.read_bytes() + YOSYS_RECIPE.encode())[:16]
    net_f, stat_f = netdir / f"{name}.{sha}.json", netdir / f"{name}.{sha}.stat.json"
    t0 = time.perf_counter()
    if not (net_f.is_file() and stat_f.is_file()):
        tmp_net, tmp_stat = work / f"{name}.json", work / f"{name}.stat.json"
        script = YOSYS_RECIPE.format(v=vfile, top=name, stat=tmp_stat) + f"; write_json {tmp_net}"
        subprocess.run(["yosys", "-q", "-p", script], check=True, capture_output=True, text=True, timeout=timeout_s)
        _io.write_bytes(net_f, tmp_net.read_bytes())
        _io.write_bytes(stat_f, tmp_stat.read_bytes())
    d = json.loads(stat_f.read_text())["design"]
    by = {k: int(v) for k, v in d["num_cells_by_type"].items()}
    return dict(cells=int(d["num_cells"]), cells_by_type=by, netlist=net_f.name, verilog_sha=sha,
                synth_s=round(time.perf_counter() - t0, 2))


def load_netlist(out: Path, entry: dict) -> gates.Netlist:
    """The cached netlist of one unit entry of a summary."""
    mod = json.loads((Path(out) / "netlists" / entry["netlist"]).read_text())["modules"]
    return gates.Netlist.from_yosys(next(iter(mod.values())))


def unit_activity(net: gates.Netlist, streams: tuple[dict, int, dict]) -> dict:
    """Toggle activity of one unit's netlist on its instances' streams, and whether its outputs equal the
    reference's on every vector (the netlist computes what the RTL does)."""
    ins, segments, want = streams
    got, act = net.evaluate(ins, segments)
    ok = all(np.array_equal(got[k].astype(np.uint64), np.asarray(v).astype(np.uint64)) for k, v in want.items())
    return dict(act.as_dict(), equivalent=bool(ok))


# -------------------------------------------------------------------------------------------- per block
def _vectors(b: BlockSpec, S: dict, ops: dict, p, rng: np.random.Generator) -> dict:
    """The block's vector sets: MyHDL (half real), activity (real, per source), bulk (real capped + random)."""
    real_act, tags_act = b.real(ops, S["activity"][b.name], p)
    real_bulk, _ = b.real(ops, S["bulk_real"], p)
    n_bulk = S["bulk"][b.name]
    real_bulk = real_bulk[:n_bulk]
    rnd = b.random(max(0, n_bulk - len(real_bulk)), rng, p, None)
    k = S["myhdl"]
    small = real_act[:k] + b.random(k, rng, p, None)
    return dict(myhdl=small, n_myhdl_real=len(real_act[:k]), activity=real_act,
                activity_sources={t: tags_act.count(t) for t in dict.fromkeys(tags_act)},
                bulk=real_bulk + rnd, n_bulk_real=len(real_bulk), random=rnd[:len(real_act)])


def _verify(b: BlockSpec, V: dict, p, work: Path, simulator: str, staged: dict) -> tuple[dict, dict]:
    """MyHDL check, Icarus replay, activity + bulk runs: (summary entries, the activity run's VCD counts)."""
    record: list = []
    chk = b.check(V["myhdl"], None, p, record)
    ports = b.ports(p)
    vfile = convert(lambda P: b.make(P, p), ports, b.name, work / "v")
    staged[f"{b.name}.v"] = vfile
    rep = replay(vfile, b.name, ports, b.protocol.outputs, record, work / "replay")
    vcd = work / "activity.vcd"
    act_run, bulk = check_runs(b, [(V["activity"], vcd), (V["bulk"], None)], None, p, vfile, work / "bulk", simulator)
    counts = activity.count_toggles(vcd)
    flops = activity.flop_names(vfile.read_text())
    vcd.unlink()
    entry = dict(myhdl=dict(vectors=chk["vectors"], real_vectors=V["n_myhdl_real"], mismatches=chk["mismatches"],
                            cycles=chk["cycles"], sim_cycles_per_s=round(chk["cycles"] / chk["sim_seconds"], 1)),
                 replay=dict(simulator="icarus", cycles=rep["cycles"], mismatches=rep["mismatches"]),
                 bulk={**{k: v for k, v in bulk.items() if k != "_results"}, "real_vectors": V["n_bulk_real"],
                       "random_vectors": bulk["vectors"] - V["n_bulk_real"]},
                 activity_run=dict(simulator=simulator, vectors=act_run["vectors"], mismatches=act_run["mismatches"]))
    vcd_flops = dict(bits=sum(w for n, (w, _) in counts.items() if n in flops),
                     toggles=sum(t for n, (_, t) in counts.items() if n in flops))
    return entry, vcd_flops


def _measure(name: str, V: dict, p, netdir: Path, work: Path, vcd_flops: dict) -> dict:
    """Synthesis by units, gate-level activity on real (and random) operands, register toggles."""
    streams_fn, regs_fn = STREAMS[name]
    comp = lxe_units.composition(name, p)
    real, rnd = streams_fn(V["activity"]), streams_fn(V["random"]) if V["random"] else None
    units = {}
    for u, count in comp.items():
        if not count:
            continue
        syn = synthesise_unit(u, netdir, work / "synth")
        net = load_netlist(netdir.parent, syn)
        units[u] = dict(count=count, **syn, activity=unit_activity(net, real[u]),
                        random_activity=unit_activity(net, rnd[u]) if rnd else None)
    regs = regs_fn(V["activity"], p)
    ref_toggles = sum(t for _, t in regs.values())
    extra = dict(level_toggles=lxe_units.dpe_level_toggles(V["activity"])) if name == "dpe" else {}
    return dict(units=units, **extra, registers={k: dict(bits=b_, toggles=t) for k, (b_, t) in regs.items()},
                activity=dict(vectors=len(V["activity"]), sources=V["activity_sources"],
                              vcd_flop_bits=vcd_flops["bits"], vcd_flop_toggles=vcd_flops["toggles"],
                              reference_flop_toggles=ref_toggles,
                              registers_match_vcd=bool(ref_toggles == vcd_flops["toggles"])))


def _block(name: str, S: dict, ops: dict, cfg: VRexCoreConfig, seed: int, out: Path, work: Path, simulator: str,
           staged: dict) -> dict:
    b = spec(name)
    p = b.params(cfg)
    rng = np.random.default_rng([seed, LXE_BLOCKS.index(name)])
    V = _vectors(b, S, ops, p, rng)
    t0 = time.perf_counter()
    entry, vcd_flops = _verify(b, V, p, work, simulator, staged)
    t1 = time.perf_counter()
    meas = _measure(name, V, p, out / "netlists", work, vcd_flops)
    return dict(params=asdict(p), latency=p.latency, **entry, **meas,
                seconds=dict(verify=round(t1 - t0, 1), synth_and_activity=round(time.perf_counter() - t1, 1)))


def check_inputs(size: str, seed: int) -> None:
    if size not in SIZES:
        raise VerifyError(f"{arg_name('--size')} {size!r}: choose one of {', '.join(SIZES)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise VerifyError(f"{arg_name('--seed')} {seed!r}: a seed is an integer >= 0 (e.g. --seed 0)")


def _simulator(size: str, simulator: str | None) -> tuple[str, str | None]:
    for t in ("iverilog", "vvp", "yosys"):
        if shutil.which(t) is None:
            raise VerifyError(f"{t} is not on PATH: the LXE RTL needs Icarus Verilog and yosys; run `make setup` "
                              "(apt-get install iverilog verilator yosys)")
    try:
        return pick_simulator(simulator or SIZES[size]["simulator"])
    except SimulatorMissing as e:
        raise VerifyError(str(e)) from None


def run(out: Path, size: str = "default", seed: int = 0, cfg: VRexCoreConfig | None = None,
        simulator: str | None = None, force: bool = False) -> dict:
    """Verify, synthesise and measure the DPE and VPE; writes ``out/summary.json`` (and ``dpe.v``, ``vpe.v``,
    ``netlists/``) and returns it, or returns the cached summary of the same inputs (unless ``force``)."""
    check_inputs(size, seed)
    out = Path(out)
    cfg = cfg or VRexCoreConfig()
    S = SIZES[size]
    sim, warning = _simulator(size, simulator)
    tv = tools()
    key = inputs_key(size, seed, cfg, sim, tv)
    hit = None if force else cached(out, key)
    if hit is not None:
        return hit
    check_writable(out)
    ops = load_operands()
    if ops is None:
        raise VerifyError(f"{OPERAND_FILE} is missing: it ships with the repository; regenerate it with "
                          "`.venv/bin/python data/make_lxe_operands.py`")
    t0 = time.perf_counter()
    staged: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="vrex_lxe_") as tmp:
        blocks = {n: _block(n, S, ops, cfg, seed, out, Path(tmp) / n, sim, staged) for n in LXE_BLOCKS}
        files = {n: f.read_bytes() for n, f in staged.items()}
    summary = dict(schema=SCHEMA, inputs_key=key, size=size, seed=seed, simulator=sim, simulator_warning=warning,
                   tools=tv, recipe=YOSYS_RECIPE.format(v="<unit>.v", top="<unit>", stat="<unit>.stat.json")
                   + "; write_json <unit>.json", blocks=blocks, seconds=round(time.perf_counter() - t0, 1))
    files[SUMMARY] = (json.dumps(summary, indent=1) + "\n").encode()
    publish(out, files)
    return summary


def mismatches_total(summary: dict) -> int:
    """Every mismatch of a summary: MyHDL, replay, activity run, bulk; plus each unit whose netlist's outputs
    differed from the reference, and each block whose VCD register toggles differ from the reference's."""
    n = 0
    for e in summary["blocks"].values():
        n += e["myhdl"]["mismatches"] + e["replay"]["mismatches"] + e["activity_run"]["mismatches"]
        n += e["bulk"]["mismatches"] + int(not e["activity"]["registers_match_vcd"])
        n += sum(int(not u["activity"]["equivalent"]) + int(not (u["random_activity"] or {}).get("equivalent", True))
                 for u in e["units"].values())
    return n


def run_isolated(out: Path, **kw) -> dict:
    """:func:`run` in a fresh spawned interpreter (MyHDL runs several times slower inside a Jupyter kernel)."""
    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(run, (Path(out),), kw)


def whole_vs_units(p, work: Path, netdir: Path | None = None) -> dict:
    """Synthesis of one whole (small) DPE tree ``p`` beside the sum of its units by count: combinational cells and
    flip-flops of each, the check that composing by count is what synthesising the whole gives."""
    from .dpe import dpe_ports, dpe_tree
    from .verify import synthesise

    vfile = convert(lambda P: dpe_tree(**P, p=p), dpe_ports(p), "dpe", work / "whole")
    whole = synthesise(vfile, "dpe", work / "whole")
    comb = sum(n for t, n in whole["cells_by_type"].items() if "DFF" not in t.upper())
    units = {u: synthesise_unit(u, netdir or work / "netlists", work / "units")
             for u, k in lxe_units.composition("dpe", p).items() if k}
    parts = sum(units[u]["cells"] * k for u, k in lxe_units.composition("dpe", p).items() if k)
    return dict(whole_cells=comb, whole_flip_flops=whole["flip_flops"], units_cells=parts,
                register_bits=sum(p.register_bits().values()) + 1, whole_s=whole["seconds"])
