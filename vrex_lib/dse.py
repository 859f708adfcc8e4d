"""Design-space exploration around the paper's V-Rex point (notebook 08).

The paper fixes N_hp = 32, Th_hp = 7, Th_r-wics = 0.3 (§VI.E), a 16-lane HCU and WTU (§VI.F, Table I) and a
KVMU window (docs/DECISIONS.md D6: 4,096 tokens, ``RuntimeConfig.kv_capacity``). This module varies them one at a
time around that point and reports, per point:

* fidelity proxies measured on the runtime: greedy-answer agreement with ``full`` attention (teacher forcing on
  full's answer) and the relative attention-output error, on the fixture (one real COIN-format clip) and on a
  long stream (real clips back to back);
* the selection workload that point produces (selected fraction, tokens per cluster, WiCSum walk fraction,
  retrieved-KV reuse), measured on the same runtime steps;
* simulated per-frame latency and energy of the paper's model on V-Rex8 and V-Rex48 with that workload
  (:func:`vrex_lib.perf.simulate_measured`);
* DRE cycles per layer (WTU bucket walk measured by simulating the MyHDL WTU on recorded real rows; the cycle
  model is the simulator's, :func:`vrex_lib.perf.methods.dre_cycles`) and DRE area/power per core from
  :mod:`vrex_lib.estimate`.

ReSV parameters change selections, so they are measured on the runtime (cached in ``results/data``; a cache whose
inputs differ is recomputed, never reused). Hardware parameters (HCU/WTU lanes, WTU buckets, KVMU capacity) do not
change which tokens are selected, so they reuse the paper point's measured workload and are swept analytically.

    spec = sweep_spec("default")
    fid = measure_fidelity(spec, out=results_dir() / "data" / "dse_fidelity_default.json")
    df = design_space(spec, fid)                    # one row per point, with pareto_* columns

The interactive view of notebook 08 is built from the layers below and re-exported here: the captured layer
(:func:`vrex_lib.keys.capture_stream_qkv`), ReSV's selection on it (:func:`vrex_lib.resv.analysis.selection_view`)
and the simulated step it implies (:func:`vrex_lib.perf.sim.step_latency_ms`).
"""
from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from . import _io, keys, report
from .config import ReSVConfig, RuntimeConfig, VRexCoreConfig, profile_config
from .profiles import SweepSpec
from .estimate.core import dre_area_power
from .hw.analysis import wtu_walk_stats
from .hw.timing import wtu_cycles
from .hw.wtu import WTUParams
from .notebook import _interactive
from .perf import simulate_measured
from .perf.methods import METHODS as SIM_METHODS
from .perf.methods import dre_cycles
from .perf.sim import simulate, step_latency_ms
from .resv.analysis import selection_view  # noqa: F401  (notebook 08 reads dse.selection_view)
from .resv.bounded import BoundedConfig
from .retrieval import make_policy
from .runtime import DEFAULT_SYSTEM_PROMPT, AskAtEnd, Question, StreamingSession, build_model, drive
from .streams import clips_back_to_back
from .workload import measure

#: The paper's design point (ReSV §VI.E, core §VI.F / Table I, KVMU window RuntimeConfig default).
PAPER_POINT = dict(n_hp=ReSVConfig().n_hp, th_hp=ReSVConfig().th_hp, th_r_wics=ReSVConfig().th_r_wics,
                   kv_capacity=RuntimeConfig().kv_capacity, n_hcu_w=VRexCoreConfig().n_hcu_w,
                   n_wtu_w=VRexCoreConfig().n_wtu_w, n_buckets=WTUParams().n_buckets)
RESV_KEYS = ("n_hp", "th_hp", "th_r_wics")
HW_KEYS = ("kv_capacity", "n_hcu_w", "n_wtu_w", "n_buckets")
SCHEMA = "vrex.dse_fidelity/1"
QUESTION = "What is the person doing in the video?"


def resv_points(spec: SweepSpec) -> dict[str, dict]:
    """{name: dict(n_hp, th_hp, th_r_wics)}: the paper point, then one-at-a-time variations of ``spec`` (no
    duplicates)."""
    base = {k: PAPER_POINT[k] for k in RESV_KEYS}
    pts = {point_name(base): base}
    for k in RESV_KEYS:
        for v in getattr(spec, k):
            p = dict(base, **{k: v})
            pts.setdefault(point_name(p), p)
    return pts


def spec_inputs_key(spec: SweepSpec, model) -> str:
    """What a fidelity file of ``spec`` measured with ``model`` is keyed on (a rerun reuses a matching file): the
    sweep, the model's whole record (full config, weight files by content; a bare name for a model given by name
    only) and the code it ran (:func:`vrex_lib._io.reuse_key`, docs/DECISIONS.md D440)."""
    record = model.reuse_record() if hasattr(model, "reuse_record") else {"name": str(model)}
    return _io.reuse_key(model=record, code=["vrex_lib.dse"], args=asdict(spec), schema=SCHEMA)[:16]


def long_point_names(spec: SweepSpec) -> list[str]:
    """The ReSV points ``spec`` also measures on the long stream: every one ('all') or those named, 'paper' naming
    the paper's point (:data:`PAPER_POINT`)."""
    pts = resv_points(spec)
    if spec.long_points == "all":
        return list(pts)
    paper = point_name({k: PAPER_POINT[k] for k in RESV_KEYS})
    return [n for n in (paper if n == "paper" else n for n in spec.long_points) if n in pts]


def point_name(p: dict) -> str:
    """'resv@nhp32_th7_r0.3' -- the contract's variant naming (method@tag)."""
    return f"resv@nhp{p['n_hp']}_th{p['th_hp']}_r{p['th_r_wics']:g}"


def sweep_spec(profile: str) -> SweepSpec:
    """The sweep of each profile (its ``design_space`` section, :mod:`vrex_lib.profiles`); smoke is CI-sized,
    default fits ``make reproduce``, full sweeps densely. An unknown profile is an error naming the profiles."""
    return profile_config(profile).design_space


# ---------------------------------------------------------------------------------------------------------------
# Fidelity + workload of the ReSV points, measured on the runtime.

def _none(x: float) -> float | None:
    return None if math.isnan(x) else x


def _run_one(model, frame_embeds, times, policy, answer_ids, cfg: RuntimeConfig, max_new_tokens: int) -> dict:
    """One steered session over the stream and the question; its fidelity proxies and frame-stage workload."""
    sess = StreamingSession(model, policy, cfg)
    ans = drive(sess, zip(frame_embeds, times),
                AskAtEnd([Question(QUESTION, max_new_tokens, force_ids=answer_ids)]))[0]
    rec = dict(kv_len=int(ans.kv_len), answer=ans.text, answer_ids=list(ans.ids))
    rec["answer_agreement"] = float(np.mean(ans.agreement)) if ans.agreement else None
    if policy is None:
        return rec
    tr = sess.trace()
    rec["attn_rel_error"] = _none(tr.attention_error())
    rec["selected_frac"] = _none(tr.retrieval_ratio("frame"))
    rec["reuse_frac"] = _none(tr.reuse_fraction("frame"))
    st = tr.stats
    if "clusters" in st and "table_tokens" in st:
        last = np.nonzero(tr.step_mask("frame"))[0][-1]
        cl = st["clusters"][last]
        ok2 = np.isfinite(cl) & (cl > 0)
        rec["tokens_per_cluster"] = _none(tr.tokens_per_cluster(last))
        rec["n_clusters"] = float(np.mean(cl[ok2] / model.n_kv_heads)) if ok2.any() else None
    if "prefix_frac" in st:
        rec["wics_exit_frac"] = _none(tr.wics_exit_fraction("frame"))
    return rec


def measure_fidelity(spec: SweepSpec, out: str | Path, *, model=None, progress: bool = True,
                     force: bool = False) -> dict:
    """Measure every ReSV point of ``spec`` on the fixture (and the long stream for ``spec.long_points``); cached in
    ``out`` (JSON, schema ``vrex.dse_fidelity/1``) under an inputs key (spec + model): a matching file is reused,
    a mismatching one recomputed. Returns the file's dict: points {name: {fixture: rec, long: rec | None}}.

    Each point is run as its own session with the policy applied (its selections shape the rest of the stream, as
    in deployment); ``full`` runs first on each stream and its greedy answer is the teacher-forced reference.
    """
    out = Path(out)
    model = model or build_model(spec.profile)
    key = spec_inputs_key(spec, model)
    if out.exists() and not force:
        try:
            old = json.loads(out.read_text())
        except json.JSONDecodeError:
            old = {}
        if old.get("schema") == SCHEMA and old.get("inputs_key") == key:
            return old
    t_start = time.perf_counter()
    cfg = RuntimeConfig(measure_attn_error=True)
    pts = resv_points(spec)
    long_names = long_point_names(spec)
    streams = {"fixture": ((spec.fixture_video,), spec.fixture_frames, list(pts)),
               "long": (spec.long_videos, spec.long_frames, long_names)}
    res: dict = {n: {"fixture": None, "long": None} for n in pts}
    stream_info = {}
    total = sum(1 + len(names) for _, _, names in streams.values())
    bar = tqdm(total=total, desc=f"design space ({spec.profile})", unit="run", disable=not progress)
    for sname, (videos, n_frames, names) in streams.items():
        frames, times = clips_back_to_back(videos, n_frames, spec.fps)
        emb = model.embed_frames(frames)
        ref = _run_one(model, emb, times, None, None, cfg, spec.max_new_tokens)
        stream_info[sname] = dict(videos=list(videos), n_frames=int(n_frames), kv_len=ref["kv_len"],
                                  full_answer=ref["answer"])
        bar.update(1)
        for n in names:
            p = pts[n]
            pol = make_policy("resv", n_hp=p["n_hp"], th_hp=p["th_hp"], th_r_wics=p["th_r_wics"])
            rec = _run_one(model, emb, times, pol, ref["answer_ids"] or None, cfg, spec.max_new_tokens)
            if not ref["answer_ids"]:
                rec["answer_agreement"] = None  # full answered nothing: nothing to agree with
            rec.pop("answer_ids", None)
            res[n][sname] = rec
            bar.update(1)
    bar.close()
    doc = dict(schema=SCHEMA, profile=spec.profile, model=model.name, inputs_key=key, points=pts, results=res,
               streams=stream_info, fidelity_source="runtime sessions per point, teacher-forced on full's answer",
               elapsed_s=time.perf_counter() - t_start)
    _io.write_text(out, json.dumps(doc, indent=1, default=float))
    return doc


def measure_shadow(spec: SweepSpec, out: str | Path, *, model=None, progress: bool = False) -> dict:
    """Every ReSV point's frame-stage workload in shadow on one long full-attention stream of real footage, at each
    of ``spec.shadow_kv`` (:func:`vrex_lib.workload.measure` with ``variants``; cached there by inputs
    key). Returns {point name: [workload-file checkpoint dicts, ascending kv_len]}, {} when ``shadow_kv`` is empty."""
    if not spec.shadow_kv:
        return {}
    pts = resv_points(spec)
    paper = next(iter(pts))
    variants = {n: ("resv", dict(n_hp=p["n_hp"], th_hp=p["th_hp"], th_r_wics=p["th_r_wics"])) for n, p in pts.items()
                if n != paper}
    path = measure(spec.profile, ["resv"], list(spec.shadow_kv), out, variants=variants, model=model,
                   progress=progress, fidelity_kv=(), replace=True)  # this notebook's own cache file
    doc = json.loads(Path(path).read_text())
    res: dict = {}
    for c in doc["checkpoints"]:
        if c.get("stage") != "frame":
            continue
        name = paper if c["method"] == "resv" else c["method"]
        if name in pts:
            res.setdefault(name, []).append(c)
    for v in res.values():
        v.sort(key=lambda c: c["kv_len"])
    return res


# ---------------------------------------------------------------------------------------------------------------
# DRE: WTU walk measured in MyHDL on real rows; cycles per layer; area/power from the estimator.

def dre_layer_cycles(core: VRexCoreConfig, kv_len: int, tokens_per_cluster: float, walk: dict | None = None, *,
                     n_cores: int, n_new: int = 10, n_kv_heads: int = 8, n_q_heads: int = 32,
                     kv_capacity: int = 4096) -> dict:
    """HCU and WTU cycles of one decoder layer of the paper's model (Llama-3-8B: 8 KV / 32 query heads) for one
    frame step of ``n_new`` tokens at ``kv_len``, spread over ``n_cores`` DREs: the simulator's cycle model
    (:func:`vrex_lib.perf.methods.dre_cycles`, no cluster opened during the frame), with the WTU walk ``walk``
    (scans_per_row, resolve_per_row: :func:`wtu_walk_stats`) in place of the measured 16-bucket walk it assumes
    (``walk`` None keeps that one)."""
    C = max(1, int(math.ceil(kv_len / max(1.0, tokens_per_cluster))))
    C_recent = max(1, int(round(min(kv_len, kv_capacity) / max(1.0, tokens_per_cluster))))
    tok_per_unit = math.ceil(n_kv_heads * n_new / n_cores)
    rows_per_unit = math.ceil(n_q_heads * n_new / n_cores)
    hcu, wtu = dre_cycles(tok_per_unit, C_recent, 0, rows_per_unit, C, core)
    if walk is not None:
        wtu = wtu_cycles(rows_per_unit, C, walk["scans_per_row"], core, resolve=walk["resolve_per_row"])
    return dict(hcu_cycles=int(hcu), wtu_cycles=int(wtu), dre_us=(hcu + wtu) / core.freq_hz * 1e6)


# ---------------------------------------------------------------------------------------------------------------
# The table.

@dataclass
class Point:
    kind: str
    params: dict
    label: str = ""
    extra: dict = field(default_factory=dict)


def hardware_points(spec: SweepSpec) -> list[Point]:
    pts = []
    for k, label in (("kv_capacity", "KVMU capacity"), ("n_hcu_w", "HCU lanes"), ("n_wtu_w", "WTU lanes"),
                     ("n_buckets", "WTU buckets")):
        for v in getattr(spec, k):
            if v != PAPER_POINT[k]:
                pts.append(Point(k, dict(PAPER_POINT, **{k: v}), f"{label} {v}"))
    return pts


def _sim(system: str, kv_len: int, wl: dict, core: VRexCoreConfig, p: dict) -> tuple:
    r = simulate_measured(system, "resv", "frame", kv_len, selected_frac=wl.get("selected_frac"),
                          tokens_per_cluster=wl.get("tokens_per_cluster"), wics_exit_frac=wl.get("wics_exit_frac"),
                          reuse=wl.get("reuse_frac"), source=f"design point {point_name(p)}", system_core=core,
                          recent_capacity=int(p["kv_capacity"]), n_hp=int(p["n_hp"]))
    return float(r.latency_ms), float(r.energy_J) * 1e3, r.workload_source, r


def design_space(spec: SweepSpec, fid: dict, shadow: dict | None = None) -> pd.DataFrame:
    """One row per design point: parameters, fidelity proxies, workload, DRE cycles/area/power, simulated V-Rex8 and
    V-Rex48 per-frame latency (ms) and energy (mJ); ``pareto_latency`` / ``pareto_area`` mark the points no other
    point beats on (attention error, V-Rex8 latency) / (attention error, DRE area). ``shadow``
    (:func:`measure_shadow`) supplies every point's workload from the long stream (its longest checkpoint)."""
    res = fid["results"]
    paper_name = point_name({k: PAPER_POINT[k] for k in RESV_KEYS})
    points = [Point("paper" if n == paper_name else "resv", dict(PAPER_POINT, **p), n)
              for n, p in fid["points"].items()]
    points += hardware_points(spec)
    rows = []
    L = 32  # Llama-3-8B decoder layers (the simulated model)
    for pt in points:
        p = pt.params
        rname = point_name(p)
        m = res.get(rname) or {}
        fx_, lg = m.get("fixture") or {}, m.get("long") or {}
        # Every point's workload comes from the same stream: the shadow long stream when measured, else the
        # steered long stream when all points ran on it, else the fixture.
        sh = (shadow or {}).get(rname)
        if shadow:
            wl, wsrc = (dict(sh[-1]) if sh else {}), f"shadow long stream, kv {sh[-1]['kv_len'] if sh else '?'}"
        elif spec.long_points == "all":
            wl, wsrc = lg, "long stream (steered)"
        else:
            wl, wsrc = fx_, "fixture (steered)"
        core = VRexCoreConfig(n_hcu_w=int(p["n_hcu_w"]), n_wtu_w=int(p["n_wtu_w"]))
        walk = wtu_walk_stats(p["th_r_wics"], p["n_wtu_w"], p["n_buckets"], spec.wtu_rows)
        tpc = wl.get("tokens_per_cluster") or 32.0
        row = dict(point=pt.label, kind=pt.kind, **{k: p[k] for k in RESV_KEYS + HW_KEYS},
                   is_paper=all(p[k] == PAPER_POINT[k] for k in PAPER_POINT),
                   answer_agreement_fixture=fx_.get("answer_agreement"),
                   attn_rel_error_fixture=fx_.get("attn_rel_error"),
                   answer_agreement_long=lg.get("answer_agreement"), attn_rel_error_long=lg.get("attn_rel_error"),
                   selected_frac=wl.get("selected_frac"), tokens_per_cluster=wl.get("tokens_per_cluster"),
                   wics_exit_frac=wl.get("wics_exit_frac"), reuse_frac=wl.get("reuse_frac"),
                   workload_stream=wsrc, measured_kv_len=wl.get("kv_len"),
                   wtu_scans_per_row=walk["scans_per_row"], wtu_rows_simulated=walk["rows"])
        for sysname, n_cores in (("vrex8", 8), ("vrex48", 48)):
            lat, e_mj, src, r = _sim(sysname, spec.kv_len_sim, wl, core, p)
            dre = dre_layer_cycles(core, spec.kv_len_sim, tpc, walk, n_cores=n_cores, kv_capacity=int(p["kv_capacity"]))
            # The simulator's DRE model uses the 16-bucket walk measured in hw.timing; a point whose measured walk
            # is longer adds the part of the difference the LXE's layer time cannot hide (docs/DECISIONS.md D91).
            base = dre_layer_cycles(core, spec.kv_len_sim, tpc, None, n_cores=n_cores,
                                    kv_capacity=int(p["kv_capacity"]))
            lxe_layer_us = 1e3 * (lat - r.breakdown_ms.get("vision_mlp", 0.0)) / L
            exposed_ms = L * max(0.0, dre["dre_us"] - max(base["dre_us"], lxe_layer_us)) / 1e3
            row[f"{sysname}_latency_ms"] = lat + exposed_ms
            row[f"{sysname}_energy_mJ"] = e_mj
            row[f"{sysname}_dre_us_per_layer"] = dre["dre_us"]
            row[f"{sysname}_dre_exposed_ms"] = exposed_ms
        row["workload_source"] = src
        row.update(dre_area_power(core, p["n_hp"]))
        rows.append(row)
    df = pd.DataFrame(rows)
    df["pareto_latency"] = pareto_mask(df["attn_rel_error_fixture"], df["vrex8_latency_ms"])
    df["pareto_area"] = pareto_mask(df["attn_rel_error_fixture"], df["dre_area_mm2"])
    df["profile"] = spec.profile
    df["model"] = fid.get("model")
    df["kv_len_sim"] = spec.kv_len_sim
    return df


# ---------------------------------------------------------------------------------------------------------------
# Beyond the paper: the bounded ReSV's knobs (cap, budget, bits) on the same fronts.

#: The bounded ReSV (``resv_best``, docs/DECISIONS.md D490-D491, D513) one knob at a time around its defaults
#: (cap 8, budget 1.5 %, 4-bit keys): caps of 4 and 16 tokens per cluster (the anchors' page units are 8-32 tokens,
#: issue 45), budgets of 0.5 % and 2 % of the candidates (the retrieval target is <= 2 %), 2-bit keys (the screened
#: 2-4 bits).
BOUNDED_SWEEP: dict[str, tuple] = dict(cap=(4, 16), budget=(0.005, 0.02), bits=(2,))
BOUNDED_KEYS = ("cap", "budget", "bits")


def bounded_sweep(profile: str) -> dict[str, tuple]:
    """The bounded knobs ``profile`` sweeps (its design-space section's ``bounded_sweep``: the small fixtures' profiles
    the cap and the bits, three runtime sessions near 10 CPU-seconds of notebook 08; ``full`` every knob)."""
    return dict(sweep_spec(profile).bounded_sweep)


def bounded_name(p: dict) -> str:
    """'resv_best@cap8_b0.01_bits4'."""
    return f"resv_best@cap{p['cap']}_b{p['budget']:g}_bits{p['bits']}"


def bounded_points(sweep: dict[str, tuple] = BOUNDED_SWEEP) -> dict[str, dict]:
    """{name: dict(cap, budget, bits)}: ``resv_best``'s defaults, then one-at-a-time variations (no duplicates)."""
    unknown = sorted(set(sweep) - set(BOUNDED_KEYS))
    if unknown:
        raise ValueError(f"bounded sweep: unknown knob(s) {', '.join(unknown)}; choose from {', '.join(BOUNDED_KEYS)}")
    d = BoundedConfig()
    base = {k: getattr(d, k) for k in BOUNDED_KEYS}
    pts = {bounded_name(base): base}
    for k, values in sweep.items():
        for v in values:
            p = dict(base, **{k: v})
            BoundedConfig(**p)  # an out-of-range knob is an error here, before any run
            pts.setdefault(bounded_name(p), p)
    return pts


def measure_bounded(spec: SweepSpec, out: str | Path, *, model=None, sweep: dict[str, tuple] | None = None,
                    force: bool = False) -> dict:
    """Every bounded point's fidelity proxies and selected fraction on the fixture stream (as
    :func:`measure_fidelity` measures the ReSV points there), cached in ``out`` under an inputs key (spec, sweep,
    model, code). ``sweep``: default :func:`bounded_sweep` of the spec's profile. Returns {schema, points {name:
    knobs}, results {name: rec}, elapsed_s}."""
    out = Path(out)
    pts = bounded_points(bounded_sweep(spec.profile) if sweep is None else sweep)
    model = model or build_model(spec.profile)
    record = model.reuse_record() if hasattr(model, "reuse_record") else {"name": str(model)}
    code = ["vrex_lib.dse", "vrex_lib.resv.bounded", "vrex_lib.retrieval.bounded_policy"]
    key = _io.reuse_key(model=record, code=code,
                        args=dict(spec=asdict(spec), points=pts), schema=SCHEMA + "+bounded")[:16]
    if out.exists() and not force:
        try:
            old = json.loads(out.read_text())
        except json.JSONDecodeError:
            old = {}
        if old.get("inputs_key") == key:
            return old
    t_start = time.perf_counter()
    cfg = RuntimeConfig(measure_attn_error=True)
    frames, times = clips_back_to_back((spec.fixture_video,), spec.fixture_frames, spec.fps)
    emb = model.embed_frames(frames)
    ref = _run_one(model, emb, times, None, None, cfg, spec.max_new_tokens)
    res = {}
    for n, p in pts.items():
        rec = _run_one(model, emb, times, make_policy("resv_best", **p), ref["answer_ids"] or None, cfg,
                       spec.max_new_tokens)
        if not ref["answer_ids"]:
            rec["answer_agreement"] = None
        rec.pop("answer_ids", None)
        res[n] = rec
    doc = dict(schema=SCHEMA + "+bounded", profile=spec.profile, model=model.name, inputs_key=key, points=pts,
               results=res, elapsed_s=time.perf_counter() - t_start)
    _io.write_text(out, json.dumps(doc, indent=1, default=float))
    return doc


def bounded_space(spec: SweepSpec, bfid: dict, core_delta: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per bounded point (kind 'bounded', the columns of :func:`design_space`): fixture fidelity and
    selected fraction (:func:`measure_bounded`), V-Rex8/48 latency and energy per frame step at ``spec.kv_len_sim``
    from the simulator's ``resv_best`` with those knobs (its fetch is the budget rule under the paper-stated
    workload, :mod:`vrex_lib.perf.methods.resv_bounded`), DRE area/power = the paper point's plus the per-core
    delta of the added blocks (``core_delta``: :func:`vrex_lib.estimate.bounded.core_delta`'s frame, synthesised
    at the default knobs -- 4-bit keys, so an upper bound for 2 bits; the cap does not change the blocks; NaN
    without it)."""
    base = dre_area_power(VRexCoreConfig(), PAPER_POINT["n_hp"])
    add_mm2 = float(core_delta.area_um2.sum()) / 1e6 if core_delta is not None else float("nan")
    add_mw = float(core_delta.power_mW.sum()) if core_delta is not None else float("nan")
    rows = []
    for n, p in bfid["points"].items():
        m = bfid["results"][n]
        row = dict(point=n, kind="bounded", **{k: PAPER_POINT[k] for k in RESV_KEYS + HW_KEYS}, **p, is_paper=False,
                   answer_agreement_fixture=m.get("answer_agreement"), attn_rel_error_fixture=m.get("attn_rel_error"),
                   selected_frac=m.get("selected_frac"), workload_stream="fixture (steered)")
        method = SIM_METHODS["resv_best"].replace(cfg=BoundedConfig(**p))
        for sysname in ("vrex8", "vrex48"):
            r = simulate(sysname, method, "frame", spec.kv_len_sim, workload="paper")
            row[f"{sysname}_latency_ms"] = float(r.latency_ms)
            row[f"{sysname}_energy_mJ"] = float(r.energy_J) * 1e3
        row["workload_source"] = r.workload_source
        row.update(base, dre_area_mm2=base["dre_area_mm2"] + add_mm2, dre_power_mW=base["dre_power_mW"] + add_mw)
        rows.append(row)
    return pd.DataFrame(rows)


def with_bounded(df: pd.DataFrame, bdf: pd.DataFrame) -> pd.DataFrame:
    """:func:`design_space`'s rows and :func:`bounded_space`'s, the Pareto columns recomputed over both."""
    out = pd.concat([df, bdf], ignore_index=True)
    out["pareto_latency"] = pareto_mask(out["attn_rel_error_fixture"], out["vrex8_latency_ms"])
    out["pareto_area"] = pareto_mask(out["attn_rel_error_fixture"], out["dre_area_mm2"])
    for c in ("profile", "model", "kv_len_sim"):
        out[c] = df[c].iloc[0]
    return out


def pareto_mask(a, b) -> np.ndarray:
    """True where no other point is <= on both (minimised) objectives and < on one; NaN rows are never on it."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    ok = np.isfinite(a) & np.isfinite(b)
    out = np.zeros(len(a), bool)
    for i in np.nonzero(ok)[0]:
        dom = ok & (a <= a[i]) & (b <= b[i]) & ((a < a[i]) | (b < b[i]))
        out[i] = not dom.any()
    return out


def write_design_space(df: pd.DataFrame, profile: str, out: str | Path | None = None) -> Path:
    """``results/tables/design_space.csv`` (atomic, via :func:`vrex_lib.report.write_wide_table`)."""
    n_p = int(df["pareto_latency"].sum())
    summary = ["point", "attn_rel_error_fixture", "answer_agreement_fixture", "selected_frac", "tokens_per_cluster",
               "vrex8_latency_ms", "vrex8_energy_mJ", "vrex48_latency_ms", "dre_area_mm2", "dre_power_mW"]
    return report.write_wide_table("design_space", df, profile=profile, out=out, summary_columns=summary,
                                   title=f"Design space around the paper's point ({len(df)} points, {n_p} on the "
                                         "error x V-Rex8 latency front)")


# ---------------------------------------------------------------------------------------------------------------
# Interactive view (notebook 08): one layer's selection on a real stream, and the simulated step it implies.

def capture_stream_qkv(model, videos: Sequence[str], n_frames: int, fps: float = 2.0, layer: int | None = None) -> dict:
    """Post-RoPE q, k, v [H, T, D] of one layer for ``<bos> system prompt`` + ``n_frames`` frames of ``videos``
    played back to back (:func:`vrex_lib.keys.capture_stream_qkv`; 10 tokens a frame, no interval tokens: a plain
    prefill, for :func:`selection_view`). Returns dict(q, k, v, n_sink, frame_len, layer)."""
    frames, _ = clips_back_to_back(videos, n_frames, fps)
    return keys.capture_stream_qkv(model, frames, DEFAULT_SYSTEM_PROMPT + "\n", layer)


def simulated_step(kv_len: int, view: dict, systems: Sequence[str] = ("vrex8", "agx_orin")) -> dict[str, float]:
    """Per-frame latency (ms) of the paper's model at ``kv_len`` with the view's selection, per system."""
    return step_latency_ms(systems, "resv", "frame", int(kv_len), selected_frac=view["selected_frac"],
                           tokens_per_cluster=view["tokens_per_cluster"], wics_exit_frac=view["wics_exit_frac"],
                           source="selection view")


def interactive() -> bool:
    """True in a live Jupyter kernel (widgets work); False under papermill or plain Python (draw static plots)."""
    return _interactive()

