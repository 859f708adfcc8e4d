"""Notebook 09's mechanism figure, drawn from :func:`vrex_lib.longctx.mechanism.probe`'s rows (docs/DECISIONS.md
D461): what the marks mean is in the report's caption (``vrex_lib.report.captions``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..config import ReSVConfig

if TYPE_CHECKING:  # matplotlib is imported only when a figure is drawn
    from matplotlib.figure import Figure


def mechanism_figure(mech: pd.DataFrame, title: str, cfg: ReSVConfig | None = None) -> "Figure":
    """Three panels, one point per (layer, KV head): the key digits' cluster dilution (dashed: 1, an undiluted
    centroid), the always-attended share exactly and as ReSV estimates it (dashed: WiCSum's threshold Th_r-wics --
    above it a row's sinks and recent window alone reach the threshold), and the share of rows that stop at one
    cluster against the cluster's size."""
    import matplotlib.pyplot as plt

    th = (cfg or ReSVConfig()).th_r_wics
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.9))
    axes[0].hist(np.log10(mech.dilution.clip(lower=1.0)), bins=30)
    axes[0].axvline(0.0, color="k", ls="--", lw=1, label="1: no dilution")
    axes[0].set(xlabel="log10 dilution of the key digits' cluster", ylabel="(layer, KV head) pairs",
                title="centroid dilution")
    axes[0].legend(fontsize=8)
    axes[1].scatter(mech.always_exact, mech.always_estimated, s=12)
    axes[1].plot([0, 1], [0, 1], "k:", lw=0.8, label="estimate = exact")
    axes[1].axvline(th, color="r", ls="--", lw=1, label=f"Th_r-wics = {th:g}")
    axes[1].axhline(th, color="r", ls="--", lw=1)
    axes[1].set(xlabel="always-attended share (exact)", ylabel="as ReSV estimates it", xlim=(0, 1.02),
                ylim=(0, 1.02), title="sinks + recent window in the WiCSum total")
    axes[1].legend(fontsize=8, loc="lower right")
    axes[2].scatter(mech.cluster_size, mech.rows_one_cluster, s=12)
    axes[2].set(xscale="log", xlabel="tokens in the key digits' cluster", ylabel="rows stopping at one cluster",
                title="cluster size and one-cluster rows")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
