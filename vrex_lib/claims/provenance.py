"""What produced a measured number, and the cause a claim row gets when it misses because of it.

A reproduced value measured on this profile's stand-ins (SmolLM2-135M or the tiny random model, the stand-in
vision encoder, the COIN-format fixture or composed streams) misses for a reason of its own (cause
``stand-in-workload``); the same miss measured on the paper's workload (VideoLLM-online 8B on COIN, the ``full``
profile) can only come from this artifact's reconstruction (cause ``model``). :func:`workload_cause` picks one
(docs/DECISIONS.md D190).
"""
from __future__ import annotations

from dataclasses import dataclass

#: What the paper measured its algorithm statistics and accuracies on (§VI.A).
PAPER_WORKLOAD = "VideoLLM-online 8B on COIN"
#: The command that runs the COIN accuracy claims (README "Running the full profile with real data").
FULL_PROFILE_RUN = ("the full profile on a GPU: make reproduce PROFILE=full with COIN_ROOT (COIN.json + videos) and "
                    "the VideoLLM-online checkpoint (LLM_PATH, VISION_PATH, CONNECTOR_PATH)")


@dataclass(frozen=True)
class Provenance:
    """Where a notebook's measured inputs come from.

    profile: the run's profile; model: the LLM's name; vision: the vision encoder's name ('' when none ran);
    data: what was fed, in words (e.g. "the COIN-format fixture data/coin_mini"); paper_workload: True only when
    model and data are the paper's (the full profile on the user's COIN).
    """

    profile: str
    model: str
    vision: str
    data: str
    paper_workload: bool = False

    def describe(self) -> str:
        """'SmolLM2-135M-Instruct + the patch-dct vision encoder on <data> (profile default)'."""
        enc = f" + the {self.vision} vision encoder" if self.vision else ""
        return f"{self.model}{enc} on {self.data} (profile {self.profile})"


def workload_cause(prov: Provenance, specific: str, model_reason: str) -> tuple[str, str]:
    """(cause, cause_detail) of a miss: ``stand-in-workload`` with what differs (``specific``: the evidence for
    this row) unless the inputs are the paper's, then ``model`` with ``model_reason``."""
    if prov.paper_workload:
        return "model", model_reason
    detail = f"measured on {prov.describe()}, not {PAPER_WORKLOAD}"
    return "stand-in-workload", f"{detail}; {specific}" if specific else detail
