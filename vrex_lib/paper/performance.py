"""Performance results: Fig. 4, Fig. 13 (edge only; server held out), Fig. 14-18 and the abstract's claims.

Tolerances: latencies and FPS ±25 %, speedup and energy-efficiency factors ±35 %; percentage shares
±15 points (shares are read off stacked bars). The server rows of Fig. 13(b) are deliberately NOT here: they are
held out as a validation set (docs/DECISIONS.md D28); notebook 06 simulates and plots them without verdicts.
"""
from ._core import INFO, Tolerance, pv

LAT = Tolerance("rel", 0.25, "latency/FPS from a first-principles simulator vs the paper's unreleased one")
FAC = Tolerance("rel", 0.35, "ratio of two simulated systems; baseline GPU efficiency is not published")
SHARE = Tolerance("abs", 15.0, "share of a stacked bar, read off the figure")

# Fig. 4 -- motivation.
F4 = "Fig. 4"
pv("fig4a.kv_gb_per_min", 3.15, "GB/min", "Fig. 4(a) (derived from Llama-3-8B + 10 tokens/frame, docs/DECISIONS.md D8)",
   "derived", Tolerance("rel", 0.05, "arithmetic on public model configs"), note="10 FPS, batch 4")
pv("fig4a.minutes_to_32gb", 5.1, "min", "Fig. 4(a) [DERIVED]; text: 'exceeds GPU memory within minutes'", "derived",
   Tolerance("rel", 0.25, "depends on which weights are counted"))
pv("fig4b.prefill_share_80k", 83, "%", "Fig. 4(b), §II text (InfiniGen on A100, avg COIN case, 80K)", tol=SHARE)
pv("fig4b.retrieval_share_of_prefill_80k", 74, "%", "Fig. 4(b), §II text", tol=SHARE)
pv("fig4c.ops_retrieval_pct", 23, "%", "Fig. 4(c) (A100, 40K, token budget 10K), §III text", tol=SHARE)
pv("fig4c.lat_prediction_pct", 40, "%", "Fig. 4(c)", tol=SHARE)
pv("fig4c.lat_fetch_pct", 39, "%", "Fig. 4(c)", tol=SHARE)
pv("fig4c.lat_llm_pct", 21, "%", "Fig. 4(c)", tol=SHARE)
pv("fig4c.lat_retrieval_text_pct", 85, "%", "§III text (figure shows 40 + 39 = 79 %)", tol=INFO,
   note="internally inconsistent with the figure's 79 %")

# Fig. 13(a) -- edge. V-Rex8 per-frame latency at batch 1 (text §VI.B).
F13 = "Fig. 13(a), §VI.B text"
for _kv, _ms in zip((1000, 5000, 10000, 20000, 40000), (121, 123, 198, 200, 254)):
    pv(f"fig13.edge.b1.frame.vrex8_ms.{_kv // 1000}k", _ms, "ms", F13, tol=LAT)
pv("fig13.edge.b1.fps_min", 3.9, "FPS", "abstract; §VI.B (1000/254 ms)", tol=LAT)
pv("fig13.edge.b1.fps_max", 8.3, "FPS", "abstract; §VI.B (1000/121 ms)", tol=LAT)
pv("fig13.edge.b1.tpot_vrex8_min", 89, "ms", F13, tol=LAT)
pv("fig13.edge.b1.tpot_vrex8_max", 97, "ms", F13, tol=LAT)
for _p, (_lo, _hi) in {"b1.frame": (2.2, 7.3), "b4.frame": (2.1, 13.8), "b1.text": (1.9, 15.1)}.items():
    pv(f"fig13.edge.{_p}.speedup_min", _lo, "x", F13, tol=FAC, note="V-Rex8 vs AGX+FlexGen, over 1K-40K")
    pv(f"fig13.edge.{_p}.speedup_max", _hi, "x", F13, tol=FAC, note="V-Rex8 vs AGX+FlexGen, over 1K-40K")
_EE = {"b1.frame": (5.5, 5.1, 5.0, 7.6, 10.2), "b1.text": (4.3, 5.6, 10.6, 13.2, 18.5),
       "b4.frame": (3.1, 4.2, 4.9, 7.8, 12.8)}
for _p, _vals in _EE.items():
    for _kv, _v in zip((1, 5, 10, 20, 40), _vals):
        pv(f"fig13.edge.{_p}.energy_gain.{_kv}k", _v, "x", "Fig. 13(a) labels; ranges in §VI.B text", tol=FAC,
           note="GOPS/W of V-Rex8 / AGX+FlexGen")

# Fig. 14 -- E2E, average COIN case, AGX Orin vs V-Rex8. The baseline is read as the fastest AGX method at each
# size: at 40K the paper prints 7.3x (frame) and 15.1x (TPOT) over FlexGen, so 5.4x E2E cannot be over FlexGen.
for _kv, _v in zip((1, 5, 10, 20, 40), (2.0, 2.0, 2.6, 3.9, 5.4)):
    pv(f"fig14.speedup.{_kv}k", _v, "x", "Fig. 14 labels", tol=FAC,
       note="mapping of labels to KV sizes inferred (uncertain); baseline = fastest AGX method (our reading)")
pv("fig14.speedup_max", 5.4, "x", "§VI.B text ('up to 5.4x')", tol=FAC)

# Fig. 15 -- batch 16 FPS vs Oaken.
F15 = "Fig. 15, §VI.B text"
pv("fig15.vrex_vs_agx_1k", 1.5, "x", F15, tol=FAC, note="FPS ratio at 1K; AGX runs FlexGen without offload")
pv("fig15.vrex_vs_oaken_1k", 1.1, "x", F15, tol=FAC)
pv("fig15.vrex_fps_large", 7, "FPS", F15 + " ('~7 FPS at large lengths')", tol=LAT, note="read at 40K")
pv("fig15.oaken_first_oom_k", 40, "K tokens", F15 + " ('fails beyond 20K')", tol=Tolerance("abs", 0, "exact"),
   note="first swept KV size at which Oaken is OOM")
pv("fig15.agx_first_oom_k", 10, "K tokens", "Fig. 15 OOM markers", tol=Tolerance("abs", 0, "exact"),
   note="UNCERTAIN placement: AGX at 10K/20K/40K and Oaken at 40K (four markers)")

# Fig. 16 -- ablation at 40K, batch 1, frame processing (baseline AGX+FlexGen presumed).
F16 = "Fig. 16, §VI.B text"
for _k, _s, _e in (("agx_resv", 2.8, 4.4), ("vrex_kvpu", 6.0, 9.2), ("vrex_all", 8.1, 10.2)):
    pv(f"fig16.speedup.{_k}", _s, "x", F16, tol=FAC)
    pv(f"fig16.energy_gain.{_k}", _e, "x", F16, tol=FAC,
       note="4.4x for AGX+ReSV is presumed (uncertain)" if _k == "agx_resv" else "")
pv("fig16.pred_share.agx_resv", 48, "%", F16, tol=SHARE, note="KV prediction share of AGX+ReSV latency")
pv("fig16.pred_share.vrex_kvpu", 0.5, "%", F16, tol=Tolerance("abs", 2.0, "small share"),
   note="KV prediction share of latency with the KVPU")

# Fig. 17 -- V-Rex48 bandwidth over one layer of frame processing.
pv("fig17.kvpred_peak_bw_gbs", 600, "GB/s", "Fig. 17, §VI.C text",
   tol=Tolerance("rel", 0.5, "a spike read off a plot"))
pv("fig17.retrieval_bw_pct_of_dram", 1.0, "%", "§VI.C text ('~1%')", tol=Tolerance("abs", 1.0, "order of magnitude"))

# Fig. 18 -- roofline at 40K, batch 4 (edge).
F18 = "Fig. 18, §VI.D text"
pv("fig18.op_intensity", 15.2, "Op/B", F18, tol=LAT)
pv("fig18.peak_frac.agx_flexgen", 6.6, "%", F18, tol=FAC)
pv("fig18.peak_frac.agx_rekv", 15, "%", F18 + " ('~15%')", tol=FAC)
pv("fig18.peak_frac.vrex8", 71.5, "%", F18, tol=FAC)
pv("fig18.vrex_over_flexgen", 10.8, "x", F18, tol=FAC)

# Abstract headline claims.
AB = "abstract"
pv("headline.fps_min", 3.9, "FPS", AB, tol=LAT)
pv("headline.fps_max", 8.3, "FPS", AB, tol=LAT)
pv("headline.speedup_min", 1.9, "x", AB, tol=FAC, note="edge TPOT low end")
pv("headline.speedup_max", 19.7, "x", AB, tol=FAC, note="the paper's maximum comes from the server comparison")
pv("headline.energy_gain_min", 3.1, "x", AB, tol=FAC, note="edge batch 4 frame @1K")
pv("headline.energy_gain_max", 18.5, "x", AB, tol=FAC, note="edge text @40K")
