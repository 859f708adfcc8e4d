"""The performance figures of notebook 06 (Fig. 13-17 and the open-choice sweep), drawn from the simulator's result
frames, each narrow enough for the report page to show at >= 0.7 of its size (docs/DECISIONS.md D461).

Marks, in every figure: black stars, the paper's printed points; solid lines / bars, ours with the paper-stated
workload (``Workload.paper()``); black dashed lines / crosses, ours with the measured workload. ``res_p`` / ``res_m``
are the result dicts of the paper-stated and measured-workload runs (``res_m`` None when the workload file is
absent); ``pts`` the paper's points by key.
"""
from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .. import choices

if TYPE_CHECKING:  # matplotlib is imported only when a figure is drawn
    from matplotlib.figure import Figure

#: Fig. 13's panels, (platform, batch, stage), by half: (a) the edge systems the paper prints, (b) the server,
#: held out (docs/DECISIONS.md D28).
FIG13_PANELS = {"a": (("edge", 1, "frame"), ("edge", 1, "text"), ("edge", 4, "frame")),
                "b": (("server", 1, "frame"), ("server", 1, "text"), ("server", 8, "frame"))}
REAL_TIME_MS = 500.0  # 2 FPS, VideoLLM-online's frame rate


def _pick(df: pd.DataFrame, plat: str, b: int, st: str) -> pd.DataFrame:
    return df[(df.platform == plat) & (df.batch == b) & (df.stage == st)]


def fig13(half: str, res_p: Mapping, res_m: Mapping | None, pts: Mapping) -> "Figure":
    """Fig. 13(a) (``half`` 'a', edge) or (b) ('b', server, held out): latency, GOPS/W and the energy-efficiency
    gain over the GPU baseline per KV length, one column per (platform, batch, stage)."""
    import matplotlib.pyplot as plt

    panels = FIG13_PANELS[half]
    fig, axes = plt.subplots(3, len(panels), figsize=(13, 9.5), squeeze=False)
    for j, (plat, b, st) in enumerate(panels):
        for lab, d in _pick(res_p["grid"], plat, b, st).groupby("label", sort=False):
            axes[0, j].plot(d.kv_len / 1000, d.latency_ms, marker="o", label=lab)
            axes[1, j].plot(d.kv_len / 1000, d.gops_per_w, marker="o", label=lab)
        spp = _pick(res_p["sp"], plat, b, st)
        axes[2, j].plot(spp.kv_len / 1000, spp.energy_gain, "o-", label="ours, paper-stated workload")
        if res_m is not None:
            gm = _pick(res_m["grid"], plat, b, st)
            gm = gm[gm.method == "resv"]
            axes[0, j].plot(gm.kv_len / 1000, gm.latency_ms, "k--", marker="x", label="V-Rex, measured workload")
            spm = _pick(res_m["sp"], plat, b, st)
            axes[2, j].plot(spm.kv_len / 1000, spm.energy_gain, "k--", marker="x", label="ours, measured workload")
        _fig13_paper(axes[:, j], plat, b, st, pts)
        if st == "frame":
            axes[0, j].axhline(REAL_TIME_MS, color="r", ls=":", label="real time (2 FPS)")
        axes[0, j].set(title=f"{plat}, batch {b}, {st} stage", ylabel="latency (ms)" if j == 0 else None)
        axes[1, j].set(yscale="log", ylabel="GOPS/W" if j == 0 else None)
        axes[2, j].set(xlabel="KV length (K tokens)", ylabel="energy-efficiency gain (×)" if j == 0 else None)
    for ax in (axes[0, 0], axes[0, 1], axes[2, 0]):  # the GOPS/W row repeats the latency row's lines
        ax.legend(fontsize=7)
    fig.suptitle("Fig. 13(a), edge: AGX Orin vs V-Rex8 (simulated; stars: the paper)" if half == "a" else
                 "Fig. 13(b), server: A100 vs V-Rex48 (simulated; held out, no paper value)")
    fig.tight_layout()
    return fig


def _fig13_paper(col, plat: str, b: int, st: str, pts: Mapping) -> None:
    """The paper's printed points of one Fig. 13 column (edge only; the server half is held out)."""
    key = {("edge", 1, "frame"): "fig13.edge.b1.frame", ("edge", 1, "text"): "fig13.edge.b1.text.tpot"}.get(
        (plat, b, st))
    if key in pts:
        p = pts[key]
        col[0].plot(p.kv_len / 1000, p.latency_ms, "k*", ms=12, label="paper V-Rex8" if st == "frame"
                    else "paper TPOT range")
    gain = f"fig13.energy_gain.b{b}.{st}"
    if plat == "edge" and gain in pts:
        col[2].plot(pts[gain].kv_len / 1000, pts[gain].energy_gain, "k*", ms=12, label="paper")


def fig14(f14: pd.DataFrame, kv: Sequence[int], res_p: Mapping, res_m: Mapping | None, pts: Mapping) -> "Figure":
    """Fig. 14: each method's end-to-end latency per KV size split into prefill / generation / vision + MLP
    (colours) and normalised to V-Rex8 (left), the E2E speedup over the fastest AGX method (right)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(1, 2, figsize=(13, 4.2))
    labels = list(f14.label.unique())
    w = 0.8 / len(labels)
    norm = f14[f14.label == "vrex8"].set_index("kv_len").total.reindex(kv).values
    parts = (("prefill", "C0"), ("generation", "C1"), ("vision_mlp", "C2"))
    for i, lab in enumerate(labels):
        d = f14[f14.label == lab].set_index("kv_len").reindex(kv)
        x = np.arange(len(kv)) + i * w
        bottom = np.zeros(len(kv))
        for col, colour in parts:
            ax[0].bar(x, d[col] / norm, w, bottom=bottom, color=colour, alpha=0.4 + 0.6 * i / max(1, len(labels) - 1),
                      edgecolor="white", linewidth=0.3)
            bottom = bottom + d[col].values / norm
    ax[0].set_xticks(np.arange(len(kv)) + 0.4 - w / 2, [f"{k // 1000}K" for k in kv])
    ax[0].legend(handles=[Patch(color=c, label=n.replace("_", " + ").replace("vision + mlp", "vision + MLP"))
                          for n, c in parts], fontsize=8, loc="upper left", title="stage", title_fontsize=8)
    ax[0].set(ylabel="E2E latency / V-Rex8's",
              title="bars left to right (light to dark): " + ", ".join(labels))
    ax[0].title.set_fontsize(8)
    kv_k = np.array(kv) / 1000
    ax[1].plot(kv_k, res_p["sp14"].vs_best.reindex(kv), "o-", label="ours, paper-stated workload")
    if res_m is not None:
        ax[1].plot(kv_k, res_m["sp14"].vs_best.reindex(kv), "kx--", label="ours, measured workload")
    ax[1].plot(pts["fig14"].kv_len / 1000, pts["fig14"].speedup, "k*", ms=12, label="paper")
    ax[1].set(xlabel="KV length (K tokens)", ylabel="E2E speedup over\nthe fastest AGX method", title="Fig. 14 speedup")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def fig15_16(f15: pd.DataFrame, f16: pd.DataFrame, kv: Sequence[int], res_m: Mapping | None, pts: Mapping,
             fps_large_paper: float) -> "Figure":
    """Fig. 15 (batch-16 frame rate per method and KV size, OOM marked) and Fig. 16 (the ablation at 40K)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(13, 4))
    groups = list(f15.groupby("label", sort=False))
    w = 0.8 / max(1, len(groups))
    for i, (lab, d) in enumerate(groups):
        x = np.arange(len(d)) + i * w
        ax[0].bar(x, np.where(d.oom, 0, d.fps), w, label=lab)
        for xi, o in zip(x, d.oom):
            if o:
                ax[0].text(xi, 0.2, "OOM", rotation=90, ha="center", fontsize=8)
    ax[0].plot([len(kv) - 1 + (len(groups) - 1) * w], [fps_large_paper], "k*", ms=12, label="paper V-Rex8, large")
    ax[0].set_xticks(np.arange(len(kv)) + (len(groups) - 1) * w / 2, [f"{k // 1000}K" for k in kv])
    ax[0].set(ylabel="FPS per stream", title="Fig. 15: batch 16, frame stage")
    ax[0].legend(fontsize=8)
    ax[1].bar(f16.label, f16.speedup, label="ours, paper-stated workload")
    if res_m is not None:
        ax[1].plot(res_m["f16"].label, res_m["f16"].speedup, "kx", ms=10, label="ours, measured workload")
    ax[1].plot(pts["fig16"].label, pts["fig16"].speedup, "k*", ms=12, label="paper")
    ax[1].set(ylabel="speedup over AGX + FlexGen", title="Fig. 16: ablation at 40K, batch 1")
    ax[1].tick_params(axis="x", labelrotation=20)
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def fig17_ssd_block(f17: pd.DataFrame, g16: pd.DataFrame, pts: Mapping, kvpred_peak_gbs: float) -> "Figure":
    """Fig. 17 (V-Rex48's DRAM bandwidth over one layer, by consumer) and Fig. 16's speedup against the SSD block."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(13, 4))
    for c in ("overall", "llm", "kv_prediction", "retrieval"):
        ax[0].plot(f17.time_us, f17[c], label=c.replace("_", " "))
    ax[0].axhline(kvpred_peak_gbs / 1000, color="k", ls="--", label="paper KV-prediction peak")
    ax[0].set(xlabel="µs from layer 1's QKV", ylabel="TB/s", title="Fig. 17: V-Rex48 DRAM bandwidth")
    ax[0].legend(fontsize=8)
    for lab, d in g16[g16.label != "agx_flexgen"].groupby("label", sort=False):
        ax[1].plot(d.granule_bytes, d.speedup, "o-", label=lab)
    ax[1].plot([4096] * 2, [pts["fig16"].speedup.min(), pts["fig16"].speedup.max()], "k*", ms=10,
               label="paper bars (4 KiB)")
    ax[1].set(xscale="log", xlabel="SSD block (B)", ylabel="speedup over AGX + FlexGen",
              title="Fig. 16 sensitivity: the SSD block size")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def choice_label(choice_id: str, width: int = 30) -> str:
    """A decision's short name for an axis ('KVMU capacity (D6)'): its name up to the first ':' or ',', wrapped."""
    try:
        name = choices.get(choice_id).name
    except (KeyError, ValueError):
        return choice_id
    short = name.split(":")[0].split(", ")[0].split(" (")[0]
    return textwrap.fill(f"{short} ({choice_id})", width)


def choice_sweep(sw: pd.DataFrame, ncols: int = 3) -> "Figure":
    """Every open choice over its admissible range, one panel per headline quantity: ours at each admissible value
    (circles, joined), the default (square), the paper's value (dashed); the decisions by name on the y axis."""
    import matplotlib.pyplot as plt

    qs = list(sw.quantity.unique())
    ids = list(dict.fromkeys(sw.choice))
    nrows = math.ceil(len(qs) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(14, (0.42 * len(ids) + 1.4) * nrows), squeeze=False,
                             sharey=True)
    for ax, q in zip(axes.flat, qs):
        d = sw[sw.quantity == q]
        for j, cid in enumerate(ids):
            e = d[d.choice == cid]
            ax.plot(e.ours, [j] * len(e), "o-", color="C0", alpha=0.6, label="ours, admissible values" if j == 0
                    else None)
            ax.plot(e[e.default].ours, [j] * int(e.default.sum()), "s", color="C1", label="default" if j == 0
                    else None)
        if d.paper.notna().any():
            ax.axvline(d.paper.dropna().iloc[0], color="k", ls="--", label="paper")
        ax.set_title(textwrap.fill(str(q), 40), fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
    axes[0, 0].set_yticks(range(len(ids)), [choice_label(c) for c in ids])
    axes[0, 0].invert_yaxis()
    for ax in axes[:, 0]:
        ax.tick_params(axis="y", labelsize=7)
    for ax in axes.flat[len(qs):]:
        ax.set_visible(False)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig
