"""The paper's average COIN working scenario (§VI.A / Fig. 4(b): 26 frames, 25 question and 39 answer tokens) and
the data checks of notebook 01, as claim rows.

Only the full profile (the user's COIN, the checkpoint's tokenizer) compares like with like; there the three
averages are judged with the registered loose tolerance, because the paper states neither its tokenizer nor its
averaging. On the fixture they are information (the fixture is not COIN).
"""
from __future__ import annotations

from collections.abc import Mapping

from .. import paper, report
from .provenance import Provenance, workload_cause

#: Paper key suffix -> column of :func:`vrex_lib.coin.task_stats`.
AVG_CASE = {"frames": "avg_frames_2fps", "question_tokens": "avg_question_tokens",
            "answer_tokens": "avg_answer_tokens"}


def _counting(key: str, tokenizer: str) -> str:
    """How this artifact counts quantity ``key`` (the part of the comparison the paper leaves unstated)."""
    if key == "frames":
        return ("frames at 2 fps over the span each task shows (coin.build_task, VideoLLM-online's rule), pooled "
                "over the five tasks' samples; the paper states neither its task mix nor its averaging (§VI.A)")
    what = "VideoLLM-online's prompts" if key == "question_tokens" else \
        "the full replies (numbered lines for the procedure tasks)"
    return (f"tokens of {what} counted with {tokenizer}, without special tokens or chat template; the paper states "
            "neither its tokenizer nor its counting (§VI.A)")


def avg_case_rows(pooled: Mapping[str, float], prov: Provenance, *, tokenizer: str, max_offset_s: float,
                  skipped_videos: int, skip_summary: str) -> list[report.Row]:
    """Rows of ``coin_avg_case``.

    pooled: the ``all`` row of :func:`vrex_lib.coin.task_stats` (avg_frames_2fps, avg_question_tokens,
    avg_answer_tokens); prov: the data and tokenizer behind it (``paper_workload`` = the user's COIN, full profile);
    max_offset_s: the largest |decoded - requested| frame time at 2 fps; skipped_videos / skip_summary: the skip log.
    """
    judged = prov.paper_workload
    why = ("full profile: real COIN test split; tolerance is loose since the paper's tokenizer/averaging is unstated"
           if judged else
           f"{prov.profile} profile: COIN-format fixture, not COIN; tokenizer {tokenizer} — shown for information, "
           "not judged")
    skipped = f"; {skipped_videos} videos skipped ({skip_summary})" if skipped_videos else ""
    rows = []
    for key, col in AVG_CASE.items():
        cause, detail = workload_cause(prov, "COIN-format fixture with shorter steps and made-up labels",
                                       _counting(key, tokenizer) + skipped)
        rows.append(report.row(f"coin.avg_case.{key}", pooled[col], judged=judged, note=why,
                               cause=cause, cause_detail=detail))
    rows += [report.info_row("coin.decode.max_timestamp_offset", "max |decoded - requested| frame time at 2 fps", "s",
                             max_offset_s, note="acceptance: <= 0.25 s (half a 2 fps interval)"),
             report.info_row("coin.skipped_videos", "videos skipped (annotation errors or missing files)", "videos",
                             skipped_videos, note=skip_summary)]
    return rows
