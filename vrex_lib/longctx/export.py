"""The study's records as tables, and its text-stage statistics as a workload file for the simulator.

    df = load_results(path)                          # one row per (trial, method)
    acc = accuracy_table(df, by=("method", "context_tokens"))
    layers = recall_per_layer(path)                  # one row per (method, layer)
    write_workload(path, "results/data/workload_retrieval_default.json")

:func:`write_workload` writes schema ``vrex.workload/1`` (the fields of :mod:`vrex_lib.workload.measure`, read by
:meth:`vrex_lib.perf.Workload.from_measurement`): one text-stage checkpoint per (context length, method), its
fractions pooled over every trial at that length -- selected / candidates, selected offloaded / offloaded
candidates, and the share of a step's selected offloaded tokens the previous step of the same answer also
selected (reuse) -- and ReSV's tokens per cluster, WiCSum exit and DRE cycles averaged over the trials
(docs/DECISIONS.md D164).
"""
from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .. import _io
from ..config import WORKLOAD_SCHEMA
from ..workload import files as wfiles
from .grid import StudyGrid
from .run import jsonable, read_results, study_setup

#: How the workload file's checkpoints were obtained (its ``measurement`` field and every checkpoint's
#: ``fidelity_source``).
WORKLOAD_NOTE = ("long-context retrieval study (vrex_lib.longctx): passkey and needle documents streamed in chunks "
                 "(one chunk per frame step, tokens_per_frame = chunk size), each method steering its own run; "
                 "text-stage statistics of the question and answer, pooled over the trials at each length; "
                 "exact_match is the task's accuracy, not a fidelity proxy")
_TEXT_FIELDS = ("candidates", "selected_frac", "offloaded_candidates", "selected_frac_offloaded", "reuse_frac",
                "reuse_frac_all", "tokens_per_cluster", "n_clusters", "wics_exit_frac")


def load_results(path: str | os.PathLike) -> pd.DataFrame:
    """One row per (trial, method): the trial, the answer and its score, the recalls and the text-stage
    statistics (``selected_frac``, ``selected_frac_offloaded``, ``reuse_frac``, ``tokens_per_cluster``, ...)."""
    d = read_results(path)
    rows = []
    for r in d["records"]:
        row = {k: v for k, v in r.items() if k not in ("text", "sums", "recall_value_per_layer", "policy_kwargs",
                                                       "mechanism")}
        text = r.get("text") or {}
        row.update({k: text.get(k) for k in _TEXT_FIELDS})
        row.update({f"sum_{k}": v for k, v in (r.get("sums") or {}).items()})
        rows.append(row)
    df = pd.DataFrame(rows)
    for c in _TEXT_FIELDS + ("recall_value", "recall_needle", "recall_value_question"):
        if c in df:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    df["correct"] = df["correct"].astype(bool)
    return df


def recall_per_layer(path: str | os.PathLike) -> pd.DataFrame:
    """Needle recall per (method, layer): the mean over a method's trials of each record's per-layer recall (the
    key's digit tokens attended, mean over KV heads and text steps); NaN where the layer was never consulted."""
    out = []
    for m, recs in pd.DataFrame(read_results(path)["records"]).groupby("method", sort=False):
        a = np.array([[np.nan if v is None else v for v in r] for r in recs.recall_value_per_layer], dtype=float)
        with warnings.catch_warnings():  # never-consulted (dense) layers are all-NaN: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(a, 0)
        out += [dict(method=m, layer=i, recall_value=float(v)) for i, v in enumerate(mean)]
    return pd.DataFrame(out)


def _ratio(num: float, den: float) -> float:
    return float(num / den) if den > 0 else float("nan")


def accuracy_table(df: pd.DataFrame, by: Sequence[str] = ("method", "context_tokens")) -> pd.DataFrame:
    """Per group: trials, exact-match accuracy, needle recall (digits, sentence, at the question step) and the
    selected fractions pooled over the group's (step, layer, KV head) cells."""
    out = []
    for keys, g in df.groupby(list(by), sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        out.append(dict(zip(by, keys), n=len(g), accuracy=float(g.correct.mean()),
                        recall_value=g.recall_value.mean(), recall_needle=g.recall_needle.mean(),
                        recall_value_question=g.recall_value_question.mean(),
                        selected_frac=_ratio(g.sum_sel.sum(), g.sum_cand.sum()),
                        selected_frac_offloaded=_ratio(g.sum_sel_off.sum(), g.sum_off.sum()),
                        reuse_frac=_ratio(g.sum_reused_off.sum(), g.sum_sel_off_reuse.sum())))
    return pd.DataFrame(out)


def _mean_field(texts: list[dict], field: str) -> float | None:
    v = [t[field] for t in texts if t.get(field) is not None]
    return float(np.mean(v)) if v else None


def _mean_layers(texts: list[dict], field: str, n_layers: int) -> list:
    a = np.array([[np.nan if x is None else x for x in t["per_layer"].get(field, [None] * n_layers)]
                  for t in texts], dtype=float)
    with warnings.catch_warnings():  # all-NaN layers (the dense ones) are expected and become null
        warnings.simplefilter("ignore", RuntimeWarning)
        m = np.nanmean(a, 0) if a.size else np.full(n_layers, np.nan)
    return jsonable(m)


def _checkpoint(n: int, method: str, recs: list[dict], n_layers: int) -> dict:
    """The text-stage checkpoint of ``method`` at context length ``n`` from its records there."""
    texts = [r["text"] for r in recs if r.get("text")]
    s = {k: sum(r["sums"][k] for r in recs if r.get("sums")) for k in ("sel", "cand", "sel_off", "off",
                                                                        "reused_off", "sel_off_reuse")}
    r0 = recs[0]
    c = dict(kv_len=float(np.mean([r["kv_len"] for r in recs])), kv_target=int(n), method=method, stage="text",
             policy=r0["policy"], policy_kwargs=r0["policy_kwargs"], text_only=r0["text_only"],
             candidates=_mean_field(texts, "candidates"), selected_frac=_ratio(s["sel"], s["cand"]),
             offloaded_candidates=_mean_field(texts, "offloaded_candidates"),
             selected_frac_offloaded=_ratio(s["sel_off"], s["off"]),
             reuse_frac=_ratio(s["reused_off"], s["sel_off_reuse"]))
    for f in ("reuse_frac_all", "offloaded_bytes", "fetched_bytes", "kv_bytes", "tokens_per_cluster", "n_clusters",
              "hc_bytes", "hc_kv_overhead", "wics_exit_frac", "dre_hcu_cycles", "dre_wtu_cycles"):
        c[f] = _mean_field(texts, f)
    c["per_layer"] = {f: _mean_layers(texts, f, n_layers) for f in ("selected_frac", "tokens_per_cluster",
                                                                      "wics_exit_frac")}
    c.update(n_steps=int(sum(t.get("n_steps", 0) for t in texts)), n_trials=len(recs),
             exact_match=float(np.mean([r["correct"] for r in recs])),
             needle_recall=_mean_field([{"v": r["recall_value"]} for r in recs], "v"),
             answer_agreement=None, attn_rel_error=None, fidelity_source=WORKLOAD_NOTE)
    return c


def workload_configuration(profile: str, methods: Sequence[str], lengths: Sequence[int], runtime: dict,
                           resv: dict, max_new_tokens: int) -> dict:
    """The configuration fields (``vrex_lib.workload.files.CONFIG_FIELDS``) of the study's workload file: what
    :func:`write_workload` writes, and what an existing file at its path is compared with before the study runs."""
    return dict(profile=profile, methods=list(methods), variants={}, kv_points=sorted(int(n) for n in lengths),
                fidelity_kv=[], kv_capacity=runtime["kv_capacity"], recent_frames=runtime["recent_frames"],
                dense_layers=runtime["dense_layers"], resv=jsonable(resv), frame_steps=0,
                decode_tokens=max_new_tokens, question=None, stream_seed=None)


def check_workload_out(out: str | os.PathLike, profile: str, grid: str | StudyGrid = "profile",
                       methods: Sequence[str] | None = None, *, force: bool = False, replace: bool = False,
                       flag: str = "--workload") -> None:
    """Refuse, before the study runs, a workload path :func:`write_workload` must not write: a folder or device, a
    file that is not a workload file (unless ``force``), the workload of another configuration -- e.g. one of
    ``workload measure`` -- unless ``replace`` (docs/DECISIONS.md D200, D320)."""
    g, specs, resv, cfg = study_setup(profile, grid, methods)
    want = workload_configuration(profile, [s.name for s in specs], g.lengths, dataclasses.asdict(cfg),
                                  dataclasses.asdict(resv), g.max_new_tokens)
    _io.check_output(out, wfiles.KIND, flag=flag, requested=want, force=force, replace=replace,
                     example=f"{flag} {Path(out).parent / 'workload_retrieval.json'}")


def write_workload(results: str | os.PathLike, out: str | os.PathLike, *, force: bool = False,
                   replace: bool = False) -> Path:
    """Write the study's text-stage statistics (schema ``vrex.workload/1``) to ``out``; returns ``out``. An ``out``
    that is not a workload file is refused unless ``force``, another configuration's workload unless ``replace``."""
    d = read_results(results)
    study, rt = d["study"], d["runtime"]
    by: dict[tuple[int, str], list[dict]] = {}
    for r in d["records"]:
        by.setdefault((int(r["context_tokens"]), r["method"]), []).append(r)
    conf = workload_configuration(d["profile"], d["methods"], {n for n, _ in by}, rt, d["resv"],
                                  study["max_new_tokens"])
    _io.check_output(out, wfiles.KIND, flag="--workload", requested=conf, force=force, replace=replace)
    cps = [_checkpoint(n, m, recs, d["n_layers"]) for (n, m), recs in sorted(by.items())]
    tasks = sorted({b["task"] for b in study["blocks"]})
    w = dict(schema=WORKLOAD_SCHEMA, **{k: v for k, v in conf.items() if k != "stream_seed"}, model=d["model"],
             vision="none: text documents (long-context retrieval study)", vision_encoder=None,
             stream=dict(source=f"long-context retrieval study, tasks {', '.join(tasks)}; grid {d['grid']}",
                         n_frames=0, seed=None, fps=None, chunk_tokens=study["chunk_tokens"]),
             tokens_per_frame=int(study["chunk_tokens"]), n_layers=d["n_layers"], n_kv_heads=d["n_kv_heads"],
             n_q_heads=d["n_q_heads"], head_dim=d["head_dim"], kv_bytes_per_elem=d["kv_bytes_per_elem"],
             kv_bytes_per_token=d["n_layers"] * d["n_kv_heads"] * 2 * d["head_dim"] * d["kv_bytes_per_elem"],
             position_note=None, measurement=WORKLOAD_NOTE, source_results=Path(results).name,
             inputs_key=d["inputs_key"], elapsed_s=d["elapsed_s"], checkpoints=cps)
    return _io.write_json(out, jsonable(w))
