"""The "Headline numbers" table of docs/PERF_MODEL.md, computed from the simulator (paper-stated workload).

    PYTHONPATH=$PWD VREX_THREADS=1 .venv/bin/python -m vrex_lib.claims.headline_doc            # print the table
    PYTHONPATH=$PWD VREX_THREADS=1 .venv/bin/python -m vrex_lib.claims.headline_doc --write docs/PERF_MODEL.md

``--write`` replaces the table between the doc's ``<!-- headline-numbers:begin -->`` / ``end`` markers (atomic),
so the doc's numbers are this function's. The paper column holds the printed values of :mod:`vrex_lib.paper`.
"""
from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from .. import _io, paper
from ..config import REPO_ROOT
from ..estimate.core import CorePowerModel
from ..perf import Workload
from ..perf.energy import peak_power_w
from ..perf.experiments import headline_ranges, paper_panels
from ..perf.systems import get_system
from .performance import claim_values, core_scaling_frame, run_experiments

BEGIN, END = "<!-- headline-numbers:begin -->", "<!-- headline-numbers:end -->"
KS = ("1k", "5k", "10k", "20k", "40k")


def _paper_range(prefix: str, suffix: str) -> tuple[float, float]:
    """(min, max) of the printed values whose key starts with ``prefix`` and contains ``suffix``."""
    v = [paper.value(k) for k in paper.REGISTRY if k.startswith(prefix) and suffix in k]
    return min(v), max(v)


def _where(d, col: str) -> str:
    """'b1 text @40K': the panel point of ``d``'s maximum of ``col``."""
    r = d.loc[d[col].idxmax()]
    return f"b{int(r.batch)} {r.stage} @{int(r.kv_len) // 1000}K"


def headline_rows(res: Mapping) -> list[tuple[str, str, str]]:
    """(quantity, ours, paper) rows of the doc's table from one :func:`run_experiments` result."""
    cv = {k: float(v) for k, (v, _) in claim_values(res).items()}
    sp, hr = res["sp"], headline_ranges(res["sp"])
    server = paper_panels(sp, ("server",))
    ratio = core_scaling_frame(res).set_index(["stage", "kv_len"]).ratio
    e_lo, e_hi = _paper_range("fig13.edge.", ".energy_gain.")
    s_lo = min(paper.value(k) for k in paper.REGISTRY if k.startswith("fig13.edge.") and k.endswith("speedup_min"))
    core = CorePowerModel.of()
    lat = " / ".join(f"{cv[f'fig13.edge.b1.frame.vrex8_ms.{k}']:.1f}" for k in KS)
    lat_p = " / ".join(f"{paper.value(f'fig13.edge.b1.frame.vrex8_ms.{k}'):g}" for k in KS)
    return [
        ("V-Rex8 per-frame latency, batch 1, 1K / 5K / 10K / 20K / 40K", f"{lat} ms", f"{lat_p} ms"),
        ("FPS range (edge, batch 1)", f"{cv['fig13.edge.b1.fps_min']:.1f}–{cv['fig13.edge.b1.fps_max']:.1f}",
         f"{paper.value('fig13.edge.b1.fps_min'):g}–{paper.value('fig13.edge.b1.fps_max'):g}"),
        ("TPOT range (V-Rex8, batch 1)", f"{cv['fig13.edge.b1.tpot_vrex8_min']:.0f}–"
         f"{cv['fig13.edge.b1.tpot_vrex8_max']:.0f} ms", f"{paper.value('fig13.edge.b1.tpot_vrex8_min'):g}–"
         f"{paper.value('fig13.edge.b1.tpot_vrex8_max'):g} ms"),
        ("speedup over the GPU + FlexGen (Fig. 13 panels)", f"{hr['speedup_min']['value']:.1f}–"
         f"{hr['speedup_max_edge']['value']:.1f}× (edge); {server.speedup.max():.1f}× max (server, "
         f"{_where(server, 'speedup')}); {cv['headline.speedup_max']:.2f}× server batch-8 frame max",
         f"{s_lo:g}–{paper.value('headline.speedup_max'):g}×"),
        ("energy-efficiency gain (edge panels)", f"{hr['energy_gain_min']['value']:.1f}–"
         f"{hr['energy_gain_max']['value']:.1f}×", f"{e_lo:g}–{e_hi:g}×"),
        ("energy-efficiency gain (server panels)", f"{server.energy_gain.min():.1f}–{server.energy_gain.max():.1f}×",
         "—"),
        ("V-Rex8 / V-Rex48 system power, peak", f"{peak_power_w(get_system('vrex8'))['total']:.1f} W / "
         f"{peak_power_w(get_system('vrex48'))['total']:.0f} W",
         f"~{paper.value('table1.power_w.vrex8'):g} W / {paper.value('table1.power_w.vrex48'):g} W"),
        ("V-Rex8 / V-Rex48 latency, batch 1 frame, 1K / 40K", f"{ratio['frame', 1000]:.1f}× / "
         f"{ratio['frame', 40000]:.1f}×", "—"),
        ("core power at 100 % activity", f"{core.peak_w:.2f} W",
         f"{paper.value('table3.power_mw.total') / 1e3:.2f} W (Table III)"),
    ]


def headline_markdown(res: Mapping | None = None) -> str:
    """The doc's table (markdown, with its markers), from ``res`` or a fresh paper-stated run."""
    res = run_experiments(Workload.paper()) if res is None else res
    lines = [BEGIN, "| quantity | ours | paper |", "|---|---|---|"]
    lines += [f"| {q} | {o} | {p} |" for q, o, p in headline_rows(res)]
    return "\n".join(lines + [END])


def check_line(res: Mapping | None = None, path: str | Path | None = None) -> str:
    """One sentence: whether the doc's headline table (``path``, default docs/PERF_MODEL.md) equals the table of
    ``res`` (or of a fresh paper-stated run)."""
    path = Path(path) if path is not None else REPO_ROOT / "docs" / "PERF_MODEL.md"
    text = path.read_text()
    if BEGIN not in text or END not in text:
        return f"{path.name} has no headline-numbers markers"
    if BEGIN + text.split(BEGIN, 1)[1].split(END, 1)[0] + END == headline_markdown(res):
        return f"{path.name}'s headline table matches this run"
    return (f"{path.name}'s headline table differs from this run: `python -m vrex_lib.claims.headline_doc --write "
            f"docs/PERF_MODEL.md` rewrites it from the simulator")


def write_doc(path: str | Path, table: str) -> None:
    """Replace the table between the markers of ``path`` with ``table`` (atomic write)."""
    path = Path(path)
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path}: no '{BEGIN}' ... '{END}' markers; add them where the table belongs")
    head, rest = text.split(BEGIN, 1)
    _io.write_text(path, head + table + rest.split(END, 1)[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrex_lib.claims.headline_doc", description=__doc__.split("\n")[0])
    ap.add_argument("--write", default="", help="a markdown file with the headline-numbers markers to update")
    a = ap.parse_args(argv)
    if a.write and not Path(a.write).is_file():
        raise SystemExit(f"--write {a.write}: no such file (give docs/PERF_MODEL.md)")
    table = headline_markdown()
    if a.write:
        write_doc(a.write, table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
