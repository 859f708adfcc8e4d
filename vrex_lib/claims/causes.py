"""Why a performance claim FAILs or is NOT RUN, computed from the printed numbers and our simulation.

Causes (:data:`vrex_lib.report.CAUSES`):

* ``paper-inconsistent`` -- an implied-by-printed check (:func:`implied_checks`) shows the printed value lies outside
  what the paper's own stated inputs allow (Table I's link, Table II's ratios, the printed latencies), and ours lies
  on the allowed side of it; ``cause_detail`` names the check's INFO row;
* ``stand-in-workload`` -- the measured-workload column FAILs: the profile measured is not the paper's model on COIN;
* ``model`` -- ours, with a one-line reason built from the simulation (:func:`model_reason`);
* ``not-run`` -- the measured-workload column without a measurement file.

No paper value is read here: the printed numbers arrive as ``printed`` ({registered key: value}) from
:mod:`vrex_lib.claims.performance`.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .. import paper
from ..config import RuntimeConfig
from ..perf.model_ops import LLAMA3_8B, decoder_layer_ops, lm_head_op

GB = 1e9
#: The registered paper keys :func:`implied_checks` needs (claims.performance reads them).
PRINTED_KEYS: tuple[str, ...] = (
    *(f"fig13.edge.b1.frame.vrex8_ms.{k}k" for k in (1, 5, 10, 20, 40)), "fig13.edge.b1.frame.speedup_max",
    "fig13.edge.b1.tpot_vrex8_max", "fig13.edge.b1.text.speedup_max", "fig14.speedup.40k", "fig14.speedup_max",
    "fig15.vrex_fps_large", "fig16.speedup.agx_resv", "fig16.speedup.vrex_kvpu", "fig16.speedup.vrex_all",
    "fig18.op_intensity", "fig18.peak_frac.vrex8", "fig18.vrex_over_flexgen", "fig13.edge.b1.fps_min",
    "headline.fps_min", "table2.ratio.resv.frame.avg", "table2.ratio.resv.text.avg", "coin.avg_case.frames",
    "coin.avg_case.answer_tokens")


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


def _edge_inputs() -> dict:
    return dict(link=paper.spec("table1.pcie_bw_gbs.edge") * GB, dram=paper.spec("table1.dram_bw_gbs.edge") * GB,
                cap=RuntimeConfig().kv_capacity, kvb=LLAMA3_8B.kv_bytes_per_token)


def _min_link_s(kv: int, ratio: float, batch: int = 1) -> float:
    """Seconds the Table I edge link needs to move ``ratio`` of the offloaded KV of ``batch`` streams (no reuse,
    no granule amplification, no dense layer: the least the paper's own inputs require)."""
    e = _edge_inputs()
    return batch * max(0, kv - e["cap"]) * e["kvb"] * ratio / e["link"]


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
    for key in ("fig13.edge.b1.fps_min", "headline.fps_min"):
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
           for k in ("fig14.speedup.40k", "fig14.speedup_max")]
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


def implied_checks(printed: Mapping[str, float]) -> list[ImpliedCheck]:
    """Every implied-by-printed check (violated or not); ``printed`` holds :data:`PRINTED_KEYS`."""
    missing = [k for k in PRINTED_KEYS if k not in printed]
    if missing:
        raise KeyError(f"implied_checks: printed values missing for {', '.join(missing)}")
    return _link_checks(printed) + _fig14_fig18_checks(printed)


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


def cause_for(key: str, ours: float | None, verdict: str, *, measured: bool, res: Mapping | None,
              checks: list[ImpliedCheck], note: str, measured_label: str = "",
              paper_row: tuple[float | None, float | None, str, str, str] | None = None) -> tuple[str, str]:
    """(cause, cause_detail) of one row; ('', '') unless it FAILs or is NOT RUN.

    A measured-column FAIL (``measured``) takes the paper-stated column's cause when that column fails on the same
    side of the printed value (then the workload is not what decides it); otherwise it is 'stand-in-workload'.
    ``paper_row``: (printed, ours with the paper-stated workload, its verdict, cause, cause_detail)."""
    if verdict == "NOT RUN":
        return "not-run", measured_label or "needs the full profile"
    if verdict != "FAIL":
        return "", ""
    if measured:
        if paper_row is not None and paper_row[2] == "FAIL" and ours is not None and paper_row[1] is not None:
            printed, p_ours, _, p_cause, p_detail = paper_row
            if (ours - printed) * (p_ours - printed) > 0:
                return p_cause, f"as with the paper-stated workload ({p_ours:.4g}): {p_detail}"
        detail = f"the measured workload comes from {_measured_source(measured_label)}, not VideoLLM-online 8B on COIN"
        if paper_row and paper_row[1] is not None:
            detail += f"; with the paper-stated workload the same claim gives {paper_row[1]:.4g} ({paper_row[2]})"
        return "stand-in-workload", detail
    for c in checks:
        if key in c.claims and c.violated and ours is not None and c.ours_on_allowed_side(ours):
            return "paper-inconsistent", f"{c.key}: {c.detail}"
    return "model", model_reason(key, res, note) if res is not None else "ours (docs/PERF_MODEL.md)"
