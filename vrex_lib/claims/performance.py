"""Comparison with the paper's printed performance numbers (notebook 06 calls it).

* :func:`run_experiments` -- every Fig. 4/13-18 experiment under one Workload;
* :func:`claim_values` -- the reproduced value of each registered claim from those frames;
* :func:`paired_rows` -- two V-Rex rows per claim: the paper-stated workload (claim key as registered) and the
  measured workload (``<key>.measured_workload``; NOT RUN, with the reason, when there is no measurement), each
  with its own verdict; :func:`paired_frame` shows them side by side;
* :func:`implied_rows` -- what the paper's printed latencies imply (effective bandwidths, utilisation, the largest
  selected fraction a link could carry), INFO only: never an input of the simulator;
* :func:`system_power_simulated_rows` -- Table I's system power against the simulated peak, per-point averages beside.

Besides :meth:`vrex_lib.perf.Workload.paper`, the simulator's one labelled path for paper-stated statistics, this is
where the performance claims meet the paper's printed results.
"""
from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from .. import _io, paper, report
from ..config import WORKLOAD_SCHEMA, RuntimeConfig
from ..estimate.core import CorePowerModel
from ..perf import experiments as E
from ..perf.energy import peak_power_w
from ..perf.methods import METHODS
from ..perf.model_ops import LLAMA3_8B, SIGLIP_L384
from ..perf.systems import get_system
from ..perf.validation import validation_frame
from ..perf.workload import Workload
from . import causes as C

MEASURED_SUFFIX = ".measured_workload"


def run_experiments(workload: Workload, kv_sizes=E.KV_SIZES, **overrides) -> dict:
    """Every performance experiment under ``workload``: {'grid', 'sp', 'f14', 'sp14', 'f15', 'f16', 'f17', 'f18'}."""
    grid = E.fig13_grid(kv_sizes=kv_sizes, workload=workload, **overrides)
    f14 = E.fig14(kv_sizes=kv_sizes, workload=workload, **overrides)
    f17, _ = E.fig17(workload=workload, kv_len=max(kv_sizes), **overrides)
    return dict(grid=grid, sp=E.speedups(grid), f14=f14, sp14=E.fig14_speedups(f14).set_index("kv_len"),
                f15=E.fig15(kv_sizes=kv_sizes, workload=workload, **overrides),
                f16=E.fig16(workload=workload, kv_len=max(kv_sizes), **overrides), f17=f17,
                f18=E.fig18(workload=workload, kv_len=max(kv_sizes), **overrides), kv_sizes=tuple(kv_sizes))


def fig4_claims(f4a: pd.DataFrame, f4b: pd.DataFrame, f4c: Mapping) -> dict[str, tuple[float, str]]:
    """{paper key: (value, note)} for Fig. 4 from :func:`vrex_lib.perf.experiments.fig4a` / ``fig4b`` (must include 80K) /
    ``fig4c``. Minutes to 32 GB: the parameters plus the KV growth rate of the table's first rows."""
    if 80000 not in set(f4b.kv_len):
        raise ValueError("fig4_claims: fig4b must include kv_len 80000 (the paper's Fig. 4(b) point)")
    rate_gb_per_min = f4a.kv_gb.iloc[1] / f4a.minutes.iloc[1]
    r80 = f4b[f4b.kv_len == 80000].iloc[0]
    return {"fig4a.kv_gb_per_min": (f4a.kv_gb.iloc[0] / f4a.minutes.iloc[0], ""),
            "fig4a.minutes_to_32gb": ((32 - f4a.params_gb.iloc[0]) / rate_gb_per_min, "32 GB edge memory"),
            "fig4b.prefill_share_80k": (r80.prefill_share, r80.workload_source),
            "fig4b.retrieval_share_of_prefill_80k": (r80.retrieval_share_of_prefill, r80.workload_source),
            "fig4c.ops_retrieval_pct": (f4c["ops_retrieval_pct"], ""),
            "fig4c.lat_prediction_pct": (f4c["lat_prediction_pct"], ""),
            "fig4c.lat_fetch_pct": (f4c["lat_fetch_pct"], ""),
            "fig4c.lat_llm_pct": (f4c["lat_llm_pct"], ""),
            "fig4c.lat_retrieval_text_pct": (f4c["lat_prediction_pct"] + f4c["lat_fetch_pct"], "prediction + fetch")}


def fig4_rows(f4a: pd.DataFrame, f4b: pd.DataFrame, f4c: Mapping, measured_f4b: pd.DataFrame | None = None,
              measured_label: str = "") -> list[report.Row]:
    """Fig. 4's rows (paper-stated workload) with their causes, and the measured workload's 80K prefill share as an
    INFO row when ``measured_f4b`` (a :func:`vrex_lib.perf.experiments.fig4b` frame at 80K) is given."""
    r80 = f4b[f4b.kv_len == 80000].iloc[0]
    why = (f"InfiniGen on A100 at 80K: prefill {r80.prefill:.0f} ms (retrieval {r80.prefill_retrieval:.0f} ms), "
           f"generation {r80.generation:.0f} ms, vision {r80.vision_mlp:.0f} ms; InfiniGenP at 40K: prediction "
           f"{f4c['lat_prediction_pct']:.0f} %, exposed fetch {f4c['lat_fetch_pct']:.0f} %, LLM "
           f"{f4c['lat_llm_pct']:.0f} % of {f4c['latency_ms']:.0f} ms")
    rows = []
    lat = f4c["latency_ms"]
    own = {"fig4a.kv_gb_per_min": "our own derivation of Fig. 4(a) from Llama-3-8B's KV size and 10 tokens/frame "
                                  "(D8): it checks that arithmetic, not a measurement",
           "fig4a.minutes_to_32gb": "our own derivation of Fig. 4(a) (weights + KV growth against 32 GB): it checks "
                                    "that arithmetic, not a measurement"}
    for k, (v, n) in fig4_claims(f4a, f4b, f4c).items():
        r = report.row(k, v, note=n, consistent=own.get(k, ""))
        if r.verdict() == report.FAIL:
            r.cause = "model"
            r.cause_detail = (why if k.startswith(("fig4b", "fig4c")) else
                              f"Llama-3-8B {f4a.params_gb.iloc[0]:.1f} GB of weights + "
                              f"{f4a.kv_gb.iloc[0] / f4a.minutes.iloc[0]:.2f} GB of KV per minute (10 FPS, batch 4)")
            tgt = C.target(r.paper, r.reproduced, r.tolerance)
            if k == "fig4b.prefill_share_80k":
                r.term = C.share_term("InfiniGen prefill at 80K", r80.prefill, r80.total, tgt)
            elif k == "fig4b.retrieval_share_of_prefill_80k":
                r.term = C.share_term("InfiniGen prefill retrieval at 80K", r80.prefill_retrieval, r80.prefill, tgt)
            elif k.startswith("fig4c.lat_"):
                part = dict(fig4c_lat_prediction_pct="kv_prediction", fig4c_lat_fetch_pct="fetch",
                            fig4c_lat_llm_pct="llm")[k.replace(".", "_")]
                share = {"kv_prediction": f4c["lat_prediction_pct"], "fetch": f4c["lat_fetch_pct"],
                         "llm": f4c["lat_llm_pct"]}[part]
                r.term = C.share_term(f"InfiniGenP {part} at 40K", share * lat / 100, lat, tgt)
            else:
                r.term = C.whole_term("our derived value as a whole", r.reproduced, r.paper, r.tolerance, r.unit)
        rows.append(r)
    if measured_f4b is not None:
        m80 = measured_f4b[measured_f4b.kv_len == 80000].iloc[0]
        rows.append(report.info_row("fig4b.prefill_share_80k" + MEASURED_SUFFIX, "prefill share at 80K, measured "
                                    "workload", "%", m80.prefill_share, note=m80.workload_source or measured_label))
    return rows


def _sp_at(sp: pd.DataFrame, plat: str, b: int, st: str) -> pd.DataFrame:
    return sp[(sp.platform == plat) & (sp.batch == b) & (sp.stage == st)].set_index("kv_len")


def claim_values(res: Mapping) -> dict[str, tuple[float, str]]:
    """{paper key: (reproduced value, note)} for every Fig. 13-18 and headline claim the frames can answer."""
    sp, kv = res["sp"], res["kv_sizes"]
    out: dict[str, tuple[float, str]] = {}
    e1f, e1t, e4f = _sp_at(sp, "edge", 1, "frame"), _sp_at(sp, "edge", 1, "text"), _sp_at(sp, "edge", 4, "frame")
    for k in kv:
        out[f"fig13.edge.b1.frame.vrex8_ms.{k // 1000}k"] = (e1f.vrex_ms[k], "")
    out["fig13.edge.b1.fps_min"] = (1000 / e1f.vrex_ms.max(), "")
    out["fig13.edge.b1.fps_max"] = (1000 / e1f.vrex_ms.min(), "")
    out["fig13.edge.b1.tpot_vrex8_min"] = (e1t.vrex_ms.min(), "")
    out["fig13.edge.b1.tpot_vrex8_max"] = (e1t.vrex_ms.max(), "")
    for key, d in (("b1.frame", e1f), ("b4.frame", e4f), ("b1.text", e1t)):
        out[f"fig13.edge.{key}.speedup_min"] = (d.speedup.min(), "")
        out[f"fig13.edge.{key}.speedup_max"] = (d.speedup.max(), "")
        for k in kv:
            out[f"fig13.edge.{key}.energy_gain.{k // 1000}k"] = (d.energy_gain[k], "")
    sp14 = res["sp14"]
    for k in kv:
        out[f"fig14.speedup.{k // 1000}k"] = (sp14.vs_best[k], f"vs the fastest AGX method ({sp14.best_label[k]})")
    out["fig14.speedup_max"] = (sp14.vs_best.max(), "vs the fastest AGX method at each size")
    f15 = res["f15"]
    p15 = f15.pivot(index="kv_len", columns="label", values="fps")
    o15 = f15.pivot(index="kv_len", columns="label", values="oom")
    first = lambda c: (o15.index[o15[c]].min() / 1000) if o15[c].any() else float("nan")  # noqa: E731
    k0 = min(kv)
    out["fig15.vrex_vs_agx_1k"] = (p15.vrex8[k0] / p15.agx_orin[k0], f"at {k0 // 1000}K")
    out["fig15.vrex_vs_oaken_1k"] = (p15.vrex8[k0] / p15.oaken[k0], f"at {k0 // 1000}K")
    out["fig15.vrex_fps_large"] = (p15.vrex8[max(kv)], f"at {max(kv) // 1000}K")
    out["fig15.oaken_first_oom_k"] = (first("oaken"), "")
    out["fig15.agx_first_oom_k"] = (first("agx_orin"), "")
    i16 = res["f16"].set_index("label")
    for k in ("agx_resv", "vrex_kvpu", "vrex_all"):
        out[f"fig16.speedup.{k}"] = (i16.speedup[k], "")
        out[f"fig16.energy_gain.{k}"] = (i16.energy_gain[k], "")
    out["fig16.pred_share.agx_resv"] = (i16.pred_share["agx_resv"], "")
    out["fig16.pred_share.vrex_kvpu"] = (i16.pred_share["vrex_kvpu"], "")
    f17 = res["f17"]
    out["fig17.kvpred_peak_bw_gbs"] = (1000 * f17.kv_prediction.max(), "")
    ret = f17.retrieval[f17.retrieval > 0]
    out["fig17.retrieval_bw_pct_of_dram"] = (100 * ret.mean() * 1e12 / get_system("vrex48").dram_bw
                                             if len(ret) else 0.0, "")
    i18 = res["f18"].set_index("label")
    out["fig18.op_intensity"] = (res["f18"].op_intensity.mean(), "mean of the 3 points, LLM scope")
    for k in ("agx_flexgen", "agx_rekv", "vrex8"):
        out[f"fig18.peak_frac.{k}"] = (i18.roof_frac[k], "% of the roof at the mean intensity")
    out["fig18.vrex_over_flexgen"] = (i18.achieved_tflops["vrex8"] / i18.achieved_tflops["agx_flexgen"], "")
    out.update(server_claims(sp, kv))
    # The abstract's 19.7x: graded where it is printed, the server batch-8 frame-processing panel's maximum.
    s8 = _sp_at(sp, "server", 8, "frame")
    if len(s8):
        k8 = int(s8.speedup.idxmax())
        out["headline.speedup_max"] = (float(s8.speedup[k8]), f"at server b8 frame @{k8 // 1000}K (Fig. 13(b))")
    return out


def server_keys(kv=E.KV_SIZES) -> dict[str, tuple[int, str, str, int | None]]:
    """Every Fig. 13(b) number the panel can print, as {claim key: (batch, stage, quantity, kv or None for a range
    end)}: V-Rex48's latency per frame and TPOT, the speedup over A100+FlexGen and the energy-efficiency gain at each
    size and the speedup range's ends, at batch 1 and 8."""
    out: dict[str, tuple] = {}
    for b in (1, 8):
        for st in ("frame", "text"):
            for k in kv:
                for q in ("vrex48_ms", "speedup", "energy_gain"):
                    out[f"fig13.server.b{b}.{st}.{q}.{k // 1000}k"] = (b, st, q, k)
            out[f"fig13.server.b{b}.{st}.speedup_min"] = (b, st, "speedup", None)
            out[f"fig13.server.b{b}.{st}.speedup_max"] = (b, st, "speedup", None)
    return out


def server_claims(sp: pd.DataFrame, kv=E.KV_SIZES) -> dict[str, tuple[float, str]]:
    """{claim key: (value, note)} of the Fig. 13(b) numbers registered in :mod:`vrex_lib.paper` (:func:`server_keys`;
    the panel is held out of the registry until its printed values are entered, D28): each is then graded and
    attributed like the edge panel, with both workloads."""
    out = {}
    for key, (b, st, q, k) in server_keys(kv).items():
        if key not in paper.REGISTRY:
            continue
        d = _sp_at(sp, "server", b, st)
        if not len(d):
            continue
        col = {"vrex48_ms": "vrex_ms", "speedup": "speedup", "energy_gain": "energy_gain"}[q]
        if k is None:
            v = d[col].min() if key.endswith("_min") else d[col].max()
        elif k in d.index:
            v = d[col][k]
        else:
            continue
        out[key] = (float(v), "")
    return out


def workload_label(res: Mapping) -> str:
    """The distinct workload labels of an experiment run (extrapolations included)."""
    labels = res["grid"].workload_source.unique().tolist()
    return " | ".join(labels)


def printed_values() -> dict[str, float]:
    """The registered paper values the implied-by-printed checks read (:data:`causes.PRINTED_KEYS`)."""
    return {k: paper.value(k) for k in C.PRINTED_KEYS}


#: Performance claims that hold by construction: a match checks arithmetic, not the simulator's timing.
BY_CONSTRUCTION: dict[str, str] = {
    "fig15.oaken_first_oom_k": "capacity arithmetic (weights + 16 streams' KV against the 32 GB LPDDR5): it checks "
                               "the memory accounting, not a measurement",
    "fig15.agx_first_oom_k": "capacity arithmetic (weights + 16 streams' KV against the 32 GB LPDDR5): it checks the "
                             "memory accounting, not a measurement",
}


def paired_rows(paper_claims: Mapping[str, tuple[float, str]], measured_claims: Mapping | None, *,
                paper_label: str, measured_label: str, prefix: str = "", res: Mapping | None = None,
                checks: list | None = None, robust: Mapping | None = None) -> list[report.Row]:
    """Two rows per claim (keys starting with ``prefix``): the paper-stated workload under the registered key and
    the measured workload under ``<key>.measured_workload``. ``measured_claims`` None -> that row is NOT RUN and
    its note says why (``measured_label``). Every FAIL / NOT RUN row gets its cause (:mod:`vrex_lib.claims.causes`):
    ``res`` is the paper-stated experiment run (for the model reasons), ``checks`` the implied-by-printed checks
    (default: :func:`causes.implied_checks` of the printed values), ``robust`` the re-grading of each claim over the
    open choices (:func:`vrex_lib.claims.robustness.regrade`; sets the robustness column and DEPENDS)."""
    checks = C.implied_checks(printed_values()) if checks is None else checks
    printed = printed_values()
    rows = []
    for key, (v, note) in paper_claims.items():
        if not key.startswith(prefix):
            continue
        pv = paper.get(key)
        pr = report.row(key, v, quantity=f"{key} [V-Rex: paper-stated workload]",
                        note="; ".join(x for x in (note, paper_label) if x))
        pr.consistent = BY_CONSTRUCTION.get(key, "")
        C.attribute(pr, key, measured=False, res=res, checks=checks, printed=printed, note=note)
        if robust is not None and key in robust:
            robust[key].apply(pr)
        mv, mnote = (measured_claims.get(key, (None, "")) if measured_claims is not None else (None, ""))
        mr = report.Row(key + MEASURED_SUFFIX, f"{key} [V-Rex: measured workload]", pv.unit, pv.value,
                        None if mv is None else float(mv), pv.tol, pv.at,
                        "; ".join(x for x in (mnote, measured_label) if x))
        C.attribute(mr, key, measured=True, res=None, checks=checks, printed=printed, note=mnote,
                    measured_label=measured_label, twin=pr)
        rows += [pr, mr]
    return rows


def paired_frame(rows: list[report.Row]) -> pd.DataFrame:
    """Side by side: claim, paper, V-Rex with the paper-stated workload + verdict + cause, with the measured one."""
    by: dict[str, dict] = {}
    for r in rows:
        base = r.claim[: -len(MEASURED_SUFFIX)] if r.claim.endswith(MEASURED_SUFFIX) else r.claim
        d = by.setdefault(base, dict(claim=base, unit=r.unit, paper=r.paper))
        col = "measured_wl" if r.claim.endswith(MEASURED_SUFFIX) else "paper_wl"
        v = r.verdict()
        d[col] = r.reproduced
        d[f"{col}_verdict"] = v
        d[f"{col}_cause"] = r.cause if v in (report.FAIL, report.MISSING) else ""
    return pd.DataFrame(list(by.values()), columns=["claim", "unit", "paper", "paper_wl", "paper_wl_verdict",
                                                    "paper_wl_cause", "measured_wl", "measured_wl_verdict",
                                                    "measured_wl_cause"])


def check_profile(path: str | Path, profile: str, flag: str = "-p WORKLOAD_FILE") -> None:
    """Refuse a workload file measured under another profile than the run that reads it (a smoke-profile file
    placed at ``workload_default.json``): a ValueError naming the file, both profiles and the fix. A file that is
    not a workload document is left to its reader's own message."""
    d, _ = _io.read_json_document(Path(path), WORKLOAD_SCHEMA, "workload document")
    if d is None or d.get("profile") == profile:
        return
    model = (d.get("model_identity") or {}).get("summary") or d.get("model", "?")
    raise ValueError(f"{path} holds the workload of the {d.get('profile')!r} profile (model {model}), but this run "
                     f"uses the {profile!r} profile: measure it for {profile} (`python -m vrex_lib.workload measure "
                     f"--profile {profile} --out {path} --replace`, or delete it and run `make reproduce "
                     f"PROFILE={profile}`), or pass {flag} with a {profile}-profile workload file")


def workload_for_claims(path: str | Path, extrapolation: str = "hold",
                        profile: str | None = None) -> tuple[Workload | None, str]:
    """(Workload, label) from a measurement file, or (None, 'NOT RUN: ...') naming the missing file and the fix.
    With ``profile``, a file measured under another profile is refused (a ValueError naming both)."""
    p = Path(path)
    if not p.is_file():
        return None, (f"NOT RUN: no workload measurement at {p}; write it with `python -m vrex_lib.workload measure "
                      f"--out {p}` (the paper-stated column is not a substitute)")
    if profile is not None:
        check_profile(p, profile)
    w = Workload.from_measurement(p, extrapolation=extrapolation)
    need = sorted({(s.ratio_key, st) for s in METHODS.values() for st in ("frame", "text")
                   if s.ratio_key and s.predictor(st) != "none"})
    missing = [f"{m}/{st}" for m, st in need if (m, st) not in w.selected_frac_device]
    if missing:
        return None, (f"NOT RUN: {p} has no selected fraction for {', '.join(missing)}; measure those methods "
                      f"(`python -m vrex_lib.workload measure --methods resv,infinigen,infinigen_p,rekv`)")
    no_off = [f"{m}/{st}" for m, st in need if (m, st) not in w.selected_frac_offloaded]
    if no_off:
        return None, (f"NOT RUN: {p} has no offloaded-tier selected fraction for {', '.join(no_off)} (no checkpoint "
                      f"beyond the KVMU capacity); measure longer contexts (`python -m vrex_lib.workload measure "
                      f"--long`); the on-device share is not substituted")
    return w, w.source()


# ---------------------------------------------------------------------------------------------------------------
# What the printed numbers imply (INFO only).

def implied_rows(system: str = "vrex8", kv_capacity: int | None = None) -> pd.DataFrame:
    """From Fig. 13(a)'s printed V-Rex8 per-frame latencies (batch 1) and the frame-stage speedup range:

    * ``min_dram_gbs``: the DRAM bandwidth needed to read the weights (LLM + vision) and the always-resident recent
      KV once in the printed time, and ``dram_util`` = that / Table I bandwidth (> 1 = physically impossible);
    * ``max_sel_frac_pcie``: the largest selected fraction of the offloaded KV a fully used PCIe link could move
      in the printed time (whole printed time spent fetching; no granule amplification), beside Table II's
      ReSV frame ratio -- where Table II's ratio exceeds it, the printed latency needs cross-step reuse or a
      smaller selection than Table II states;
    * FlexGen at the ends of the speedup range (1K: min, 40K: max): implied FlexGen latency and the PCIe bandwidth
      FlexGen would need to fetch every offloaded token in it (``flexgen_pcie_gbs``; > link = impossible).
    Never an input of the simulator.
    """
    cap = kv_capacity or RuntimeConfig().kv_capacity
    s = get_system(system)
    kvb = LLAMA3_8B.kv_bytes_per_token
    weights = LLAMA3_8B.weight_bytes + SIGLIP_L384.weight_bytes
    t2 = paper.value("table2.ratio.resv.frame.avg") / 100
    lo, hi = paper.value("fig13.edge.b1.frame.speedup_min"), paper.value("fig13.edge.b1.frame.speedup_max")
    rows = []
    kvs = (1000, 5000, 10000, 20000, 40000)
    for k in kvs:
        t_s = paper.value(f"fig13.edge.b1.frame.vrex8_ms.{k // 1000}k") * 1e-3
        resident = min(k, cap) * kvb
        off_bytes = max(0, k - cap) * kvb
        need = (weights + resident) / t_s
        d = dict(kv_len=k, printed_ms=t_s * 1e3, min_dram_gbs=need / 1e9, dram_util=need / s.dram_bw,
                 offloaded_gb=off_bytes / 1e9,
                 max_sel_frac_pcie=(s.pcie_bw * t_s / off_bytes) if off_bytes else float("nan"),
                 table2_resv_frame=t2)
        d["pcie_bound_violated"] = bool(off_bytes and t2 > d["max_sel_frac_pcie"])
        sp = lo if k == kvs[0] else hi if k == kvs[-1] else float("nan")
        if sp == sp:
            tf = t_s * sp
            d.update(implied_flexgen_ms=tf * 1e3, flexgen_pcie_gbs=off_bytes / tf / 1e9 if off_bytes else 0.0,
                     flexgen_pcie_violated=bool(off_bytes / tf > s.pcie_bw))
        rows.append(d)
    return pd.DataFrame(rows)


def implied_info_rows(df: pd.DataFrame) -> list[report.Row]:
    rows = []
    for r in df.itertuples():
        k = f"{r.kv_len // 1000}k"
        rows.append(report.info_row(f"implied.vrex8.dram_util.{k}", "DRAM utilisation the printed V-Rex8 latency "
                                    "needs (weights + resident KV once)", "", r.dram_util,
                                    note=f"{r.min_dram_gbs:.1f} GB/s in {r.printed_ms:.0f} ms; INFO, never fed back"))
        if r.offloaded_gb > 0:
            rows.append(report.info_row(
                f"implied.vrex8.max_sel_frac_pcie.{k}", "largest selected fraction of offloaded KV the PCIe link "
                "moves in the printed time", "", r.max_sel_frac_pcie,
                note=f"Table II ReSV frame {r.table2_resv_frame:.3f}"
                     + ("; PHYSICAL BOUND: Table II's ratio cannot cross the link in the printed time without "
                        "reuse" if r.pcie_bound_violated else "")))
        if not np.isnan(getattr(r, "implied_flexgen_ms", np.nan)):
            rows.append(report.info_row(
                f"implied.agx_flexgen.pcie_gbs.{k}", "PCIe bandwidth AGX+FlexGen needs at the printed speedup", "GB/s",
                r.flexgen_pcie_gbs, note=f"implied FlexGen {r.implied_flexgen_ms:.0f} ms"
                + ("; PHYSICAL BOUND violated (> Table I link)" if r.flexgen_pcie_violated else "")))
    return rows


def implied_check_rows(checks: list | None = None) -> list[report.Row]:
    """One INFO row per implied-by-printed check (:func:`causes.implied_checks`): the bound the paper's own
    inputs put on the printed value, with the printed value and whether it violates it. FAIL rows with cause
    'paper-inconsistent' name these rows."""
    checks = C.implied_checks(printed_values()) if checks is None else checks
    rows, seen = [], set()
    for c in checks:
        key = f"{c.key}.{c.claims[0]}" if c.key in seen else c.key
        seen.add(c.key)
        rows.append(report.info_row(key, f"{'lower' if c.kind == 'min' else 'upper'} bound on {', '.join(c.claims)} "
                                    "from the paper's own inputs", c.unit, c.bound,
                                    note=f"printed {c.printed:g}{' -- VIOLATED' if c.violated else ''}; {c.detail}"))
    return rows


def server_info_rows(res: Mapping, label: str) -> list[report.Row]:
    """The Fig. 13(b) server points (V-Rex48 vs A100) with no registered printed value, as INFO (docs/DECISIONS.md
    D28); a registered one is a claim of :func:`claim_values` instead (:func:`server_claims`)."""
    sp, rows = res["sp"], []
    for b in (1, 8):
        for st in ("frame", "text"):
            d = sp[(sp.platform == "server") & (sp.batch == b) & (sp.stage == st)].set_index("kv_len")
            for kv in res["kv_sizes"]:
                k = f"{kv // 1000}k"
                if f"fig13.server.b{b}.{st}.vrex48_ms.{k}" not in paper.REGISTRY:
                    rows.append(report.info_row(f"fig13.server.b{b}.{st}.{k}", "V-Rex48 latency (held out)",
                                                "ms", d.vrex_ms[kv], note=label))
                if f"fig13.server.b{b}.{st}.speedup.{k}" not in paper.REGISTRY:
                    rows.append(report.info_row(f"fig13.server.b{b}.{st}.speedup.{k}",
                                                "V-Rex48 / A100+FlexGen speedup (held out)", "x", d.speedup[kv]))
    return rows


def validation_rows() -> tuple[list[report.Row], pd.DataFrame]:
    """INFO rows: the DRAM model and simulated decode beside published measurements (ratio = ours / measured)."""
    df = validation_frame()
    rows = [report.info_row(f"validation.{r.key}", r.quantity, "x", r.ratio,
                            note=f"ours {r.simulated:.4g} vs measured {r.measured:.4g} {r.unit} ({r.framework}, "
                                 f"{r.precision}; {r.device}); {r.source}{' [unverified]' if r.unverified else ''}; "
                                 f"{r.note}")
            for r in df.itertuples()]
    return rows, df


def core_scaling_frame(res: Mapping) -> pd.DataFrame:
    """V-Rex8 / V-Rex48 latency ratio per (stage, batch 1, kv), the sustained-DRAM ratio beside it, and what limits
    each system's decoder ops (ms by limiter: dram / dpe / vpe)."""
    g = res["grid"]
    dram_ratio = get_system("vrex48").dram / get_system("vrex8").dram
    rows = []
    for st in ("frame", "text"):
        for kv in res["kv_sizes"]:
            a = _grid(g, "vrex8", st, kv)
            b = _grid(g, "vrex48", st, kv)
            if a is None or b is None:
                continue
            lim = {f"{n}_{k}": r.get(f"limit_{k}_ms", 0.0) for n, r in (("vrex8", a), ("vrex48", b))
                   for k in ("dram", "dpe", "vpe")}
            rows.append(dict(stage=st, kv_len=kv, vrex8_ms=a.latency_ms, vrex48_ms=b.latency_ms,
                             ratio=a.latency_ms / b.latency_ms, vrex8_stall_ms=a.retrieval_exposed_ms,
                             vrex48_stall_ms=b.retrieval_exposed_ms, sustained_dram_ratio=dram_ratio, **lim))
    return pd.DataFrame(rows).fillna(0.0)


def _grid(g: pd.DataFrame, system: str, stage: str, kv: int):
    d = g[(g.system == system) & (g.stage == stage) & (g.kv_len == kv) & (g.batch == 1) & (g.method == "resv")]
    return d.iloc[0] if len(d) else None


def core_scaling_rows(res: Mapping) -> list[report.Row]:
    rows = []
    for r in core_scaling_frame(res).itertuples():
        lim8 = max(("dram", "dpe", "vpe"), key=lambda k: getattr(r, f"vrex8_{k}"))
        lim48 = max(("dram", "dpe", "vpe"), key=lambda k: getattr(r, f"vrex48_{k}"))
        rows.append(report.info_row(f"cores.vrex8_over_vrex48.{r.stage}.{r.kv_len // 1000}k",
                                    f"V-Rex8 / V-Rex48 latency, batch 1 {r.stage}", "x", r.ratio,
                                    note=f"V-Rex8 {r.vrex8_ms:.1f} ms ({lim8}-bound ops, stall "
                                         f"{r.vrex8_stall_ms:.1f} ms), V-Rex48 {r.vrex48_ms:.2f} ms ({lim48}-bound "
                                         f"ops, stall {r.vrex48_stall_ms:.2f} ms); sustained DRAM ratio "
                                         f"{r.sustained_dram_ratio:.2f}"))
    return rows


def granule_rows(df: pd.DataFrame) -> list[report.Row]:
    """INFO rows of :func:`vrex_lib.perf.experiments.fig16_granule_sensitivity`: the ablation's speedups per SSD block size."""
    return [report.info_row(f"fig16.sensitivity.{r.label}.granule_{int(r.granule_bytes)}",
                            f"Fig. 16 {r.label} speedup over AGX+FlexGen with {int(r.granule_bytes)}-B SSD blocks",
                            "x", r.speedup, note=f"{r.latency_ms:.0f} ms; sensitivity, not a choice")
            for r in df.itertuples() if r.label != "agx_flexgen"]


# ---------------------------------------------------------------------------------------------------------------
# System power: Table I against the simulated peak, per-point averages beside.

def system_power_simulated_rows(grid: pd.DataFrame) -> tuple[list[report.Row], pd.DataFrame]:
    """Rows comparing Table I's V-Rex8 / V-Rex48 system power with the simulated peak (:func:`peak_power_w`), and
    a frame of peak parts + the min/mean/max average power over the system's Fig. 13 points."""
    rows, recs = [], []
    for s in ("vrex8", "vrex48"):
        pk = peak_power_w(get_system(s))
        g = grid[grid.system == s]
        recs.append(dict(system=s, **{f"peak_{k}_w": v for k, v in pk.items()}, avg_min_w=g.power_w.min(),
                         avg_mean_w=g.power_w.mean(), avg_max_w=g.power_w.max(),
                         table1_w=paper.value(f"table1.power_w.{s}")))
        r = report.row(f"table1.power_w.{s}", pk["total"],
                       note=f"simulated peak (every unit busy, DRAM streaming, link busy); per-point averages "
                            f"over Fig. 13: {g.power_w.min():.1f}-{g.power_w.max():.1f} W "
                            f"(mean {g.power_w.mean():.1f})")
        if r.verdict() == report.FAIL:
            r.cause = "model"
            r.cause_detail = "peak parts: " + ", ".join(f"{k} {v:.1f} W" for k, v in pk.items() if k != "total")
            r.term = C.sum_term({f"{s} peak {k}": v for k, v in pk.items() if k != "total"}, r.reproduced, r.paper,
                                r.tolerance, "W")
        rows.append(r)
    return rows, pd.DataFrame(recs)


def paper_points() -> dict[str, pd.DataFrame]:
    """The paper's printed points to overlay on reproduced figures (markers), keyed by panel."""
    kv = (1000, 5000, 10000, 20000, 40000)
    f13 = pd.DataFrame(dict(kv_len=kv, latency_ms=[paper.value(f"fig13.edge.b1.frame.vrex8_ms.{k // 1000}k")
                                                   for k in kv]))
    ee = {p: pd.DataFrame(dict(kv_len=kv, energy_gain=[paper.value(f"fig13.edge.{p}.energy_gain.{k // 1000}k")
                                                       for k in kv])) for p in ("b1.frame", "b1.text", "b4.frame")}
    f14 = pd.DataFrame(dict(kv_len=kv, speedup=[paper.value(f"fig14.speedup.{k // 1000}k") for k in kv]))
    f16 = pd.DataFrame(dict(label=["agx_resv", "vrex_kvpu", "vrex_all"],
                            speedup=[paper.value(f"fig16.speedup.{k}") for k in ("agx_resv", "vrex_kvpu", "vrex_all")]))
    f18 = pd.DataFrame(dict(label=["agx_flexgen", "agx_rekv", "vrex8"],
                            roof_frac=[paper.value(f"fig18.peak_frac.{k}") for k in ("agx_flexgen", "agx_rekv",
                                                                                       "vrex8")]))
    return {"fig13.edge.b1.frame": f13, **{f"fig13.energy_gain.{p}": d for p, d in ee.items()}, "fig14": f14,
            "fig16": f16, "fig18": f18,
            "fig13.edge.b1.text.tpot": pd.DataFrame(dict(kv_len=[min(kv), max(kv)],
                                                         latency_ms=[paper.value("fig13.edge.b1.tpot_vrex8_min"),
                                                                     paper.value("fig13.edge.b1.tpot_vrex8_max")]))}


def headline_frame(res_p: Mapping, res_m: Mapping | None, measured_label: str,
                   keys: tuple[str, ...] = ("headline.", "fig13.edge.b1.frame.vrex8_ms", "fig13.edge.b1.tpot",
                                            "fig14.speedup_max", "fig16.speedup", "fig18.peak_frac.vrex8")) -> pd.DataFrame:
    """The headline claims side by side with their verdicts and causes (both workload columns), for the README."""
    cl_p = claim_values(res_p)
    cl_m = claim_values(res_m) if res_m is not None else None
    rows = [r for k in keys for r in paired_rows(cl_p, cl_m, paper_label="", measured_label=measured_label,
                                                  prefix=k, res=res_p)]
    rows += system_power_simulated_rows(res_p["grid"])[0]
    return paired_frame(rows)


def main(argv: list[str] | None = None) -> int:
    """``python -m vrex_lib.claims.performance [--workload FILE] [--extrapolation hold|loglog-fit]``: the headline claims
    (V-Rex8 per-frame latency 1K-40K, FPS, TPOT, speedups, energy-efficiency gains, system power) under the
    paper-stated workload and, with ``--workload``, a measured one, each with its verdict and cause; the V-Rex8 /
    V-Rex48 ratio; core power."""
    ap = argparse.ArgumentParser(prog="python -m vrex_lib.claims.performance", description=main.__doc__)
    ap.add_argument("--workload", default="", help="a vrex.workload/1 file for the measured column")
    ap.add_argument("--extrapolation", default="hold", choices=("hold", "loglog-fit"))
    a = ap.parse_args(argv)
    res_p = run_experiments(Workload.paper())
    wl, label = (workload_for_claims(a.workload, a.extrapolation) if a.workload
                 else (None, "NOT RUN: no --workload file given"))
    res_m = run_experiments(wl) if wl is not None else None
    print(f"paper-stated workload: {workload_label(res_p)}\nmeasured workload: {label}")
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(headline_frame(res_p, res_m, label).round(3).to_string(index=False))
        print(core_scaling_frame(res_p)[["stage", "kv_len", "vrex8_ms", "vrex48_ms", "ratio"]].round(2)
              .to_string(index=False))
    m = CorePowerModel.of()
    print(f"core power: {m.power_w():.3f} W at 0 % activity (leakage {m.leakage_w:.3f} + clock {m.clock_w:.3f}), "
          f"{m.peak_w:.3f} W at 100 %; Table III {paper.value('table3.power_mw.total') / 1e3:.3f} W")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
