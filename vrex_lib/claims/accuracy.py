"""Table II (retrieval ratios, COIN Top-1, accuracy drops), Fig. 19 (ReSV without clustering) and Fig. 20
(per-layer ReSV ratio) as notebook 03's claim rows, with the cause of every miss and of every row not run.

The evidence for a cause comes from the study's own runs (:func:`study_evidence`): the longest stream and span,
whether InfiniGen's cap bound its selections, whether ReKV's budget ever left a frame block out. Inputs:

* ``summ`` / ``by_m``: :func:`vrex_lib.accuracy.summarize` by (method, task) / by method (ratio_frame, ratio_text
  in [0, 1], the fidelity proxies);
* ``df``: :func:`vrex_lib.accuracy.load_study` (one row per method × task × sample: n_tokens, n_frames,
  frames_action);
* ``acc``: COIN Top-1 (%) as a DataFrame methods × tasks (:func:`coin_accuracy_table`), None outside ``full``.
"""
from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import accuracy as study
from .. import methods as method_table
from .. import paper, report
from ..coin import TASKS as COIN_TASKS
from ..eval.stats import Interval, drop_interval, pooled_counts, top1_interval
from ..runtime import RetrievalTrace, load_trace
from .need import whole_term
from .provenance import FULL_PROFILE_RUN, Provenance, workload_cause

#: Table II's methods with printed retrieval ratios, in the paper's row order.
PAPER_METHODS: tuple[str, ...] = method_table.RATIO_ROWS
#: The methods one policy module implements: InfiniGen's (its 50 % cap evidence), and Fig. 19's bars.
INFINIGEN_FAMILY: tuple[str, ...] = method_table.in_family("infinigen")
STAGES: tuple[str, ...] = ("frame", "text")
#: Fidelity proxies of the study (column of ``summarize``, unit).
FIDELITY: tuple[tuple[str, str], ...] = (("answer_match", "fraction"), ("first_token_agree", "fraction"),
                                         ("frame_next_token_agree", "fraction"), ("attn_err", "rel. L2"))
#: Summary columns of the Fig. 19, before/after and sweep tables (column, unit).
SUMMARY_COLS: tuple[tuple[str, str], ...] = (("ratio_frame", "fraction"), ("ratio_text", "fraction"),
                                             ("frame_next_token_agree", "fraction"), ("attn_err", "rel. L2"))
NOT_RUN_ACC = f"COIN Top-1 needs the trained VideoLLM-online checkpoint and COIN videos: {FULL_PROFILE_RUN}"


# ----------------------------------------------------------------------------------------------- evidence
def _policy_config(tr: RetrievalTrace) -> dict:
    """The policy configuration recorded in a trace (a dict literal for InfiniGen and ReKV)."""
    raw = tr.meta.get("policy_config")
    try:
        cfg = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        cfg = None
    if not isinstance(cfg, dict):
        raise ValueError(f"trace of {tr.meta.get('sample_id')}: policy_config {raw!r} is not a dict literal")
    return cfg


def _stat(tr: RetrievalTrace, name: str) -> np.ndarray:
    """A policy counter [steps, layers] of a trace; all NaN when the policy never reported it (never selected)."""
    return tr.stats[name] if name in tr.stats else np.full(tr["applied"].shape, np.nan)


@dataclass(frozen=True)
class CapEvidence:
    """InfiniGen's cap in one stage: selections (applied, non-dense (step, layer) cells) whose k equals the cap
    (the policy's ``cap_k`` stat: ``floor(cap × tokens in the cache)``, D381; ``floor(cap × candidates)`` in traces
    without it), and the layers the policy was consulted in / attended densely in. ``cap_share``: the largest share
    of its candidates a selection's cap allowed (the cap counts the whole cache, so it can exceed ``cap``)."""

    cap: float
    n_layers_applied: int
    n_layers_dense: int
    n_selections: int
    share_at_cap: float
    cap_share: float | None = None

    @property
    def bound_share(self) -> float:
        return self.cap if self.cap_share is None else self.cap_share

    @property
    def bound_pct(self) -> float:
        """The highest ratio the cap allows: dense layers fetch everything, the others at most ``cap_share``."""
        if not self.n_layers_applied:
            return float("nan")
        return 100 * (self.n_layers_dense + (self.n_layers_applied - self.n_layers_dense) * self.bound_share) / \
            self.n_layers_applied


def infinigen_cap_evidence(traces: Sequence[RetrievalTrace], stage: str) -> CapEvidence:
    """:class:`CapEvidence` over ``traces`` of one InfiniGen(P) method (its ``k`` stat, ``n_candidates``)."""
    if not traces:
        raise ValueError("infinigen_cap_evidence: no traces")
    cap = float(_policy_config(traces[0])["cap"])
    at_cap = n_sel = 0
    share = cap
    applied_layers, dense_layers = set(), set()
    for tr in traces:
        m = tr.step_mask(stage) & (tr["n_candidates"] > 0)
        applied, k = tr["applied"][m], _stat(tr, "k")[m]                   # [n', L]
        n_cand = tr["n_candidates"][m].astype(np.float64)[:, None]
        if "cap_k" in tr.stats:
            cap_k = tr.stats["cap_k"][m]
        else:  # a trace from before the policy reported its cap: the cap as a share of the candidates
            cap_k = np.broadcast_to(np.floor(cap * n_cand), k.shape)
        chose = applied & np.isfinite(k)
        applied_layers |= set(np.flatnonzero(applied.any(0)).tolist())
        dense_layers |= set(np.flatnonzero((applied & ~np.isfinite(k)).all(0) & applied.any(0)).tolist())
        n_sel += int(chose.sum())
        at_cap += int((chose & (k == cap_k)).sum())
        if "cap_k" in tr.stats and chose.any():
            share = max(share, float(np.minimum(1.0, cap_k / n_cand)[chose].max()))
    return CapEvidence(cap, len(applied_layers), len(dense_layers), n_sel, at_cap / n_sel if n_sel else float("nan"),
                       share)


@dataclass(frozen=True)
class BudgetEvidence:
    """ReKV's retrieval decisions: its budget (frame blocks), the most blocks any decision saw, and the share of
    decisions that took every block."""

    budget_blocks: int
    max_blocks: int
    n_decisions: int
    share_all_blocks: float


def rekv_budget_evidence(traces: Sequence[RetrievalTrace]) -> BudgetEvidence:
    """:class:`BudgetEvidence` over ``traces`` of ReKV (its ``blocks``, ``blocks_selected``, ``retrieved_now``)."""
    if not traces:
        raise ValueError("rekv_budget_evidence: no traces")
    budget = int(_policy_config(traces[0])["topk_blocks"])
    blocks, chosen = [], []
    for tr in traces:
        now = _stat(tr, "retrieved_now") == 1
        blocks.append(_stat(tr, "blocks")[now])
        chosen.append(_stat(tr, "blocks_selected")[now])
    b, c = np.concatenate(blocks), np.concatenate(chosen)
    return BudgetEvidence(budget, int(b.max()) if b.size else 0, int(b.size),
                          float(np.mean(c == b)) if b.size else float("nan"))


@dataclass(frozen=True)
class StudyEvidence:
    """What the study's runs show about themselves (see the module docstring)."""

    max_tokens: int
    max_frames: int
    clamped: bool
    n_layers: int
    n_kv_heads: int
    infinigen: Mapping[tuple[str, str], CapEvidence] = field(default_factory=dict)  # by (method, stage)
    rekv: BudgetEvidence | None = None

    def streams(self) -> str:
        clamp = " (spans clamped to the profile's max_frames)" if self.clamped else ""
        return f"streams of at most {self.max_tokens} tokens, {self.max_frames} frames per sample{clamp}"


def study_traces(root: str | Path, df: pd.DataFrame, method: str, tag: str | None = None) -> list[RetrievalTrace]:
    """The retrieval traces of ``method``'s samples in ``df`` (rows of :func:`vrex_lib.accuracy.load_study`)."""
    rows = df[df.method == method]
    return [load_trace(study.trace_path(root, method, r.task, r.sample_id, tag)) for r in rows.itertuples()]


def study_evidence(root: str | Path, df: pd.DataFrame, *, n_layers: int, n_kv_heads: int) -> StudyEvidence:
    """:class:`StudyEvidence` of the main run under ``root`` (traces of InfiniGen, InfiniGenP and ReKV)."""
    ig = {}
    for m in INFINIGEN_FAMILY:
        if (df.method == m).any():
            trs = study_traces(root, df, m)
            ig.update({(m, s): infinigen_cap_evidence(trs, s) for s in STAGES})
    rekv = rekv_budget_evidence(study_traces(root, df, "rekv")) if (df.method == "rekv").any() else None
    clamped = bool((df.frames_action == "clamp").any()) if "frames_action" in df else False
    return StudyEvidence(int(df.n_tokens.max()), int(df.n_frames.max()), clamped, n_layers, n_kv_heads, ig, rekv)


# ------------------------------------------------------------------------------------------------- causes
def _nan_cause(prov: Provenance, ev: StudyEvidence, what: str) -> dict:
    """cause / cause_detail keywords of a row whose measurement is undefined on these runs (NOT RUN)."""
    c, d = workload_cause(prov, f"{what} on {ev.streams()}", what)
    return dict(cause=c, cause_detail=d)


def _infinigen_cause(prov: Provenance, ev: StudyEvidence, method: str, stage: str) -> tuple[str, str]:
    c = ev.infinigen.get((method, stage))
    if c is None:
        return workload_cause(prov, "", "InfiniGen inside this runtime (D61)")
    if c.n_layers_dense == c.n_layers_applied:
        fact = (f"every layer it is consulted in ({c.n_layers_applied} of this model's {ev.n_layers}) attends densely "
                "(InfiniGen's reference keeps layers 0-1 dense), so it fetches 100 %")
    else:
        verb = "attends" if c.n_layers_dense == 1 else "attend"
        fact = (f"{c.n_layers_dense} of the {c.n_layers_applied} layers it is consulted in {verb} densely "
                f"(InfiniGen's reference keeps layers 0-1 dense) and the others fetch at most its cap "
                f"({c.cap:.0%} of the cache, at most {c.bound_share:.0%} of the candidates), "
                f"so the ratio is at most {c.bound_pct:.1f} %")
    if c.n_selections:
        binds = "the cap binds" if c.share_at_cap >= 0.5 else "the cap rarely binds"
        fact += f"; {c.share_at_cap:.0%} of its {c.n_selections} {stage}-stage selections sat at the cap ({binds})"
    return workload_cause(prov, f"{fact}, on {ev.streams()}", f"{fact} (D61: the cap of the paper's accuracy runs)")


def _rekv_cause(prov: Provenance, ev: StudyEvidence, stage: str) -> tuple[str, str]:
    b = ev.rekv
    if b is None:
        return workload_cause(prov, "", "ReKV inside this runtime (D60)")
    within = b.max_blocks <= b.budget_blocks
    if stage == "frame":
        if not within:
            return ("model", "the main run follows ReKV's repository, which attends densely while encoding frames "
                    "(D60); the paper's frame-stage ReKV is mode='frame' (before/after table)")
        return workload_cause(prov, f"ReKV's repository attends densely while encoding frames (D60), and its "
                              f"frame-stage variant (mode='frame') retrieves every block too: no step sees more than "
                              f"{b.max_blocks} frame blocks, within its {b.budget_blocks}-block budget; "
                              f"{ev.streams()}",
                              "the main run follows ReKV's repository: dense while encoding frames (D60)")
    fact = (f"{b.share_all_blocks:.0%} of its {b.n_decisions} retrieval decisions took every block (at most "
            f"{b.max_blocks} blocks per decision, budget {b.budget_blocks} = the reference's topk; the paper does not "
            "state its ReKV budget)")
    return workload_cause(prov, f"{fact}, on {ev.streams()}", f"{fact} (D60)")


def with_whole_terms(rows: list[report.Row]) -> list[report.Row]:
    """A measured statistic that FAILs with cause ``model`` and no recorded breakdown names itself as the term, with
    the value a PASS would need (as the simulator's claims do, :func:`~vrex_lib.claims.causes.whole_term`)."""
    for r in rows:
        if (r.cause == "model" and not r.term and r.verdict() == report.FAIL and r.paper is not None
                and r.reproduced is not None):
            r.term = whole_term(f"the measured {r.quantity} as a whole", float(r.reproduced), float(r.paper),
                                r.tolerance, r.unit)
    return rows


def ratio_cause(method: str, stage: str, prov: Provenance, ev: StudyEvidence) -> tuple[str, str]:
    """(cause, cause_detail) of a Table II retrieval-ratio miss of ``method`` at ``stage``."""
    if method in INFINIGEN_FAMILY:
        return _infinigen_cause(prov, ev, method, stage)
    if method == "rekv":
        return _rekv_cause(prov, ev, stage)
    # the model's attention concentration is not separated here from ReSV's own choices D1-D4: no driver
    return workload_cause(prov, "", "ReSV's choices where the paper is silent (D1-D4) and the ratio's definition "
                          f"(D7), on {ev.n_layers} layers x {ev.n_kv_heads} KV heads of {ev.streams()} (notebook 02's "
                          "sensitivity shows their effect)")


# --------------------------------------------------------------------------------------------------- rows
#: Table II ratios that the method's configuration fixes (not a property of the data): a match checks the
#: configuration, so it is CONSISTENT, not PASS (docs/DECISIONS.md D220).
BY_CONFIGURATION: dict[tuple[str, str], str] = {
    ("infinigen", "frame"): "InfiniGen keeps every token while frames are encoded (100 % by its configuration): it "
                            "checks the configuration, not a measurement",
    ("infinigen_p", "frame"): "InfiniGenP's frame-stage budget is half the candidates by its configuration: it checks "
                              "the configuration, not a measurement",
}


def ratio_rows(summ: pd.DataFrame, by_m: pd.DataFrame, prov: Provenance, ev: StudyEvidence,
               tasks: Sequence[str]) -> list[report.Row]:
    """Table II retrieval ratios (%): each paper method's average (judged) and per task (INFO)."""
    rows = []
    for m in PAPER_METHODS:
        for stage in STAGES:
            ours = by_m.loc[m, f"ratio_{stage}"] * 100
            kw = _nan_cause(prov, ev, _undefined(f"ratio_{stage}")) if math.isnan(ours) else \
                dict(zip(("cause", "cause_detail"), ratio_cause(m, stage, prov, ev)))
            rows.append(report.row(f"table2.ratio.{m}.{stage}.avg", ours,
                                   quantity=f"{m} retrieval ratio @ {stage}, avg",
                                   note=f"ours: {prov.model}, profile {prov.profile}; the paper's: Llama-3-8B on COIN",
                                   consistent=BY_CONFIGURATION.get((m, stage), ""), **kw))
        for t in tasks:
            s = summ[(summ.method == m) & (summ.task == t)].iloc[0]
            for stage in STAGES:
                v = s[f"ratio_{stage}"] * 100
                kw = _nan_cause(prov, ev, _undefined(f"ratio_{stage}")) if math.isnan(v) else {}
                rows.append(report.row(f"table2.ratio.{m}.{stage}.{t}", v,
                                       quantity=f"{m} retrieval ratio @ {stage}, {t}", **kw))
    return with_whole_terms(rows)


def coin_accuracy_table(root: str | Path, methods: Sequence[str], tasks: Sequence[str], profile: str,
                        coin_root: str | None, metric: str = "videollm-online") -> pd.DataFrame:
    """COIN Top-1 (%) of each method (rows) × task (columns), pooled as VideoLLM-online computes it."""
    return pd.DataFrame({t: {m: study.coin_accuracy(root, m, t, profile, coin_root, metric=metric) for m in methods}
                         for t in tasks})


def merged_accuracy(eval_dir: str | Path, methods: Sequence[str], tasks: Sequence[str], profile: str,
                    coin_root: str | None, identity: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """COIN Top-1 (%) of the merged results ``<eval_dir>/<method>/<task>.jsonl`` (``torchrun`` shards joined by
    ``python -m vrex_lib.eval merge``): (VideoLLM-online metric, strict metric, one line of what was found).

    A (method, task) without a file is NaN (its row NOT RUN); a file whose run record is not complete (a shard
    missing) or names another model than ``identity`` (:meth:`~vrex_lib.runtime.ModelIdentity.record`) is an error
    naming it: results of another checkpoint never enter this table."""
    root = Path(eval_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"EVAL_DIR {root} is not a folder: pass the folder holding <method>/<task>.jsonl "
                                "(e.g. results/eval/full, where the torchrun commands of the README write)")
    found = []
    for m in methods:
        for t in tasks:
            f = study.method_dir(root, m) / f"{t}.jsonl"
            if not f.is_file():
                continue
            rec = _merged_record(f)
            if identity is not None and rec.get("model_identity") != identity:
                raise ValueError(f"EVAL_DIR: {f} was made with {rec.get('model')!r} "
                                 f"({(rec.get('model_identity') or {}).get('summary', '?')}), not the model this "
                                 f"notebook loads ({identity.get('summary')}); rerun it with this checkpoint")
            found.append((m, t))
    if not found:
        raise FileNotFoundError(f"EVAL_DIR {root}: no <method>/<task>.jsonl of methods {', '.join(methods)} and tasks "
                                f"{', '.join(tasks)}; merge the shards first (python -m vrex_lib.eval merge)")
    frames = [pd.DataFrame({t: {m: (study.coin_accuracy(root, m, t, profile, coin_root, metric=metric)
                                    if (m, t) in found else np.nan) for m in methods} for t in tasks})
              for metric in ("videollm-online", "strict")]
    return frames[0], frames[1], f"{len(found)} of {len(methods) * len(tasks)} method x task results from {root}"


def _merged_record(f: Path) -> dict:
    import json

    from ..eval import run_file

    rf = run_file(f)
    try:
        rec = json.loads(rf.read_text())
    except (OSError, json.JSONDecodeError):
        raise ValueError(f"EVAL_DIR: {f} has no readable run record {rf.name}; merge its shards with "
                         "python -m vrex_lib.eval merge") from None
    if not rec.get("complete") or rec.get("num_shards", 1) != 1:
        raise ValueError(f"EVAL_DIR: {f} is not a complete merged run ({rf.name}: complete={rec.get('complete')}, "
                         f"num_shards={rec.get('num_shards')}); merge every shard with python -m vrex_lib.eval merge")
    return rec


def accuracy_intervals(root: str | Path, methods: Sequence[str], tasks: Sequence[str], profile: str,
                       coin_root: str | None) -> dict[str, Interval]:
    """95 % intervals (:mod:`vrex_lib.eval.stats`) keyed by claim: every ``table2.acc.<method>.<task>`` (bootstrap
    over samples) and, when ``full`` and all five tasks are there, the drops ``table2.avg_drop.resv``,
    ``table2.max_drop.infinigen_p``, ``fig19.acc_drop.<method>`` (paired bootstrap against ``full``)."""
    counts = {(m, t): pooled_counts(study.method_dir(root, m) / f"{t}.jsonl", profile, coin_root)
              for m in methods for t in tasks if (study.method_dir(root, m) / f"{t}.jsonl").is_file()}
    out = {f"table2.acc.{m}.{t}": top1_interval(c) for (m, t), c in counts.items()}
    if set(tasks) != set(COIN_TASKS) or any(("full", t) not in counts for t in tasks):
        return out
    ref = [counts["full", t] for t in tasks]
    drops = (("table2.avg_drop.resv", "resv", "mean"), ("table2.max_drop.infinigen_p", "infinigen_p", "max"),
             *((f"fig19.acc_drop.{m}", m, "mean") for m in method_table.FIG19))
    for key, m, how in drops:
        if all((m, t) in counts for t in tasks):
            out[key] = drop_interval(ref, [counts[m, t] for t in tasks], how)
    return out


def interval_note(key: str, ci: Mapping[str, Interval] | None, note: str = "") -> str:
    """``note`` with the claim's 95 % interval beside it, and a warning when the paper's tolerance is below the
    sampling error (the interval's half-width), so the verdict is not decided by the data."""
    if not ci or key not in ci:
        return note
    iv, tol = ci[key], paper.get(key).tol
    text = iv.text()
    if tol.kind == "abs" and tol.value < iv.half_width:
        text += (f"; the ±{tol.value:g}-point tolerance is below the sampling error (half-width {iv.half_width:.1f} "
                 f"pt): this verdict is not decided by these samples (`python -m vrex_lib.eval plan` sizes a run)")
    return f"{note}; {text}" if note else text


def interval_label(quantity: str, key: str, ci: Mapping[str, Interval] | None) -> str:
    """``quantity`` with the claim's 95 % interval appended (the report shows a row's quantity beside its verdict)."""
    if not ci or key not in ci:
        return quantity
    iv, tol = ci[key], paper.get(key).tol
    below = tol.kind == "abs" and tol.value < iv.half_width
    return (f"{quantity} [95 % CI {iv.lo:.1f}–{iv.hi:.1f}, n = {iv.n}"
            + (f"; the ±{tol.value:g} pt tolerance is below this sampling error]" if below else "]"))


def _acc_cause(prov: Provenance, n_samples: str) -> dict:
    c, d = workload_cause(prov, "", f"COIN Top-1 of this harness on the user's COIN ({n_samples} samples per task): "
                          "greedy decoding, the checkpoint's prompt layout (D58), VideoLLM-online's metric (D55); "
                          "baselines as their repositories run them (D60, D61)")
    return dict(cause=c, cause_detail=d)


def accuracy_rows(acc: pd.DataFrame | None, prov: Provenance, tasks: Sequence[str],
                  acc_strict: pd.DataFrame | None = None, n_samples: str = "all",
                  ci: Mapping[str, Interval] | None = None) -> list[report.Row]:
    """Table II COIN Top-1 per method and task (NOT RUN without ``acc``), the strict metric beside it where the
    two differ, then the average / maximum accuracy drops (they need all five tasks); ``ci``
    (:func:`accuracy_intervals`) puts each row's 95 % interval in its note."""
    rows = []
    for m in ("full",) + PAPER_METHODS:
        for t in tasks:
            q = f"{m} COIN Top-1, {t} (VideoLLM-online metric)"
            if acc is None:
                rows.append(report.row(f"table2.acc.{m}.{t}", None, quantity=q, cause="not-run",
                                       note="COIN accuracy needs the trained checkpoint (full profile)",
                                       cause_detail=NOT_RUN_ACC))
                continue
            if m not in acc.index or pd.isna(acc.loc[m, t]):
                rows.append(report.row(f"table2.acc.{m}.{t}", None, quantity=q, cause="not-run",
                                       cause_detail=f"no results of {m} on {t} in this run: {FULL_PROFILE_RUN}"))
                continue
            rows.append(report.row(f"table2.acc.{m}.{t}", acc.loc[m, t],
                                   quantity=interval_label(q, f"table2.acc.{m}.{t}", ci), **_acc_cause(prov, n_samples),
                                   note=interval_note(f"table2.acc.{m}.{t}", ci)))
            if acc_strict is not None and abs(acc.loc[m, t] - acc_strict.loc[m, t]) > 1e-9:  # both metrics (D55)
                rows.append(report.info_row(f"acc_strict.{m}.{t}", f"{m} COIN Top-1, {t}, strict metric", "%",
                                            acc_strict.loc[m, t], note="normalised variant (docs/DECISIONS.md D55)"))
    drops = accuracy_drops(acc, tasks)
    for key, d, q in (("table2.avg_drop.resv", "resv_avg", "ReSV avg accuracy drop"),
                      ("table2.max_drop.infinigen_p", "infinigen_p_max", "InfiniGenP max accuracy drop")):
        kw = _acc_cause(prov, n_samples) if drops.get(d) is not None else \
            dict(cause="not-run", cause_detail="the drops need COIN Top-1 of full and the method on all five tasks: "
                 + (FULL_PROFILE_RUN if acc is None else f"this run covered {', '.join(tasks)}"))
        rows.append(report.row(key, drops.get(d), quantity=interval_label(q, key, ci), **kw,
                               note=interval_note(key, ci)))
    return rows


def accuracy_drops(acc: pd.DataFrame | None, tasks: Sequence[str]) -> dict[str, float]:
    """Points below VideoLLM-online (``full``): {'resv_avg': mean over tasks, 'infinigen_p_max': max over tasks,
    '<method>_avg' for every other row of ``acc``}; {} unless ``acc`` covers all five tasks."""
    if acc is None or set(tasks) != set(COIN_TASKS):
        return {}
    drop = acc.loc["full"] - acc
    out = {f"{m}_avg": float(drop.loc[m].mean()) for m in acc.index if m != "full" and drop.loc[m].notna().all()}
    if "infinigen_p" in drop.index and drop.loc["infinigen_p"].notna().all():
        out["infinigen_p_max"] = float(drop.loc["infinigen_p"].max())
    return out


_UNDEFINED = {"attn_err": "the policy never restricted attention (the attention error is measured only where it "
                          "selected a subset of the candidates)",
              "answer_match": "no sample had a full-attention reference answer to compare with",
              "first_token_agree": "no sample had a full-attention reference answer to compare with",
              "frame_next_token_agree": "no sample had a full-attention reference run to compare with"}


def _undefined(col: str) -> str:
    """Why measurement ``col`` of the study can be undefined (NaN) on a run."""
    if col.startswith("ratio_"):
        return f"no {col[len('ratio_'):]}-stage step had a candidate token (all sinks or in the recent window)"
    return _UNDEFINED[col]


def _info(claim: str, quantity: str, unit: str, value: float | None, col: str, prov: Provenance,
          ev: StudyEvidence, note: str = "") -> report.Row:
    """An INFO row of study column ``col``; NOT RUN with its cause when the value is undefined on these runs."""
    kw = _nan_cause(prov, ev, _undefined(col)) if value is None or pd.isna(value) else {}
    return report.info_row(claim, quantity, unit, value, note=note, **kw)


#: The study's methods whose fidelity against ``full`` is a Table II-side row (Fig. 19's ablation has its own rows).
FIDELITY_METHODS: tuple[str, ...] = tuple(m for m in method_table.STUDY
                                          if m != "full" and method_table.METHODS[m].role != "ablation")


def fidelity_rows(by_m: pd.DataFrame, prov: Provenance, ev: StudyEvidence) -> list[report.Row]:
    """Fidelity proxies against ``full`` (INFO: no printed counterpart) of every study method but the ablation."""
    return [_info(f"fidelity.{m}.{col}", f"{m}: {col} vs full (all tasks)", unit, by_m.loc[m, col], col, prov, ev,
                  note=f"fidelity proxy, profile {prov.profile}") for m in FIDELITY_METHODS
            for col, unit in FIDELITY]


def table2_rows(summ: pd.DataFrame, by_m: pd.DataFrame, prov: Provenance, ev: StudyEvidence, tasks: Sequence[str],
                acc: pd.DataFrame | None = None, acc_strict: pd.DataFrame | None = None,
                n_samples: str = "all", ci: Mapping[str, Interval] | None = None) -> list[report.Row]:
    """Every row of ``table2``: retrieval ratios, COIN Top-1 and drops (with ``ci``'s intervals), fidelity
    proxies."""
    return (ratio_rows(summ, by_m, prov, ev, tasks) + accuracy_rows(acc, prov, tasks, acc_strict, n_samples, ci)
            + fidelity_rows(by_m, prov, ev))


def fig19_accuracy_rows(ab: pd.DataFrame, acc: pd.DataFrame | None, prov: Provenance, ev: StudyEvidence,
               tasks: Sequence[str], n_samples: str = "all",
               ci: Mapping[str, Interval] | None = None) -> list[report.Row]:
    """Fig. 19: accuracy drops (full profile, all tasks) and what the ablation changes on these runs (ratios,
    fidelity, prediction cost). ``ab``: ``by_m`` rows resv_noclust and resv. The latency speedups are the performance
    simulator's (:func:`vrex_lib.claims.hwmodel.fig19_speedup_rows`, notebook 06's table ``fig19_speedup``)."""
    drops = accuracy_drops(acc, tasks)
    rows = []
    for m in method_table.FIG19:
        q = f"{m} avg COIN accuracy drop"
        if f"{m}_avg" in drops:
            rows.append(report.row(f"fig19.acc_drop.{m}", drops[f"{m}_avg"],
                                   quantity=interval_label(q, f"fig19.acc_drop.{m}", ci), **_acc_cause(prov, n_samples),
                                   note=interval_note(f"fig19.acc_drop.{m}", ci)))
        else:
            rows.append(report.row(f"fig19.acc_drop.{m}", None, quantity=q, cause="not-run",
                                   note="COIN accuracy needs the trained checkpoint (full profile)",
                                   cause_detail=NOT_RUN_ACC if acc is None else
                                   f"the drop needs all five tasks; this run covered {', '.join(tasks)}"))
    for m in method_table.FIG19:  # the speedups are the simulator's: table fig19_speedup (notebook 06)
        rows += [_info(f"fig19.{m}.{col}", f"{m}: {col}", unit, ab.loc[m, col], col, prov, ev)
                 for col, unit in SUMMARY_COLS]
    if "scored_frame" in ab and ab.loc["resv", "scored_frame"] > 0:
        rows.append(report.info_row("fig19.scored_keys_ratio", "keys scored w/o clustering / clusters scored by ReSV "
                                    "(frame stage)", "x", ab.loc["resv_noclust", "scored_frame"] /
                                    ab.loc["resv", "scored_frame"], note="measured prediction-cost ratio"))
        rows.append(report.info_row("fig19.select_time_ratio", "select() wall time w/o clustering / ReSV (frame stage)",
                                    "x", ab.loc["resv_noclust", "select_s_frame"] / ab.loc["resv", "select_s_frame"],
                                    note="CPU wall time of select(); ReSV's hashing + clustering happen in observe() "
                                         "and are not included"))
    return rows


@dataclass(frozen=True)
class Fig20Summary:
    """Fig. 20 on one sample: ReSV's mean ratio (%) per layer and per KV head, and each method's mean (%)."""

    layer_mean: pd.Series
    head_mean: pd.Series
    avg: Mapping[str, float]


def fig20_summary(plh: pd.DataFrame) -> Fig20Summary:
    """From :func:`vrex_lib.accuracy.per_layer_head` rows of one sample (columns method, layer, kv_head,
    retrieval_ratio in [0, 1]; layers never consulted are NaN and left out)."""
    r = plh[plh.method == "resv"]
    return Fig20Summary(r.groupby("layer").retrieval_ratio.mean().dropna() * 100,
                        r.groupby("kv_head").retrieval_ratio.mean() * 100,
                        {m: plh[plh.method == m].retrieval_ratio.mean() * 100 for m in plh.method.unique()})


def fig20_rows(s: Fig20Summary, prov: Provenance, ev: StudyEvidence, sample_id: str) -> list[report.Row]:
    """Fig. 20: the lowest / highest per-layer ReSV ratio and ReKV / ReSV tokens on the sample."""
    c, d = workload_cause(prov, "", f"per-layer ratios of this runtime's ReSV (D1-D4) on one sample ({sample_id}) "
                          f"of {ev.n_layers} layers x {ev.n_kv_heads} KV heads, {ev.streams()}")
    rekv, resv = s.avg["rekv"], s.avg["resv"]
    if rekv >= 99.9:
        why = (f"ReKV attends to {rekv:.1f} % of the frame-stage candidates on this sample (dense while encoding "
               f"frames, and every block within its budget: see table2.ratio.rekv.frame.avg), so the ratio is "
               f"100 / ReSV's {resv:.1f} %")
        c2, d2 = workload_cause(prov, why, why)
    else:
        c2, d2 = c, d
    return with_whole_terms([
        report.row("fig20.layer_ratio_min", s.layer_mean.min(), quantity="min per-layer ReSV ratio", cause=c,
                   cause_detail=d),
        report.row("fig20.layer_ratio_max", s.layer_mean.max(), quantity="max per-layer ReSV ratio", cause=c,
                   cause_detail=d),
        report.row("fig20.fewer_than_rekv", rekv / resv, quantity="ReKV / ReSV tokens (sample)", cause=c2,
                   cause_detail=d2)])


def before_after_rows(ba: pd.DataFrame, prov: Provenance, ev: StudyEvidence,
                      tasks: Sequence[str]) -> list[report.Row]:
    """INFO rows of the before/after table (``ba``: one row per variant with the summary columns). The fidelity of a
    ``full`` variant is left out: full attention is the reference those columns compare with."""
    rows = []
    for r in ba.itertuples():
        rows += [_info(f"before_after.{r.variant.replace(' ', '_')}.{col}", f"{r.variant}: {col}", unit,
                       getattr(r, col), col, prov, ev, note=f"profile {prov.profile}, tasks {', '.join(tasks)}")
                 for col, unit in SUMMARY_COLS if not (r.variant.startswith("full") and col in _UNDEFINED)]
    return rows


def sweep_rows(sweep: pd.DataFrame, prov: Provenance, ev: StudyEvidence) -> list[report.Row]:
    """INFO rows of the Th_r-wics sweep (``sweep``: th_r_wics and the summary columns per point)."""
    return [_info(f"sweep.resv.{r.th_r_wics:g}.{col}", f"Th_r-wics={r.th_r_wics:g}: {col}", unit, getattr(r, col),
                  col, prov, ev) for r in sweep.itertuples() for col, unit in SUMMARY_COLS]
