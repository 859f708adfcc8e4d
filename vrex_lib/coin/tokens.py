"""Token counts of COIN samples (question, answer), for the fixture statistics beside the paper's average case."""
from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from ..config import profile_config
from .tasks import FRAME_FPS, Sample


WORDS_PER_TOKEN_APPROX = 1.3  # smoke profile: tokens ~ words x 1.3 (a common rule of thumb for BPE on English)


def approx_token_count(text: str) -> int:
    """Tokenizer-free estimate used by the smoke profile: ceil(words x 1.3)."""
    return int(math.ceil(len(text.split()) * WORDS_PER_TOKEN_APPROX))


def task_stats(samples_by_task: Mapping[str, Sequence[Sample]], count_tokens, tokenizer_name: str,
               fps: float = FRAME_FPS) -> "pandas.DataFrame":  # noqa: F821
    """Per task (and 'all' = every sample of every task pooled): the workload the latency model needs.

    Columns: task, n_samples, avg_frames_2fps (frames shown at ``fps``), avg_question_tokens (the prompt),
    avg_answer_tokens (the full reply, numbered lines for procedures), tokenizer. ``count_tokens(text) -> int``
    counts tokens without special tokens or chat template.
    """
    import pandas as pd

    recs, pooled = [], {"f": [], "q": [], "a": []}
    cache: dict[str, int] = {}

    def n_tok(t: str) -> int:
        if t not in cache:
            cache[t] = int(count_tokens(t))
        return cache[t]

    for task, samples in samples_by_task.items():
        if not samples:
            continue
        f = [s.num_frames(fps) for s in samples]
        q = [n_tok(s.prompt) for s in samples]
        a = [n_tok(s.answer) for s in samples]
        pooled["f"] += f
        pooled["q"] += q
        pooled["a"] += a
        recs.append(dict(task=task, n_samples=len(samples), avg_frames_2fps=float(np.mean(f)),
                         avg_question_tokens=float(np.mean(q)), avg_answer_tokens=float(np.mean(a)),
                         tokenizer=tokenizer_name))
    if pooled["f"]:
        recs.append(dict(task="all", n_samples=len(pooled["f"]), avg_frames_2fps=float(np.mean(pooled["f"])),
                         avg_question_tokens=float(np.mean(pooled["q"])),
                         avg_answer_tokens=float(np.mean(pooled["a"])), tokenizer=tokenizer_name))
    return pd.DataFrame.from_records(recs, columns=["task", "n_samples", "avg_frames_2fps", "avg_question_tokens",
                                                    "avg_answer_tokens", "tokenizer"])


def token_counter(profile: str, tokenizer_path: str | os.PathLike | None = None):
    """``(count_tokens(text) -> int, name)`` for :func:`task_stats`.

    smoke: :func:`approx_token_count` (no tokenizer load, keeps CI fast). default: the SmolLM2-135M tokenizer
    (the runtime's model; loaded alone, without the weights). full: the tokenizer at ``tokenizer_path``
    (e.g. the VideoLLM-online checkpoint's Llama-3 tokenizer), else SmolLM2 with a warning.
    Special tokens and chat templates are not counted.
    """
    how = profile_config(profile).model.token_counter
    if how == "approx":
        return approx_token_count, f"approx: ceil(words x {WORDS_PER_TOKEN_APPROX})"
    from transformers import AutoTokenizer

    if how == "checkpoint" and tokenizer_path:
        tok = AutoTokenizer.from_pretrained(str(tokenizer_path))
        name = str(tokenizer_path)
    else:
        if how == "checkpoint":
            warnings.warn("full profile without tokenizer_path: counting tokens with SmolLM2's tokenizer, not "
                          "the checkpoint's (Llama-3 for VideoLLM-online).", stacklevel=2)
        from ..llm_weights import GGUF_NAME, smollm2_dir

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        tok = AutoTokenizer.from_pretrained(smollm2_dir(), gguf_file=GGUF_NAME)
        name = "SmolLM2-135M-Instruct"
    return (lambda text: len(tok(text, add_special_tokens=False)["input_ids"])), name
