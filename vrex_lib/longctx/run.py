"""``run()``: every trial of a study grid through the streaming runtime, resumable and cached by its inputs.

Per trial (task, context length, depth, seed) the document (:func:`~vrex_lib.longctx.task.make_trial`) is
streamed after the system prompt in ``chunk_tokens``-token steps -- the runtime's frame steps, so the recent chunk is
the always-attended window and older chunks are retrieval candidates -- into a KV store whose device tier holds
``kv_capacity`` tokens; then the question is asked in the runtime's live layout and answered greedily
(docs/DECISIONS.md D161). Each method runs through :class:`~vrex_lib.longctx.policy.StudyPolicy`:

* methods that encode the document densely (:func:`encodes_densely`: ``full``, ``flexgen``, ``infinigen``,
  ``rekv``, ``resv@text``) share one prefill, forked per method before the question (D162);
* the others (``infinigen_p``, ``rekv@frame``, ``resv``) stream the whole document themselves.

One record per (trial, method): the answer, exact match on the digits, the needle recall from the selections the
policy returned, and the text-stage selection statistics of the question and answer
(:func:`vrex_lib.workload.measure.summarize`). Written as ``results/data/retrieval_demand_<profile>.json``
(schema ``vrex.longctx/1``); finished records are kept in ``<out>.partial.json`` under the same inputs_key, so an
interrupted run resumes, and a finished file whose inputs_key matches is reused.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from .. import _io
from ..config import REPO_ROOT, ReSVConfig, RuntimeConfig, results_dir
from ..runtime import StreamingSession, check_context, lockstep
from ..workload.measure import summarize
from .grid import StudyMethod, StudyGrid, method_specs, study_grid
from .policy import StudyPolicy, fork
from .task import BOOK_TEXT, TASKS, Trial, answer_digits, exact_match, make_trial

SCHEMA = "vrex.longctx/1"
STUDY_VERSION = 1  # bump when a definition below changes: old files then mismatch their inputs_key
#: The document opens with "[" because the live layout closes a stream with "]" before the question (D161).
DOC_PREFIX = "["
#: Greedy decoding stops at the first full stop or newline: the key is a number, the answer one sentence.
STOP_STRINGS = (".", "\n")


def jsonable(x: object) -> object:
    """JSON-safe copy: numpy scalars to Python, NaN/inf to None, tuples to lists."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(float(x)) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def inputs_key(parts: dict) -> str:
    """The study's reuse key (:func:`vrex_lib._io.reuse_key`) over ``parts`` (:func:`_key_parts`)."""
    return _io.reuse_key(**jsonable(parts))


def system_tokens(model, prompt: str) -> int:
    """Tokens of ``<bos>{prompt}\\n``, the pinned sinks (``StreamingSession.add_system_prompt``)."""
    return (model.bos_token_id is not None) + len(model.encode(prompt + "\n"))


def _question_tokens(model, question: str) -> int:
    return len(model.encode(f"]\nUser: {question}\nAssistant:"))


def check_grid(model, grid: StudyGrid, cfg: RuntimeConfig) -> None:
    """Refuse, before any work, a grid the model cannot run: positions past its trained range, a document too
    short for its task, a cache over the memory budget. Messages name the length and the fix."""
    n_sys = system_tokens(model, grid.system_prompt)
    max_pos = int(getattr(model.config, "max_position_embeddings", 1 << 30))
    for b in grid.blocks:
        q = _question_tokens(model, TASKS[b.task].question)
        for n in b.lengths:
            need = n + q + grid.max_new_tokens
            if need > max_pos:
                raise ValueError(f"long-context study: context length {n} + question {q} + answer "
                                 f"{grid.max_new_tokens} = {need} tokens exceeds {model.name}'s "
                                 f"max_position_embeddings {max_pos}; drop length {n} from the grid")
            if n - n_sys < 1:
                raise ValueError(f"long-context study: context length {n} leaves no room after the "
                                 f"{n_sys}-token system prompt; raise it")
            make_trial(model, b.task, n - n_sys, b.depths[0], b.seeds[0], prefix=DOC_PREFIX)  # raises if too short
            check_context(model, need, cfg, what=f"a {n}-token {b.task} trial")


def trial_id(task: str, n: int, depth: float, seed: int) -> str:
    return f"{task}/{n}/{depth:g}/{seed}"


# ---------------------------------------------------------------------------------------------------------------
# one trial
# ---------------------------------------------------------------------------------------------------------------
def prefill_document(sess: StreamingSession, model, trial: Trial, grid: StudyGrid) -> float:
    """System prompt, then the document in chunks (one frame step each); returns the wall time in seconds."""
    t0 = time.perf_counter()
    sess.add_system_prompt(grid.system_prompt)
    for i in range(0, trial.n_tokens, grid.chunk_tokens):
        sess.add_frame_embeds(model.embed_text(list(trial.ids[i:i + grid.chunk_tokens])))
    return time.perf_counter() - t0


def _pooled(recs, n_heads: int) -> dict:
    """Sums over the consulted (step, layer, KV head) cells, so fractions can be pooled over trials."""
    cons = np.array([r.consulted for r in recs])[:, :, None] & np.ones((1, 1, n_heads), bool)
    sel = np.array([r.sel for r in recs])
    sel_off = np.array([r.sel_off for r in recs])
    cand = np.array([np.broadcast_to(r.n_cand[:, None], r.sel.shape) for r in recs])
    off = np.array([np.broadcast_to(r.n_off_cand[:, None], r.sel.shape) for r in recs])
    reu = np.array([r.reused_off for r in recs])
    wr = cons & (reu >= 0)
    return dict(sel=float(sel[cons].sum()), cand=float(cand[cons].sum()), sel_off=float(sel_off[cons].sum()),
                off=float(off[cons].sum()), reused_off=float(reu[wr].sum()), sel_off_reuse=float(sel_off[wr].sum()))


def _mean(arrs) -> float | None:
    a = np.concatenate([np.ravel(x) for x in arrs]) if arrs else np.zeros(0)
    a = a[np.isfinite(a)]
    return float(a.mean()) if a.size else None


def answer_question(sess: StreamingSession, sp: StudyPolicy, model, trial: Trial, grid: StudyGrid,
                    cfg: RuntimeConfig, spec: StudyMethod) -> dict:
    """Ask the trial's question under ``sp``'s routed method; the record of (trial, method)."""
    offset = sess.n_tokens - trial.n_tokens
    ns, ne = trial.needle_span
    sp.targets = {"value": torch.tensor([offset + p for p in trial.value_positions], dtype=torch.long),
                  "needle": torch.arange(offset + ns, offset + ne)}
    kv_len = sess.n_tokens
    pol = sp.members.get(spec.name)
    counters = getattr(getattr(pol, "inner", pol), "counters", None)  # resv_rescore: keys re-scored (D262)
    if counters is not None:
        counters.update({k: 0 for k in counters})
    sp.records, sp.recall, sp.recording = [], [], True
    t0 = time.perf_counter()
    ans = sess.ask(trial.question, max_new_tokens=grid.max_new_tokens, stop_strings=STOP_STRINGS)
    sp.recording = False
    sp.end_step()
    recs, rec_all = sp.records, sp.recall
    value = [r["value"] for r in rec_all]
    per_layer = np.full(model.n_layers, np.nan)
    if value:
        with warnings.catch_warnings():  # layers never consulted (the dense ones) are all-NaN: null
            warnings.simplefilter("ignore", RuntimeWarning)
            per_layer = np.nanmean(np.stack(value), axis=(0, 2))
    return dict(task=trial.task, depth=trial.depth, depth_actual=trial.depth_actual, seed=trial.seed, key=trial.key,
                method=spec.name, policy=spec.policy, policy_kwargs=dict(spec.kwargs), text_only=spec.text_only,
                kv_len=kv_len, answer=ans, answer_digits=answer_digits(ans), correct=exact_match(ans, trial.key),
                needle_start=offset + ns, n_text_steps=len(recs),
                recall_value=_mean(value), recall_needle=_mean([r["needle"] for r in rec_all]),
                recall_value_question=_mean(value[:1]), recall_value_per_layer=per_layer,
                text=summarize(recs, model, cfg, sess.n_sink) if recs else None,
                sums=_pooled(recs, model.n_kv_heads) if recs else None, answer_s=time.perf_counter() - t0,
                rescored_keys=dict(counters) if counters is not None else None)


def encodes_densely(spec: StudyMethod, policy) -> bool:
    """True if the method attends to the whole document at its frame steps, so its encoded document is full
    attention's: no policy (``full``), a policy that does not retrieve at frames (InfiniGen, ReKV's reference,
    ``@text`` variants), or FlexGen, which fetches every candidate (D162)."""
    return policy is None or not policy.retrieves_at_frame or spec.policy == "flexgen"


#: The study method whose record carries ReSV's mechanism rows of its trial (docs/DECISIONS.md D483).
MECHANISM_METHOD = "resv@text"


def run_trial(model, grid: StudyGrid, cell: tuple[str, int, float, int], specs: Sequence[StudyMethod], *,
              resv: ReSVConfig, cfg: RuntimeConfig, on_record: Callable[[dict], None], batched: bool = True) -> None:
    """Run ``specs`` on one trial ``cell`` = (task, length, depth, seed); ``on_record(record)`` after each method,
    in ``specs`` order. Methods that encode the document densely share one prefill (forked per method); the others
    stream it alone. ``batched``: every method's steps run as one batch (:func:`vrex_lib.runtime.lockstep`, one
    weight read per step; docs/DECISIONS.md D480); False runs them one after another. When
    :data:`MECHANISM_METHOD` runs, ReSV's mechanism instruments are read at the question of the shared prefill
    (:mod:`.mechanism`) and kept in its record as ``mechanism`` (D483)."""
    from .mechanism import Probe

    task, n, depth, seed = cell
    trial = make_trial(model, task, n - system_tokens(model, grid.system_prompt), depth, seed, prefix=DOC_PREFIX)
    pols = {s.name: s.build(resv) for s in specs}
    dense = [s for s in specs if encodes_densely(s, pols[s.name])]
    extra = dict(context_tokens=n, trial=trial_id(*cell))
    jobs: dict[str, tuple] = {}
    # the probe reads the HC tables MECHANISM_METHOD's policy builds in the shared prefill (not a second build)
    probe = Probe(resv, inner=pols[MECHANISM_METHOD].inner) if any(s.name == MECHANISM_METHOD for s in dense) else None
    if dense:
        members = {s.name: pols[s.name] for s in dense}
        if probe is not None:
            members[Probe.name] = probe
        sp = StudyPolicy(members, cfg.dense_layers)
        base = StreamingSession(model, sp, cfg)
        sp.store = base.store
        t_pre = prefill_document(base, model, trial, grid)
        if probe is not None:
            sess, sp_p = fork(base, sp)
            sp_p.route = Probe.name
            jobs[Probe.name] = (sess, lambda se, sp_p=sp_p: sp_p.members[Probe.name].read(se, trial))
        for i, s in enumerate(dense):
            sess, sp_s = (base, sp) if i == len(dense) - 1 else fork(base, sp)
            sp_s.route = s.name
            jobs[s.name] = (sess, lambda se, sp_s=sp_s, s=s: dict(
                answer_question(se, sp_s, model, trial, grid, cfg, s), shared_prefill=len(dense) > 1,
                prefill_s=t_pre))
    for s in specs:
        if s not in dense:
            sess, sp_s = _alone_session(model, s, pols[s.name], cfg)
            jobs[s.name] = (sess, lambda se, sp_s=sp_s, s=s: _stream_and_answer(se, sp_s, model, grid, trial, s, cfg))
    names = [s.name for s in specs] + ([Probe.name] if probe is not None else [])
    if batched:
        recs = dict(zip(names, lockstep([jobs[m] for m in names])))
    else:
        recs = {m: jobs[m][1](jobs[m][0]) for m in names}
    if probe is not None:
        recs[MECHANISM_METHOD]["mechanism"] = recs.pop(Probe.name)
    for s in specs:
        on_record(dict(recs[s.name], batched=batched, **extra))


def _alone_session(model, spec: StudyMethod, policy, cfg: RuntimeConfig) -> tuple[StreamingSession, StudyPolicy]:
    sp = StudyPolicy({spec.name: policy}, cfg.dense_layers)
    sp.route = spec.name
    sess = StreamingSession(model, sp, cfg)
    sp.store = sess.store
    return sess, sp


def _stream_and_answer(sess: StreamingSession, sp: StudyPolicy, model, grid: StudyGrid, trial: Trial,
                       spec: StudyMethod, cfg: RuntimeConfig) -> dict:
    t_pre = prefill_document(sess, model, trial, grid)
    return dict(answer_question(sess, sp, model, trial, grid, cfg, spec), shared_prefill=False, prefill_s=t_pre)


def run_policy(model, grid: StudyGrid, trial: Trial, spec: StudyMethod, policy, cfg: RuntimeConfig) -> dict:
    """One method alone on one trial: ``policy`` (None = full attention) streams the document and answers; the
    record of (trial, method) without the grid's bookkeeping fields."""
    sess, sp = _alone_session(model, spec, policy, cfg)
    return _stream_and_answer(sess, sp, model, grid, trial, spec, cfg)


# ---------------------------------------------------------------------------------------------------------------
# the API
# ---------------------------------------------------------------------------------------------------------------
def default_out(profile: str, grid: str = "profile") -> Path:
    tag = "" if grid == "profile" else f"_{grid}"
    return results_dir() / "data" / f"retrieval_demand_{profile}{tag}.json"


def read_results(path: str | os.PathLike) -> dict:
    """A study file (schema ``vrex.longctx/1``); a missing file or another schema is a clear error."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no long-context study here; run `python -m vrex_lib.longctx run` "
                                "(or notebook 09)")
    d, why = _io.read_json_document(p, SCHEMA, "long-context study")
    if d is None:
        raise ValueError(f"{p}: not a long-context study file ({why}); delete it and rerun the study")
    return d


def _cached(path: Path, key: str) -> dict | None:
    d, _ = _io.read_json_document(path)
    return d if d is not None and d.get("inputs_key") == key else None


def requested(profile: str, grid: StudyGrid, specs, resv: ReSVConfig, cfg: RuntimeConfig) -> dict:
    """What a study file of this request holds before any trial runs (as JSON values): a file whose fields
    differ is another configuration's study (docs/DECISIONS.md D320)."""
    return jsonable(dict(profile=profile, grid=grid.name, study=dataclasses.asdict(grid),
                         methods=[s.name for s in specs], resv=dataclasses.asdict(resv),
                         runtime=dataclasses.asdict(cfg)))


def _configuration(doc: dict) -> dict:
    return {k: doc[k] for k in ("profile", "grid", "study", "methods", "resv", "runtime") if k in doc}


#: A study file, for :func:`vrex_lib._io.check_output`.
KIND = _io.json_kind("long-context study file", "study", SCHEMA, _configuration)


def check_out(out: Path, want: dict, *, force: bool, replace: bool) -> dict | None:
    """Refuse, before the model loads, an ``out`` (or its ``<out>.partial.json``) the study must not write: a
    folder or device, a file that is not a study file (unless ``force``), the study of another configuration
    (unless ``replace``). Returns the study already there when it is this configuration's."""
    example = f"--out {out.parent / 'retrieval_demand.json'}"
    _io.check_output(out, None, flag="--out", example=example)
    _io.check_output(out.with_name(out.name + ".partial.json"), None, flag="--out's checkpoint file",
                     example=example)
    return _io.check_output(out, KIND, flag="--out", requested=want, force=force, replace=replace)


def check_model(out: Path, doc: dict | None, model) -> None:
    """Refuse a study of this configuration that another model ran (its name is known once the model is built)."""
    diff = _io.config_diff({"model": doc["model"]}, {"model": model.name}) if doc and "model" in doc else []
    if diff:
        raise _io.OutputRefused(f"--out {out} holds the study of another configuration ({diff[0]}); pass --replace "
                                "to replace it, or another --out")


def _key_parts(model, grid: StudyGrid, specs, resv: ReSVConfig, cfg: RuntimeConfig) -> dict:
    return dict(version=STUDY_VERSION, schema=SCHEMA, grid=dataclasses.asdict(grid),
                specs=[dataclasses.asdict(s) for s in specs], resv=dataclasses.asdict(resv),
                runtime=dataclasses.asdict(cfg), model=model.reuse_record(),
                tasks=[dataclasses.asdict(t) for t in TASKS.values()], prefix=DOC_PREFIX, stop=STOP_STRINGS,
                code=["vrex_lib.longctx.run"],
                inputs=[str(BOOK_TEXT), str(REPO_ROOT / "data" / "text" / "alice_ch1.txt")])


def study_setup(profile: str, grid: str | StudyGrid, methods: Sequence[str] | None = None,
                resv: ReSVConfig | None = None) -> tuple[StudyGrid, tuple[StudyMethod, ...], ReSVConfig, RuntimeConfig]:
    """(grid, method specs, ReSV config, runtime config) of a study request, as :func:`run` runs it."""
    g = study_grid(profile, grid) if isinstance(grid, str) else grid
    if methods:  # the given methods on every trial of the grid
        g = g.replace(methods=tuple(methods), blocks=tuple(dataclasses.replace(b, methods=()) for b in g.blocks))
    return g, method_specs(g.methods), resv or ReSVConfig(), RuntimeConfig(kv_capacity=g.kv_capacity,
                                                                           interval_token=False)


def run(profile: str = "default", grid: str | StudyGrid = "profile", *, out: str | os.PathLike | None = None,
        model=None, methods: Sequence[str] | None = None, resv: ReSVConfig | None = None, progress: bool = True,
        force: bool = False, replace: bool = False, model_kwargs: dict | None = None) -> Path:
    """Run the study (see the module docstring) and write it to ``out``; returns ``out``.

    profile: 'smoke' (tiny random model) | 'default' (SmolLM2-135M) | 'full'; grid: 'profile' (the profile's share
    of make reproduce), 'full' (the whole grid) or a :class:`StudyGrid`; methods: replace the grid's methods (each
    trial of the grid then runs all of them).
    A finished ``out`` with the same inputs_key is reused (``force`` recomputes); ``<out>.partial.json`` resumes.
    Checked before the model loads: an ``out`` that is not a study file is refused unless ``force``, the study of
    another configuration unless ``replace`` (docs/DECISIONS.md D320).
    """
    g, specs, resv, cfg = study_setup(profile, grid, methods, resv)
    out = Path(out) if out else default_out(profile, grid if isinstance(grid, str) else g.name)
    old = check_out(out, requested(profile, g, specs, resv, cfg), force=force, replace=replace)
    if model is None:
        from ..runtime import build_model

        model = build_model(g.model_profile, **dict(model_kwargs or {}))
    check_model(out, old, model)
    check_grid(model, g, cfg)
    key = inputs_key(_key_parts(model, g, specs, resv, cfg))
    if not force and _cached(out, key) is not None:
        return out
    partial = out.with_name(out.name + ".partial.json")
    state = (None if force else _cached(partial, key)) or dict(inputs_key=key, records={})
    t0 = time.perf_counter()
    todo = [(c, [s for s in specs if s.name in g.cell_methods(c) and s.name not in state["records"].get(
        trial_id(*c), {})]) for c in g.trials()]
    todo = [(c, ss) for c, ss in todo if ss]
    from tqdm.auto import tqdm

    bar = tqdm(total=sum(len(ss) for _, ss in todo), desc=f"retrieval demand ({g.name})", unit="run",
               disable=not progress)

    def keep(rec: dict) -> None:
        state["records"].setdefault(rec["trial"], {})[rec["method"]] = jsonable(rec)
        _io.write_json(partial, state, indent=None)
        bar.update(1)

    for cell, ss in todo:
        bar.set_postfix_str(trial_id(*cell))
        run_trial(model, g, cell, ss, resv=resv, cfg=cfg, on_record=keep)
    bar.close()
    recs = [state["records"][trial_id(*c)][s.name] for c in g.trials() for s in specs if s.name in g.cell_methods(c)]
    d = dict(schema=SCHEMA, profile=profile, grid=g.name, model=model.name, inputs_key=key,
             study=jsonable(dataclasses.asdict(g)), methods=[s.name for s in specs], resv=dataclasses.asdict(resv),
             runtime=dataclasses.asdict(cfg), n_layers=model.n_layers, n_kv_heads=model.n_kv_heads,
             n_q_heads=model.n_q_heads, head_dim=model.head_dim, kv_bytes_per_elem=model.kv_bytes_per_elem,
             system_tokens=system_tokens(model, g.system_prompt), doc_prefix=DOC_PREFIX, stop_strings=STOP_STRINGS,
             elapsed_s=round(time.perf_counter() - t0, 2), records=recs)
    _io.write_json(out, jsonable(d))
    partial.unlink(missing_ok=True)
    return out
