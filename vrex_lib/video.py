"""Decode video frames at a fixed rate (2 fps for COIN) for the streaming runtime.

    frames, ts = read_frames("videos/abc.mp4", fps=2.0, max_side=384, start=60.0, end=69.0)
    # frames: uint8 [T, H, W, 3] RGB, longer side <= max_side; ts: float64 [T] seconds of the decoded frames
    for t, frame in stream_frames("videos/abc.mp4"):   # time order, bounded memory
        ...

Which frames: the requested times are the ``fps`` grid ``k / fps`` for
``k = ceil(start·fps) .. ceil(end·fps)`` (the COIN span rule, :func:`vrex_lib.coin.span_frame_range`),
clamped to the last decodable frame; each is served by the source frame whose timestamp is nearest, so
returned timestamps are within half a source-frame interval of the request (and always within half a
``fps`` interval). Frames are resized on decode so the longer side is ``max_side`` (never upscaled);
``pad_square=True`` zero-pads to ``max_side × max_side`` like VideoLLM-online's preprocessing.

decord decodes; if decord cannot be imported PyAV is used instead (one warning says so).
"""
from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_BACKEND: str | None = None


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
    last = info.last_time
    s = 0.0 if start is None else float(start)
    e = last if end is None else float(end)
    if s < 0 or e < s:
        raise VideoSpanError(f"{info.path}: span [{s}, {e}] is reversed or negative")
    k_last = math.floor(last * fps + 1e-6)  # last grid point that has a decoded frame at or before it
    k0 = math.ceil(s * fps - 1e-9)
    if k0 > k_last + 1:  # more than one grid step past the last frame: the span is not in this video
        raise VideoSpanError(f"{info.path}: span starts at {s:.2f} s but the video ends at {last:.2f} s. "
                             "Check the annotation's segment/duration against the file (wrong or truncated video?).")
    k1 = min(math.ceil(e * fps - 1e-9), k_last)
    k0 = min(k0, k_last)
    return np.arange(k0, k1 + 1, dtype=np.float64) / fps


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
                  chunk: int = 32) -> Iterator[tuple[float, np.ndarray]]:
    """Yield ``(timestamp, frame uint8 [H, W, 3])`` in time order, decoding ``chunk`` frames at a time."""
    info = probe(video)
    times = request_times(info, fps, start, end)
    idx = _nearest_indices(info.timestamps, times)
    size = output_size(info.width, info.height, max_side)
    pos = 0
    try:
        for block in _decode(info, idx, size, chunk):
            if pad_square and max_side:
                block = _pad(block, max_side)
            for fr in block:
                yield float(info.timestamps[idx[pos]]), fr
                pos += 1
    except (VideoSpanError, FileNotFoundError):
        raise
    except Exception as err:
        raise _corrupt(info.path, err) from None


def read_frames(video: str | os.PathLike, fps: float = 2.0, max_side: int | None = 384,
                start: float | None = None, end: float | None = None, *,
                pad_square: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """All frames of [start, end] at ``fps``: (uint8 [T, H, W, 3] RGB, float64 [T] timestamps in s)."""
    ts, frames = [], []
    for t, f in stream_frames(video, fps, max_side, start, end, pad_square=pad_square):
        ts.append(t)
        frames.append(f)
    if not frames:
        raise VideoSpanError(f"{video}: no frames in span [{start}, {end}]")
    return np.stack(frames), np.asarray(ts, dtype=np.float64)
