"""``python -m vrex_lib.hw verify --out results/hdl [--blocks hcu wtu kvmu] [--size smoke|default|full]
[--no-synth] [--no-verilog] [--simulator verilator|icarus]``."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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
    a = ap.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
