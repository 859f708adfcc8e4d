"""COIN evaluation runner: one method × one task, resumable, shardable, mergeable.

    python -m vrex_lib.eval --task step --method resv --profile default \\
        --out results/eval/default/resv/step.jsonl [--max-samples N] [--num-shards K --shard-index i]
    torchrun --nproc-per-node 8 -m vrex_lib.eval --task step --method resv --profile full \\
        --coin-root ~/coin --llm-path ... --vision-path ... --connector-path ... --device cuda --dtype bfloat16 \\
        --out results/eval/full/resv/step.jsonl
    python -m vrex_lib.eval merge --out results/eval/full/resv/step.jsonl results/eval/full/resv/step.shard*.jsonl
    python -m vrex_lib.eval plan --coin-root ~/coin --timing results/gpu_check/eval/resv/step.jsonl --gpus 8

Each sample is streamed through :class:`~vrex_lib.runtime.StreamingSession` in the COIN prompt layout the
checkpoint was trained with (``prompt_layout="coin"``: the question, then the frames at 2 fps, one prefill per
frame, then a greedy answer; ``"live"`` asks after the frames) and appended as one JSON line (write + flush + fsync). A restarted run
skips the sample ids already in the file; a torn last line (interrupted write) is dropped first. Under torchrun
(``RANK``/``WORLD_SIZE`` set) each rank takes shard ``RANK`` of ``WORLD_SIZE``; shard k holds samples k, k+K, ...
and writes ``<out stem>.shard<k>of<K>.jsonl``; ``merge`` orders the shards' lines by sample index.

``--device`` / ``--dtype`` default to the profile's (cuda and bfloat16 for ``full``, each torchrun rank on
``cuda:$LOCAL_RANK``; cpu and float32 otherwise); a CUDA device on a machine without one is an error before
anything loads (docs/DECISIONS.md D211).

A JSON line (see :func:`evaluate_sample`): sample_id, index, n_total, task, method, profile, model (the model's
name, :class:`~vrex_lib.runtime.ModelIdentity`), prediction, target,
correct (COIN Top-1 of this sample, %), n_frames, n_tokens, ratio_frame / ratio_text (retrieval ratio: selected /
candidates over layers where the policy ran), host_bytes_frame / host_bytes_text (KV bytes fetched from the
offload tier), first_token, frame_argmax (the next-token argmax after every frame step), answer_ids, the
agreement with the ``full`` method's line for the same sample when a reference file is available
(ref_first_token_agree, ref_frame_argmax_agree, ref_answer_match, ref_prefix_tokens), timing_s (decode, vision,
prefill, answer, total), the configuration (method kwargs, runtime config, seed), ``prompt_layout``,
``n_frames_expected`` (frames of the annotated span) and ``frames_action`` (how ``max_frames`` applied).

Spans longer than ``max_frames`` (default: Live1+'s ``max_num_frames`` = 1,200) follow ``frames_policy``
(:data:`vrex_lib.coin.FRAMES_POLICIES`; default 'videollm-online': the stream is cut and the question answered
without frames, as ``StreamMixIn.max_frames_clip`` does); each such sample and each video shorter than its
annotated span is listed in the skip file with its counts.

Next to each results file: ``<stem>.run.json`` (the run's configuration -- with the model's whole identity
record ``model_identity``: shape, dtype, adapter rank and alpha, fingerprint -- and its hash ``config_key``, the
device, the shard, n_total, and the samples skipped with the reason) and ``<stem>.skips.csv`` (the human-readable skip log, including
the annotation ``clamp`` notes). Every line carries ``config_key``: resuming a file written under another
configuration (method, kwargs, profile, model, task, split, annotation-file hash, ...) is an error naming the
file, and ``merge`` accepts only the shards of one run, complete up to the samples their run.json lists as skipped,
and never writes over another run's results (docs/DECISIONS.md D70). Every line also carries ``reference_key``
(the configuration without the method and its kwargs): a ``--reference`` of another configuration is refused.
Spans are clamped to each video's decoded length, as VideoLLM-online does (D59); ``--method-kwargs`` are checked
(names, types, ranges) when the flag is parsed (D201); a write that fails names its file (D202). Videos that
are missing or fail to decode are skipped and listed; a run in which every sample was skipped exits non-zero
(D75). Every flag and path, the output folder's writability and each sample's KV
size are checked before the model is built. Bad input ends the CLI with one line naming the flag or file (exit 2).

The package, by job: :mod:`.results` (JSONL files, run records, resume and merge), :mod:`.plan` (configuration,
shards and every check made before the model loads), :mod:`.sample` (one sample through the runtime), :mod:`.run`
(the loop over a task), :mod:`.stats` (intervals of Top-1 and its drops, sample sizes; D340), :mod:`.budget`
(``plan``: samples, GPU-hours, interval widths before a run), :mod:`.cli` (``python -m vrex_lib.eval``),
:mod:`.batch` (several methods of one task streaming each sample at once, one batched forward per step; D520).
Frames follow ``frame_sampling`` (``--frame-sampling``, default 'ffmpeg': VideoLLM-online's ``-r 2``, D59), part of
the configuration key.
"""
from .plan import (MAX_NEW_TOKENS, PROMPT_LAYOUTS, NoSamplesEvaluated, frames_action, model_identity, run_config,
                   shard_from_env)
from .results import (append_jsonl, check_resume, load_results, merge_shards, read_jsonl, run_file, shard_path,
                      skips_file)
from .run import run_eval, score_results
from .batch import BATCH_REFERENCE, MethodRun, run_eval_batch
from .sample import evaluate_sample, reference_agreement
from .cli import main

__all__ = ["BATCH_REFERENCE", "MAX_NEW_TOKENS", "MethodRun", "PROMPT_LAYOUTS", "NoSamplesEvaluated", "append_jsonl",
           "check_resume", "evaluate_sample", "frames_action", "load_results", "main", "merge_shards", "model_identity",
           "read_jsonl", "reference_agreement", "run_config", "run_eval", "run_eval_batch", "run_file", "score_results",
           "shard_from_env", "shard_path", "skips_file"]
