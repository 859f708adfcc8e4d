"""Cross-check ``vrex_lib.coin.score`` against VideoLLM-online's own ``compute_metrics`` on random predictions.

    python scripts/crosscheck_coin_metric.py /path/to/videollm-online [COIN.json ...]

Reads ``data/coin/benchmarks.py`` from a local clone of showlab/videollm-online (nothing is copied into this
repository), runs its ``COINBenchmark.compute_metrics`` / ``COINProcedure.compute_metrics`` with stand-ins for the
dataset classes and the tokenizer (predictions are passed as decoded strings), and asserts that
``coin.score(..., metric="videollm-online")`` agrees within 1e-6 on predictions with every quirk (case, dots,
numbering, blank lines, one-line answers, near misses). Levenshtein distance: the ``Levenshtein`` package when
installed, else rapidfuzz's (the same unit-cost edit distance).
"""
import random
import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vrex_lib import coin  # noqa: E402

if len(sys.argv) < 2 or not (Path(sys.argv[1]) / "data" / "coin" / "benchmarks.py").is_file():
    raise SystemExit("usage: python scripts/crosscheck_coin_metric.py /path/to/videollm-online-clone [COIN.json ...]")
src = (Path(sys.argv[1]) / "data" / "coin" / "benchmarks.py").read_text()
FILES = sys.argv[2:] or ["data/coin_tiny/COIN.json", "data/coin_mini/COIN.json"]
src = src.replace("from .coin import COIN", "class COIN: pass").replace("from ..stream import StreamMixIn", "class StreamMixIn: pass") \
         .replace("from ..utils import ceil_time_by_fps, DictWithTo", "DictWithTo = dict; ceil_time_by_fps = None")
try:
    import Levenshtein  # noqa
except ImportError:
    from rapidfuzz.distance import Levenshtein as _L
    sys.modules["Levenshtein"] = types.SimpleNamespace(distance=_L.distance)
ns = {}
exec(compile(src, "benchmarks.py", "exec"), ns)

class Tok:
    bos_token_id = 0
    def batch_decode(self, preds, **kw):
        return list(preds)

class EP:
    def __init__(self, p, i):
        self.predictions, self.label_ids = p, i

class Arr(list):
    def __lt__(self, o):
        return np.zeros(len(self), bool)
    def __setitem__(self, k, v):
        if isinstance(k, np.ndarray):
            return
        super().__setitem__(k, v)

rng = random.Random(0)
worst = 0
for path in FILES:
    ann = coin.load_annotations(path)
    for task in coin.TASKS:
        samples = coin.build_task(ann, task, "testing")
        if not samples:
            continue
        vocab = list(samples[0].vocab)
        allcats = list({c for s in samples for c in s.categories})
        for trial in range(30):
            preds = []
            for s in samples:
                kind = rng.random()
                lines = []
                for k, t in enumerate(s.targets if rng.random() < 0.8 else rng.sample(allcats, min(3, len(allcats)))):
                    x = t if rng.random() < 0.6 else rng.choice(allcats)
                    if rng.random() < 0.3: x = x.lower()
                    if rng.random() < 0.3: x = x.rstrip(".")
                    if rng.random() < 0.2: x = x[: max(1, len(x) - rng.randint(1, 5))] + "z"
                    if rng.random() < 0.5 and task in coin.PROCEDURE_TASKS: x = f"{k + 1}. {x}"
                    if rng.random() < 0.1: x = " " + x
                    lines.append(x)
                    if rng.random() < 0.1: lines.append("")
                if rng.random() < 0.2: lines = lines[:1]
                if rng.random() < 0.05: lines = [""]
                preds.append("\n".join(lines) if task in coin.PROCEDURE_TASKS else (lines[0] if kind < 0.9 else "\n".join(lines)))
            ours = coin.score(task, preds, samples)
            self_ = types.SimpleNamespace(categories=vocab)
            if task in coin.PROCEDURE_TASKS:
                self_.labels = [np.array(list(s.labels)) for s in samples]
                self_.fuzzy_match = ns["COINBenchmark"].fuzzy_match
                ref = ns["COINProcedure"].compute_metrics(self_, EP(Arr(preds), list(range(len(samples)))), Tok())["accuracy"]
            else:
                self_.labels = np.array([s.labels[0] for s in samples])
                self_.fuzzy_match = ns["COINBenchmark"].fuzzy_match
                ref = ns["COINBenchmark"].compute_metrics(self_, EP(Arr(preds), np.arange(len(samples))), Tok())["accuracy"]
            worst = max(worst, abs(ours - ref))
            assert abs(ours - ref) < 1e-6, (path, task, trial, ours, ref)
print("max |ours - reference| =", worst)
