"""Beyond the paper: what the bounded ReSV (``resv_best``, docs/DECISIONS.md D497) adds to one V-Rex core, in the
estimator's units -- yosys cells and NanGate areas (:mod:`.synth`), gate-level power from the blocks' own toggle
rates (:mod:`.cells`, toggles counted on the Icarus run that checks the vectors, as :mod:`vrex_lib.hw.activity`
does for the DRE), and CACTI for the one new SRAM.

The additions per core (:mod:`vrex_lib.hw.bounded`):

* the HCU's cap compare (``capped_nearest``: the lane compare with the count mask; the whole lane compare is
  synthesised, so its cells are an upper bound on the cap's increment over the paper's HCU);
* the HCU's copy of the cluster counts (the WTU's token-count memory holds them already; the HCU reads them in
  the same row as the codes): one SRAM of ``hcu_key_hash_bytes / code bytes`` clusters × ``count_bits``, one
  lane-wide row per cycle -- CACTI;
* one low-bit scorer lane (``best_member``: ``dim`` INT8 × INT4 products, scale, running max);
* the WTU's budgeted stop (``budget_stop``).

The low-bit key copy itself lives in device DRAM (at 40K tokens it is hundreds of MB), charged by the simulator
(:mod:`vrex_lib.perf.methods.resv_bounded`), not here.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from .. import _io
from ..config import VRexCoreConfig
from ..hw import bounded as hb
from ..hw.activity import BlockActivity, measure
from ..hw.harness import Protocol, convert
from .cacti import SramSpec, run_sram
from .cells import logic_power
from .scaling import TARGET_NODE_NM, TARGET_VDD, area_factor, energy_factor
from .synth import yosys_area


def block_cost(name: str, p: hb.BoundedParams, work: Path, n_vectors: int = hb.DEFAULT_VECTORS, seed: int = 0,
               synth: bool = True) -> dict:
    """One block: the bit-exact check and toggle count of ``n_vectors`` seeded vectors on Icarus (one VCD run),
    the same vectors checked again under Verilator when it is installed (``verilator_vectors``,
    ``verilator_mismatches``; 0 and None without it), as the DRE's bulk check runs (:mod:`vrex_lib.hw.bulk`), and
    yosys cells (``synth``). Cached in ``work/<name>.json`` by the Verilog's SHA-256, the vectors, seed and
    simulators."""
    make, ports, outs = hb.BLOCKS[name]
    work = Path(work).resolve()  # the simulators run inside it
    work.mkdir(parents=True, exist_ok=True)
    vfile = convert(lambda P: make(**P, p=p), ports(p), name, work / name)
    have_vl = shutil.which("verilator") is not None
    key = hashlib.sha256(vfile.read_bytes() + f"{n_vectors}/{seed}/{synth}/vl{have_vl}".encode()).hexdigest()[:24]
    cache = work / f"{name}.json"
    if cache.exists():
        old = json.loads(cache.read_text())
        if old.get("key") == key:
            return old
    vecs = hb.RANDOM[name](n_vectors, np.random.default_rng(seed), p)
    stim, meta = hb.stimulus(name, vecs, p)
    m = measure(vfile, name, ports(p), Protocol(outs), stim, work / name / "act", "icarus")
    bad = hb.check_log(name, m["run"], meta, p)["mismatches"]
    out = dict(key=key, block=name, vectors=len(vecs), mismatches=bad, cycles=m["cycles"],
               signal_bits=m["signal_bits"], toggles=m["toggles"], flop_bits=m["flop_bits"],
               flop_toggles=m["flop_toggles"], simulator="icarus", verilator_vectors=0, verilator_mismatches=None)
    if have_vl:
        vl = hb.run_verilog(name, vecs, p, work / name / "verilator", "verilator")
        out.update(verilator_vectors=vl["vectors"], verilator_mismatches=vl["mismatches"])
    if synth:
        from ..hw.verify import synthesise
        (work / name / "syn").mkdir(parents=True, exist_ok=True)
        s = synthesise(vfile, name, work / name / "syn")
        out.update(cells=s["cells"], flip_flops=s["flip_flops"], cells_by_type=s["cells_by_type"])
    _io.write_json(cache, out)
    return out


def count_memory(cfg: VRexCoreConfig, count_bits: int, code_bits: int = 32) -> dict:
    """CACTI of the HCU's cluster-count copy (one count per key-cache hash-bit entry, a lane-wide row), at 14 nm /
    0.8 V: area_mm2, read_pJ (one row), leakage_mW."""
    entries = cfg.hcu_key_hash_bytes * 8 // code_bits
    width = cfg.n_hcu_w * count_bits
    r = run_sram(SramSpec(max(64, entries * count_bits // 8), width))
    e = energy_factor(r.node_nm, r.vdd, TARGET_NODE_NM, TARGET_VDD)
    return dict(memory="HCU cluster-count copy", size_bytes=entries * count_bits // 8, width_bits=width,
                area_mm2=r.area_mm2 * area_factor(r.node_nm), read_pJ=r.read_energy_pj * e,
                leakage_mW=r.leakage_mw * e, cacti_key=r.key)


def core_delta(work: Path, cfg: VRexCoreConfig | None = None, p: hb.BoundedParams | None = None,
               n_vectors: int | None = None, util: dict[str, float] | None = None) -> pd.DataFrame:
    """Per added block and the count SRAM: area (µm², 14 nm) and power (mW at ``cfg.freq_hz``; the blocks switch
    at their measured toggle rates × ``util[block]``, default 1 = Table III's full-activity point), and the
    bit-exact checks of ``n_vectors`` seeded vectors (default :func:`vrex_lib.hw.bounded.bulk_vectors`: 3,000,
    ``VREX_HW_VECTORS=10000`` opt-in) in Icarus and Verilator."""
    n_vectors = hb.bulk_vectors() if n_vectors is None else n_vectors
    cfg = cfg or VRexCoreConfig()
    p = p or hb.BoundedParams(lanes=cfg.n_hcu_w)
    util = util or {}
    recs = []
    for name in hb.BLOCKS:
        c = block_cost(name, p, work, n_vectors)
        u = util.get(name, 1.0)
        act = BlockActivity(name, c["cycles"], c["vectors"], c["signal_bits"], int(c["toggles"] * u),
                            c["flop_bits"], int(c["flop_toggles"] * u), f"icarus, {c['vectors']} seeded vectors")
        lp = logic_power(name, c["cells_by_type"], act, cfg.freq_hz)
        area = yosys_area({name: dict(cells_by_type=c["cells_by_type"])}).iloc[0]
        recs.append(dict(part=name, kind="logic", vectors=c["vectors"], mismatches=c["mismatches"],
                         verilator_vectors=c["verilator_vectors"], verilator_mismatches=c["verilator_mismatches"],
                         cells=c["cells"], flip_flops=c["flip_flops"], area_um2=float(area.area_um2),
                         alpha=act.alpha, power_mW=lp.total_mw, dynamic_mW=lp.dynamic_mw, clock_mW=lp.clock_mw,
                         leakage_mW=lp.leakage_mw))
    m = count_memory(cfg, p.count_bits, p.code_bits)
    u = util.get("capped_nearest", 1.0)
    dyn = u * m["read_pJ"] * cfg.freq_hz * 1e-9
    recs.append(dict(part=m["memory"], kind="sram (CACTI)", area_um2=m["area_mm2"] * 1e6, power_mW=dyn + m["leakage_mW"],
                     dynamic_mW=dyn, leakage_mW=m["leakage_mW"]))
    return pd.DataFrame.from_records(recs)


__all__ = ["block_cost", "core_delta", "count_memory"]
