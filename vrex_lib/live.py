"""Stream any video file through the runtime and watch it live: ``python -m vrex_lib.live VIDEO``.

    python -m vrex_lib.live data/coin_mini/videos/mini00-replac.mp4 --method resv --fps 2 \\
        --ask "What is the person doing?@10" --ask "What happens next?@25" --trace /tmp/run.npz

Every frame is one prefill step of :class:`~vrex_lib.runtime.StreamingSession`. One row per frame shows:

* ``wall ms`` / ``cpu ms``: this machine's wall-clock and process CPU time for the step (vision tower + connector +
  LLM prefill with retrieval); on a shared machine the wall time includes waiting for a core;
* ``V-Rex8 ms`` / ``Orin ms``: the simulated frame-stage step of the paper's model (Llama-3-8B + SigLIP-L,
  Table I systems) at this step's cache length, with the fraction selected in *this* step (a user workload,
  :func:`vrex_lib.perf.simulate_measured`);
* ``kv`` tokens, ``dev MiB`` / ``host MiB``: this model's KV cache in the device (KVMU window + sinks) and
  offloaded tiers (``RuntimeConfig.kv_capacity``);
* ``sel``: selected / candidate tokens over (layer, KV head) where the policy ran; ``tok/cl``: mean tokens per
  ReSV cluster (ReSV only) -- both :func:`vrex_lib.runtime.step_stats` of the step.

Questions (``--ask "question@seconds"``, repeatable) are asked once the stream passes their time; the greedy
answer is printed with its per-token wall time. Bad input fails before the model loads: a missing or
undecodable video, a question time past the end, or a stream longer than ``--max-frames``.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from . import _io, methods
from .config import PROFILES, RuntimeConfig, check_profile_inputs, profile_config, seed_everything
from .notebook import _set_threads
from .perf.sim import step_latency_ms
from .retrieval import make_policy
from .runtime import (AskAtTimes, ContextTooLarge, Question, StreamingSession, build_model, check_context, drive,
                      kv_bytes, step_stats, tokens_for, validate_full_paths)
from .runtime.checkpoint import add_model_path_flags
from .video import VideoDecodeError, probe, request_times, stream_frames

DEFAULT_MAX_FRAMES = 600
SYSTEMS = ("vrex8", "agx_orin")


class StreamInputError(ValueError):
    """Bad command-line input, detected before any model is loaded."""


def parse_ask(spec: str) -> Question:
    """``"question@seconds"`` -> :class:`~vrex_lib.runtime.Question` (text, time_s); the last ``@`` separates the
    time."""
    if "@" not in spec:
        raise StreamInputError(f"--ask {spec!r}: write it as \"question@seconds\", e.g. \"What is he doing?@12.5\"")
    text, t = spec.rsplit("@", 1)
    try:
        ts = float(t)
    except ValueError:
        raise StreamInputError(f"--ask {spec!r}: {t!r} after the last '@' is not a time in seconds") from None
    if not text.strip():
        raise StreamInputError(f"--ask {spec!r}: the question before '@' is empty")
    if not math.isfinite(ts) or ts < 0:
        raise StreamInputError(f"--ask {spec!r}: the time must be a non-negative number of seconds")
    return Question(text.strip(), time_s=ts)


@dataclass
class StreamPlan:
    """What will be streamed, checked before the model loads: frame times [T] (s) and the sorted questions."""

    video: Path
    times: np.ndarray
    questions: list[Question]
    duration_s: float


def plan_stream(video: str | Path, fps: float, asks: list[str], max_frames: int = DEFAULT_MAX_FRAMES,
                end_s: float | None = None) -> StreamPlan:
    """Probe ``video`` and check the request (stream [0, ``end_s``], default the whole video); raises
    :class:`StreamInputError` naming the fix."""
    if not fps > 0 or not math.isfinite(fps):
        raise StreamInputError(f"--fps {fps}: must be a positive number of frames per second (VideoLLM-online: 2)")
    if max_frames < 1:
        raise StreamInputError(f"--max-frames {max_frames}: must be >= 1")
    questions = sorted((parse_ask(a) for a in asks), key=lambda q: q.time_s)
    if Path(video).exists() and not Path(video).is_file():  # a FIFO or device would block the decoder forever
        raise StreamInputError(f"{video}: not a regular file (a folder, FIFO or device); pass a video file")
    if end_s is not None and not (end_s > 0 and math.isfinite(end_s)):
        raise StreamInputError(f"--end {end_s}: must be a positive time in seconds")
    try:
        info = probe(video)
    except FileNotFoundError as err:
        raise StreamInputError(f"{video}: no such video file ({err})") from None
    except VideoDecodeError as err:
        raise StreamInputError(str(err)) from None
    end = info.last_time if end_s is None else min(float(end_s), info.last_time)
    # request_times' grid 0, 1/fps, ... up to ``end`` (and the last decoded frame), counted before it is built:
    # at --fps 1e9 the grid alone would take gigabytes
    n_frames = min(math.ceil(end * fps - 1e-9), math.floor(info.last_time * fps + 1e-6)) + 1
    if n_frames > max_frames:
        raise StreamInputError(
            f"{video}: {end:.1f} s at --fps {fps:g} is {n_frames} frames, more than --max-frames "
            f"{max_frames}: lower --fps, stream a prefix with --end SECONDS, or raise --max-frames if the model's "
            "context and memory allow it")
    times = request_times(info, fps, None, end)
    for q in questions:
        if q.time_s > end + 1.0 / fps:
            raise StreamInputError(f"--ask \"{q.text}@{q.time_s:g}\": the stream ends at {end:.1f} s; "
                                   "pick a time inside it")
    return StreamPlan(Path(video), times, questions, end)


def check_decodes(plan: StreamPlan, fps: float) -> None:
    """Decode every planned frame once, small, before the model loads: a video damaged mid-file (its container
    opens, a later frame does not decode) fails here naming the file and the time, not minutes into the stream."""
    n = 0
    try:
        for _ in itertools.islice(stream_frames(plan.video, fps=fps, max_side=32), len(plan.times)):
            n += 1
    except VideoDecodeError as err:
        at = float(plan.times[min(n, len(plan.times) - 1)])
        raise StreamInputError(f"{err} (frames decode up to {n} of {len(plan.times)}; the damage is near "
                               f"{at:.1f} s: stream the part before it with --end {max(at - 1.0, 0.5):.1f})") from None


# ---------------------------------------------------------------------------------------------------------------
def simulated_ms(method: str, kv_len: int, stats: dict, stage: str = "frame") -> dict[str, float]:
    """Simulated step time (ms) on each of :data:`SYSTEMS` with this step's measured selection (``stats``:
    :func:`vrex_lib.runtime.step_stats`; NaN if the method has no simulator model)."""
    if method not in methods.SIM_METHOD:
        return {s: math.nan for s in SYSTEMS}
    return step_latency_ms(SYSTEMS, method, stage, kv_len, selected_frac=stats["selected_frac"],
                           tokens_per_cluster=stats["tokens_per_cluster"], wics_exit_frac=stats["wics_exit_frac"],
                           source="this step of vrex_lib.live")


HEADER = (f"{'frame':>5} {'t s':>6} {'kv':>6} {'wall ms':>8} {'cpu ms':>7} {'V-Rex8 ms':>9} {'Orin ms':>8} "
          f"{'dev MiB':>8} {'host MiB':>8} {'sel':>6} {'tok/cl':>6}")


def _fmt(x: float, spec: str) -> str:
    """``format(x, spec)``, or a '-' of the same width for a value that was not measured (None/NaN)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return format("-", spec.split(".")[0])
    return format(x, spec)


def format_row(r: dict) -> str:
    return (f"{r['frame']:>5d} {r['t_s']:>6.1f} {r['kv_len']:>6d} {r['wall_ms']:>8.1f} {r['cpu_ms']:>7.1f} "
            f"{_fmt(r['vrex8_ms'], '>9.2f')} {_fmt(r['agx_orin_ms'], '>8.1f')} {r['dev_mib']:>8.2f} "
            f"{r['host_mib']:>8.2f} {_fmt(r['sel_frac'], '>6.3f')} {_fmt(r['tokens_per_cluster'], '>6.1f')}")


class _LiveTable(AskAtTimes):
    """The schedule of :func:`run_stream`: questions at their times, one printed row per frame."""

    def __init__(self, plan: StreamPlan, model, method: str, max_new_tokens: int, simulate: bool, say, bar):
        super().__init__([dataclasses.replace(q, max_new_tokens=max_new_tokens) for q in plan.questions])
        self.model, self.method, self.simulate, self.say, self.bar = model, method, simulate, say, bar
        self.per_tok = kv_bytes(model, 1)
        self.rows: list[dict] = []
        self.answer_rows: list[dict] = []

    def after_frame(self, sess, index, time_s, wall_s, cpu_s) -> None:
        st = step_stats(sess.stats[-1], self.model.n_kv_heads)
        n = sess.n_tokens
        n_host = sess.store.n_host(n)
        sim = simulated_ms(self.method, n, st) if self.simulate else {s: math.nan for s in SYSTEMS}
        r = dict(frame=index, t_s=float(time_s), kv_len=n, wall_ms=1e3 * wall_s, cpu_ms=1e3 * cpu_s,
                 vrex8_ms=sim["vrex8"], agx_orin_ms=sim["agx_orin"], dev_mib=(n - n_host) * self.per_tok / 2**20,
                 host_mib=n_host * self.per_tok / 2**20, sel_frac=st["selected_frac"],
                 tokens_per_cluster=st["tokens_per_cluster"], wics_exit_frac=st["wics_exit_frac"])
        self.rows.append(r)
        self.say(format_row(r))
        self.bar.update(1)

    def on_answer(self, sess, a) -> None:
        ms_per_token = 1e3 * a.wall_s / max(1, len(a.steps))
        self.answer_rows.append(dict(question=a.question.text, time_s=a.question.time_s,
                                     after_frame_s=a.after_frame_s, answer=a.text, wall_ms_per_token=ms_per_token,
                                     kv_len=sess.n_tokens))
        self.say(f"  Q@{a.question.time_s:g}s: {a.question.text}\n  A: {a.text}   [{ms_per_token:.1f} ms/token on "
                 f"this machine, kv {sess.n_tokens}]")


def run_stream(plan: StreamPlan, model, method: str = "resv", *, fps: float = 2.0,
               runtime: RuntimeConfig | None = None, max_new_tokens: int = 32, progress: bool = True,
               out=None, trace_path: str | Path | None = None, simulate: bool = True,
               trace_meta: dict | None = None) -> dict:
    """Stream ``plan`` through ``model`` with retrieval ``method``; print the live table to ``out``; the trace (with
    ``trace_meta`` added to its metadata) is saved to ``trace_path``.

    Returns dict(rows=[per-frame dicts], answers=[dict(question, time_s, answer, wall_ms_per_token)], trace=path).
    """
    out = out or sys.stdout
    cfg = runtime or RuntimeConfig()
    n_q_tokens = sum(len(model.encode(q.text)) + 8 for q in plan.questions)
    need = tokens_for(len(plan.times), question_tokens=n_q_tokens,
                      max_new_tokens=max_new_tokens * max(1, len(plan.questions)), interval_token=cfg.interval_token)
    check_context(model, need, cfg, what=f"{plan.video.name} at {fps:g} fps ({len(plan.times)} frames)")
    sess = StreamingSession(model, None if method == "full" else make_policy(method), cfg)

    def say(line: str) -> None:
        if progress:
            tqdm.write(line, file=out)
        else:
            print(line, file=out, flush=True)

    say(f"# {plan.video.name}: {len(plan.times)} frames at {fps:g} fps, method {method}, model {model.name}; "
        f"V-Rex8/Orin = simulated Llama-3-8B frame step at this kv with this step's selection")
    say(HEADER)
    bar = tqdm(total=len(plan.times), unit="frame", desc=plan.video.name, disable=not progress, file=out,
               leave=False)
    table = _LiveTable(plan, model, method, max_new_tokens, simulate, say, bar)
    frames = itertools.islice(((f, t) for t, f in stream_frames(plan.video, fps=fps)), len(plan.times))
    try:
        drive(sess, frames, table)
    finally:
        bar.close()
    path = None
    if trace_path:
        trace = sess.trace()
        trace.meta.update(trace_meta or {})
        path = trace.save(trace_path)
    if table.rows:
        say(_summary(table.rows, fps) + (f"; trace {path}" if path else ""))
    return dict(rows=table.rows, answers=table.answer_rows, trace=path)


def _summary(rows: list[dict], fps: float) -> str:
    """The closing line: mean measured and simulated per-frame times."""
    w = np.array([r["wall_ms"] for r in rows])
    c = np.array([r["cpu_ms"] for r in rows])
    v = np.array([r["vrex8_ms"] for r in rows], float)
    o = np.array([r["agx_orin_ms"] for r in rows], float)
    v_ms = float(np.nanmean(v)) if np.isfinite(v).any() else math.nan
    o_ms = float(np.nanmean(o)) if np.isfinite(o).any() else math.nan
    return (f"# {len(rows)} frames: wall {w.mean():.1f} ms/frame here, CPU {c.mean():.1f} ms/frame (real time at "
            f"{fps:g} fps needs <= {1e3 / fps:.0f}); simulated Llama-3-8B V-Rex8 {v_ms:.2f} ms/frame, AGX Orin "
            f"{o_ms:.1f} ms/frame")


# ---------------------------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m vrex_lib.live",
                                 description="Stream a video through the V-Rex runtime with a live per-frame table.")
    ap.add_argument("video", help="any video file ffmpeg/decord can read")
    ap.add_argument("--method", default="resv", choices=sorted(methods.NAMES),
                    help="retrieval method (default resv)")
    ap.add_argument("--ask", action="append", default=[], metavar="QUESTION@SECONDS",
                    help='ask QUESTION once the stream reaches SECONDS, e.g. --ask "What is he doing?@12" '
                         "(repeatable)")
    ap.add_argument("--profile", default="default", choices=PROFILES,
                    help="model build: smoke (tiny random), default (SmolLM2-135M), full (VideoLLM-online 8B)")
    ap.add_argument("--fps", type=float, default=2.0, help="frames per second fed to the model (default 2)")
    ap.add_argument("--trace", default=None, metavar="OUT.npz", help="save the retrieval trace here")
    ap.add_argument("--replace", action="store_true", help="replace a --trace of another request")
    ap.add_argument("--force", action="store_true", help="overwrite --trace even if it is not a retrieval trace")
    ap.add_argument("--end", type=float, default=None, metavar="SECONDS",
                    help="stream only [0, SECONDS] of the video (default: all of it)")
    ap.add_argument("--max-frames", type=int, default=DEFAULT_MAX_FRAMES,
                    help=f"refuse longer streams before loading the model (default {DEFAULT_MAX_FRAMES})")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="answer length limit (default 32)")
    ap.add_argument("--kv-capacity", type=int, default=RuntimeConfig().kv_capacity,
                    help="KVMU window in tokens; older tokens count as offloaded (default %(default)s)")
    ap.add_argument("--no-progress", action="store_true", help="plain rows, no tqdm bar")
    add_model_path_flags(ap)
    ap.add_argument("--device", default=None, help="torch device (full profile default: cuda)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.max_new_tokens < 1:
            raise StreamInputError(f"--max-new-tokens {args.max_new_tokens}: must be >= 1")
        if args.kv_capacity < 1:
            raise StreamInputError(f"--kv-capacity {args.kv_capacity}: must be >= 1")
        check_profile_inputs(args.profile, llm_path=args.llm_path, vision_path=args.vision_path,
                             connector_path=args.connector_path)
        if args.trace:
            check_trace_path(args.trace, trace_request(args), force=args.force, replace=args.replace)
        plan = plan_stream(args.video, args.fps, args.ask, args.max_frames, args.end)
        if profile_config(args.profile).model.requires_paths:
            validate_full_paths(args.llm_path, args.vision_path, args.connector_path)
        check_decodes(plan, args.fps)
    except (StreamInputError, ValueError, OSError) as err:
        print(f"vrex_lib.live: error: {err}", file=sys.stderr)
        return 2

    pc = profile_config(args.profile)
    seed_everything(pc.seed)
    _set_threads()
    device = args.device or (pc.device if pc.model.requires_paths else None)
    if device and device.startswith("cuda") and not torch.cuda.is_available():
        print(f"vrex_lib.live: error: --device {device} but no CUDA device is visible; pass --device cpu",
              file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    model = build_model(args.profile, llm_path=args.llm_path, vision_path=args.vision_path,
                        connector_path=args.connector_path, device=device)
    print(f"# model {model.name} ({args.profile}) ready in {time.perf_counter() - t0:.1f} s", flush=True)
    try:
        run_stream(plan, model, args.method, fps=args.fps, runtime=RuntimeConfig(kv_capacity=args.kv_capacity),
                   max_new_tokens=args.max_new_tokens, progress=not args.no_progress, trace_path=args.trace,
                   trace_meta={TRACE_REQUEST: trace_request(args)})
    except ContextTooLarge as err:
        print(f"vrex_lib.live: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the trace could not be written (e.g. a full disk): the table above is complete
        print(f"vrex_lib.live: error: {err} (the per-frame table above is complete; only --trace is missing)",
              file=sys.stderr)
        return 2
    return 0


#: The metadata field of a trace written by ``vrex_lib.live``: the request (:func:`trace_request`).
TRACE_REQUEST = "live_request"


def _read_trace(path: Path) -> tuple[dict | None, str]:
    """(the trace's metadata, '') or (None, why ``path`` is not a retrieval trace)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta_json"]))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:
        return None, f"not a retrieval trace: {type(err).__name__}"
    return (meta, "") if isinstance(meta, dict) else (None, "not a retrieval trace: no metadata")


def _trace_differ(meta: dict, request: dict) -> list[str]:
    if not isinstance(meta.get(TRACE_REQUEST), dict):
        return ["written by another command than vrex_lib.live"]
    return _io.config_diff(meta[TRACE_REQUEST], request)


#: A retrieval trace, for :func:`vrex_lib._io.check_output`: its configuration is the live request that wrote it.
TRACE_KIND = _io.OutputKind("retrieval trace", "trace", _read_trace, differ=_trace_differ)


def trace_request(args: argparse.Namespace) -> dict:
    """What decides a live trace: the video (name and size), the profile, the method, and the stream's settings."""
    v = Path(args.video)
    return dict(video=v.name, video_bytes=v.stat().st_size if v.is_file() else None, profile=args.profile,
                method=args.method, fps=args.fps, end=args.end, kv_capacity=args.kv_capacity,
                max_new_tokens=args.max_new_tokens, ask=list(args.ask))


def check_trace_path(trace: str | Path, request: dict | None = None, *, force: bool = False,
                     replace: bool = False) -> Path:
    """``--trace``: an .npz path that is not a folder, in a folder this process can write (created if needed);
    an existing file must be a trace of this ``request`` (else ``replace``; a file that is no trace: ``force``).
    Checked before the model loads, so a long stream never ends in an unwritable or wrongly overwritten trace."""
    p = Path(trace)
    if p.suffix != ".npz":
        raise StreamInputError(f"--trace {trace}: the trace is an .npz file; give a path ending in .npz")
    try:
        _io.check_output(p, TRACE_KIND, flag="--trace", requested=request, force=force, replace=replace,
                         example=f"--trace {p.parent / 'run.npz'}")
    except (PermissionError, _io.OutputRefused) as err:
        raise StreamInputError(str(err)) from None
    return p


if __name__ == "__main__":
    raise SystemExit(main())
