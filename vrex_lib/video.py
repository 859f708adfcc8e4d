"""Decode video frames at a fixed rate (2 fps for COIN) for the streaming runtime.

    frames, ts = read_frames("videos/abc.mp4", fps=2.0, max_side=384, start=60.0, end=69.0, sampling="ffmpeg")
    # frames: uint8 [T, H, W, 3] RGB, longer side <= max_side; ts: float64 [T] seconds (see below)
    for t, frame in stream_frames("videos/abc.mp4"):   # time order, bounded memory
        ...

Which frames (``sampling``, :data:`SAMPLINGS`):

* ``"ffmpeg"`` (the COIN default, :data:`vrex_lib.coin.FRAME_SAMPLING`): the frames of the video ffmpeg writes with
  ``-r fps``, as VideoLLM-online's preprocessing (``ffmpeg_once``) resamples every video before its model sees it;
  ``ffmpeg_rule`` names the release whose rule to follow (:data:`FFMPEG_RULES`: "7", VideoLLM-online's pin, or
  "5.1"; they give frames different durations, :func:`sync_durations`).
  ffmpeg's constant-frame-rate rule (``video_sync_process`` of fftools, vsync ``cfr``; :func:`ffmpeg_cfr_map`)
  drops or duplicates source frames; output frame k shows the source frame this rule assigns to it, and its time is
  ``k / fps``, its place in the resampled video. The resampled video has :func:`resampled_count` frames;
* ``"grid"``: the ``fps`` grid ``k / fps`` for ``k = ceil(start·fps) .. ceil(end·fps)``, clamped to the last
  decodable frame; each is served by the source frame whose timestamp is nearest (returned timestamps are the
  source frames', within half a source-frame interval of the request).

Both take output frames ``ceil(start·fps) .. ceil(end·fps)`` of the span (the COIN span rule,
:func:`vrex_lib.coin.span_frame_range`). Frames are resized on decode so the longer side is ``max_side`` (never
upscaled); ``pad_square=True`` zero-pads to ``max_side × max_side`` like VideoLLM-online's preprocessing.

decord decodes; if decord cannot be imported PyAV is used instead (one warning says so). The ffmpeg rule reads the
container's integer timestamps with PyAV (packets only, no frame is decoded).
"""
from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import numpy as np

_BACKEND: str | None = None
#: How output frames are chosen from the source frames (module docstring).
SAMPLINGS: tuple[str, ...] = ("ffmpeg", "grid")


class VideoDecodeError(RuntimeError):
    """A video file exists but cannot be decoded."""


class VideoSpanError(ValueError):
    """The requested span lies outside the video."""


def backend() -> str:
    """'decord', or 'av' when decord cannot be imported (warned once)."""
    global _BACKEND
    if _BACKEND is None:
        try:
            import decord  # noqa: F401

            _BACKEND = "decord"
        except Exception as err:  # pragma: no cover - depends on the environment
            warnings.warn(f"decord unavailable ({err}); decoding video with PyAV instead (slower seeking).",
                          stacklevel=2)
            _BACKEND = "av"
    return _BACKEND


@dataclass(frozen=True)
class VideoInfo:
    """Container facts: ``timestamps`` [N] are the start times (s) of every source frame."""

    path: Path
    width: int
    height: int
    timestamps: np.ndarray

    @property
    def n_frames(self) -> int:
        return len(self.timestamps)

    @property
    def last_time(self) -> float:
        return float(self.timestamps[-1])

    @property
    def avg_fps(self) -> float:
        return (self.n_frames - 1) / self.last_time if self.n_frames > 1 and self.last_time > 0 else float("nan")


def _check_path(video: str | os.PathLike) -> Path:
    p = Path(video)
    if not p.exists():
        raise FileNotFoundError(f"video file not found: {p}. Check the videos folder (COIN: videos/<id>.mp4).")
    if p.is_dir():
        raise _corrupt(p, None)
    return p


def _stream_types(p: Path) -> list[str] | None:
    """Stream kinds in the container ('video', 'audio', ...), or None if no demuxer can open it."""
    try:
        import av

        with av.open(str(p)) as c:
            return [st.type for st in c.streams]
    except Exception:
        return None


def _corrupt(p: Path, err: BaseException | None) -> VideoDecodeError:
    """A decode failure as a message that names the file, what is wrong with it and the fix.

    The decoder's own exception text (decord/ffmpeg internals) says little to a user, so the file is examined
    instead: folder, unreadable, empty, not a container, no video stream, or a video stream that fails.
    """
    skip = "A COIN run skips it and lists it in the skip log."
    if p.is_dir():
        return VideoDecodeError(f"{p} is a folder, not a video file; put the video itself there "
                                f"(COIN: videos/<youtube_id>.mp4). {skip}")
    try:
        with open(p, "rb") as f:
            head = f.read(1)
    except OSError as e:
        return VideoDecodeError(f"{p}: cannot be read ({e.strerror or e}); fix its permissions "
                                f"(e.g. chmod a+r {p}). {skip}")
    if not head:
        return VideoDecodeError(f"{p}: the file is empty (0 bytes), an interrupted download; download it again. "
                                f"{skip}")
    kinds = _stream_types(p)
    if kinds is None:
        return VideoDecodeError(f"{p}: not a video container ffmpeg can open (corrupt, truncated or not a video "
                                f"at all); download it again. {skip}")
    if "video" not in kinds:
        return VideoDecodeError(f"{p}: the file has no video stream (it holds {', '.join(kinds) or 'no streams'}; "
                                f"an audio-only download?); download the video track. {skip}")
    what = f" ({type(err).__name__})" if err is not None else ""
    return VideoDecodeError(f"{p}: its video stream cannot be decoded{what}; download it again, or re-encode it "
                            f"with `ffmpeg -i {p.name} -c:v libx264 fixed.mp4`. {skip}")


def probe(video: str | os.PathLike) -> VideoInfo:
    """Size and per-frame timestamps of a video; :class:`VideoDecodeError` if it cannot be opened."""
    p = _check_path(video)
    try:
        if backend() == "decord":
            import decord

            vr = decord.VideoReader(str(p), ctx=decord.cpu(0), num_threads=1)
            n = len(vr)
            if n == 0:
                raise ValueError("no frames")
            ts = np.asarray(vr.get_frame_timestamp(np.arange(n)), dtype=np.float64)[:, 0]
            h, w = vr[0].shape[:2]
            return VideoInfo(p, int(w), int(h), ts)
        import av

        with av.open(str(p)) as c:
            st = c.streams.video[0]
            ts = [float(f.pts * st.time_base) for f in c.decode(st)]
            if not ts:
                raise ValueError("no frames")
            return VideoInfo(p, st.codec_context.width, st.codec_context.height, np.asarray(ts))
    except FileNotFoundError:
        raise
    except Exception as err:
        raise _corrupt(p, err) from None


def output_size(width: int, height: int, max_side: int | None) -> tuple[int, int]:
    """(w, h) after scaling the longer side down to ``max_side`` (even sizes, never upscaled)."""
    if not max_side or max(width, height) <= max_side:
        return width, height
    s = max_side / max(width, height)
    return max(2, int(round(width * s / 2)) * 2), max(2, int(round(height * s / 2)) * 2)


def request_times(info: VideoInfo, fps: float, start: float | None, end: float | None) -> np.ndarray:
    """The ``fps``-grid times to sample in [start, end] (the COIN span rule), clamped to the video."""
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    k_last = math.floor(info.last_time * fps + 1e-6)  # last grid point that has a decoded frame at or before it
    k0, k1 = _span_k(info.path, k_last, fps, start, end, info.last_time)
    return np.arange(k0, k1 + 1, dtype=np.float64) / fps


def _span_k(path: Path, k_last: int, fps: float, start: float | None, end: float | None,
            last_s: float) -> tuple[int, int]:
    """Output frames ``ceil(start·fps) .. ceil(end·fps)`` of a video whose last output frame is ``k_last``."""
    s = 0.0 if start is None else float(start)
    e = k_last / fps if end is None else float(end)
    if s < 0 or e < s:
        raise VideoSpanError(f"{path}: span [{s}, {e}] is reversed or negative")
    k0 = math.ceil(s * fps - 1e-9)
    if k0 > k_last + 1:  # more than one grid step past the last frame: the span is not in this video
        raise VideoSpanError(f"{path}: span starts at {s:.2f} s but the video ends at {last_s:.2f} s. "
                             "Check the annotation's segment/duration against the file (wrong or truncated video?).")
    return min(k0, k_last), min(math.ceil(e * fps - 1e-9), k_last)


# ---------------------------------------------------------------------------------- ffmpeg's -r (vsync cfr)
@dataclass(frozen=True)
class PacketTimes:
    """A video stream's integer timestamps in presentation order: ``pts`` / ``durations`` [N] in ``time_base``
    units, the container's ``start_time`` (µs, what ffmpeg subtracts from every timestamp), ``avg_rate`` and
    ``guessed_rate`` (libavformat's ``av_guess_frame_rate``: the rate ffmpeg gives its filter graph's input, and so
    the frame rate its buffersink reports)."""

    pts: np.ndarray
    durations: np.ndarray
    time_base: Fraction
    start_time_us: int
    avg_rate: Fraction | None
    guessed_rate: Fraction | None = None


def _rescale(a: int, b: Fraction, c: Fraction) -> int:
    """libavutil's ``av_rescale_q(a, b, c)``: a·b/c rounded to the nearest integer, halves away from zero."""
    num, den = a * b.numerator * c.denominator, b.denominator * c.numerator
    q, r = divmod(abs(num), den)
    q += 2 * r >= den
    return q if num >= 0 else -q


@lru_cache(maxsize=256)
def _packet_times(path: str, size: int, mtime_ns: int) -> PacketTimes:
    import av

    with av.open(path) as c:
        st = c.streams.video[0]
        pk = sorted((int(p.pts), int(p.duration or 0)) for p in c.demux(st) if p.pts is not None)
        rate = Fraction(st.average_rate) if st.average_rate else None
        guessed = Fraction(st.guessed_rate) if st.guessed_rate else None
        start = int(c.start_time) if c.start_time is not None else 0
        tb = Fraction(st.time_base)
    if not pk:
        raise ValueError("no video packets")
    arr = np.asarray(pk, dtype=np.int64)
    return PacketTimes(arr[:, 0], arr[:, 1], tb, start, rate, guessed)


def packet_times(video: str | os.PathLike) -> PacketTimes:
    """:class:`PacketTimes` of a video (demuxed once per file version, no frame decoded)."""
    p = _check_path(video)
    try:
        st = p.stat()
        return _packet_times(str(p), st.st_size, st.st_mtime_ns)
    except Exception as err:
        raise _corrupt(p, err) from None


def sync_durations(t: PacketTimes, fps: float, rule: str = "7") -> np.ndarray:
    """Each source frame's duration as ffmpeg's rate conversion sees it, in output frames (``1/fps``): float64 [N].

    * ``"7"``: the frame's own duration (libavcodec copies its packet's) in ffmpeg 7.0's ``video_sync_process``;
      a frame whose duration is 0 (a container's last sample often has none) gets one frame at the filter graph's
      frame rate (``fg_output_step``: ``av_buffersink_get_frame_rate``, the guessed rate), or stays 0 without one.
      The decoder's ``video_duration_estimate`` only extrapolates missing timestamps; it never sets a duration.
    * ``"5.1"``: ffmpeg 5.1's ``do_video_out`` with a ``-vf`` filter chain (VideoLLM-online's ``ffmpeg_once``
      passes ``-vf scale,pad``): every frame lasts one frame at the buffersink's rate (the guessed rate), capped at
      one output frame -- the same value for every frame, whatever its own duration (a variable-frame-rate source's
      gaps are not durations there). Without ``-vf`` 5.1 would use the packet's rounded duration; not modelled.
    """
    check_ffmpeg_rule(rule)
    rate = Fraction(fps).limit_denominator(1_000_000)
    tb_s = t.time_base
    if rule == "5.1":
        dur = min(float(rate / t.guessed_rate), 1.0) if t.guessed_rate else 0.0
        return np.full(len(t.pts), dur)
    fallback = _rescale(1, 1 / t.guessed_rate, tb_s) if t.guessed_rate else 0
    d = np.where(t.durations > 0, t.durations, fallback).astype(np.float64)
    return d * float(tb_s * rate)


#: The ffmpeg releases whose ``-r`` rule :func:`ffmpeg_cfr_map` follows: "7" (7.0.1, VideoLLM-online's pin, and later)
#: and "5.1" (Debian 12's); they differ in the duration each frame is given (:func:`sync_durations`), so for sources
#: below twice the output rate and for variable-frame-rate sources.
FFMPEG_RULES: tuple[str, ...] = ("7", "5.1")


def check_ffmpeg_rule(rule: str) -> None:
    if rule not in FFMPEG_RULES:
        raise ValueError(f"unknown ffmpeg rule {rule!r}: choose one of {', '.join(FFMPEG_RULES)} (the ffmpeg release "
                         "whose -r frame choice to follow; VideoLLM-online pins 7)")


def ffmpeg_cfr_map(t: PacketTimes, fps: float, rule: str = "7") -> np.ndarray:
    """For every frame of the video ``ffmpeg -i SRC -r fps`` writes (vsync ``cfr``, the default of mp4 output), the
    index of the source frame it shows: int64 [n_out].

    fftools' ``video_sync_process`` (ffmpeg 7.0; ``do_video_out`` in 5.1), per source frame in presentation order:
    its time in output frames ``sync`` (the timestamp less the container's start, rescaled to ``1/fps`` with 16
    extra bits, nudged by 2^-17 off exact midpoints) and duration ``dur`` (:func:`sync_durations`, which is where
    the releases differ); with ``next`` the output frames written
    so far, ``delta0 = sync - next`` and ``delta = delta0 + dur``: the frame is dropped if ``delta < -1.1``, written
    ``round(delta)`` times if ``delta > 1.1`` (the first ``round(delta0 - 0.6)`` of them repeating the previous
    frame when ``delta0 > 1.1``), else once. At the end the previous frame is repeated the median of the last
    three repeat counts. ``rule="5.1"``: ffmpeg 5.1's ``do_video_out`` also always nudges. The rule is
    re-implemented, not copied; tests/test_video_ffmpeg.py checks it against the system ffmpeg, on constant- and
    variable-frame-rate sources.
    """
    durations = sync_durations(t, fps, rule)
    rate = Fraction(fps).limit_denominator(1_000_000)
    tb_out = 1 / rate
    extra = min(max(29 - (tb_out.denominator.bit_length() - 1), 0), 16)
    fine = Fraction(tb_out.numerator, tb_out.denominator << extra)
    offset = _rescale(t.start_time_us, Fraction(1, 1_000_000), t.time_base)
    out: list[int] = []
    hist = [0, 0, 0]
    for i, (p, dur) in enumerate(zip(t.pts.tolist(), durations.tolist())):
        sync = _rescale(p - offset, t.time_base, fine) / (1 << extra)
        if sync != round(sync) or rule == "5.1":
            sync += 1.0 / (1 << 17) if sync > 0 else -1.0 / (1 << 17)
        delta0 = sync - len(out)
        delta = delta0 + dur
        n, n_prev = 1, 0
        if delta < -1.1:
            n = 0
        elif delta > 1.1:
            n = int(round(float(np.float32(delta))))
            if delta0 > 1.1:
                n_prev = min(int(round(float(np.float32(delta0 - 0.6)))), n)
        if i == 0:
            n_prev = 0  # no previous frame to repeat
        out += [i - 1] * n_prev + [i] * (n - n_prev)
        hist = [n_prev] + hist[:2]
    out += [len(t.pts) - 1] * sorted(hist)[1]
    return np.asarray(out, dtype=np.int64)


def resampled_map(video: str | os.PathLike, fps: float, sampling: str = "ffmpeg",
                  info: VideoInfo | None = None, ffmpeg_rule: str = "7") -> np.ndarray:
    """Source frame index [n_out] behind every output frame of the video resampled to ``fps`` (``sampling``;
    ``ffmpeg_rule``: which release's ``-r`` rule, :data:`FFMPEG_RULES`)."""
    check_sampling(sampling)
    check_ffmpeg_rule(ffmpeg_rule)
    info = info or probe(video)
    if sampling == "grid":
        k_last = math.floor(info.last_time * fps + 1e-6)
        return _nearest_indices(info.timestamps, np.arange(k_last + 1, dtype=np.float64) / fps)
    t = packet_times(info.path)
    if len(t.pts) != info.n_frames:
        raise VideoDecodeError(f"{info.path}: {len(t.pts)} timestamped packets but {info.n_frames} decodable frames; "
                               "re-encode it (`ffmpeg -i in.mp4 -c:v libx264 fixed.mp4`) or use sampling='grid'")
    return ffmpeg_cfr_map(t, fps, ffmpeg_rule)


def resampled_count(video: str | os.PathLike, fps: float, sampling: str = "ffmpeg", ffmpeg_rule: str = "7") -> int:
    """How many frames the video has once resampled to ``fps`` (``len(frames)`` of VideoLLM-online's 2 fps video for
    ``sampling="ffmpeg"``)."""
    return len(resampled_map(video, fps, sampling, ffmpeg_rule=ffmpeg_rule))


def check_sampling(sampling: str) -> None:
    if sampling not in SAMPLINGS:
        raise ValueError(f"unknown frame sampling {sampling!r}: choose one of {', '.join(SAMPLINGS)}")


def frame_plan(info: VideoInfo, fps: float, start: float | None, end: float | None,
               sampling: str = "grid", ffmpeg_rule: str = "7") -> tuple[np.ndarray, np.ndarray]:
    """(times [T] s, source frame indices [T]) of the frames of [start, end] at ``fps`` (module docstring)."""
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    check_sampling(sampling)
    check_ffmpeg_rule(ffmpeg_rule)
    if sampling == "grid":
        times = request_times(info, fps, start, end)
        idx = _nearest_indices(info.timestamps, times)
        return info.timestamps[idx], idx
    m = resampled_map(info.path, fps, sampling, info, ffmpeg_rule)
    k0, k1 = _span_k(info.path, len(m) - 1, fps, start, end, (len(m) - 1) / fps)
    k = np.arange(k0, k1 + 1)
    return k / fps, m[k]


def _nearest_indices(ts: np.ndarray, times: np.ndarray) -> np.ndarray:
    i = np.clip(np.searchsorted(ts, times), 1, len(ts) - 1) if len(ts) > 1 else np.zeros(len(times), np.int64)
    if len(ts) > 1:
        i = np.where(np.abs(ts[i - 1] - times) <= np.abs(ts[i] - times), i - 1, i)
    return i.astype(np.int64)


def _pad(frames: np.ndarray, side: int) -> np.ndarray:
    t, h, w, c = frames.shape
    out = np.zeros((t, side, side, c), dtype=np.uint8)
    y, x = (side - h) // 2, (side - w) // 2
    out[:, y:y + h, x:x + w] = frames
    return out


def _decode(info: VideoInfo, idx: np.ndarray, size: tuple[int, int], chunk: int) -> Iterator[np.ndarray]:
    """Yield uint8 [t, H, W, 3] blocks of the source frames ``idx`` (ascending), resized to ``size``."""
    w, h = size
    if backend() == "decord":
        import decord

        vr = decord.VideoReader(str(info.path), ctx=decord.cpu(0), width=w, height=h, num_threads=1)
        for a in range(0, len(idx), chunk):
            yield vr.get_batch(idx[a:a + chunk].tolist()).asnumpy()
        return
    import av

    # Decoders emit frames in presentation order, so frame j here is timestamps[j] of probe().
    want: dict[int, int] = {}
    for j in idx:  # a source frame may serve several requested times (fps above the source rate)
        want[int(j)] = want.get(int(j), 0) + 1
    block: list[np.ndarray] = []
    with av.open(str(info.path)) as c:
        for j, f in enumerate(c.decode(c.streams.video[0])):
            if j > idx[-1]:
                break
            for _ in range(want.get(j, 0)):
                block.append(f.to_ndarray(format="rgb24", width=w, height=h))
                if len(block) == chunk:
                    yield np.stack(block)
                    block = []
    if block:
        yield np.stack(block)


def stream_frames(video: str | os.PathLike, fps: float = 2.0, max_side: int | None = 384,
                  start: float | None = None, end: float | None = None, *, pad_square: bool = False,
                  chunk: int = 32, sampling: str = "grid",
                  ffmpeg_rule: str = "7") -> Iterator[tuple[float, np.ndarray]]:
    """Yield ``(timestamp, frame uint8 [H, W, 3])`` in time order, decoding ``chunk`` frames at a time."""
    check_sampling(sampling)
    check_ffmpeg_rule(ffmpeg_rule)
    info = probe(video)
    times, idx = frame_plan(info, fps, start, end, sampling, ffmpeg_rule)
    size = output_size(info.width, info.height, max_side)
    pos = 0
    try:
        for block in _decode(info, idx, size, chunk):
            if pad_square and max_side:
                block = _pad(block, max_side)
            for fr in block:
                yield float(times[pos]), fr
                pos += 1
    except (VideoSpanError, FileNotFoundError):
        raise
    except Exception as err:
        raise _corrupt(info.path, err) from None


def read_frames(video: str | os.PathLike, fps: float = 2.0, max_side: int | None = 384,
                start: float | None = None, end: float | None = None, *,
                pad_square: bool = False, sampling: str = "grid",
                ffmpeg_rule: str = "7") -> tuple[np.ndarray, np.ndarray]:
    """All frames of [start, end] at ``fps``: (uint8 [T, H, W, 3] RGB, float64 [T] timestamps in s).

    ``ffmpeg_rule`` (with ``sampling="ffmpeg"``): the ffmpeg release whose ``-r`` frame choice to follow,
    :data:`FFMPEG_RULES` -- "7" (VideoLLM-online's pinned 7.0.1, the default) or "5.1" (Debian 12's)."""
    check_sampling(sampling)
    check_ffmpeg_rule(ffmpeg_rule)
    ts, frames = [], []
    for t, f in stream_frames(video, fps, max_side, start, end, pad_square=pad_square, sampling=sampling,
                              ffmpeg_rule=ffmpeg_rule):
        ts.append(t)
        frames.append(f)
    if not frames:
        raise VideoSpanError(f"{video}: no frames in span [{start}, {end}]")
    return np.stack(frames), np.asarray(ts, dtype=np.float64)
