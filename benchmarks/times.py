"""Per-notebook wall times of one `make reproduce`, beside this machine's calibration.

    python benchmarks/times.py [--results results] [--json results/times.json]

Each executed notebook under ``<results>/executed/`` carries papermill's own ``duration`` (seconds of its kernel's
run); the table lists them longest first with their sum, and the calibration line (docs/DECISIONS.md D364) says what
one core of this machine does, so times taken elsewhere can be compared. `make reproduce` prints this at its end;
`make test` prints its slowest 20 tests itself (pytest ``--durations=20``).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from vrex_lib import _io  # noqa: E402
from vrex_lib.envcheck import calibration_line, machine_calibration  # noqa: E402


def notebook_times_s(results: Path) -> dict[str, float]:
    """``{notebook stem: papermill duration in seconds}`` for every executed notebook that records one."""
    out: dict[str, float] = {}
    for nb in sorted((results / "executed").glob("*.ipynb")):
        try:
            meta = json.loads(nb.read_text()).get("metadata", {}).get("papermill", {})
        except (OSError, ValueError) as e:
            raise SystemExit(f"times: {nb} is not a readable notebook ({e}); rerun `make reproduce`")
        if isinstance(meta.get("duration"), (int, float)):
            out[nb.stem] = float(meta["duration"])
    return out


def workload_time_s(results: Path) -> dict[str, float]:
    """``{'workload measure (<profile>)': seconds}`` from each workload file's own ``elapsed_s`` (the measurement
    the notebooks 02, 03, 06, 08 and 09 wait for)."""
    out: dict[str, float] = {}
    for f in sorted((results / "data").glob("workload_*.json")):
        if f.name.startswith("workload_retrieval_") or f.name.endswith(".partial.json"):
            continue
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(d, dict) and isinstance(d.get("elapsed_s"), (int, float)):
            out[f"workload measure ({d.get('profile', f.stem)})"] = float(d["elapsed_s"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(REPO / "results"), help="the results folder of a `make reproduce` run")
    ap.add_argument("--json", default=None, help="also write the table and the calibration here (atomically)")
    a = ap.parse_args(argv)
    results = Path(a.results)
    if not (results / "executed").is_dir():
        print(f"times: {results}/executed does not exist; run `make reproduce` first (--results names the folder)",
              file=sys.stderr)
        return 2
    times = notebook_times_s(results) | workload_time_s(results)
    cal = machine_calibration()
    print(f"notebook times ({results}, papermill durations and the workload file's elapsed_s, longest first):")
    for name, s in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<28} {s:7.1f} s")
    print(f"  {'sum (one at a time)':<28} {sum(times.values()):7.1f} s")
    print(calibration_line(cal))
    if a.json:
        _io.write_json(a.json, dict(notebook_s=times, sum_s=sum(times.values()), calibration=cal))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
