"""The one Verilog harness of the DRE blocks: conversion, port packing, one stimulus-file testbench, and compile +
run under Icarus Verilog or Verilator (optionally dumping a VCD of the block's signals).

The Icarus replay of a MyHDL run and the bulk vectors are the same machinery with different stimuli:

* a :class:`Stimulus` is one line per clock cycle holding every input port of the block, packed in port order,
  plus two flags: ``LOG`` (write the outputs after this cycle) and ``WAIT`` (hold these inputs and clock until
  ``done`` rises, at most ``wait_limit`` cycles);
* :func:`testbench_verilog` streams that file with ``$fscanf``, clocks the block and writes
  ``<line> <cycle> <outputs hex>`` whenever LOG is set or a strobe output is high, ``w <line> <cycles>`` after
  each WAIT and ``end <lines> <cycles>`` at the end;
* :func:`simulate` compiles it with the chosen simulator and returns the log (:class:`SimRun`);
  :func:`decode_log` turns the log back into output fields per stimulus line.

A replay (:func:`replay`) is a stimulus with LOG on every line, built from the port values MyHDL recorded
(:func:`vrex_lib.hw._sim.io_monitor`), whose logged outputs must equal the recorded ones cycle for cycle.
"""
from __future__ import annotations

import shutil
import subprocess
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

LOG, WAIT = 1, 2  # stimulus flags (low two bits of each line)
SIMULATORS = ("verilator", "icarus")


class SimulatorMissing(RuntimeError):
    """Neither Verilator nor Icarus Verilog is on PATH (or the one asked for is not)."""


def pick_simulator(prefer: str | None = None) -> tuple[str, str | None]:
    """(simulator, warning): Verilator when installed, else Icarus with a warning; raises when neither is.

    ``prefer`` ("verilator" or "icarus") forces one and raises if it is missing.
    """
    have_vl = shutil.which("verilator") is not None
    have_iv = shutil.which("iverilog") is not None and shutil.which("vvp") is not None
    if prefer is not None:
        if prefer not in SIMULATORS:
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


# --------------------------------------------------------------------------------------------- ports
def port_widths(ports: dict) -> dict[str, int]:
    """Bits of each port signal (a bool is 1 bit)."""
    return {k: len(v) if len(v) else 1 for k, v in ports.items()}


def pack(values: Sequence[int], widths: Sequence[int]) -> int:
    """Concatenate ``values`` (first one in the lowest bits), each masked to its width."""
    x, off = 0, 0
    for v, w in zip(values, widths):
        x |= (int(v) & ((1 << w) - 1)) << off
        off += w
    return x


def pack_lanes(values: Sequence[int], bits: int) -> int:
    """One memory row of equal-width lanes, lane 0 in the lowest bits (the WTU's score/count rows)."""
    return pack(values, [bits] * len(values))


def unpack(word: int, widths: Sequence[int]) -> list[int]:
    """The inverse of :func:`pack`."""
    out, off = [], 0
    for w in widths:
        out.append((word >> off) & ((1 << w) - 1))
        off += w
    return out


class Stimulus:
    """Cycle-by-cycle input lines for one block, built the way its MyHDL testbench drives it."""

    def __init__(self, ports: dict, outputs: Sequence[str]):
        self.widths = port_widths(ports)
        self.inputs = [k for k in ports if k != "clk" and k not in outputs]
        self.vals = {k: 0 for k in self.inputs}
        self.lines: list[int] = []

    def step(self, flags: int = 0, **vals) -> int:
        """Set ``vals`` (they persist, as signals do) and emit one clock cycle; returns the line index."""
        for k, v in vals.items():
            self.vals[k] = int(v) & ((1 << self.widths[k]) - 1)
        x = pack([self.vals[k] for k in self.inputs], [self.widths[k] for k in self.inputs])
        self.lines.append(flags | (x << 2))
        return len(self.lines) - 1

    @property
    def in_bits(self) -> int:
        return sum(self.widths[k] for k in self.inputs)


# --------------------------------------------------------------------------------------- conversion
def convert(make: Callable[[dict], object], ports: dict, top: str, out: Path) -> Path:
    """Convert the block ``make(ports)`` to ``out/<top>.v`` (initial values on, MyHDL's cosimulation wrapper
    removed); returns the file."""
    out.mkdir(parents=True, exist_ok=True)
    inst = make(ports)
    with warnings.catch_warnings():  # unread/undriven top-level port warnings are expected
        warnings.simplefilter("ignore")
        inst.convert(hdl="Verilog", path=str(out), name=top, initial_values=True)
    tbf = out / f"tb_{top}.v"
    if tbf.exists():
        tbf.unlink()
    return out / f"{top}.v"


# ---------------------------------------------------------------------------------------- testbench
def port_wires(ins: list[str], outputs: Sequence[str], widths: dict, src: str, first_bit: int) -> list[str]:
    """Verilog wires of a testbench: each input a slice of the stimulus word ``src`` (packed from bit
    ``first_bit`` in ``ins`` order), each output a plain wire."""
    decl, off = [], first_bit
    for k in ins:
        decl.append(f"wire [{widths[k] - 1}:0] {k} = {src}[{off + widths[k] - 1}:{off}];")
        off += widths[k]
    return decl + [f"wire [{widths[k] - 1}:0] {k};" for k in outputs]


def _wait_block(strobe_expr: str, done: str | None, outcat: str, wait_limit: int) -> str:
    if done is None:
        return ""
    return f"""
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


def testbench_verilog(top: str, ports: dict, outputs: Sequence[str], strobe: Sequence[str], done: str | None,
                      stim: Path | None, log: Path | None, wait_limit: int = 100_000, vcd: Path | None = None) -> str:
    """The stimulus-file testbench for ``top`` (Verilog-2005 + ``$fscanf``; Icarus and Verilator alike).
    With ``vcd``, every signal of the block's own scope is dumped there. With ``stim`` and ``log`` None, the
    files are named at run time (``+stim=... +log=... [+vcd=...]``), so one compiled testbench runs several
    stimuli (:func:`simulate_runs`)."""
    w = port_widths(ports)
    ins = [k for k in ports if k != "clk" and k not in outputs]
    inw = sum(w[k] for k in ins) + 2
    decl = port_wires(ins, outputs, w, "tb_cur", 2)
    conns = ", ".join(f".{k}({k})" for k in ports)
    outcat = "{" + ", ".join(reversed(list(outputs))) + "}"
    strobe_expr = " || ".join(strobe) if strobe else "1'b0"
    if stim is None:
        files = ("reg [8*1024-1:0] tb_sname, tb_lname, tb_vname;\n", '  if (!$value$plusargs("stim=%s", tb_sname) || '
                 '!$value$plusargs("log=%s", tb_lname)) $finish;\n  if ($value$plusargs("vcd=%s", tb_vname)) begin\n'
                 '    $dumpfile(tb_vname);\n    $dumpvars(1, dut);\n  end\n', "tb_sname", "tb_lname")
    else:
        dump = f'  $dumpfile("{vcd}");\n  $dumpvars(1, dut);\n' if vcd is not None else ""
        files = ("", dump, f'"{stim}"', f'"{log}"')
    return f"""`timescale 1ns/1ps
module tb_bulk;
reg clk = 0;
reg [{inw - 1}:0] tb_cur;
{chr(10).join(decl)}
{top} dut({conns});
integer tb_fi, tb_fo, tb_r, tb_line, tb_cyc, tb_n;
reg tb_go;
{files[0]}initial begin
{files[1]}  tb_fi = $fopen({files[2]}, "r");
  tb_fo = $fopen({files[3]}, "w");
  tb_cur = 0; tb_line = 0; tb_cyc = 0; tb_n = 0;
  while (!$feof(tb_fi)) begin
    tb_r = $fscanf(tb_fi, "%h\\n", tb_cur);{_wait_block(strobe_expr, done, outcat, wait_limit)}
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


# ------------------------------------------------------------------------------------------- running
@dataclass
class SimRun:
    """What one testbench run produced: the output log (without the end marker) and the clock cycles."""

    simulator: str
    log: list[str]
    cycles: int
    compile_s: float
    run_s: float
    vcd: Path | None = None

    @property
    def cycles_per_s(self) -> float:
        return self.cycles / self.run_s if self.run_s > 0 else float("nan")


@dataclass(frozen=True)
class Protocol:
    """How the testbench watches one block: its output ports, the outputs that force a log line, and the
    output that ends a WAIT (None: the block has no WAIT)."""

    outputs: tuple[str, ...]
    strobe: tuple[str, ...] = ()
    done: str | None = None


def simulate(vfile: Path, top: str, ports: dict, proto: Protocol, stim: Stimulus, work: Path, simulator: str,
             wait_limit: int = 100_000, vcd: Path | None = None) -> SimRun:
    """Write the stimulus and the testbench, compile with ``simulator`` and run; returns the output log."""
    _check_simulator(simulator)
    work.mkdir(parents=True, exist_ok=True)
    stim_f, log_f, tb = work / "stim.hex", work / "log.txt", work / "tb_bulk.v"
    _write_stimulus(stim, stim_f)
    tb.write_text(testbench_verilog(top, ports, proto.outputs, proto.strobe, proto.done, stim_f, log_f, wait_limit,
                                    vcd))
    t0 = time.perf_counter()
    cmd = _compile(tb, vfile, work, simulator, trace=vcd is not None)
    t1 = time.perf_counter()
    _run(cmd, work)
    t2 = time.perf_counter()
    return _read_log(log_f, simulator, top, round(t1 - t0, 2), round(t2 - t1, 3), vcd)


def simulate_runs(vfile: Path, top: str, ports: dict, proto: Protocol, runs: Sequence[tuple[Stimulus, Path | None]],
                  work: Path, simulator: str, wait_limit: int = 100_000) -> list[SimRun]:
    """Compile the testbench once and run each ``(stimulus, vcd or None)`` of ``runs`` on it (the files named on
    the command line); one :class:`SimRun` per run, each with the one compile time."""
    _check_simulator(simulator)
    work.mkdir(parents=True, exist_ok=True)
    tb = work / "tb_bulk.v"
    tb.write_text(testbench_verilog(top, ports, proto.outputs, proto.strobe, proto.done, None, None, wait_limit))
    t0 = time.perf_counter()
    cmd = _compile(tb, vfile, work, simulator, trace=any(v is not None for _, v in runs))
    compile_s = round(time.perf_counter() - t0, 2)
    out = []
    for k, (stim, vcd) in enumerate(runs):
        stim_f, log_f = work / f"stim{k}.hex", work / f"log{k}.txt"
        _write_stimulus(stim, stim_f)
        t1 = time.perf_counter()
        _run(cmd + [f"+stim={stim_f}", f"+log={log_f}"] + ([f"+vcd={vcd}"] if vcd is not None else []), work)
        out.append(_read_log(log_f, simulator, top, compile_s, round(time.perf_counter() - t1, 3), vcd))
    return out


def _check_simulator(simulator: str) -> None:
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator={simulator!r}: choose 'verilator' or 'icarus'")


def _write_stimulus(stim: Stimulus, path: Path) -> None:
    ndig = -(-(stim.in_bits + 2) // 4)
    path.write_text("".join(f"{x:0{ndig}x}\n" for x in stim.lines))


def _compile(tb: Path, vfile: Path, work: Path, simulator: str, trace: bool) -> list[str]:
    """Compile ``tb`` + ``vfile``; returns the command that runs the simulation."""
    if simulator == "verilator":
        obj = work / "obj"
        _run(["verilator", "--binary", "--timing", *(["--trace"] if trace else []), "-Wno-fatal",
              "-Wno-lint", "-Wno-style", "--top-module", "tb_bulk", "-CFLAGS", "-O1", "--Mdir", str(obj), "-o", "sim",
              str(tb), str(vfile)], work)
        return [str(obj / "sim")]
    exe = work / "bulk.vvp"
    _run(["iverilog", "-g2005", "-o", str(exe), str(tb), str(vfile)], work)
    return ["vvp", "-n", str(exe)]


def _read_log(log_f: Path, simulator: str, top: str, compile_s: float, run_s: float, vcd: Path | None) -> SimRun:
    log = log_f.read_text().splitlines()
    if not log or not log[-1].startswith("end "):
        raise RuntimeError(f"{simulator} testbench for {top} ended without its end marker (see {log_f})")
    return SimRun(simulator, log[:-1], int(log[-1].split()[2]), compile_s, run_s, vcd)


def _run(cmd: list[str], cwd: Path) -> None:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd[:3])} ...` failed (exit {r.returncode}):\n{(r.stderr or r.stdout)[-2000:]}")


# ------------------------------------------------------------------------------------------ decoding
def decode_fields(hexstr: str, widths: dict, outputs: Sequence[str]) -> dict[str, int] | None:
    """One logged output word as ``{output: value}``; None when it holds an X or Z bit."""
    if any(ch in hexstr.lower() for ch in "xz"):
        return None
    return dict(zip(outputs, unpack(int(hexstr, 16), [widths[k] for k in outputs])))


def decode_log(run: SimRun, ports: dict, outputs: Sequence[str]) -> tuple[dict[int, list], dict[int, int]]:
    """(output fields logged per stimulus line, cycles waited per WAIT line)."""
    widths = port_widths(ports)
    logs: dict[int, list] = {}
    waits: dict[int, int] = {}
    for ln in run.log:
        parts = ln.split()
        if parts[0] == "w":
            waits[int(parts[1])] = int(parts[2])
        else:
            logs.setdefault(int(parts[0]), []).append(decode_fields(parts[2], widths, outputs))
    return logs, waits


def stream_outputs(run: SimRun, ports: dict, outputs: Sequence[str], value: str) -> tuple[list[int], int]:
    """A pipelined block's log in order: (``value`` at every logged cycle whose ``out_valid`` is high, the log
    entries that did not decode)."""
    logs, _ = decode_log(run, ports, outputs)
    got, broken = [], 0
    for ln in sorted(logs):
        for e in logs[ln]:
            if e is None:
                broken += 1
            elif e["out_valid"]:
                got.append(e[value])
    return got, broken


def stream_mismatches(got: np.ndarray, ref: np.ndarray, broken: int) -> dict:
    """A pipelined block's outputs ``got`` (one per vector, in order; rows of lanes or scalars) vs ``ref``: a vector
    mismatches when any lane differs; each missing or extra output and each undecoded log entry counts one."""
    k = min(len(got), len(ref))
    neq = got[:k] != ref[:k]
    bad = int(np.sum(np.any(neq, axis=tuple(range(1, neq.ndim))))) + abs(len(ref) - len(got)) + broken
    return dict(vectors=len(ref), mismatches=min(bad, len(ref)), results=list(got))


# -------------------------------------------------------------------------------------------- replay
def replay(vfile: Path, top: str, ports: dict, outputs: Sequence[str], record: list, work: Path,
           simulator: str = "icarus") -> dict:
    """Replay the port values MyHDL recorded (one tuple per cycle, ports in dict order without ``clk``) on the
    converted Verilog; count the cycles whose outputs differ from the recorded ones."""
    names = [k for k in ports if k != "clk"]
    pos = {k: i for i, k in enumerate(names)}
    ins = [k for k in names if k not in outputs]
    stim = Stimulus(ports, outputs)
    for r in record:
        stim.step(LOG, **{k: r[pos[k]] for k in ins})
    run = simulate(vfile, top, ports, Protocol(tuple(outputs)), stim, work, simulator)
    logs, _ = decode_log(run, ports, outputs)
    widths = port_widths(ports)
    bad = 0
    for j, r in enumerate(record):
        got = logs.get(j, [])
        want = {k: int(r[pos[k]]) & ((1 << widths[k]) - 1) for k in outputs}
        bad += int(len(got) != 1 or got[0] != want)
    return dict(cycles=len(record), mismatches=bad, outputs_bits=sum(widths[k] for k in outputs),
                run_s=run.run_s, cycles_per_s=round(len(record) / run.run_s, 1) if run.run_s > 0 else None)
