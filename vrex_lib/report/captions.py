"""One line under each figure of the report: what its marks mean (the paper's printed points, ours with the
paper-stated workload, ours with the measured workload). A figure not listed here gets :func:`caption`'s generic
line naming the notebook that drew it."""
from __future__ import annotations

#: Stars, solid and dashed lines as every performance figure uses them.
_PERF = "stars: the paper's points; solid: ours, paper-stated workload; dashed / ×: ours, measured workload"

CAPTIONS: dict[str, str] = {
    "table1_peak": "Table I peak throughput: the paper's value beside ours (arithmetic on Table I's configuration).",
    "coin_frames": "COIN samples as the runtime sees them: frames at 2 fps, one row per task.",
    "coin_avg_case": "Our COIN fixture's lengths (bars) against the paper's average COIN case (dashed line).",
    "resv_encoder_comparison": "The same frames through each vision encoder: key similarity and ReSV's clusters per "
                               "layer; red dashed: the paper's 32 tokens per cluster.",
    "fig7b_resv_correlation": "Fig. 7(b) on this profile's keys: Hamming distance of the hash bits against cosine "
                              "similarity (paper: a correlation of magnitude 0.8).",
    "fig8_resv_walkthrough": "Fig. 8 walk-through: Hamming distances of 3 frames × 10 tokens and the pairs under "
                             "Th_hp that merge into clusters.",
    "fig9_resv_wicsum_row": "Fig. 9 on one real row: cluster weights in descending order and their cumulative share; "
                            "red dashed: the WiCSum threshold Th_r-wics.",
    "resv_cluster_stats": "Tokens per cluster and the HC table's size per layer; red dashed: the paper's 32 tokens "
                          "and 1.67 %.",
    "resv_sensitivity": "ReSV's retrieval ratio and attention error as each open parameter varies (dotted: an oracle "
                        "with the same budget).",
    "workload_curves": "The measured workload: per method, what retrieval selects and reuses against the KV length "
                       "(this profile's model and footage).",
    "table2_ratios": "Table II: our retrieval ratios (bars) beside the paper's, and the fidelity proxies per method.",
    "fig19": "Fig. 19 ablation, measured: retrieval ratio, work scored per sample and agreement with full attention.",
    "fig20": "Fig. 20 on one sample: ReSV's retrieval ratio per layer (dots: KV heads; grey bars: layer mean) and per "
             "head.",
    "resv_ratio_sweep": "Th_r-wics swept: our frame and text retrieval ratios (dotted: the paper's) and what they cost "
                        "in fidelity.",
    "fig11_bucket_walk": "Fig. 11 on a real row: the WTU's bucket walk (bars), the row total and the threshold it "
                         "exits at (dashed).",
    "dre_early_exit": "Share of a row's clusters the WTU consumes before it exits, and its bucket scans; red dashed: "
                      "the paper's 16 %.",
    "dre_activity": "Switching activity of each DRE block from Icarus VCDs: all signal bits and register bits.",
    "table3_blocks": "Table III per block: the paper (black) beside each of our estimates (log scale).",
    "estimate_by_source": "Core area, power and the DRE's share by estimate source; black dashed: Table III; green: "
                          "±30 %.",
    "estimate_tornado": "Which cited constant moves the estimate most: each at ×0.5 (blue) and ×2 (red).",
    "estimate_dre_activity": "The DRE's share of core power against its utilisation; dashed: the paper's share at "
                             "full activity.",
    "estimate_rtl_sensitivity": "Core power from the RTL's activity as the DPE energy per MAC-cycle varies; dashed: "
                                "Table III; green: ±30 %.",
    "fig4": "Fig. 4 motivation: memory footprint, latency shares and InfiniGenP's overhead; black stars: the paper.",
    "fig13a": f"Fig. 13(a), edge (AGX Orin vs V-Rex8): latency, GOPS/W, energy gain per KV length; {_PERF}; red: 2 FPS.",
    "fig13b": "Fig. 13(b), server (A100 vs V-Rex48), held out: simulated predictions with no paper value; solid: "
              "paper-stated workload, dashed: measured workload.",
    "fig14": f"Fig. 14: latency breakdown per method over V-Rex8's (left), E2E speedup (right); {_PERF}.",
    "fig15_16": f"Fig. 15 batch-16 frame rate per method and Fig. 16's ablation at 40K; {_PERF}.",
    "fig17_ssd_block": "Fig. 17 V-Rex48 DRAM bandwidth over one layer (dashed: the paper's KV-prediction peak) and "
                       "Fig. 16's speedup against the SSD block size (stars: the paper's bars).",
    "fig18": f"Fig. 18 roofline at 40K, batch 4, and the achieved fraction of the roof; {_PERF}.",
    "perf_choice_sweep": "Every open choice over its admissible range, per headline quantity: circles: ours at each "
                         "admissible value; square: the default; dashed: the paper.",
    "summary_verdicts": "Verdicts per table and the FAIL / NOT RUN rows by cause.",
    "design_space_pareto": "The design space around the paper's point: accuracy proxy against latency and area; "
                           "lines: Pareto fronts; the paper's point marked.",
    "retrieval_demand_heatmap": "Long-context retrieval: exact match per needle depth (y) and context length (x), one "
                                "panel per method and task.",
    "retrieval_demand_accuracy_vs_selection": "Accuracy against what each method selects; dotted / dashed: ReSV's "
                                              "Th_r-wics sweeps (streaming / @text).",
    "retrieval_demand_equal_budget": "Equal budget: exact match (left) and needle recall (right) against the fetched "
                                     "share of the offloaded tier, one line per method family and context; star: "
                                     "ReSV at the paper's Th_r-wics 0.3.",
    "retrieval_demand_recall_per_layer": "Recall of the key's digit tokens per layer, one line per method.",
    "resv_mechanism": "ReSV's mechanism on one trial, one point per (layer, KV head): centroid dilution (dashed: 1, "
                      "no dilution), the always-attended share (dashed: Th_r-wics) and one-cluster rows.",
    "retrieval_demand_sim": "Simulated Llama-3-8B text step with each workload (paper-stated, measured, this study's).",
}


def caption(fig_id: str, writer: str = "") -> str:
    """The one-line caption of figure ``fig_id`` (``writer``: the notebook that drew it, for an unlisted figure)."""
    if fig_id in CAPTIONS:
        return CAPTIONS[fig_id]
    return f"Figure `{fig_id}`" + (f", drawn by `notebooks/{writer}`." if writer else ".")
