"""The retrieval tasks: a key hidden at a controlled depth of a long document, then a question about it.

Two tasks (docs/DECISIONS.md D160):

* ``passkey`` -- Mohtashami & Jaggi (2023, "Landmark Attention", passkey retrieval): their task description, their
  repetitive filler ("The grass is green. The sky is blue. ...") and their key sentence ("The pass key is K.
  Remember it. K is the pass key."), K a seeded 5-digit number;
* ``needle`` -- the same idea in real prose (a "needle in a haystack"): public-domain text shipped in
  ``data/text/`` (Carroll, *Alice's Adventures in Wonderland*, chapters II-IV), starting at a seeded sentence,
  with "The special magic number is K." inserted.

A :class:`Trial` is the document as token ids, exactly ``haystack_tokens`` long, with the needle starting at the
filler boundary (a sentence start) nearest below ``depth`` x (filler tokens): depth 0 puts it right after the task
description, depth 1 at the end of the document. Each piece (sentence, key) is tokenised on its own, so the
positions of the needle and of the key's digit tokens are exact.

Scoring (:func:`exact_match`): the first run of digits in the answer must equal the key, digit for digit.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from ..config import REPO_ROOT

#: The book text of the ``needle`` task (chapters II-IV; chapter I's opening calibrates InfiniGen, D160).
BOOK_TEXT = REPO_ROOT / "data" / "text" / "alice_ch2-4.txt"
KEY_DIGITS = 5


class Tokenizer(Protocol):
    """What the generator needs: ``encode(text) -> ids`` and ``decode(ids) -> text`` (a StreamingVideoLLM has
    both)."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids) -> str: ...


@dataclass(frozen=True)
class TaskText:
    """The words of one task; ``{key}`` in ``needle`` marks where the key goes (each part is its own piece)."""

    name: str
    intro: str
    needle: tuple[str, ...]
    question: str
    filler: tuple[str, ...] = ()  # repeated filler pieces; empty = the book text


TASKS: dict[str, TaskText] = {
    "passkey": TaskText(
        "passkey",
        intro=("There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
               "I will quiz you about the important information there."),
        filler=(" The grass is green.", " The sky is blue.", " The sun is yellow.", " Here we go.",
                " There and back again."),
        needle=(" The pass key is", " {key}", ". Remember it.", " {key}", " is the pass key."),
        question="What is the pass key? Answer with the number only."),
    "needle": TaskText(
        "needle",
        intro=("A special magic number is hidden inside the following passage of a book. Find it and memorize it. "
               "I will quiz you about the magic number there."),
        needle=(" The special magic number is", " {key}", "."),
        question="What is the special magic number? Answer with the number only."),
}


@dataclass(frozen=True)
class Trial:
    """One document with its key. Positions are offsets into ``ids`` (the document as streamed).

    ids: token ids [haystack_tokens]; needle_span: [start, end) of the key sentence; value_positions: the tokens of
    the key's digits (every mention); depth: requested; filler_tokens: the filler around the needle;
    book_sentence: first sentence of the book text used (``needle`` task) or None.
    """

    task: str
    depth: float
    seed: int
    key: str
    ids: tuple[int, ...]
    needle_span: tuple[int, int]
    value_positions: tuple[int, ...]
    intro_tokens: int
    filler_tokens: int
    question: str
    book_sentence: int | None = None

    @property
    def n_tokens(self) -> int:
        return len(self.ids)

    @property
    def depth_actual(self) -> float:
        """Where the needle starts, as a fraction of the filler (0 = right after the task description)."""
        return (self.needle_span[0] - self.intro_tokens) / max(1, self.filler_tokens)


# ---------------------------------------------------------------------------------------------------------------
# the book text
# ---------------------------------------------------------------------------------------------------------------
_SENTENCE_END = re.compile(r"(?<=[.!?])[”’)]*\s+(?=[“‘(]*[A-Z])")


def book_sentences(path: str | Path = BOOK_TEXT) -> tuple[str, ...]:
    """The book as pieces: paragraphs unwrapped, Project Gutenberg's ``_italics_`` marks dropped, split at
    sentence ends; a paragraph's first sentence starts with a newline, every other with a space."""
    return _book_sentences(str(path))


@functools.lru_cache(maxsize=4)
def _book_sentences(path: str) -> tuple[str, ...]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: the needle task's book text is missing; it ships in data/text/ "
                                "(restore it from the repository)")
    pieces: list[str] = []
    for para in re.split(r"\n\s*\n", p.read_text(encoding="utf-8")):
        flat = " ".join(para.replace("_", "").split())
        if not flat:
            continue
        for i, s in enumerate(_split_sentences(flat)):
            pieces.append(("\n" if i == 0 else " ") + s)
    if not pieces:
        raise ValueError(f"{p}: no sentences found; the needle task needs prose")
    return tuple(pieces)


def _split_sentences(paragraph: str) -> list[str]:
    out, last = [], 0
    for m in _SENTENCE_END.finditer(paragraph):
        out.append(paragraph[last:m.start() + len(m.group(0).rstrip())].strip())
        last = m.end()
    out.append(paragraph[last:].strip())
    return [s for s in out if s]


# ---------------------------------------------------------------------------------------------------------------
# the generator
# ---------------------------------------------------------------------------------------------------------------
def trial_rng(task: str, haystack_tokens: int, depth: float, seed: int) -> np.random.Generator:
    """The generator of one trial's key (and book offset): a function of all four, so every cell of a grid has
    its own key."""
    return np.random.default_rng([int(seed), int(haystack_tokens), int(round(depth * 1e6)),
                                  list(TASKS).index(task)])


def _needle(tok: Tokenizer, text: TaskText, key: str) -> tuple[list[int], list[int]]:
    """Token ids of the key sentence and the offsets (within it) of the key's digit tokens."""
    ids, value = [], []
    for part in text.needle:
        part_ids = tok.encode(part.format(key=key))
        if "{key}" in part:
            value += [len(ids) + i for i, t in enumerate(part_ids) if any(c.isdigit() for c in tok.decode([t]))]
        ids += part_ids
    return ids, value


def _filler(tok: Tokenizer, pieces: Sequence[str], start: int, n_tokens: int) -> tuple[list[int], list[int]]:
    """Pieces from ``start`` on (cyclically) until ``n_tokens`` ids: (ids truncated to n_tokens, piece starts)."""
    ids, starts, i = [], [], start
    while len(ids) < n_tokens:
        starts.append(len(ids))
        ids += tok.encode(pieces[i % len(pieces)])
        i += 1
    return ids[:n_tokens], starts


def make_trial(tok: Tokenizer, task: str, haystack_tokens: int, depth: float, seed: int = 0, *,
               prefix: str = "", book: str | Path = BOOK_TEXT) -> Trial:
    """The document of one trial: ``prefix`` + task description + filler with the key sentence at ``depth``.

    Exactly ``haystack_tokens`` ids long; the needle starts at the last filler-piece boundary at or before
    ``round(depth * filler_tokens)``. Raises (naming the parameter) on an unknown task, a depth outside [0, 1] or
    a document too short to hold the description, the needle and one filler token.
    """
    if task not in TASKS:
        raise ValueError(f"long-context task {task!r} is not one of {', '.join(TASKS)} (parameter 'task')")
    if not 0.0 <= float(depth) <= 1.0:
        raise ValueError(f"needle depth {depth} must be in [0, 1] (0 = start of the document, 1 = its end)")
    text = TASKS[task]
    rng = trial_rng(task, haystack_tokens, depth, seed)
    key = str(int(rng.integers(10 ** (KEY_DIGITS - 1), 10 ** KEY_DIGITS)))
    intro = tok.encode(prefix + text.intro)
    needle, value = _needle(tok, text, key)
    n_fill = int(haystack_tokens) - len(intro) - len(needle)
    if n_fill < 1:
        raise ValueError(f"a {task} document of {haystack_tokens} tokens cannot hold its {len(intro)}-token "
                         f"description and {len(needle)}-token key sentence: raise the context length to at least "
                         f"{len(intro) + len(needle) + 1} document tokens")
    pieces, start = (text.filler, 0) if text.filler else (book_sentences(book), None)
    if start is None:
        start = int(rng.integers(len(pieces)))
    fill, starts = _filler(tok, pieces, start, n_fill)
    target = int(round(float(depth) * n_fill))
    at = max(s for s in starts if s <= target)
    ids = intro + fill[:at] + needle + fill[at:]
    n0 = len(intro) + at
    return Trial(task=task, depth=float(depth), seed=int(seed), key=key, ids=tuple(ids),
                 needle_span=(n0, n0 + len(needle)), value_positions=tuple(n0 + v for v in value),
                 intro_tokens=len(intro), filler_tokens=n_fill, question=text.question,
                 book_sentence=None if text.filler else start)


# ---------------------------------------------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------------------------------------------
_DIGITS = re.compile(r"\d+")


def answer_digits(answer: str) -> str | None:
    """The first maximal run of digits in ``answer`` (None if it has none)."""
    m = _DIGITS.search(answer or "")
    return m.group(0) if m else None


def exact_match(answer: str, key: str) -> bool:
    """True iff the answer's first run of digits is the key, digit for digit ("68231." yes; "682310", "6823",
    "6 8231" no)."""
    return answer_digits(answer) == str(key)
