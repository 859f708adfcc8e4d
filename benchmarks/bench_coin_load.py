#!/usr/bin/env python3
"""Time loading a full-size COIN.json (11,827 videos) and building all five tasks for both splits.

Target: annotations alone load in < 5 s. The file is synthetic but COIN-shaped (180 task
classes, 3.91 steps per video on average, ~2.4 min videos, the real ~3:1 training/testing split), written
to a temporary folder. Last line: ``coin_load_11k_seconds=<s>`` (load + all five tasks, both splits).

    .venv/bin/python benchmarks/bench_coin_load.py
"""
from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

from vrex_lib import coin

N_VIDEOS, N_CLASSES, SEED = 11_827, 180, 0


def synthetic_coin(n: int = N_VIDEOS, seed: int = SEED) -> dict:
    rng = random.Random(seed)
    classes = [f"Task{c:03d}ReplaceSSDPart" for c in range(N_CLASSES)]
    steps = {c: [f"step {k} of task {c} with some words" for k in range(rng.randint(4, 10))] for c in classes}
    db = {}
    for i in range(n):
        cls = rng.choice(classes)
        duration = round(rng.uniform(30, 260), 2)
        k = min(len(steps[cls]), max(1, round(rng.gauss(3.91, 1.5))))
        labels = [steps[cls][j] for j in sorted(rng.sample(range(len(steps[cls])), k))]
        t, anns = rng.uniform(0, 10), []
        for j, lab in enumerate(labels):
            length = rng.uniform(3, 25)
            if t + length > duration:
                break
            anns.append({"id": str(j), "segment": [round(t, 1), round(t + length, 1)], "label": lab})
            t += length + rng.uniform(0, 8)
        if not anns:
            anns.append({"id": "0", "segment": [0.0, round(duration / 2, 1)], "label": labels[0]})
        db[f"{i:011d}"] = {"recipe_type": classes.index(cls), "class": cls,
                           "subset": "testing" if rng.random() < 0.24 else "training",
                           "video_url": "", "start": anns[0]["segment"][0], "end": anns[-1]["segment"][1],
                           "duration": duration, "annotation": anns}
    return {"database": db}


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "COIN.json"
        p.write_text(json.dumps(synthetic_coin()))
        mb = p.stat().st_size / 1e6
        t0 = time.perf_counter()
        ann = coin.load_annotations(p)
        t1 = time.perf_counter()
        counts = {(t, s): len(coin.build_task(ann, t, s)) for s in ("training", "testing") for t in coin.TASKS}
        t2 = time.perf_counter()
    n_steps = sum(len(a.steps) for a in ann.values())
    print(f"videos={len(ann)} steps={n_steps} json_mb={mb:.1f}")
    print("samples " + " ".join(f"{t}/{s}={n}" for (t, s), n in counts.items()))
    print(f"load_seconds={t1 - t0:.3f} build_five_tasks_both_splits_seconds={t2 - t1:.3f}")
    print(f"coin_load_11k_seconds={t2 - t0:.3f}")


if __name__ == "__main__":
    main()
