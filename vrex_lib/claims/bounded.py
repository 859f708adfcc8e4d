"""Beyond the paper: the bounded ReSV (``resv_best``, docs/DECISIONS.md D490-D497) beside the paper's ReSV in the
simulator -- FPS and energy per step on V-Rex8 and V-Rex48, 1K-40K tokens, frame and answer stage (notebook 06).

The simulator's step under the paper-stated workload (:meth:`vrex_lib.perf.Workload.paper`); ``resv_best`` fetches
its budget rule (:mod:`vrex_lib.perf.methods.resv_bounded`), and ``resv_best@equal-fetch`` is the same method at the
paper's ReSV's fetched share (what its prediction costs by itself). The added blocks' energy is their per-core power
delta (notebook 05 §8b, :func:`vrex_lib.estimate.bounded.core_delta`) x cores x step latency, when given. The paper
has no value for any of it: every row is INFO.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .. import report
from ..perf.methods import METHODS
from ..perf.sim import simulate
from ..perf.systems import get_system
from ..resv.bounded import BoundedConfig

KV_SIZES: tuple[int, ...] = (1000, 5000, 10000, 20000, 40000)
SYSTEMS: tuple[str, ...] = ("vrex8", "vrex48")
#: The paper's ReSV and the bounded variant beside it (simulator method names).
PAPER = "resv"
BOUNDED = "resv_best"


def fps_energy_frame(kv_sizes: Sequence[int] = KV_SIZES, delta_mw: float | None = None,
                     systems: Sequence[str] = SYSTEMS) -> pd.DataFrame:
    """One row per (system, stage, kv_len, method) of ``resv``, ``resv_best`` and ``resv_best@equal-fetch``: fps,
    latency_ms, kv_prediction_ms, fetched_pct, energy_mJ (simulator + added blocks), blocks_mJ (NaN when
    ``delta_mw``, the added blocks' power per core in mW, is not given), mem_gb."""
    if delta_mw is not None and not delta_mw >= 0:
        raise ValueError(f"bounded FPS/energy: delta_mw must be >= 0 mW per core, got {delta_mw}")
    out = []
    for system in systems:
        n_cores = get_system(system).n_cores
        for stage in ("frame", "text"):
            for n in kv_sizes:
                base = simulate(system, PAPER, stage, n, workload="paper")
                eq = METHODS[BOUNDED].replace(cfg=BoundedConfig(budget=max(1e-6, base.ratio)))
                runs = {PAPER: base, BOUNDED: simulate(system, BOUNDED, stage, n, workload="paper"),
                        f"{BOUNDED}@equal-fetch": simulate(system, eq, stage, n, workload="paper")}
                for m, r in runs.items():
                    if m == PAPER:
                        blocks_j = 0.0
                    else:
                        blocks_j = float("nan") if delta_mw is None else delta_mw * 1e-3 * n_cores * r.latency_ms * 1e-3
                    out.append(dict(system=system, stage=stage, kv_len=int(n), method=m, fps=r.fps,
                                    latency_ms=r.latency_ms, kv_prediction_ms=r.breakdown_ms["kv_prediction"],
                                    fetched_pct=100 * r.ratio,
                                    energy_mJ=1e3 * (r.energy_J + (0.0 if blocks_j != blocks_j else blocks_j)),
                                    blocks_mJ=1e3 * blocks_j, mem_gb=r.row()["mem_gb"]))
    return pd.DataFrame(out)


def fps_energy_rows(df: pd.DataFrame) -> list[report.Row]:
    """INFO rows (no paper value) of :func:`fps_energy_frame`: FPS and energy per step of ``resv`` and
    ``resv_best`` per (system, stage, kv_len), the other's value and the fetched shares in the note."""
    rows = []
    t = df.set_index(["system", "stage", "kv_len", "method"])
    for (system, stage, n), _ in df.groupby(["system", "stage", "kv_len"], sort=False):
        a, b = t.loc[(system, stage, n, PAPER)], t.loc[(system, stage, n, BOUNDED)]
        blocks = "" if b.blocks_mJ != b.blocks_mJ else f", of it {b.blocks_mJ:.2f} mJ in the added blocks"
        for m, r, other in ((PAPER, a, b), (BOUNDED, b, a)):
            key = f"beyond.bounded.{system}.{stage}.{n // 1000}k.{m}"
            who = "the paper's ReSV" if m == PAPER else "bounded ReSV (beyond the paper)"
            note = (f"{who}; fetched {r.fetched_pct:.2f} % (other: {other.fetched_pct:.2f} %); the other: "
                    f"{other.fps:.2f} FPS, {other.energy_mJ:.0f} mJ" + (blocks if m == BOUNDED else ""))
            rows.append(report.info_row(f"{key}.fps", f"{system} {stage} FPS at {n} tokens, {m}", "FPS", r.fps,
                                        note=note))
            rows.append(report.info_row(f"{key}.energy", f"{system} {stage} energy per step at {n} tokens, {m}",
                                        "mJ", r.energy_mJ, note=note))
    return rows


#: The results each part of :func:`finding` reads: file under ``results/data`` -> the notebook that writes it.
FINDING_INPUTS: dict[str, str] = {"retrieval_demand_power.csv": "09_retrieval_demand",
                                  "bounded_core_delta.csv": "05_area_power", "core_breakdown.csv": "05_area_power",
                                  "bounded_fps_energy.csv": "06_performance"}
_STATEMENT = ("Beyond the paper: a ReSV that retrieves (capped clusters, a 4-bit best-member score, a token-budget "
              "stop; resv_best) -- what it keeps, what it fetches, and what it costs a V-Rex core and the step")


def finding(data: str | Path) -> dict:
    """The report's Findings row on ``resv_best`` (columns of :data:`vrex_lib.claims.findings.COLUMNS`, kind
    'beyond'): exact match against ``full`` on the study's compared trials with the fetched share of the offloaded
    tier (notebook 09), the added blocks' area and power per core against the core's (notebook 05 §8b) and the
    simulated FPS beside the paper's ReSV (notebook 06), from the results folder's ``data/`` (``data``). A missing
    input makes it 'not-run', naming the notebook that writes it."""
    data = Path(data)
    missing = [f"{f} (notebook {nb})" for f, nb in FINDING_INPUTS.items() if not (data / f).is_file()]
    if missing:
        return dict(finding="beyond.resv_best", kind="not-run", statement=_STATEMENT,
                    evidence="needs " + ", ".join(missing))
    pw = pd.read_csv(data / "retrieval_demand_power.csv")
    cells = []
    for (task, n), d in pw[pw.method.isin(["full", f"{BOUNDED}@text"])].groupby(["task", "context_tokens"]):
        r = d.set_index("method")
        if f"{BOUNDED}@text" not in r.index or "full" not in r.index:
            continue
        b, f = r.loc[f"{BOUNDED}@text"], r.loc["full"]
        cells.append(f"{task} {n // 1000}K {int(b.correct)}/{int(b.n)} (full {int(f.correct)}/{int(f.n)}) at "
                     f"{100 * b.fetched_frac_offloaded:.2f} % fetched")
    delta = pd.read_csv(data / "bounded_core_delta.csv")
    core = pd.read_csv(data / "core_breakdown.csv")
    area_pct = 100 * delta.area_um2.sum() / (1e6 * core.area_mm2.sum())
    power_pct = 100 * delta.power_mW.sum() / core.power_mW.sum()
    fe = pd.read_csv(data / "bounded_fps_energy.csv").set_index(["system", "stage", "kv_len", "method"])
    n_max = int(fe.index.get_level_values("kv_len").max())
    fps = "; ".join(f"{s} {st} {n_max // 1000}K: {fe.loc[(s, st, n_max, PAPER)].fps:.2f} -> "
                    f"{fe.loc[(s, st, n_max, BOUNDED)].fps:.2f} FPS"
                    for s in SYSTEMS for st in ("frame", "text") if (s, st, n_max, PAPER) in fe.index)
    evidence = (f"{'; '.join(cells) or 'no compared trials ran it'} (this run's trials; the 40-per-cell run: "
                f"docs/POWER_STUDY.md); per core +{delta.area_um2.sum():,.0f} um2 ({area_pct:+.2f} % of the core) "
                f"and +{delta.power_mW.sum():.2f} mW ({power_pct:+.2f} %); simulated, resv -> resv_best: {fps}")
    return dict(finding="beyond.resv_best", kind="beyond", statement=_STATEMENT, evidence=evidence)
