"""A content-preserving stand-in vision encoder for the default profile (``docs/DECISIONS.md D40``).

No pretrained vision weights are available offline, and a randomly initialised SigLIP tower maps every frame of
a video to nearly the same tokens (its random attention layers average the content away). This encoder keeps
SigLIP's *interface* and its first layer's *shape* -- a 16×16-pixel, stride-16 patch embedding -- but with fixed,
well-conditioned weights instead of learned ones, and no transformer layers:

    pixels [T, 3, S, S] (SigLIP-normalised)
      ── patch embedding: Conv2d(3, Hv, 16, stride 16) whose filters are the lowest-frequency orthonormal 2-D
         DCT-II basis functions of a 16×16 patch, per colour channel (Hv = 3 · k·k; k = 8 → Hv = 192);
      ── fixed spectral whitening: coefficient (u, v) × (1 + √(u² + v²)) -- natural images have a ~1/f
         amplitude spectrum, so without it the DC (mean colour) terms would dominate every token;
      ── per-patch LayerNorm (no affine; SigLIP's post_layernorm) ─► last_hidden_state [T, P, Hv]
      ── pooler_output = LayerNorm of the mean patch embedding (SigLIP has no CLS token; VideoLLM-online
         uses the pooled output as its "CLS").

The runtime then pools CLS + 3×3 (:func:`~vrex_lib.runtime.model.frame_tokens`) and applies the connector, as
for SigLIP. Orthonormal filters keep distances between patches (up to the discarded high frequencies and the
whitening's fixed gains), so two frames that differ in pixels give different tokens, and the same frame gives
identical tokens -- nothing here is random at run time.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

PATCH = 16  # SigLIP-B/16, SigLIP-L/16-384 patch size

#: Names accepted by ``build_model(..., vision=...)`` for the default and smoke profiles.
VISION_ENCODERS: dict[str, str] = {
    "patch-dct": "patch-embed stand-in (fixed orthonormal 16x16 DCT patch embedding, whitened, LayerNorm)",
    "siglip-random": "randomly initialised SigLIP vision tower (seeded)",
}


def dct_basis(n: int, k: int) -> torch.Tensor:
    """The k×k lowest-frequency orthonormal 2-D DCT-II basis images of an n×n patch, ``[k*k, n, n]`` (float64).

    Rows are ordered by (u, v) with u the vertical frequency; basis (u, v) at pixel (y, x) is
    c_u c_v cos(π(2y+1)u / 2n) cos(π(2x+1)v / 2n), c_0 = √(1/n), c_u = √(2/n).
    """
    if not 1 <= k <= n:
        raise ValueError(f"dct_basis: need 1 <= k <= n, got k={k}, n={n}")
    y = torch.arange(n, dtype=torch.float64)
    u = torch.arange(k, dtype=torch.float64)
    c = torch.full((k,), math.sqrt(2.0 / n), dtype=torch.float64)
    c[0] = math.sqrt(1.0 / n)
    one = c[:, None] * torch.cos(math.pi * (2 * y[None, :] + 1) * u[:, None] / (2 * n))  # [k, n]
    return torch.einsum("uy,vx->uvyx", one, one).reshape(k * k, n, n)


class PatchEmbedEncoder(nn.Module):
    """The stand-in encoder; called like ``SiglipVisionModel``: ``enc(pixel_values=[T, 3, S, S])`` returns an
    object with ``last_hidden_state [T, (S/16)², Hv]`` and ``pooler_output [T, Hv]``, Hv = 3·k².

    k: DCT frequencies kept per axis (8 -> 64 per channel, Hv = 192 like the default profile's SigLIP).
    """

    def __init__(self, k: int = 8, image_size: int = 224):
        super().__init__()
        if image_size % PATCH:
            raise ValueError(f"PatchEmbedEncoder: image_size {image_size} is not a multiple of the {PATCH}-pixel patch")
        basis = dct_basis(PATCH, k)  # [k², 16, 16]
        fu = torch.arange(k, dtype=torch.float64)
        gain = (1.0 + torch.sqrt(fu[:, None] ** 2 + fu[None, :] ** 2)).reshape(k * k)  # 1/f whitening
        w = torch.zeros(3, k * k, 3, PATCH, PATCH, dtype=torch.float64)
        for ch in range(3):
            w[ch, :, ch] = basis * gain[:, None, None]
        self.patch_embedding = nn.Conv2d(3, 3 * k * k, PATCH, stride=PATCH, bias=False)
        self.patch_embedding.weight.data.copy_(w.reshape(3 * k * k, 3, PATCH, PATCH).float())
        self.k, self.image_size, self.hidden_size = k, image_size, 3 * k * k
        self.config = SimpleNamespace(hidden_size=self.hidden_size, image_size=image_size, patch_size=PATCH,
                                      model_type="patch-dct")

    def forward(self, pixel_values: torch.Tensor, **_) -> SimpleNamespace:
        x = self.patch_embedding(pixel_values.to(self.patch_embedding.weight.dtype))  # [T, Hv, g, g]
        patches = x.flatten(2).transpose(1, 2)  # [T, P, Hv]
        hv = patches.shape[-1]
        return SimpleNamespace(last_hidden_state=F.layer_norm(patches, (hv,)),
                               pooler_output=F.layer_norm(patches.mean(1), (hv,)))


def smooth_calibration_frames(n: int, size: int, seed: int) -> torch.Tensor:
    """Seeded smooth RGB images uint8 ``[n, size, size, 3]`` (bilinear up-sampled 4×4 noise): natural-image-like
    inputs for scaling the connector, instead of white noise whose patches cancel out when pooled."""
    g = torch.Generator().manual_seed(seed)
    low = torch.rand(n, 3, 4, 4, generator=g) * 255.0
    img = F.interpolate(low, size=(size, size), mode="bilinear", align_corners=True)
    return img.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()
