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
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from .. import _io
from ..config import REPO_ROOT, WORKLOAD_SCHEMA as SCHEMA, ReSVConfig, RuntimeConfig, results_dir
from ..hw.timing import hcu_cycles, wtu_cycles
from ..retrieval import POLICIES, make_policy
from ..runtime.model import FRAME_TOKENS, StreamingVideoLLM
from ..runtime.session import ContextTooLarge, StreamingSession, kv_bytes, memory_limit
from ..streams import LongStream, build_stream
from .shadow import ShadowPolicy, StepRecord

MEASURE_VERSION = 1  # bump when a definition below changes: old files then mismatch their inputs_key
ALL_METHODS: tuple[str, ...] = ("full", "flexgen", "infinigen", "infinigen_p", "rekv", "resv")
#: Measured beside a method whenever it is: ReKV as the paper compares it (Table II marks ReKV as retrieving
#: during frame processing), i.e. deciding afresh at every step -- the behaviour the simulator's ReKV models.
#: ``rekv`` itself is the reference code's once-per-question retrieval (docs/DECISIONS.md D60).
COMPANION_VARIANTS: dict[str, tuple[str, tuple[str, dict]]] = {"rekv@frame": ("rekv", ("rekv", {"mode": "frame"}))}
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


MEASURE_PROFILES: dict[str, MeasureProfile] = {
    # tiny model, tiny capacity so the offload tier is exercised in seconds
    "smoke": MeasureProfile("smoke", (200, 320), (480,), (200,), RuntimeConfig(kv_capacity=96), frame_steps=1,
                            decode_tokens=2),
    "default": MeasureProfile("default", (1000, 2000, 5000, 10000), (20000, 40000), (1000,), RuntimeConfig()),
    "full": MeasureProfile("full", (1000, 2000, 5000, 10000, 20000, 40000), (), (1000, 5000, 10000),
                           RuntimeConfig()),
}


def measure_profile(profile: str) -> MeasureProfile:
    if profile not in MEASURE_PROFILES:
        raise ValueError(f"workload measure: unknown --profile {profile!r}; choose one of {', '.join(MEASURE_PROFILES)}")
    return MEASURE_PROFILES[profile]


# ---------------------------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------------------------
def _source_digest() -> str:
    """Hash of the code that determines the numbers (runtime, policies, ReSV, DRE timing, streams, this package)."""
    h = hashlib.sha256()
    lib = REPO_ROOT / "vrex_lib"
    files = [lib / "streams.py", lib / "selection.py", lib / "hw" / "timing.py", lib / "config.py"]
    for sub in ("runtime", "retrieval", "resv", "workload"):
        files += sorted((lib / sub).glob("*.py"))
    for f in files:
        h.update(f.relative_to(REPO_ROOT).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _policy_specs(methods: Sequence[str], variants: Mapping[str, tuple[str, dict]] | None,
                  resv: ReSVConfig) -> dict[str, tuple[str, dict]]:
    """{method name: (policy name, kwargs)}; validates every name before any work."""
    specs: dict[str, tuple[str, dict]] = {}
    for m in methods:
        if m not in POLICIES:
            raise ValueError(f"workload measure: unknown method {m!r} in --methods; choose from {', '.join(POLICIES)}")
        specs[m] = (m, {})
    for name, spec in (variants or {}).items():
        if not (isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[1], Mapping)):
            raise ValueError(f"workload measure: variant {name!r} must map to (policy name, kwargs dict), got {spec!r}")
        pname, kw = spec
        if pname not in POLICIES:
            raise ValueError(f"workload measure: variant {name!r} uses unknown policy {pname!r}; "
                             f"choose from {', '.join(POLICIES)}")
        if name in specs:
            raise ValueError(f"workload measure: variant name {name!r} collides with a method; rename it")
        specs[name] = (pname, dict(kw))
    if not specs:
        raise ValueError("workload measure: no methods given (--methods)")
    return specs


def _make(pname: str, kw: dict, resv: ReSVConfig):
    if pname in ("resv", "resv_noclust"):
        return make_policy(pname, cfg=resv, **kw)
    return make_policy(pname, **kw)


def _jsonable(x):
    if dataclasses.is_dataclass(x):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(x).items()}
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def inputs_key(parts: dict) -> str:
    return hashlib.sha256(json.dumps(_jsonable(parts), sort_keys=True, default=str).encode()).hexdigest()[:20]


# ---------------------------------------------------------------------------------------------------------------
# the stream driver
# ---------------------------------------------------------------------------------------------------------------
class _HookedSession(StreamingSession):
    """A session that tells a :class:`ShadowPolicy` where every forward step begins and ends."""

    shadow: ShadowPolicy | None = None

    def _forward(self, embeds, kind, stage, frame_id=None, time_s=None):
        if self.shadow is not None:
            self.shadow.begin_step(stage, kind, self.n_tokens)
        try:
            return super()._forward(embeds, kind, stage, frame_id, time_s)
        finally:
            if self.shadow is not None:
                self.shadow.end_step()


def _tokens_per_frame(model: StreamingVideoLLM, cfg: RuntimeConfig) -> int:
    return FRAME_TOKENS + (len(model.encode(",")) if cfg.interval_token else 0)


def _drive(sess: _HookedSession, stream: LongStream, kv_points: Sequence[int], frame_steps: int, decode_tokens: int,
           on_phase, force_answers: dict | None = None, stop_after: int | None = None, bar=None,
           embed_batch: int = 32) -> dict:
    """Stream ``stream`` through ``sess`` with a checkpoint at every kv point (see the module docstring).

    ``on_phase(point, phase)`` is called with phase 'frame_warmup', 'frame', 'text', 'plain' before the steps
    of that phase (the caller toggles measurement); ``force_answers`` {point: ids} teacher-forces the answers.
    Returns {point: dict(answer ids, agreement, text step indices, frame step indices)}.
    """
    model = sess.model
    sess.add_system_prompt()
    points = sorted(int(p) for p in kv_points)
    if stop_after is not None:
        points = [p for p in points if p <= stop_after]
    out: dict = {}
    pi, fi = 0, 0
    buf, buf_start = None, 0
    pending = 0  # frame steps still to run in the current checkpoint
    while pi < len(points):
        if fi >= stream.n_frames:
            raise RuntimeError(f"the stream ran out of frames ({stream.n_frames}) before {points[pi]} tokens; "
                               "this is a bug in the frame budget of measure()")
        if pending == 0 and sess.n_tokens >= points[pi]:
            pending = 1 + frame_steps
            out[points[pi]] = dict(frame_steps=[], text_steps=[])
            on_phase(points[pi], "frame_warmup")
        if buf is None or fi >= buf_start + buf.shape[0]:
            buf_start = fi
            buf = model.embed_frames(stream.frames(fi, min(stream.n_frames, fi + embed_batch)))
        if pending:
            if pending == frame_steps:
                on_phase(points[pi], "frame")
            if pending <= frame_steps:
                out[points[pi]]["frame_steps"].append(len(sess.stats))
        sess.add_frame_embeds(buf[fi - buf_start], fi / stream.fps)
        fi += 1
        if bar is not None:
            bar.update(1)
        if pending:
            pending -= 1
            if pending == 0:
                p = points[pi]
                on_phase(p, "text")
                first = len(sess.stats)
                force = None if force_answers is None else force_answers.get(p)
                if force is not None and len(force) == 0:
                    force = None
                sess.ask(QUESTION, max_new_tokens=decode_tokens + 1 if force is None else len(force),
                         force_ids=force)
                out[p]["text_steps"] = list(range(first, len(sess.stats)))
                out[p]["answer_ids"] = [int(i) for i in sess.last_answer.get("ids", [])]
                out[p]["agreement"] = sess.last_answer.get("agreement")
                on_phase(p, "plain")
                pi += 1
    return out


# ---------------------------------------------------------------------------------------------------------------
# checkpoint statistics
# ---------------------------------------------------------------------------------------------------------------
def _ratio(num: float, den: float) -> float | None:
    return float(num / den) if den > 0 else None


def _layer_list(a: np.ndarray) -> list:
    return [None if not np.isfinite(v) else float(v) for v in a]


def summarize(recs: Sequence[StepRecord], model: StreamingVideoLLM, cfg: RuntimeConfig, n_sink: int) -> dict:
    """Checkpoint fields (schema ``vrex.workload/1``) from the records of one method at one (kv point, stage)."""
    with warnings.catch_warnings():  # all-NaN slices (dense layers) are expected and become null
        warnings.simplefilter("ignore", RuntimeWarning)
        return _summarize(recs, model, cfg, n_sink)


def _summarize(recs, model, cfg, n_sink) -> dict:
    L, H, dense = model.n_layers, model.n_kv_heads, cfg.dense_layers
    bpth = 2 * model.head_dim * model.kv_bytes_per_elem  # K+V bytes of one token in one KV head
    cons = np.array([r.consulted for r in recs])  # [n, L]
    w = cons[:, :, None] & np.ones((1, 1, H), bool)
    sel = np.array([r.sel for r in recs])
    sel_off = np.array([r.sel_off for r in recs])
    cand = np.array([np.broadcast_to(r.n_cand[:, None], (L, H)) for r in recs])
    off = np.array([np.broadcast_to(r.n_off_cand[:, None], (L, H)) for r in recs])
    reu = np.array([r.reused_off for r in recs])
    wr = w & (reu >= 0)
    d = dict(
        candidates=float(cand[w].mean()) if w.any() else 0.0,
        selected_frac=_ratio(sel[w].sum(), cand[w].sum()),
        offloaded_candidates=float(off[w].mean()) if w.any() else 0.0,
        selected_frac_offloaded=_ratio(sel_off[w].sum(), off[w].sum()),
        reuse_frac=_ratio(reu[wr].sum(), sel_off[wr].sum()),
    )
    # the same share over every selected position (either tier): defined before anything is offloaded
    rea = np.array([r.reused_all for r in recs])
    wa = w & (rea >= 0)
    d["reuse_frac_all"] = _ratio(rea[wa].sum(), sel[wa].sum())
    # bytes: the model's KV in the host tier, and what the step reads from it (dense layers read all of it)
    off_tokens, fetched = [], []
    for r in recs:
        seq = r.kv_len + r.n_new
        n_off = max(0, seq - cfg.kv_capacity - n_sink)
        off_tokens.append(n_off)
        per_layer = np.where(r.consulted[:, None], r.sel_off, n_off)  # [L, H]
        per_layer[:dense] = n_off
        fetched.append(per_layer.sum() * bpth)
    d["offloaded_bytes"] = float(np.mean(off_tokens) * L * H * bpth)
    d["fetched_bytes"] = float(np.mean(fetched))
    d["kv_bytes"] = float(np.mean([kv_bytes(model, r.kv_len + r.n_new) for r in recs]))
    with np.errstate(invalid="ignore", divide="ignore"):
        per_layer_sel = np.where(cons.any(0), (sel * w).sum((0, 2)) / np.maximum((cand * w).sum((0, 2)), 1), np.nan)
    pl = dict(selected_frac=_layer_list(per_layer_sel))
    if recs[0].clusters is not None:
        lay = np.arange(L) >= dense
        cl = np.array([r.clusters for r in recs])          # [n, L, H]
        tt = np.array([r.table_tokens for r in recs])      # [n, L]
        pf = np.array([r.prefix_frac for r in recs])
        hcb = np.array([r.hc_bytes for r in recs])
        cb = np.array([r.clusters_before for r in recs])
        with np.errstate(invalid="ignore", divide="ignore"):
            tpc_layer = np.nanmean(tt[:, :, None] * H / np.nansum(cl, 2, keepdims=True).clip(min=1), (0, 2))
        sum_cl = np.nansum(cl[:, lay]) if lay.any() else 0
        d["tokens_per_cluster"] = _ratio(np.nansum(tt[:, lay]) * H, sum_cl)
        d["n_clusters"] = float(np.nanmean(cl[:, lay])) if lay.any() else None
        d["hc_bytes"] = float(np.nanmean(np.nansum(hcb[:, lay], 1)))
        # HC table vs the same layers' KV in BF16 (docs/DECISIONS.md D10)
        kv_bf16 = np.mean([lay.sum() * H * 2 * model.head_dim * 2 * (r.kv_len + r.n_new) for r in recs])
        d["hc_kv_overhead"] = _ratio(d["hc_bytes"], kv_bf16)
        d["wics_exit_frac"] = float(np.nanmean(pf[:, lay])) if np.isfinite(pf[:, lay]).any() else None
        hcu, wtu = [], []
        for i, r in enumerate(recs):
            c_h = w_c = 0
            for layer in np.nonzero(lay)[0]:
                if not r.consulted[layer]:
                    continue
                rows = r.rows[layer]
                for g in range(H):
                    before, after = cb[i, layer, g], cl[i, layer, g]
                    c_h += hcu_cycles(r.n_new, int(before), n_opened=int(after - before))
                    if np.isfinite(rows):
                        w_c += wtu_cycles(int(rows), int(after))
            hcu.append(c_h)
            wtu.append(w_c)
        d["dre_hcu_cycles"] = float(np.mean(hcu))
        d["dre_wtu_cycles"] = float(np.mean(wtu))
        pl["tokens_per_cluster"] = _layer_list(np.where(lay, tpc_layer, np.nan))
        with np.errstate(invalid="ignore"):
            pl["wics_exit_frac"] = _layer_list(np.where(lay, np.nanmean(pf, 0) if np.isfinite(pf).any() else np.nan,
                                                        np.nan))
        pl["n_clusters"] = _layer_list(np.where(lay, np.nanmean(cl, (0, 2)), np.nan))
    else:
        for k in ("tokens_per_cluster", "n_clusters", "hc_bytes", "hc_kv_overhead", "wics_exit_frac",
                  "dre_hcu_cycles", "dre_wtu_cycles"):
            d[k] = None
        pl["tokens_per_cluster"] = [None] * L
        pl["wics_exit_frac"] = [None] * L
    d["per_layer"] = pl
    d["n_steps"] = len(recs)
    return d


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
# I/O
# ---------------------------------------------------------------------------------------------------------------
def _write_json(path: Path, obj: dict) -> None:
    _io.write_json(path, _jsonable(obj))


def read_measurement(path: str | os.PathLike) -> dict:
    """Load a schema-A workload file; a missing file or another schema is a clear error."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no workload measurement here; run "
                                "`python -m vrex_lib.workload measure --profile default` (or `make reproduce`)")
    d = json.loads(p.read_text())
    if d.get("schema") != SCHEMA:
        raise ValueError(f"{p}: schema {d.get('schema')!r}, expected {SCHEMA!r}; regenerate it")
    return d


def _cached(path: Path, key: str) -> dict | None:
    if not path.exists():
        return None
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return d if d.get("inputs_key") == key else None


# ---------------------------------------------------------------------------------------------------------------
# the API
# ---------------------------------------------------------------------------------------------------------------
def measure(profile: str, methods: Sequence[str] = ALL_METHODS, kv_points: Sequence[int] | None = None,
            out: str | os.PathLike | None = None, *, resv: ReSVConfig | None = None,
            runtime: RuntimeConfig | None = None, variants: Mapping[str, tuple[str, dict]] | None = None,
            model: StreamingVideoLLM | None = None, progress: bool = True, long: bool = False,
            fidelity_kv: Sequence[int] | None = None, stream_seed: int | None = None,
            model_kwargs: Mapping | None = None, force: bool = False) -> Path:
    """Measure the retrieval workload (see the module docstring) and write it (schema ``vrex.workload/1``) to ``out``; returns ``out``.

    profile: 'smoke' | 'default' | 'full' (model build, default kv points, runtime, schedule).
    methods: policy names (default: all of Table II and flexgen); ``variants`` adds {name: (policy, kwargs)};
      :data:`COMPANION_VARIANTS` of the chosen methods are added (``rekv@frame`` beside ``rekv``).
    kv_points: cache lengths of the checkpoints (default: the profile's; ``long`` adds its long points, 20K-40K).
    resv / runtime: ReSV and runtime configs (default: the paper's / the profile's, KVMU capacity 4,096).
    model: a prebuilt :class:`StreamingVideoLLM` (else built from the profile with ``model_kwargs``, e.g. the full
    profile's llm_path / vision_path / connector_path / device).
    fidelity_kv: kv points with real steered runs for the fidelity proxies (default: the profile's; () for none).
    An existing ``out`` with the same inputs_key is reused (``force`` recomputes); any other is recomputed.
    """
    mp = measure_profile(profile)
    t_start = time.perf_counter()
    points = sorted({int(p) for p in (kv_points if kv_points else mp.kv_points)} |
                    (set(mp.long_kv_points) if long else set()))
    if not points or points[0] < 1:
        raise ValueError(f"workload measure: --kv must be positive token counts, got {list(kv_points or [])}")
    resv = resv or ReSVConfig()
    cfg = runtime or mp.runtime
    variants = {**{n: v for n, (m, v) in COMPANION_VARIANTS.items() if m in methods}, **dict(variants or {})}
    specs = _policy_specs(methods, variants, resv)
    fid = sorted(int(p) for p in (mp.fidelity_kv if fidelity_kv is None else fidelity_kv) if int(p) in points)
    if fidelity_kv is not None and any(int(p) not in points for p in fidelity_kv):
        raise ValueError(f"workload measure: fidelity points {list(fidelity_kv)} must be among the kv points {points}")
    seed = mp.stream_seed if stream_seed is None else int(stream_seed)
    out = Path(out) if out else results_dir() / "data" / f"workload_{profile}.json"

    if model is None:
        from ..runtime.model import build_model

        model = build_model(mp.model_profile, **dict(model_kwargs or {}))
    tpf = _tokens_per_frame(model, cfg)
    # frame budget: every checkpoint adds 1 + frame_steps frames and a question + answer (<= 64 tokens)
    n_frames = math.ceil(points[-1] / tpf) + len(points) * (2 + mp.frame_steps) + 4
    max_tokens = n_frames * tpf + len(points) * 64 + 64
    # ---- a clear error before any work if the context cannot fit --------------------------------------------
    need, limit = kv_bytes(model, max_tokens), memory_limit(model, cfg)
    n_pol = len(specs)
    if need > limit:
        raise ContextTooLarge(f"workload measure: {points[-1]} tokens need a {need / 2**30:.2f} GiB KV cache for "
                              f"{model.name} but the budget is {limit / 2**30:.2f} GiB: drop the largest --kv "
                              f"point(s) (or LONG=1), or raise RuntimeConfig.max_kv_bytes on a larger machine")
    max_pos = int(getattr(model.config, "max_position_embeddings", 1 << 30))
    position_note = None
    if max_tokens > max_pos:
        position_note = (f"{model.name} was trained on {max_pos} positions; checkpoints beyond that run RoPE "
                         "past its trained range (the selection statistics are still measured on its real keys)")
        warnings.warn(f"workload measure: {position_note}", stacklevel=2)

    stream = build_stream(n_frames, seed=seed, fps=mp.fps, size=model.image_size)
    key_parts = dict(version=MEASURE_VERSION, schema=SCHEMA, profile=profile, model=model.name,
                     vision=model.vision_name, llm_params=sum(p.numel() for p in model.llm.parameters()),
                     specs=specs, points=points, fidelity=fid, resv=resv, runtime=cfg, frame_steps=mp.frame_steps,
                     decode_tokens=mp.decode_tokens, question=QUESTION, stream=stream.key(), seed=seed,
                     code=_source_digest(), dtype=str(model.dtype))
    key = inputs_key(key_parts)
    if not force and (hit := _cached(out, key)) is not None:
        return out
    partial = out.with_name(out.name + ".partial.json")
    state = _cached(partial, key) or dict(inputs_key=key, checkpoints=[], answers={}, fidelity={}, shadow_done=False)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        fid_frames = math.ceil(fid[-1] / tpf) + len(fid) * (1 + mp.frame_steps) if fid else 0
        n_fid = sum(1 for m, (p, _) in specs.items() if p != "full" and m not in state["fidelity"])
        bar = tqdm(total=(0 if state["shadow_done"] else math.ceil(points[-1] / tpf) + len(points) * (1 + mp.frame_steps))
                   + fid_frames * n_fid,
                   desc=f"workload {profile}", unit="frame")

    # ---- pass 1: one full-attention stream, every policy in shadow ---------------------------------------------
    if not state["shadow_done"]:
        done_points = {int(c["kv_target"]) for c in state["checkpoints"]}
        shadow = ShadowPolicy({m: _make(p, kw, resv) for m, (p, kw) in specs.items()}, cfg.dense_layers)
        sess = _HookedSession(model, shadow, cfg)
        shadow.store = sess.store
        sess.shadow = shadow
        current = {}

        def on_phase(point, phase):
            if phase == "frame_warmup":
                shadow.forget_previous()
                shadow.records = {m: [] for m in specs}
                current.update(point=point)
            measuring = point not in done_points
            shadow.active = measuring and phase in ("frame_warmup", "frame", "text")
            if phase == "text" and measuring:
                frame_recs = {m: [r for r in rs if r.stage == "frame"][1:] for m, rs in shadow.records.items()}
                current["frame"] = frame_recs
                shadow.records = {m: [] for m in specs}
                shadow.forget_previous()
            if phase == "plain" and measuring:
                text_recs = {m: list(rs) for m, rs in shadow.records.items()}
                shadow.records = {m: [] for m in specs}
                for m in specs:
                    for stage, recs in (("frame", current["frame"][m]), ("text", text_recs[m])):
                        if not recs:
                            continue
                        c = dict(kv_len=int(recs[0].kv_len), kv_target=int(point), method=m, stage=stage,
                                 policy=specs[m][0], policy_kwargs=specs[m][1])
                        c.update(summarize(recs, model, cfg, sess.n_sink))
                        c.update(answer_agreement=None, attn_rel_error=None, fidelity_source=None)
                        state["checkpoints"].append(c)
                _write_json(partial, state)

        res = _drive(sess, stream, points, mp.frame_steps, mp.decode_tokens, on_phase, bar=bar)
        state["answers"] = {str(p): r["answer_ids"] for p, r in res.items()}
        state["shadow_done"] = True
        _write_json(partial, state)
        del sess, shadow

    # ---- pass 2: fidelity proxies from real steered runs on the shorter stream ---------------------------------
    answers = {int(p): ids for p, ids in state["answers"].items()}
    for m, (pname, kw) in specs.items():
        if not fid or m in state["fidelity"]:
            continue
        if pname == "full":
            state["fidelity"][m] = {str(p): dict(frame=(1.0, 0.0), text=(1.0, 0.0)) for p in fid}
            continue
        sess = _HookedSession(model, _make(pname, kw, resv), cfg.replace(measure_attn_error=True))
        res = _drive(sess, stream, points, mp.frame_steps, mp.decode_tokens, lambda p, ph: None,
                     force_answers=answers, stop_after=fid[-1], bar=bar)
        rows = sess.stats
        state["fidelity"][m] = {}
        for p in fid:
            r = res[p]
            agree = r.get("agreement")
            state["fidelity"][m][str(p)] = dict(
                frame=(None, _fidelity(rows, r["frame_steps"], pname)),
                text=(None if not agree else float(np.mean(agree)), _fidelity(rows, r["text_steps"], pname)))
        _write_json(partial, state)
        del sess
    if bar is not None:
        bar.close()

    for c in state["checkpoints"]:
        f = state["fidelity"].get(c["method"], {}).get(str(c["kv_target"]))
        if f is None:
            continue
        agree, err = f[c["stage"]]
        c["answer_agreement"], c["attn_rel_error"] = agree, err
        if specs[c["method"]][0] == "full":
            c["fidelity_source"] = "reference: full attention is what both proxies compare against"
        else:
            c["fidelity_source"] = (f"steered run: {c['method']} selects on the same stream and schedule up to "
                                    f"{fid[-1]} tokens; attention-output error measured per (layer, KV head)"
                                    + ("; answer teacher-forced on full attention's tokens" if c["stage"] == "text"
                                       else "; answer agreement is a text-stage proxy"))

    d = dict(schema=SCHEMA, profile=profile, model=model.name,
             vision={"patch-dct": "patch-embed stand-in (fixed DCT patch embedding; docs/DECISIONS.md D40)"}.get(
                 model.vision_name, model.vision_name),
             vision_encoder=model.vision_name,
             stream=dict(source=stream.source, n_frames=stream.n_frames, seed=seed, fps=stream.fps,
                         clips=[c.name for c in stream.clips], size=stream.size),
             tokens_per_frame=tpf, kv_capacity=cfg.kv_capacity, recent_frames=cfg.recent_frames,
             dense_layers=cfg.dense_layers, resv=dataclasses.asdict(resv),
             n_layers=model.n_layers, n_kv_heads=model.n_kv_heads, n_q_heads=model.n_q_heads,
             head_dim=model.head_dim, kv_bytes_per_elem=model.kv_bytes_per_elem,
             kv_bytes_per_token=kv_bytes(model, 1), methods=list(specs), variants=_jsonable(dict(variants or {})),
             kv_points=points, fidelity_kv=fid, frame_steps=mp.frame_steps, decode_tokens=mp.decode_tokens,
             question=QUESTION, position_note=position_note,
             measurement=("one full-attention stream, every method's policy in shadow on the same keys and queries "
                          "(selection statistics); fidelity proxies from real steered runs (docs/DECISIONS.md D42)"),
             inputs_key=key, elapsed_s=round(time.perf_counter() - t_start, 2),
             checkpoints=sorted(state["checkpoints"], key=lambda c: (c["kv_target"], c["method"], c["stage"])))
    _write_json(out, d)
    partial.unlink(missing_ok=True)
    return out
