"""Simulator inputs measured from runtime retrieval traces instead of set by hand.

Notebook 03 runs every method through :mod:`vrex_lib.eval` and leaves one trace per sample under
``<root>/<method>/traces/<task>/<sample>.npz`` (root: ``<results>/eval03/<profile>``; :mod:`vrex_lib.accuracy`).
From them we measure, per method:

* ``retrieved_reuse[(method, stage)]`` = Σ reused / Σ selected over all its traces (pooled, not a mean of
  per-sample fractions): the share of a step's selection that the previous step of the same stage also selected
  in that (layer, KV head) -- what a "Retrieved KV" region holding the last selection (Fig. 12) would not fetch
  again. Measured over *all* selected candidates: our short default-profile caches offload little, so the
  selected-and-offloaded subset the simulator applies it to is too small to measure on its own.
* ``ratio_exponent[method]``: :func:`~vrex_lib.perf.methods.ratio_growth_exponent` over its frame steps (how the
  selected count grows with the candidate count; 1 = constant ratio), with ``ratio_ref_len`` = the largest
  candidate count the fit saw (the retrieval ratios were measured at those lengths).

Without traces (or with schema-1 traces, which predate ``reused``) everything stays at the simulator's neutral
defaults (reuse 0, exponent 1) and the label says so.

    mp = measure_trace_params(results_dir() / "eval03" / "default")
    simulate("vrex8", "resv", "frame", 40_000, **mp.overrides())      # V-Rex's KVMU reuses; GPUs do not
    simulate("agx_orin", "rekv", "frame", 40_000, **mp.overrides("all"))  # every method caches
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

#: Methods whose traces we read (the ones that select; ``full``/``flexgen`` attend to everything).
TRACE_METHODS: tuple[str, ...] = ("resv", "infinigen", "infinigen_p", "rekv")


@dataclass(frozen=True)
class MeasuredParams:
    """retrieved_reuse {(method, stage): fraction}; ratio_exponent {method: exponent}; ratio_ref_len (tokens);
    n_traces {method: count}; fits {method: ratio_growth_exponent dict}; measured: any reuse measured; label."""

    retrieved_reuse: dict = field(default_factory=dict)
    ratio_exponent: dict = field(default_factory=dict)
    ratio_ref_len: int = 4000
    n_traces: dict = field(default_factory=dict)
    fits: dict = field(default_factory=dict)
    measured: bool = False
    label: str = "neutral defaults (no runtime traces): retrieved_reuse 0, ratio_exponent 1"

    @property
    def note(self) -> str:
        """A short form of ``label`` for table notes."""
        if not self.measured:
            return "simulator inputs: retrieved_reuse 0, ratio_exponent 1 (neutral defaults; no reuse-bearing traces)"
        r = self.retrieved_reuse
        return (f"simulator inputs measured from {sum(self.n_traces.values())} runtime traces: ReSV reuse frame "
                f"{r.get(('resv', 'frame'), math.nan):.2f} / text {r.get(('resv', 'text'), math.nan):.2f} in V-Rex's "
                f"KVMU only; selection growth exponent fitted per method")

    def overrides(self, retrieved_cache: str = "kvmu") -> dict:
        """Keyword overrides for :func:`vrex_lib.perf.simulate` / the experiment functions. ``retrieved_cache``:
        'kvmu' (only V-Rex's KVMU caches retrieved KV, the paper's design) or 'all' (GPU baselines too)."""
        if not self.measured:
            return dict(retrieved_cache=retrieved_cache)
        return dict(retrieved_reuse=dict(self.retrieved_reuse), ratio_exponent=dict(self.ratio_exponent),
                    ratio_ref_len=self.ratio_ref_len, retrieved_cache=retrieved_cache)

    def table(self):
        """One row per method: traces, reuse per stage, growth exponent and the candidate range it was fit on."""
        import pandas as pd

        rows = []
        for m, n in self.n_traces.items():
            f = self.fits.get(m, {})
            rows.append(dict(method=m, n_traces=n, reuse_frame=self.retrieved_reuse.get((m, "frame"), math.nan),
                             reuse_text=self.retrieved_reuse.get((m, "text"), math.nan),
                             ratio_exponent=self.ratio_exponent.get(m, math.nan),
                             fit_steps=f.get("n_steps", 0), cand_min=f.get("cand_min", math.nan),
                             cand_max=f.get("cand_max", math.nan)))
        return pd.DataFrame(rows)


def trace_files(root: str | Path, method: str) -> list[Path]:
    """``<root>/<method>/traces/<task>/<sample>.npz``, sorted (variants ``<method>@<tag>`` are not included)."""
    d = Path(root) / method / "traces"
    return sorted(d.glob("*/*.npz")) if d.is_dir() else []


def measure_trace_params(root: str | Path | None = None, profile: str = "default",
                         methods: tuple[str, ...] = TRACE_METHODS) -> MeasuredParams:
    """Measured ``retrieved_reuse`` and ``ratio_exponent`` from the traces under ``root`` (default
    ``<results>/eval03/<profile>``, notebook 03's layout); neutral defaults, labelled, when there are none."""
    import numpy as np

    from ..runtime.trace import load_trace
    from .methods import ratio_growth_exponent

    if root is None:
        from ..config import results_dir

        root = results_dir() / "eval03" / profile
    root = Path(root)
    reuse, expo, n_traces, fits = {}, {}, {}, {}
    models: set[str] = set()
    ref = 0.0
    for m in methods:
        files = trace_files(root, m)
        if not files:
            continue
        traces = [load_trace(f) for f in files]
        n_traces[m] = len(traces)
        models |= {str(t.meta.get("model", "?")) for t in traces}
        for st in ("frame", "text"):
            num = den = 0.0
            for t in traces:
                a, b = t.reuse_counts(st)
                num, den = num + float(a), den + float(b)
            if den > 0:
                reuse[(m, st)] = num / den
        fit = ratio_growth_exponent(traces, "frame")
        fits[m] = fit
        if np.isfinite(fit["exponent"]):
            expo[m] = fit["exponent"]
            ref = max(ref, fit["cand_max"])
    if not n_traces:
        return MeasuredParams(label=f"neutral defaults (no runtime traces under {root}): retrieved_reuse 0, "
                                    "ratio_exponent 1")
    if not reuse:
        return MeasuredParams(n_traces=n_traces, fits=fits, label=(
            f"neutral defaults ({sum(n_traces.values())} traces under {root} record no reuse -- schema 1, "
            "regenerate them with notebook 03): retrieved_reuse 0, ratio_exponent 1"))
    rs = ", ".join(f"{k[0]}/{k[1]} {v:.2f}" for k, v in sorted(reuse.items()) if k[0] == "resv")
    es = ", ".join(f"{k} {v:.2f}" for k, v in sorted(expo.items()))
    label = (f"measured from runtime traces (profile {profile}, model {', '.join(sorted(models))}; "
             f"{', '.join(f'{k}: {v}' for k, v in n_traces.items())} traces): reuse {rs or 'n/a'}; "
             f"growth exponent {es or 'n/a (range too short)'}, from {round(ref) if ref else 'n/a'} tokens")
    return MeasuredParams(retrieved_reuse=reuse, ratio_exponent=expo, ratio_ref_len=round(ref) if ref else 4000,
                          n_traces=n_traces, fits=fits, measured=True, label=label)
