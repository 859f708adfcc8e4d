"""Where a benchmarked step spends its time: a cProfile run grouped into named components (benchmark helper).

cProfile is deterministic but adds a fixed cost to every Python call, so small functions look heavier than
they are; the breakdown is for shares (which component dominates), the benchmarks' ratios come from
unprofiled runs.
"""
from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable, Sequence

#: (label, function-name fragment, file fragment): the components of a ReSV frame step and of a plain step.
RESV_STEP_PARTS: tuple[tuple[str, str, str], ...] = (
    ("observe: HC-table update (add_frame)", "add_frame", "resv/table.py"),
    ("  hash bits", "_hash", "resv/table.py"),
    ("  founder clustering (compiled)", "_cluster_founder", "resv/table.py"),
    ("select: ReSV prediction (select_tokens)", "select_tokens", "resv/select.py"),
    ("  scores, weights, WiCSum of every row", "_wicsum_heads", "resv/select.py"),
    ("    scores + weights", "_weights", "resv/select.py"),
    ("  token positions", "_positions", "resv/select.py"),
    ("attention: KV gather", "gather", "runtime/kvstore.py"),
    ("attention: selection check", "_check", "runtime/attention.py"),
    ("attention: reuse count", "_track_reuse", "runtime/attention.py"),
    ("attention: SDPA kernels", "scaled_dot_product_attention", "~"),
    ("model: linear layers", "linear", "~"),
)


#: The components of one ReSV prediction (bench_resv): the RESV_STEP_PARTS of ReSV. WiCSum itself is the third
#: row less the fourth; its stages run inside one compiled call (docs/DECISIONS.md D369), which cProfile cannot split.
RESV_PREDICT_PARTS: tuple[tuple[str, str, str], ...] = RESV_STEP_PARTS[:7]


def profile(fn: Callable[[], object], repeats: int) -> pstats.Stats:
    """Run ``fn`` ``repeats`` times under cProfile."""
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(repeats):
        fn()
    pr.disable()
    return pstats.Stats(pr)


def breakdown(stats: pstats.Stats, parts: Sequence[tuple[str, str, str]], per: int) -> list[tuple[str, float]]:
    """Cumulative ms per call of ``fn`` (``per`` = the number of calls profiled) of each component: the
    function ``name`` in a file whose path contains the file fragment, or (file ``'~'``) every C builtin
    whose name contains ``name``."""
    rows = []
    for label, name, path in parts:
        ct = sum(v[3] for (f, _, fn), v in stats.stats.items()
                 if path in f and (name in fn if path == "~" else fn == name))
        rows.append((label, 1e3 * ct / per))
    return rows


def total_ms(stats: pstats.Stats, per: int) -> float:
    return 1e3 * stats.total_tt / per


def format_breakdown(title: str, rows: list[tuple[str, float]], total: float) -> str:
    lines = [f"# profile: {title} (cProfile; ms per step, % of the profiled step)"]
    for label, ms in rows:
        if ms > 0:
            lines.append(f"#   {label:<42s} {ms:8.2f} ms {100 * ms / total:5.1f} %")
    lines.append(f"#   {'profiled step total':<42s} {total:8.2f} ms")
    return "\n".join(lines)
