"""Where a profile's COIN data lives and which annotated videos have a file."""
from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import video
from ..config import REPO_ROOT, profile_config
from .annotations import SkipLog, VideoAnnotation, split_videos
from .tasks import FRAME_FPS, FRAME_SAMPLING, Sample


_VIDEO_EXTS = (".mp4", ".webm", ".mkv", ".avi", ".mov")


class MissingVideoError(FileNotFoundError):
    """An annotated video has no file in the videos folder."""


def video_path(videos_dir: str | os.PathLike, video_id: str) -> Path:
    """``videos_dir/<video_id>.mp4`` (or .webm/.mkv/.avi/.mov); a clear error when none exists or the entry is not
    a regular file (a FIFO or a device would block the decoder forever, a folder cannot be decoded)."""
    d = Path(videos_dir)
    for ext in _VIDEO_EXTS:
        p = d / f"{video_id}{ext}"
        if p.is_file():
            return p
        if p.exists():
            raise MissingVideoError(f"video {video_id!r}: {p} is not a regular file (a folder, FIFO or device); put "
                                    "the video file itself there, or drop the video from the run")
    raise MissingVideoError(f"video {video_id!r}: no file {d}/{video_id}{{{','.join(_VIDEO_EXTS)}}}. Download it "
                            "(VideoLLM-online data/coin/download_videos.py) or drop it from the run; "
                            "filter_available(...) skips and counts such videos.")


def available_ids(annotations: Mapping[str, VideoAnnotation], videos_dir: str | os.PathLike,
                  skip_log: SkipLog | None = None, split: str | None = None) -> set[str]:
    """Ids (of ``split``, or all) whose video file exists; each missing one is recorded once in ``skip_log``."""
    vids = annotations if split is None else split_videos(annotations, split)
    out = set()
    for v in vids:
        try:
            video_path(videos_dir, v)
            out.add(v)
        except MissingVideoError as err:
            if skip_log is not None:
                skip_log.add(v, "video file", str(err))
    return out


def filter_available(samples: Sequence[Sample], videos_dir: str | os.PathLike,
                     skip_log: SkipLog) -> list[Sample]:
    """Keep samples whose video file exists; record each missing video once in ``skip_log``."""
    seen: dict[str, bool] = {}
    out = []
    for s in samples:
        if s.video_id not in seen:
            try:
                video_path(videos_dir, s.video_id)
                seen[s.video_id] = True
            except MissingVideoError as err:
                seen[s.video_id] = False
                skip_log.add(s.video_id, "video file", str(err))
        if seen[s.video_id]:
            out.append(s)
    return out


def decoded_duration(path: str | os.PathLike, fps: float = FRAME_FPS, sampling: str = FRAME_SAMPLING) -> float:
    """The length VideoLLM-online clamps a video's spans to: ``(len(frames) - 1) / fps`` of its ``fps`` frames
    (``COIN.get_metadata``, data/coin/coin.py). ``sampling="ffmpeg"`` (default): the frames ffmpeg's ``-r fps``
    writes (:func:`vrex_lib.video.resampled_count`, from the container's packet timestamps, no frame decoded);
    ``"grid"``: ``k_last / fps`` for the last grid point ``k_last`` with a decoded frame at or before it. A video
    that cannot be opened raises :class:`vrex_lib.video.VideoDecodeError` naming the file (docs/DECISIONS.md D59)."""
    if sampling == "grid":
        info = video.probe(path)
        return math.floor(info.last_time * fps + 1e-6) / fps
    return (video.resampled_count(path, fps, sampling) - 1) / fps


def dataset_paths(profile: str, coin_root: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """(COIN.json, videos folder) of a profile.

    smoke:   ``data/coin_tiny`` (hand-written JSON, tiny real-footage videos committed with it).
    default: ``data/coin_mini`` built by ``make data`` (``python data/make_coin_mini.py``).
    full:    the user's folder ``coin_root`` laid out as ``COIN.json`` (the official file, any name
             matching ``COIN.json``/``coin.json``) and ``videos/<youtube_id>.mp4``.
    """
    data = profile_config(profile).data  # an unknown profile is an error naming the profiles
    if data.root is not None:
        root = REPO_ROOT / data.root
        need = root / data.must_exist
        if not need.exists():
            raise FileNotFoundError(f"{need} is missing: {data.missing_hint}.")
    else:
        if not coin_root:
            raise ValueError(f"profile {profile!r} needs coin_root: a folder holding COIN.json and videos/<id>.mp4")
        root = Path(coin_root).expanduser()
        if not root.is_dir():
            raise FileNotFoundError(f"coin_root {root} is not a folder (expected COIN.json + videos/)")
    js = next((root / n for n in ("COIN.json", "coin.json") if (root / n).exists()), root / "COIN.json")
    if not js.exists():
        raise FileNotFoundError(f"{js} not found: put the official COIN.json in {root}")
    vids = root / "videos"
    if not vids.is_dir():
        raise FileNotFoundError(f"{vids} not found: put the videos as {vids}/<youtube_id>.mp4")
    return js, vids
