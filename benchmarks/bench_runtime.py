"""Cost of the streaming runtime on this machine, all numbers measured in one run.

Streams the same frames + question through (a) a plain transformers forward per step with its own
DynamicCache and SDPA (no runtime), (b) the runtime with no policy (full attention through the registered
attention function and the KV store), (c) the runtime with each named retrieval policy. Prints seconds per frame
step and per decode step, and the ratio runtime/plain (the overhead of the hook, the store and the accounting).

    .venv/bin/python benchmarks/bench_runtime.py [--profile default] [--frames 30] [--methods resv rekv]

The last line is ``runtime_overhead_vs_plain=<ratio>``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from vrex_lib.config import RuntimeConfig
from vrex_lib.runtime import DEFAULT_SYSTEM_PROMPT, StreamingSession, build_model


def plain_stream(model, inputs: list[torch.Tensor]) -> tuple[float, list[float]]:
    """Feed the same per-step embeddings through the bare LLM (SDPA, DynamicCache); per-step seconds."""
    from transformers import DynamicCache

    model.llm.set_attn_implementation("sdpa")
    cache = DynamicCache(config=model.llm.config)
    times = []
    with torch.inference_mode():
        for x in inputs:
            t0 = time.perf_counter()
            model.llm(inputs_embeds=x[None], cache=cache, use_cache=True, logits_to_keep=1)
            times.append(time.perf_counter() - t0)
    model.llm.set_attn_implementation("vrex")
    return sum(times), times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="default", choices=("smoke", "default"))
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--methods", nargs="*", default=["resv", "rekv", "infinigen_p"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = build_model(a.profile, dtype=getattr(torch, a.dtype))
    frames = np.random.default_rng(0).integers(0, 256, (a.frames, 224, 224, 3), dtype=np.uint8)
    emb = model.embed_frames(frames)

    def stream(policy):
        s = StreamingSession(model, policy, RuntimeConfig(record_inputs=True))
        s.add_system_prompt(DEFAULT_SYSTEM_PROMPT)
        for i in range(emb.shape[0]):
            s.add_frame_embeds(emb[i])
        s.ask("What is the action in the video?", max_new_tokens=a.new_tokens)
        return s

    stream(None)  # warm-up
    base = stream(None)
    tr = base.trace()
    plain_total, plain_steps = plain_stream(model, base.inputs)
    rt_total = float(tr["wall_s"].sum())
    fm, dm = tr.step_mask("frame"), tr.step_mask(kind="decode")
    print(f"model {model.name} ({a.dtype}), {a.frames} frames, {base.n_tokens} tokens, {a.threads} thread(s)")
    print(f"plain transformers : {np.mean(np.asarray(plain_steps)[fm]) * 1e3:7.1f} ms/frame step  "
          f"{np.mean(np.asarray(plain_steps)[dm]) * 1e3:7.1f} ms/decode step  total {plain_total:.2f} s")
    print(f"runtime, no policy : {tr['wall_s'][fm].mean() * 1e3:7.1f} ms/frame step  "
          f"{tr['wall_s'][dm].mean() * 1e3:7.1f} ms/decode step  total {rt_total:.2f} s")
    from vrex_lib.retrieval import make_policy

    for m in a.methods:
        t = stream(make_policy(m)).trace()
        print(f"runtime, {m:<11s}: {t['wall_s'][t.step_mask('frame')].mean() * 1e3:7.1f} ms/frame step  "
              f"{t['wall_s'][t.step_mask(kind='decode')].mean() * 1e3:7.1f} ms/decode step  total "
              f"{t['wall_s'].sum():.2f} s  ratio frame {t.retrieval_ratio('frame'):.3f} text "
              f"{t.retrieval_ratio('text'):.3f}")
    print(f"runtime_overhead_vs_plain={rt_total / plain_total:.3f}")


if __name__ == "__main__":
    main()
