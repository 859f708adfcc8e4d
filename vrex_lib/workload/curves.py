"""Tables and plots of a workload file's context-length curves (selected fraction, reuse, tokens per cluster, ...
against kv length, one line per method). Used by notebook 02."""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .files import read_measurement

# matplotlib.pyplot is imported by plot_curves on first use: importing it fixes a backend, which a notebook's
# set-up (vrex_lib.notebook.setup) chooses first.

CURVE_FIELDS: tuple[str, ...] = ("selected_frac", "selected_frac_offloaded", "reuse_frac", "reuse_frac_all",
                                 "tokens_per_cluster",
                                 "n_clusters", "wics_exit_frac", "offloaded_bytes", "fetched_bytes",
                                 "dre_hcu_cycles", "dre_wtu_cycles", "answer_agreement", "attn_rel_error")

LABELS = {"selected_frac": "selected fraction of candidates", "selected_frac_offloaded": "selected fraction of "
          "offloaded candidates", "reuse_frac": "reuse of previous step's offloaded selection",
          "reuse_frac_all": "reuse of previous step's selection (all tiers)",
          "tokens_per_cluster": "tokens per cluster", "n_clusters": "clusters per (layer, KV head)",
          "wics_exit_frac": "WiCSum exit fraction of a row", "offloaded_bytes": "offloaded KV (bytes)",
          "fetched_bytes": "fetched KV (bytes)"}


def load_curves(path: str | os.PathLike):
    """A workload file as a pandas DataFrame: one row per checkpoint (method, stage, kv_len) with every scalar
    field of the workload file (per-layer lists left out)."""
    d = read_measurement(path)
    rows = [{k: v for k, v in c.items() if k not in ("per_layer", "policy_kwargs")} for c in d["checkpoints"]]
    df = pd.DataFrame(rows)
    df.attrs.update(profile=d["profile"], model=d["model"], vision=d.get("vision"), source=d["stream"]["source"])
    return df.sort_values(["method", "stage", "kv_len"]).reset_index(drop=True)


def curve_table(path: str | os.PathLike, field: str = "selected_frac", stage: str = "frame",
                methods: Sequence[str] | None = None):
    """Wide table: rows = requested kv length (``kv_target``), columns = methods, values = ``field``."""
    df = load_curves(path)
    if field not in df.columns:
        raise ValueError(f"{path}: no field {field!r} in the checkpoints; choose from {', '.join(CURVE_FIELDS)}")
    df = df[df["stage"] == stage]
    if methods is not None:
        df = df[df["method"].isin(list(methods))]
    t = df.pivot_table(index="kv_target", columns="method", values=field, aggfunc="mean", dropna=False)
    t.index.name = "kv_len"
    return t


def plot_curves(path: str | os.PathLike, fields: Sequence[str] = ("selected_frac", "reuse_frac",
                                                                  "tokens_per_cluster"),
                stages: Sequence[str] = ("frame", "text"), methods: Sequence[str] | None = None, axes=None,
                columns: int | None = None):
    """One panel per (stage, field): ``field`` against kv length, a line per method (log x); each stage takes
    rows of at most ``columns`` panels (default: all its fields in one row), so a page-width figure stays legible.
    Returns the figure."""
    import matplotlib.pyplot as plt

    df = load_curves(path)
    if methods is not None:
        df = df[df["method"].isin(list(methods))]
    ncol = min(columns or len(fields), len(fields))
    per_stage = -(-len(fields) // ncol)
    if axes is None:
        fig, axes = plt.subplots(len(stages) * per_stage, ncol, figsize=(4.2 * ncol, 3.0 * len(stages) * per_stage),
                                 squeeze=False)
    else:
        axes = np.asarray(axes).reshape(len(stages) * per_stage, ncol)
        fig = axes.flat[0].figure
    for i, stage in enumerate(stages):
        for k in range(len(fields), per_stage * ncol):  # the empty slots of a stage's last row
            axes[i * per_stage + k // ncol, k % ncol].set_visible(False)
        for j, f in enumerate(fields):
            ax = axes[i * per_stage + j // ncol, j % ncol]
            sub = df[df["stage"] == stage]
            for m, g in sub.groupby("method"):
                g = g.sort_values("kv_len")
                y = g[f].astype(float) if f in g else None
                if y is None or not np.isfinite(y).any():
                    continue
                ax.plot(g["kv_len"], y, marker="o", label=m)
            ax.set_xscale("log")
            ax.set_xlabel("tokens in the KV cache")
            ax.set_title(f"{stage}: {LABELS.get(f, f)}", fontsize=9)
            ax.grid(alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    inch = 1.0 / fig.get_figheight()  # the title and legend take a fixed height above the panels
    if handles:
        fig.legend(handles, labels, loc="upper center", ncol=min(6, len(labels)), fontsize=8,
                   bbox_to_anchor=(0.5, 1 - 0.3 * inch))
    fig.suptitle(f"{df.attrs.get('model')} on {df.attrs.get('profile')} profile -- a composition of real footage",
                 fontsize=9, y=1 - 0.05 * inch)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.8 * inch))
    return fig
