"""COIN frames as VideoLLM-online's preprocessing writes them (``ffmpeg_once``: ``ffmpeg -i SRC -an -r 2 -vf
scale,pad DST``), with the system ffmpeg as the oracle, on lossless synthetic videos whose every frame carries its
index (docs/DECISIONS.md D59): the resampled length, the frame count and the source frame behind every output index
agree at 10, 24, 25, 29.97, 30 and 60 fps. ffmpeg is installed by ``make setup``; without it this test fails."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import av
import numpy as np
import pytest

from vrex_lib import coin, video

W, H, BITS = 64, 48, 12
#: (source rate as ffmpeg takes it, frames): a few seconds each, with lengths that end off the 2 fps grid
RATES = (("10", 53), ("24", 131), ("25", 100), ("30000/1001", 157), ("30", 91), ("60", 203))
#: VideoLLM-online's ffmpeg_once filter (data/utils.py) at resolution 64 instead of 384
VF = "scale='if(gt(iw\\,ih)\\,64\\,-2)':'if(gt(iw\\,ih)\\,-2\\,64)',pad=64:64:(ow-iw)/2:(oh-ih)/2:color='#000000'"


def _ffmpeg() -> str:
    exe = shutil.which("ffmpeg")
    if exe is None:
        pytest.fail("ffmpeg is not installed: it is the oracle of this test (make setup installs it: "
                    "apt-get install ffmpeg)")
    return exe


def _indexed_video(path: Path, rate: str, n: int) -> Path:
    """A lossless H.264 (qp 0, 4:4:4) mp4 whose frame i shows i in binary as 12 black/white 16x16 blocks."""
    frames = np.zeros((n, H, W), np.uint8)
    for i in range(n):
        for b in range(BITS):
            y, x = divmod(b, 4)
            frames[i, y * 16:(y + 1) * 16, x * 16:(x + 1) * 16] = 255 * ((i >> b) & 1)
    subprocess.run([_ffmpeg(), "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "gray", "-s", f"{W}x{H}", "-r", rate,
                    "-i", "-", "-c:v", "libx264", "-qp", "0", "-pix_fmt", "yuv444p", "-g", "12", str(path)],
                   input=frames.tobytes(), check=True)
    return path


def _index_of(frame: np.ndarray) -> int:
    g = frame if frame.ndim == 2 else frame[..., 0]
    return sum(int(g[(b // 4) * 16 + 8, (b % 4) * 16 + 8] > 127) << b for b in range(BITS))


def _oracle(src: Path, dst: Path) -> list[int]:
    """The source index behind every frame of ``ffmpeg_once(src, dst, fps=2, resolution=64)`` (lossless output)."""
    subprocess.run([_ffmpeg(), "-v", "error", "-y", "-i", str(src), "-an", "-r", "2", "-vf", VF, "-c:v", "libx264",
                    "-qp", "0", "-pix_fmt", "yuv444p", str(dst)], check=True)
    with av.open(str(dst)) as c:
        return [_index_of(f.to_ndarray(format="gray")[8:56]) for f in c.decode(c.streams.video[0])]


def _ffmpeg_rule() -> str:
    """Which of :data:`vrex_lib.video.FFMPEG_RULES` the system ffmpeg follows (by its major version)."""
    out = subprocess.run([_ffmpeg(), "-version"], capture_output=True, text=True, check=True).stdout
    m = re.match(r"ffmpeg version n?(\d+)", out)
    return "5.1" if m and int(m.group(1)) < 6 else "7"


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("indexed")
    out = {}
    for rate, n in RATES:
        src = _indexed_video(d / f"src{rate.replace('/', '_')}.mp4", rate, n)
        out[rate] = (src, _oracle(src, d / f"out{rate.replace('/', '_')}.mp4"))
    return out


@pytest.mark.parametrize("rate", [r for r, _ in RATES])
def test_frames_agree_with_ffmpeg_r2(videos, rate):
    src, ref = videos[rate]
    assert ref[:2] == [0, 1] and len(set(ref)) == len(ref)  # sanity of the oracle's decoding
    got = video.ffmpeg_cfr_map(video.packet_times(src), 2.0).tolist()
    assert got == ref  # frame count and the source frame behind every output index
    frames, ts = video.read_frames(src, fps=2.0, max_side=None, sampling="ffmpeg")
    assert [_index_of(f) for f in frames] == ref and ts.tolist() == [k / 2 for k in range(len(ref))]
    # the length spans are clamped to: VideoLLM-online's (len(frames) - 1) / fps of the 2 fps video
    assert coin.decoded_duration(src) == (len(ref) - 1) / 2
    # a span: output frames ceil(start*2) .. ceil(end*2) of the 2 fps video, as the COIN tasks index them
    r = coin.span_frame_range(1.2, 3.3, coin.decoded_duration(src))
    sub, _ = video.read_frames(src, fps=2.0, max_side=None, start=r.start / 2, end=(r.stop - 1) / 2,
                               sampling="ffmpeg")
    assert [_index_of(f) for f in sub] == ref[r.start:r.stop]


def test_the_grid_option_differs_from_ffmpeg(videos):
    """'grid' (nearest source frame to k/2 s, up to the last whole grid point) disagrees with ffmpeg on every video:
    this test would catch a loader that fell back to it."""
    for rate, (src, ref) in videos.items():
        grid = video.resampled_map(src, 2.0, "grid").tolist()
        assert grid != ref and len(grid) < len(ref) and grid[0] == ref[0]
        assert coin.decoded_duration(src, sampling="grid") < coin.decoded_duration(src)


def test_duplicates_below_the_output_rate(tmp_path):
    """A 1 fps source: ffmpeg repeats frames; the rule of the installed release (5.1 caps a frame's duration at one
    output frame, 7 does not) agrees with it, and the two releases' rules differ here."""
    src = _indexed_video(tmp_path / "slow.mp4", "1", 9)
    ref = _oracle(src, tmp_path / "out.mp4")
    t = video.packet_times(src)
    assert video.ffmpeg_cfr_map(t, 2.0, _ffmpeg_rule()).tolist() == ref
    assert video.ffmpeg_cfr_map(t, 2.0, "7").tolist() != video.ffmpeg_cfr_map(t, 2.0, "5.1").tolist()
    with pytest.raises(ValueError, match="unknown frame sampling 'nearest'"):
        video.read_frames(src, sampling="nearest")
