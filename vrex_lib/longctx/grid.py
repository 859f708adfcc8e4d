"""What the study runs: the methods (policy + kwargs) and the grid of trials, per profile (docs/DECISIONS.md D165).

    methods = method_specs(("full", "resv", "resv@r0.7", "resv@text"))
    grid = study_grid("default")            # the default profile's share of make reproduce
    grid = study_grid("default", "power")   # the comparison with power: 40 trials per cell at 1K and 2K
    grid = study_grid("default", "full")    # the full grid: 1K-8K x 5 depths x 4 seeds x both tasks (40 per cell)

Method names: a registry policy (``full``, ``flexgen``, ``infinigen``, ``infinigen_p``, ``rekv``, ``resv``), or a
variant ``<policy>@<tag>``: ``rekv@frame`` (ReKV deciding at every step, the paper's Table II row), ``resv@r0.5``
(ReSV at Th_r-wics = 0.5), ``resv@text`` / ``resv@text-r0.5`` (ReSV at the question and answer only: the document
is encoded densely, as InfiniGen and ReKV's reference do); the same tags apply to ``resv_candwics`` (ReSV with the
WiCSum total over candidate tokens only, docs/DECISIONS.md D7) and ``resv_noclust``; the bounded ReSV variants
(``resv_best``, docs/DECISIONS.md D490) take a token-budget part ``b<share>`` (``resv_best@text-b0.015``: 1.5 % of
the candidates). ``exact@k0.01`` is a reference,
not a paper method: exact attention scores, the top 1 % of candidates per KV head, at the question and answer.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from .. import methods as method_table
from ..config import STUDY_GRIDS, ReSVConfig, arg_name, profile_config
from ..resv.bounded import BoundedConfig
from ..retrieval import POLICIES, make_policy, takes_resv_config
from .policy import ExactTopK, TextStageOnly
from .task import TASKS

#: Variant tags this study adds after a method (ReSV encoding the document densely, as InfiniGen and ReKV's
#: reference do).
_STUDY_TAGS: dict[str, tuple[str, ...]] = {"resv": ("text",)}
#: Every method of the method table's 'longctx' rows, each followed by its measured variants (``rekv@frame``, ReKV
#: deciding at every step, the paper's Table II row) and this study's tags (the notebook's order).
ALL_METHODS: tuple[str, ...] = tuple(
    n for m in method_table.LONGCTX
    for n in (m, *method_table.variants_of([m]), *(f"{m}@{t}" for t in _STUDY_TAGS.get(m, ()))))
_TAG = re.compile(r"^(?P<policy>[a-z_]+)(@(?P<tag>.+))?$")
#: Policies of this study that are not retrieval methods of the paper (references).
LOCAL_POLICIES = {"exact": ExactTopK}


@dataclass(frozen=True)
class StudyMethod:
    """One compared method: the registry policy, its kwargs (sorted pairs) and whether frame steps are dense."""

    name: str
    policy: str
    kwargs: tuple[tuple[str, object], ...] = ()
    text_only: bool = False

    def build(self, resv: ReSVConfig) -> object | None:
        """The policy object (None for ``full``: no policy, full attention)."""
        if self.policy == "full":
            return None
        kw = dict(self.kwargs)
        if self.policy in LOCAL_POLICIES:
            return LOCAL_POLICIES[self.policy](**kw)
        p = make_policy(self.policy, cfg=resv, **kw) if takes_resv_config(self.policy) else make_policy(self.policy,
                                                                                                         **kw)
        return TextStageOnly(p) if self.text_only else p


def method_spec(name: str) -> StudyMethod:
    """Parse a method name (see the module docstring); an unknown one is an error listing the forms."""
    m = _TAG.match(name)
    forms = ("a policy (" + ", ".join(POLICIES) + "), rekv@frame, infinigen@a<alpha>, streamingllm@w<window>, "
             "resv@r<ratio>, resv@text, resv@text-r<ratio> "
             "(parts: text, r<ratio>, " + ", ".join(READING_TAGS) + ", s<shortlist> for resv_rescore, b<budget> for "
             + ", ".join(p for p in POLICIES if _bounded(p)) + ") "
             "or the reference exact@k<frac>")
    if not m or m["policy"] not in {**POLICIES, **LOCAL_POLICIES}:
        raise ValueError(f"long-context study: unknown method {name!r}; use {forms}")
    pol, tag = m["policy"], m["tag"]
    if pol == "exact":
        k = re.fullmatch(r"k(?P<f>\d*\.?\d+)", tag or "")
        if k is None or not 0.0 < float(k["f"]) <= 1.0:
            raise ValueError(f"long-context study: {name!r}: the exact reference needs a budget exact@k<frac>, "
                             "frac in (0, 1], e.g. exact@k0.01")
        return StudyMethod(name, pol, (("frac", float(k["f"])),))
    if tag is None:
        return StudyMethod(name, pol)
    if pol == "rekv" and tag == "frame":
        return StudyMethod(name, pol, (("mode", "frame"),))
    budget = _budget_tag(name, pol, tag)
    if budget is not None:
        return budget
    return _resv_variant(name, pol, tag, forms)


#: Budget tags of the equal-budget curves (docs/DECISIONS.md D482): InfiniGen's alpha, StreamingLLM's window (tokens).
#: From the method table's :class:`~vrex_lib.methods.Budget` records; ReSV's Th_r-wics is its ``r`` reading tag.
BUDGET_TAGS: dict[str, tuple[str, str, type]] = {
    m.name: (m.budget.tag, m.budget.option, m.budget.kind) for m in method_table.METHODS.values()
    if m.budget is not None and m.budget.study and m.budget.option != "th_r_wics"}


def _budget_tag(name: str, pol: str, tag: str) -> StudyMethod | None:
    """``infinigen@a<alpha>`` / ``streamingllm@w<window>``; None for another policy."""
    if pol not in BUDGET_TAGS:
        return None
    letter, field, kind = BUDGET_TAGS[pol]
    m = re.fullmatch(letter + r"(?P<v>\d*\.?\d+)", tag)
    if m is None or float(m["v"]) <= 0 or (kind is int and not m["v"].isdigit()):
        raise ValueError(f"long-context study: {name!r}: {pol} takes a budget tag {pol}@{letter}<{field}> with "
                         f"{field} > 0{' (tokens)' if kind is int else ''}")
    return StudyMethod(name, pol, ((field, kind(m["v"])),))


#: ReSV variant tag parts -> the ReSVConfig field they set: the D1-D4 alternatives (the literal Eq. 1-3 on raw
#: scores, granularity per layer, the concatenated layer key hashed, the cluster code re-hashed from the mean).
READING_TAGS: dict[str, tuple[str, object]] = {"raw": ("score", "raw"), "layer": ("granularity", "layer"),
                                               "concat": ("hash_mode", "concat"), "mean": ("code_rule", "mean")}


#: resv_rescore's shortlist ranking as a tag part (vrex_lib.resv.rescore.RANKS).
RESCORE_RANKS: tuple[str, ...] = ("bound", "centroid", "mass")


def _resv_variant(name: str, pol: str, tag: str, forms: str) -> StudyMethod:
    """``<resv policy>@<part>-<part>...``: parts ``text``, ``r<Th_r-wics>``, :data:`READING_TAGS` keys,
    ``s<shortlist>`` for ``resv_rescore`` and ``b<budget>`` for the bounded variants."""
    if not takes_resv_config(pol):
        raise ValueError(f"long-context study: unknown variant {name!r}; use {forms}")
    kw: dict[str, object] = {}
    text = False
    for part in tag.split("-"):
        num = re.fullmatch(r"(?P<k>[rsb])(?P<v>\d*\.?\d+)", part)
        if part == "text" and not text:
            text = True
        elif part in RESCORE_RANKS and pol == "resv_rescore" and "rank" not in kw:
            kw["rank"] = part
        elif part in READING_TAGS and READING_TAGS[part][0] not in kw:
            kw[READING_TAGS[part][0]] = READING_TAGS[part][1]
        elif num and num["k"] == "r" and "th_r_wics" not in kw:
            kw["th_r_wics"] = float(num["v"])
            if not 0.0 < kw["th_r_wics"] <= 1.0:
                raise ValueError(f"long-context study: {name!r}: Th_r-wics must be in (0, 1]")
        elif num and num["k"] == "s" and pol == "resv_rescore" and "shortlist" not in kw:
            kw["shortlist"] = float(num["v"])
            if not 0.0 < kw["shortlist"] <= 1.0:
                raise ValueError(f"long-context study: {name!r}: the shortlist must be in (0, 1]")
        elif num and num["k"] == "b" and _bounded(pol) and "budget" not in kw:
            kw["budget"] = float(num["v"])
            if not 0.0 < kw["budget"] <= 1.0:
                raise ValueError(f"long-context study: {name!r}: the token budget must be in (0, 1]")
        else:
            raise ValueError(f"long-context study: unknown variant {name!r} (part {part!r}); use {forms}")
    return StudyMethod(name, pol, tuple(sorted(kw.items())), text_only=text)


def _bounded(pol: str) -> bool:
    """True for a bounded ReSV variant (its policy's defaults are a :class:`BoundedConfig`, with a ``budget``)."""
    return isinstance(getattr(POLICIES[pol], "defaults", None), BoundedConfig)


def method_specs(names) -> tuple[StudyMethod, ...]:
    specs = tuple(method_spec(n) for n in names)
    dup = sorted({s.name for s in specs if [x.name for x in specs].count(s.name) > 1})
    if dup:
        raise ValueError(f"long-context study: methods {dup} are listed twice")
    if not specs:
        raise ValueError("long-context study: no methods given")
    return specs


@dataclass(frozen=True)
class Block:
    """Trials of one task: every (length, depth, seed) combination. ``methods``: the methods run on these trials
    (empty: the grid's); a trial in several blocks runs the union."""

    task: str
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    seeds: tuple[int, ...] = (0,)
    methods: tuple[str, ...] = ()


@dataclass(frozen=True)
class StudyGrid:
    """The trials and the runtime of one study.

    blocks: the trials; lengths are the KV-cache length when the question arrives (system prompt + document).
    methods: method names (:func:`method_spec`); chunk_tokens: document tokens per streamed step (one "frame");
    kv_capacity: device-tier capacity (``RuntimeConfig.kv_capacity``), below every length so the document is
    offloaded; max_new_tokens: answer budget; system_prompt: the pinned sink text.
    """

    name: str
    model_profile: str
    blocks: tuple[Block, ...]
    methods: tuple[str, ...]
    chunk_tokens: int = 256
    kv_capacity: int = 512
    max_new_tokens: int = 16
    system_prompt: str = "You are a helpful assistant."

    def __post_init__(self) -> None:
        if self.chunk_tokens < 1 or self.kv_capacity < 1 or self.max_new_tokens < 1:
            raise ValueError(f"study grid {self.name!r}: chunk_tokens, kv_capacity and max_new_tokens must be >= 1")
        for b in self.blocks:
            if b.task not in TASKS:
                raise ValueError(f"study grid {self.name!r}: unknown task {b.task!r}; choose {', '.join(TASKS)}")
            if any(not 0.0 <= d <= 1.0 for d in b.depths):
                raise ValueError(f"study grid {self.name!r}: depths {b.depths} must lie in [0, 1]")
            if min(b.lengths) <= self.kv_capacity:
                raise ValueError(f"study grid {self.name!r}: context length {min(b.lengths)} does not exceed "
                                 f"kv_capacity {self.kv_capacity}, so nothing would be offloaded; lower kv_capacity")
        method_specs(self.methods)
        extra = sorted({m for b in self.blocks for m in b.methods} - set(self.methods))
        if extra:
            raise ValueError(f"study grid {self.name!r}: block methods {extra} are not among the grid's methods; "
                             "add them to its methods")

    def cell_methods(self, cell: tuple[str, int, float, int]) -> tuple[str, ...]:
        """The methods run on trial ``cell`` = (task, length, depth, seed), in the grid's order."""
        task, n, depth, seed = cell
        want: set[str] = set()
        for b in self.blocks:
            if b.task == task and n in b.lengths and float(depth) in map(float, b.depths) and seed in b.seeds:
                want |= set(b.methods or self.methods)
        return tuple(m for m in self.methods if m in want)

    def trials(self) -> list[tuple[str, int, float, int]]:
        """(task, length, depth, seed) of every trial, in run order (short contexts first)."""
        cells = {(b.task, n, float(d), s) for b in self.blocks for n in b.lengths for d in b.depths for s in b.seeds}
        return sorted(cells, key=lambda c: (c[1], list(TASKS).index(c[0]), c[3], c[2]))

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(sorted({n for b in self.blocks for n in b.lengths}))

    def replace(self, **changes) -> "StudyGrid":
        return dataclasses.replace(self, **changes)


_DEPTHS_FULL = (0.0, 0.25, 0.5, 0.75, 1.0)
#: ReSV along Th_r-wics at the question and answer (cheap: one shared prefill), the D7 alternative WiCSum total, the
#: paper's own Fig. 19 ablation (ReSV w/o clustering) and the exact reference.
_TEXT_SWEEP = ("resv@text-r0.7", "resv@text-r0.9", "resv_candwics@text", "resv_noclust@text", "exact@k0.01")
#: Every other reading of ReSV (docs/DECISIONS.md D260): the D1-D4 alternatives, the candidates-only total at a
#: higher Th_r-wics, and the beyond-the-paper re-scoring along its shortlist ranking and size (D262).
READINGS = ("resv@text-raw", "resv@text-layer", "resv@text-concat", "resv@text-mean", "resv_candwics@text-r0.5",
            "resv_rescore@text-bound-s0.02", "resv_rescore@text-centroid-s0.02", "resv_rescore@text-mass-s0.1")
#: The beyond-the-paper variant the default grid measures too (one shared prefill: ~2 s a trial on 2 cores).
_BEYOND_DEFAULT = ("resv_rescore@text-bound-s0.02",)
#: The full grid adds ReSV streaming (frame-stage retrieval too) along the sweep.
_SWEEP = ("resv@r0.1", "resv@r0.5", "resv@r0.7", "resv@r0.9", "resv@text-r0.1", "resv@text-r0.5",
          "exact@k0.05") + _TEXT_SWEEP + READINGS
#: 5 depths x 4 seeds x 2 tasks = 40 trials per (method, context length) cell (D260).
_SEEDS_FULL = (0, 1, 2, 3)


def _power_methods() -> tuple[str, ...]:
    """The methods compared with power (docs/DECISIONS.md D481), from the method table: full attention and one method
    per policy family of the Table II and external rows that run in this study (InfiniGen, ReKV's reference, ReSV,
    StreamingLLM), ReSV also at the question (``@text``), the paper's ablation rows (Fig. 19's ReSV w/o clustering)
    at the question, the exact top-1 % reference, and every method the table marks as an alternative that runs in
    this study (role 'alternative', runs_in 'longctx'; a ReSV-family one at the question) -- so a method registered
    there joins the comparison."""
    rows = method_table.METHODS
    first: dict[str, str] = {}
    for m in method_table.LONGCTX:
        first.setdefault(rows[m].family, m)
    paper = [m for m in method_table.LONGCTX if rows[m].role in ("table2", "external") and first[rows[m].family] == m]
    text = [f"{m}@text" for m in paper if takes_resv_config(m)]
    ablation = [f"{m}@text" if takes_resv_config(m) else m for m in method_table.FIG19 if rows[m].role == "ablation"]
    alt = [f"{m}@text" if takes_resv_config(m) else m for m in method_table.LONGCTX if rows[m].role == "alternative"]
    return tuple(dict.fromkeys(paper + text + ablation + ["exact@k0.01"] + alt))


POWER_METHODS: tuple[str, ...] = _power_methods()
#: 10 depths spread over the document x 4 seeds = 40 trials per (method, context length, task) cell (D481).
POWER_DEPTHS: tuple[float, ...] = (0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95)
POWER_SEEDS: tuple[int, ...] = (0, 1, 2, 3)
#: Budget values per method tag (the policy's default is the plain name, listed by the method table).
BUDGET_VALUES: dict[str, tuple] = {"exact": (0.0025, 0.005, 0.01, 0.02, 0.04, 0.08),
                                   **{m.name: m.budget.study for m in method_table.METHODS.values()
                                      if m.budget is not None and m.budget.study}}


def _budget_methods() -> tuple[str, ...]:
    names = [f"exact@k{k:g}" for k in BUDGET_VALUES["exact"]]
    names += [m for m in POWER_METHODS if method_spec(m).policy == "resv" and method_spec(m).text_only
              and not method_spec(m).kwargs]
    names += [f"resv@text-r{r:g}" for r in BUDGET_VALUES["resv"]]
    for pol, (letter, _, _) in BUDGET_TAGS.items():
        names += [pol] + [f"{pol}@{letter}{v:g}" for v in BUDGET_VALUES[pol]]
    return tuple(dict.fromkeys(names))


#: The equal-budget curves (D482): exact top-k from 0.25 % to 8 % of the candidates, ReSV at the question along
#: Th_r-wics, InfiniGen along alpha (5 is its default), StreamingLLM along its window (tokens; the device tier holds
#: 512, so a longer window keeps offloaded tokens too).
BUDGET_METHODS: tuple[str, ...] = _budget_methods()
_POWER_BLOCKS = tuple(Block(t, (1000, 2000), POWER_DEPTHS, POWER_SEEDS, POWER_METHODS) for t in TASKS)
#: The five sweep trials: every method, the Th_r-wics sweep and the readings the claims name. They are also make
#: reproduce's share of the comparison (docs/DECISIONS.md D485: 2 trials per passkey cell at 1K and 2K, 1 for the
#: needle at 1K -- the code path, the intervals and the paired tests); the 160 trials of :data:`_POWER_BLOCKS`
#: (~45 CPU-minutes) are the ``power`` grid, opt-in, like the ``full`` grid.
_SWEEP_BLOCKS = (Block("passkey", (1000, 2000), (0.25, 0.75)), Block("needle", (1000,), (0.5,)))
#: The 'alternative' rows beyond the paper run at the question here (their ``@text`` forms are compared methods); their
#: frame-stage forms stream every document chunk with retrieval, a cost the ``full`` grid carries (D502).
_SWEEP_METHODS = tuple(m for m in dict.fromkeys(ALL_METHODS + _TEXT_SWEEP + _BEYOND_DEFAULT + POWER_METHODS)
                       if not (m in method_table.METHODS and method_table.METHODS[m].role == "alternative"))
#: The equal-budget curves (D482) on the sweep trials, in the ``power`` and ``full`` grids: ~14 methods more on every
#: sweep trial cost make reproduce ~150 CPU-seconds it does not have.
_BUDGET_SWEEP_BLOCKS = tuple(dataclasses.replace(b, methods=BUDGET_METHODS) for b in _SWEEP_BLOCKS)
GRIDS: dict[tuple[str, str], StudyGrid] = {
    # the tiny random model: seconds, exercises every code path (offload, shared prefill, recall, the workload file)
    ("smoke", "profile"): StudyGrid("smoke", "smoke", (Block("passkey", (384, 512), (0.25, 0.75)),
                                                       Block("needle", (384,), (0.5,))),
                                    ALL_METHODS + ("resv@r0.7", "exact@k0.05"), chunk_tokens=64, kv_capacity=128,
                                    max_new_tokens=6),
    # ~3 CPU-minutes of make reproduce (measured, notebook 09)
    ("default", "profile"): StudyGrid("default", "default", _SWEEP_BLOCKS, _SWEEP_METHODS),
    ("default", "power"): StudyGrid("default-power", "default", _POWER_BLOCKS + _BUDGET_SWEEP_BLOCKS,
                                    tuple(dict.fromkeys(POWER_METHODS + BUDGET_METHODS))),
    ("default", "full"): StudyGrid("default-full", "default",
                                   tuple(Block(t, (1000, 2000, 4000, 8000), _DEPTHS_FULL, _SEEDS_FULL) for t in TASKS)
                                   + tuple(Block(t, (1000, 2000, 4000), POWER_DEPTHS, POWER_SEEDS + (4, 5, 6, 7),
                                                 tuple(dict.fromkeys(POWER_METHODS + READINGS + BUDGET_METHODS)))
                                           for t in TASKS),
                                   tuple(dict.fromkeys(ALL_METHODS + _SWEEP + POWER_METHODS + BUDGET_METHODS))),
}


def study_grid(profile: str, grid: str = "profile") -> StudyGrid:
    """The study of ``profile`` (its ``longctx`` section, :mod:`vrex_lib.profiles`): ``grid='profile'`` its share of
    make reproduce, ``'power'`` the 40-trial comparison alone (D481), ``'full'`` the whole grid of its family. The
    ``full`` profile (VideoLLM-online 8B) always runs
    the default family's full grid, on its own model."""
    if grid not in STUDY_GRIDS:
        raise ValueError(f"long-context study: {arg_name('--grid')} {grid!r} is not a study grid; use "
                         f"{' or '.join(STUDY_GRIDS)}")
    sec = profile_config(profile).longctx
    key = (sec.grid, "full" if sec.always_full else grid)
    if key not in GRIDS:
        have = ", ".join(f"{p}/{g}" for p, g in GRIDS)
        raise ValueError(f"long-context study: the {profile} profile has no {grid!r} grid (grids by profile "
                         f"family/grid: {have}); set {arg_name('--grid')} to 'profile'")
    return GRIDS[key].replace(model_profile=profile)
