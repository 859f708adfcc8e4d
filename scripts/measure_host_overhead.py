"""Host time of one batch-1 decode step: Hugging Face transformers' eager ``generate()`` against gpt-fast's eager
``Transformer``, on this machine's CPU, with models so small that the step time is the framework's own overhead.

    python -W ignore scripts/measure_host_overhead.py --gpt-fast DIR [--reps 21] [--layers 1 2 3 4] [--json OUT]

Versions (a scratch environment, not the repository's; nothing here is a test or library dependency): Python 3.11,
torch 2.13.0 (CPU wheel), transformers 4.35.2 (tokenizers 0.15.2), and a checkout of pytorch-labs/gpt-fast at
32971d3 (``git clone https://github.com/pytorch-labs/gpt-fast DIR && git -C DIR checkout 32971d3``). Nothing is
downloaded: both models are built from tiny configurations with random weights. The recorded result
(``vrex_lib/perf/constants.py`` ``stack.hf_eager_host_layer_x`` 0.640 and ``stack.hf_eager_host_fixed_x`` 1.23)
is this command's defaults on one thread of an Intel Xeon KVM guest (family 6 model 167), 2026-12-02.

What is timed, for each layer count:

* **Hugging Face**: ``LlamaForCausalLM.generate(input_ids, do_sample=False, min_new_tokens=128,
  max_new_tokens=128)`` -- the call of the Jetson AI Lab benchmark (dusty-nv/jetson-containers
  packages/llm/transformers/huggingface-benchmark.py: greedy, a short prompt, 128 new tokens, no attention mask
  passed); a decode step is generate()'s per-token work (logits processors, stopping criteria, the attention-mask
  and input-id concatenation), the 4D mask LlamaModel prepares and the eager layers with their past-KV
  concatenation;
* **gpt-fast**: its own ``generate.decode_n_tokens`` (the eager starting point of pytorch.org/blog/
  accelerating-generative-ai-2: ``model.py`` uncompiled, sampling with generate.py's defaults temperature 0.8 and
  top-k 200, a static KV cache of prompt + 200 tokens) over 128 tokens after the prefill.

Each step is timed by a clock read once per token through each library's own per-token hook (a
``StoppingCriteria`` for generate(), ``decode_n_tokens``' ``callback``); a run's step time is the median of its
steps after the first 16, so a burst of another process on the machine moves one step, not the result.

Each repeat times both stacks at every layer count within seconds of each other. Per stack, the median over the
repeats of each layer count's step time, fitted by least squares to ``t(L) = fixed + L x per_layer``, separates the
decoder layers' host time from the step's fixed part; the ratios Hugging Face / gpt-fast of both are the measured
result (a property of the two code bases, taken to transfer to another host: docs/DECISIONS.md D247). A run that
another process overlaps is slowed as a whole (up to 2x on a shared machine), hence the median over repeats.
Dispatched aten calls per step (the whole decode step, generate()'s bookkeeping included) are counted with
``TorchDispatchMode`` beside the times. Two cross-checks are printed: the median of the ratios fitted within each
repeat (``per_repeat``), and the fit over each (stack, layer count)'s fastest run (``fastest_runs``: contention
only ever adds time).

Single-threaded (``torch.set_num_threads(1)``), fp16 weights for Hugging Face and bf16 for gpt-fast as in their
benchmarks; hidden 64, 4 heads (MHA), FFN 128, vocabulary 512, so each kernel's own work is a few hundred FLOPs.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import types
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

HIDDEN, HEADS, FFN, VOCAB = 64, 4, 128, 512
PROMPT = 6  # "Once upon a time," with BOS under the Llama-2 tokenizer
N_NEW, SKIP = 128, 16
GPTFAST_NEW = 200  # generate.py's default max_new_tokens sizes the static cache


def _gpt_fast(path: Path):
    """gpt-fast's ``model`` and ``generate`` modules from a checkout; its tokenizer module (sentencepiece, tiktoken)
    is not needed for timing and is replaced by an empty one."""
    sys.path.insert(0, str(path))
    sys.modules.setdefault("tokenizer", types.SimpleNamespace(get_tokenizer=None))
    import generate as gf_generate  # noqa: E402
    import model as gf_model  # noqa: E402
    return gf_model, gf_generate


def hf_model(n_layers: int):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=n_layers,
                      num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=512,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).to(torch.float16).eval()


def gf_setup(gf_model, n_layers: int):
    torch.manual_seed(0)
    m = gf_model.Transformer(gf_model.ModelArgs(block_size=512, vocab_size=VOCAB, n_layer=n_layers, n_head=HEADS,
                                                dim=HIDDEN, intermediate_size=FFN))
    m = m.to(torch.bfloat16).eval()
    with torch.no_grad():
        m.setup_caches(max_batch_size=1, max_seq_length=PROMPT + GPTFAST_NEW)
    return m


class _Clock:
    """Reads the clock once per token; ``step_s()``: the median step after the first ``SKIP``."""

    def __init__(self):
        self.t: list[float] = []

    def __call__(self, *_args, **_kwargs) -> bool:
        self.t.append(time.perf_counter())
        return False  # as a StoppingCriteria: never stop

    def step_s(self) -> float:
        d = [b - a for a, b in zip(self.t, self.t[1:])]
        return statistics.median(d[SKIP:])


def hf_generate(m, ids, n: int, clock=None) -> None:
    from transformers import StoppingCriteriaList
    m.generate(ids, do_sample=False, min_new_tokens=n, max_new_tokens=n,
               stopping_criteria=StoppingCriteriaList([clock]) if clock else None)


def gf_decode(gf_generate, m, n: int, clock=None) -> None:
    prompt = torch.arange(1, PROMPT + 1, dtype=torch.int).view(1, -1)
    with torch.no_grad():
        tok = gf_generate.prefill(m, prompt, torch.arange(0, PROMPT), temperature=0.8, top_k=200).clone()
        pos = torch.tensor([PROMPT], dtype=torch.int)
        gf_generate.decode_n_tokens(m, tok.view(1, -1), pos, n, callback=clock or (lambda _: _),
                                    temperature=0.8, top_k=200)


def _step_s(run, *args) -> float:
    clock = _Clock()
    run(*args, N_NEW, clock)
    return clock.step_s()


class _Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def _count(fn) -> int:
    with _Count() as c:
        fn()
    return c.n


def _cpu() -> str:
    """The CPU's model name as the kernel reports it (Linux), else the platform's word for it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _fit(layers: list[int], t: list[float]) -> tuple[float, float]:
    """Least squares t = a + b L: (a fixed, b per layer)."""
    mx, my = statistics.fmean(layers), statistics.fmean(t)
    b = sum((x - mx) * (y - my) for x, y in zip(layers, t)) / sum((x - mx) ** 2 for x in layers)
    return my - b * mx, b


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpt-fast", type=Path, required=True, help="checkout of pytorch-labs/gpt-fast @32971d3")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--json", type=Path, help="write the result here")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    import transformers
    gf_model, gf_generate = _gpt_fast(a.gpt_fast)
    ids = torch.arange(1, PROMPT + 1).view(1, -1)
    hf = {L: hf_model(L) for L in a.layers}
    gf = {L: gf_setup(gf_model, L) for L in a.layers}

    # Dispatched aten calls of one whole decode step (difference of two run lengths), layers 1 and 3.
    counts = {}
    for L in (1, 3):
        mh, mg = hf_model(L), gf_setup(gf_model, L)
        counts[L] = dict(hf=_count(lambda: hf_generate(mh, ids, 3)) - _count(lambda: hf_generate(mh, ids, 2)),
                         gf=_count(lambda: gf_decode(gf_generate, mg, 3))
                         - _count(lambda: gf_decode(gf_generate, mg, 2)))
    per_layer = {s: (counts[3][s] - counts[1][s]) / 2 for s in ("hf", "gf")}
    calls = {s: dict(per_layer=per_layer[s], fixed=counts[1][s] - per_layer[s]) for s in ("hf", "gf")}

    for L in a.layers:  # warm-up, not kept: allocator, dispatcher caches
        _step_s(hf_generate, hf[L], ids)
        _step_s(gf_decode, gf_generate, gf[L])
    reps = []
    for r in range(a.reps):
        step = {"hf": {}, "gf": {}}
        for L in (a.layers if r % 2 == 0 else a.layers[::-1]):
            step["hf"][L] = _step_s(hf_generate, hf[L], ids)
            step["gf"][L] = _step_s(gf_decode, gf_generate, gf[L])
        fit = {s: _fit(a.layers, [step[s][L] for L in a.layers]) for s in ("hf", "gf")}
        reps.append(dict(step_s=step, fixed_s={s: fit[s][0] for s in fit}, per_layer_s={s: fit[s][1] for s in fit},
                         layer_ratio=fit["hf"][1] / fit["gf"][1], fixed_ratio=fit["hf"][0] / fit["gf"][0]))
        print(f"rep {r}: per layer HF {fit['hf'][1] * 1e6:.1f} us, gpt-fast {fit['gf'][1] * 1e6:.1f} us "
              f"(x{reps[-1]['layer_ratio']:.3f}); fixed HF {fit['hf'][0] * 1e6:.1f} us, gpt-fast "
              f"{fit['gf'][0] * 1e6:.1f} us (x{reps[-1]['fixed_ratio']:.3f})", flush=True)

    med = statistics.median
    # The result: each (stack, layer count)'s median run over the repeats, then the line.
    fit = {s: _fit(a.layers, [med(r["step_s"][s][L] for r in reps) for L in a.layers]) for s in ("hf", "gf")}
    # Cross-checks: the median of the per-repeat ratios, and the fastest run of each cell (contention only adds).
    best = {s: _fit(a.layers, [min(r["step_s"][s][L] for r in reps) for L in a.layers]) for s in ("hf", "gf")}
    out = dict(
        versions=dict(python=platform.python_version(), torch=torch.__version__,
                      transformers=transformers.__version__, gpt_fast="32971d3 (the checkout passed)"),
        cpu=_cpu(), date=time.strftime("%Y-%m-%d"),
        layers=a.layers, reps=a.reps, aten_calls_per_step=calls,
        per_layer_s={s: fit[s][1] for s in fit}, fixed_s={s: fit[s][0] for s in fit},
        layer_ratio=fit["hf"][1] / fit["gf"][1], fixed_ratio=fit["hf"][0] / fit["gf"][0],
        per_repeat=dict(layer_ratio=med(r["layer_ratio"] for r in reps),
                        fixed_ratio=med(r["fixed_ratio"] for r in reps)),
        fastest_runs=dict(per_layer_s={s: best[s][1] for s in best}, fixed_s={s: best[s][0] for s in best},
                          layer_ratio=best["hf"][1] / best["gf"][1], fixed_ratio=best["hf"][0] / best["gf"][0]),
        repeats=reps)
    print(json.dumps({k: v for k, v in out.items() if k != "repeats"}, indent=1))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
