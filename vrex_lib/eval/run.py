"""The evaluation loop: one method on one COIN task, resumable and sharded (:func:`run_eval`), and its score."""
from __future__ import annotations

import json
import os
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from .. import _io, coin, methods, video
from ..config import RuntimeConfig, arg_name, profile_config, seed_everything
from ..retrieval import check_policy_kwargs, make_policy
from ..runtime import build_model, resolve_dtype, validate_full_paths
from .plan import (MAX_NEW_TOKENS, NOT_REFERENCE_KEYED, NoSamplesEvaluated, PROMPT_LAYOUTS, _check_all,
                   _check_profile_args, _shape_from_config, config_diff, frames_action, model_identity, run_config,
                   model_files, run_device, shard_from_env)
from .results import (RESULTS_KIND, _exclusive, append_jsonl, check_resume, read_jsonl, run_file, shard_path,
                      skips_file)
from .sample import evaluate_sample
from .stats import scored_samples


@dataclass
class _Run:
    """One shard's run, decided before the model loads: what :func:`_evaluate` needs for every sample."""

    task: str
    method: str
    profile: str
    out_path: Path
    shard_index: int
    num_shards: int
    videos_dir: Path
    n_total: int
    runtime_cfg: RuntimeConfig
    max_new_tokens: int
    max_frames: int | None
    frames_policy: str
    prompt_layout: str
    method_kwargs: dict | None
    trace_dir: str | os.PathLike | None
    seed: int
    skips: coin.SkipLog
    skipped: list[dict]
    frame_sampling: str = coin.FRAME_SAMPLING


def run_eval(task: str, method: str, profile: str, out: str | os.PathLike, *, coin_root: str | None = None,
             split: str = "testing", max_samples: int | None = None, max_frames: int | None = 1200,
             num_shards: int | None = None, shard_index: int | None = None, max_new_tokens: int | None = None,
             method_kwargs: dict | None = None, runtime_cfg: RuntimeConfig | None = None,
             reference: str | os.PathLike | None = "auto", trace_dir: str | os.PathLike | None = None,
             model=None, llm_path: str | None = None, vision_path: str | None = None,
             connector_path: str | None = None, progress: bool = True, prompt_layout: str = "coin",
             frames_policy: str = "videollm-online", device: str | None = None, dtype: str | None = None,
             frame_sampling: str = coin.FRAME_SAMPLING, replace: bool = False, force: bool = False) -> Path:
    """Run (or resume) one method on one COIN task; returns the JSONL path of this shard.

    Samples are built from the split's videos whose files exist (VideoLLM-online's ``video_uid in metadata``), so
    sample counts and the metric's vocabulary match the reference. ``max_frames`` (default Live1+'s 1,200) and
    ``frames_policy`` decide long spans (:func:`frames_action`); ``prompt_layout`` 'coin' (default) or 'live';
    ``frame_sampling`` how the 2 fps frames are taken ('ffmpeg', VideoLLM-online's ``-r 2`` preprocessing, default;
    'grid'; docs/DECISIONS.md D59).

    ``model``: a prebuilt :class:`~vrex_lib.runtime.StreamingVideoLLM` to reuse (else built from the profile and
    paths, after every input has been checked) on ``device`` in ``dtype`` (default: the profile's, cuda and
    bfloat16 for ``full``, cpu and float32 otherwise; under torchrun ``cuda`` is the rank's GPU).
    ``reference='auto'`` uses ``<out>/../../full/<task>.jsonl`` when it exists (the full method's lines give the
    agreement columns); None disables it. The run record and every line name the model (its identity, D210).
    An ``out`` holding results of another configuration is refused unless ``replace`` (then emptied); a file that
    is not a results file unless ``force`` (docs/DECISIONS.md D320).
    """
    with ExitStack() as stack:
        op, model = _open_run(stack, task, method, profile, out, coin_root=coin_root, split=split,
                              max_samples=max_samples, max_frames=max_frames, num_shards=num_shards,
                              shard_index=shard_index, max_new_tokens=max_new_tokens, method_kwargs=method_kwargs,
                              runtime_cfg=runtime_cfg, reference=reference, trace_dir=trace_dir, model=model,
                              llm_path=llm_path, vision_path=vision_path, connector_path=connector_path,
                              prompt_layout=prompt_layout, frames_policy=frames_policy, device=device, dtype=dtype,
                              frame_sampling=frame_sampling, replace=replace, force=force)
        n_written = _evaluate(op.run, model, op.todo, op.ref, op.cfg, progress, n_done=op.n_done)
        return _finish(op.run, op.run_record, n_mine=op.n_mine, n_done=op.n_done, n_written=n_written)


@dataclass
class _Open:
    """A run whose results file is locked and whose run record is written: what is left is to evaluate ``todo``."""

    run: _Run
    cfg: dict
    ref: dict
    run_record: dict
    todo: list
    done_rows: list
    n_mine: int

    @property
    def n_done(self) -> int:
        return len(self.done_rows)


def _open_run(stack: ExitStack, task: str, method: str, profile: str, out, *, coin_root, split, max_samples,
              max_frames, num_shards, shard_index, max_new_tokens, method_kwargs, runtime_cfg, reference, trace_dir,
              model, llm_path, vision_path, connector_path, prompt_layout, frames_policy, device, dtype,
              frame_sampling, replace, force) -> tuple[_Open, object]:
    """:func:`run_eval` up to its first sample (its arguments): every check, the results file locked for as long as
    ``stack`` lives, earlier results read, the run record written and the model built; (the run, the model)."""
    pcfg = profile_config(profile)
    seed_everything(pcfg.seed)
    num_shards, shard_index = _check_flags(task, method, profile, max_samples, max_frames, max_new_tokens,
                                           num_shards, shard_index, method_kwargs, coin_root=coin_root,
                                           vision_path=vision_path, connector_path=connector_path, llm_path=llm_path)
    video.check_sampling(frame_sampling)
    dev = _check_device(profile, model, device, dtype)
    out_path = _check_outputs(out, task, shard_index, num_shards, trace_dir, force)
    runtime_cfg = runtime_cfg or RuntimeConfig()
    max_new_tokens = max_new_tokens or MAX_NEW_TOKENS[profile]
    max_samples = pcfg.max_samples_per_task if max_samples is None else max_samples
    # --- inputs first: annotations, samples, videos, paths, memory, earlier results; only then weights ---------
    skips = coin.SkipLog()
    js, videos_dir, samples = _load_samples(task, split, profile, coin_root, max_samples, prompt_layout,
                                            max_frames, frames_policy, skips)
    mine, available, skipped = _shard(samples, num_shards, shard_index, videos_dir, skips)
    ident = model_identity(profile, model, llm_path, vision_path, connector_path, dtype)
    cfg = run_config(task=task, method=method, method_kwargs=method_kwargs, profile=profile, model=ident, split=split,
                     data_file=js, max_new_tokens=max_new_tokens, max_frames=max_frames, runtime_cfg=runtime_cfg,
                     seed=pcfg.seed, prompt_layout=prompt_layout, frames_policy=frames_policy,
                     frame_sampling=frame_sampling,
                     weights=model_files(profile, model, llm_path, vision_path, connector_path))
    run = _Run(task, method, profile, out_path, shard_index, num_shards, videos_dir, len(samples), runtime_cfg,
               max_new_tokens, max_frames, frames_policy, prompt_layout, method_kwargs, trace_dir, pcfg.seed, skips,
               skipped, frame_sampling)
    # a dict: the reference's lines themselves (run_eval_batch: the full run of the batch, D520)
    ref = reference if isinstance(reference, dict) else _read_reference(reference, out, method, task, profile,
                                                                         cfg)
    stack.enter_context(_exclusive(out_path))  # a second run on this file now would append duplicate lines
    done_rows = check_resume(out_path, cfg, replace=replace, force=force)
    _check_agreement_schema(out_path, done_rows, ref)
    done = {r["sample_id"] for r in done_rows}
    mine, available = _decoded_spans(run, mine, available, done)
    todo = _todo(run, mine, done, available)
    if pcfg.model.requires_paths and model is None and todo:
        shape = _shape_from_config(validate_full_paths(llm_path, vision_path, connector_path)["llm"], ident, dev)
        _check_all(shape, todo, max_frames, max_new_tokens, runtime_cfg, frames_policy)  # before 16 GB of weights
    run_record = dict(_run_record(run, cfg, done_rows), device=str(dev))
    _io.write_json(run_file(out_path), run_record)
    if todo:  # a rerun that finds every sample done (e.g. after a full disk) completes the record only
        if model is None:
            model = build_model(profile, llm_path=llm_path, vision_path=vision_path,
                                connector_path=connector_path, device=dev, dtype=dtype, seed=pcfg.seed)
            if model.identity != ident:  # the files changed between the check and the load
                raise ValueError(f"the model loaded is {model.identity.summary()}, but its folders described "
                                 f"{ident.summary()} a moment before; rerun once the checkpoint files stop "
                                 "changing")
        _check_all(model, todo, max_frames, max_new_tokens, runtime_cfg, frames_policy)
    read_jsonl(out_path, repair=True)  # cut a torn last line before appending
    open(out_path, "a").close()  # a shard whose samples were all skipped still leaves its (empty) file
    return _Open(run, cfg, ref, run_record, todo, done_rows, len(mine)), model


def _run_record(run: _Run, cfg: dict, done_rows: list[dict]) -> dict:
    """This shard's ``<stem>.run.json`` before its samples run (``complete`` False until :func:`_finish`).

    ``n_total`` describes the whole results file (docs/DECISIONS.md D70): a file an earlier run with a larger
    ``max_samples`` extended keeps those samples, so ``n_total`` is the larger count and the earlier run's skipped
    samples beyond this run's list stay listed."""
    old = _read_run_record(run.out_path)
    if old.get("config_key") != cfg["config_key"]:
        old = {}  # another run's record beside an empty results file: replaced, nothing of it carried over
    n_file = max([int(r["index"]) + 1 for r in done_rows] + [int(s["index"]) + 1 for s in old.get("skipped", [])]
                 + [0])
    if n_file > run.n_total:
        print(f"{run.out_path}: holds {n_file} samples, more than the {run.n_total} this run's --max-samples selects: "
              "an earlier run evaluated the others; they are kept and counted (n_total "
              f"{n_file} in {run_file(run.out_path).name})", file=sys.stderr)
        run.skipped += [s for s in old.get("skipped", []) if int(s["index"]) >= run.n_total]
        run.n_total = n_file
    indices = sum(1 for i in range(run.n_total) if i % run.num_shards == run.shard_index)
    return dict(cfg, shard_index=run.shard_index, num_shards=run.num_shards, n_total=run.n_total, indices=indices,
                skipped=run.skipped, complete=False)


def _read_run_record(out_path: Path) -> dict:
    try:
        return json.loads(run_file(out_path).read_text()) if run_file(out_path).is_file() else {}
    except (OSError, json.JSONDecodeError):
        return {}  # check_resume has already accepted this file; an unreadable record is rewritten


def _decoded_spans(run: _Run, mine: list, available: set, done: set) -> tuple[list, set]:
    """Clamp the spans of this shard's samples still to run to their video's decoded length, as VideoLLM-online
    does (docs/DECISIONS.md D59), probing each video once before any weight loads. A video that cannot be opened
    skips its samples (stage 'decode'); a span the decoded length shortens is noted (action 'short')."""
    durations: dict[str, float | str] = {}  # video id -> decoded length, or why it cannot be opened
    out, ok = [], set(available)
    for i, s in mine:
        if s.sample_id in done or s.sample_id not in available:
            out.append((i, s))
            continue
        if s.video_id not in durations:
            try:
                durations[s.video_id] = coin.decoded_duration(coin.video_path(run.videos_dir, s.video_id),
                                                              sampling=run.frame_sampling)
            except (video.VideoDecodeError, coin.MissingVideoError) as err:
                durations[s.video_id] = str(err)
                run.skips.add(s.video_id, "decode", str(err))
        if isinstance(durations[s.video_id], str):
            ok.discard(s.sample_id)
            run.skipped.append(dict(index=i, sample_id=s.sample_id, video_id=s.video_id, stage="decode",
                                    reason=durations[s.video_id]))
            out.append((i, s))
            continue
        clamped = s.with_duration(durations[s.video_id])
        if clamped.num_frames() < s.num_frames():
            run.skips.add(s.video_id, "short video", f"{s.sample_id}: {clamped.num_frames()} of {s.num_frames()} "
                          f"annotated frames: the video decodes to {clamped.duration:g} s, COIN.json says "
                          f"{s.duration:g} s; the span is clamped to the decoded length", action="short")
        out.append((i, clamped))
    return out, ok


def _check_flags(task: str, method: str, profile: str, max_samples, max_frames, max_new_tokens, num_shards,
                 shard_index, method_kwargs, **paths) -> tuple[int, int]:
    """Names, the profile's paths, the numeric flags and the method's options, then the shard:
    (num_shards, shard_index)."""
    if method not in methods.METHODS:
        raise ValueError(f"unknown method {method!r}: choose one of {', '.join(methods.NAMES)}")
    if task not in coin.TASKS:
        raise ValueError(f"unknown task {task!r}: choose one of {', '.join(coin.TASKS)}")
    _check_profile_args(profile, **paths)
    for flag, v in (("--max-samples", max_samples), ("--max-frames", max_frames),
                    ("--max-new-tokens", max_new_tokens)):
        if v is not None and v < 1:
            raise ValueError(f"{flag} must be >= 1, got {v}")
    check_policy_kwargs(method, dict(method_kwargs or {}), flag="method_kwargs (--method-kwargs)")
    return shard_from_env(num_shards, shard_index)


def _check_device(profile: str, model, device, dtype):
    """The device the run's model is on: checked now, before any input is read (a prebuilt model's own)."""
    if model is not None:
        if device is not None or dtype is not None:
            raise ValueError("run_eval: device and dtype apply when run_eval builds the model; a prebuilt model "
                             "runs where it is, in its dtype (build it with build_model(device=..., dtype=...))")
        return model.device
    resolve_dtype(profile, dtype)
    return run_device(profile, device)


def _check_outputs(out, task: str, shard_index: int, num_shards: int, trace_dir, force: bool) -> Path:
    """This shard's results file (a results file, unless ``force``), with its folder, sidecars and the trace folder
    checked writable."""
    out_path = shard_path(out, shard_index, num_shards)
    example = f"--out {out_path / task}.jsonl" if out_path.is_dir() else None
    _io.check_output(out_path, RESULTS_KIND, flag="--out", force=force, example=example)
    for f in (run_file(out_path), skips_file(out_path)):
        _io.check_output(f, None, flag=f"--out's {f.name[len(out_path.stem):]} file")
    if trace_dir is not None:
        _io.check_writable_dir(trace_dir, "--trace-dir")
    return out_path


def _load_samples(task: str, split: str, profile: str, coin_root, max_samples, prompt_layout: str, max_frames,
                  frames_policy: str, skips: coin.SkipLog) -> tuple:
    """(annotation file, videos folder, samples) of the task's split whose videos exist; errors name the flag."""
    user_data = profile_config(profile).uses_flag("coin_root")
    if user_data and not coin_root:
        raise ValueError(f"the {profile} profile needs {arg_name('--coin-root')}: a folder holding COIN.json and "
                         "videos/<youtube_id>.mp4")
    try:
        js, videos_dir = coin.dataset_paths(profile, coin_root)
    except FileNotFoundError as err:
        raise FileNotFoundError(f"{arg_name('--coin-root') + ': ' if user_data else ''}{err}") from None
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
    if not samples:
        gone = sum(1 for e in skips.entries if e[1] == "video file")
        if gone:
            raise FileNotFoundError(f"no {task!r} sample can run: none of the {gone} videos of split {split!r} is in "
                                    f"{videos_dir} (see {js}); check --coin-root / the videos folder")
        raise ValueError(f"{js}: no {task!r} samples in split {split!r} (check --split: 'training' or 'testing')")
    return js, videos_dir, samples


def _shard(samples, num_shards: int, shard_index: int, videos_dir: Path, skips: coin.SkipLog) -> tuple:
    """(this shard's (index, sample) pairs, ids of those whose video exists, skipped-sample records)."""
    mine = [(i, s) for i, s in enumerate(samples) if i % num_shards == shard_index]
    available = {s.sample_id for s in coin.filter_available([s for _, s in mine], videos_dir, skips)}
    why = {e[0]: e[3] for e in skips.entries if e[1] == "video file"}
    skipped = [dict(index=i, sample_id=s.sample_id, video_id=s.video_id, stage="video file",
                    reason=why.get(s.video_id, f"no video file in {videos_dir}"))
               for i, s in mine if s.sample_id not in available]
    if mine and not available:
        raise FileNotFoundError(f"none of the {len(mine)} videos of this shard is in {videos_dir} "
                                f"(e.g. {mine[0][1].video_id}.mp4): check --coin-root / the videos folder")
    return mine, available, skipped


def _check_agreement_schema(out_path: Path, done_rows: list[dict], ref: dict) -> None:
    """Refuse to resume lines whose agreement columns would differ from this run's: lines written without a
    reference (the ``full`` results did not exist yet) beside lines with one, or the reverse; the file's averages
    would then mix sample counts (docs/DECISIONS.md D442)."""
    def has(r: dict) -> bool:
        return r.get("ref_first_token_agree") is not None

    without = [r for r in done_rows if not has(r) and r.get("sample_id") in ref]
    if without:
        raise ValueError(f"--out {out_path}: {len(without)} finished line(s) have no agreement columns (they ran "
                         "before the full method's results existed) and this run has a reference: finish it without "
                         "agreement (--reference none), or rerun every sample with it (--replace)")
    if not ref and any(has(r) for r in done_rows):
        raise ValueError(f"--out {out_path}: its finished lines carry agreement columns but this run has no "
                         "reference (the full method's results file is missing): restore it or pass it with "
                         "--reference, or rerun every sample without it (--replace)")


def _read_reference(reference, out, method: str, task: str, profile: str, cfg: dict) -> dict:
    """{sample_id: the full method's record} from ``reference`` ('auto': ``<out>/../../full/<task>.jsonl``).

    The reference must be the ``full`` method's run of this run's configuration, everything but the method and its
    options (``reference_key``, docs/DECISIONS.md D70): under another ``max_new_tokens``, prompt layout, runtime
    configuration, model or data every agreement column would compare different things."""
    if reference == "auto":
        cand = Path(out).parent.parent / "full" / Path(out).name
        reference = cand if method != "full" and cand.exists() else None
    if not reference:
        return {}
    if not Path(reference).is_file():
        raise FileNotFoundError(f"--reference {reference} does not exist; pass the full method's results "
                                "file of this task, or 'none'")
    rows = read_jsonl(reference)
    if not rows:
        raise ValueError(f"--reference {reference} holds no results; run the 'full' method first, or pass 'none'")
    wrong = {(r.get("task"), r.get("method"), r.get("profile")) for r in rows} - {(task, "full", profile)}
    if wrong:
        t, m, p = sorted(wrong, key=str)[0]
        raise ValueError(f"--reference {reference} holds {m!r} results of task {t!r} ({p} profile); the "
                         f"reference must be the 'full' method's results of task {task!r} in the {profile} "
                         "profile, or 'none'")
    keys = {r.get("reference_key") for r in rows}
    record = _read_run_record(Path(reference))
    diff = config_diff(record, cfg, ignore=NOT_REFERENCE_KEYED) if record else []
    if diff or (keys != {cfg["reference_key"]} and not (record and keys == {None})):
        why = ("; ".join(diff) if diff else "its lines carry no configuration key and it has no run record"
               if keys == {None} else "its lines come from another configuration")
        raise ValueError(f"--reference {reference} was made under another configuration ({why}); the reference "
                         "must be the 'full' method's run with this run's flags (all but --method and "
                         "--method-kwargs): rerun full with them, or pass --reference none")
    return {r["sample_id"]: r for r in rows}


def _todo(run: _Run, mine, done: set, available: set) -> list:
    """The samples still to evaluate; those ``max_frames``/``frames_policy`` leave out are skipped samples of this
    run (merge accepts them), logged in ``run.skips`` / ``run.skipped``."""
    todo = []
    for i, s in mine:
        act = frames_action(s.num_frames(), run.max_frames, run.frames_policy)
        if act != "keep" and s.sample_id not in done:
            run.skips.add(s.video_id, "max_frames", f"{s.sample_id}: {s.num_frames()} frames > max_frames "
                          f"{run.max_frames} (frames_policy {run.frames_policy!r})", action=act)
        if act == "skip":
            run.skipped.append(dict(index=i, sample_id=s.sample_id, video_id=s.video_id, stage="max_frames",
                                    reason=f"{s.num_frames()} frames > max_frames {run.max_frames} (frames_policy "
                                    "'skip')"))
        elif s.sample_id not in done and s.sample_id in available:
            todo.append((i, s))
    return todo


def _evaluate(run: _Run, model, todo: list, ref: dict, cfg: dict, progress: bool, n_done: int) -> int:
    """Evaluate and append every sample of ``todo``; undecodable videos are skipped and logged. Returns how many
    lines were written."""
    policy = make_policy(run.method, **(run.method_kwargs or {}))
    it = todo
    if progress:
        it = tqdm(todo, desc=f"{run.method}/{run.task} shard {run.shard_index}/{run.num_shards}", unit="sample",
                  initial=n_done, total=n_done + len(todo))
    n_written = 0
    for i, s in it:
        try:
            rec = evaluate_sample(model, policy, s, i, run.n_total, run.videos_dir, method=run.method,
                                  profile=run.profile, runtime_cfg=run.runtime_cfg,
                                  max_new_tokens=run.max_new_tokens, max_frames=run.max_frames,
                                  reference=ref.get(s.sample_id), trace_dir=run.trace_dir,
                                  method_kwargs=run.method_kwargs, seed=run.seed, prompt_layout=run.prompt_layout,
                                  frames_policy=run.frames_policy, frame_sampling=run.frame_sampling)
        except (video.VideoDecodeError, video.VideoSpanError) as err:
            _skip_undecodable(run, i, s, err)
            continue
        _write(run, rec, cfg, model)
        n_written += 1
    return n_written


def _skip_undecodable(run: _Run, i: int, s, err: Exception) -> None:
    run.skips.add(s.video_id, "decode", f"{s.sample_id}: {err}")
    run.skipped.append(dict(index=i, sample_id=s.sample_id, video_id=s.video_id, stage="decode", reason=str(err)))


def _write(run: _Run, rec: dict, cfg: dict, model) -> None:
    """Append one evaluated sample's line to the run's results file (with its configuration keys and model)."""
    if rec["frames_action"] == "keep" and rec["n_frames"] < rec["n_frames_expected"]:
        # fewer frames than the probed length promised (a container whose index and stream disagree): the
        # sample runs on the frames that exist, never silently (D59)
        run.skips.add(rec["video_id"], "short video", f"{rec['sample_id']}: {rec['n_frames']} of "
                      f"{rec['n_frames_expected']} frames of the span decoded", action="short")
    rec["config_key"], rec["reference_key"] = cfg["config_key"], cfg["reference_key"]
    rec["model"] = model.identity.name
    append_jsonl(run.out_path, rec)


def _finish(run: _Run, run_record: dict, *, n_mine: int, n_done: int, n_written: int) -> Path:
    """Write the completed run record, then the skip log; a shard that evaluated nothing at all is an error.

    The record goes first: it holds the skip list too, so a skip log that cannot be written (a full disk) leaves
    a record that is true. Either failure names the file and says that a rerun completes it without
    evaluating anything again."""
    try:
        _io.write_json(run_file(run.out_path), dict(run_record, skipped=run.skipped, complete=True))
        skip_file = run.skips.write(skips_file(run.out_path))
    except OSError as err:
        raise type(err)(f"{err}. Every evaluated sample is in {run.out_path}; rerun the same command once the "
                        "file can be written: it evaluates nothing again and completes the run record") from None
    if len(run.skips):
        # a note, not a warning (the samples still ran or are listed), so stdout; the file by its run folder
        print(f"{run.method}/{run.task}: {run.skips.summary()} (listed in {skip_file.parent.name}/{skip_file.name})")
    if n_mine and not n_done and n_written == 0:
        if run.num_shards > 1:  # another shard may hold results; merge refuses a run where no shard does
            print(f"warning: {run.out_path}: every sample of this shard was skipped (see {skip_file})",
                  file=sys.stderr)
            return run.out_path
        raise NoSamplesEvaluated(f"{run.out_path}: every one of the {n_mine} samples of this shard was skipped, "
                                 f"nothing was evaluated; the reasons are in {skip_file} (first: "
                                 f"{run.skipped[0]['reason'] if run.skipped else '?'})")
    return run.out_path


def score_results(path: str | os.PathLike, profile: str, coin_root: str | None = None,
                  split: str = "testing", metric: str = "videollm-online") -> float:
    """COIN Top-1 (%) of a results file with :func:`vrex_lib.coin.score` over all its samples pooled (procedure
    tasks: Σ correct / Σ counted steps, as VideoLLM-online's compute_metrics), samples and vocabulary built as
    the run built them (:func:`~vrex_lib.eval.stats.scored_samples`)."""
    task, rows, samples = scored_samples(path, profile, coin_root, split)
    return coin.score(task, [r["prediction"] for r in rows], samples, metric=metric)
