"""The full-profile runtime on a CUDA machine at Llama-3-8B shapes with random weights (nothing downloads): build,
stream frames, answer, the ReSV frame step against the no-policy step, and a short COIN evaluation. Run by
scripts/gpu_check.sh (usage there); ``--tiny`` runs the same code at tiny shapes (CPU, CI).

Every figure is one ``name=value`` line (a reviewer compares them across machines):
``build_s``, ``gpu_mem_gib``, ``frame_step_ms.<method>@<kv>`` (median ms of one frame step: vision + 11-token
prefill), ``tpot_ms.<method>@<kv>`` (ms per generated token), ``resv_step_vs_full@<kv>`` (ReSV's frame step over
the no-policy one, interleaved), ``eval_s_per_sample``, ``eval_s_per_frame`` and ``eval_results`` (a results file
for ``python -m vrex_lib.eval plan --timing``).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import torch  # noqa: E402

#: Llama-3-8B-Instruct (meta-llama/Meta-Llama-3-8B-Instruct config.json) and SigLIP-L/16-384's vision tower.
LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                 num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0,
                 rms_norm_eps=1e-5)
SIGLIP_L = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                image_size=384, patch_size=16)
TINY_SIGLIP = dict(hidden_size=32, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2, image_size=64,
                   patch_size=16)


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scripts/gpu_check.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny shapes (CPU, seconds): the same code paths")
    p.add_argument("--device", default=None, help="default: cuda (cpu with --tiny)")
    p.add_argument("--kv", default="1000,4000", help="context lengths (tokens) of the runtime timings")
    p.add_argument("--steps", type=int, default=8, help="timed frame steps per method and length")
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--eval-samples", type=int, default=4)
    p.add_argument("--out", default=str(REPO / "results" / "gpu_check"))
    p.add_argument("--dry-run", action="store_true", help="print what would run, load nothing")
    a = p.parse_args(argv)
    a.device = a.device or ("cpu" if a.tiny else "cuda")
    a.kv = _positive_ints("--kv", a.kv, "context lengths in tokens, e.g. --kv 1000,4000")
    for flag, v in (("--steps", a.steps), ("--new-tokens", a.new_tokens), ("--eval-samples", a.eval_samples)):
        if v < 1:
            default = p.get_default(flag[2:].replace("-", "_"))
            raise ValueError(f"{flag} {v}: must be a whole number >= 1 (the default is {default})")
    out = Path(a.out)
    blocker = next((x for x in (out, *out.parents) if x.exists() and not x.is_dir()), None)
    if blocker is not None:
        raise ValueError(f"--out {a.out}: {blocker} is a file, not a folder; pass a folder for the results "
                         "(e.g. --out results/gpu_check)")
    return a


def _positive_ints(flag: str, text: str, what: str) -> list[int]:
    items = [x.strip() for x in text.split(",")]
    if not all(x.isdigit() and int(x) >= 1 for x in items):
        raise ValueError(f"{flag} {text!r}: give {what} (whole numbers >= 1, comma-separated)")
    return [int(x) for x in items]


def _wide_tokenizer(vocab_size: int):
    """The byte tokenizer over Llama-3's vocabulary size: a random model may emit any of its 128,256 ids."""
    from vrex_lib.runtime.model import ByteTokenizer

    class WideByteTokenizer(ByteTokenizer):
        def decode(self, ids, skip_special_tokens: bool = True) -> str:
            return bytes((int(i) - 3) % 256 for i in ids if int(i) >= 3).decode("utf-8", errors="replace")

    tok = WideByteTokenizer()
    tok.vocab_size = vocab_size
    return tok


def build(a) -> object:
    """A random StreamingVideoLLM at Llama-3-8B / SigLIP-L shapes (or tiny ones) on ``a.device``, bf16 on CUDA."""
    from transformers import LlamaConfig, LlamaForCausalLM, SiglipVisionConfig, SiglipVisionModel

    from vrex_lib.llm_weights import tiny_llama_config
    from vrex_lib.runtime.attention import ATTN_IMPL, register
    from vrex_lib.runtime.model import ByteTokenizer, StreamingVideoLLM, make_connector

    register()
    dtype = torch.bfloat16 if a.device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    tok = ByteTokenizer() if a.tiny else _wide_tokenizer(LLAMA3_8B["vocab_size"])
    cfg = tiny_llama_config(vocab_size=tok.vocab_size) if a.tiny else LlamaConfig(**LLAMA3_8B)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # initialise in the run dtype on the device: no 32 GB fp32 copy
    try:
        with torch.device(a.device):
            llm = LlamaForCausalLM(cfg).eval()
            vision = SiglipVisionModel(SiglipVisionConfig(**(TINY_SIGLIP if a.tiny else SIGLIP_L))).eval()
            conn = make_connector(vision.config.hidden_size, cfg.hidden_size)
    finally:
        torch.set_default_dtype(old)
    llm.set_attn_implementation(ATTN_IMPL)
    name = "random-tiny" if a.tiny else "random-llama3-8b-shapes"
    m = StreamingVideoLLM(llm, tok, vision, conn, name, int(vision.config.image_size))
    for mod in (m.llm, m.vision, m.connector):
        mod.requires_grad_(False)
    return m


def _session_at(model, method: str, kv: int):
    """A session of ``method`` holding about ``kv`` tokens of random frames (prefilled 16 frames per call)."""
    from vrex_lib.config import RuntimeConfig
    from vrex_lib.retrieval import make_policy
    from vrex_lib.runtime import StreamingSession

    s = StreamingSession(model, None if method == "none" else make_policy(method), RuntimeConfig())
    s.add_system_prompt("You are a helpful assistant.")
    rng = np.random.default_rng(0)
    side = model.image_size
    while s.n_tokens < kv:
        s.add_frames(rng.integers(0, 256, (16, side, side, 3), dtype=np.uint8))
    return s, rng


def _sync(model) -> None:
    if model.device.type == "cuda":
        torch.cuda.synchronize(model.device)


def runtime_figures(model, a) -> None:
    """Frame-step and per-token times of the no-policy runtime and of ReSV, interleaved step by step."""
    for kv in a.kv:
        sess = {m: _session_at(model, m, kv) for m in ("none", "resv")}
        times = {m: [] for m in sess}
        side = model.image_size
        for i in range(a.steps):
            for m in (("none", "resv") if i % 2 == 0 else ("resv", "none")):
                s, rng = sess[m]
                frame = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
                _sync(model)
                t0 = time.perf_counter()
                s.add_frame(frame)
                _sync(model)
                times[m].append(time.perf_counter() - t0)
        med = {m: statistics.median(v) * 1e3 for m, v in times.items()}
        for m, label in (("none", "full"), ("resv", "resv")):
            print(f"frame_step_ms.{label}@{kv}={med[m]:.2f}")
            s, _ = sess[m]
            _sync(model)
            t0 = time.perf_counter()
            s.ask("What is happening?", max_new_tokens=a.new_tokens)
            _sync(model)
            n = max(1, len(s.last_answer["ids"]))
            print(f"tpot_ms.{label}@{kv}={(time.perf_counter() - t0) * 1e3 / n:.2f}")
        print(f"resv_step_vs_full@{kv}={med['resv'] / med['none']:.3f}")
        print(f"resv_frame_ratio@{kv}={sess['resv'][0].trace().retrieval_ratio('frame'):.4f}")


def eval_figures(model, a) -> None:
    """A short COIN evaluation (full profile's runner, the repository's tiny COIN-format data) of full and ReSV."""
    from vrex_lib import eval as ev

    out = Path(a.out)
    total_s = frames = n = 0
    for method in ("full", "resv"):
        path = ev.run_eval("step", method, "full", out / "eval" / method / "step.jsonl",
                           coin_root=str(REPO / "data" / "coin_tiny"), model=model, max_samples=a.eval_samples,
                           max_new_tokens=8, reference=None, progress=False)
        for r in ev.read_jsonl(path):
            total_s += r["timing_s"]["total"]
            frames += max(r["n_frames"], 1)
            n += 1
        print(f"eval_results.{method}={path}")
    print(f"eval_s_per_sample={total_s / n:.3f}")
    print(f"eval_s_per_frame={total_s / frames:.4f}")


def main(argv=None) -> int:
    try:  # every argument checked before anything is built or written
        a = parse(argv)
    except ValueError as err:
        print(f"gpu_check: {err}", file=sys.stderr)
        return 2
    shapes = "tiny" if a.tiny else "Llama-3-8B (32 x 4096, 8 KV heads) + SigLIP-L/384, random weights"
    print(f"# gpu_check: {shapes} on {a.device}; kv {a.kv}, {a.steps} steps, eval {a.eval_samples} samples "
          f"-> {a.out}")
    if a.dry_run:
        print("# dry run: would build the model, time frame steps and tokens (full, resv) at each kv, then run "
              "python -m vrex_lib.eval's runner on data/coin_tiny (methods full, resv)")
        return 0
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_check: --device cuda but torch sees no CUDA device (a CPU build of torch? install the CUDA "
              "wheel, or run with --tiny --device cpu)", file=sys.stderr)
        return 2
    torch.set_num_threads(1 if a.tiny else torch.get_num_threads())
    t0 = time.perf_counter()
    model = build(a)
    print(f"build_s={time.perf_counter() - t0:.2f}")
    if model.device.type == "cuda":
        print(f"gpu_mem_gib={torch.cuda.memory_allocated(model.device) / 2**30:.2f}")
    runtime_figures(model, a)
    eval_figures(model, a)
    if model.device.type == "cuda":
        print(f"gpu_peak_mem_gib={torch.cuda.max_memory_allocated(model.device) / 2**30:.2f}")
    timing = Path(a.out) / "eval" / "resv" / "step.jsonl"
    print(f"# next: python -m vrex_lib.eval plan --coin-root $COIN --timing {timing}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
