"""Why a performance claim FAILs or is NOT RUN, computed from the printed numbers and our simulation.

Causes (:data:`vrex_lib.report.CAUSES`):

* ``paper-inconsistent`` -- an implied-by-printed check (:func:`implied_checks`) shows the printed value lies outside
  what the paper's own stated inputs allow (Table I's link, Table II's ratios, the printed latencies) for EVERY
  admissible value of the choices the check depends on (:data:`CHECK_CHOICES`: the KVMU capacity D6 and the
  frame-to-frame reuse D221), and ours is within the claim's tolerance of the bound (:func:`inconsistency`);
  ``check`` names the check's INFO row. A check whose contradiction vanishes for part of those ranges is evidence
  of nothing: it never makes a row DEPENDS (only our simulator can, :mod:`vrex_lib.claims.robustness`, D400);
* ``stand-in-workload`` -- the measured-workload column FAILs where the paper-stated column PASSes (a real
  counterfactual: the workload alone flips the verdict);
* ``model`` -- ours, with the responsible term of the simulation, its share, the value it would need for a PASS and
  whether that value is plausible (:func:`perf_term`), and a one-line reason (:func:`model_reason`);
* ``not-run`` -- the measured-workload column without a measurement file.

No paper value is read here: the printed numbers arrive as ``printed`` ({registered key: value}) from
:mod:`vrex_lib.claims.performance`.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .. import choices, paper, report
from ..config import RuntimeConfig
from ..perf.model_ops import LLAMA3_8B, decoder_layer_ops, lm_head_op
from .need import part_term, target, whole_term

GB = 1e9
#: The registered paper keys :func:`implied_checks` needs (claims.performance reads them).
PRINTED_KEYS: tuple[str, ...] = (
    *(f"fig13.edge.b1.frame.vrex8_ms.{k}k" for k in (1, 5, 10, 20, 40)), "fig13.edge.b1.frame.speedup_max",
    "fig13.edge.b1.tpot_vrex8_max", "fig13.edge.b1.text.speedup_max", "fig14.speedup.40k",
    "fig15.vrex_fps_large", "fig16.speedup.agx_resv", "fig16.speedup.vrex_kvpu", "fig16.speedup.vrex_all",
    "fig18.op_intensity", "fig18.peak_frac.vrex8", "fig18.vrex_over_flexgen", "fig13.edge.b1.fps_min",
    "table2.ratio.resv.frame.avg", "table2.ratio.resv.text.avg", "coin.avg_case.frames",
    "coin.avg_case.answer_tokens")
#: The open choices the implied-by-printed checks depend on (:mod:`vrex_lib.choices`).
CHECK_CHOICES: tuple[str, ...] = ("D6", "D221")


@dataclass(frozen=True)
class ImpliedCheck:
    """What the paper's stated inputs allow for ``claims``: ``bound`` is a lower ('min') or upper ('max') limit
    on the printed value; ``key`` is the INFO row that shows it."""

    key: str
    claims: tuple[str, ...]
    printed: float
    bound: float
    kind: Literal["min", "max"]
    unit: str
    detail: str

    @property
    def violated(self) -> bool:
        return self.printed < self.bound if self.kind == "min" else self.printed > self.bound

    def ours_on_allowed_side(self, ours: float) -> bool:
        """True when ours moved from the printed value toward what the inputs allow."""
        return ours > self.printed if self.kind == "min" else ours < self.printed

    def near_bound(self, ours: float, tol: paper.Tolerance) -> bool:
        """True when ours is within ``tol`` of the bound (or beyond it on the allowed side): only then does the
        bound explain our miss; ours far from it on the printed side is a miss of our own."""
        if tol.check(self.bound, ours):
            return True
        return ours >= self.bound if self.kind == "min" else ours <= self.bound


_ASSUME: dict = {}


def _edge_inputs() -> dict:
    cap = _ASSUME.get("D6", RuntimeConfig().kv_capacity)
    return dict(link=paper.spec("table1.pcie_bw_gbs.edge") * GB, dram=paper.spec("table1.dram_bw_gbs.edge") * GB,
                cap=cap, kvb=LLAMA3_8B.kv_bytes_per_token, reuse=float(_ASSUME.get("D221", 0.0)))


def _min_link_s(kv: int, ratio: float, batch: int = 1) -> float:
    """Seconds the Table I edge link needs to move ``ratio`` of the offloaded KV of ``batch`` streams (with the
    assumed frame-to-frame reuse D221 taken off, no granule amplification, no dense layer: the least the paper's
    own inputs require)."""
    e = _edge_inputs()
    return batch * max(0, kv - e["cap"]) * e["kvb"] * ratio * (1.0 - e["reuse"]) / e["link"]


def _llm_flops(kv: int, ratio: float, batch: int) -> float:
    """LLM-scope FLOPs of one frame step (decoder + LM head) with ``ratio`` of the candidates attended."""
    window = 10
    attended = window + ratio * (kv - window) + 10
    ops = decoder_layer_ops(LLAMA3_8B, 10, batch, attended)
    return LLAMA3_8B.n_layers * sum(o.flops for o in ops) + lm_head_op(LLAMA3_8B, batch).flops


def _link_checks(pv: Mapping[str, float]) -> list[ImpliedCheck]:
    t2 = pv["table2.ratio.resv.frame.avg"] / 100
    t_min = _min_link_s(40000, t2)
    out = [ImpliedCheck("implied.vrex8.max_sel_frac_pcie.40k",
                        ("fig13.edge.b1.frame.vrex8_ms.40k",), pv["fig13.edge.b1.frame.vrex8_ms.40k"], t_min * 1e3,
                        "min", "ms", f"moving Table II's {t2:.1%} of the offloaded KV over the 4 GB/s link takes "
                        f">= {t_min * 1e3:.0f} ms at 40K; the printed 254 ms lets it carry at most 21.6 %")]
    for key in ("fig13.edge.b1.fps_min",):
        out.append(ImpliedCheck("implied.vrex8.max_sel_frac_pcie.40k", (key,), pv[key], 1.0 / t_min, "max", "FPS",
                                f"at 40K the link allows at most {1 / t_min:.2f} FPS with Table II's {t2:.1%}"))
    fg_ms = pv["fig13.edge.b1.frame.vrex8_ms.40k"] * pv["fig13.edge.b1.frame.speedup_max"]
    out.append(ImpliedCheck("implied.vrex8.max_sel_frac_pcie.40k", ("fig13.edge.b1.frame.speedup_max",),
                            pv["fig13.edge.b1.frame.speedup_max"], fg_ms / (t_min * 1e3), "max", "x",
                            f"printed AGX+FlexGen {fg_ms:.0f} ms over V-Rex8's link minimum {t_min * 1e3:.0f} ms"))
    for bar in ("vrex_kvpu", "vrex_all"):
        k = f"fig16.speedup.{bar}"
        out.append(ImpliedCheck(f"implied.fig16.max_speedup.{bar}", (k,), pv[k], fg_ms / (t_min * 1e3), "max", "x",
                                f"Fig. 13's AGX+FlexGen {fg_ms:.0f} ms at 40K over the {t_min * 1e3:.0f} ms the link "
                                f"needs for Table II's {t2:.1%}: at most {fg_ms / (t_min * 1e3):.2f}x"))
    t16 = _min_link_s(40000, t2, batch=16)
    out.append(ImpliedCheck("implied.fig15.max_fps_b16.40k", ("fig15.vrex_fps_large",), pv["fig15.vrex_fps_large"],
                            1.0 / t16, "max", "FPS", f"16 streams x Table II's {t2:.1%} of the offloaded KV at 40K "
                            f"take >= {t16:.1f} s on the link: at most {1 / t16:.2f} FPS per stream"))
    return out


def _fig14_fig18_checks(pv: Mapping[str, float]) -> list[ImpliedCheck]:
    v_f, tp = pv["fig13.edge.b1.frame.vrex8_ms.40k"], pv["fig13.edge.b1.tpot_vrex8_max"]
    fr, ans = pv["coin.avg_case.frames"], pv["coin.avg_case.answer_tokens"]
    sf, st = pv["fig13.edge.b1.frame.speedup_max"], pv["fig13.edge.b1.text.speedup_max"]
    e2e = (fr * v_f * sf + ans * tp * st) / (fr * v_f + ans * tp)
    out = [ImpliedCheck("implied.fig14.min_e2e_vs_flexgen.40k", (k,), pv[k], e2e, "min", "x",
                        f"Fig. 13's 40K maxima ({sf}x per frame, {st}x per token) weight to {e2e:.1f}x over "
                        f"AGX+FlexGen for {fr:.0f} frames + {ans:.0f} answer tokens; the printed {pv[k]}x is below "
                        f"it (over the fastest AGX method, D27, the printed numbers cannot check it)")
           for k in ("fig14.speedup.40k",)]
    e, b = _edge_inputs(), 4
    t2 = pv["table2.ratio.resv.frame.avg"] / 100
    roof = pv["fig18.op_intensity"] * e["dram"]
    t_link = _min_link_s(40000, t2, batch=b)
    max_frac = 100 * _llm_flops(40000, t2, b) / t_link / roof
    out.append(ImpliedCheck("implied.fig18.max_roof_frac.vrex8", ("fig18.peak_frac.vrex8",),
                            pv["fig18.peak_frac.vrex8"], max_frac, "max", "%",
                            f"at 40K, batch 4 the link needs >= {t_link:.2f} s for Table II's {t2:.1%}, so V-Rex8 "
                            f"reaches at most {max_frac:.1f} % of the {roof / 1e12:.2f}-TFLOPS roof at "
                            f"{pv['fig18.op_intensity']} Op/B (as a share of the 53.3-TFLOPS peak that roof is only "
                            f"{100 * roof / 53.3e12:.1f} %)"))
    fg = pv["fig18.peak_frac.vrex8"] / pv["fig18.vrex_over_flexgen"]
    out.append(ImpliedCheck("implied.fig18.max_roof_frac.vrex8", ("fig18.vrex_over_flexgen",),
                            pv["fig18.vrex_over_flexgen"], max_frac / fg, "max", "x",
                            f"V-Rex8's link-limited {max_frac:.1f} % over FlexGen's printed {fg:.1f} %"))
    return out


def implied_checks(printed: Mapping[str, float], **assume) -> list[ImpliedCheck]:
    """Every implied-by-printed check (violated or not); ``printed`` holds :data:`PRINTED_KEYS`. ``assume``: values of
    :data:`CHECK_CHOICES` ('D6' capacity in tokens, 'D221' reuse fraction) in place of the artifact's defaults."""
    missing = [k for k in PRINTED_KEYS if k not in printed]
    if missing:
        raise KeyError(f"implied_checks: printed values missing for {', '.join(missing)}")
    bad = [k for k in assume if k not in CHECK_CHOICES]
    if bad:
        raise ValueError(f"implied_checks: {', '.join(bad)} is not a choice the checks depend on ({CHECK_CHOICES})")
    _ASSUME.clear()
    _ASSUME.update(assume)
    try:
        return _link_checks(printed) + _fig14_fig18_checks(printed)
    finally:
        _ASSUME.clear()


def _span(values: list) -> str:
    return f"{values[0]:g}" if len(values) == 1 else f"{values[0]:g}-{values[-1]:g}"


def inconsistency(key: str, ours: float | None, tol: paper.Tolerance, printed: Mapping[str, float],
                  checks: list[ImpliedCheck] | None = None) -> tuple[str, str, str, str] | None:
    """Whether a FAIL of ``key`` is the paper's own inconsistency: (label, detail, check id, pass range) or None.

    label 'paper-inconsistent': a check on ``key`` is violated at every admissible value of each choice in
    :data:`CHECK_CHOICES` (each swept with the others at their defaults) and ours is within ``tol`` of the bound;
    label 'depends': ours is near the bound but the violation vanishes for part of a choice's range (pass range:
    'D6 at 16384-32768 tokens', where the printed value is within what the inputs allow); None: no violated check,
    or ours is not near its bound (then the miss is ours: 'model')."""
    if ours is None:
        return None
    base = [c for c in (checks if checks is not None else implied_checks(printed))
            if key in c.claims and c.violated]
    for c in base:
        if not c.near_bound(ours, tol):
            continue
        free: list[str] = []
        for cid in CHECK_CHOICES:
            ch = choices.get(cid)
            ok = [v for v in ch.admissible
                  if not next(x for x in implied_checks(printed, **{cid: v}) if x.key == c.key and key in x.claims)
                  .violated]
            if ok:
                free.append(f"{cid} at {_span(ok)}{' ' + ch.unit if ch.unit else ''}")
        if free:
            return ("depends", f"the printed value contradicts the paper's inputs only for part of the admissible "
                    f"range: it is within what they allow for {'; '.join(free)}. {c.detail}", c.key, "; ".join(free))
        return ("paper-inconsistent", f"holds for every admissible {', '.join(CHECK_CHOICES)}; ours is within "
                f"tolerance of the bound {c.bound:.4g} {c.unit}. {c.detail}", c.key, "")
    return None


# ---- model reasons --------------------------------------------------------------------------------------------

def _grid_row(res: Mapping, system: str, stage: str, kv: int, batch: int = 1, method: str = "resv"):
    g = res["grid"]
    d = g[(g.system == system) & (g.stage == stage) & (g.kv_len == kv) & (g.batch == batch) & (g.method == method)]
    return d.iloc[0] if len(d) else None


def _step_text(r, name: str) -> str:
    return (f"{name} {r.latency_ms:.0f} ms = LLM {r.llm_ms:.0f} + vision {r.vision_mlp_ms:.1f} + prediction "
            f"{r.kv_prediction_ms:.1f} + link stall {r.retrieval_exposed_ms:.0f}")


def _vrex_reason(res: Mapping, stage: str, kv: int) -> str:
    r = _grid_row(res, "vrex8", stage, kv)
    if r is None:
        return f"V-Rex8 not simulated at {kv}"
    return (_step_text(r, f"V-Rex8 at {kv // 1000}K") + " ms; LLM ops DRAM-bound on the shared LPDDR5 model "
            f"(long reads at {r.dram_eff:.1%} of 204.8 GB/s)")


def _speedup_reason(res: Mapping, where: str, stage: str, kv: int, batch: int = 1, edge: bool = True) -> str:
    gpu, acc = ("agx_orin", "vrex8") if edge else ("a100", "vrex48")
    f = _grid_row(res, gpu, stage, kv, batch, "flexgen")
    v = _grid_row(res, acc, stage, kv, batch)
    if f is None or v is None:
        return f"{where}: not simulated"
    host = f"; FlexGen host-bound ops {f.limit_host_ms:.0f} ms" if f.get("limit_host_ms", 0) > 0 else ""
    return f"{where}: {_step_text(f, gpu + '+FlexGen')} ms{host} vs {_step_text(v, acc)} ms"


def _where(note: str) -> tuple[str, int, int, str] | None:
    """(stage, kv, batch, platform) from a note such as 'at edge b1 text @40K ...'."""
    m = re.search(r"(edge|server) b(\d+) (frame|text) @(\d+)K", note)
    return (m.group(3), int(m.group(4)) * 1000, int(m.group(2)), m.group(1)) if m else None


def _fig_reason(key: str, res: Mapping) -> str | None:
    if key.startswith("fig16."):
        d = res["f16"].set_index("label")
        return "40K bars: " + ", ".join(f"{lab} {r.latency_ms:.0f} ms (link stall {r.retrieval_exposed:.0f}, "
                                         f"prediction {r.kv_prediction:.0f})" for lab, r in d.iterrows())
    if key.startswith("fig18."):
        d = res["f18"].set_index("label")
        return "40K batch 4: " + ", ".join(f"{lab} {r.achieved_tflops:.2f} TFLOPS at {r.op_intensity:.1f} Op/B"
                                           for lab, r in d.iterrows())
    if key.startswith("fig15."):
        d = res["f15"]
        kv = d.kv_len.min() if key.endswith("_1k") else d.kv_len.max()
        return f"batch 16 at {kv // 1000}K: " + ", ".join(
            f"{r.label} {'OOM' if r.oom else f'{r.fps:.2f} FPS'} ({r.mem_gb:.0f} GB)"
            for r in d[d.kv_len == kv].itertuples())
    if key.startswith("fig14."):
        s = res["sp14"]
        return "E2E over the fastest AGX method: " + ", ".join(f"{k // 1000}K {r.vs_best:.1f}x ({r.best_label})"
                                                               for k, r in s.iterrows())
    if key.startswith("fig17."):
        d = res["f17"]
        return (f"V-Rex48 layer 1-2 at 40K: KV-prediction peak {d.kv_prediction.max():.3f} TB/s, retrieval mean "
                f"{d.retrieval[d.retrieval > 0].mean() if (d.retrieval > 0).any() else 0:.4f} TB/s")
    return None


def model_reason(key: str, res: Mapping, note: str = "") -> str:
    """One line from the paper-stated simulation saying where our number comes from."""
    r = _fig_reason(key, res)
    if r is not None:
        return r
    kvs = res["kv_sizes"]
    if ".vrex8_ms." in key:
        return _vrex_reason(res, "frame", int(key.rsplit(".", 1)[1][:-1]) * 1000)
    if key.endswith(("fps_min", "fps_max")):
        return _vrex_reason(res, "frame", max(kvs) if key.endswith("fps_min") else min(kvs))
    if "tpot_vrex8" in key:
        return _vrex_reason(res, "text", max(kvs) if key.endswith("max") else min(kvs))
    w = _where(note)
    if w is not None:
        return _speedup_reason(res, note.split(" (", 1)[0], w[0], w[1], w[2], w[3] == "edge")
    if key.startswith("fig13.edge."):
        parts = key.split(".")
        batch, stage = int(parts[2][1:]), parts[3]
        kv = int(parts[-1][:-1]) * 1000 if parts[-1].endswith("k") else (
            min(kvs) if parts[-1].endswith("min") else max(kvs))
        return _speedup_reason(res, f"edge b{batch} {stage} @{kv // 1000}K", stage, kv, batch)
    return "simulated with the paper-stated workload (docs/PERF_MODEL.md); no finer attribution for this claim"


def _measured_source(label: str) -> str:
    """'profile P, model M' from a measured workload's label (:meth:`Workload.source`), else its first clause."""
    m = re.search(r"profile ([\w.-]+), model ([^;(]+)", label)
    return f"profile {m.group(1)}, model {m.group(2).strip()}" if m else label.split(";", 1)[0]


# ---- model terms ----------------------------------------------------------------------------------------------

#: How far one simulator term can move before it needs a device other than the one cited: the one plausibility rule
#: of the tolerance table (:data:`vrex_lib.paper.PLAUSIBLE_TERM`).
PLAUSIBLE_TERM = paper.PLAUSIBLE_TERM
_PARTS = {"llm": "LLM ops", "vision_mlp": "vision tower + MLP", "kv_prediction": "KV prediction",
          "retrieval_exposed": "exposed link stall (KV fetch)"}


def share_term(name: str, part: float, whole: float, target_pct: float, unit: str = "ms") -> dict:
    """The term ``part`` of ``whole`` whose change alone moves its share to ``target_pct``: p' / (whole - p + p')
    = t, so p' = t (whole - p) / (1 - t)."""
    t = target_pct / 100.0
    return part_term(name, part, whole, t * (whole - part) / (1.0 - t) if t < 1 else float("inf"), unit)


def sum_term(parts: Mapping[str, float], ours: float, printed: float, tol: paper.Tolerance, unit: str) -> dict:
    """The part of a sum (``parts`` add up to ``ours``) whose change alone brings the sum to the tolerance edge, with
    the smallest change."""
    tgt = target(printed, ours, tol)
    return _best([part_term(n, v, ours, v + tgt - ours, unit) for n, v in parts.items() if v > 0])


def _best(cands: list[dict]) -> dict:
    """The candidate needing the smallest change (a positive value first)."""
    def cost(e: dict) -> float:
        f = e["factor"]
        return abs(math.log(f)) if 0 < f < float("inf") else float("inf")
    return min(cands, key=cost)


def _latency_terms(r, system: str, target_ms: float) -> list[dict]:
    """Each term of one simulated step, with the value it needs for the step to take ``target_ms``."""
    lat = float(r.latency_ms)
    out = []
    for k, name in _PARTS.items():
        col = f"{k}_ms" if f"{k}_ms" in r.index else k
        part = float(r.get(col, 0.0) or 0.0)
        if part > 0:
            out.append(part_term(f"{system} {name}", part, lat, part + target_ms - lat, "ms"))
    return out


def _point(key: str, note: str) -> tuple[str, str, int, int] | None:
    """(platform, stage, kv, batch) of a Fig. 13 / headline claim, from its key or note."""
    if key == "headline.speedup_max":
        w = _where(note)
        return (w[3], w[0], w[1], w[2]) if w else None
    m = re.match(r"fig13\.(edge|server)\.b(\d+)\.(frame|text)\.", key)
    if m:
        tail = key.rsplit(".", 1)[1]
        kv = int(tail[:-1]) * 1000 if tail.endswith("k") and tail[:-1].isdigit() else (
            1000 if tail.endswith("min") else 40000)
        return (m.group(1), m.group(3), kv, int(m.group(2)))
    m = re.match(r"fig13\.edge\.b1\.(fps|tpot_vrex8)_(min|max)", key)
    if m:
        stage = "frame" if m.group(1) == "fps" else "text"
        big = (m.group(2) == "min") == (m.group(1) == "fps")
        return ("edge", stage, 40000 if big else 1000, 1)
    return None


def _axis_ms(plat: str, stage: str, batch: int) -> float | None:
    """The top of the latency axis the paper plots for this panel (Fig. 13(a)); None where it prints none."""
    key = f"fig13.{plat}.axis_ms.b{batch}.{stage}"
    return paper.value(key) if key in paper.REGISTRY else None


def _side(terms: list[dict], whole_ms: float, needs_whole_ms: float, system: str, axis: float | None) -> list[dict]:
    """Mark each candidate term of one system: ``admissible`` when its factor is within :data:`PLAUSIBLE_TERM` and
    the system's latency it implies stays on the paper's plotted axis."""
    lo, hi, _ = PLAUSIBLE_TERM
    for t in terms:
        t["system"], t["after_ms"], t["axis_ms"] = system, needs_whole_ms, axis
        t["on_axis"] = axis is None or needs_whole_ms <= axis
        t["admissible"] = t["on_axis"] and lo <= t["factor"] <= hi
        if not t["on_axis"]:
            t["plausible"] = (f"{t['plausible'].split(':')[0]}; it would put {system} at {needs_whole_ms:,.0f} ms, "
                              f"off the paper's 0-{axis:,.0f} ms axis")
    return terms


def both_sides(ours_side: list[dict], base_side: list[dict]) -> dict:
    """The responsible term of a ratio: the smallest admissible change on either system's side (``admissible``:
    :func:`_side`), else the smallest change that keeps the latency on the plotted axis, else the smallest change;
    its plausibility note names the other side's best candidate too (attribution on both sides, D403)."""
    cands = ours_side + base_side
    pick = _best([c for c in cands if c.get("admissible")] or [c for c in cands if c.get("on_axis", True)] or cands)
    other = [c for c in (base_side if pick in ours_side else ours_side)]
    if other:
        o = _best(other)
        off = ("" if o.get("on_axis", True) else
               f"; {o['system']} at {o['after_ms']:,.0f} ms, off the paper's 0-{o['axis_ms']:,.0f} ms axis")
        pick = dict(pick, plausible=f"{pick['plausible']}; the other side: {o['term']} would need {o['needs']} "
                                    f"(x{o['factor']:.2f}{off})")
    return pick


def perf_term(key: str, ours: float | None, printed: float, tol: paper.Tolerance, res: Mapping | None,
              note: str = "") -> dict | None:
    """The responsible term of a performance FAIL (:func:`vrex_lib.report.model_term`): the simulated part of the
    claim's quantity whose change alone (the others held) brings ours to the nearest edge of the tolerance band
    with the smallest change, its share, that value and whether it is plausible (:data:`PLAUSIBLE_TERM`). For a
    ratio both systems' terms are candidates and a change is judged against the plausibility rule and the paper's
    own plotted axis (:func:`both_sides`). Claims without a recorded breakdown name the simulated quantity as a
    whole (share 1)."""
    if ours is None or res is None or tol.kind == "none":
        return None
    tgt = target(printed, ours, tol)
    pt = _point(key, note)
    if pt is not None and ".energy_gain." not in key:
        plat, stage, kv, batch = pt
        gpu, acc = ("agx_orin", "vrex8") if plat == "edge" else ("a100", "vrex48")
        v, f = _grid_row(res, acc, stage, kv, batch), _grid_row(res, gpu, stage, kv, batch, "flexgen")
        if v is not None:
            if ".vrex8_ms." in key or ".vrex48_ms." in key or "tpot" in key:
                return _best(_latency_terms(v, acc, tgt))
            if "fps" in key:
                return _best(_latency_terms(v, acc, 1000.0 / tgt))
            if "speedup" in key and f is not None:
                axis = _axis_ms(plat, stage, batch)
                v_ms, f_ms = float(f.latency_ms) / tgt, tgt * float(v.latency_ms)
                return both_sides(_side(_latency_terms(v, acc, v_ms), float(v.latency_ms), v_ms, acc, axis),
                                  _side(_latency_terms(f, gpu + "+FlexGen", f_ms), float(f.latency_ms), f_ms,
                                        gpu + "+FlexGen", axis))
    if key.startswith("fig16.speedup.") and "f16" in res:
        d = res["f16"].set_index("label")
        bar, base = d.loc[key.rsplit(".", 1)[1]], d.loc["agx_flexgen"]
        axis = _axis_ms("edge", "frame", 1)  # its AGX+FlexGen bar is Fig. 13(a)'s batch-1 frame step at 40K
        b_ms, f_ms = float(base.latency_ms) / tgt, tgt * float(bar.latency_ms)
        return both_sides(_side(_latency_terms(bar, key.rsplit(".", 1)[1], b_ms), float(bar.latency_ms), b_ms,
                                key.rsplit(".", 1)[1], axis),
                          _side(_latency_terms(base, "agx_flexgen", f_ms), float(base.latency_ms), f_ms,
                                "agx_flexgen", axis))
    return whole_term("our simulated value as a whole", ours, printed, tol,
                      paper.get(key).unit if key in paper.REGISTRY else "")


def attribute(r: report.Row, key: str, *, measured: bool, res: Mapping | None, checks: list[ImpliedCheck],
              printed: Mapping[str, float] | None, note: str = "", measured_label: str = "",
              twin: report.Row | None = None) -> report.Row:
    """Set ``r``'s cause, detail, check, pass range and term from its verdict (the rules of the module docstring).
    ``twin``: for a measured-workload row, its paper-stated row (already attributed)."""
    v = r.graded()
    r.cause, r.cause_detail, r.check, r.pass_range, r.term = "", "", "", "", None
    if v == report.MISSING:
        r.cause, r.cause_detail = "not-run", measured_label or "needs the full profile"
        return r
    if v != report.FAIL:
        return r
    if measured:
        if twin is None or twin.reproduced is None:
            r.cause, r.cause_detail = "not-run", "no paper-stated column to compare the measured workload with"
            return r
        if twin.graded() == report.PASS:
            r.cause = "stand-in-workload"
            r.cause_detail = (f"the paper-stated workload PASSes ({twin.reproduced:.4g}) where the measured one "
                              f"({_measured_source(measured_label)}) gives {r.reproduced:.4g}: the workload alone "
                              "flips the verdict")
            return r
        r.cause, r.check, r.term = twin.cause, twin.check, twin.term
        r.cause_detail = (f"fails with the paper-stated workload too ({twin.reproduced:.4g}), so the workload does "
                          f"not explain it: {twin.cause_detail}")
        return r
    if printed is not None:
        inc = inconsistency(key, r.reproduced, r.tolerance, printed, checks)
        if inc is not None and inc[0] == "paper-inconsistent":
            r.cause, r.cause_detail, r.check = inc[0], inc[1], inc[2]
            return r
    r.term = perf_term(key, r.reproduced, r.paper, r.tolerance, res, note)
    if not r.cause_detail:
        r.cause_detail = model_reason(key, res, note) if res is not None else "ours (docs/PERF_MODEL.md)"
    r.cause = "model"
    return r


def cause_for(key: str, ours: float | None, verdict: str, *, measured: bool, res: Mapping | None,
              checks: list[ImpliedCheck], note: str, measured_label: str = "",
              paper_row: tuple[float | None, float | None, str, str, str] | None = None,
              tol: paper.Tolerance | None = None, printed: Mapping[str, float] | None = None) -> tuple[str, str]:
    """(cause, cause_detail) of one row (:func:`attribute` on a row built from the arguments); ('', '') unless it
    FAILs or is NOT RUN. ``paper_row``: (printed, ours with the paper-stated workload, its verdict, cause,
    cause_detail), for a measured-workload row."""
    if verdict == "NOT RUN":
        return "not-run", measured_label or "needs the full profile"
    if verdict != "FAIL":
        return "", ""
    tol = tol or (paper.get(key).tol if key in paper.REGISTRY else paper.Tolerance("rel", 0.0))
    pval = paper_row[0] if paper_row else (paper.value(key) if key in paper.REGISTRY else 0.0)
    r = report.Row(key, key, "", pval, ours, paper.Tolerance("abs", -1.0))  # graded FAIL whatever ours is
    twin = None
    if measured and paper_row is not None:
        twin = report.Row(key, key, "", paper_row[0], paper_row[1],
                          paper.Tolerance("abs", float("inf")) if paper_row[2] == "PASS" else paper.Tolerance("abs", -1.0),
                          cause=paper_row[3], cause_detail=paper_row[4])
    attribute(r, key, measured=measured, res=res, checks=checks, printed=printed, note=note,
              measured_label=measured_label, twin=twin)
    if not measured and printed is None:
        for c in checks:  # constructed checks, no sweep: the side of the miss and the bound decide
            if key in c.claims and c.violated and ours is not None and c.near_bound(ours, tol):
                return "paper-inconsistent", f"{c.key}: {c.detail}"
    return r.cause, r.cause_detail
