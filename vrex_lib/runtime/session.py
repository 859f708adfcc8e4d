"""One video stream through the model: iterative prefill frame by frame, questions, greedy answers.

    sess = StreamingSession(model, policy, RuntimeConfig())
    sess.add_system_prompt("A multimodal AI assistant ...")
    for t, frame in zip(times, frames):          # uint8 [H, W, 3]
        sess.add_frame(frame, t)                 # one prefill per frame: interval token + 10 frame tokens
    answer = sess.ask("What is the action in the video?", max_new_tokens=32)
    sess.trace().save("trace.npz")

Text follows VideoLLM-online's chat template (showlab/videollm-online ``models/tokenization_live.py``,
``chat_template``). Two prompt layouts (recorded as ``trace().meta['prompt_layout']``):

* ``live`` (streaming narration / questions after the frames): ``<bos>{system}\\n`` · ``\\n[`` before the first
  frame of a stream segment and ``,`` between frames (the frame-interval token) · ``]\\nUser: {question}\\nAssistant:``
  · the greedy answer · ``<eos>\\n[`` if frames follow. Calls: frames, then :meth:`ask`.
* ``coin`` (the layout the COIN benchmarks were trained and evaluated with, ``data/coin/benchmarks.py``:
  user, stream, assistant): ``<bos>{system}\\n`` · ``\\nUser: {prompt}`` · ``\\n[`` frames joined by ``,`` ``]`` ·
  ``\\nAssistant:`` · the greedy answer. Calls: :meth:`add_user_prompt`, frames, :meth:`answer`. A stream with
  no frames (cut by ``max_num_frames``) is ``...User: {prompt}\\nAssistant:``, as the template drops it.

Every forward is one *step* of the trace: 'system' and 'question'/'decode' steps are the text stage, 'frame'
steps the frame stage. Observers (:class:`StepObserver`, :meth:`StreamingSession.add_observer`) see each step
begin and end -- e.g. the shadow policies of the workload measurement -- and :func:`vrex_lib.runtime.driver.drive`
is the one loop that streams frames and questions through a session.
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Protocol

import numpy as np
import torch

from ..config import RuntimeConfig
from ..retrieval.base import check_policy
from .attention import StepContext
from .kvstore import KVStore
from .model import FRAME_TOKENS, StreamingVideoLLM
from .trace import RetrievalTrace, TraceBuilder

DEFAULT_SYSTEM_PROMPT = ("A multimodal AI assistant is helping users with some activities. Below is their "
                         "conversation, interleaved with the list of video frames received by the assistant.")


class StepObserver(Protocol):
    """Sees every forward step of a session: ``begin_step`` before the model runs (``step`` holds the stage, kind,
    cache position and the session's KV store), ``end_step`` after it, with the step's trace row (a dict:
    :class:`~vrex_lib.runtime.trace.TraceBuilder` rows; :func:`~vrex_lib.runtime.trace.step_stats` reads it)."""

    def begin_step(self, step: StepContext) -> None: ...

    def end_step(self, step: StepContext, row: dict) -> None: ...


class ContextTooLarge(ValueError):
    """A stream whose KV cache would not fit; raised before any work starts."""


def kv_bytes(model: StreamingVideoLLM, n_tokens: int) -> int:
    """Bytes of the whole KV cache (all layers, K and V) for ``n_tokens`` tokens in the model's dtype."""
    return n_tokens * model.n_layers * model.n_kv_heads * 2 * model.head_dim * model.kv_bytes_per_elem


def tokens_for(n_frames: int, question_tokens: int = 64, max_new_tokens: int = 64, system_tokens: int = 64,
               interval_token: bool = True) -> int:
    """Upper estimate of a stream's cache length: system + frames (10 + interval each) + question + answer."""
    return system_tokens + n_frames * (FRAME_TOKENS + (2 if interval_token else 0)) + question_tokens + max_new_tokens


def memory_limit(model: StreamingVideoLLM, cfg: RuntimeConfig) -> int:
    """The KV budget: ``cfg.max_kv_bytes`` or 60% of free accelerator memory / physical RAM."""
    if cfg.max_kv_bytes is not None:
        return int(cfg.max_kv_bytes)
    dev = model.device
    if dev.type == "cuda":
        free, _ = torch.cuda.mem_get_info(dev)
        return int(0.6 * free)
    try:
        return int(0.6 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 1 << 40


def check_context(model: StreamingVideoLLM, n_tokens: int, cfg: RuntimeConfig, what: str = "this stream") -> None:
    """Raise :class:`ContextTooLarge` (naming the fix) if ``n_tokens`` exceed the model's positions or memory."""
    max_pos = int(getattr(model.config, "max_position_embeddings", 1 << 30))
    if n_tokens > max_pos:
        raise ContextTooLarge(f"{what} needs ~{n_tokens} tokens but {model.name} has max_position_embeddings "
                              f"{max_pos}: lower the frame rate or --max-frames")
    need, limit = kv_bytes(model, n_tokens), memory_limit(model, cfg)
    if need > limit:
        raise ContextTooLarge(f"{what} needs a {need / 2**30:.2f} GiB KV cache (~{n_tokens} tokens) but the budget "
                              f"is {limit / 2**30:.2f} GiB: lower the frame rate or --max-frames, or raise "
                              "RuntimeConfig.max_kv_bytes")


class StreamingSession:
    """Streams one video through ``model`` with retrieval ``policy`` (None = full attention) under ``cfg``.

    Public state: ``store`` (:class:`KVStore`), ``n_tokens``, ``n_frames``, ``last_answer`` (dict: ids,
    step_argmax, forced, agreement), ``stats`` (the live :class:`TraceBuilder` rows), :meth:`trace`.
    ``observers``: :class:`StepObserver` s told about every step (kept across :meth:`reset`).
    """

    def __init__(self, model: StreamingVideoLLM, policy=None, cfg: RuntimeConfig | None = None,
                 observers: Iterable[StepObserver] = ()):
        self.model, self.policy, self.cfg = model, policy, cfg or RuntimeConfig()
        self.observers: list[StepObserver] = list(observers)
        #: Set while the session is a row of :func:`vrex_lib.runtime.batch.lockstep`: its forwards run batched.
        self.lockstep = None
        # Every policy gets the model once per session (``bind``: the attention inputs for pre-RoPE scoring or
        # previous-layer speculation, the weights; vrex_lib.runtime.capture); a composite policy's members (its
        # ``policies``: the shadow measurement, the long-context study) are bound too.
        if policy is not None:
            check_policy(policy)
        self._members = [policy, *policy.policies.values()] if policy is not None else []
        for p in self._members:
            p.bind(model)
        self.reset()

    # ---- lifecycle -----------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the stream: empty KV store, fresh trace, policy reset."""
        m = self.model
        self.store = KVStore(m.n_layers, m.n_kv_heads, m.head_dim, capacity=self.cfg.kv_capacity,
                             bytes_per_elem=m.kv_bytes_per_elem, paper_bytes_per_elem=self.cfg.paper_kv_bytes_per_elem)
        if self.policy is not None:
            self.policy.reset(m.n_layers, m.n_kv_heads, m.head_dim)
        # A policy that decides by tier (keep what is on the device, drop the rest) reads the store's boundary.
        for p in self._members:
            p.bind_store(self.store)
        meta = dict(model=m.name, n_layers=m.n_layers, n_kv_heads=m.n_kv_heads, n_q_heads=m.n_q_heads,
                    head_dim=m.head_dim, bytes_per_elem=m.kv_bytes_per_elem,
                    paper_bytes_per_elem=self.cfg.paper_kv_bytes_per_elem, frame_tokens=FRAME_TOKENS,
                    policy=getattr(self.policy, "name", "full") if self.policy is not None else "full",
                    policy_config=repr(getattr(self.policy, "cfg", None) or getattr(self.policy, "config", None)),
                    runtime_config=repr(self.cfg))
        self._builder = TraceBuilder(meta, m.n_layers, m.n_kv_heads)
        self.n_sink = 0
        self.frame_starts: list[int] = []
        self._last_role: str | None = None  # None | 'system' | 'stream' | 'user' | 'assistant'
        self._logits: torch.Tensor | None = None
        self._prev_selection: dict = {}  # {(stage, layer): per-KV-head indices} -> the trace's ``reused``
        self.inputs: list[torch.Tensor] = []
        self.last_answer: dict = {}
        self.prompt_layout: str | None = None  # 'live' | 'coin', set by the first ask / add_user_prompt
        self._builder.meta["prompt_layout"] = None

    def add_observer(self, observer: StepObserver) -> None:
        """Tell ``observer`` about every later step (begin and end)."""
        self.observers.append(observer)

    @property
    def n_tokens(self) -> int:
        return self.store.get_seq_length()

    @property
    def n_frames(self) -> int:
        return len(self.frame_starts)

    @property
    def stats(self) -> list[dict]:
        """Per-step records so far (one dict per step; arrays [L, Hkv]); :meth:`trace` packs them."""
        return self._builder.rows

    def trace(self) -> RetrievalTrace:
        return self._builder.build()

    # ---- steps ---------------------------------------------------------------------------------------------
    def _window_start(self) -> int:
        if not self.frame_starts:
            return self.n_tokens  # nothing but text: everything after the sinks is recent
        return self.frame_starts[-min(self.cfg.recent_frames, len(self.frame_starts))]

    @torch.inference_mode()
    def _forward(self, embeds: torch.Tensor, kind: str, stage: str, frame_id: int | None = None,
                 time_s: float | None = None) -> torch.Tensor:
        """Prefill ``embeds`` [N, hidden] as one step; returns the last position's logits [vocab] (float32)."""
        start = self.n_tokens
        n = int(embeds.shape[0])
        if kind == "frame":
            self.frame_starts.append(start)
        window_start = start if kind == "system" else min(self._window_start(), start)
        step = StepContext(policy=self.policy, store=self.store, stage=stage, kind=kind, frame_id=frame_id,
                           start=start, n_new=n, n_sink=self.n_sink, window_start=max(window_start, self.n_sink),
                           dense_layers=self.cfg.dense_layers, measure_attn_error=self.cfg.measure_attn_error,
                           strict=self.cfg.strict, prev_selection=self._prev_selection)
        step.candidates = torch.arange(step.n_sink, step.window_start, device=self.model.device)
        ledger = self.store.new_step()
        if self.cfg.record_inputs:
            self.inputs.append(embeds.detach().clone())
        for o in self.observers:
            o.begin_step(step)
        if self.lockstep is not None:  # one row of a batched forward (vrex_lib.runtime.batch); wall: the batch's
            logits, wall = self.lockstep.submit(self, embeds, step)
        else:
            t0 = time.perf_counter()
            out = self.model.llm(inputs_embeds=embeds[None].to(self.model.dtype), cache=self.store, use_cache=True,
                                 logits_to_keep=1, vrex_step=step)
            logits, wall = out.logits[0, -1], time.perf_counter() - t0
        self._logits = logits.float()
        self._builder.add(step, ledger, self.n_tokens, time_s, wall, int(self._logits.argmax()))
        for o in self.observers:
            o.end_step(step, self._builder.rows[-1])
        return self._logits

    def _text(self, text: str, kind: str = "question", prefix_ids: list[int] | None = None) -> torch.Tensor:
        ids = (prefix_ids or []) + self.model.encode(text)
        return self._forward(self.model.embed_text(ids), kind, "text")

    def add_system_prompt(self, text: str = DEFAULT_SYSTEM_PROMPT) -> None:
        """Prefill ``<bos>{text}\\n``; these tokens are the always-attended sinks (pinned on device)."""
        if self.n_tokens:
            raise RuntimeError("add_system_prompt must come first (call reset() to start a new stream)")
        bos = [] if self.model.bos_token_id is None else [self.model.bos_token_id]
        self._text(text + "\n", kind="system", prefix_ids=bos)
        self.n_sink = self.store.n_sink = self.n_tokens
        self._last_role = "system"

    def _frame_prefix_ids(self) -> list[int]:
        if not self.cfg.interval_token:
            return []
        if self._last_role == "stream":
            return self.model.encode(",")
        eos = [self.model.eos_token_id] if self._last_role == "assistant" else []
        return eos + self.model.encode("\n[")

    def add_frame(self, frame, t: float | None = None) -> None:
        """Prefill one frame (uint8 [H, W, 3]): its interval token(s) + 10 frame tokens, one forward."""
        self.add_frame_embeds(self.model.embed_frames(np.asarray(frame)[None])[0], t)

    def add_frames(self, frames, times=None, batch: int = 16) -> None:
        """Prefill frames uint8 [T, H, W, 3] one at a time (vision tower batched by ``batch``)."""
        frames = np.asarray(frames)
        times = [None] * len(frames) if times is None else list(times)
        for b in range(0, len(frames), batch):
            emb = self.model.embed_frames(frames[b:b + batch])
            for i in range(emb.shape[0]):
                self.add_frame_embeds(emb[i], times[b + i])

    def add_frame_embeds(self, frame_embeds: torch.Tensor, t: float | None = None) -> None:
        """Prefill precomputed frame tokens [10, hidden] (e.g. pre-extracted features) as one frame step."""
        if self.n_tokens == 0 and self.model.bos_token_id is not None:
            # no system prompt: the bos token is the only sink
            self._forward(self.model.embed_text([self.model.bos_token_id]), "system", "text")
            self.n_sink = self.store.n_sink = self.n_tokens
        prefix = self._frame_prefix_ids()
        emb = frame_embeds.to(self.model.device, self.model.dtype)
        if prefix:
            emb = torch.cat([self.model.embed_text(prefix), emb], 0)
        self._forward(emb, "frame", "frame", frame_id=self.n_frames, time_s=t)
        self._last_role = "stream"

    def next_token_logits(self) -> torch.Tensor:
        """Logits [vocab] (float32) of the last forward's last position."""
        if self._logits is None:
            raise RuntimeError("nothing has been prefilled yet")
        return self._logits

    def _set_layout(self, layout: str) -> None:
        if self.prompt_layout not in (None, layout):
            raise RuntimeError(f"this stream already uses the {self.prompt_layout!r} prompt layout; call reset() "
                               f"before a {layout!r} one")
        self.prompt_layout = self._builder.meta["prompt_layout"] = layout

    def add_user_prompt(self, prompt: str) -> None:
        """COIN layout: prefill ``\\nUser: {prompt}`` *before* the frames (one text step, kind 'question')."""
        if self._last_role not in ("system", None) or self.n_frames:
            raise RuntimeError("add_user_prompt opens a COIN-layout turn: call it right after add_system_prompt")
        self._set_layout("coin")
        self._text(f"\nUser: {prompt}", kind="question")
        # Everything before the stream is pinned like the system prompt (always attended, never a retrieval
        # candidate): the question must not be dropped by a policy (docs/DECISIONS.md D58).
        self.n_sink = self.store.n_sink = self.n_tokens
        self._last_role = "user"

    def answer(self, max_new_tokens: int = 64, force_ids: list[int] | None = None,
               stop_strings: tuple[str, ...] = (), strip: bool = False) -> str:
        """COIN layout: close the stream (``]``, if frames came) and prefill ``\\nAssistant:``, then decode greedily
        (as :meth:`ask`). The text is returned as decoded (``strip=False``): VideoLLM-online scores the decoded
        answer as it is, leading space included."""
        if self.prompt_layout != "coin" or self._last_role not in ("user", "stream"):
            raise RuntimeError("answer() follows add_user_prompt (and frames); use ask() for the live layout")
        close = "]" if self._last_role == "stream" else ""
        logits = self._text(f"{close}\nAssistant:", kind="question")
        return self._generate(logits, max_new_tokens, force_ids, stop_strings, strip)

    def ask(self, question: str, max_new_tokens: int = 64, force_ids: list[int] | None = None,
            stop_strings: tuple[str, ...] = ()) -> str:
        """Live layout: prefill the question, then decode greedily until EOS, ``max_new_tokens`` or a stop string.

        ``force_ids`` (teacher forcing): feed these tokens instead of the argmax, recording at each step
        whether the argmax agreed (``last_answer['agreement']``); the returned text is then the argmax tokens.
        """
        self._set_layout("live")
        close = "]" if self._last_role == "stream" else ""
        eos = [self.model.eos_token_id] if self._last_role == "assistant" else []  # ends the previous answer
        logits = self._text(f"{close}\nUser: {question}\nAssistant:", kind="question", prefix_ids=eos)
        return self._generate(logits, max_new_tokens, force_ids, stop_strings, strip=True)

    def _generate(self, logits: torch.Tensor, max_new_tokens: int, force_ids: list[int] | None,
                  stop_strings: tuple[str, ...], strip: bool) -> str:
        first_logits = logits.clone()
        argmax, fed = [], []
        n_steps = max_new_tokens if force_ids is None else min(max_new_tokens, len(force_ids))
        text = ""
        for i in range(n_steps):
            a = int(logits.argmax())
            argmax.append(a)
            tok = a if force_ids is None else int(force_ids[i])
            if force_ids is None and tok == self.model.eos_token_id:
                break
            fed.append(tok)
            if force_ids is None and stop_strings:
                text = self.model.decode(fed)
                if any(s in text for s in stop_strings):
                    break
            if i + 1 < n_steps:
                logits = self._forward(self.model.embed_text([tok]), "decode", "text")
        self._last_role = "assistant"
        out_ids = [t for t in argmax if t != self.model.eos_token_id] if force_ids is not None else fed
        agree = None
        if force_ids is not None:
            agree = [int(a == int(f)) for a, f in zip(argmax, force_ids)]
        self.last_answer = dict(ids=fed, step_argmax=argmax, first_logits=first_logits,
                                forced=force_ids is not None, agreement=agree)
        text = self.model.decode(out_ids)
        for s in stop_strings:
            text = text.split(s)[0]
        return text.strip() if strip else text
