"""The streaming video LLM runtime: model builds, hierarchical KV store, retrieval-aware attention, sessions.

    from vrex_lib.runtime import build_model, StreamingSession, load_trace
    model = build_model("default")                       # SmolLM2-135M + patch-embedding stand-in encoder + connector
    sess = StreamingSession(model, policy, RuntimeConfig())
    answers = drive(sess, zip(frame_embeds, times), AskAtEnd([Question("What is he doing?", 32)]))
    sess.trace().retrieval_ratio("frame")

By job: :mod:`.model` (model builds, vision tower + connector), :mod:`.checkpoint` (what a build loads: the full
profile's folders, device and dtype, the model's identity), :mod:`.vision` (the stand-in encoder),
:mod:`.kvstore` (the two-tier KV cache), :mod:`.attention` (the registered attention hook that consults the
policy), :mod:`.capture` (attention inputs for policies that need them), :mod:`.session` (one stream: prompt,
frame and question steps, step observers), :mod:`.driver` (the loop over a stream's frames and questions), :mod:`.batch` (several sessions' steps as one batched forward),
:mod:`.trace` (per-step records and the one definition of the step statistics).
"""
from __future__ import annotations

from .attention import ATTN_IMPL, BatchedStep, StepContext, register, vrex_attention
from .batch import Lockstep, LockstepAborted, RowsCache, lockstep
from .driver import Answer, AskAtEnd, AskAtTimes, Question, Schedule, drive
from .checkpoint import (DTYPES, ModelIdentity, checkpoint_name, fingerprint, merge_lora, resolve_device,
                         resolve_dtype, validate_full_paths)
from .kvstore import KVStore, KVStoreLayer
from .model import FRAME_TOKENS, ByteTokenizer, StreamingVideoLLM, build_model, identify
from .session import (DEFAULT_SYSTEM_PROMPT, ContextTooLarge, StepObserver, StreamingSession, check_context,
                      kv_bytes, memory_limit, tokens_for)
from .trace import SCHEMA_VERSION, RetrievalTrace, load_trace, pooled_fraction, step_stats

__all__ = ["ATTN_IMPL", "Answer", "AskAtEnd", "AskAtTimes", "BatchedStep", "ByteTokenizer", "ContextTooLarge",
           "DEFAULT_SYSTEM_PROMPT", "DTYPES", "FRAME_TOKENS", "KVStore", "KVStoreLayer", "Lockstep",
           "LockstepAborted", "ModelIdentity", "Question",
           "RetrievalTrace", "SCHEMA_VERSION", "Schedule", "StepContext", "StepObserver", "StreamingSession",
           "StreamingVideoLLM", "build_model", "check_context", "checkpoint_name", "drive", "fingerprint", "identify",
           "kv_bytes", "load_trace", "memory_limit", "merge_lora", "pooled_fraction", "register", "resolve_device",
           "resolve_dtype", "RowsCache", "lockstep", "step_stats", "tokens_for", "validate_full_paths", "vrex_attention"]
