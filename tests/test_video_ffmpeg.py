"""COIN frames as VideoLLM-online's preprocessing writes them (``ffmpeg_once``: ``ffmpeg -i SRC -an -r 2 -vf
scale,pad DST``), with the system ffmpeg as the oracle, on lossless synthetic videos whose every frame carries its
index (docs/DECISIONS.md D59): the resampled length, the frame count and the source frame behind every output index
agree at 10, 24, 25, 29.97, 30 and 60 fps. ffmpeg is installed by ``make setup``; without it this test fails. Rule
"7" is checked against the ffmpeg 7.0.2 of the pinned imageio-ffmpeg (D500), which ``make setup`` installs too."""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from fractions import Fraction
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


def _oracle(src: Path, dst: Path, exe: str | None = None) -> list[int]:
    """The source index behind every frame of ``ffmpeg_once(src, dst, fps=2, resolution=64)`` (lossless output), as
    the ffmpeg ``exe`` writes it (the system ffmpeg by default)."""
    subprocess.run([exe or _ffmpeg(), "-v", "error", "-y", "-i", str(src), "-an", "-r", "2", "-vf", VF, "-c:v",
                    "libx264", "-qp", "0", "-pix_fmt", "yuv444p", str(dst)], check=True)
    with av.open(str(dst)) as c:
        return [_index_of(f.to_ndarray(format="gray")[8:56]) for f in c.decode(c.streams.video[0])]


def _ffmpeg_rule(exe: str | None = None) -> str:
    """Which of :data:`vrex_lib.video.FFMPEG_RULES` the ffmpeg ``exe`` (the system one by default) follows (by its
    major version)."""
    out = subprocess.run([exe or _ffmpeg(), "-version"], capture_output=True, text=True, check=True).stdout
    m = re.match(r"ffmpeg version n?(\d+)", out)
    return "5.1" if m and int(m.group(1)) < 6 else "7"


#: The ffmpeg 7 that rule "7" is checked against: the static ffmpeg 7.0.2 that imageio-ffmpeg 0.6.0 (pinned in
#: environment.yml) ships as package data, found by ``imageio_ffmpeg.get_ffmpeg_exe()``.
FFMPEG7 = ("imageio-ffmpeg", "0.6.0", "7.0.2")


def _ffmpeg7() -> str:
    """The pinned ffmpeg 7 binary; fails (never skips) naming the fix when the pinned package is absent or gives
    another ffmpeg (``get_ffmpeg_exe`` falls back to $IMAGEIO_FFMPEG_EXE or the system ffmpeg)."""
    pkg, version, release = FFMPEG7
    fix = f"install the pinned test dependency: make setup (environment.yml: {pkg}=={version})"
    try:
        import imageio_ffmpeg
    except ImportError:
        pytest.fail(f"{pkg} is not installed: its ffmpeg {release} is the oracle of ffmpeg rule '7'; {fix}")
    if imageio_ffmpeg.__version__ != version:
        pytest.fail(f"{pkg} {imageio_ffmpeg.__version__} is installed, the oracle needs {version}; {fix}")
    exe = imageio_ffmpeg.get_ffmpeg_exe()
    out = subprocess.run([exe, "-version"], capture_output=True, text=True, check=True).stdout
    if not re.match(rf"ffmpeg version n?{re.escape(release)}\b", out):
        pytest.fail(f"{exe} is not ffmpeg {release} ({out.splitlines()[0]}); unset IMAGEIO_FFMPEG_EXE and {fix}")
    return exe


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


#: Variable-frame-rate sources: (frames, setpts expression) re-timing a 25 fps indexed video -- accelerating gaps,
#: a jittered cadence, and dense frames followed by a sparse tail (gaps of 0.04 s to 1.2 s).
VFR = (("accelerating", 60, "N*N*0.02/TB"), ("jitter", 40, "(N+0.3*mod(N,3))*0.08/TB"),
       ("dense-then-sparse", 50, "if(lt(N,20),N*0.04,0.8+(N-20)*0.5)/TB"))


def _vfr_video(d: Path, name: str, n: int, expr: str) -> Path:
    """An indexed 25 fps video re-timed by ``setpts=expr`` and written with variable frame rate (lossless)."""
    cfr = _indexed_video(d / f"{name}_cfr.mp4", "25", n)
    out = d / f"{name}.mp4"
    subprocess.run([_ffmpeg(), "-v", "error", "-y", "-i", str(cfr), "-vf", f"setpts='{expr}'", "-vsync", "vfr",
                    "-c:v", "libx264", "-qp", "0", "-pix_fmt", "yuv444p", "-g", "12", str(out)], check=True)
    return out


@pytest.mark.parametrize("name,n,expr", VFR, ids=[v[0] for v in VFR])
def test_variable_frame_rate_sources_agree_with_the_installed_ffmpeg(tmp_path, name, n, expr):
    """D382: the rule of the installed release (5.1: every frame lasts one frame at the guessed rate under -vf; 7:
    each frame its own duration) gives the frames ffmpeg writes, on sources whose frame gaps vary."""
    if shutil.which("ffmpeg") is None:
        pytest.skip("ffmpeg is not installed: it is the oracle of this test (make setup installs it)")
    src = _vfr_video(tmp_path, name, n, expr)
    t = video.packet_times(src)
    gaps = np.diff(t.pts)
    assert gaps.max() > 1.5 * gaps.min(), "the source must be variable-frame-rate"
    ref = _oracle(src, tmp_path / "out.mp4")
    rule = _ffmpeg_rule()
    assert video.ffmpeg_cfr_map(t, 2.0, rule).tolist() == ref
    frames, ts = video.read_frames(src, fps=2.0, max_side=None, sampling="ffmpeg", ffmpeg_rule=rule)
    assert [_index_of(f) for f in frames] == ref and ts.tolist() == [k / 2 for k in range(len(ref))]
    # rule 7's premise: libavcodec gives every decoded frame its own packet's duration
    with av.open(str(src)) as c:
        decoded = sorted((int(f.pts), int(f.duration or 0)) for f in c.decode(c.streams.video[0]))
    assert decoded == list(zip(t.pts.tolist(), t.durations.tolist()))


@pytest.mark.parametrize("name,n,expr", VFR, ids=[v[0] for v in VFR])
def test_rule_7_agrees_with_ffmpeg_7_on_variable_frame_rate_sources(tmp_path, name, n, expr):
    """D382, D500: rule "7" gives the frames the pinned ffmpeg 7.0.2 writes (``-r 2 -vf scale,pad``), frame for
    frame, on the variable-frame-rate clips (made with the system ffmpeg), and a 1 fps source's repeated frames."""
    exe = _ffmpeg7()
    assert _ffmpeg_rule(exe) == "7"
    for src in (_vfr_video(tmp_path, name, n, expr), _indexed_video(tmp_path / "slow.mp4", "1", 9)):
        ref = _oracle(src, tmp_path / "out7.mp4", exe)
        assert ref[:1] == [0] and len(ref) > 2
        assert video.ffmpeg_cfr_map(video.packet_times(src), 2.0, "7").tolist() == ref
        frames, ts = video.read_frames(src, fps=2.0, max_side=None, sampling="ffmpeg", ffmpeg_rule="7")
        assert [_index_of(f) for f in frames] == ref and ts.tolist() == [k / 2 for k in range(len(ref))]


def test_frame_durations_by_release_by_hand():
    """sync_durations, in output frames at 2 fps, of 4 frames at 1/1000 s ticks, the last without a duration."""
    t = video.PacketTimes(np.array([0, 500, 1000, 2600]), np.array([500, 500, 1600, 0]), Fraction(1, 1000), 0,
                          None, Fraction(25))
    # 7: each frame its own duration; the one without gets a frame at the guessed rate (40 ticks = 0.08)
    assert video.sync_durations(t, 2.0, "7").tolist() == pytest.approx([1.0, 1.0, 3.2, 0.08])
    # 5.1 with -vf: every frame one frame at the guessed rate, capped at one output frame
    assert video.sync_durations(t, 2.0, "5.1").tolist() == pytest.approx([0.08] * 4)
    assert video.sync_durations(replace(t, guessed_rate=Fraction(1)), 2.0, "5.1").tolist() == [1.0] * 4
    # no guessed rate: no fallback, the frame passes with duration 0 (7) / every frame 0 (5.1)
    unknown = replace(t, guessed_rate=None)
    assert video.sync_durations(unknown, 2.0, "7").tolist() == pytest.approx([1.0, 1.0, 3.2, 0.0])
    assert video.sync_durations(unknown, 2.0, "5.1").tolist() == [0.0] * 4


def test_the_rule_is_checked_before_any_file_is_read(tmp_path):
    for call in (lambda: video.read_frames(tmp_path / "absent.mp4", sampling="ffmpeg", ffmpeg_rule="6"),
                 lambda: next(video.stream_frames(tmp_path / "absent.mp4", ffmpeg_rule="6")),
                 lambda: video.resampled_count(tmp_path / "absent.mp4", 2.0, ffmpeg_rule="6.0")):
        with pytest.raises(ValueError, match="unknown ffmpeg rule '6.*': choose one of 7, 5.1"):
            call()


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
