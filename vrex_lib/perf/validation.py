"""The hardware model beside published measurements of the same devices (INFO rows; nothing here is fitted).

* **DRAM**: the bank-level model's stream rates (x the GPU memory pipeline's measured share) beside GPU STREAM-type
  kernels on an A100-80GB (gpu-benches: read, write-only, copy) and an A800 copy, and the Jetson guide's expected
  GPU STREAM range;
* **decode**: simulated batch-1 decode of Llama-2-7B / Llama-3.1-8B (method ``full``, nothing offloaded) on the
  A100 and the AGX Orin with the software stack the measurement used -- gpt-fast's compiled graph in CUDA graphs
  (kernel counts from its Inductor trace, each kernel's fixed start-up from gpu-benches), eager PyTorch, Hugging Face
  eager (its own call and kernel counts, its host time measured beside eager gpt-fast's) -- beside published
  end-to-end tokens/s;
* **attainable bandwidth**: what a tuned int4 decode on the Orin implies about its sustained LPDDR5 bandwidth.

Each :data:`MEASUREMENTS` row names the source, the table or section, the framework and the precision; rows marked
``unverified`` were read from a secondary source. ``kind``: 'value' (ratio = ours / measured), 'range' (an
expected interval: ratio = ours / its nearest end, 1 inside it), 'lower-bound' (ratio = ours / bound, >= 1 holds).

    validation_frame()     # DataFrame: key, quantity, measured, simulated, ratio, kind, source
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pandas as pd

from . import dram as _dram
from .constants import const
from .model_ops import LLAMA3_8B, LLMSpec
from .sim import simulate
from .systems import a100, agx_orin

#: gpt-fast's benchmarks: a 5-token prompt and its default 200 new tokens, attention over the whole static cache.
GPTFAST_STATIC_KV = 205
#: Jetson AI Lab's huggingface-benchmark.py: 128 new tokens on a short prompt, a growing cache (its mean).
HF_MEAN_KV = 5 + 64

#: Llama-2-7B (Touvron et al. 2023; the public config: 32 layers, hidden 4096, 32 heads, no GQA, FFN 11008,
#: vocab 32000).
LLAMA2_7B = LLMSpec(n_layers=32, hidden=4096, n_q_heads=32, n_kv_heads=32, head_dim=128, ffn=11008, vocab=32000)

#: NVIDIA A100 80GB SXM data sheet: 2,039 GB/s (the gpt-fast runs used SXM boards; Table I's A100 is 1,935 GB/s).
A100_SXM_DRAM_BPS = 2039e9


@dataclass(frozen=True)
class Measurement:
    key: str
    value: float
    unit: str
    device: str
    framework: str
    precision: str
    source: str
    unverified: bool = False
    kind: str = "value"
    low: float = float("nan")


_GPUBENCH = "te42kyfo/gpu-benches @1c36d50 gpu-stream/a100_80.txt (A100-SXM4-80GB, 2039 GB/s; 1024-thread blocks, "

MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement("a800.copy_gbs", 1727.5, "GB/s", "A800 80GB PCIe (GA100, HBM2e 1935 GB/s)", "PyTorch copy",
                "fp32", "github.com/mli/transformers-benchmarks issue #4 (2023): memory-bandwidth test, 4 Mi-element "
                "copy"),
    Measurement("a100.gpubench.read_gbs", 1769, "GB/s", "A100-SXM4-80GB", "CUDA read kernel", "fp64",
                _GPUBENCH + "100 % occupancy): read column"),
    Measurement("a100.gpubench.init_gbs", 1880, "GB/s", "A100-SXM4-80GB", "CUDA write-only kernel", "fp64",
                _GPUBENCH + "100 % occupancy): init column"),
    Measurement("a100.gpubench.scale_gbs", 1732, "GB/s", "A100-SXM4-80GB", "CUDA copy-type kernel (a = s b)", "fp64",
                _GPUBENCH + "100 % occupancy): scale column, bytes read + written"),
    Measurement("agx_orin.stream_frac_range", 0.80, "fraction", "Jetson AGX Orin (LPDDR5 204.8 GB/s)",
                "CUDA STREAM-like copy/triad", "fp32", "jetsonhacks/jetson-mem-bench docs/GUIDE.md §7: 'Solo vs "
                "Theoretical: expect 60-80%' -- an expectation, not a measurement (the range 0.6-0.8)", True,
                kind="range", low=0.60),
    Measurement("a100.gptfast.llama2_7b_tok_s", 104.9, "tok/s", "A100-80GB SXM, power-limited 330 W",
                "gpt-fast (torch.compile, CUDA graphs)", "bf16", "pytorch-labs/gpt-fast README @32971d3, "
                "'Benchmarks' table: Llama-2-7B Base, batch 1, 5-token prompt"),
    Measurement("a100.gptfast.llama31_8b_tok_s", 93.89, "tok/s", "A100-80GB SXM, power-limited 330 W",
                "gpt-fast (torch.compile, CUDA graphs)", "bf16", "pytorch-labs/gpt-fast README @32971d3, "
                "'Benchmarks' table: Llama-3.1-8B Base, batch 1"),
    Measurement("a100.eager.llama_7b_tok_s", 25.5, "tok/s", "A100-80GB, power-limited 330 W", "eager PyTorch "
                "(gpt-fast starting point)", "bf16", "pytorch.org/blog/accelerating-generative-ai-2 (2023), "
                "'Starting Point (25.5 tok/s)'; it defines stack.eager_host_op_s, so its row is by construction"),
    Measurement("agx_orin.hf.llama2_7b_tok_s", 6.2, "tok/s", "Jetson (AGX Orin per the site's benchmarks page; "
                "the module is not named on this page)", "HuggingFace Transformers generate (eager)", "fp16",
                "NVIDIA-AI-IOT/jetson-generative-ai-playground docs/tutorial_api-examples.md 'Benchmarks': "
                "meta-llama/Llama-2-7b-chat-hf 6.2 tokens/sec (huggingface-benchmark.py: 128 new tokens)", True),
    Measurement("agx_orin.mlc.llama2_7b_tok_s", 47.0, "tok/s", "Jetson AGX Orin 64GB, MAX-N", "MLC/TVM", "int4 "
                "(q4f16_ft)", "dusty-nv/jetson-containers issue #532 (2024-05): the Jetson AI Lab benchmark's "
                "Llama-2-7B figure, AGX Orin 64GB in MAX-N per the maintainer", True, kind="lower-bound"),
)

_BY_KEY = {m.key: m for m in MEASUREMENTS}


def measurement(key: str) -> Measurement:
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no published measurement {key!r}; known: {', '.join(sorted(_BY_KEY))}") from None


def decode_tok_s(system: str, llm: LLMSpec, *, stack: str, kv_len: int) -> float:
    """Simulated batch-1 decode tokens/s of ``llm`` on 'a100' (SXM bandwidth) or 'agx_orin', nothing offloaded, with
    GPU software ``stack`` ('compiled', 'eager', 'hf_eager'; :data:`vrex_lib.perf.model_ops.STACK_COUNTS`) and
    ``kv_len`` cached tokens attended."""
    if system not in ("a100", "agx_orin"):
        raise ValueError(f"decode_tok_s: system {system!r} must be 'a100' or 'agx_orin'")
    s = a100(stack=stack) if system == "a100" else agx_orin(stack=stack)
    if system == "a100":
        s = dataclasses.replace(s, dram_bw=A100_SXM_DRAM_BPS)
    r = simulate(s, "full", "text", kv_len, 1, workload="paper", llm=llm, include_vision=False)
    return 1000.0 / r.latency_ms


def gpu_stream_gbs(kind: str, peak_bps: float = A100_SXM_DRAM_BPS) -> float:
    """The A100's simulated GB/s of a STREAM-type kernel ('read', 'write', 'copy'): the HBM2e model's stream rates
    with the GPU's write batch, x the GPU memory pipeline's share (``a100.mem_side_eff``)."""
    t = _dram.timing("hbm2e", peak_bps, int(const("hbm2e.bus_bits")), const("gpu.write_batch"))
    r = _dram.stream_efficiency(t).total
    w = _dram.stream_efficiency(t, write=True).total
    eff = {"read": r, "write": w, "copy": 2.0 / (1.0 / r + 1.0 / w)}[kind]
    return peak_bps * eff * const("a100.mem_side_eff") / 1e9


def _ratio(m: Measurement, measured: float, simulated: float) -> float:
    if m.kind == "range":
        return simulated / min(max(simulated, m.low), measured)
    return simulated / measured


def _row(key: str, quantity: str, unit: str, measured: float, simulated: float, src: Measurement, note: str) -> dict:
    return dict(key=key, quantity=quantity, unit=unit, measured=measured, simulated=simulated,
                ratio=_ratio(src, measured, simulated), kind=src.kind, device=src.device, framework=src.framework,
                precision=src.precision, source=src.source, unverified=src.unverified, note=note)


def _dram_rows() -> list[dict]:
    rows = []
    for key, kind, what in (("a100.gpubench.read_gbs", "read", "read"), ("a100.gpubench.init_gbs", "write", "write-only"),
                            ("a100.gpubench.scale_gbs", "copy", "copy")):
        m = measurement(key)
        rows.append(_row(f"dram.hbm2e.gpu_{kind}", f"A100-80GB {what} stream", "GB/s", m.value, gpu_stream_gbs(kind), m,
                         "HBM2e model x a100.mem_side_eff (0.893, gpt-fast's 1700 GB/s), GPU write batch unbounded"))
    m = measurement("a800.copy_gbs")
    rows.append(_row("dram.hbm2e.copy", "HBM2e copy bandwidth (A800, 1935 GB/s)", "GB/s", m.value,
                     gpu_stream_gbs("copy", 1935e9), m, "as above at the A800's 1935 GB/s"))
    m = measurement("agx_orin.stream_frac_range")
    lp5 = _dram.timing("lpddr5", 204.8e9, int(const("lpddr5.bus_bits")), const("gpu.write_batch"))
    rows.append(_row("dram.lpddr5.copy", "LPDDR5 copy, share of 204.8 GB/s (GPU)", "fraction", m.value,
                     _dram.copy_efficiency(lp5) * const("agx_orin.mem_side_eff"), m,
                     "the measured side is the guide's expected range 0.6-0.8"))
    return rows


#: The published decode runs whose DRAM share bounds the decode-rate efficiency choice (docs/DECISIONS.md D424):
#: key -> (measurement, model, bytes per parameter, attended tokens, peak B/s).
DECODE_SHARE_RUNS = {"lpddr5.mlc_int4.Llama-2-7B": ("agx_orin.mlc.llama2_7b_tok_s", LLAMA2_7B, 0.5, 0, 204.8e9),
                     "hbm2e.gptfast.Llama-2-7B": ("a100.gptfast.llama2_7b_tok_s", LLAMA2_7B, 2.0, GPTFAST_STATIC_KV,
                                                  A100_SXM_DRAM_BPS),
                     "hbm2e.gptfast.Llama-3.1-8B": ("a100.gptfast.llama31_8b_tok_s", LLAMA3_8B, 2.0,
                                                    GPTFAST_STATIC_KV, A100_SXM_DRAM_BPS)}


def decode_dram_shares() -> dict[str, float]:
    """The share of the DRAM peak each published decode run of :data:`DECODE_SHARE_RUNS` sustains: tok/s x (weights +
    the KV it attends) / peak. Kernel start-ups and host time are inside the measured step, so each is a lower bound
    of the DRAM's own share (the int4 one counts no scales or KV either)."""
    out = {}
    for key, (mkey, llm, bpp, kv, peak) in DECODE_SHARE_RUNS.items():
        per_token = llm.params * bpp + kv * llm.kv_bytes_per_token
        out[key] = measurement(mkey).value * per_token / peak
    return out


def _decode_share_rows() -> list[dict]:
    """The HBM2e decode shares beside the model's long-stream share (lower-bound rows; the LPDDR5 one is
    ``dram.lpddr5.attainable``)."""
    t = _dram.timing("hbm2e", A100_SXM_DRAM_BPS, int(const("hbm2e.bus_bits")), const("gpu.write_batch"))
    model = _dram.stream_efficiency(t).total * const("a100.mem_side_eff")
    rows = []
    for key, share in decode_dram_shares().items():
        if key.startswith("hbm2e"):
            m = dataclasses.replace(measurement(DECODE_SHARE_RUNS[key][0]), kind="lower-bound")
            rows.append(_row(f"dram.{key}.decode_share", f"HBM2e share a bf16 decode sustains on A100 ({key.split('.')[-1]}"
                             ", lower bound)", "fraction", share, model, m, "measured side = tok/s x (bf16 weights + "
                             "attended KV) / 2039 GB/s, kernel start-ups inside; simulated = the HBM2e model's long read "
                             "stream x a100.mem_side_eff"))
    return rows


def validation_frame() -> pd.DataFrame:
    """One row per check: measured, simulated, ratio (see the module docstring for ``kind``)."""
    rows = _dram_rows() + _decode_share_rows()
    for key, llm, name in (("a100.gptfast.llama2_7b_tok_s", LLAMA2_7B, "Llama-2-7B"),
                           ("a100.gptfast.llama31_8b_tok_s", LLAMA3_8B, "Llama-3.1-8B")):
        m = measurement(key)
        rows.append(_row(f"decode.a100.graphs.{name}", f"{name} decode on A100, gpt-fast compiled (CUDA graphs)",
                         "tok/s", m.value, decode_tok_s("a100", llm, stack="compiled", kv_len=GPTFAST_STATIC_KV), m,
                         "A100 SXM 2039 GB/s; Inductor kernel counts x gpu-benches start-up + DRAM model"))
    m = measurement("a100.eager.llama_7b_tok_s")
    rows.append(_row("decode.a100.eager.Llama-2-7B", "Llama-7B decode on A100, eager host", "tok/s", m.value,
                     decode_tok_s("a100", LLAMA2_7B, stack="eager", kv_len=GPTFAST_STATIC_KV), m,
                     "by construction: this point sets stack.eager_host_op_s"))
    m = measurement("agx_orin.hf.llama2_7b_tok_s")
    rows.append(_row("decode.agx_orin.hf_eager.Llama-2-7B", "Llama-2-7B decode on AGX Orin, Hugging Face eager",
                     "tok/s", m.value, decode_tok_s("agx_orin", LLAMA2_7B, stack="hf_eager", kv_len=HF_MEAN_KV), m,
                     "held out: HF 4.35 kernel counts; host time = HF's measured share of gpt-fast's eager host time "
                     "(D247) x Orin host slowdown; shared LPDDR5 model"))
    m = measurement("agx_orin.mlc.llama2_7b_tok_s")
    implied = m.value * LLAMA2_7B.params * 0.5 / 204.8e9  # int4 weights alone: a lower bound
    lp5 = _dram.timing("lpddr5", 204.8e9, int(const("lpddr5.bus_bits")))
    rows.append(_row("dram.lpddr5.attainable", "LPDDR5 share an int4 decode sustains on AGX Orin (lower bound)",
                     "fraction", implied, _dram.stream_efficiency(lp5).total * const("agx_orin.mem_side_eff"), m,
                     "measured side = tok/s x 0.5 B/param / 204.8 GB/s (scales and KV not counted)"))
    return pd.DataFrame(rows)
