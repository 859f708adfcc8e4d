"""``infinigen`` and ``infinigen_p`` — InfiniGen's speculative token selection (Lee et al., OSDI 2024).

What the reference code (snu-comparch/InfiniGen, ``accuracy/``) does, and how it is reproduced here
(``mode="reference"``, the default):

* **Skewing matrices** (``setup/gen_llama_skewing_matrix.py``, ``main``): one forward over a calibration text
  (the first 2,048 tokens of PG-19's first book there; ``data/text/alice_ch1.txt`` here, shipped with the
  repository); per layer and head, SVD of the post-RoPE query and key matrices ``Q = U_q S_q V_q^T``,
  ``K = U_k S_k V_k^T``; ``A`` holds ``V_q``'s columns placed by the order of ``S_q·S_k`` (``a.scatter(-1,
  argsort(s), V_q)``). ``A`` is orthogonal, so ``(QA)(KA)^T = QK^T``, and it concentrates the products in few
  columns. Under GQA one ``A`` per KV head, from the stacked queries of its group (the key side is per KV head;
  the reference's Llama-2 is MHA).
* **Partial columns** (``setup/gen_partial_weight.py`` with ``src/modeling_llama_ours_setup.py``,
  ``LlamaAttention.forward``): per head the union of the ``int(head_dim × ratio)`` columns with the largest
  ``Σ_tokens |QA|`` and the ``int(head_dim × ratio)`` with the largest ``Σ_tokens |KA|``; ratio 0.2. The
  reference picks them on a short prompt; here on the calibration text (one pass computes both).
* **Speculation** (``src/modeling_llama_ours.py``, ``LlamaAttention.forward``, "Speculate attention"): layer
  ℓ's query is predicted from layer ℓ-1's *attention input* (``previous_hidden_states``) times layer ℓ's
  ``W_q``, rotated at the step's positions, skewed by ``A`` and masked to the partial columns; it is scored
  against the skewed post-RoPE keys, ``/√d``. Layers 0 and 1 attend densely (``LlamaModel.forward`` passes
  ``previous_hidden_states`` only to layers ≥ 2).
* **Selection** (``kv_cache_mask``): per row the tokens with a logit ≥ max − ``alpha`` are counted, the count
  averaged over heads, capped at ``budget × tokens`` (``budget`` = 0.2 by default); then, per query row, a
  per-head top-k of that row's count. ``alpha`` = 5. Its threshold is *head 0's* row maximum for every head
  (``torch.max(attn, dim=-1, keepdim=True)[0][0]``: the trailing ``[0]`` picks head 0); the speedup code
  (``speedup/infinigen/infinigen/kv_selection_controller.py``, ``speculate_attention``) thresholds each head at
  its own maximum (strictly above, unscaled logits, ``alpha`` = 4, an absolute cap ``max_num_kv``, 400 by
  default), one decode token per step.
* Text generation only: frame prefill attends to everything (Table II: 100 % at the frame stage).

Here the threshold is each head's own row maximum (``threshold="per_head"``, as the speedup code does), with
the accuracy code's ``≥``, ``/√d`` and relative cap; ``threshold="head0"`` is the accuracy code's head-0 maximum
for every head (query head 0's row for the same token). The cap is ``int(cap × tokens in the cache)``, the
step's own tokens included, as the reference's ``int(src_len × budget)`` (:meth:`InfiniGen.cap_tokens`), 0.5 by
default (the
V-Rex paper's accuracy runs: "up to 50 %"); every table and figure of this artifact uses 0.5 (Table II and
Fig. 19/20 in notebook 03, and the workload file behind the measured-workload rows of Fig. 4 and 13-18);
``cap=0.2`` is the reference's default budget. A multi-token step (the question, ``]\nAssistant:``) selects
per query row as the reference does (:meth:`InfiniGen.row_sets`): token t's ``k_t`` is its count averaged over
heads, and each KV head attends, for token t, the top ``k_t`` of t's rows; the runtime fetches the union and masks
each token to its own set (``Selection.rows``). A single-token decode step selects per head (under GQA per KV
head, over its group's query heads). ``per_row=False`` serves all rows of a step with one set per KV head.
InfiniGenP's frame stage keeps one fixed top-k per KV head and step (the V-Rex paper's extension states a fixed
top-k, docs/DECISIONS.md D61).

The calibration runs once per model and is cached under ``results/cache/infinigen/`` (keyed by the model's
name, shape, a weight fingerprint, the text and the ratio); the session binds the policy to its model
(``bind``), which loads or computes it.

``mode="oracle"`` is a variant kept for comparison: no skewing, the exact current query
of layer ℓ (a best case no real system has), partial columns learned online from running means of |q| and
|k|, only the runtime's dense layers (layer 0).

InfiniGenP (``infinigen_p``) is the V-Rex paper's own prefill extension (unpublished): the same scoring also
during frame prefill, with a fixed top-k of ``cap`` × candidates at frames (§VI.A accuracy setup).
"""
from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import torch

from .. import _io
from ..config import check_int, check_real
from ._common import Stopwatch, kv_rows, row_probs, scaled_scores, topk_sorted
from .base import PolicyBase, Selection, Stage

INFINIGEN_MODES: tuple[str, ...] = ("reference", "oracle")
#: Whose row maximum the "critical" threshold is taken from: each head's own (speedup code) or head 0's for
#: every head (accuracy code, ``kv_cache_mask``).
INFINIGEN_THRESHOLDS: tuple[str, ...] = ("per_head", "head0")
CALIBRATION_TEXT = Path(__file__).resolve().parents[2] / "data" / "text" / "alice_ch1.txt"
CALIBRATION_TOKENS = 2048  # the reference truncates its calibration text to 2,048 tokens
_CALIB_MEMO: dict = {}


# ---------------------------------------------------------------------------------------------- calibration

def skewing_matrix(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """InfiniGen's skewing matrix of one head from post-RoPE ``q`` [Nq, D] and ``k`` [Nk, D] -> ``A`` [D, D].

    ``A[:, order[j]] = V_q[:, j]`` where ``order = argsort(S_q · S_k)`` ascending (the reference's
    ``a.scatter(-1, ind.repeat(r, 1), vq)``): an orthogonal matrix whose columns are ``V_q``'s, permuted.
    """
    _, sq, vqh = torch.linalg.svd(q.double(), full_matrices=False)
    _, sk, _ = torch.linalg.svd(k.double(), full_matrices=False)
    d = q.shape[-1]
    if sq.numel() < d or sk.numel() < d:
        raise ValueError(f"skewing_matrix needs at least head_dim={d} tokens, got {q.shape[0]} / {k.shape[0]}")
    order = torch.sort(sq * sk, stable=True).indices
    a = torch.zeros(d, d, dtype=torch.float64)
    a[:, order] = vqh.transpose(0, 1)
    return a.float()


def partial_columns(q: torch.Tensor, k: torch.Tensor, a: torch.Tensor, ratio: float) -> torch.Tensor:
    """Bool [D]: the union of the ``int(D·ratio)`` columns with the largest Σ|qA| and those with the largest
    Σ|kA| (``q`` [Nq, D], ``k`` [Nk, D], ``a`` [D, D]) -- InfiniGen's partial weight mask of one head."""
    d = a.shape[0]
    n = max(1, int(d * ratio))
    mask = torch.zeros(d, dtype=torch.bool)
    mask[torch.topk((q.float() @ a).abs().sum(0), n).indices] = True
    mask[torch.topk((k.float() @ a).abs().sum(0), n).indices] = True
    return mask


def _fingerprint(model) -> str:
    layers = model.llm.model.layers
    h = hashlib.sha256()
    for lay in (layers[0], layers[-1]):
        for w in (lay.self_attn.q_proj.weight, lay.self_attn.k_proj.weight):
            h.update(repr(float(w.detach().double().sum())).encode())
            h.update(repr(float(w.detach().double().abs().sum())).encode())
    return h.hexdigest()[:16]


def calibrate(model, text_path: str | os.PathLike = CALIBRATION_TEXT, ratio: float = 0.2,
              cache_dir: str | os.PathLike | None = None, n_tokens: int = CALIBRATION_TOKENS) -> dict:
    """Skewing matrices and partial columns of every (layer, KV head) of ``model`` from its post-RoPE Q/K over
    ``text_path``: ``{'A': [L, Hkv, D, D], 'mask': bool [L, Hkv, D], 'n_tokens', 'text', 'ratio', 'key'}``.

    Cached (in memory and as ``<cache_dir>/<key>.pt``, default ``results/cache/infinigen``); the key covers the
    model's name, shape and weight fingerprint, the text's bytes, ``ratio`` and ``n_tokens``.
    """
    from ..config import results_dir
    from ..runtime.capture import attach, rope

    p = Path(text_path)
    if not p.is_file():
        raise FileNotFoundError(f"InfiniGen calibration text {p} not found: it ships with the repository "
                                "(data/text/alice_ch1.txt); pass text_path= to use another")
    text = p.read_text(encoding="utf-8")
    key = hashlib.sha256(repr((model.name, model.n_layers, model.n_kv_heads, model.head_dim, _fingerprint(model),
                               hashlib.sha256(text.encode()).hexdigest(), float(ratio), int(n_tokens))
                              ).encode()).hexdigest()[:20]
    if key in _CALIB_MEMO:
        return _CALIB_MEMO[key]
    cdir = Path(cache_dir) if cache_dir is not None else results_dir() / "cache" / "infinigen"
    f = cdir / f"{key}.pt"
    if f.exists():
        out = torch.load(f, weights_only=True)
        if out.get("key") == key:
            _CALIB_MEMO[key] = out
            return out
    store = attach(model)
    max_pos = int(getattr(model.config, "max_position_embeddings", n_tokens))
    ids = model.encode(text)[:min(n_tokens, max_pos)]
    if len(ids) < model.head_dim:
        raise ValueError(f"{p}: {len(ids)} tokens, fewer than head_dim {model.head_dim}; use a longer text")
    with torch.inference_mode():
        model.llm(input_ids=torch.as_tensor([ids], device=model.device), use_cache=False)
        L, hkv, d = model.n_layers, model.n_kv_heads, model.head_dim
        A = torch.zeros(L, hkv, d, d)
        mask = torch.zeros(L, hkv, d, dtype=torch.bool)
        for layer in range(L):
            h, (cos, sin) = store[layer]
            attn = model.llm.model.layers[layer].self_attn
            t = h.shape[1]
            q = attn.q_proj(h)[0].float().reshape(t, -1, d).transpose(0, 1)   # [Hq, T, D] pre-RoPE
            k = attn.k_proj(h)[0].float().reshape(t, hkv, d).transpose(0, 1)  # [Hkv, T, D]
            c, s = cos[0].float(), sin[0].float()
            q, k = rope(q, c, s), rope(k, c, s)
            rows = kv_rows(q, hkv)                                            # [Hkv, group*T, D]
            for g in range(hkv):
                A[layer, g] = skewing_matrix(rows[g].cpu(), k[g].cpu())
                mask[layer, g] = partial_columns(rows[g].cpu(), k[g].cpu(), A[layer, g], ratio)
    out = dict(A=A, mask=mask, n_tokens=len(ids), text=str(p.name), ratio=float(ratio), key=key)
    buf = io.BytesIO()
    torch.save(out, buf)
    _io.write_bytes(f, buf.getvalue())
    _CALIB_MEMO[key] = out
    return out


# ---------------------------------------------------------------------------------------------- policies

class InfiniGen(PolicyBase):
    """Threshold-then-cap token selection during text generation only.

    mode:          'reference' (default: skewing, previous-layer speculation, layers 0-1 dense) or 'oracle'.
    alpha:         logit margin below the row maximum counted as "critical" (reference: 5).
    cap:           max fraction of candidates fetched (V-Rex paper's accuracy runs: "up to 50%"; the
                   reference's ``budget`` default: 0.2).
    partial_ratio: fraction of head dims per side (query / key) in the partial columns (reference: 0.2 here).
    dense_layers:  reference mode: layers below this attend densely (reference: 2).
    calibration_text: the text of the calibration pass (reference mode).
    threshold:     'per_head' (each head's own row maximum, default) or 'head0' (query head 0's, accuracy code).
    per_row:       a multi-token step selects per query row, as the reference does (default); False: one set per KV
                   head serves all rows of the step (the count averaged over rows too).
    """

    name = "infinigen"
    retrieves_at_frame = False

    def __init__(self, alpha: float = 5.0, cap: float = 0.5, partial_ratio: float = 0.2, mode: str = "reference",
                 dense_layers: int = 2, calibration_text: str | os.PathLike | None = None,
                 threshold: str = "per_head", per_row: bool = True):
        if mode not in INFINIGEN_MODES:
            raise ValueError(f"infinigen: unknown mode {mode!r}: choose one of {', '.join(INFINIGEN_MODES)}")
        if threshold not in INFINIGEN_THRESHOLDS:
            raise ValueError(f"infinigen: unknown threshold {threshold!r}: choose one of "
                             f"{', '.join(INFINIGEN_THRESHOLDS)}")
        who = self.name
        alpha = check_real(who, "alpha (logit margin)", alpha, 0.0, float("inf"))
        cap = check_real(who, "cap", cap, 0.0, 1.0, lo_open=True)
        partial_ratio = check_real(who, "partial_ratio", partial_ratio, 0.0, 1.0, lo_open=True)
        # layer 0 has no previous layer to speculate from
        dense_layers = check_int(who, "dense_layers", dense_layers, 1)
        if calibration_text is not None and not (isinstance(calibration_text, (str, os.PathLike))
                                                 and Path(calibration_text).is_file()):
            raise ValueError(f"{who}: calibration_text must name an existing text file, got {calibration_text!r}")
        self.alpha, self.cap, self.partial_ratio = float(alpha), float(cap), float(partial_ratio)
        if not isinstance(per_row, bool):
            raise ValueError(f"{who}: per_row must be true or false, got {per_row!r}")
        self.mode, self.dense_layers, self.threshold = mode, int(dense_layers), threshold
        self.per_row = per_row
        self.calibration_text = Path(calibration_text) if calibration_text else CALIBRATION_TEXT
        self.calib: dict | None = None
        self._inputs = None
        self._q_proj = None

    @property
    def config(self) -> dict:
        return dict(mode=self.mode, alpha=self.alpha, cap=self.cap, partial_ratio=self.partial_ratio,
                    dense_layers=self.dense_layers if self.mode == "reference" else None, threshold=self.threshold,
                    per_row=self.per_row)

    def bind(self, model) -> None:
        """Reference mode: calibrate (or load the cached calibration) and keep the attention inputs and W_q."""
        if self.mode != "reference":
            return
        from ..runtime.capture import attach

        self._inputs = attach(model)
        self._q_proj = [lay.self_attn.q_proj for lay in model.llm.model.layers]
        self.calib = calibrate(model, self.calibration_text, self.partial_ratio)

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.head_dim = head_dim
        self.n_partial = max(1, round(self.partial_ratio * head_dim))
        # oracle: running sums of |k| and |q| per (layer, KV head, dim), the online stand-in for calibration.
        self._abs_k = [torch.zeros(n_kv_heads, head_dim) for _ in range(n_layers)]
        self._abs_q = [torch.zeros(n_kv_heads, head_dim) for _ in range(n_layers)]

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        if self.mode == "oracle":
            self._abs_k[layer] += new_keys.detach().float().abs().sum(1).cpu()

    def _partial_dims(self, layer: int, rows: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Oracle: [Hkv, d'] head dims with the largest running |q_d|·|k_d| (sorted for readability)."""
        self._abs_q[layer] += rows.detach().float().abs().sum(1).cpu()
        abs_k = self._abs_k[layer]
        if not torch.any(abs_k):  # nothing observed (e.g. a policy used stand-alone): use the cache itself
            abs_k = keys.detach().float().abs().sum(1).cpu()
        imp = self._abs_q[layer] * abs_k
        return torch.sort(torch.topk(imp, self.n_partial, dim=-1).indices, dim=-1).values.to(rows.device)

    def speculated_query(self, layer: int, n_q: int) -> torch.Tensor:
        """Reference mode: layer ``layer``'s query [Hq, N, D] predicted from layer-1's attention input × this
        layer's W_q, rotated with this step's RoPE (``src/modeling_llama_ours.py``, "Speculate attention")."""
        from ..runtime.capture import rope

        if self._inputs is None or self.calib is None:
            raise ValueError("infinigen mode 'reference' needs its model (skewing matrices, W_q, the previous "
                             "layer's input): run it in a StreamingSession (which binds it) or call bind(model); "
                             "mode='oracle' does not")
        prev, here = self._inputs[layer - 1], self._inputs[layer]
        if prev is None or here is None or here[1] is None:
            raise ValueError(f"infinigen: no captured attention input for layers {layer - 1}/{layer} in this step")
        h = prev[0][0, -n_q:]                                               # [N, hidden]
        w = self._q_proj[layer]
        # The projection as a function, not a module call: the module's forward hooks (ReKV's pre-RoPE capture of
        # this step, runtime/capture.py) must see only the model's own forward.
        q = torch.nn.functional.linear(h.to(w.weight.dtype), w.weight, w.bias).float()  # [N, Hq*D] pre-RoPE
        q = q.reshape(n_q, -1, self.head_dim).transpose(0, 1)              # [Hq, N, D]
        cos, sin = here[1]
        return rope(q, cos[0, -n_q:].float().to(q.device), sin[0, -n_q:].float().to(q.device))

    def _logits(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor
                ) -> tuple[torch.Tensor, int]:
        """Partial attention logits [Hkv, R, C] and the dims scored per row."""
        hkv, n_c = keys.shape[0], int(candidates.numel())
        if self.mode == "oracle":
            rows = kv_rows(query, hkv)                                    # [Hkv, R, D]
            dims = self._partial_dims(layer, rows, keys)                  # [Hkv, d']
            k_part = torch.gather(keys[:, candidates], 2, dims[:, None, :].expand(-1, n_c, -1))
            q_part = torch.gather(rows, 2, dims[:, None, :].expand(-1, rows.shape[1], -1))
            return scaled_scores(q_part, k_part, self.head_dim), self.n_partial
        q = self.speculated_query(layer, query.shape[1])
        rows = kv_rows(q, hkv)                                            # [Hkv, R, D]
        A = self.calib["A"][layer].to(rows.device)                        # [Hkv, D, D]
        m = self.calib["mask"][layer].to(rows.device).float()             # [Hkv, D]
        q_sk = torch.matmul(rows, A) * m[:, None, :]                      # masked skewed query
        k_sk = torch.matmul(keys[:, candidates].float(), A)               # skewed keys
        return scaled_scores(q_sk, k_sk, self.head_dim), int(self.calib["mask"][layer].sum(-1).max())

    def _select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
                fixed_topk: bool) -> Selection:
        hkv, n_c, n_tok = keys.shape[0], int(candidates.numel()), query.shape[1]
        rows = None
        with Stopwatch() as sw:
            logits, n_dims = self._logits(layer, query.detach(), keys.detach(), candidates)   # [Hkv, R, C]
            cap_k = self.cap_tokens(int(keys.shape[1]), n_c, fixed_topk)
            if fixed_topk:
                k = cap_k
            else:
                crit = logits >= self.row_max(logits, n_tok) - self.alpha
                k = min(int(crit.sum(-1).float().mean()), cap_k)        # mean over heads and rows
            if fixed_topk or n_tok == 1 or not self.per_row:
                score = row_probs(logits).sum(1)                           # [Hkv, C]
                indices = [topk_sorted(candidates, score[h], k) for h in range(hkv)]
            else:
                rows, k = self.row_sets(logits, crit, candidates, cap_k, n_tok)
        r = logits.shape[1]
        stats = dict(rows=hkv * r, scored=hkv * n_c, score_dims=n_dims,
                     score_macs=hkv * r * n_c * n_dims, k=k, cap_k=cap_k, select_s=sw.seconds)
        if rows is not None:
            return Selection.per_row(rows, n_c, stats)
        return Selection(indices, n_c, stats)

    def cap_tokens(self, n_cache: int, n_candidates: int, fixed_topk: bool = False) -> int:
        """The most tokens one selection may keep. InfiniGen's cap is the reference's ``int(src_len × budget)``
        (``kv_cache_mask``: ``fetch_max``), ``src_len`` the whole cache this step attends over, its own tokens
        included: ``int(cap × n_cache)`` -- not a share of the candidates, which leave out the sinks, the recent
        window and the step's own tokens (D381). InfiniGenP's fixed frame-stage top-k is ``cap`` × candidates
        (the V-Rex paper's extension, D61)."""
        return int(self.cap * (n_candidates if fixed_topk else n_cache))

    @staticmethod
    def row_sets(logits: torch.Tensor, crit: torch.Tensor, candidates: torch.Tensor, cap_k: int, n_tok: int
                 ) -> tuple[list[list[torch.Tensor]], float]:
        """InfiniGen's per-row rule on a multi-token step (``kv_cache_mask``): query token t fetches
        ``k_t = min(int(mean over heads of its critical count), cap_k)`` candidates, per head the top ``k_t`` of
        its own row. ``logits`` / ``crit`` [Hkv, group·N, C] (rows of KV head g: (query head in g's group,
        token), ``N`` = ``n_tok``); under GQA a KV head's set for token t ranks candidates by the attention
        probabilities summed over the group's rows of t, as a single-token step does. Returns (per KV head, per
        token sorted positions; the mean ``k_t``)."""
        hkv, n_c = logits.shape[0], logits.shape[-1]
        count = crit.sum(-1).float().reshape(hkv, -1, n_tok)                  # [Hkv, group, N]
        k_t = [min(int(count[:, :, t].mean()), cap_k) for t in range(n_tok)]
        score = row_probs(logits).reshape(hkv, -1, n_tok, n_c).sum(1)         # [Hkv, N, C]
        rows = [[topk_sorted(candidates, score[g, t], k_t[t]) for t in range(n_tok)] for g in range(hkv)]
        return rows, sum(k_t) / n_tok

    def row_max(self, logits: torch.Tensor, n_tokens: int) -> torch.Tensor:
        """The maximum each row of ``logits`` [Hkv, group·N, C] is thresholded against, [Hkv, group·N, 1]:
        its own ('per_head') or, for every head, query head 0's row of the same token ('head0'; rows of KV head
        g are (query head in g's group, token), query head 0's are ``logits[0, :N]``)."""
        own = logits.amax(-1, keepdim=True)
        if self.threshold == "per_head":
            return own
        head0 = own[0, :n_tokens]                                          # [N, 1]
        return head0.repeat(logits.shape[1] // n_tokens, 1).expand(logits.shape[0], -1, -1)

    def _dense_here(self, layer: int) -> bool:
        return self.mode == "reference" and layer < self.dense_layers

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        if stage == "frame" or candidates.numel() == 0 or self._dense_here(layer):
            return None  # no retrieval during (frame) prefill, nor in the dense layers: attend to everything
        return self._select(layer, query, keys, candidates, fixed_topk=False)


class InfiniGenP(InfiniGen):
    """InfiniGen extended to frame prefill (V-Rex's InfiniGenP): fixed top-k = cap × candidates at frames."""

    name = "infinigen_p"
    retrieves_at_frame = True

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        if candidates.numel() == 0 or self._dense_here(layer):
            return None
        return self._select(layer, query, keys, candidates, fixed_topk=(stage == "frame"))
