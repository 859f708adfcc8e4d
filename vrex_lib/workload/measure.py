"""``measure()``: the retrieval workload at the context lengths the paper sweeps, written as a schema
``vrex.workload/1`` file (read by ``vrex_lib.perf.Workload.from_measurement``; definitions in docs/DECISIONS.md
D42-D44).

One long stream of real-footage frames (:mod:`vrex_lib.streams`) goes through the runtime ONCE with full
attention while every method's policy runs in *shadow* (:mod:`vrex_lib.workload.shadow`). At each requested
kv length P the driver runs one checkpoint:

* frame stage: once the cache holds >= P tokens, one warm-up frame step and ``frame_steps`` measured frame steps
  (reuse is measured between consecutive steps, so the warm-up step gives the first measured step its
  predecessor);
* text stage: the question prefill and ``decode_tokens`` generated tokens (greedy), all measured; the question
  and answer stay in the cache, as in a streaming dialogue.

Fidelity proxies cannot come from shadow runs (nothing is steered), so they come from *real* runs: each method
steers the same stream with the same schedule up to the ``fidelity_kv`` points, with the attention-output error
measured per (layer, KV head) and each answer teacher-forced on full attention's tokens (answer agreement = share
of forced steps whose argmax equals full's token). Each checkpoint says which in ``fidelity_source``.

Resumable: the completed checkpoints and fidelity runs are kept in ``<out>.partial.json`` (same inputs_key);
a rerun replays the stream's forward passes but repeats no completed measurement.

The path of one call: :func:`measure` plans the run (:func:`_plan`: profile, methods, kv points, model, the
context-size check, the stream, the inputs key), streams it once with every policy in shadow
(:func:`_shadow_pass`: :func:`vrex_lib.runtime.drive` under the :class:`_Checkpoints` schedule, the
:class:`~vrex_lib.workload.shadow.ShadowPolicy` as the session's policy and step observer, :func:`summarize` per
checkpoint), then once per method steered (:func:`_fidelity_pass`), and writes the file (:func:`_document`).
Every count ratio of a checkpoint (selected fraction, reuse, tokens per cluster) is
:func:`vrex_lib.runtime.trace.pooled_fraction`, the one definition the runtime's trace uses.
"""
from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from .. import _io, methods as method_table
from ..config import (PROFILES, REPO_ROOT, WORKLOAD_SCHEMA as SCHEMA, ReSVConfig, RuntimeConfig, profile_config,
                      results_dir, workload_path)
from ..hw.timing import hcu_cycles, wtu_cycles
from ..retrieval import make_policy, takes_resv_config
from ..runtime import (ContextTooLarge, Question, Schedule, StreamingSession, build_model, drive, kv_bytes, lockstep,
                       memory_limit, pooled_fraction)
from ..runtime.model import FRAME_TOKENS, StreamingVideoLLM
from ..streams import LongStream, build_stream
from .files import (cached, check_out, check_same, configuration, jsonable, partial_path, resume_state,
                    write_json)
from .shadow import ShadowPolicy, StepRecord

MEASURE_VERSION = 3  # bump when a definition below changes: old files then mismatch their inputs_key
#: Every method of the paper's comparison with a simulator model (:data:`vrex_lib.methods.SIMULATED` but the
#: 'alternative' rows beyond the paper, measured on request with ``--methods``: ``resv_best`` in shadow costs the
#: default profile ~160 CPU-seconds, and its simulator model falls back on its budget rule, docs/DECISIONS.md D496);
#: their :data:`vrex_lib.methods.VARIANTS`
#: are measured beside them: ``rekv@frame``, ReKV deciding afresh at every step as the paper compares it (Table II
#: marks ReKV as retrieving during frame processing) -- the behaviour the simulator's ReKV models; ``rekv`` itself is
#: the reference code's once-per-question retrieval (docs/DECISIONS.md D60).
ALL_METHODS: tuple[str, ...] = tuple(m for m in method_table.SIMULATED if method_table.METHODS[m].role != "alternative")
QUESTION = "What is the person doing now, and what was the previous step?"


@dataclasses.dataclass(frozen=True)
class MeasureProfile:
    """What ``measure(profile)`` streams: model build, checkpoints, schedule, runtime."""

    model_profile: str
    kv_points: tuple[int, ...]
    long_kv_points: tuple[int, ...]
    fidelity_kv: tuple[int, ...]
    runtime: RuntimeConfig
    frame_steps: int = 2
    decode_tokens: int = 3
    stream_seed: int = 0
    fps: float = 2.0


def measure_profile(profile: str) -> MeasureProfile:
    """What ``measure(profile)`` streams, from the profile's ``workload`` section (:mod:`vrex_lib.profiles`)."""
    if profile not in PROFILES:
        raise ValueError(f"workload measure: unknown --profile {profile!r}; choose one of {', '.join(PROFILES)}")
    w = profile_config(profile).workload
    rc = RuntimeConfig() if w.kv_capacity is None else RuntimeConfig(kv_capacity=w.kv_capacity)
    return MeasureProfile(profile, w.kv_points, w.long_kv_points, w.fidelity_kv, rc, frame_steps=w.frame_steps,
                          decode_tokens=w.decode_tokens, stream_seed=w.stream_seed, fps=w.fps)


MEASURE_PROFILES: dict[str, MeasureProfile] = {p: measure_profile(p) for p in PROFILES}


# ---------------------------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------------------------
def _policy_specs(methods: Sequence[str], variants: Mapping[str, tuple[str, dict]] | None) -> dict[str, tuple[str, dict]]:
    """{method name: (policy name, kwargs)}; validates every name before any work."""
    specs: dict[str, tuple[str, dict]] = {}
    for m in methods:
        if m not in method_table.METHODS:
            raise ValueError(f"workload measure: unknown method {m!r} in --methods; choose from "
                             f"{', '.join(method_table.NAMES)}")
        specs[m] = (m, {})
    for name, spec in (variants or {}).items():
        if not (isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[1], Mapping)):
            raise ValueError(f"workload measure: variant {name!r} must map to (policy name, kwargs dict), got {spec!r}")
        pname, kw = spec
        if pname not in method_table.METHODS:
            raise ValueError(f"workload measure: variant {name!r} uses unknown policy {pname!r}; "
                             f"choose from {', '.join(method_table.NAMES)}")
        if name in specs:
            raise ValueError(f"workload measure: variant name {name!r} collides with a method; rename it")
        specs[name] = (pname, dict(kw))
    if not specs:
        raise ValueError("workload measure: no methods given (--methods)")
    return specs


def _make(pname: str, kw: dict, resv: ReSVConfig):
    if takes_resv_config(pname):
        return make_policy(pname, cfg=resv, **kw)
    return make_policy(pname, **kw)


def inputs_key(parts: dict) -> str:
    """The measurement's reuse key (:func:`vrex_lib._io.reuse_key`) over ``parts``."""
    return _io.reuse_key(**jsonable(parts))


@dataclasses.dataclass
class _Plan:
    """One measurement, decided before any forward pass: what every pass and the file need."""

    profile: str
    mp: MeasureProfile
    points: list[int]
    fid: list[int]
    specs: dict[str, tuple[str, dict]]
    variants: dict
    resv: ReSVConfig
    cfg: RuntimeConfig
    seed: int
    out: Path
    model: StreamingVideoLLM
    tpf: int
    stream: LongStream
    position_note: str | None
    key: str
    existing: dict | None = None  # the workload document already at ``out`` (checked by files.check_out)


def _tokens_per_frame(model: StreamingVideoLLM, cfg: RuntimeConfig) -> int:
    return FRAME_TOKENS + (len(model.encode(",")) if cfg.interval_token else 0)


def _token_counts(flag: str, values) -> list[int]:
    """Whole positive token counts (an integral float such as 1e4 is one); else a ValueError naming ``flag``."""
    out = []
    for v in values:
        ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        if not (ok and math.isfinite(float(v)) and float(v).is_integer() and v >= 1):
            raise ValueError(f"workload measure: {flag} must be whole positive token counts like 1000,5000, got "
                             f"{list(values)}")
        out.append(int(v))
    return out


def _plan(profile: str, methods: Sequence[str], kv_points, out, *, resv, runtime, variants, model, long: bool,
          fidelity_kv, stream_seed, model_kwargs, force: bool = False, replace: bool = False) -> _Plan:
    """Validate every input and the output file, build (or take) the model, refuse a context that cannot fit,
    build the stream and the inputs key -- in that order, so bad input fails before any weight loads or any
    frame is encoded."""
    mp = measure_profile(profile)
    points = sorted(set(_token_counts("--kv", kv_points if kv_points else mp.kv_points))
                    | (set(mp.long_kv_points) if long else set()))
    resv = resv or ReSVConfig()
    cfg = runtime or mp.runtime
    variants = {**method_table.variants_of(methods), **dict(variants or {})}
    specs = _policy_specs(methods, variants)
    fid_req = _token_counts("--fidelity-kv", mp.fidelity_kv if fidelity_kv is None else fidelity_kv)
    fid = sorted(p for p in fid_req if p in points)
    if fidelity_kv is not None and any(p not in points for p in fid_req):
        raise ValueError(f"workload measure: fidelity points {list(fidelity_kv)} must be among the kv points {points}")
    seed = mp.stream_seed if stream_seed is None else int(stream_seed)
    out = Path(out) if out else workload_path(profile)
    requested = jsonable(dict(profile=profile, methods=list(specs), variants=variants, kv_points=points,
                              fidelity_kv=fid, kv_capacity=cfg.kv_capacity, recent_frames=cfg.recent_frames,
                              dense_layers=cfg.dense_layers, resv=dataclasses.asdict(resv),
                              frame_steps=mp.frame_steps, decode_tokens=mp.decode_tokens, question=QUESTION,
                              stream_seed=seed))
    existing = check_out(out, requested, force=force, replace=replace)
    if model is None:
        model = build_model(mp.model_profile, **dict(model_kwargs or {}))
    if existing is not None:  # the model's identity is known only now; still before any frame is encoded
        check_same(out, configuration(existing), dict(model=model.name, vision_encoder=model.vision_name,
                                                      kv_bytes_per_elem=model.kv_bytes_per_elem), replace=replace)
    tpf = _tokens_per_frame(model, cfg)
    # frame budget: every checkpoint adds 1 + frame_steps frames and a question + answer (<= 64 tokens)
    n_frames = math.ceil(points[-1] / tpf) + len(points) * (2 + mp.frame_steps) + 4
    position_note = _check_fits(model, cfg, points, max_tokens=n_frames * tpf + len(points) * 64 + 64)
    stream = build_stream(n_frames, seed=seed, fps=mp.fps, size=model.image_size)
    key_parts = dict(version=MEASURE_VERSION, schema=SCHEMA, profile=profile, model=model.reuse_record(),
                     specs=specs, points=points, fidelity=fid, resv=resv, runtime=cfg, frame_steps=mp.frame_steps,
                     decode_tokens=mp.decode_tokens, question=QUESTION, stream=stream.key(), seed=seed,
                     code=["vrex_lib.workload.measure"])
    return _Plan(profile, mp, points, fid, specs, variants, resv, cfg, seed, out, model, tpf, stream, position_note,
                 inputs_key(key_parts), existing)


def _check_fits(model: StreamingVideoLLM, cfg: RuntimeConfig, points: list[int], max_tokens: int) -> str | None:
    """A clear error before any work if the context cannot fit in memory; a note if it runs past the model's
    trained positions (:func:`measure` warns with it when it measures)."""
    need, limit = kv_bytes(model, max_tokens), memory_limit(model, cfg)
    if need > limit:
        raise ContextTooLarge(f"workload measure: {points[-1]} tokens need a {need / 2**30:.2f} GiB KV cache for "
                              f"{model.name} but the budget is {limit / 2**30:.2f} GiB: drop the largest --kv "
                              f"point(s) (or LONG=1), or raise RuntimeConfig.max_kv_bytes on a larger machine")
    max_pos = int(getattr(model.config, "max_position_embeddings", 1 << 30))
    if max_tokens <= max_pos:
        return None
    return (f"{model.name} was trained on {max_pos} positions; checkpoints beyond that run RoPE "
            "past its trained range (the selection statistics are still measured on its real keys)")


# ---------------------------------------------------------------------------------------------------------------
# the stream schedule
# ---------------------------------------------------------------------------------------------------------------
def _frame_tokens(model: StreamingVideoLLM, stream: LongStream, batch: int = 32):
    """(frame tokens [10, hidden], time s) of every frame of ``stream``, encoded ``batch`` frames at a time as
    they are needed."""
    for a in range(0, stream.n_frames, batch):
        emb = model.embed_frames(stream.frames(a, min(stream.n_frames, a + batch)))
        for i in range(emb.shape[0]):
            yield emb[i], (a + i) / stream.fps


class _Checkpoints(Schedule):
    """A checkpoint at every kv point (see the module docstring): once the cache holds >= the point, one warm-up
    and ``frame_steps`` measured frame steps, then the question and its answer; the stream stops after the last.

    ``on_phase(point, phase)`` is called with phase 'frame_warmup', 'frame', 'text', 'plain' before the steps of
    that phase (the caller toggles measurement); ``force_answers`` {point: ids} teacher-forces the answers.
    :attr:`result` {point: dict(frame_steps, text_steps = trace step indices, answer_ids, agreement)}.
    """

    def __init__(self, points: Sequence[int], frame_steps: int, decode_tokens: int, on_phase,
                 force_answers: dict | None = None, bar=None):
        super().__init__()
        self.points, self.frame_steps, self.decode_tokens = sorted(int(p) for p in points), frame_steps, decode_tokens
        self.on_phase, self.force_answers, self.bar = on_phase, force_answers, bar
        self.result: dict = {}
        self._pi, self._pending = 0, 0  # next point; frame steps still to run in the current checkpoint

    @property
    def done(self) -> bool:
        return self._pi >= len(self.points)

    def before_frame(self, sess, index, time_s) -> None:
        p = self.points[self._pi]
        if self._pending == 0 and sess.n_tokens >= p:
            self._pending = 1 + self.frame_steps
            self.result[p] = dict(frame_steps=[], text_steps=[])
            self.on_phase(p, "frame_warmup")
        if self._pending:
            if self._pending == self.frame_steps:
                self.on_phase(p, "frame")
            if self._pending <= self.frame_steps:
                self.result[p]["frame_steps"].append(len(sess.stats))

    def after_frame(self, sess, index, time_s, wall_s, cpu_s) -> None:
        if self.bar is not None:
            self.bar.update(1)
        if not self._pending:
            return
        self._pending -= 1
        if self._pending:
            return
        p = self.points[self._pi]
        self.on_phase(p, "text")
        force = None if self.force_answers is None else self.force_answers.get(p)
        force = force or None  # an empty forced answer frees the decode
        a = self.ask(sess, Question(QUESTION, self.decode_tokens + 1 if force is None else len(force),
                                    force_ids=force))
        self.result[p].update(text_steps=a.steps, answer_ids=a.ids, agreement=a.agreement)
        self.on_phase(p, "plain")
        self._pi += 1

    def finish(self, sess) -> None:
        if not self.done:
            raise RuntimeError(f"the stream ran out of frames ({sess.n_frames}) before {self.points[self._pi]} "
                               "tokens; this is a bug in the frame budget of measure()")


class _SharedFrames:
    """One encoding of a frame-token iterator read by several streams (lockstep rows): each :meth:`reader` yields
    every item from the start; an item is computed once, by whichever reader needs it first."""

    def __init__(self, it):
        self._it, self._items, self._lock = iter(it), [], threading.Lock()

    def reader(self):
        i = 0
        while True:
            with self._lock:
                if i == len(self._items):
                    nxt = next(self._it, None)
                    if nxt is None:
                        return
                    self._items.append(nxt)
                item = self._items[i]
            yield item
            i += 1


def _stream(plan: _Plan, sess: StreamingSession, points: Sequence[int], on_phase, force_answers=None,
            bar=None, frames=None) -> dict:
    """Drive ``plan.stream`` through ``sess`` with a checkpoint at every one of ``points``; the schedule's result.
    ``frames``: the frame tokens to stream (default: encoded from ``plan.stream``)."""
    sched = _Checkpoints(points, plan.mp.frame_steps, plan.mp.decode_tokens, on_phase, force_answers, bar)
    drive(sess, _frame_tokens(plan.model, plan.stream) if frames is None else frames, sched)
    return sched.result


# ---------------------------------------------------------------------------------------------------------------
# checkpoint statistics
# ---------------------------------------------------------------------------------------------------------------
def _none(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


def _layer_list(a: np.ndarray) -> list:
    return [None if not np.isfinite(v) else float(v) for v in a]


def summarize(recs: Sequence[StepRecord], model: StreamingVideoLLM, cfg: RuntimeConfig, n_sink: int) -> dict:
    """Checkpoint fields (schema ``vrex.workload/1``) from the records of one method at one (kv point, stage)."""
    with warnings.catch_warnings():  # all-NaN slices (dense layers) are expected and become null
        warnings.simplefilter("ignore", RuntimeWarning)
        d = _selection_fields(recs, model.n_layers, model.n_kv_heads)
        d.update(_byte_fields(recs, model, cfg, n_sink))
        pl = dict(selected_frac=d.pop("per_layer_selected_frac"))
        if recs[0].clusters is not None:
            d.update(_cluster_fields(recs, model, cfg.dense_layers, pl))
        else:
            for k in ("tokens_per_cluster", "n_clusters", "hc_bytes", "hc_kv_overhead", "wics_exit_frac",
                      "dre_hcu_cycles", "dre_wtu_cycles"):
                d[k] = None
            pl["tokens_per_cluster"] = [None] * model.n_layers
            pl["wics_exit_frac"] = [None] * model.n_layers
    d["per_layer"] = pl
    d["n_steps"] = len(recs)
    d.update(_block_fields(recs))
    return d


def _block_fields(recs) -> dict:
    """Blocks touched and contiguous block runs per selected offloaded token, per layout and block size
    (``fetch_blocks_per_token`` / ``fetch_runs_per_token``: {layout: {tokens per block: value}}; null without
    offloaded selections): how the fetch granule follows the layout (docs/DECISIONS.md D244)."""
    sel_off = float(sum(r.sel_off[r.consulted].sum() for r in recs))
    tot: dict = {}
    for r in recs:
        for k, (b, n) in r.extra.get("blocks", {}).items():
            a = tot.setdefault(k, [0, 0])
            a[0] += b
            a[1] += n
    if sel_off <= 0 or not tot:
        return dict(fetch_blocks_per_token=None, fetch_runs_per_token=None)
    out: dict = dict(fetch_blocks_per_token={}, fetch_runs_per_token={})
    for (layout, b), (blocks, runs) in sorted(tot.items()):
        out["fetch_blocks_per_token"].setdefault(layout, {})[str(b)] = blocks / sel_off
        out["fetch_runs_per_token"].setdefault(layout, {})[str(b)] = runs / sel_off
    return out


def _selection_fields(recs, L: int, H: int) -> dict:
    """Candidates, selected fractions (all / offloaded tier), reuse, over the consulted (step, layer, KV head)
    cells; ``per_layer_selected_frac`` [L] (null where never consulted)."""
    cons = np.array([r.consulted for r in recs])  # [n, L]
    w = cons[:, :, None] & np.ones((1, 1, H), bool)
    sel = np.array([r.sel for r in recs])
    sel_off = np.array([r.sel_off for r in recs])
    cand = np.array([np.broadcast_to(r.n_cand[:, None], (L, H)) for r in recs])
    off = np.array([np.broadcast_to(r.n_off_cand[:, None], (L, H)) for r in recs])
    reu = np.array([r.reused_off for r in recs])
    # the same share over every selected position (either tier): defined before anything is offloaded
    rea = np.array([r.reused_all for r in recs])
    return dict(
        candidates=float(cand[w].mean()) if w.any() else 0.0,
        selected_frac=_none(pooled_fraction(sel, cand, w)),
        offloaded_candidates=float(off[w].mean()) if w.any() else 0.0,
        selected_frac_offloaded=_none(pooled_fraction(sel_off, off, w)),
        reuse_frac=_none(pooled_fraction(reu, sel_off, w & (reu >= 0))),
        reuse_frac_all=_none(pooled_fraction(rea, sel, w & (rea >= 0))),
        per_layer_selected_frac=_layer_list(pooled_fraction(sel, cand, w, axes=(0, 2))),
    )


def _byte_fields(recs, model: StreamingVideoLLM, cfg: RuntimeConfig, n_sink: int) -> dict:
    """The model's KV in the host tier, what each step reads from it (a layer the method was not consulted at --
    its dense layers -- reads all of it), the cache."""
    L, H = model.n_layers, model.n_kv_heads
    bpth = 2 * model.head_dim * model.kv_bytes_per_elem  # K+V bytes of one token in one KV head
    off_tokens, fetched = [], []
    for r in recs:
        seq = r.kv_len + r.n_new
        n_off = max(0, seq - cfg.kv_capacity - n_sink)
        off_tokens.append(n_off)
        per_layer = np.where(r.consulted[:, None], r.sel_off, n_off)  # [L, H]
        fetched.append(per_layer.sum() * bpth)
    return dict(offloaded_bytes=float(np.mean(off_tokens) * L * H * bpth), fetched_bytes=float(np.mean(fetched)),
                kv_bytes=float(np.mean([kv_bytes(model, r.kv_len + r.n_new) for r in recs])))


def _cluster_fields(recs, model: StreamingVideoLLM, dense: int, pl: dict) -> dict:
    """ReSV's HC-table statistics over the layers >= ``dense``; fills ``pl`` with their per-layer curves."""
    L, H = model.n_layers, model.n_kv_heads
    lay = np.arange(L) >= dense
    cl = np.array([r.clusters for r in recs])          # [n, L, H]
    tt = np.array([r.table_tokens for r in recs])      # [n, L]
    pf = np.array([r.prefix_frac for r in recs])
    hcb = np.array([r.hc_bytes for r in recs])
    d: dict = {}
    counted = lay[None, :, None] & np.isfinite(cl) & np.isfinite(tt)[:, :, None]
    d["tokens_per_cluster"] = _none(pooled_fraction(tt[:, :, None], cl, counted))
    d["n_clusters"] = float(np.nanmean(cl[:, lay])) if lay.any() else None
    d["hc_bytes"] = float(np.nanmean(np.nansum(hcb[:, lay], 1)))
    # HC table vs the same layers' KV in BF16 (docs/DECISIONS.md D10)
    kv_bf16 = np.mean([lay.sum() * H * 2 * model.head_dim * 2 * (r.kv_len + r.n_new) for r in recs])
    d["hc_kv_overhead"] = float(d["hc_bytes"] / kv_bf16) if kv_bf16 > 0 else None
    d["wics_exit_frac"] = float(np.nanmean(pf[:, lay])) if np.isfinite(pf[:, lay]).any() else None
    d["dre_hcu_cycles"], d["dre_wtu_cycles"] = _dre_cycles(recs, lay, H)
    # per layer: tokens per cluster of each step (table tokens x heads / clusters over heads), mean over steps
    with np.errstate(invalid="ignore", divide="ignore"):
        tpc_layer = np.nanmean(tt[:, :, None] * H / np.nansum(cl, 2, keepdims=True).clip(min=1), (0, 2))
    pl["tokens_per_cluster"] = _layer_list(np.where(lay, tpc_layer, np.nan))
    with np.errstate(invalid="ignore"):
        pl["wics_exit_frac"] = _layer_list(np.where(lay, np.nanmean(pf, 0) if np.isfinite(pf).any() else np.nan,
                                                    np.nan))
    pl["n_clusters"] = _layer_list(np.where(lay, np.nanmean(cl, (0, 2)), np.nan))
    return d


def _dre_cycles(recs, lay: np.ndarray, H: int) -> tuple[float, float]:
    """Mean HCU and WTU cycles per step (:mod:`vrex_lib.hw.timing`) of the consulted layers in ``lay``."""
    hcu, wtu = [], []
    for r in recs:
        c_h = w_c = 0
        for layer in np.nonzero(lay)[0]:
            if not r.consulted[layer]:
                continue
            rows = r.rows[layer]
            for g in range(H):
                before, after = r.clusters_before[layer, g], r.clusters[layer, g]
                c_h += hcu_cycles(r.n_new, int(before), n_opened=int(after - before))
                if np.isfinite(rows):
                    w_c += wtu_cycles(int(rows), int(after))
        hcu.append(c_h)
        wtu.append(w_c)
    return float(np.mean(hcu)), float(np.mean(wtu))


def _fidelity(trace_rows: list[dict], steps: list[int], policy_name: str) -> float | None:
    """Mean relative attention-output error over the (step, layer, KV head) cells where the policy selected."""
    errs = [r["attn_err"][np.isfinite(r["attn_err"])] for r in (trace_rows[i] for i in steps)]
    errs = np.concatenate(errs) if errs else np.zeros(0)
    if errs.size:
        return float(errs.mean())
    if all(not np.any(trace_rows[i]["applied"]) or np.all(np.isnan(trace_rows[i]["attn_err"])) for i in steps):
        return 0.0  # the method attended to every candidate at these steps: the output is full attention's
    return None


# ---------------------------------------------------------------------------------------------------------------
# the passes and the API
# ---------------------------------------------------------------------------------------------------------------
def measure(profile: str, methods: Sequence[str] = ALL_METHODS, kv_points: Sequence[int] | None = None,
            out: str | os.PathLike | None = None, *, resv: ReSVConfig | None = None,
            runtime: RuntimeConfig | None = None, variants: Mapping[str, tuple[str, dict]] | None = None,
            model: StreamingVideoLLM | None = None, progress: bool = True, long: bool = False,
            fidelity_kv: Sequence[int] | None = None, stream_seed: int | None = None,
            model_kwargs: Mapping | None = None, force: bool = False, replace: bool = False) -> Path:
    """Measure the retrieval workload (see the module docstring) and write it (schema ``vrex.workload/1``) to
    ``out``; returns ``out``.

    profile: 'smoke' | 'default' | 'full' (model build, default kv points, runtime, schedule).
    methods: policy names (default: every method with a simulator model); ``variants`` adds
      {name: (policy, kwargs)}; the :data:`vrex_lib.methods.VARIANTS` of the chosen methods are added
      (``rekv@frame`` beside ``rekv``).
    kv_points: cache lengths of the checkpoints (default: the profile's; ``long`` adds its long points, 20K-40K).
    resv / runtime: ReSV and runtime configs (default: the paper's / the profile's, KVMU capacity 4,096).
    model: a prebuilt :class:`StreamingVideoLLM` (else built from the profile with ``model_kwargs``, e.g. the full
    profile's llm_path / vision_path / connector_path / device).
    fidelity_kv: kv points with real steered runs for the fidelity proxies (default: the profile's; () for none).
    An existing ``out`` with the same inputs_key is reused; one of the same configuration but other inputs (code,
    checkpoint) is measured again. Refused before any work (:mod:`vrex_lib.workload.files`): a file that is not a
    workload document (``force`` overwrites it) and a workload of another configuration (``replace`` replaces
    it; ``force`` also recomputes a matching file).
    """
    t_start = time.perf_counter()
    plan = _plan(profile, methods, kv_points, out, resv=resv, runtime=runtime, variants=variants, model=model,
                 long=long, fidelity_kv=fidelity_kv, stream_seed=stream_seed, model_kwargs=model_kwargs,
                 force=force, replace=replace)
    if not force and cached(plan.existing, plan.key):
        return plan.out  # reused: its position note is in the file, not repeated as a warning (D463)
    if plan.position_note:
        warnings.warn(f"workload measure: {plan.position_note}", stacklevel=2)
    partial = partial_path(plan.out)
    state = resume_state(partial, plan.key)
    bar = _progress_bar(plan, state) if progress else None
    if not state["shadow_done"]:
        _shadow_pass(plan, state, partial, bar)
    _fidelity_pass(plan, state, partial, bar)
    if bar is not None:
        bar.close()
    _attach_fidelity(plan, state)
    write_json(plan.out, _document(plan, state, elapsed_s=time.perf_counter() - t_start))
    partial.unlink(missing_ok=True)
    return plan.out


def _progress_bar(plan: _Plan, state: dict):
    """One bar over every frame both passes still stream."""
    mp, fid, tpf = plan.mp, plan.fid, plan.tpf
    fid_frames = math.ceil(fid[-1] / tpf) + len(fid) * (1 + mp.frame_steps) if fid else 0
    n_fid = sum(1 for m, (p, _) in plan.specs.items() if p != "full" and m not in state["fidelity"])
    shadow = 0 if state["shadow_done"] else math.ceil(plan.points[-1] / tpf) + len(plan.points) * (1 + mp.frame_steps)
    return tqdm(total=shadow + fid_frames * n_fid, desc=f"workload {plan.profile}", unit="frame")


def _shadow_pass(plan: _Plan, state: dict, partial: Path, bar) -> None:
    """Pass 1: one full-attention stream, every policy in shadow; one checkpoint record per (point, method,
    stage), each kept in ``partial`` as soon as its point is done."""
    done_points = {int(c["kv_target"]) for c in state["checkpoints"]}
    specs = plan.specs
    shadow = ShadowPolicy({m: _make(p, kw, plan.resv) for m, (p, kw) in specs.items()}, plan.cfg.dense_layers)
    sess = StreamingSession(plan.model, shadow, plan.cfg, observers=[shadow])
    frame_recs: dict = {}

    def on_phase(point, phase):
        measuring = point not in done_points
        if phase == "frame_warmup":
            shadow.forget_previous()
            shadow.records = {m: [] for m in specs}
        shadow.active = measuring and phase in ("frame_warmup", "frame", "text")
        if phase == "text" and measuring:  # the warm-up step only gave the first measured step its predecessor
            frame_recs.update({m: [r for r in rs if r.stage == "frame"][1:] for m, rs in shadow.records.items()})
            shadow.records = {m: [] for m in specs}
            shadow.forget_previous()
        if phase == "plain" and measuring:
            text_recs = {m: list(rs) for m, rs in shadow.records.items()}
            shadow.records = {m: [] for m in specs}
            for m in specs:
                for stage, recs in (("frame", frame_recs[m]), ("text", text_recs[m])):
                    if recs:
                        state["checkpoints"].append(_checkpoint(plan, point, m, stage, recs, sess.n_sink))
            write_json(partial, state)

    res = _stream(plan, sess, plan.points, on_phase, bar=bar)
    state["answers"] = {str(p): r["answer_ids"] for p, r in res.items()}
    state["shadow_done"] = True
    write_json(partial, state)


def _checkpoint(plan: _Plan, point: int, method: str, stage: str, recs, n_sink: int) -> dict:
    """One checkpoint record of the file (fidelity fields filled in later by :func:`_attach_fidelity`)."""
    c = dict(kv_len=int(recs[0].kv_len), kv_target=int(point), method=method, stage=stage,
             policy=plan.specs[method][0], policy_kwargs=plan.specs[method][1])
    c.update(summarize(recs, plan.model, plan.cfg, n_sink))
    c.update(answer_agreement=None, attn_rel_error=None, fidelity_source=None)
    return c


def _fidelity_pass(plan: _Plan, state: dict, partial: Path, bar) -> None:
    """Pass 2: fidelity proxies from real steered runs of each method on the stream up to the fidelity points,
    teacher-forced on full attention's answers."""
    fid = plan.fid
    answers = {int(p): ids for p, ids in state["answers"].items()}
    todo = [m for m in plan.specs if fid and m not in state["fidelity"]]
    for m in todo:
        if plan.specs[m][0] == "full":
            state["fidelity"][m] = {str(p): dict(frame=(1.0, 0.0), text=(1.0, 0.0)) for p in fid}
    todo = [m for m in todo if plan.specs[m][0] != "full"]
    cfg = plan.cfg.replace(measure_attn_error=True)
    sessions = [StreamingSession(plan.model, _make(*plan.specs[m], plan.resv), cfg) for m in todo]
    points = [p for p in plan.points if p <= fid[-1]] if fid else []
    # Every method's steered run sees the same frames and forced answers: they step in lockstep, one batched
    # forward per step (vrex_lib.runtime.batch, docs/DECISIONS.md D480).
    shared = _SharedFrames(_frame_tokens(plan.model, plan.stream))
    results = lockstep([(s, lambda se: _stream(plan, se, points, lambda p, ph: None, force_answers=answers, bar=bar,
                                               frames=shared.reader())) for s in sessions])
    for m, sess, res in zip(todo, sessions, results):
        pname = plan.specs[m][0]
        rows = sess.stats
        state["fidelity"][m] = {}
        for p in fid:
            r = res[p]
            agree = r.get("agreement")
            state["fidelity"][m][str(p)] = dict(
                frame=(None, _fidelity(rows, r["frame_steps"], pname)),
                text=(None if not agree else float(np.mean(agree)), _fidelity(rows, r["text_steps"], pname)))
        write_json(partial, state)


def _attach_fidelity(plan: _Plan, state: dict) -> None:
    """Copy each method's fidelity proxies into its checkpoints at the fidelity points, naming their source."""
    fid = plan.fid
    for c in state["checkpoints"]:
        f = state["fidelity"].get(c["method"], {}).get(str(c["kv_target"]))
        if f is None:
            continue
        agree, err = f[c["stage"]]
        c["answer_agreement"], c["attn_rel_error"] = agree, err
        if plan.specs[c["method"]][0] == "full":
            c["fidelity_source"] = "reference: full attention is what both proxies compare against"
        else:
            c["fidelity_source"] = (f"steered run: {c['method']} selects on the same stream and schedule up to "
                                    f"{fid[-1]} tokens; attention-output error measured per (layer, KV head)"
                                    + ("; answer teacher-forced on full attention's tokens" if c["stage"] == "text"
                                       else "; answer agreement is a text-stage proxy"))


def _document(plan: _Plan, state: dict, elapsed_s: float) -> dict:
    """The workload file's content (schema ``vrex.workload/1``)."""
    model, stream, cfg, mp = plan.model, plan.stream, plan.cfg, plan.mp
    return dict(schema=SCHEMA, profile=plan.profile, model=model.identity.name, model_identity=model.identity.record(),
                vision={"patch-dct": "patch-embed stand-in (fixed DCT patch embedding; docs/DECISIONS.md D40)"}.get(
                    model.vision_name, model.vision_name),
                vision_encoder=model.vision_name,
                stream=dict(source=stream.source, n_frames=stream.n_frames, seed=plan.seed, fps=stream.fps,
                            clips=[c.name for c in stream.clips], size=stream.size),
                tokens_per_frame=plan.tpf, kv_capacity=cfg.kv_capacity, recent_frames=cfg.recent_frames,
                dense_layers=cfg.dense_layers, resv=dataclasses.asdict(plan.resv),
                n_layers=model.n_layers, n_kv_heads=model.n_kv_heads, n_q_heads=model.n_q_heads,
                head_dim=model.head_dim, kv_bytes_per_elem=model.kv_bytes_per_elem,
                kv_bytes_per_token=kv_bytes(model, 1), methods=list(plan.specs), variants=jsonable(plan.variants),
                kv_points=plan.points, fidelity_kv=plan.fid, frame_steps=mp.frame_steps,
                decode_tokens=mp.decode_tokens, question=QUESTION, position_note=plan.position_note,
                measurement=("one full-attention stream, every method's policy in shadow on the same keys and "
                             "queries (selection statistics); fidelity proxies from real steered runs "
                             "(docs/DECISIONS.md D42)"),
                inputs_key=plan.key, elapsed_s=round(elapsed_s, 2),
                checkpoints=sorted(state["checkpoints"], key=lambda c: (c["kv_target"], c["method"], c["stage"])))
