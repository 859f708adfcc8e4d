"""Step 1 of ReSV (paper §IV.B, Fig. 8): random-hyperplane hash bits and their Hamming distance.

Codes are packed little-endian into int64: bit i (value 2**i) is set iff ``key · hyperplane_i > 0``
(x <= 0 -> 0, as in the paper). Up to 64 hyperplanes fit; with 64, bit 63 is int64's sign bit
(two's complement), which XOR and the byte-wise popcount below handle correctly.
"""
from __future__ import annotations

import torch

MAX_BITS = 64

# popcount of every byte value, used by :func:`popcount` (torch has no native popcount).
_POP8 = torch.tensor([bin(i).count("1") for i in range(256)], dtype=torch.int64)


def make_hyperplanes(n_hp: int, dim: int, seed: int) -> torch.Tensor:
    """N_hp random hyperplanes ``[n_hp, dim]`` (float32, i.i.d. N(0, 1), docs/DECISIONS.md D3), reproducible from ``seed``."""
    if not 1 <= n_hp <= MAX_BITS:
        raise ValueError(f"n_hp={n_hp}: codes are packed into int64, so 1 <= n_hp <= {MAX_BITS}")
    g = torch.Generator().manual_seed(int(seed))
    return torch.randn(n_hp, dim, generator=g, dtype=torch.float32)


def layer_seed(seed: int, layer: int) -> int:
    """Seed of layer ``layer``'s hyperplanes: the global seed offset per layer (docs/DECISIONS.md D3)."""
    return int(seed) * 1009 + int(layer)


def projection_signs(keys: torch.Tensor, hyperplanes: torch.Tensor) -> torch.Tensor:
    """``keys[..., D] @ hyperplanes[n_hp, D]^T > 0`` -> bool ``[..., n_hp]``.

    The projection is computed in float64 so that the fast path and the NumPy reference agree on the sign
    (a float32 matmul's summation order could flip projections within ~1e-7 of zero).
    """
    if keys.shape[-1] != hyperplanes.shape[-1]:
        raise ValueError(f"keys have dim {keys.shape[-1]} but hyperplanes have dim {hyperplanes.shape[-1]}")
    h = hyperplanes.to(device=keys.device, dtype=torch.float64)
    return (keys.to(torch.float64) @ h.T) > 0


def pack_bits(bits: torch.Tensor) -> torch.Tensor:
    """bool ``[..., n_hp]`` -> int64 codes ``[...]`` with bit i = bits[..., i]."""
    n = bits.shape[-1]
    weights = torch.ones(n, dtype=torch.int64, device=bits.device) << torch.arange(n, device=bits.device)
    # Distinct powers of two: the sum is a bitwise OR, and int64 wrap-around makes bit 63 the sign bit.
    return (bits.to(torch.int64) * weights).sum(-1)


def hash_bits(keys: torch.Tensor, hyperplanes: torch.Tensor) -> torch.Tensor:
    """Step 1 (§IV.B, Fig. 8; ``reference.hash_bits_ref``).

    Hash codes of ``keys[..., D]`` under ``hyperplanes[n_hp, D]`` -> int64 ``[...]`` (bit i = [key·h_i > 0])."""
    return pack_bits(projection_signs(keys, hyperplanes))


def popcount(x: torch.Tensor) -> torch.Tensor:
    """Number of set bits of each int64 in ``x`` (two's complement: all 64 bits counted)."""
    lut = _POP8.to(x.device)
    out = torch.zeros_like(x, dtype=torch.int64)
    for i in range(8):  # arithmetic shift is harmless: the & 255 keeps exactly byte i
        out += lut[(x >> (8 * i)) & 255]
    return out


def hamming(a: torch.Tensor, b: torch.Tensor, n_bits: int = MAX_BITS) -> torch.Tensor:
    """Hamming distance popcount(a XOR b) of int64 codes, broadcasting. ``n_bits`` <= 32 skips the high bytes."""
    x = torch.bitwise_xor(a, b)
    if n_bits >= MAX_BITS:
        return popcount(x)
    lut = _POP8.to(x.device)
    out = lut[x & 255]
    for i in range(1, (n_bits + 7) // 8):
        out = out + lut[(x >> (8 * i)) & 255]
    return out
