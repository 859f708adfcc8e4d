"""Table II (COIN accuracy and retrieval ratios), Fig. 19 (ReSV ablation), Fig. 20 (per-layer/head ratios).

Method keys follow :data:`vrex_lib.retrieval.POLICIES` (``full`` = the VideoLLM-Online row); task keys
follow :mod:`vrex_lib.coin` (step, next, task, procedure, taskprocedure = Step, Next, Task, Proc., Proc.+).
Retrieval ratios are in percent, as printed. Accuracies are COIN Top-1 (%) with VideoLLM-online
(Llama-3-8B); only the ``full`` profile can be compared with them.
"""
from ._core import pv

T2 = "Table II"
TASKS = ("step", "next", "task", "procedure", "taskprocedure")

_ACC = {
    "full": (62.1, 49.0, 92.5, 49.5, 51.6),
    "infinigen": (62.1, 48.3, 92.2, 49.5, 51.0),
    "infinigen_p": (58.6, 45.6, 91.5, 46.4, 50.2),
    "rekv": (59.9, 46.3, 91.3, 47.6, 50.0),
    "resv": (62.0, 47.5, 92.2, 48.2, 50.5),
}
for _m, _vals in _ACC.items():
    for _t, _v in zip(TASKS, _vals):
        pv(f"table2.acc.{_m}.{_t}", _v, "%", T2, qkind="accuracy",
           note="COIN Top-1; VideoLLM-Online row" if _m == "full" else "COIN Top-1",
           point=f"Table II, {_m} row, {_t} column, COIN Top-1")

# Retrieval ratio (%) [frame processing stage, text generation stage]; Avg. first.
_RATIO = {
    "infinigen": ((100, 6.8), (100, 6.2), (100, 6.7), (100, 4.0), (100, 8.5), (100, 8.6)),
    "infinigen_p": ((50.8, 6.8), (50.8, 6.2), (50.8, 6.7), (51.0, 4.0), (50.6, 8.5), (50.7, 8.6)),
    "rekv": ((58.4, 31.2), (59.7, 33.4), (56.7, 34.5), (51.4, 13.6), (61.7, 36.7), (62.5, 37.9)),
    "resv": ((32.7, 2.5), (34.3, 2.4), (32.4, 2.8), (25.1, 1.4), (35.5, 2.9), (36.1, 2.9)),
}
for _m, _pairs in _RATIO.items():
    for _t, (_fr, _tx) in zip(("avg",) + TASKS, _pairs):
        _q = "retrieval_ratio" if _t == "avg" else "shown"
        _why = "" if _t == "avg" else "; per task, shown: the mean over the five tasks is the graded claim"
        for _st, _v in (("frame", _fr), ("text", _tx)):
            pv(f"table2.ratio.{_m}.{_st}.{_t}", _v, "%", T2, qkind=_q,
               note=f"retrieval ratio, {'frame processing' if _st == 'frame' else 'text generation'} stage{_why}",
               point=f"Table II, {_m} row, {_st} stage, {'mean of the five tasks' if _t == 'avg' else _t}")

pv("table2.avg_drop.resv", 0.8, "pt", "§VI.E text; Table II", qkind="accuracy_drop",
   note="'marginal average accuracy drop of 0.8%'; table arithmetic gives 0.86")
pv("table2.max_drop.infinigen_p", 3.4, "pt", "§VI.E text; Table II", qkind="accuracy_drop",
   note="'up to 3.4%'; the table's Step drop is 3.5")

F19 = "Fig. 19"
pv("fig19.speedup.resv_noclust", 1.6, "x", F19, qkind="ratio", note="frame-processing latency at 40K vs "
   "VideoLLM-Online; the hardware is not stated. A latency claim: the performance simulator's (notebook 06)")
pv("fig19.speedup.resv", 9.4, "x", F19, qkind="ratio", note="as above (clustering avoids the full-key score)")
pv("fig19.acc_drop.resv_noclust", 0.3, "pt", F19, qkind="accuracy_drop", note="avg COIN accuracy drop; full profile only")
pv("fig19.acc_drop.resv", 0.8, "pt", F19, qkind="accuracy_drop", note="avg COIN accuracy drop; full profile only")

F20 = "Fig. 20, §VI.E"
pv("fig20.layer_ratio_min", 4.2, "%", F20, qkind="retrieval_ratio",
   note="lowest per-layer ReSV retrieval ratio on one COIN sample video")
pv("fig20.layer_ratio_max", 44.0, "%", F20, qkind="retrieval_ratio",
   note="highest per-layer ratio ('~44.0%')")
pv("fig20.fewer_than_rekv", 3.0, "x", F20, qkind="retrieval_ratio",
   note="ReSV retrieves 3.0x fewer tokens than ReKV on that sample (not derivable from Table II)")
