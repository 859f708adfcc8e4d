"""``python -m vrex_lib.hw verify --out results/hdl [--blocks hcu wtu kvmu] [--size smoke|default|full]``."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .verify import BLOCKS, SIZES, run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrex_lib.hw", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="simulate vs reference, convert, replay in Icarus, synthesise with yosys")
    v.add_argument("--out", type=Path, default=Path("results/hdl"))
    v.add_argument("--blocks", nargs="*", choices=BLOCKS, default=None)
    v.add_argument("--size", choices=list(SIZES), default="default")
    v.add_argument("--no-synth", action="store_true", help="skip yosys")
    v.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    s = run(a.out, a.blocks, size=a.size, seed=a.seed, synth=False if a.no_synth else None)
    bad = 0
    for name, e in s["blocks"].items():
        vl = e["verilog"] or {}
        sy = e["synth"] or {}
        print(f"{name}: vectors={e['vectors']} (real {e['real_vectors']}) mismatches={e['mismatches']} "
              f"cycles={e['cycles']} verilog_cycles={vl.get('cycles')} verilog_mismatches={vl.get('mismatches')} "
              f"cells={sy.get('cells')} ffs={sy.get('flip_flops')}")
        bad += e["mismatches"] + (vl.get("mismatches") or 0)
    print(json.dumps(s["dre"]))
    print(f"wrote {a.out / 'summary.json'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
