"""COIN annotations, the five VideoLLM-online benchmark tasks, and their Top-1 metric.

V-Rex evaluates on COIN with VideoLLM-online's five tasks (paper §VI.A, Table II). This module reads the
official ``COIN.json``, builds the samples exactly as VideoLLM-online's ``data/coin/benchmarks.py`` does, and
scores predictions the same way. It works on annotations, plus each video's decoded length
(:func:`decoded_duration`, read by :mod:`vrex_lib.video` from the container's timestamps) where spans are clamped.

    ann = load_annotations("COIN.json")                 # {video_id: VideoAnnotation}
    samples = build_task(ann, "procedure", "testing")   # list[Sample]
    acc = score("procedure", predictions, samples)      # Top-1 accuracy in %

Task construction (VideoLLM-online, one stream span and one answer per sample):

| task            | samples per video        | span shown          | target                                   |
|-----------------|--------------------------|---------------------|------------------------------------------|
| ``step``        | one per step i           | step i's segment    | step i's label                           |
| ``next``        | one per step i < n-1     | step i's segment    | step i+1's label                         |
| ``task``        | one                      | ROI [start, end]    | the task name (CamelCase -> words)       |
| ``procedure``   | one per step i < n-1     | step i's segment    | the next <= 5 step labels (numbered list)|
| ``taskprocedure``| as ``procedure``        | step i's segment    | as ``procedure``; the prompt names the task |

Span times are snapped up to the 2 fps frame grid and then clamped to [0, duration] (``ceil_time_by_fps``), where
the duration is the decoded video's, ``(len(frames) - 1) / fps`` of its 2 fps frames (those ffmpeg's ``-r 2``
writes, :data:`FRAME_SAMPLING`, as VideoLLM-online's preprocessing makes them), as VideoLLM-online's
``COIN.get_metadata`` takes it (``build_task(..., durations=)``, :func:`decoded_duration`; COIN.json's
``duration`` stands in only for statistics over the annotations alone, docs/DECISIONS.md D59); the frames shown
are ``int()`` of those times: indices ``int(s·fps) .. int(e·fps)`` inclusive for the snapped and clamped ``s``,
``e`` (VideoLLM-online's ``start_frame = int(start_time * frame_fps)``, ``end_frame = int(end_time * frame_fps) +
1``). That is ``ceil(start·fps) .. ceil(end·fps)`` unless the duration clamps a time, which then ends at the last
whole frame before the duration. Steps keep the order of the file (VideoLLM-online never sorts them). Only the
split's videos count, and with ``available=`` only those whose video file exists (VideoLLM-online keeps
``video_uid in self.metadata``): both the samples and the vocabulary follow that set.

Metric, two variants (``score(..., metric=...)``):

* ``"videollm-online"`` (default, Table II): VideoLLM-online's ``COINBenchmark.compute_metrics`` and
  ``COINProcedure.compute_metrics`` (showlab/videollm-online, ``data/coin/benchmarks.py``), quirks included.
  Labels are the step / task texts lower-cased; the vocabulary (``categories``) is the *split's own* labels;
  ``fuzzy_match`` returns ``min((Levenshtein distance, label))`` -- ties go to the smallest (distance, label).
  Single-answer tasks: ``p = prediction.lower().rstrip('.')``, correct if ``p == label`` or its nearest label is
  the label; accuracy = correct / samples × 100. Procedure tasks: the prediction is split on ``'\n'`` (blank
  lines kept), each line reduced with ``.split('. ')[-1]`` (neither lower-cased nor stripped of '.'), and zipped
  with the targets, so a sample counts ``min(#lines, #targets)`` steps; accuracy = Σ correct / Σ counted × 100.
  A perfect answer in the checkpoint's own format ("1. Take out the cd drive.") is therefore matched only
  through the nearest label, and a one-line answer to a five-step target counts one step.
* ``"strict"``: both sides normalised (lower case, surrounding spaces, a leading ``"N. "`` and trailing ``"."``
  removed); procedure lines split on new lines with blank lines dropped and scored against every target step
  (denominator = all target steps); ties to the first category in sorted order.

Bad input: a malformed file raises :class:`CoinFormatError` naming the file and the fix. A bad *entry*
(missing field, segment outside the video) raises too, unless a :class:`SkipLog` is passed: then the video is
skipped, counted and listed, and the log is written next to the results (``SkipLog.write``). Never silent.

The package, by job: :mod:`.annotations` (the file, its entries, the skip log), :mod:`.tasks` (the five tasks'
samples), :mod:`.metric` (Top-1), :mod:`.files` (where the data and videos are), :mod:`.tokens` (token counts).
"""
from .annotations import (STEP_LABEL_FIXES, TASK_NAME_FIXES, CoinFormatError, clean_task_name, clean_step_label,
                          as_category, StepAnnotation, VideoAnnotation, SkipLog, normalize_split, load_annotations,
                          split_videos, categories, vocabulary)
from .files import MissingVideoError, video_path, available_ids, filter_available, dataset_paths, decoded_duration
from .metric import METRICS, normalize, nearest_label, fuzzy_match, split_procedure, score_counts, score
from .tasks import (TASKS, PROCEDURE_TASKS, MAX_PROCEDURE_STEPS, FRAME_FPS, FRAME_SAMPLING, MAX_NUM_FRAMES,
                    FRAMES_POLICIES, PROMPT_STEP, PROMPT_NEXT, PROMPT_TASK, prompt_procedure, prompt_taskprocedure,
                    ceil_time_by_fps, span_frame_range, Sample, build_task, build_all)
from .tokens import WORDS_PER_TOKEN_APPROX, approx_token_count, task_stats, token_counter

