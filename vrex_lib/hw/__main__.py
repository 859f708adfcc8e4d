"""``python -m vrex_lib.hw verify --out results/hdl [--blocks hcu wtu kvmu] [--size smoke|default|full]
[--no-synth] [--no-verilog] [--simulator verilator|icarus]`` (the DRE) and
``python -m vrex_lib.hw lxe --out results/hdl/lxe [--size smoke|default|10k|full] [--seed 0] [--simulator ...]
[--force]`` (the DPE and VPE)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import lxe
from .verify import BLOCKS, SIZES, VerifyError, mismatches_total, run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrex_lib.hw", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="simulate vs reference, convert, check the Verilog (Icarus replay + bulk "
                                      "vectors on Verilator), synthesise with yosys")
    v.add_argument("--out", type=Path, default=Path("results/hdl"))
    v.add_argument("--blocks", nargs="*", choices=BLOCKS, default=None)
    v.add_argument("--size", choices=list(SIZES), default="default")
    v.add_argument("--no-synth", action="store_true", help="skip yosys")
    v.add_argument("--no-verilog", action="store_true",
                   help="skip the Verilog replay and bulk checks (recorded in summary.json as skipped)")
    v.add_argument("--simulator", choices=["verilator", "icarus"], default=None,
                   help="simulator of the bulk Verilog vectors (default: verilator, else icarus with a warning)")
    v.add_argument("--seed", type=int, default=0)
    x = sub.add_parser("lxe", help="the DPE and VPE: MyHDL vs reference, Icarus replay, bulk vectors on Verilator, "
                                   "synthesis by units, gate-level activity on real operands")
    x.add_argument("--out", type=Path, default=Path("results/hdl/lxe"))
    x.add_argument("--size", choices=list(lxe.SIZES), default="default")
    x.add_argument("--seed", type=int, default=0)
    x.add_argument("--simulator", choices=["verilator", "icarus"], default=None)
    x.add_argument("--force", action="store_true", help="rerun even when the cached summary has the same inputs")
    a = ap.parse_args(argv)
    if a.cmd == "lxe":
        return _lxe(a)
    try:
        s = run(a.out, a.blocks, size=a.size, seed=a.seed, synth=False if a.no_synth else None,
                verilog=not a.no_verilog, simulator=a.simulator)
    except VerifyError as e:
        print(f"vrex_lib.hw verify: error: {e}", file=sys.stderr)
        return 2
    if s["verilog_checks"] != "run":
        print(f"WARNING: Verilog checks {s['verilog_checks']}: only the MyHDL reference check ran", file=sys.stderr)
    if s.get("bulk_warning"):
        print(f"WARNING: {s['bulk_warning']}", file=sys.stderr)
    for name, e in s["blocks"].items():
        vl = e["verilog"] or {}
        sy = e["synth"] or {}
        bk = e.get("bulk") or {}
        print(f"{name}: vectors={e['vectors']} (real {e['real_vectors']}) mismatches={e['mismatches']} "
              f"cycles={e['cycles']} verilog_cycles={vl.get('cycles')} verilog_mismatches={vl.get('mismatches')} "
              f"bulk_vectors={bk.get('vectors')} (real {bk.get('real_vectors')}) bulk_mismatches="
              f"{bk.get('mismatches')} bulk_simulator={bk.get('simulator')} "
              f"cells={sy.get('cells')} ffs={sy.get('flip_flops')}")
    print("simulated cycles/s:", json.dumps(s["simulator_cycles_per_s"]))
    print(json.dumps(s["dre"]))
    print(f"wrote {a.out / 'summary.json'}")
    return 1 if mismatches_total(s) else 0


def _lxe(a: argparse.Namespace) -> int:
    try:
        s = lxe.run(a.out, size=a.size, seed=a.seed, simulator=a.simulator, force=a.force)
    except VerifyError as e:
        print(f"vrex_lib.hw lxe: error: {e}", file=sys.stderr)
        return 2
    if s.get("simulator_warning"):
        print(f"WARNING: {s['simulator_warning']}", file=sys.stderr)
    for name, e in s["blocks"].items():
        bk = e["bulk"]
        print(f"{name}: myhdl {e['myhdl']['vectors']} vectors / {e['myhdl']['mismatches']} mismatches; replay "
              f"{e['replay']['cycles']} cycles / {e['replay']['mismatches']}; bulk {bk['vectors']} vectors ({bk['real_vectors']} "
              f"real) on {bk['simulator']} / {bk['mismatches']}; registers match the VCD: "
              f"{e['activity']['registers_match_vcd']}; units: " + ", ".join(
                  f"{u} x{d['count']} {d['cells']} cells" for u, d in e["units"].items()))
    print(f"wrote {a.out / lxe.SUMMARY} ({s['seconds']} s)")
    return 1 if lxe.mismatches_total(s) else 0


if __name__ == "__main__":
    sys.exit(main())
