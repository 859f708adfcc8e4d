"""The bounded ReSV's numbers (issue 45, docs/DECISIONS.md D490-D499): retrieval with power, the per-core cost,
FPS and energy beside the paper's ReSV.

    python scripts/bounded_report.py power results/variants/power_1000.json ...   # finished or .partial.json files
    python scripts/bounded_report.py sim                                          # V-Rex8/48, 1K-40K, both stages
    python scripts/bounded_report.py core [--work results/variants/est]           # cells, toggles, CACTI (minutes)

``power``: per (method, task, context length) the exact match with its Wilson 95 % interval and the fetched share of the
offloaded tier (selected offloaded tokens / offloaded candidates, summed over the text-stage steps, layers and KV
heads), from the long-context study's records (``python -m vrex_lib.longctx run ...``; a ``.partial.json`` of an
interrupted run is read as well). ``sim``: the simulator's step (paper-stated workload; ``resv_best`` fetches its
budget rule) with the energy of the added blocks (``core``'s power delta x cores x latency) beside it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from vrex_lib.longctx.power import power_table as power_table_of


def power_table(paths: list[Path]) -> pd.DataFrame:
    """The study's own per-cell table (:func:`vrex_lib.longctx.power.power_table`) over the records of ``paths``
    (finished or ``.partial.json`` files; a trial measured twice counts once), the fetched share in percent."""
    recs: dict[tuple[str, str], dict] = {}
    for p in paths:
        records = json.loads(Path(p).read_text())["records"]
        for trial, by_method in (records.items() if isinstance(records, dict) else
                                 ((r["trial"], {r["method"]: r}) for r in records)):
            for m, r in by_method.items():
                recs[(trial, m)] = r
    df = pd.DataFrame([dict(trial=t, method=m, task=r["task"], context_tokens=int(r["context_tokens"]),
                            correct=bool(r["correct"]), recall_needle=r.get("recall_needle"),
                            recall_value=r.get("recall_value"), sum_sel_off=r["sums"]["sel_off"],
                            sum_off=r["sums"]["off"]) for (t, m), r in recs.items()])
    out = power_table_of(df).sort_values(["task", "context_tokens", "method"], ignore_index=True)
    return out.assign(fetched_pct_offloaded=100 * out.fetched_frac_offloaded)[
        ["method", "task", "context_tokens", "n", "correct", "exact_match", "em_lo", "em_hi", "fetched_pct_offloaded"]]


def core_table(work: Path) -> pd.DataFrame:
    from vrex_lib.estimate.bounded import core_delta
    return core_delta(work)


def sim_table(kv_sizes=(1000, 5000, 10000, 20000, 40000), delta_mw: float | None = None) -> pd.DataFrame:
    from vrex_lib.claims.bounded import fps_energy_frame
    return fps_energy_frame(kv_sizes, delta_mw)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("power")
    p.add_argument("files", nargs="+", type=Path)
    s = sub.add_parser("sim")
    s.add_argument("--core-csv", type=Path, default=None, help="core_delta CSV (adds the blocks' energy)")
    c = sub.add_parser("core")
    c.add_argument("--work", type=Path, default=Path("results/variants/est"))
    c.add_argument("--csv", type=Path, default=None)
    a = ap.parse_args(argv)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 30)
    if a.cmd == "power":
        missing = [str(f) for f in a.files if not f.exists()]
        if missing:
            print(f"bounded_report power: no such study file(s): {', '.join(missing)}", file=sys.stderr)
            return 2
        print(power_table(a.files).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    elif a.cmd == "core":
        df = core_table(a.work)
        if a.csv:
            df.to_csv(a.csv, index=False)
        print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    else:
        delta = float(pd.read_csv(a.core_csv).power_mW.sum()) if a.core_csv else None
        print(sim_table(delta_mw=delta).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
