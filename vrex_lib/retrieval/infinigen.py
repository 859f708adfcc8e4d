"""``infinigen`` and ``infinigen_p`` — InfiniGen's speculative token selection (Lee et al., OSDI 2024).

InfiniGen (snu-comparch/InfiniGen, ``speculate_attention``) scores every cached token with a *partial*
query and a *partial* key (a fraction of the head dimensions), counts per row the tokens whose
logit exceeds ``max − alpha``, averages that count over heads and rows, caps it
(``k = min(mean count, max_num_kv)``) and takes a per-head top-k. It retrieves only while generating
text; frame prefill attends to everything (Table II: 100 % at the frame stage).

InfiniGenP is the V-Rex paper's own prefill extension (unpublished): the same partial-key scoring
also during frame prefill, with a fixed top-k of up to 50 % of the candidates (§VI.A accuracy setup).

Where we differ from InfiniGen, and why:
- InfiniGen picks its partial columns offline (SVD "skewing" of W_q/W_k + column magnitudes on
  calibration data). We have no calibration pass, so the columns are chosen on the fly from running
  means of |q| and |k| per (layer, KV head) -- the same criterion (largest |q_d|·|k_d|), learned
  online, no skewing. ``partial_ratio=1.0`` gives exact full-key scores.
- GQA: InfiniGen's models are MHA. Here each KV head's rows are (query head in its group, query
  token) pairs; a KV head's ranking is the sum of its rows' (partial) attention probabilities.
- Prediction uses this layer's own queries (digest §10e default), not layer ℓ-1's hidden state.
"""
from __future__ import annotations

import torch

from ._common import Stopwatch, kv_rows, row_probs, scaled_scores, topk_sorted
from .base import Selection, Stage


class InfiniGen:
    """Threshold-then-cap token selection during text generation only.

    alpha:         logit margin below the row maximum counted as "critical" (InfiniGen accuracy
                   harness for Llama: 5).
    cap:           max fraction of candidates fetched (paper's accuracy runs: "up to 50%").
    partial_ratio: fraction of head dims in the partial query/key (InfiniGen: 0.1-0.2).
    """

    name = "infinigen"
    retrieves_at_frame = False

    def __init__(self, alpha: float = 5.0, cap: float = 0.5, partial_ratio: float = 0.2):
        if not 0.0 < cap <= 1.0:
            raise ValueError(f"infinigen: cap must be in (0, 1], got {cap}")
        if not 0.0 < partial_ratio <= 1.0:
            raise ValueError(f"infinigen: partial_ratio must be in (0, 1], got {partial_ratio}")
        self.alpha, self.cap, self.partial_ratio = float(alpha), float(cap), float(partial_ratio)

    def reset(self, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        self.head_dim = head_dim
        self.n_partial = max(1, round(self.partial_ratio * head_dim))
        # Running sums of |k| and |q| per (layer, KV head, dim): the online stand-in for calibration.
        self._abs_k = [torch.zeros(n_kv_heads, head_dim) for _ in range(n_layers)]
        self._abs_q = [torch.zeros(n_kv_heads, head_dim) for _ in range(n_layers)]

    def observe(self, layer: int, new_keys: torch.Tensor, start: int, stage: Stage, frame_id: int | None) -> None:
        self._abs_k[layer] += new_keys.detach().float().abs().sum(1).cpu()

    def _partial_dims(self, layer: int, rows: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """[Hkv, d'] head dims with the largest running |q_d|·|k_d| (sorted for readability)."""
        self._abs_q[layer] += rows.detach().float().abs().sum(1).cpu()
        abs_k = self._abs_k[layer]
        if not torch.any(abs_k):  # nothing observed (e.g. a policy used stand-alone): use the cache itself
            abs_k = keys.detach().float().abs().sum(1).cpu()
        imp = self._abs_q[layer] * abs_k
        return torch.sort(torch.topk(imp, self.n_partial, dim=-1).indices, dim=-1).values.to(rows.device)

    def _select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
                fixed_topk: bool) -> Selection:
        hkv, n_c = keys.shape[0], int(candidates.numel())
        with Stopwatch() as sw:
            rows = kv_rows(query, hkv)                                    # [Hkv, R, D]
            dims = self._partial_dims(layer, rows, keys)                  # [Hkv, d']
            k_part = torch.gather(keys[:, candidates], 2, dims[:, None, :].expand(-1, n_c, -1))
            q_part = torch.gather(rows, 2, dims[:, None, :].expand(-1, rows.shape[1], -1))
            logits = scaled_scores(q_part, k_part, self.head_dim)          # [Hkv, R, C]
            cap_k = int(self.cap * n_c)
            if fixed_topk:
                k = cap_k
            else:
                crit = logits > logits.amax(-1, keepdim=True) - self.alpha
                k = min(int(crit.sum(-1).float().mean()), cap_k)        # mean over heads and rows
            score = row_probs(logits).sum(1)                               # [Hkv, C]
            indices = [topk_sorted(candidates, score[h], k) for h in range(hkv)]
        r = rows.shape[1]
        stats = dict(rows=hkv * r, scored=hkv * n_c, score_dims=self.n_partial,
                     score_macs=hkv * r * n_c * self.n_partial, k=k, select_s=sw.seconds)
        return Selection(indices, n_c, stats)

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        if stage == "frame" or candidates.numel() == 0:
            return None  # InfiniGen does not retrieve during (frame) prefill: attend to everything
        return self._select(layer, query, keys, candidates, fixed_topk=False)


class InfiniGenP(InfiniGen):
    """InfiniGen extended to frame prefill (V-Rex's InfiniGenP): fixed top-k = cap × candidates at frames."""

    name = "infinigen_p"
    retrieves_at_frame = True

    def select(self, layer: int, query: torch.Tensor, keys: torch.Tensor, candidates: torch.Tensor,
               stage: Stage) -> Selection | None:
        if candidates.numel() == 0:
            return None
        return self._select(layer, query, keys, candidates, fixed_topk=(stage == "frame"))
