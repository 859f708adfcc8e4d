"""The evaluation loop: one method on one COIN task, resumable and sharded (:func:`run_eval`), and its score."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..config import RuntimeConfig, profile_config, seed_everything
from .plan import (MAX_NEW_TOKENS, NoSamplesEvaluated, PROMPT_LAYOUTS, _check_all, _check_profile_args,
                   _device_for_rank, _shape_from_config, frames_action, model_identity, run_config, shard_from_env)
from .results import _exclusive, append_jsonl, check_resume, read_jsonl, run_file, shard_path, skips_file
from .sample import evaluate_sample


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
    from .. import coin
    from ..retrieval import POLICIES, make_policy
    from ..runtime import ContextTooLarge, build_model

    from .. import _io, video

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
    from ..config import arg_name

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
            from ..runtime import validate_full_paths

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


def score_results(path: str | os.PathLike, profile: str, coin_root: str | None = None,
                  split: str = "testing", metric: str = "videollm-online") -> float:
    """COIN Top-1 (%) of a results file with :func:`vrex_lib.coin.score` over all its samples pooled (procedure
    tasks: Σ correct / Σ counted steps, as VideoLLM-online's compute_metrics), samples and vocabulary built as
    the run built them (the split's videos whose files exist)."""
    from .. import coin

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
