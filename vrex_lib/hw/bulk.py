"""Bulk verification of the converted Verilog: many vectors, driven from a file, checked against the reference.

MyHDL simulates the DRE blocks at a few hundred cycles per second, too slow for ten thousand vectors per block
inside notebook 04. Here the Verilog that MyHDL converted (``<block>.v``) runs under a compiled simulator —
Verilator, or Icarus Verilog when Verilator is absent (:func:`pick_simulator`) — with one generic testbench:

* Python turns the vectors into a stimulus file: one line per clock cycle holding every input port of the block
  (the same port protocol as the MyHDL testbenches of ``hcu.py``, ``wtu.py``, ``kvmu.py``) plus two flags,
  LOG (write the outputs after this cycle) and WAIT (hold these inputs and clock until ``done`` rises);
* the testbench (:func:`testbench_verilog`) streams the file with ``$fscanf``, clocks the block and writes
  ``<line> <cycle> <outputs>`` whenever LOG is set or the block's strobe output is high (``res_valid``/``done``
  for the HCU, ``done`` for the WTU, ``req_valid`` for the KVMU), and ``w <line> <cycles>`` after each WAIT;
* Python decodes that log into per-vector results and compares them with the bit-exact references
  (:func:`vrex_lib.hw.fixedpoint.cluster_ref`, :func:`~vrex_lib.hw.fixedpoint.wicsum_select_ref`,
  :func:`vrex_lib.hw.kvmu.prefetch_requests`) and the cycle models of :mod:`vrex_lib.hw.timing`
  (HCU cycles per frame; WTU scans and cycles per row via :func:`wtu_walk_ref`).

A vector is an HCU token, a WTU row or a KVMU selection; a vector mismatches when any of its outputs (or its
cycle count) differs. ``docs/DECISIONS.md D86`` records why this path exists beside the MyHDL check.
"""
from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..config import VRexCoreConfig
from . import fixedpoint as fx
from . import timing
from .hcu import HCUFrameResult, HCUParams, hcu_ports
from .kvmu import kvmu_ports, prefetch_requests
from .wtu import WTUParams, WTURowResult, wtu_ports

LOG, WAIT = 1, 2  # stimulus flags (low two bits of each line)
STROBE = {"hcu": ("res_valid", "done"), "wtu": ("done",), "kvmu": ("req_valid",)}
DONE = {"hcu": "done", "wtu": "done", "kvmu": None}
OUTPUTS = {
    "hcu": ["busy", "done", "n_cl_out", "res_valid", "res_tok", "res_cluster", "res_new"],
    "wtu": ["sel_rdata", "agg_rdata", "busy", "done", "n_scans"],
    "kvmu": ["req_valid", "req_addr", "req_len", "busy_out"],
}
# A WAIT that sees no ``done`` within this many times the longest expected cycle count (plus a margin) ends as a
# timeout: that vector mismatches, and a hung block cannot stall the run.
WAIT_LIMIT_FACTOR, WAIT_LIMIT_MARGIN = 4, 64


class SimulatorMissing(RuntimeError):
    """Neither Verilator nor Icarus Verilog is on PATH."""


def pick_simulator(prefer: str | None = None) -> tuple[str, str | None]:
    """(simulator, warning): Verilator when installed, else Icarus with a warning; raises when neither is.

    ``prefer`` ("verilator" or "icarus") forces one and raises if it is missing.
    """
    have_vl = shutil.which("verilator") is not None
    have_iv = shutil.which("iverilog") is not None and shutil.which("vvp") is not None
    if prefer is not None:
        if prefer not in ("verilator", "icarus"):
            raise ValueError(f"simulator={prefer!r}: choose 'verilator' or 'icarus'")
        if not (have_vl if prefer == "verilator" else have_iv):
            raise SimulatorMissing(f"{prefer} is not on PATH: `make setup` installs it "
                                   f"(apt-get install {'verilator' if prefer == 'verilator' else 'iverilog'})")
        return prefer, None
    if have_vl:
        return "verilator", None
    if have_iv:
        return "icarus", ("VERILATOR NOT FOUND: the bulk Verilog vectors ran on Icarus Verilog, several times "
                          "slower; `make setup` (apt-get install verilator) restores the default")
    raise SimulatorMissing("neither verilator nor iverilog is on PATH: run `make setup` (apt-get install verilator "
                           "iverilog), or pass --no-verilog to skip the Verilog checks (recorded in summary.json)")


def port_widths(ports: dict) -> dict[str, int]:
    return {k: len(v) if len(v) else 1 for k, v in ports.items()}


# ------------------------------------------------------------------------------------------ stimulus
class Stimulus:
    """Cycle-by-cycle input lines for one block, built the way its MyHDL testbench drives it."""

    def __init__(self, ports: dict, outputs: list[str]):
        self.widths = port_widths(ports)
        self.inputs = [k for k in ports if k != "clk" and k not in outputs]
        self.vals = {k: 0 for k in self.inputs}
        self.lines: list[int] = []

    def step(self, flags: int = 0, **vals) -> int:
        """Set ``vals`` (they persist, as signals do) and emit one clock cycle; returns the line index."""
        for k, v in vals.items():
            self.vals[k] = int(v) & ((1 << self.widths[k]) - 1)
        x, off = 0, 0
        for k in self.inputs:
            x |= self.vals[k] << off
            off += self.widths[k]
        self.lines.append(flags | (x << 2))
        return len(self.lines) - 1

    @property
    def in_bits(self) -> int:
        return sum(self.widths[k] for k in self.inputs)


def hcu_stimulus(frames: list, th: int, p: HCUParams) -> tuple[Stimulus, list[dict]]:
    """Stimulus of HCU frames ``(old codes or None, new codes)``; per frame the reference and its WAIT line."""
    ports = hcu_ports(p)
    s = Stimulus(ports, OUTPUTS["hcu"])
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
        n0 = len(state)
        n_before = [n0 + len({int(x) for x in ref[:t] if x >= n0}) for t in range(len(new))]
        meta.append(dict(wait=wait, ref=ref.tolist(), n_clusters=len(after),
                         cycles=timing.hcu_cycles_trace(n_before, VRexCoreConfig(n_hcu_w=p.lanes)) ))
        state = [int(x) for x in after]
    return s, meta


def wtu_stimulus(rows: list, ratio_q: int, p: WTUParams) -> tuple[Stimulus, list[dict]]:
    """Stimulus of WTU rows ``(weights, counts)``: load, start, WAIT for done, read the selection (LOG)."""
    ports = wtu_ports(p)
    s = Stimulus(ports, OUTPUTS["wtu"])
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
            s.step(s_we=1, c_we=1, w_addr=r, s_wdata=_pack(wp[r * L:(r + 1) * L], fx.W_BITS),
                   c_wdata=_pack(cp[r * L:(r + 1) * L], fx.C_BITS))
        s.vals["s_we"] = s.vals["c_we"] = 0
        s.step(n=n, ratio=ratio_q, start=1, first=int(i == 0))
        wait = s.step(WAIT, start=0)
        reads = [s.step(LOG, sel_raddr=r) for r in range(G)]
        ref = wtu_walk_ref(w, c, ratio_q, p)
        meta.append(dict(wait=wait, reads=reads, n=n, ref=ref))
    return s, meta


def kvmu_stimulus(sels: list, bytes_per_token: int) -> tuple[Stimulus, list[dict]]:
    """Stimulus of KVMU selections ``(selected, counts)``: one cluster per cycle, then one idle cycle."""
    s = Stimulus(kvmu_ports(), OUTPUTS["kvmu"])
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


def _pack(vals: np.ndarray, bits: int) -> int:
    out = 0
    for k, v in enumerate(vals):
        out |= (int(v) & ((1 << bits) - 1)) << (k * bits)
    return out


# ------------------------------------------------------------------------------- WTU walk reference
@dataclass
class WalkRef:
    """What the WTU's FSM does on one row, computed from its algorithm (no RTL): the selection, the WALK bucket
    scans and the RES_G / RES_L cycles that resolve the crossing bucket."""

    selected: np.ndarray
    scans: int
    resolve_rows: int
    resolve_lanes: int
    cycles: int
    buckets: list = field(default_factory=list)  # (s, lo, bucket Σ w·c, crossed) per scan


def wtu_walk_ref(weights: np.ndarray, counts: np.ndarray, ratio_q: int, p: WTUParams = WTUParams()) -> WalkRef:
    """The early-exit bucket walk of ``wtu.py`` (Fig. 11; refinement and index resolution as in
    ``docs/DECISIONS.md D82``) written as plain Python over one row ``(weights [n], counts [n])``."""
    w = [int(x) for x in weights]
    c = [int(x) for x in counts]
    n, L, NB = len(w), p.lanes, p.n_buckets
    nbb = (NB - 1).bit_length()
    prod = [a * b for a, b in zip(w, c)]
    total, mn, mx = sum(prod), min(w), max(w)
    th = fx.threshold(total, ratio_q)
    rng = mx - mn
    s = next(i for i in range(fx.W_BITS + 1) if (rng >> i) < NB)
    lo = mn + ((rng >> s) << s)
    acc, scans, buckets = 0, 0, []
    wstar, jcut, all_sel = None, -1, False
    while True:
        hi = lo + (1 << s)
        inb = [j for j in range(n) if lo <= w[j] < hi]
        tot = sum(prod[j] for j in inb)
        scans += 1
        crossed = acc + tot > th
        buckets.append((s, lo, tot, crossed))
        if crossed:
            vmax, vmin = max(w[j] for j in inb), min(w[j] for j in inb)
            if vmin == vmax:
                wstar = vmax
                break
            s = max(0, s - nbb)
            lo = mn + (((vmax - mn) >> s) << s)
        else:
            acc += tot
            below = [w[j] for j in range(n) if w[j] < lo]
            if not below:
                all_sel = True
                break
            lo = mn + (((max(below) - mn) >> s) << s)
    res_rows = res_lanes = 0
    if not all_sel:
        hi = lo + (1 << s)
        G = -(-n // L)
        for g in range(G):  # RES_G: whole rows of the crossing weight, then RES_L: lane by lane
            res_rows += 1
            rs = sum(prod[j] for j in range(g * L, min(n, (g + 1) * L)) if lo <= w[j] < hi)
            if acc + rs > th:
                for k in range(L):
                    res_lanes += 1
                    j = g * L + k
                    lp = prod[j] if j < n and lo <= w[j] < hi else 0
                    if acc + lp > th:
                        jcut = j
                        break
                    acc += lp
                break
            acc += rs
    sel = np.array([all_sel or w[j] > wstar or (w[j] == wstar and j <= jcut) for j in range(n)], dtype=bool)
    cyc = timing.wtu_row_cycles(n, scans, res_rows, res_lanes, VRexCoreConfig(n_wtu_w=L))
    return WalkRef(sel, scans, res_rows, res_lanes, cyc, buckets)


# ------------------------------------------------------------------------------------------ testbench
def port_wires(ins: list[str], outputs: list[str], widths: dict, src: str, first_bit: int) -> list[str]:
    """Verilog wires of a testbench: each input a slice of the stimulus word ``src`` (packed from bit
    ``first_bit`` in ``ins`` order), each output a plain wire."""
    decl, off = [], first_bit
    for k in ins:
        decl.append(f"wire [{widths[k] - 1}:0] {k} = {src}[{off + widths[k] - 1}:{off}];")
        off += widths[k]
    return decl + [f"wire [{widths[k] - 1}:0] {k};" for k in outputs]


def testbench_verilog(top: str, ports: dict, outputs: list[str], strobe: tuple[str, ...], done: str | None,
                      stim: Path, log: Path, wait_limit: int = 100_000) -> str:
    """A generic stimulus-file testbench for ``top`` (Verilog-2005 + ``$fscanf``; Icarus and Verilator)."""
    w = port_widths(ports)
    ins = [k for k in ports if k != "clk" and k not in outputs]
    inw = sum(w[k] for k in ins) + 2
    decl = port_wires(ins, outputs, w, "tb_cur", 2)
    conns = ", ".join(f".{k}({k})" for k in ports)
    outcat = "{" + ", ".join(reversed(outputs)) + "}"
    strobe_expr = " || ".join(f"{k}" for k in strobe)
    wait_block = "" if done is None else f"""
    if (tb_r == 1 && tb_cur[1]) begin
      tb_n = 0; tb_go = 1;
      while (tb_go) begin
        #5 clk = 1; #5 clk = 0; #1;
        tb_cyc = tb_cyc + 1; tb_n = tb_n + 1;
        if ({strobe_expr}) $fwrite(tb_fo, "%0d %0d %h\\n", tb_line, tb_cyc, {outcat});
        if ({done} || tb_n >= {int(wait_limit)}) tb_go = 0;
      end
      $fwrite(tb_fo, "w %0d %0d\\n", tb_line, tb_n);
      tb_line = tb_line + 1;
    end else"""
    return f"""`timescale 1ns/1ps
module tb_bulk;
reg clk = 0;
reg [{inw - 1}:0] tb_cur;
{chr(10).join(decl)}
{top} dut({conns});
integer tb_fi, tb_fo, tb_r, tb_line, tb_cyc, tb_n;
reg tb_go;
initial begin
  tb_fi = $fopen("{stim}", "r");
  tb_fo = $fopen("{log}", "w");
  tb_cur = 0; tb_line = 0; tb_cyc = 0; tb_n = 0;
  while (!$feof(tb_fi)) begin
    tb_r = $fscanf(tb_fi, "%h\\n", tb_cur);{wait_block}
    if (tb_r == 1) begin
      #5 clk = 1; #5 clk = 0; #1;
      tb_cyc = tb_cyc + 1;
      if (tb_cur[0] || {strobe_expr}) $fwrite(tb_fo, "%0d %0d %h\\n", tb_line, tb_cyc, {outcat});
      tb_line = tb_line + 1;
    end
  end
  $fwrite(tb_fo, "end %0d %0d\\n", tb_line, tb_cyc);
  $fclose(tb_fo);
  $fclose(tb_fi);
  $finish;
end
endmodule
"""


@dataclass
class SimRun:
    simulator: str
    log: list[str]
    cycles: int
    compile_s: float
    run_s: float

    @property
    def cycles_per_s(self) -> float:
        return self.cycles / self.run_s if self.run_s > 0 else float("nan")


def simulate(vfile: Path, top: str, ports: dict, block_name: str, stim: Stimulus, work: Path,
             simulator: str, wait_limit: int = 100_000) -> SimRun:
    """Write the stimulus and the testbench, compile with ``simulator`` and run; returns the output log."""
    work.mkdir(parents=True, exist_ok=True)
    stim_f, log_f = work / "stim.hex", work / "log.txt"
    ndig = -(-(stim.in_bits + 2) // 4)
    stim_f.write_text("".join(f"{x:0{ndig}x}\n" for x in stim.lines))
    tb = work / "tb_bulk.v"
    tb.write_text(testbench_verilog(top, ports, OUTPUTS[block_name], STROBE[block_name], DONE[block_name],
                                    stim_f, log_f, wait_limit))
    t0 = time.perf_counter()
    if simulator == "verilator":
        obj = work / "obj"
        _run(["verilator", "--binary", "--timing", "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module",
              "tb_bulk", "-CFLAGS", "-O1", "--Mdir", str(obj), "-o", "sim", str(tb), str(vfile)], work)
        cmd = [str(obj / "sim")]
    elif simulator == "icarus":
        exe = work / "bulk.vvp"
        _run(["iverilog", "-g2005", "-o", str(exe), str(tb), str(vfile)], work)
        cmd = ["vvp", "-n", str(exe)]
    else:
        raise ValueError(f"simulator={simulator!r}: choose 'verilator' or 'icarus'")
    t1 = time.perf_counter()
    _run(cmd, work)
    t2 = time.perf_counter()
    log = log_f.read_text().splitlines()
    if not log or not log[-1].startswith("end "):
        raise RuntimeError(f"{simulator} testbench for {top} ended without its end marker (see {log_f})")
    return SimRun(simulator, log[:-1], int(log[-1].split()[2]), round(t1 - t0, 2), round(t2 - t1, 3))


def _run(cmd: list[str], cwd: Path) -> None:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd[:3])} ...` failed (exit {r.returncode}):\n{(r.stderr or r.stdout)[-2000:]}")


# ----------------------------------------------------------------------------------------- decoding
def _fields(hexstr: str, ports: dict, outputs: list[str]) -> dict[str, int] | None:
    if any(ch in hexstr.lower() for ch in "xz"):
        return None
    v, off, out = int(hexstr, 16), 0, {}
    w = port_widths(ports)
    for k in outputs:
        out[k] = (v >> off) & ((1 << w[k]) - 1)
        off += w[k]
    return out


def _by_line(run: SimRun, ports: dict, outputs: list[str]) -> tuple[dict, dict]:
    logs: dict[int, list] = {}
    waits: dict[int, int] = {}
    for ln in run.log:
        parts = ln.split()
        if parts[0] == "w":
            waits[int(parts[1])] = int(parts[2])
        else:
            logs.setdefault(int(parts[0]), []).append(_fields(parts[2], ports, outputs))
    return logs, waits


def check_hcu_log(run: SimRun, meta: list[dict], p: HCUParams) -> dict:
    """Per token: the cluster the Verilog HCU assigned vs :func:`fx.cluster_ref`; per frame also the cluster
    count and the cycles (vs ``timing.hcu_cycles_trace``); a frame's error counts against all its tokens."""
    ports = hcu_ports(p)
    logs, waits = _by_line(run, ports, OUTPUTS["hcu"])
    tokens = bad = 0
    results = []
    for m in meta:
        ev = logs.get(m["wait"], [])
        got = [-1] * len(m["ref"])
        ncl, ok = None, True
        for e in ev:
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


def check_wtu_log(run: SimRun, meta: list[dict], p: WTUParams) -> dict:
    """Per row: the selection bitmask read back from the Verilog WTU vs :func:`fx.wicsum_select_ref` (through
    :func:`wtu_walk_ref`, tested equal), its bucket scans and its cycles vs :func:`wtu_walk_ref`."""
    ports = wtu_ports(p)
    logs, waits = _by_line(run, ports, OUTPUTS["wtu"])
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


def check_kvmu_log(run: SimRun, meta: list[dict]) -> dict:
    """Per selection: the Verilog KVMU's request stream vs :func:`prefetch_requests`."""
    ports = kvmu_ports()
    logs, _ = _by_line(run, ports, OUTPUTS["kvmu"])
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


def run_block(block_name: str, vectors: list, vfile: Path, work: Path, simulator: str, *, th: int = 0,
              ratio_q: int = 0, bytes_per_token: int = 0, p=None) -> dict:
    """Build the stimulus of ``vectors`` for ``block_name``, simulate ``vfile`` and check every vector.

    Returns ``dict(simulator, vectors, mismatches, cycles, compile_s, run_s, cycles_per_s)`` and, under
    ``"_results"``, one result per input as the Verilog produced it: :class:`~vrex_lib.hw.hcu.HCUFrameResult`
    per HCU frame, :class:`~vrex_lib.hw.wtu.WTURowResult` per WTU row (selection, cycles, scans; no state
    trace), ``(requests, cycles)`` per KVMU selection.
    """
    if block_name == "hcu":
        stim, meta = hcu_stimulus(vectors, th, p)
        ports = hcu_ports(p)
    elif block_name == "wtu":
        stim, meta = wtu_stimulus(vectors, ratio_q, p)
        ports = wtu_ports(p)
    elif block_name == "kvmu":
        stim, meta = kvmu_stimulus(vectors, bytes_per_token)
        ports = kvmu_ports()
    else:
        raise ValueError(f"unknown block {block_name!r}")
    longest = max([m["cycles"] if block_name == "hcu" else m["ref"].cycles for m in meta] or [0]) \
        if block_name != "kvmu" else 0
    run = simulate(vfile, block_name, ports, block_name, stim, work, simulator,
                   WAIT_LIMIT_FACTOR * longest + WAIT_LIMIT_MARGIN)
    if block_name == "hcu":
        chk = check_hcu_log(run, meta, p)
    elif block_name == "wtu":
        chk = check_wtu_log(run, meta, p)
    else:
        chk = check_kvmu_log(run, meta)
    return dict(simulator=simulator, vectors=chk["vectors"], mismatches=chk["mismatches"], cycles=run.cycles,
                compile_s=run.compile_s, run_s=run.run_s, cycles_per_s=round(run.cycles_per_s, 1),
                _results=chk["results"])
