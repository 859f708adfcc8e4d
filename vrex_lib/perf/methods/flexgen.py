"""FlexGen's KV placement (Sheng et al., ICML 2023, §4) as the simulator's ``flexgen``.

The KV cache is split between device memory and the offload tier; per layer the offloaded part is streamed back,
overlapped with the previous layer's compute (FlexGen's block schedule), and attention runs on the device over all
of it: no selection, so the whole offloaded region moves every step. The device share is the newest
``recent_capacity`` tokens, the capacity every method gets. FlexGen's CPU delegation of attention needs the KV in
host DRAM next to a host CPU; on the edge the KV is on an SSD, so it does not apply there, and it is not modelled on
the server either (docs/PERF_MODEL.md).
"""
from __future__ import annotations

from .base import SimMethod

MODELS = (SimMethod("flexgen", layout="all"),)
