"""KV-retrieval policies of every method the paper compares, behind one registry built from the method table
(:mod:`vrex_lib.methods`: names, paper rows, simulator methods, stages).

    from vrex_lib.retrieval import POLICIES, make_policy
    policy = make_policy("resv", th_r_wics=0.3)      # == POLICIES["resv"](th_r_wics=0.3)

| name          | paper row (Table II)      | retrieves at frame | selection                                        |
|---------------|---------------------------|--------------------|--------------------------------------------------|
| ``full``      | VideoLLM-Online           | no (attends all)   | none                                             |
| ``flexgen``   | FlexGen baseline (Fig 13) | fetches all        | every candidate (accounting differs from full)   |
| ``infinigen`` | InfiniGen                 | no                 | partial-key logits > max−α, k capped, per head   |
| ``infinigen_p``| InfiniGenP               | yes                | as InfiniGen; fixed top-k (≤ 50 %) at frames     |
| ``rekv``      | ReKV                      | yes                | mean-key frame blocks, fixed top-k, per layer    |
| ``resv``      | V-Rex's ReSV              | yes                | hash clusters + WiCSum, per layer × KV head      |
| ``resv_noclust`` | Fig. 19 "w/o clustering" | yes             | WiCSum over individual keys                      |
| ``resv_candwics`` | (D7 alternative)        | yes                | ReSV, WiCSum total over candidate tokens only    |

ReKV and InfiniGen follow their reference repositories by default (``rekv``: ``mode='question'``, pre-RoPE
scoring once per question at every layer, 64 frames; ``infinigen``: ``mode='reference'``, calibrated skewing, previous-layer
speculation, layers 0-1 dense); ``mode='frame'`` / ``'legacy'`` and ``mode='oracle'`` select the variants.
The retrieval ratio is defined once in :mod:`vrex_lib.retrieval.ratio` (docs/DECISIONS.md D7).

Every policy implements :class:`~vrex_lib.retrieval.base.RetrievalPolicy`. ``Selection.stats`` uses
common keys so the hardware and performance models can count prediction work for any method:
``rows`` (query rows scored, summed over KV heads), ``scored`` (keys / block means / centroids scored,
summed over KV heads), ``score_dims`` (dims per dot product), ``score_macs`` (total multiply-adds of
the prediction), ``select_s`` (measured wall time of ``select``); plus method-specific counters
(``k``; ``blocks``, ``blocks_selected``; ``clusters``, ``clusters_selected``, ``hash_macs``).
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
from collections.abc import Callable

from .. import methods
from ..config import ReSVConfig, refuse_renamed
from .base import PolicyBase, RetrievalPolicy, Selection, Stage, check_policy
from .flexgen import FlexGen
from .full import FullAttention
from .infinigen import InfiniGen, InfiniGenP
from .ratio import ReSVCandidatesWiCSum, retrieval_ratio
from .rekv import ReKV
from .resv_policy import ReSV, ReSVNoClustering, ReSVRescore



def _policy_class(row: methods.Method) -> Callable[..., RetrievalPolicy]:
    """The class a row names as ``module.Class`` under this package (a new method needs no edit here)."""
    module, cls = row.policy.rsplit(".", 1)
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


#: name -> policy class, one per row of the method table (:data:`vrex_lib.methods.METHODS`), in its order.
POLICIES: dict[str, Callable[..., RetrievalPolicy]] = {m.name: _policy_class(m) for m in methods.METHODS.values()}

#: The methods of Table II, in the paper's row order (``full`` = VideoLLM-Online).
TABLE2_METHODS: tuple[str, ...] = methods.TABLE2


def make_policy(name: str, **kwargs) -> RetrievalPolicy:
    """Build the policy registered under ``name`` with its config kwargs; unknown names list the choices, an old
    option name is refused with the new one."""
    cls = POLICIES[methods.get(name).name]
    refuse_renamed(name, kwargs, renamed_options(name))
    return cls(**kwargs)


def takes_resv_config(name: str) -> bool:
    """True when ``name``'s policy is configured by a :class:`~vrex_lib.config.ReSVConfig` (its ``cfg``), so a study
    sweeping ReSV's hyper-parameters passes it one."""
    return "cfg" in inspect.signature(POLICIES[methods.get(name).name].__init__).parameters


def accepted_options(name: str) -> tuple[str, ...]:
    """The option names ``name``'s policy takes: its constructor's parameters and, for a policy configured by a
    :class:`~vrex_lib.config.ReSVConfig`, that config's fields (passed as keyword overrides)."""
    cls = POLICIES[methods.get(name).name]
    params = [p.name for p in inspect.signature(cls.__init__).parameters.values()
              if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if takes_resv_config(name):
        params += [f.name for f in dataclasses.fields(ReSVConfig) if f.name not in params]
    return tuple(params)


def renamed_options(name: str) -> dict[str, str]:
    """Old option name -> the name that holds its meaning now, for ``name``'s policy (docs/DECISIONS.md D371)."""
    cls = POLICIES[methods.get(name).name]
    return dict(ReSVConfig.RENAMED) if takes_resv_config(name) else dict(getattr(cls, "renamed_options", {}))


def check_policy_kwargs(name: str, kwargs: dict, flag: str = "--method-kwargs") -> None:
    """Build the policy once to check every option's name, type and range (the policies' constructors and
    :class:`~vrex_lib.config.ReSVConfig` validate them), before any file is written or any model loads.

    Raises a one-line ValueError naming ``flag``, the method and the option. Building is cheap: the policies that
    need the model (calibration, q/k capture) do that work in ``bind``, not here.
    """
    if not isinstance(kwargs, dict):
        raise ValueError(f"{flag} must be a JSON object of {name!r}'s options, got {kwargs!r}; "
                         "e.g. '{\"th_r_wics\": 0.3}' for resv")
    cls = POLICIES[methods.get(name).name]
    accepted = accepted_options(name)
    try:
        refuse_renamed(f"{flag} for method {name!r}", kwargs, renamed_options(name))
    except ValueError as err:
        raise ValueError(f"{err} (its options are {', '.join(accepted) or 'none'})") from None
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ValueError(f"{flag} {json.dumps(kwargs)} does not fit method {name!r}: unknown option(s) "
                         f"{', '.join(unknown)}; its options are {', '.join(accepted) or 'none'}")
    try:
        cls(**kwargs)
    except TypeError as err:  # an option the constructor does not take
        raise ValueError(f"{flag} {json.dumps(kwargs)} does not fit method {name!r} ({err}); its options are "
                         f"{', '.join(accepted) or 'none'}") from None
    except ValueError as err:
        raise ValueError(f"{flag} {json.dumps(kwargs)} for method {name!r}: {err}") from None


__all__ = ["POLICIES", "TABLE2_METHODS", "FlexGen", "FullAttention", "InfiniGen", "InfiniGenP", "ReKV", "ReSV",
           "ReSVCandidatesWiCSum", "ReSVNoClustering", "ReSVRescore", "RetrievalPolicy", "Selection", "Stage",
           "accepted_options", "check_policy_kwargs", "make_policy", "renamed_options", "retrieval_ratio",
           "takes_resv_config"]
