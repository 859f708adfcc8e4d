"""One COIN sample streamed through the runtime (:func:`evaluate_sample`): its frames (decoded and encoded once per
model, file and span), the session, the answer and its JSON record."""
from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .. import coin, video
from ..config import RuntimeConfig
from ..runtime import DEFAULT_SYSTEM_PROMPT, AskAtEnd, Question, StreamingSession, drive, lockstep
from .plan import PROMPT_LAYOUTS, frames_action

_FRAME_CACHE: dict = {}
_FRAME_CACHE_MAX = 64
_MODEL_UID = itertools.count()


def _frame_embeds(model, path: Path, start: float, end: float, max_frames: int | None,
                  sampling: str = coin.FRAME_SAMPLING):
    """Decoded + vision-encoded frames of a span, cached per (model, file, span): every method sees the same
    frame tokens, and notebook 03 runs six methods over the same samples. ``max_frames`` here is a clamp (keep the
    last N); a cut stream (0 frames) never comes here."""
    if not hasattr(model, "_vrex_uid"):
        model._vrex_uid = next(_MODEL_UID)  # id() could be reused by a later model
    key = (model._vrex_uid, str(path), float(start), float(end), max_frames, sampling)
    if key in _FRAME_CACHE:
        return _FRAME_CACHE[key]
    t0 = time.perf_counter()
    frames, ts = video.read_frames(path, fps=coin.FRAME_FPS, max_side=model.image_size, start=start, end=end,
                                   sampling=sampling)
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


def _sample_frames(model, sample, path: Path, action: str, max_frames: int | None,
                   sampling: str = coin.FRAME_SAMPLING):
    """(frame tokens [T, 10, hidden], times [T], decode s, vision s) of a sample under ``action``: exactly the
    frames of ``sample.frame_range()`` (its span snapped to the 2 fps grid and clamped to its duration)."""
    if action == "cut":
        return torch.zeros(0, 1), np.zeros(0), 0.0, 0.0
    r = sample.frame_range(coin.FRAME_FPS)
    return _frame_embeds(model, path, r.start / coin.FRAME_FPS, (r.stop - 1) / coin.FRAME_FPS,
                         max_frames if action == "clamp" else None, sampling)


@dataclass
class Row:
    """One method's part of a sample streamed by several methods at once (:func:`evaluate_rows`): its policy, name,
    options, the ``full`` method's record of the sample to compare with (None: no agreement columns), the folder of
    its traces and the sample count of its results file."""

    policy: object
    method: str
    method_kwargs: dict | None = None
    reference: dict | None = None
    trace_dir: Path | None = None
    n_total: int = 0


def evaluate_sample(model, policy, sample, index: int, n_total: int, videos_dir: Path, *, method: str,
                    profile: str, runtime_cfg: RuntimeConfig, max_new_tokens: int, max_frames: int | None = None,
                    reference: dict | None = None, trace_dir: Path | None = None, system_prompt: str | None = None,
                    method_kwargs: dict | None = None, seed: int = 0, prompt_layout: str = "coin",
                    frames_policy: str = "videollm-online", frame_sampling: str = coin.FRAME_SAMPLING) -> dict:
    """Stream one COIN sample; returns its JSON record (see the package docstring).

    ``frame_sampling``: how the 2 fps frames are taken (:data:`vrex_lib.coin.FRAME_SAMPLING`, D59).
    ``prompt_layout`` 'coin': system, user prompt, frames, ``]\\nAssistant:`` and the answer as decoded
    (VideoLLM-online's COIN benchmarks); 'live': frames, then the question (streaming use), answer stripped.
    """
    row = Row(policy, method, method_kwargs, reference, trace_dir, n_total)
    return evaluate_rows(model, [row], sample, index, videos_dir, profile=profile, runtime_cfg=runtime_cfg,
                         max_new_tokens=max_new_tokens, max_frames=max_frames, system_prompt=system_prompt, seed=seed,
                         prompt_layout=prompt_layout, frames_policy=frames_policy, frame_sampling=frame_sampling)[0]


def evaluate_rows(model, rows: Sequence[Row], sample, index: int, videos_dir: Path, *, profile: str,
                  runtime_cfg: RuntimeConfig, max_new_tokens: int, max_frames: int | None = None,
                  system_prompt: str | None = None, seed: int = 0, prompt_layout: str = "coin",
                  frames_policy: str = "videollm-online", frame_sampling: str = coin.FRAME_SAMPLING) -> list[dict]:
    """Stream one COIN sample once per row, every row's session in one :func:`~vrex_lib.runtime.lockstep` (one
    batched forward per step, docs/DECISIONS.md D480, D520); returns each row's JSON record, as
    :func:`evaluate_sample` makes it. The frames are decoded and encoded once; nothing is written (traces
    included) unless every row finished. A row's ``timing_s`` prefill and answer are the batched forwards' wall
    time, ``total`` the whole batch's."""
    if prompt_layout not in PROMPT_LAYOUTS:
        raise ValueError(f"unknown prompt layout {prompt_layout!r}: choose one of {', '.join(PROMPT_LAYOUTS)}")
    t_start = time.perf_counter()
    path = coin.video_path(videos_dir, sample.video_id)
    n_expected = sample.num_frames()
    action = frames_action(n_expected, max_frames, frames_policy)
    if action == "skip":
        raise ValueError(f"sample {sample.sample_id}: {n_expected} frames > max_frames {max_frames} under "
                         "frames_policy 'skip'; run_eval leaves such samples out")
    emb, ts, t_decode, t_vision = _sample_frames(model, sample, path, action, max_frames, frame_sampling)
    # VideoLLM-online's COIN layout decodes to EOS (or max_new_tokens) with no stop string and scores the text as
    # decoded; the live layout stops a step/next answer at its first line.
    stops = () if prompt_layout == "coin" or sample.task in coin.PROCEDURE_TASKS else ("\n",)
    schedules = [AskAtEnd([Question(sample.prompt, max_new_tokens, stop_strings=stops)], layout=prompt_layout)
                 for _ in rows]

    def job(schedule):
        return lambda sess: drive(sess, ((emb[i], ts[i]) for i in range(emb.shape[0])), schedule,
                                  system_prompt=system_prompt or DEFAULT_SYSTEM_PROMPT)[0]

    sessions = [StreamingSession(model, row.policy, runtime_cfg) for row in rows]
    answers = lockstep([(sess, job(q)) for sess, q in zip(sessions, schedules)])
    recs = []
    for row, sess, schedule, ans in zip(rows, sessions, schedules, answers):
        tr = sess.trace()
        rec = _record(sample, sess, tr, ans, index=index, n_total=row.n_total, method=row.method, profile=profile,
                      method_kwargs=row.method_kwargs, runtime_cfg=runtime_cfg, seed=seed,
                      prompt_layout=prompt_layout, n_expected=n_expected, action=action)
        rec.update(reference_agreement(rec, row.reference))
        if row.trace_dir is not None:
            tr.meta.update(sample_id=sample.sample_id, task=sample.task, method=row.method, profile=profile)
            tr.save(Path(row.trace_dir) / (sample.sample_id.replace("/", "__") + ".npz"))
        rec["timing_s"] = dict(decode=round(t_decode, 4), vision=round(t_vision, 4),
                               prefill=round(schedule.frame_wall_s, 4), answer=round(ans.wall_s, 4),
                               total=round(time.perf_counter() - t_start, 4))
        recs.append(rec)
    return recs


def _record(sample, sess: StreamingSession, tr, ans, *, index: int, n_total: int, method: str, profile: str,
            method_kwargs: dict | None, runtime_cfg: RuntimeConfig, seed: int, prompt_layout: str,
            n_expected: int, action: str) -> dict:
    """The JSON line of one evaluated sample (everything but the reference agreement and the timings)."""
    frame_steps = tr.step_mask("frame")
    pred = ans.text
    return dict(
        sample_id=sample.sample_id, index=index, n_total=n_total, task=sample.task, method=method, profile=profile,
        video_id=sample.video_id, prediction=pred,
        target=list(sample.target) if isinstance(sample.target, tuple) else sample.target,
        correct=coin.score(sample.task, [pred], [sample]), n_frames=sess.n_frames, n_tokens=sess.n_tokens,
        ratio_frame=_nan_none(tr.retrieval_ratio("frame")), ratio_text=_nan_none(tr.retrieval_ratio("text")),
        host_bytes_frame=int(tr.bytes("host")[frame_steps].sum()),
        host_bytes_text=int(tr.bytes("host")[tr.step_mask("text")].sum()),
        first_token=ans.first_argmax, frame_argmax=[int(x) for x in tr["argmax"][frame_steps]],
        answer_ids=list(ans.ids), method_kwargs=method_kwargs or {}, runtime_config=repr(runtime_cfg), seed=seed,
        prompt_layout=prompt_layout, n_frames_expected=n_expected, frames_action=action,
        correct_strict=coin.score(sample.task, [pred], [sample], metric="strict"),
    )


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
