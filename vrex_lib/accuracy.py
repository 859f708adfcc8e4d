"""The accuracy study behind notebook 03 (Table II, Fig. 19, Fig. 20): run methods over COIN tasks through
:mod:`vrex_lib.eval`, then turn its per-sample JSONL lines and retrieval traces into tables.

Layering: above :mod:`vrex_lib.runtime`, :mod:`vrex_lib.retrieval` and :mod:`vrex_lib.eval`; below notebooks.
The methods it runs are the method table's study list (:data:`vrex_lib.methods.STUDY`).

    run_study(["full", "resv"], ["step"], "default", root, model=model, max_samples=2, runtime_cfg=cfg)
    df = load_study(root, ["full", "resv"], ["step"])           # one row per (method, task, sample)

Layout under ``root``: ``<method>/<task>.jsonl`` (eval's records) and ``<method>/traces/<task>/<sample>.npz``.
A *variant* (e.g. a Th_r-wics sweep point) is a method directory named ``<method>@<tag>`` run with its kwargs
(:func:`run_variants` runs several). Both run every method (variant) of a task as one batch, one batched forward per
step (``batched=True``, docs/DECISIONS.md D520).

Fidelity proxies (what the default profile can measure; COIN accuracy needs the real checkpoint):
``answer_match`` (greedy answer string equal to the ``full`` method's), ``first_token_agree``,
``frame_next_token_agree`` (argmax of the next token after every frame step equal to ``full``'s -- the inputs are
identical across methods, so this is teacher-forced next-token agreement), ``attn_err`` (relative L2 error of the
attention output vs full attention, mean over the (step, layer, KV head) cells where the policy selected).
"""
from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from . import methods
from .coin import TASKS as COIN_TASKS
from .config import RuntimeConfig
from .eval import BATCH_REFERENCE, MethodRun, read_jsonl, run_eval, run_eval_batch, score_results
from .runtime import load_trace

#: Every method notebook 03's main run covers: Table II rows + FlexGen + the Fig. 19 ablation.
STUDY_METHODS: tuple[str, ...] = methods.STUDY
#: The study's reference (VideoLLM-Online: full attention) and the paper's method; notebook 03 reruns this pair under
#: the live prompt layout.
REFERENCE: str = "full"
PAPER_METHOD: str = "resv"
LAYOUT_PAIR: tuple[str, ...] = (REFERENCE, PAPER_METHOD)
#: Policy stats summed per sample into prediction-cost columns.
COST_STATS: tuple[str, ...] = ("rows", "scored", "score_macs", "hash_macs", "select_s", "clusters",
                               "clusters_selected")


def method_dir(root: str | Path, method: str, tag: str | None = None) -> Path:
    return Path(root) / (method if not tag else f"{method}@{tag}")


def run_study(methods: Sequence[str], tasks: Sequence[str], profile: str, root: str | Path, *, model,
              max_samples: int | None, runtime_cfg: RuntimeConfig | None = None, coin_root: str | None = None,
              method_kwargs: dict[str, dict] | None = None, tag: str | None = None, fresh: bool = True,
              max_new_tokens: int | None = None, max_frames: int | None = None, progress: bool = False,
              prompt_layout: str = "coin", batched: bool = True) -> None:
    """Run every method × task (``full`` first: it is everyone's reference) into ``root``.

    ``fresh`` deletes the method's previous results first (else eval resumes and skips done samples).
    ``tag`` names a variant directory ``<method>@<tag>``; its reference is still ``root/full``.
    ``max_frames`` keeps only the last frames before the question (a CPU budget knob, frames policy 'clamp'; same
    for every method); None applies eval's default (Live1+'s 1,200-frame limit, VideoLLM-online's policy).
    ``prompt_layout``: 'coin' (question before the frames, as the checkpoint was trained) or 'live'.
    ``batched`` (default): per task, every method streams each sample at once, one batched forward per step
    (:func:`vrex_lib.eval.batch.run_eval_batch`; the same files, lines equal up to fp32's last bits,
    docs/DECISIONS.md D520); False runs the methods one after another (:func:`~vrex_lib.eval.run_eval`).
    """
    order = sorted(methods, key=lambda m: m != "full")
    kw = _eval_kw(model=model, max_samples=max_samples, runtime_cfg=runtime_cfg, coin_root=coin_root,
                  max_new_tokens=max_new_tokens, max_frames=max_frames, progress=progress, prompt_layout=prompt_layout)
    if batched:
        for m in order:
            if fresh and method_dir(root, m, tag).exists():
                shutil.rmtree(method_dir(root, m, tag))
        for t in tasks:
            run_eval_batch(t, [_study_run(root, m, t, tag, method_kwargs, batch="full" in order) for m in order],
                           profile, **kw)
        return
    for m in order:
        d = method_dir(root, m, tag)
        if fresh and d.exists():
            shutil.rmtree(d)
        for t in tasks:
            r = _study_run(root, m, t, tag, method_kwargs, batch=False)
            run_eval(t, m, profile, r.out, method_kwargs=r.method_kwargs, reference=r.reference,
                     trace_dir=r.trace_dir, **kw)


def run_variants(variants: Mapping[str, tuple[str, dict]], tasks: Sequence[str], profile: str, root: str | Path, *,
                 model, max_samples: int | None, fresh: bool = True, batched: bool = True, progress: bool = False,
                 **kw) -> None:
    """Run variants ``{tag: (method, its kwargs)}``, each into ``<method>@<tag>`` with ``root/full`` as its reference,
    as :func:`run_study` with ``tag`` would one after another; ``batched`` (default): per task every variant streams
    each sample at once (D520). ``kw``: run_study's other options (runtime_cfg, coin_root, max_new_tokens,
    max_frames, prompt_layout)."""
    if not batched:
        for tag, (m, mkw) in variants.items():
            run_study([m], tasks, profile, root, model=model, max_samples=max_samples, tag=tag,
                      method_kwargs={m: mkw}, fresh=fresh, batched=False, progress=progress, **kw)
        return
    for tag, (m, _) in variants.items():
        if fresh and method_dir(root, m, tag).exists():
            shutil.rmtree(method_dir(root, m, tag))
    for t in tasks:
        runs = [_study_run(root, m, t, tag, {m: mkw}, batch=False) for tag, (m, mkw) in variants.items()]
        run_eval_batch(t, runs, profile, **_eval_kw(model=model, max_samples=max_samples, progress=progress, **kw))


def _eval_kw(*, max_frames: int | None = None, **kw) -> dict:
    """run_eval's keywords of a study: ``max_frames`` as the clamp of the last frames (frames policy 'clamp')."""
    return dict(kw, **(dict(max_frames=max_frames, frames_policy="clamp") if max_frames is not None else {}))


def _study_run(root, method: str, task: str, tag: str | None, method_kwargs: dict[str, dict] | None,
               batch: bool) -> MethodRun:
    """One method × task of a study: its files under ``root``, its options and its reference (``root/full``'s
    results; with ``batch``, the batch's full run where that run writes them)."""
    d = method_dir(root, method, tag)
    ref = Path(root) / "full" / f"{task}.jsonl"
    if method == "full":
        reference = None
    elif batch and not tag:
        reference = BATCH_REFERENCE  # the batch's full run writes root/full
    else:
        reference = ref if ref.exists() else None
    return MethodRun(method, d / f"{task}.jsonl", (method_kwargs or {}).get(method), reference, d / "traces" / task)


def trace_path(root: str | Path, method: str, task: str, sample_id: str, tag: str | None = None) -> Path:
    return method_dir(root, method, tag) / "traces" / task / (sample_id.replace("/", "__") + ".npz")


def trace_summary(tr) -> dict:
    """Per-sample numbers from one retrieval trace: attention error and summed prediction cost, per stage."""
    out: dict = {}
    for stage in ("frame", "text"):
        m = tr.step_mask(stage)
        out[f"attn_err_{stage}"] = tr.attention_error(stage)
        for k in COST_STATS:
            if k in tr.stats:
                v = tr.stats[k][m]
                out[f"{k}_{stage}"] = float(np.nansum(v)) if np.isfinite(v).any() else 0.0
    out["attn_err"] = tr.attention_error()
    out["n_steps"] = tr.n_steps
    return out


def load_study(root: str | Path, methods: Sequence[str], tasks: Sequence[str], tag: str | None = None,
               with_traces: bool = True) -> pd.DataFrame:
    """One row per (method, task, sample): eval's columns + trace summaries; ``variant`` = tag or ''."""
    rows = []
    for m in methods:
        for t in tasks:
            for r in read_jsonl(method_dir(root, m, tag) / f"{t}.jsonl"):
                rec = {k: v for k, v in r.items() if not isinstance(v, (list, dict))}
                rec["variant"] = tag or ""
                rec["timing_total_s"] = r.get("timing_s", {}).get("total")
                if with_traces:
                    p = trace_path(root, m, t, r["sample_id"], tag)
                    if p.exists():
                        rec.update(trace_summary(load_trace(p)))
                rows.append(rec)
    df = pd.DataFrame(rows)
    if df.empty:
        raise FileNotFoundError(f"{root}: no study results for methods {list(methods)} / tasks {list(tasks)}; "
                                "run run_study first")
    for c in ("ref_answer_match", "ref_first_token_agree"):
        if c in df:
            df[c] = df[c].astype("float")
    return df


FIDELITY_COLS = {"ref_answer_match": "answer_match", "ref_first_token_agree": "first_token_agree",
                 "ref_frame_argmax_agree": "frame_next_token_agree", "attn_err": "attn_err"}


def _check_agreement_counts(df: pd.DataFrame, by: Sequence[str]) -> None:
    """A group whose lines carry agreement columns for only some samples (a run resumed across the full method's
    results) would average agreement over fewer samples than it reports: refused, naming the group."""
    refs = [c for c in FIDELITY_COLS if c.startswith("ref_") and c in df.columns]
    if not refs:
        return
    have = df[refs].notna().any(axis=1)
    for key, part in have.groupby([df[b] for b in by], sort=False):
        if 0 < int(part.sum()) < len(part):
            raise ValueError(f"summarize: {dict(zip(by, key if isinstance(key, tuple) else (key,)))}: "
                             f"{int(part.sum())} of {len(part)} lines carry agreement columns (a run resumed after "
                             "the full method's results appeared); rerun that method's task with --replace")


def summarize(df: pd.DataFrame, by: Sequence[str] = ("method", "task")) -> pd.DataFrame:
    """Means per group of retrieval ratios, fidelity proxies, COIN accuracy (``correct``) and cost columns."""
    cols = ["ratio_frame", "ratio_text", "correct", "correct_strict", *FIDELITY_COLS, "timing_total_s"]
    cols += [c for c in df.columns if any(c.startswith(k + "_") for k in COST_STATS)]
    cols = [c for c in dict.fromkeys(cols) if c in df.columns]
    _check_agreement_counts(df, by)
    g = df.groupby(list(by), sort=False)[cols].mean()
    g["n_samples"] = df.groupby(list(by), sort=False).size()
    return g.rename(columns=FIDELITY_COLS).reset_index()


def coin_accuracy(root: str | Path, method: str, task: str, profile: str, coin_root: str | None = None,
                  metric: str = "videollm-online", tag: str | None = None) -> float:
    """COIN Top-1 (%) of one method × task over all its samples pooled, exactly as VideoLLM-online computes it
    (``metric='videollm-online'``; procedure tasks weight each counted step, unlike the per-sample mean of
    ``summarize``'s ``correct``) or with the strict variant."""
    return score_results(method_dir(root, method, tag) / f"{task}.jsonl", profile, coin_root, metric=metric)


def retrieval_ratio_frame(summary: pd.DataFrame, profile: str) -> pd.DataFrame:
    """Long table for the performance simulator: method, task, stage, retrieval_ratio [0-1], profile."""
    recs = []
    for r in summary.itertuples(index=False):
        for stage in ("frame", "text"):
            v = getattr(r, f"ratio_{stage}")
            recs.append(dict(method=r.method, task=r.task, stage=stage,
                             retrieval_ratio=None if pd.isna(v) else float(v), profile=profile))
    return pd.DataFrame(recs, columns=["method", "task", "stage", "retrieval_ratio", "profile"])


def per_layer_head(tr, stage: str = "frame") -> pd.DataFrame:
    """Retrieval ratio per (layer, KV head) of one trace over ``stage`` steps (NaN where never applied)."""
    r = tr.retrieval_ratio(stage, by="head")
    L, H = r.shape
    return pd.DataFrame(dict(layer=np.repeat(np.arange(L), H), kv_head=np.tile(np.arange(H), L),
                             retrieval_ratio=r.ravel()))


def study_sizes(section) -> dict:
    """Notebook 03's sizes from a profile's ``study`` section (:class:`vrex_lib.profiles.StudySection`): its fields
    as a dict, ``None`` task lists read as all five COIN tasks."""
    d = dict(vars(section))
    for k in ("tasks", "sweep_tasks"):
        d[k] = COIN_TASKS if d[k] is None else tuple(d[k])
    return d
