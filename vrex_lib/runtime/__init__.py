"""The streaming video LLM runtime: model builds, hierarchical KV store, retrieval-aware attention, sessions.

    from vrex_lib.runtime import build_model, StreamingSession, load_trace
    model = build_model("default")                       # SmolLM2-135M + patch-embedding stand-in encoder + connector
    sess = StreamingSession(model, policy, RuntimeConfig())
"""
from __future__ import annotations

from .attention import ATTN_IMPL, StepContext, register, vrex_attention
from .kvstore import KVStore, KVStoreLayer
from .model import FRAME_TOKENS, ByteTokenizer, StreamingVideoLLM, build_model, merge_lora, validate_full_paths
from .session import (DEFAULT_SYSTEM_PROMPT, ContextTooLarge, StreamingSession, check_context, kv_bytes,
                      tokens_for)
from .trace import SCHEMA_VERSION, RetrievalTrace, load_trace

__all__ = ["ATTN_IMPL", "ByteTokenizer", "ContextTooLarge", "DEFAULT_SYSTEM_PROMPT", "FRAME_TOKENS", "KVStore",
           "KVStoreLayer", "RetrievalTrace", "SCHEMA_VERSION", "StepContext", "StreamingSession",
           "StreamingVideoLLM", "build_model", "check_context", "kv_bytes", "load_trace", "merge_lora", "register",
           "tokens_for", "validate_full_paths", "vrex_attention"]
