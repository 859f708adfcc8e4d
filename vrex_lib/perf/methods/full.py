"""No offload: ``full`` (VideoLLM-online's plain cache, nothing selected) and ``oaken`` (Oaken's 4-bit KV
quantisation keeps the cache on the device, Fig. 15; Kim et al., ISCA 2025)."""
from __future__ import annotations

from .base import SimMethod

MODELS = (SimMethod("full", layout="all", offload=False), SimMethod("oaken", layout="all", offload=False, kv_bits=4))
