"""Record REAL operands of the LXE (DPE and VPE) from SmolLM2-135M-Instruct on text, as BF16 bit patterns.

    .venv/bin/python data/make_lxe_operands.py [--out data/traces/lxe_operands.npz]

One forward pass of SmolLM2-135M-Instruct (offline weights, ``vrex_lib.llm_weights``) over the first ``--tokens``
tokens of data/text/alice_ch1.txt. For each layer in ``--layers`` (keys prefixed ``l<layer>_``), the last
``--keep`` tokens' operands of the LXE's operations, rounded to BF16 (RNE, as a BF16 accelerator stores them):

* DPE (matrix-vector products): the weight rows of q_proj, gate_proj and down_proj (``--rows`` each, evenly spaced)
  and their input activations (``q_in`` = input_layernorm's output, ``mlp_in`` = post_attention_layernorm's,
  ``down_in`` = SiLU(gate) x up);
* VPE: ``resid`` (the residual stream entering input_layernorm) and ``gamma`` (its weight) for RMSNorm;
  ``gate`` (gate_proj's output) for SiLU; ``q_pre`` (q_proj's output, pre-RoPE) with ``cos`` / ``sin`` of the
  tokens' positions for RoPE; ``scores`` (q k^T / sqrt(d) of ``--heads`` query heads, post-RoPE, causal; masked
  entries -inf) for softmax.

The file holds only bit patterns of a few rows of weights and activations (< 1 MB), small enough to commit; the
tests and notebook 05 read it (``vrex_lib.hw.lxe_vectors``) without loading the model.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent


def bf16_bits(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().contiguous().to(torch.bfloat16).view(torch.int16).numpy().astype(np.uint16)


def capture(model, ids: torch.Tensor, layers: list[int]) -> dict:
    """Hooks on each layer's norm, projections and MLP: {layer: {name: tensor [T, ...]}}."""
    got: dict = {l: {} for l in layers}
    hooks = []
    for l in layers:
        blk = model.model.layers[l]

        def norm_hook(mod, inp, out, l=l):
            got[l]["resid"], got[l]["q_in"] = inp[0][0], out[0]

        def out_hook(name, l=l):
            return lambda mod, inp, out: got[l].__setitem__(name, out[0])

        def in_hook(name, l=l):
            return lambda mod, inp, out: got[l].__setitem__(name, inp[0][0])

        hooks += [blk.input_layernorm.register_forward_hook(norm_hook),
                  blk.post_attention_layernorm.register_forward_hook(out_hook("mlp_in")),
                  blk.self_attn.q_proj.register_forward_hook(out_hook("q_pre")),
                  blk.mlp.gate_proj.register_forward_hook(out_hook("gate")),
                  blk.mlp.down_proj.register_forward_hook(in_hook("down_in"))]
    try:
        with torch.no_grad():
            model(input_ids=ids[None], use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "traces" / "lxe_operands.npz")
    ap.add_argument("--layers", type=int, nargs="*", default=[3, 20])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--keep", type=int, default=24, help="last tokens whose operands are kept")
    ap.add_argument("--rows", type=int, default=12, help="weight rows kept per projection")
    ap.add_argument("--heads", type=int, nargs="*", default=[0, 4], help="query heads of the softmax rows")
    a = ap.parse_args()

    from vrex_lib.config import seed_everything
    from vrex_lib.keys import capture_qk
    from vrex_lib.llm_weights import load_smollm2

    seed_everything(0)
    text_path = ROOT / "data" / "text" / "alice_ch1.txt"
    model, tok = load_smollm2()
    ids = tok(text_path.read_text(), return_tensors="pt").input_ids[0][: a.tokens]
    T = ids.numel()
    acts = capture(model, ids, a.layers)
    qk = capture_qk(model, input_ids=ids, layers=a.layers)
    pos = torch.arange(T)[None]
    cos, sin = model.model.rotary_emb(torch.zeros(1, T, 1), pos)
    keep = slice(T - a.keep, T)
    arrays: dict = {"meta_layers": np.asarray(a.layers), "meta_tokens": np.asarray([T]),
                    "meta_keep": np.asarray([a.keep]), "cos": bf16_bits(cos[0, keep]), "sin": bf16_bits(sin[0, keep])}
    for l in a.layers:
        blk, g, pre = model.model.layers[l], acts[l], f"l{l}_"
        for name in ("resid", "q_in", "mlp_in", "q_pre", "gate", "down_in"):
            arrays[pre + name] = bf16_bits(g[name][keep])
        arrays[pre + "gamma"] = bf16_bits(blk.input_layernorm.weight)
        for name, lin in (("q_proj", blk.self_attn.q_proj), ("gate_proj", blk.mlp.gate_proj),
                          ("down_proj", blk.mlp.down_proj)):
            w = lin.weight
            arrays[pre + name] = bf16_bits(w[np.linspace(0, w.shape[0] - 1, a.rows).round().astype(int)])
        q, k = qk[l]
        grp = q.shape[0] // k.shape[0]
        rows = []
        for h in a.heads:
            s = (q[h, keep] @ k[h // grp].T) / math.sqrt(q.shape[-1])
            s = s.masked_fill(torch.arange(T)[None] > torch.arange(T - a.keep, T)[:, None], float("-inf"))
            rows.append(s)
        arrays[pre + "scores"] = bf16_bits(torch.cat(rows))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(a.out)
    print(f"wrote {a.out} ({a.out.stat().st_size / 1e3:.0f} kB): layers {a.layers}, {T} tokens, last {a.keep} kept; "
          + ", ".join(f"{k} {v.shape}" for k, v in arrays.items() if k.startswith(f"l{a.layers[0]}_")))


if __name__ == "__main__":
    main()
