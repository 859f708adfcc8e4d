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


def workload_cause(prov: Provenance, driver: str, model_reason: str) -> tuple[str, str]:
    """(cause, cause_detail) of a miss, by counterfactual (docs/DECISIONS.md D190, D405): ``stand-in-workload`` only
    when ``driver`` names what of this profile's inputs drives the miss -- the statistic recomputed on the
    paper-stated input, or the measured quantity that sets the value (e.g. 'every layer it is consulted in attends
    densely') -- and the inputs are not the paper's; else ``model`` with ``model_reason`` (a stand-in profile
    alone is no evidence that the workload explains a miss)."""
    if prov.paper_workload:
        return "model", model_reason
    if not driver:
        return "model", (f"{model_reason}; measured on {prov.describe()}, but no measured quantity of that input is "
                         "shown to drive the miss")
    return "stand-in-workload", f"measured on {prov.describe()}, not {PAPER_WORKLOAD}; {driver}"
