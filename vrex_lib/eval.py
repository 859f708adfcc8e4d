"""COIN evaluation runner: one method × one task, resumable, shardable, mergeable.

    python -m vrex_lib.eval --task step --method resv --profile default \\
        --out results/eval/default/resv/step.jsonl [--max-samples N] [--num-shards K --shard-index i]
    torchrun --nproc-per-node 8 -m vrex_lib.eval --task step --method resv --profile full \\
        --coin-root ~/coin --llm-path ... --vision-path ... --connector-path ... --out results/eval/full/resv/step.jsonl
    python -m vrex_lib.eval merge --out results/eval/full/resv/step.jsonl results/eval/full/resv/step.shard*.jsonl

Each sample is streamed through :class:`~vrex_lib.runtime.StreamingSession` in the COIN prompt layout the
checkpoint was trained with (``prompt_layout="coin"``: the question, then the frames at 2 fps, one prefill per
frame, then a greedy answer; ``"live"`` asks after the frames) and appended as one JSON line (write + flush + fsync). A restarted run
skips the sample ids already in the file; a torn last line (interrupted write) is dropped first. Under torchrun
(``RANK``/``WORLD_SIZE`` set) each rank takes shard ``RANK`` of ``WORLD_SIZE``; shard k holds samples k, k+K, ...
and writes ``<out stem>.shard<k>of<K>.jsonl``; ``merge`` orders the shards' lines by sample index.

A JSON line (see :func:`evaluate_sample`): sample_id, index, n_total, task, method, profile, prediction, target,
correct (COIN Top-1 of this sample, %), n_frames, n_tokens, ratio_frame / ratio_text (retrieval ratio: selected /
candidates over layers where the policy ran), host_bytes_frame / host_bytes_text (KV bytes fetched from the
offload tier), first_token, frame_argmax (the next-token argmax after every frame step), answer_ids, the
agreement with the ``full`` method's line for the same sample when a reference file is available
(ref_first_token_agree, ref_frame_argmax_agree, ref_answer_match, ref_prefix_tokens), timing_s (decode, vision,
prefill, answer, total), the configuration (method kwargs, runtime config, seed), ``prompt_layout``,
``n_frames_expected`` (frames of the annotated span) and ``frames_action`` (how ``max_frames`` applied).

Spans longer than ``max_frames`` (default: Live1+'s ``max_num_frames`` = 1,200) follow ``frames_policy``
(:data:`vrex_lib.coin.FRAMES_POLICIES`; default 'videollm-online': the stream is cut and the question answered
without frames, as ``StreamMixIn.max_frames_clip`` does); each such sample and each video shorter than its
annotated span is listed in the skip file with its counts.

Next to each results file: ``<stem>.run.json`` (the run's configuration and its hash ``config_key``, the shard,
n_total, and the samples skipped with the reason) and ``<stem>.skips.csv`` (the human-readable skip log, including
the annotation ``clamp`` notes). Every line carries ``config_key``: resuming a file written under another
configuration (method, kwargs, profile, model, task, split, annotation-file hash, ...) is an error naming the
file, and ``merge`` accepts only the shards of one run, complete up to the samples their run.json lists as skipped
(docs/DECISIONS.md D70). Videos that are missing or fail to decode are skipped and listed; a run in which every
sample was skipped exits non-zero (D75). Every flag and path, the output folder's writability and each sample's KV
size are checked before the model is built. Bad input ends the CLI with one line naming the flag or file (exit 2).
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .config import RuntimeConfig, profile_config, seed_everything

TIMING_KEYS = ("timing_s",)
MAX_NEW_TOKENS = {"smoke": 8, "default": 24, "full": 512}


# ---------------------------------------------------------------------------------------------- JSONL I/O

def read_jsonl(path: str | os.PathLike, repair: bool = False) -> list[dict]:
    """Lines of a results file. A torn last line (no newline / bad JSON) is ignored, or cut off if ``repair``."""
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    out, good_end, pos = [], 0, 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break  # no newline: an interrupted append
        line = data[pos:nl]
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                if nl + 1 < len(data):
                    raise ValueError(f"{p}: line {len(out) + 1} is not valid JSON and is not the last line; "
                                     "the file is damaged, delete it (or that line) and rerun") from None
                break
        good_end = pos = nl + 1
    if repair and good_end < len(data):
        with open(p, "r+b") as f:
            f.truncate(good_end)
            f.flush()
            os.fsync(f.fileno())
    return out


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    """Append one line durably (write + flush + fsync): a crash leaves at most a torn last line."""
    line = json.dumps(record, ensure_ascii=False, default=_json_default) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def shard_path(out: str | os.PathLike, shard_index: int, num_shards: int) -> Path:
    out = Path(out)
    if num_shards <= 1:
        return out
    return out.with_name(f"{out.stem}.shard{shard_index}of{num_shards}{out.suffix}")


def run_file(results: str | os.PathLike) -> Path:
    """The run sidecar of a results file: ``<stem>.run.json`` (configuration, shard, skipped samples)."""
    p = Path(results)
    return p.with_name(p.stem + ".run.json")


def skips_file(results: str | os.PathLike) -> Path:
    """The human-readable skip log of a results file: ``<stem>.skips.csv`` (:class:`vrex_lib.coin.SkipLog`)."""
    p = Path(results)
    return p.with_name(p.stem + ".skips.csv")


def _read_run(path: Path) -> dict | None:
    rp = run_file(path)
    if not rp.exists():
        return None
    try:
        run = json.loads(rp.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{rp}: unreadable run record ({err}); delete it together with {path.name} and rerun "
                         "that shard") from None
    if not isinstance(run, dict) or "config_key" not in run:
        raise ValueError(f"{rp}: not a vrex run record (no config_key); delete it and rerun that shard")
    return run


def merge_shards(paths: Sequence[str | os.PathLike], out: str | os.PathLike, *, require_complete: bool = True) -> Path:
    """Merge shard files of ONE run into ``out`` ordered by sample index, atomically; returns ``out``.

    Refused (ValueError naming the files): a path that does not exist or is not a results file; shards of
    different runs (task, method, profile or configuration key differ -- e.g. a ``step`` and a ``next`` shard);
    two different samples at one index. With ``require_complete`` every index 0..n_total-1 must be present or
    listed as skipped in its shard's ``<stem>.run.json`` (a missing video or an undecodable span); the
    ``clamp`` notes of the skip log never excuse a missing sample. Next to ``out`` the merged
    ``<stem>.run.json`` and ``<stem>.skips.csv`` are written, so the merged file resumes and merges like a
    single-shard run.
    """
    from . import _io

    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("merge: no shard files given; pass the shard JSONL files after --out")
    out = Path(out)
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"merge: {p} does not exist; pass the shard files the runs wrote "
                                    "(<out stem>.shard<k>of<K>.jsonl)")
        if not p.is_file():
            raise ValueError(f"merge: {p} is not a file; pass the shard JSONL files themselves")
    recs: dict[str, dict] = {}
    by_index: dict[int, tuple[str, Path]] = {}
    origin: dict[str, Path] = {}
    runs: list[tuple[Path, dict]] = []
    seen: dict[str, tuple[object, Path]] = {}

    def agree(field_name: str, value, p: Path) -> None:
        if field_name not in seen:
            seen[field_name] = (value, p)
            return
        v0, p0 = seen[field_name]
        if v0 != value:
            raise ValueError(f"merge: {p0} holds {field_name} {v0!r} but {p} holds {field_name} {value!r}: these are "
                             "shards of different runs; merge only the shards of one task/method/configuration")

    for p in paths:
        rows = read_jsonl(p)
        run = _read_run(p)
        if not rows and run is None:
            raise ValueError(f"merge: {p} holds no results and has no {run_file(p).name}: not a finished shard "
                             "(run or resume it first)")
        if run is not None:
            runs.append((p, run))
            for f in ("task", "method", "profile", "config_key"):
                agree(f, run.get(f), p)
        for r in rows:
            for f in ("task", "method", "profile", "config_key"):
                agree(f, r.get(f), p)
            sid, idx = r["sample_id"], int(r["index"])
            if sid in recs:
                if int(recs[sid]["index"]) != idx:
                    raise ValueError(f"merge: sample {sid} is index {recs[sid]['index']} in {origin[sid]} but {idx} "
                                     f"in {p}: shards of different sample lists")
                continue
            if idx in by_index:
                raise ValueError(f"merge: index {idx} is sample {by_index[idx][0]} in {by_index[idx][1]} but {sid} "
                                 f"in {p}: shards of different sample lists (split, --max-samples or COIN.json)")
            recs[sid], origin[sid], by_index[idx] = r, p, (sid, p)
    rows = sorted(recs.values(), key=lambda r: r["index"])
    n_totals = {int(r["n_total"]) for r in rows} | {int(run["n_total"]) for _, run in runs if "n_total" in run}
    n_total = max(n_totals) if n_totals else 0
    skipped: dict[int, dict] = {}
    for _, run in runs:
        for s in run.get("skipped", []):
            if int(s["index"]) not in by_index:
                skipped.setdefault(int(s["index"]), s)
    missing = [i for i in range(n_total) if i not in by_index and i not in skipped]
    if missing:
        msg = (f"merge: {len(missing)} of {n_total} samples missing: neither in the shards nor listed as skipped "
               f"(indices {', '.join(map(str, missing[:8]))}{' ...' if len(missing) > 8 else ''})")
        if require_complete:
            raise ValueError(msg + "; finish or resume the shard runs that hold them (shard k of K holds indices "
                             "k, k+K, ...), or pass --allow-partial to merge what is there")
        print(f"warning: {msg}; merged anyway (--allow-partial)", file=sys.stderr)
    if not rows:
        raise ValueError(f"merge: the shards {', '.join(map(str, paths))} hold no results"
                         + (f" (all {len(skipped)} samples were skipped; see their .skips.csv)" if skipped else ""))
    _io.write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    if runs:
        base = dict(runs[0][1])
        base.update(shard_index=0, num_shards=1, n_total=n_total, merged_from=[str(p) for p, _ in runs],
                    skipped=[skipped[i] for i in sorted(skipped)], complete=not missing)
        _io.write_json(run_file(out), base)
    skip_lines: list[str] = []
    for p in paths:
        sk = skips_file(p)
        if sk.exists():
            body = sk.read_text().splitlines()
            skip_lines += [ln for ln in body[1:] if ln not in skip_lines]
    _io.write_text(skips_file(out), "\n".join(["video_id,stage,action,reason", *skip_lines]) + "\n")
    return out


# ---------------------------------------------------------------------------------------------- runner

def shard_from_env(num_shards: int | None, shard_index: int | None) -> tuple[int, int]:
    """(num_shards, shard_index): explicit arguments win, else torchrun's WORLD_SIZE/RANK, else (1, 0)."""
    if num_shards is None:
        num_shards = _env_int("WORLD_SIZE", 1)
        shard_index = _env_int("RANK", 0) if shard_index is None else shard_index
    shard_index = 0 if shard_index is None else shard_index
    if num_shards < 1:
        raise ValueError(f"--num-shards must be >= 1 (the number of parallel runs), got {num_shards}"
                         + (" from $WORLD_SIZE" if "WORLD_SIZE" in os.environ else ""))
    if not 0 <= shard_index < num_shards:
        raise ValueError(f"--shard-index {shard_index} must be in [0, {num_shards}) for --num-shards {num_shards}")
    return num_shards, shard_index


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name, str(default))
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"${name}={v!r} is not an integer (set by torchrun); unset it or pass --num-shards and "
                         "--shard-index") from None


def model_identity(profile: str, model=None, llm_path=None, vision_path=None, connector_path=None) -> str:
    """What decides the model's outputs, known before any weight loads (the name ``build_model`` gives it)."""
    if model is not None:
        return str(getattr(model, "name", type(model).__name__))
    if profile == "smoke":
        return "tiny-llama"
    if profile == "default":
        return Path(llm_path).name if llm_path else "SmolLM2-135M-Instruct"
    return "videollm-online-8b:" + ":".join(str(Path(p).expanduser().resolve()) for p in
                                             (llm_path, vision_path, connector_path) if p)


def run_config(*, task: str, method: str, method_kwargs: dict | None, profile: str, model: str, split: str,
               data_file: str | os.PathLike, max_new_tokens: int, max_frames: int | None,
               runtime_cfg: RuntimeConfig, seed: int, prompt_layout: str = "coin",
               frames_policy: str = "videollm-online") -> dict:
    """Everything that decides a sample's result line, plus its hash ``config_key`` (resume and merge key on it).

    The data file enters by its SHA-256, so an edited or different COIN.json never resumes an old file.
    """
    import hashlib

    h = hashlib.sha256()
    with open(data_file, "rb") as f:
        for blk in iter(lambda: f.read(1 << 20), b""):
            h.update(blk)
    cfg = dict(task=task, method=method, method_kwargs=method_kwargs or {}, profile=profile, model=model,
               split=split, data_file=str(data_file), data_sha256=h.hexdigest(), max_new_tokens=max_new_tokens,
               max_frames=max_frames, runtime_config=repr(runtime_cfg), seed=seed, prompt_layout=prompt_layout,
               frames_policy=frames_policy)
    keyed = {k: v for k, v in cfg.items() if k != "data_file"}  # the same bytes elsewhere are the same data
    cfg["config_key"] = hashlib.sha256(json.dumps(keyed, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return cfg


def check_resume(out_path: Path, cfg: dict) -> list[dict]:
    """The rows of ``out_path`` that this configuration may resume from; a ValueError if they are another run's."""
    rows = read_jsonl(out_path)
    if not rows:
        return rows
    keys = {r.get("config_key") for r in rows}
    if keys == {cfg["config_key"]}:
        return rows
    old = _read_run(out_path) or {}
    if not old and len(keys) == 1:  # no run record: compare what the rows carry
        r0 = rows[0]
        old = dict(task=r0.get("task"), method=r0.get("method"), method_kwargs=r0.get("method_kwargs"),
                   profile=r0.get("profile"), runtime_config=r0.get("runtime_config"), seed=r0.get("seed"))
    diff = [f"{k}: {old.get(k)!r} there, {cfg[k]!r} now" for k in cfg
            if k not in ("config_key", "data_file") and k in old and old.get(k) != cfg[k]]
    why = ("; ".join(diff) if diff and len(keys) == 1 else
           "its rows come from several configurations" if len(keys) > 1 else
           "its rows carry no configuration key (an older run)" if keys == {None} else
           "written under another configuration")
    raise ValueError(f"{out_path}: holds {len(rows)} results of another run ({why}); resuming would report them as "
                     "this run's. Delete or move that file (and its .run.json/.skips.csv), or pass another --out.")


def _device_for_rank(profile: str) -> str | None:
    import torch

    if profile == "full" and torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    return None


_FRAME_CACHE: dict = {}
_MODEL_UID = itertools.count()
_FRAME_CACHE_MAX = 64


def _frame_embeds(model, path: Path, start: float, end: float, max_frames: int | None):
    # max_frames here is a clamp (keep the last N); 0 frames (a cut stream) never reaches this function.
    """Decoded + vision-encoded frames of a span, cached per (model, file, span): every method sees the same
    frame tokens, and notebook 03 runs six methods over the same samples."""
    import torch

    from . import video

    if not hasattr(model, "_vrex_uid"):
        model._vrex_uid = next(_MODEL_UID)  # id() could be reused by a later model
    key = (model._vrex_uid, str(path), float(start), float(end), max_frames)
    if key in _FRAME_CACHE:
        return _FRAME_CACHE[key]
    t0 = time.perf_counter()
    frames, ts = video.read_frames(path, fps=2.0, max_side=model.image_size, start=start, end=end)
    if max_frames is not None and len(frames) > max_frames:
        frames, ts = frames[-max_frames:], ts[-max_frames:]  # keep the most recent frames before the question
    t1 = time.perf_counter()
    with torch.inference_mode():
        emb = torch.cat([model.embed_frames(frames[b:b + 16]) for b in range(0, len(frames), 16)])
    t2 = time.perf_counter()
    if len(_FRAME_CACHE) >= _FRAME_CACHE_MAX:
        _FRAME_CACHE.pop(next(iter(_FRAME_CACHE)))
    _FRAME_CACHE[key] = (emb, ts, t1 - t0, t2 - t1)
    return _FRAME_CACHE[key]


PROMPT_LAYOUTS: tuple[str, ...] = ("coin", "live")


def frames_action(n_frames: int, max_frames: int | None, frames_policy: str) -> str:
    """What ``max_frames`` does to a span of ``n_frames``: 'keep', 'clamp' (last ``max_frames`` frames),
    'cut' (no frames: VideoLLM-online's ``max_frames_clip`` drops the whole stream) or 'skip' (sample not run)."""
    from .coin import FRAMES_POLICIES

    if frames_policy not in FRAMES_POLICIES:
        raise ValueError(f"unknown frames policy {frames_policy!r}: choose one of {', '.join(FRAMES_POLICIES)}")
    if max_frames is None or n_frames <= max_frames:
        return "keep"
    return {"videollm-online": "cut", "skip": "skip", "clamp": "clamp"}[frames_policy]


def evaluate_sample(model, policy, sample, index: int, n_total: int, videos_dir: Path, *, method: str,
                    profile: str, runtime_cfg: RuntimeConfig, max_new_tokens: int, max_frames: int | None = None,
                    reference: dict | None = None, trace_dir: Path | None = None, system_prompt: str | None = None,
                    method_kwargs: dict | None = None, seed: int = 0, prompt_layout: str = "coin",
                    frames_policy: str = "videollm-online") -> dict:
    """Stream one COIN sample; returns its JSON record (see the module docstring).

    ``prompt_layout`` 'coin': system, user prompt, frames, ``]\\nAssistant:`` and the answer as decoded
    (VideoLLM-online's COIN benchmarks); 'live': frames, then the question (streaming use), answer stripped.
    """
    from . import coin
    from .runtime import DEFAULT_SYSTEM_PROMPT, StreamingSession

    if prompt_layout not in PROMPT_LAYOUTS:
        raise ValueError(f"unknown prompt layout {prompt_layout!r}: choose one of {', '.join(PROMPT_LAYOUTS)}")
    t_start = time.perf_counter()
    path = coin.video_path(videos_dir, sample.video_id)
    n_expected = sample.num_frames()
    action = frames_action(n_expected, max_frames, frames_policy)
    if action == "skip":
        raise ValueError(f"sample {sample.sample_id}: {n_expected} frames > max_frames {max_frames} under "
                         "frames_policy 'skip'; run_eval leaves such samples out")
    if action == "cut":
        import torch

        emb, ts, t_decode, t_vision = torch.zeros(0, 1), np.zeros(0), 0.0, 0.0
    else:
        emb, ts, t_decode, t_vision = _frame_embeds(model, path, sample.start, sample.end,
                                                    max_frames if action == "clamp" else None)
    sess = StreamingSession(model, policy, runtime_cfg)
    sess.add_system_prompt(system_prompt or DEFAULT_SYSTEM_PROMPT)
    if prompt_layout == "coin":
        sess.add_user_prompt(sample.prompt)
    t0 = time.perf_counter()
    for i in range(emb.shape[0]):
        sess.add_frame_embeds(emb[i], float(ts[i]))
    t1 = time.perf_counter()
    if prompt_layout == "coin":
        # VideoLLM-online decodes to EOS (or max_new_tokens) with no stop string and scores the text as decoded.
        pred = sess.answer(max_new_tokens=max_new_tokens)
    else:
        stops = () if sample.task in coin.PROCEDURE_TASKS else ("\n",)
        pred = sess.ask(sample.prompt, max_new_tokens=max_new_tokens, stop_strings=stops)
    t2 = time.perf_counter()
    tr = sess.trace()
    frame_steps = tr.step_mask("frame")
    ans = sess.last_answer
    rec = dict(
        sample_id=sample.sample_id, index=index, n_total=n_total, task=sample.task, method=method, profile=profile,
        video_id=sample.video_id, prediction=pred,
        target=list(sample.target) if isinstance(sample.target, tuple) else sample.target,
        correct=coin.score(sample.task, [pred], [sample]), n_frames=int(emb.shape[0]), n_tokens=sess.n_tokens,
        ratio_frame=_nan_none(tr.retrieval_ratio("frame")), ratio_text=_nan_none(tr.retrieval_ratio("text")),
        host_bytes_frame=int(tr.bytes("host")[frame_steps].sum()),
        host_bytes_text=int(tr.bytes("host")[tr.step_mask("text")].sum()),
        first_token=int(ans["step_argmax"][0]) if ans["step_argmax"] else None,
        frame_argmax=[int(x) for x in tr["argmax"][frame_steps]],
        answer_ids=[int(x) for x in ans["ids"]],
        method_kwargs=method_kwargs or {}, runtime_config=repr(runtime_cfg), seed=seed,
        prompt_layout=prompt_layout, n_frames_expected=n_expected, frames_action=action,
        correct_strict=coin.score(sample.task, [pred], [sample], metric="strict"),
    )
    rec.update(reference_agreement(rec, reference))
    if trace_dir is not None:
        tr.meta.update(sample_id=sample.sample_id, task=sample.task, method=method, profile=profile)
        tr.save(Path(trace_dir) / (sample.sample_id.replace("/", "__") + ".npz"))
    rec["timing_s"] = dict(decode=round(t_decode, 4), vision=round(t_vision, 4), prefill=round(t1 - t0, 4),
                           answer=round(t2 - t1, 4), total=round(time.perf_counter() - t_start, 4))
    return rec


def _nan_none(x: float):
    return None if x is None or (isinstance(x, float) and np.isnan(x)) else float(x)


def reference_agreement(rec: dict, ref: dict | None) -> dict:
    """Agreement of a record with the ``full`` method's record of the same sample (None when unavailable)."""
    if ref is None:
        return dict(ref_first_token_agree=None, ref_frame_argmax_agree=None, ref_answer_match=None,
                    ref_prefix_tokens=None)
    fa, fb = rec["frame_argmax"], ref.get("frame_argmax") or []
    n = min(len(fa), len(fb))
    a, b = rec["answer_ids"], ref.get("answer_ids") or []
    pre = 0
    while pre < min(len(a), len(b)) and a[pre] == b[pre]:
        pre += 1
    return dict(ref_first_token_agree=rec["first_token"] == ref.get("first_token"),
                ref_frame_argmax_agree=(sum(int(x == y) for x, y in zip(fa, fb)) / n) if n else None,
                ref_answer_match=rec["prediction"] == ref.get("prediction"), ref_prefix_tokens=pre)


def run_eval(task: str, method: str, profile: str, out: str | os.PathLike, *, coin_root: str | None = None,
             split: str = "testing", max_samples: int | None = None, max_frames: int | None = 1200,
             num_shards: int | None = None, shard_index: int | None = None, max_new_tokens: int | None = None,
             method_kwargs: dict | None = None, runtime_cfg: RuntimeConfig | None = None,
             reference: str | os.PathLike | None = "auto", trace_dir: str | os.PathLike | None = None,
             model=None, llm_path: str | None = None, vision_path: str | None = None,
             connector_path: str | None = None, progress: bool = True, prompt_layout: str = "coin",
             frames_policy: str = "videollm-online") -> Path:
    """Run (or resume) one method on one COIN task; returns the JSONL path of this shard.

    Samples are built from the split's videos whose files exist (VideoLLM-online's ``video_uid in metadata``), so
    sample counts and the metric's vocabulary match the reference. ``max_frames`` (default Live1+'s 1,200) and
    ``frames_policy`` decide long spans (:func:`frames_action`); ``prompt_layout`` 'coin' (default) or 'live'.

    ``model``: a prebuilt :class:`~vrex_lib.runtime.StreamingVideoLLM` to reuse (else built from the profile and
    paths, after every input has been checked). ``reference='auto'`` uses ``<out>/../../full/<task>.jsonl`` when
    it exists (the full method's lines give the agreement columns); None disables it.
    """
    from . import coin
    from .retrieval import POLICIES, make_policy
    from .runtime import ContextTooLarge, build_model

    from . import _io, video

    pcfg = profile_config(profile)
    seed_everything(pcfg.seed)
    if method not in POLICIES:
        raise ValueError(f"unknown method {method!r}: choose one of {', '.join(POLICIES)}")
    if task not in coin.TASKS:
        raise ValueError(f"unknown task {task!r}: choose one of {', '.join(coin.TASKS)}")
    _check_profile_args(profile, coin_root=coin_root, vision_path=vision_path, connector_path=connector_path,
                        llm_path=llm_path)
    for flag, v in (("--max-samples", max_samples), ("--max-frames", max_frames),
                    ("--max-new-tokens", max_new_tokens)):
        if v is not None and v < 1:
            raise ValueError(f"{flag} must be >= 1, got {v}")
    num_shards, shard_index = shard_from_env(num_shards, shard_index)
    out_path = shard_path(out, shard_index, num_shards)
    if out_path.exists() and not out_path.is_file():
        raise ValueError(f"--out {out_path} is a folder; pass a results file, e.g. {out_path}/{task}.jsonl")
    _io.check_writable_dir(out_path.parent, "--out")
    for f in (out_path, run_file(out_path), skips_file(out_path)):
        if f.exists() and not os.access(f, os.W_OK):
            raise PermissionError(f"--out: {f} exists and is not writable; fix its permissions or pass another --out")
    if trace_dir is not None:
        _io.check_writable_dir(trace_dir, "--trace-dir")
    runtime_cfg = runtime_cfg or RuntimeConfig()
    max_new_tokens = max_new_tokens or MAX_NEW_TOKENS[profile]
    if max_samples is None:
        max_samples = pcfg.max_samples_per_task

    # --- inputs first: annotations, samples, videos, paths, memory, earlier results; only then weights ---------
    from .config import arg_name

    if profile == "full" and not coin_root:
        raise ValueError(f"the full profile needs {arg_name('--coin-root')}: a folder holding COIN.json and "
                         "videos/<youtube_id>.mp4")
    try:
        js, videos_dir = coin.dataset_paths(profile, coin_root)
    except FileNotFoundError as err:
        raise FileNotFoundError(f"{arg_name('--coin-root') + ': ' if profile == 'full' else ''}{err}") from None
    skips = coin.SkipLog()
    ann = coin.load_annotations(js, skips)
    if prompt_layout not in PROMPT_LAYOUTS:
        raise ValueError(f"unknown prompt layout {prompt_layout!r}: choose one of {', '.join(PROMPT_LAYOUTS)}")
    frames_action(0, max_frames, frames_policy)  # validates the policy name before any work
    try:
        samples = coin.build_task(ann, task, split, available=coin.available_ids(ann, videos_dir, skips, split))
    except ValueError as err:
        raise ValueError(f"--split {split!r}: {err}") from None
    if max_samples is not None:
        samples = samples[:max_samples]
    n_total = len(samples)
    if n_total == 0:
        gone = sum(1 for e in skips.entries if e[1] == "video file")
        if gone:
            raise FileNotFoundError(f"no {task!r} sample can run: none of the {gone} videos of split {split!r} is in "
                                    f"{videos_dir} (see {js}); check --coin-root / the videos folder")
        raise ValueError(f"{js}: no {task!r} samples in split {split!r} (check --split: 'training' or 'testing')")
    mine = [(i, s) for i, s in enumerate(samples) if i % num_shards == shard_index]
    available = {s.sample_id for s in coin.filter_available([s for _, s in mine], videos_dir, skips)}
    why = {e[0]: e[3] for e in skips.entries if e[1] == "video file"}
    skipped = [dict(index=i, sample_id=s.sample_id, video_id=s.video_id, stage="video file",
                    reason=why.get(s.video_id, f"no video file in {videos_dir}"))
               for i, s in mine if s.sample_id not in available]
    if mine and not available:
        raise FileNotFoundError(f"none of the {len(mine)} videos of this shard is in {videos_dir} "
                                f"(e.g. {mine[0][1].video_id}.mp4): check --coin-root / the videos folder")
    cfg = run_config(task=task, method=method, method_kwargs=method_kwargs, profile=profile,
                     model=model_identity(profile, model, llm_path, vision_path, connector_path), split=split,
                     data_file=js, max_new_tokens=max_new_tokens, max_frames=max_frames, runtime_cfg=runtime_cfg,
                     seed=pcfg.seed, prompt_layout=prompt_layout, frames_policy=frames_policy)
    with _exclusive(out_path):  # a second run on this file now would append duplicate lines
        done = {r["sample_id"] for r in check_resume(out_path, cfg)}
        if profile == "full" and model is None:
            from .runtime import validate_full_paths

            shape = _shape_from_config(validate_full_paths(llm_path, vision_path, connector_path)["llm"])
            _check_all(shape, mine, max_frames, max_new_tokens, runtime_cfg, frames_policy)  # before 16 GB of weights
        ref = {}
        if reference == "auto":
            cand = Path(out).parent.parent / "full" / Path(out).name
            reference = cand if method != "full" and cand.exists() else None
        if reference:
            if not Path(reference).is_file():
                raise FileNotFoundError(f"--reference {reference} does not exist; pass the full method's results "
                                        "file of this task, or 'none'")
            ref = {r["sample_id"]: r for r in read_jsonl(reference)}
            wrong = ({(r.get("task"), r.get("method"), r.get("profile")) for r in ref.values()}
                     - {(task, "full", profile)})
            if wrong:
                t, m, p = sorted(wrong, key=str)[0]
                raise ValueError(f"--reference {reference} holds {m!r} results of task {t!r} ({p} profile); the "
                                 f"reference must be the 'full' method's results of task {task!r} in the {profile} "
                                 "profile, or 'none'")
        # Samples max_frames/frames_policy leaves out are skipped samples of this run (merge accepts them).
        todo = []
        for i, s in mine:
            act = frames_action(s.num_frames(), max_frames, frames_policy)
            if act != "keep" and s.sample_id not in done:
                skips.add(s.video_id, "max_frames", f"{s.sample_id}: {s.num_frames()} frames > max_frames "
                          f"{max_frames} (frames_policy {frames_policy!r})", action=act)
            if act == "skip":
                skipped.append(dict(index=i, sample_id=s.sample_id, video_id=s.video_id, stage="max_frames",
                                    reason=f"{s.num_frames()} frames > max_frames {max_frames} (frames_policy "
                                    "'skip')"))
            elif s.sample_id not in done and s.sample_id in available:
                todo.append((i, s))
        run_record = dict(cfg, shard_index=shard_index, num_shards=num_shards, n_total=n_total,
                          indices=len(mine), skipped=skipped, complete=False)
        _io.write_json(run_file(out_path), run_record)

        if model is None:
            model = build_model(profile, llm_path=llm_path, vision_path=vision_path, connector_path=connector_path,
                                device=_device_for_rank(profile), seed=pcfg.seed)
        _check_all(model, mine, max_frames, max_new_tokens, runtime_cfg, frames_policy)

        read_jsonl(out_path, repair=True)  # cut a torn last line before appending
        open(out_path, "a").close()  # a shard whose samples were all skipped still leaves its (empty) file
        policy = make_policy(method, **(method_kwargs or {}))
        it = todo
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(todo, desc=f"{method}/{task} shard {shard_index}/{num_shards}", unit="sample",
                      initial=len(done), total=len(done) + len(todo))
        n_written = 0
        for i, s in it:
            try:
                rec = evaluate_sample(model, policy, s, i, n_total, videos_dir, method=method, profile=profile,
                                      runtime_cfg=runtime_cfg, max_new_tokens=max_new_tokens, max_frames=max_frames,
                                      reference=ref.get(s.sample_id), trace_dir=trace_dir, method_kwargs=method_kwargs,
                                      seed=pcfg.seed, prompt_layout=prompt_layout, frames_policy=frames_policy)
            except (video.VideoDecodeError, video.VideoSpanError) as err:
                skips.add(s.video_id, "decode", f"{s.sample_id}: {err}")
                skipped.append(dict(index=i, sample_id=s.sample_id, video_id=s.video_id, stage="decode",
                                    reason=str(err)))
                continue
            except ContextTooLarge:
                raise
            if rec["frames_action"] == "keep" and rec["n_frames"] < rec["n_frames_expected"]:
                # The file ends before the annotated span: the sample runs on the frames that exist
                # (VideoLLM-online clamps spans to the decoded duration too) but never silently (D59).
                skips.add(s.video_id, "short video", f"{s.sample_id}: {rec['n_frames']} of "
                          f"{rec['n_frames_expected']} annotated frames decoded (video shorter than its annotation)",
                          action="short")
            rec["config_key"] = cfg["config_key"]
            append_jsonl(out_path, rec)
            n_written += 1
        skip_file = skips.write(skips_file(out_path))
        _io.write_json(run_file(out_path), dict(run_record, skipped=skipped, complete=True))
        if len(skips):
            print(f"{method}/{task}: {skips.summary()} (listed in {skip_file})", file=sys.stderr)
        if mine and not done and n_written == 0:
            if num_shards > 1:  # another shard may hold results; merge refuses a run where no shard does
                print(f"warning: {out_path}: every sample of this shard was skipped (see {skip_file})", file=sys.stderr)
                return out_path
            raise NoSamplesEvaluated(f"{out_path}: every one of the {len(mine)} samples of this shard was skipped, "
                                     f"nothing was evaluated; the reasons are in {skip_file} (first: "
                                     f"{skipped[0]['reason'] if skipped else '?'})")
        return out_path


@contextlib.contextmanager
def _exclusive(out_path: Path):
    """Hold an exclusive lock on the results file for the whole run; refuse if another run holds it."""
    import fcntl

    with open(out_path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{out_path}: another evaluation is writing this file now; wait for it to finish or "
                             "pass another --out") from None
        yield


class NoSamplesEvaluated(RuntimeError):
    """Every sample of a run was skipped (unreadable videos): an empty results file would look like success."""


def _check_profile_args(profile: str, **paths) -> None:
    """Flags a profile does not use are an error, never silently ignored."""
    from .config import arg_name

    used = {"smoke": (), "default": ("llm_path",), "full": ("coin_root", "llm_path", "vision_path",
                                                            "connector_path")}[profile]
    extra = [k for k, v in paths.items() if v and k not in used]
    if extra:
        names = ", ".join(arg_name("--" + k.replace("_", "-")) for k in extra)
        fixture = "data/coin_tiny" if profile == "smoke" else "data/coin_mini"
        raise ValueError(f"{names} {'is' if len(extra) == 1 else 'are'} used only by the full profile; the "
                         f"{profile} profile evaluates its own fixture ({fixture}) with its own model. Drop {names}, "
                         "or select the full profile.")


def _shape_from_config(cfg: dict):
    """The KV shape of a model from its config.json (BF16, on the rank's device): enough for check_context."""
    import types

    import torch

    hq = int(cfg["num_attention_heads"])
    dev = torch.device(_device_for_rank("full") or "cpu")
    return types.SimpleNamespace(
        name=cfg.get("_name_or_path", "llm"), n_layers=int(cfg["num_hidden_layers"]),
        n_kv_heads=int(cfg.get("num_key_value_heads", hq)), kv_bytes_per_elem=2, device=dev,
        head_dim=int(cfg.get("head_dim") or cfg["hidden_size"] // hq),
        config=types.SimpleNamespace(max_position_embeddings=int(cfg.get("max_position_embeddings", 1 << 30))))


def _check_all(model, mine, max_frames, max_new_tokens, runtime_cfg, frames_policy: str = "clamp") -> None:
    """Every sample of this shard must fit (positions and KV memory) -- checked before the first one runs."""
    from .runtime import check_context, tokens_for

    for _, s in mine:
        act = frames_action(s.num_frames(), max_frames, frames_policy)
        if act == "skip":
            continue
        nf = {"keep": s.num_frames(), "clamp": max_frames, "cut": 0}[act]
        check_context(model, tokens_for(nf, max_new_tokens=max_new_tokens), runtime_cfg,
                      what=f"sample {s.sample_id} ({nf} frames)")


def score_results(path: str | os.PathLike, profile: str, coin_root: str | None = None,
                  split: str = "testing", metric: str = "videollm-online") -> float:
    """COIN Top-1 (%) of a results file with :func:`vrex_lib.coin.score` over all its samples pooled (procedure
    tasks: Σ correct / Σ counted steps, as VideoLLM-online's compute_metrics), samples and vocabulary built as
    the run built them (the split's videos whose files exist)."""
    from . import coin

    rows = read_jsonl(path)
    if not rows:
        raise ValueError(f"{path}: no results to score")
    task = rows[0]["task"]
    js, videos_dir = coin.dataset_paths(profile, coin_root)
    ann = coin.load_annotations(js, coin.SkipLog())
    samples = coin.build_task(ann, task, split, available=coin.available_ids(ann, videos_dir, None, split))
    by_id = {s.sample_id: s for s in samples}
    missing = [r["sample_id"] for r in rows if r["sample_id"] not in by_id]
    if missing:
        raise ValueError(f"{path}: sample {missing[0]} is not in {js} ({split}); wrong profile or --coin-root?")
    return coin.score(task, [r["prediction"] for r in rows], [by_id[r["sample_id"]] for r in rows], metric=metric)


def load_results(path: str | os.PathLike):
    """A results JSONL as a DataFrame (one row per sample; timing columns flattened as timing_<name>)."""
    import pandas as pd

    rows = read_jsonl(path)
    df = pd.json_normalize(rows, sep="_") if rows else pd.DataFrame()
    return df


# ---------------------------------------------------------------------------------------------- CLI

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m vrex_lib.eval", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help="step | next | task | procedure | taskprocedure")
    p.add_argument("--method", required=True, help="a name in vrex_lib.retrieval.POLICIES")
    p.add_argument("--profile", default="default", choices=("smoke", "default", "full"))
    p.add_argument("--out", required=True, help="results JSONL, e.g. results/eval/<profile>/<method>/<task>.jsonl")
    p.add_argument("--coin-root", default=None, help="full profile: folder with COIN.json and videos/")
    p.add_argument("--split", default="testing")
    p.add_argument("--llm-path", default=None)
    p.add_argument("--vision-path", default=None)
    p.add_argument("--connector-path", default=None)
    p.add_argument("--max-samples", type=int, default=None)
    p.add_argument("--max-frames", type=int, default=None, help="frames per span above which --frames-policy "
                   "applies (default: run_eval's, Live1+'s max_num_frames 1,200)")
    p.add_argument("--frames-policy", default="videollm-online", choices=("videollm-online", "skip", "clamp"),
                   help="a longer span: 'videollm-online' answers without frames (max_frames_clip), 'skip' leaves "
                   "the sample out, 'clamp' keeps its last --max-frames frames")
    p.add_argument("--prompt-layout", default="coin", choices=("coin", "live"),
                   help="'coin': question, frames, answer (as the checkpoint was trained); 'live': question after "
                   "the frames")
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.add_argument("--num-shards", type=int, default=None)
    p.add_argument("--shard-index", type=int, default=None)
    p.add_argument("--method-kwargs", default="{}", help="JSON dict of the policy's config, e.g. '{\"ratio\": 0.3}'")
    p.add_argument("--kv-capacity", type=int, default=RuntimeConfig.kv_capacity)
    p.add_argument("--recent-frames", type=int, default=RuntimeConfig.recent_frames)
    p.add_argument("--reference", default="auto", help="full-method JSONL for agreement columns ('none' to skip)")
    p.add_argument("--trace-dir", default=None, help="save one retrieval trace .npz per sample here")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (CPU; 1 is fastest on a "
                   "busy 2-core machine)")
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; bad input ends with one line naming the file or flag (exit 2), never a traceback.

    Set VREX_DEBUG=1 to see the traceback instead.
    """
    try:
        return _main(argv)
    except (ValueError, OSError, NoSamplesEvaluated) as err:
        if os.environ.get("VREX_DEBUG"):
            raise
        print(f"python -m vrex_lib.eval: error: {err}", file=sys.stderr)
        return 2


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "merge":
        mp = argparse.ArgumentParser(prog="python -m vrex_lib.eval merge",
                                     description="Merge the shard files of one run into one results file")
        mp.add_argument("--out", required=True)
        mp.add_argument("--allow-partial", action="store_true",
                        help="merge even if samples are missing (warned on stderr)")
        mp.add_argument("shards", nargs="+")
        a = mp.parse_args(argv[1:])
        print(merge_shards(a.shards, a.out, require_complete=not a.allow_partial))
        return 0
    if argv and argv[0] == "run":
        argv = argv[1:]
    a = _parser().parse_args(argv)
    try:
        kwargs = json.loads(a.method_kwargs)
    except json.JSONDecodeError as err:
        raise ValueError(f"--method-kwargs is not valid JSON ({err}); e.g. '{{\"ratio\": 0.3}}'") from None
    if not isinstance(kwargs, dict):
        raise ValueError(f"--method-kwargs must be a JSON object, got {a.method_kwargs!r}; e.g. '{{\"ratio\": 0.3}}'")
    if a.threads is not None:
        if a.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {a.threads}")
        import torch

        torch.set_num_threads(a.threads)
    for flag, v, lo in (("--kv-capacity", a.kv_capacity, 1), ("--recent-frames", a.recent_frames, 1)):
        if v < lo:
            raise ValueError(f"{flag} must be >= {lo}, got {v}")
    cfg = RuntimeConfig(kv_capacity=a.kv_capacity, recent_frames=a.recent_frames)
    try:
        from .retrieval import make_policy

        make_policy(a.method, **kwargs) if a.method in _policy_names() else None
    except TypeError as err:
        raise ValueError(f"--method-kwargs {a.method_kwargs} do not fit method {a.method!r}: {err}") from None
    path = run_eval(a.task, a.method, a.profile, a.out, coin_root=a.coin_root, split=a.split,
                    max_samples=a.max_samples, num_shards=a.num_shards,
                    max_frames=_default("max_frames") if a.max_frames is None else a.max_frames,
                    shard_index=a.shard_index, max_new_tokens=a.max_new_tokens, method_kwargs=kwargs,
                    runtime_cfg=cfg, reference=None if a.reference == "none" else a.reference,
                    trace_dir=a.trace_dir, llm_path=a.llm_path, vision_path=a.vision_path,
                    connector_path=a.connector_path, progress=not a.no_progress, prompt_layout=a.prompt_layout,
                    frames_policy=a.frames_policy)
    rows = read_jsonl(path)
    if rows:
        acc = score_results(path, a.profile, a.coin_root, a.split)
        rf = [r["ratio_frame"] for r in rows if r["ratio_frame"] is not None]
        rt = [r["ratio_text"] for r in rows if r["ratio_text"] is not None]
        print(f"{path}: {len(rows)} samples, COIN Top-1 {acc:.1f}%, retrieval ratio frame "
              f"{np.mean(rf) if rf else float('nan'):.3f} text {np.mean(rt) if rt else float('nan'):.3f}")
    return 0


def _default(name: str):
    """run_eval's default for a keyword (the CLI leaves unset flags to it)."""
    import inspect

    return inspect.signature(run_eval).parameters[name].default


def _policy_names() -> tuple[str, ...]:
    from .retrieval import POLICIES

    return tuple(POLICIES)


if __name__ == "__main__":
    raise SystemExit(main())
