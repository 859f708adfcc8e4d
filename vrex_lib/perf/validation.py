"""The hardware model beside published measurements of the same devices (INFO rows; nothing here is fitted).

* **DRAM**: the bank-level model's copy efficiency (:func:`vrex_lib.perf.dram.copy_efficiency`) beside a measured
  A800 copy and the Jetson guide's expected GPU STREAM range;
* **decode**: simulated batch-1 decode of Llama-2-7B / Llama-3.1-8B (method ``full``, nothing offloaded) on the
  A100 and the AGX Orin, with the software stack the measurement used (eager host calls, or none for CUDA graphs),
  beside published end-to-end tokens/s;
* **attainable bandwidth**: what a tuned int4 decode on the Orin implies about its sustained LPDDR5 bandwidth.

Each :data:`MEASUREMENTS` row names the source, the table or section, the framework and the precision; rows marked
``unverified`` were read from a secondary source.

    validation_frame()     # DataFrame: key, quantity, measured, simulated, ratio (simulated / measured), source
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


MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement("a800.copy_gbs", 1727.5, "GB/s", "A800 80GB PCIe (GA100, HBM2e 1935 GB/s)", "PyTorch copy",
                "fp32", "github.com/mli/transformers-benchmarks issue #4 (2023): memory-bandwidth test, 4 Mi-element "
                "copy"),
    Measurement("agx_orin.stream_frac_range", 0.70, "fraction", "Jetson AGX Orin (LPDDR5 204.8 GB/s)",
                "CUDA STREAM-like copy/triad", "fp32", "jetsonhacks/jetson-mem-bench docs/GUIDE.md §7: 'Solo vs "
                "Theoretical: expect 60-80%' -- an expectation, not a measurement (midpoint shown)", True),
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
                "Llama-2-7B figure, AGX Orin 64GB in MAX-N per the maintainer", True),
)

_BY_KEY = {m.key: m for m in MEASUREMENTS}


def measurement(key: str) -> Measurement:
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no published measurement {key!r}; known: {', '.join(sorted(_BY_KEY))}") from None


def decode_tok_s(system: str, llm: LLMSpec, *, host_stack: bool, kv_len: int = 69) -> float:
    """Simulated batch-1 decode tokens/s of ``llm`` on 'a100' (SXM bandwidth) or 'agx_orin', nothing offloaded;
    ``host_stack`` False = CUDA graphs (no host calls). ``kv_len``: a 5-token prompt + half of 128 new tokens."""
    if system not in ("a100", "agx_orin"):
        raise ValueError(f"decode_tok_s: system {system!r} must be 'a100' or 'agx_orin'")
    s = a100() if system == "a100" else agx_orin()
    if system == "a100":
        s = dataclasses.replace(s, dram_bw=A100_SXM_DRAM_BPS)
    if not host_stack:
        s = dataclasses.replace(s, host_op_s=0.0)
    r = simulate(s, "full", "text", kv_len, 1, workload="paper", llm=llm, include_vision=False)
    return 1000.0 / r.latency_ms


def _row(key: str, quantity: str, unit: str, measured: float, simulated: float, src: Measurement, note: str) -> dict:
    return dict(key=key, quantity=quantity, unit=unit, measured=measured, simulated=simulated,
                ratio=simulated / measured, device=src.device, framework=src.framework, precision=src.precision,
                source=src.source, unverified=src.unverified, note=note)


def validation_frame() -> pd.DataFrame:
    """One row per check: measured, simulated, ratio = simulated / measured."""
    rows = []
    hbm = _dram.timing("hbm2e", 1935e9, int(const("hbm2e.bus_bits")))
    lp5 = _dram.timing("lpddr5", 204.8e9, int(const("lpddr5.bus_bits")))
    m = measurement("a800.copy_gbs")
    rows.append(_row("dram.hbm2e.copy", "HBM2e copy bandwidth", "GB/s", m.value,
                     1935 * _dram.copy_efficiency(hbm), m, "DRAM model: refresh + write turnaround (DRAMsim3 drain)"))
    m = measurement("agx_orin.stream_frac_range")
    rows.append(_row("dram.lpddr5.copy", "LPDDR5 copy, share of 204.8 GB/s", "fraction", m.value,
                     _dram.copy_efficiency(lp5), m, "the measured side is the guide's expected range"))
    for key, llm, name in (("a100.gptfast.llama2_7b_tok_s", LLAMA2_7B, "Llama-2-7B"),
                           ("a100.gptfast.llama31_8b_tok_s", LLAMA3_8B, "Llama-3.1-8B")):
        m = measurement(key)
        rows.append(_row(f"decode.a100.graphs.{name}", f"{name} decode on A100, no host calls", "tok/s", m.value,
                         decode_tok_s("a100", llm, host_stack=False), m, "A100 SXM 2039 GB/s; roofline + DRAM model"))
    m = measurement("a100.eager.llama_7b_tok_s")
    rows.append(_row("decode.a100.eager.Llama-2-7B", "Llama-7B decode on A100, eager host", "tok/s", m.value,
                     decode_tok_s("a100", LLAMA2_7B, host_stack=True), m, "by construction: this point sets "
                     "stack.eager_host_op_s"))
    m = measurement("agx_orin.hf.llama2_7b_tok_s")
    rows.append(_row("decode.agx_orin.eager.Llama-2-7B", "Llama-2-7B decode on AGX Orin, eager host", "tok/s",
                     m.value, decode_tok_s("agx_orin", LLAMA2_7B, host_stack=True), m,
                     "held out: eager stack (gpt-fast call count) x Orin host slowdown, shared LPDDR5 model"))
    m = measurement("agx_orin.mlc.llama2_7b_tok_s")
    implied = m.value * LLAMA2_7B.params * 0.5 / 204.8e9  # int4 weights alone: a lower bound
    rows.append(_row("dram.lpddr5.attainable", "LPDDR5 share an int4 decode sustains on AGX Orin (lower bound)",
                     "fraction", implied, _dram.stream_efficiency(lp5).total, m,
                     "measured side = tok/s x 0.5 B/param / 204.8 GB/s (scales and KV not counted)"))
    return pd.DataFrame(rows)
