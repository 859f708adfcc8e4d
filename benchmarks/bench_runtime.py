"""Cost of the streaming runtime on this machine, all numbers measured in one run.

Part 1 streams the same frames + question through (a) a plain transformers forward per step with its own
DynamicCache and SDPA (no runtime), (b) the runtime with no policy (full attention through the registered
attention function and the KV store), (c) the runtime with each named retrieval policy. Prints seconds per frame
step and per decode step, and ``runtime_overhead_vs_plain`` = runtime/plain (the hook, the store, the accounting).

Part 2 is the ReSV step at long context (the speed target: a ``resv`` frame step costs <= 1.10x the
no-policy frame step at 1K cached tokens). A synthetic stream of frame embeddings (no video decode, see
:func:`synthetic_frame_stream`) is streamed with the ``resv`` policy, ``--chunk-frames`` frames per forward (the
token layout of frame-by-frame streaming; chunks keep the prefill affordable), up to each ``--kv`` length; a
no-policy session gets a copy of that KV cache. Then ``--steps`` frame steps (',' + 10 frame tokens, the same
embeddings for both) alternate between the no-policy session and the ``resv`` session (the order flips every step, so
drifting machine load hits both alike). Printed per length: median ms per step of each, and
``resv_step_overhead_vs_plain_<n>k`` = median(resv) / median(no policy); ``resv_step_overhead_vs_plain`` is the
largest of them. "plain" there is the runtime's no-policy step, the baseline of the speed target. After the timed
steps, ``--profile-steps`` more steps of each session run under cProfile and their time is printed by component
(HC-table update, prediction, attention bookkeeping, SDPA, the model's linear layers): where the overhead goes.
The first line is the machine calibration (:func:`vrex_lib.envcheck.calibration_line`).

    .venv/bin/python benchmarks/bench_runtime.py [--profile default] [--frames 30] [--methods resv rekv]
        [--kv 1000,10000] [--steps 12] [--skip-stream]

Cost on the shared 2-core machine (default profile, 1 thread): part 1 ~1 min, part 2 ~3-7 min with the load (dominated by the
prefill to 10K tokens). The last line is ``resv_step_overhead_vs_plain=<ratio>``.
"""
from __future__ import annotations

import argparse
import copy
import math
import os
import time

import numpy as np
import torch
from _profile import RESV_STEP_PARTS, breakdown, format_breakdown, profile, total_ms

from vrex_lib.config import PROFILES, RuntimeConfig, builds_from_folders
from vrex_lib.envcheck import calibration_line
from vrex_lib.runtime import DEFAULT_SYSTEM_PROMPT, StreamingSession, build_model
from vrex_lib.runtime.model import FRAME_TOKENS


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


def synthetic_frame_stream(model, seed: int = 0, rho: float = 0.98, noise: float = 0.3, cut_every: int = 60):
    """Endless synthetic frame embeddings ``[10, hidden]`` (no video decode): per token slot an AR(1) process
    (adjacent frames similar, drifting apart over ~1/(1−ρ) frames) plus per-frame noise, with a scene cut on
    average every ``cut_every`` frames that jumps to a new scene or back to an earlier one (procedures revisit
    views); scaled to the RMS of the LLM's text-embedding table, as the profile's frame tokens are."""
    from vrex_lib.runtime.model import FRAME_TOKENS

    g = torch.Generator().manual_seed(seed)
    emb_w = model.llm.get_input_embeddings().weight
    rms = float(emb_w.float().pow(2).mean().sqrt())
    shape = (FRAME_TOKENS, model.hidden_size)
    scenes = [torch.randn(shape, generator=g)]
    m = scenes[0].clone()
    c = math.sqrt(1.0 - rho * rho)
    while True:
        if float(torch.rand((), generator=g)) < 1.0 / cut_every:
            if len(scenes) > 1 and float(torch.rand((), generator=g)) < 0.5:
                m = scenes[int(torch.randint(len(scenes), (), generator=g))].clone()  # revisit
            else:
                m = torch.randn(shape, generator=g)
                scenes.append(m.clone())
        m = rho * m + c * torch.randn(shape, generator=g)
        yield ((m + noise * torch.randn(shape, generator=g)) * (rms / math.sqrt(1 + noise * noise))).to(model.dtype)


def prefill_to(sess, frames, n_tokens: int, chunk_frames: int) -> None:
    """Stream frames into ``sess`` until it holds >= ``n_tokens``, ``chunk_frames`` frames per forward (the token
    layout of frame-by-frame streaming: ',' interval token + 10 frame tokens each)."""
    model = sess.model
    comma = model.embed_text(model.encode(",")).to(model.dtype)
    per_frame = FRAME_TOKENS + comma.shape[0]
    while sess.n_tokens < n_tokens:
        k = max(1, min(chunk_frames, -(-(n_tokens - sess.n_tokens) // per_frame)))
        parts = [next(frames)]
        for _ in range(k - 1):
            parts += [comma, next(frames)]
        sess.add_frame_embeds(torch.cat(parts, 0))


def copy_without_policy(src, cfg):
    """A no-policy session holding a copy of ``src``'s KV cache and stream layout."""
    dst = StreamingSession(src.model, None, cfg)
    dst.store = copy.deepcopy(src.store)
    dst.n_sink, dst.frame_starts, dst._last_role = src.n_sink, list(src.frame_starts), src._last_role
    return dst


def resv_step_ratios(model, kv_points: list[int], steps: int, chunk_frames: int, seed: int = 0,
                     profile_steps: int = 4):
    """Interleaved no-policy vs ``resv`` frame steps at each cache length (see the module docstring); one
    ``resv`` stream is grown through the lengths in increasing order. Yields one dict per length."""
    from vrex_lib.retrieval import make_policy

    cfg = RuntimeConfig()
    frames = synthetic_frame_stream(model, seed)
    resv = StreamingSession(model, make_policy("resv"), cfg)
    resv.add_system_prompt(DEFAULT_SYSTEM_PROMPT)
    for n_tokens in sorted(kv_points):
        t0 = time.perf_counter()
        prefill_to(resv, frames, n_tokens, chunk_frames)
        t_prefill = time.perf_counter() - t0
        plain = copy_without_policy(resv, cfg)
        n0 = resv.n_tokens
        n_steps0 = len(resv.stats)
        times = {"plain": [], "resv": []}
        for i in range(steps + 1):  # step 0 warms both up (first reuse bookkeeping, buffer growth): not timed
            e = next(frames)
            order = (("plain", plain), ("resv", resv)) if i % 2 == 0 else (("resv", resv), ("plain", plain))
            for name, sess in order:
                t = time.perf_counter()
                sess.add_frame_embeds(e)
                if i:
                    times[name].append(time.perf_counter() - t)
        prof = {}
        for name, sess in (("plain", plain), ("resv", resv)):
            if profile_steps:
                st = profile(lambda: sess.add_frame_embeds(next(frames)), profile_steps)
                prof[name] = (breakdown(st, RESV_STEP_PARTS, profile_steps), total_ms(st, profile_steps))
        tab = [t for t in resv.policy.tables[model.n_layers // 2:] if t is not None]
        timed = resv.stats[n_steps0 + 1:]  # per-step records of the timed resv steps
        n_sel = sum(float(r["selected"][r["applied"]].sum()) for r in timed)
        n_cand = sum(float(r["applied"].sum()) * r["selected"].shape[1] * r["n_candidates"] for r in timed)
        med_p, med_r = float(np.median(times["plain"])), float(np.median(times["resv"]))
        yield dict(tokens=n0, target=n_tokens, plain_ms=med_p * 1e3, resv_ms=med_r * 1e3, ratio=med_r / med_p,
                   plain_mean_ms=float(np.mean(times["plain"])) * 1e3,
                   resv_mean_ms=float(np.mean(times["resv"])) * 1e3,
                   clusters_per_head=float(np.mean([t.n_clusters.double().mean() for t in tab])),
                   tokens_per_cluster=float(np.mean([t.tokens_per_cluster() for t in tab])),
                   selected_frac=n_sel / max(n_cand, 1.0),
                   prefill_s=t_prefill, profile=prof)


def main() -> None:
    ap = argparse.ArgumentParser()
    # the profiles whose model builds here, without the user's checkpoint folders
    ap.add_argument("--profile", default="default", choices=[p for p in PROFILES if not builds_from_folders(p)])
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--methods", nargs="*", default=["resv", "rekv", "infinigen_p"])
    ap.add_argument("--kv", default="1000,10000", help="cached-token counts of the interleaved resv step check")
    ap.add_argument("--steps", type=int, default=12, help="interleaved frame steps per method and length")
    ap.add_argument("--chunk-frames", type=int, default=40, help="frames per forward of the prefill")
    ap.add_argument("--profile-steps", type=int, default=4, help="frame steps per session profiled after timing")
    ap.add_argument("--skip-stream", action="store_true", help="only part 2 (the resv step check)")
    a = ap.parse_args()
    try:
        kv_points = [int(x) for x in a.kv.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--kv {a.kv!r}: give comma-separated token counts, e.g. --kv 1000,10000") from None
    if not kv_points or min(kv_points) < 200 or a.steps < 1:
        raise SystemExit("--kv needs token counts >= 200 and --steps >= 1")
    torch.set_num_threads(a.threads)
    print(calibration_line(), flush=True)
    model = build_model(a.profile, dtype=getattr(torch, a.dtype))
    if not a.skip_stream:
        stream_part(a, model)
    print(f"resv step check: {a.steps} interleaved frame steps per length, {a.threads} thread(s), "
          f"{os.cpu_count()} CPUs, load average before {os.getloadavg()[0]:.1f}")
    ratios = {}
    for r in resv_step_ratios(model, kv_points, a.steps, a.chunk_frames, profile_steps=a.profile_steps):
        ratios[r["target"]] = r["ratio"]
        print(f"  {r['tokens']:6d} tokens: no policy {r['plain_ms']:7.1f} ms/frame step "
              f"(mean {r['plain_mean_ms']:.1f}), "
              f"resv {r['resv_ms']:7.1f} ms (mean {r['resv_mean_ms']:.1f}), ratio {r['ratio']:.3f}; HC table "
              f"{r['clusters_per_head']:.0f} clusters/head, {r['tokens_per_cluster']:.1f} tokens/cluster "
              f"(layers >= L/2), "
              f"selected fraction of candidates {r['selected_frac']:.3f}; prefill {r['prefill_s']:.0f} s, "
              f"load average now {os.getloadavg()[0]:.1f}", flush=True)
        for name, (rows, tot) in r["profile"].items():
            print(format_breakdown(f"{name} frame step at {r['tokens']} tokens", rows, tot), flush=True)
    for n, v in ratios.items():
        print(f"resv_step_overhead_vs_plain_{n // 1000}k={v:.3f}" if n % 1000 == 0 else
              f"resv_step_overhead_vs_plain_{n}={v:.3f}")
    print(f"resv_step_overhead_vs_plain={max(ratios.values()):.3f}")


def stream_part(a, model) -> None:
    """Part 1: whole streams through bare transformers, the runtime without policy and with each method."""
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
