"""The retrieval workload measured where the paper sweeps it (1K-40K tokens): schema ``vrex.workload/1`` files.

    from vrex_lib.workload import measure, load_curves, plot_curves
    path = measure("default", ["resv", "infinigen", "rekv"], [1000, 5000, 10000], "results/data/workload_default.json")
    df = load_curves(path)                       # one row per (method, stage, kv_len)
    plot_curves(path, ["selected_frac", "reuse_frac", "tokens_per_cluster"])

CLI: ``python -m vrex_lib.workload measure --profile default [--long] [--methods ...] [--kv ...] [--out ...]``.
The long streams themselves: :mod:`vrex_lib.streams` (also importable as ``vrex_lib.workload.streams``).
"""
from .. import streams
from .curves import curve_table, load_curves, plot_curves
from .files import read_measurement
from .measure import ALL_METHODS, MEASURE_PROFILES, SCHEMA, MeasureProfile, measure, measure_profile
from .shadow import ShadowPolicy, StepRecord

__all__ = ["ALL_METHODS", "MEASURE_PROFILES", "SCHEMA", "MeasureProfile", "ShadowPolicy", "StepRecord",
           "curve_table", "load_curves", "measure", "measure_profile", "plot_curves", "read_measurement", "streams"]
