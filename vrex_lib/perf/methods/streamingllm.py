"""StreamingLLM (Xiao et al., ICLR 2024) as the simulator's ``streamingllm``: attention sinks + the recent window
on the device, everything older evicted. No prediction, no fetch, no offload write: the step attends to what the
device holds (the KVMU capacity every method gets) and the link stays idle. Run on the GPUs as a Fig. 13 baseline
beside the paper's (it is not one of the paper's)."""
from __future__ import annotations

from .base import SimMethod

MODELS = (SimMethod("streamingllm", layout="all", evicts=True),)
