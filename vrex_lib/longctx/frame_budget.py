"""The frame stage at equal budget (docs/DECISIONS.md D484): every method steered on the same composed stream, its
frame steps compared with full attention's.

    df = frame_budget(model, frames, budget_policies(model_cfg), cfg, lo_tokens=1000, hi_tokens=10000, every=10)

``frames``: (frame tokens [10, hidden], time s) pairs, e.g. the workload measurement's composed real-footage stream
(``vrex_lib.workload.measure._frame_tokens`` of :func:`vrex_lib.streams.build_stream`). Every method and full
attention stream it in lockstep (:func:`vrex_lib.runtime.lockstep`, one batched forward per frame step); at every
``every``-th frame step whose cache holds ``lo_tokens``..``hi_tokens`` tokens, per method: the fetched fraction of the
offloaded tier (host tokens read over the offloaded positions, the consulted layers' KV heads; NaN while nothing is
offloaded yet), the attention
output's relative error against full attention over the same cache (``measure_attn_error``, mean over the consulted
(layer, KV head) cells), and the next-token distribution's KL divergence from full attention's run and top-1
agreement with it. The run is steered: each method's cache is its own, so KL and top-1 include the drift its past
selections caused.

What this proxy shows and does not: it measures how far each method moves the model's frame-stage computation from
full attention at a given fetch, on real footage through the stand-in vision tower (D40) and the 135M language
model. It does not measure COIN accuracy: the next token after a frame is not an answer, the stand-in tower is not
the paper's SigLIP, and a small KL can still flip a later answer (or a large one not); COIN accuracy needs the
paper's model (the ``full`` profile).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ..config import ReSVConfig, RuntimeConfig
from ..methods import METHODS
from ..retrieval import make_policy, takes_resv_config
from ..runtime import Schedule, StreamingSession, drive, lockstep
from .policy import ExactTopK

#: Budgets of the frame-stage curves, per family: exact top-k (fraction of candidates), ReSV streaming (Th_r-wics),
#: InfiniGenP (cap: its fixed top-k share at frames), the bounded ReSV ``resv_best`` (token budget, share of the
#: candidates; beyond the paper, D490), StreamingLLM (window, tokens).
FRAME_BUDGETS: dict[str, tuple] = {"exact": (0.0025, 0.01, 0.04),
                                   **{m.name: m.budget.frame for m in METHODS.values()
                                      if m.budget is not None and m.budget.frame}}

#: The families with a budget knob: ``exact`` and every method whose Budget record has one.
FAMILIES: tuple[str, ...] = ("exact", *(m.name for m in METHODS.values() if m.budget is not None))


class FrameExactTopK(ExactTopK):
    """The exact top-k reference at the frame stage too (the study's is text-only)."""

    retrieves_at_frame = True

    def select(self, layer, query, keys, candidates, stage):
        return super().select(layer, query, keys, candidates, "text")


def budget_policies(resv: ReSVConfig | None = None, budgets: Mapping[str, Sequence] = FRAME_BUDGETS) -> dict:
    """{name: policy} of every family and budget of ``budgets`` (names ``family@value``). A family's value sets the
    option its :class:`~vrex_lib.methods.Budget` record names (ReSV's Th_r-wics through ``resv``, the bounded ReSV's
    ``budget``); a policy configured by a ReSVConfig gets ``resv`` either way."""
    resv = resv or ReSVConfig()
    unknown = sorted(set(budgets) - set(FAMILIES))
    if unknown:
        raise ValueError(f"frame budget: no budget knob for {', '.join(unknown)}: choose from {', '.join(FAMILIES)}")
    out: dict = {}
    for fam, values in budgets.items():
        for v in values:
            if fam == "exact":
                out[f"{fam}@{v:g}"] = FrameExactTopK(frac=float(v))
                continue
            b = METHODS[fam].budget
            if b.option == "th_r_wics":
                out[f"{fam}@{v:g}"] = make_policy(fam, cfg=dataclasses.replace(resv, th_r_wics=float(v)))
            elif takes_resv_config(fam):
                out[f"{fam}@{v:g}"] = make_policy(fam, cfg=resv, **{b.option: b.kind(v)})
            else:
                out[f"{fam}@{v:g}"] = make_policy(fam, **{b.option: b.kind(v)})
    return out


class _Keep(Schedule):
    """Keeps, at every ``every``-th frame step inside [lo, hi] cached tokens: (frame index, trace row, log-probs)."""

    def __init__(self, lo: int, hi: int, every: int):
        super().__init__()
        self.lo, self.hi, self.every, self.kept, self._stop = lo, hi, every, [], False

    @property
    def done(self) -> bool:
        return self._stop

    def after_frame(self, sess, index, time_s, wall_s, cpu_s) -> None:
        n = sess.n_tokens
        if self.lo <= n <= self.hi and index % self.every == 0:
            self.kept.append((index, len(sess.stats) - 1, torch.log_softmax(sess.next_token_logits(), -1)))
        self._stop = n >= self.hi


def _fetched(row: dict, capacity: int) -> float:
    n_host = max(row["n_sink"], row["n_cache"] - capacity) - row["n_sink"]
    app = np.asarray(row["applied"], bool)
    if n_host <= 0 or not app.any():
        return float("nan")
    return float(np.asarray(row["host_tokens"])[app].sum() / (n_host * app.sum() * row["host_tokens"].shape[1]))


def _selected(row: dict) -> float:
    """Selected share of the retrieval candidates over the consulted layers' KV heads (defined before anything is
    offloaded, unlike the fetched fraction)."""
    app = np.asarray(row["applied"], bool)
    sel = np.asarray(row["selected"])
    if row["n_candidates"] <= 0 or not app.any():
        return float("nan")
    return float(sel[app].sum() / (row["n_candidates"] * app.sum() * sel.shape[1]))


def frame_budget(model, frames: Sequence, policies: Mapping[str, object], cfg: RuntimeConfig, *,
                 lo_tokens: int = 1000, hi_tokens: int = 10000, every: int = 10) -> pd.DataFrame:
    """One row per (method, kept frame step): kv_len, selected_frac (of the candidates), fetched_frac_offloaded,
    attn_rel_error, kl_vs_full, top1_agrees (see the module docstring). ``frames`` is a sequence (every session streams it from the start)."""
    if not 0 < lo_tokens <= hi_tokens or every < 1:
        raise ValueError(f"frame budget: need 0 < lo_tokens <= hi_tokens and every >= 1, got {lo_tokens}, "
                         f"{hi_tokens}, {every}")
    names = ["full", *policies]
    cfg = cfg.replace(measure_attn_error=True)
    sessions = [StreamingSession(model, None if n == "full" else policies[n], cfg) for n in names]

    def job(sess):
        sched = _Keep(lo_tokens, hi_tokens, every)
        drive(sess, iter(frames), sched)
        return sched.kept

    kept = dict(zip(names, lockstep([(s, job) for s in sessions])))
    ref = {i: lp for i, _, lp in kept["full"]}
    rows = []
    for n, sess in zip(names[1:], sessions[1:]):
        for i, r, lp in kept[n]:
            row, p = sess.stats[r], ref[i]
            err = np.asarray(row["attn_err"], float)[np.asarray(row["applied"], bool)]
            rows.append(dict(method=n, family=n.split("@")[0], budget=float(n.split("@")[1]), frame=i,
                             kv_len=int(row["n_cache"]), fetched_frac_offloaded=_fetched(row, cfg.kv_capacity),
                             selected_frac=_selected(row),
                             attn_rel_error=float(np.nanmean(err)) if np.isfinite(err).any() else float("nan"),
                             kl_vs_full=float((p.exp() * (p - lp)).sum()), top1_agrees=bool(p.argmax() == lp.argmax())))
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per (family, method): frame steps kept, mean selected and fetched fractions, attention error, KL, top-1."""
    g = df.groupby(["family", "method"], sort=False)
    return g.agg(steps=("frame", "size"), selected_frac=("selected_frac", "mean"),
                 fetched_frac_offloaded=("fetched_frac_offloaded", "mean"),
                 attn_rel_error=("attn_rel_error", "mean"), kl_vs_full=("kl_vs_full", "mean"),
                 top1_agreement=("top1_agrees", "mean")).reset_index()


#: The frame-stage quantities compared at equal fetch: name -> True when higher is better.
_HIGHER_BETTER: dict[str, bool] = {"attn_rel_error": False, "kl_vs_full": False, "top1_agreement": True}


def at_equal_fetch(df: pd.DataFrame, a: str, b: str, x: str = "fetched_frac_offloaded") -> pd.DataFrame:
    """Family ``b``'s points against family ``a``'s curve at the same fetched fraction of the offloaded tier (``x``;
    ``"selected_frac"``: at the same selected share of the candidates).

    ``df``: :func:`frame_budget`'s rows or their :func:`summary`. For every method of ``b`` and every quantity of
    :data:`_HIGHER_BETTER`: ``a``'s value interpolated linearly along ``a``'s mean ``x`` at ``b``'s
    (NaN outside ``a``'s measured range: no extrapolation), and ``b_not_worse`` (``b``'s value at least as good;
    None where ``a`` has no value there)."""
    s = df if "steps" in df.columns else summary(df)
    missing = [f for f in (a, b) if f not in set(s.family)]
    if missing:
        raise ValueError(f"at_equal_fetch: no rows of {', '.join(missing)} (families: {', '.join(s.family.unique())})")
    if x not in ("fetched_frac_offloaded", "selected_frac"):
        raise ValueError(f"at_equal_fetch: x={x!r}: choose fetched_frac_offloaded or selected_frac")
    curve = s[s.family == a].dropna(subset=[x]).sort_values(x)
    xs = curve[x].to_numpy(float)
    rows = []
    for _, p in s[s.family == b].iterrows():
        f = float(p[x])
        inside = len(xs) > 0 and np.isfinite(f) and xs[0] <= f <= xs[-1]
        for q, higher in _HIGHER_BETTER.items():
            ref = float(np.interp(f, xs, curve[q].to_numpy(float))) if inside else float("nan")
            val = float(p[q])
            ok = None if not inside else bool(val >= ref if higher else val <= ref)
            rows.append(dict(method=p.method, **{x: f}, quantity=q, value=val,
                             **{f"{a}_at_equal_fetch": ref}, b_not_worse=ok))
    return pd.DataFrame(rows)


def stream_frames(profile: str, max_tokens: int) -> tuple[object, list, RuntimeConfig]:
    """(model, [(frame tokens [10, hidden], time s)], runtime config) of the composed real-footage stream the
    workload measurement of ``profile`` streams (:mod:`vrex_lib.streams`), long enough for ``max_tokens``."""
    from ..runtime import build_model
    from ..streams import build_stream
    from ..workload.measure import _frame_tokens, _tokens_per_frame, measure_profile

    mp = measure_profile(profile)
    model = build_model(mp.model_profile)
    n_frames = -(-max_tokens // _tokens_per_frame(model, mp.runtime)) + 2
    stream = build_stream(n_frames, seed=mp.stream_seed, fps=mp.fps, size=model.image_size)
    return model, list(_frame_tokens(model, stream)), mp.runtime


#: The frame-stage comparison of the paper's ReSV with the bounded one (D510): exact top-k as the reference, the
#: families whose budget is Th_r-wics (the paper's ReSV) and the 'alternative' rows with a frame-stage budget.
RESV_VS_BOUNDED: tuple[str, ...] = ("exact", *(
    m.name for m in METHODS.values() if m.budget is not None and m.budget.frame
    and (m.budget.option == "th_r_wics" or m.role == "alternative")))


def resv_vs_bounded(profile: str, lo_tokens: int = 1000, hi_tokens: int = 3000, every: int = 5,
                    kv_capacity: int = 512) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(:func:`summary`, :func:`at_equal_fetch` of each bounded family against ReSV's curve) of the families of
    :data:`RESV_VS_BOUNDED` on ``profile``'s composed stream, ``lo_tokens``..``hi_tokens`` cached tokens, every
    ``every``-th frame step, a ``kv_capacity``-token device tier (notebook 09's opt-in section; D510's run)."""
    model, frames, cfg = stream_frames(profile, hi_tokens)
    budgets = {f: FRAME_BUDGETS[f] for f in RESV_VS_BOUNDED}
    df = frame_budget(model, frames, budget_policies(budgets=budgets), cfg.replace(kv_capacity=kv_capacity),
                      lo_tokens=lo_tokens, hi_tokens=hi_tokens, every=every)
    s = summary(df)
    paper = next(f for f in RESV_VS_BOUNDED if f != "exact" and METHODS[f].budget.option == "th_r_wics")
    equal = pd.concat([at_equal_fetch(s, paper, f) for f in RESV_VS_BOUNDED if f not in ("exact", paper)],
                      ignore_index=True)
    return s, equal


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m vrex_lib.longctx.frame_budget --profile default [--lo 1000] [--hi 4000] [--every 10]
    [--kv-capacity N] [--families exact,resv,resv_best] --out F.csv``: the frame-stage table of every family (or
    those named) and budget (:data:`FRAME_BUDGETS`) and
    its summary (``F.summary.csv``). Minutes to hours of CPU (every method streams the whole stream): not part of
    ``make reproduce``."""
    import argparse
    from pathlib import Path

    from .. import _io
    from ..config import PROFILES

    ap = argparse.ArgumentParser(prog="python -m vrex_lib.longctx.frame_budget", description=main.__doc__)
    ap.add_argument("--profile", choices=PROFILES, default="default")
    ap.add_argument("--lo", type=int, default=1000, help="first cache size kept (tokens)")
    ap.add_argument("--hi", type=int, default=4000, help="last cache size kept (tokens)")
    ap.add_argument("--every", type=int, default=10, help="keep every n-th frame step in [lo, hi]")
    ap.add_argument("--kv-capacity", type=int, default=None,
                    help="device tier in tokens (default: the profile's; below --lo so that tokens are offloaded)")
    ap.add_argument("--families", default=None,
                    help=f"comma-separated families to run (default: all of {', '.join(FRAME_BUDGETS)})")
    ap.add_argument("--out", required=True, help="CSV to write (atomic); its summary goes beside it")
    a = ap.parse_args(argv)
    if not 0 < a.lo <= a.hi or a.every < 1 or (a.kv_capacity is not None and a.kv_capacity < 1):
        ap.error("need 0 < --lo <= --hi, --every >= 1 and --kv-capacity >= 1")
    budgets = dict(FRAME_BUDGETS)
    if a.families is not None:
        names = [f.strip() for f in a.families.split(",") if f.strip()]
        unknown = [f for f in names if f not in FRAME_BUDGETS]
        if unknown or not names:
            ap.error(f"--families {a.families!r}: unknown {', '.join(unknown) or '(none given)'}; choose from "
                     f"{', '.join(FRAME_BUDGETS)}")
        budgets = {f: FRAME_BUDGETS[f] for f in names}
    out = Path(a.out)
    if out.is_dir() or not out.parent.is_dir():
        ap.error(f"--out {out}: give a file in an existing folder")
    model, frames, cfg = stream_frames(a.profile, a.hi)
    if a.kv_capacity is not None:
        cfg = cfg.replace(kv_capacity=a.kv_capacity)
    df = frame_budget(model, frames, budget_policies(budgets=budgets), cfg, lo_tokens=a.lo, hi_tokens=a.hi,
                      every=a.every)
    _io.write_text(out, df.to_csv(index=False))
    _io.write_text(out.with_suffix(".summary.csv"), summary(df).to_csv(index=False))
    print(summary(df).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
