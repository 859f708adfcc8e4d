"""Accuracy where retrieval matters: long-context key retrieval with the real language model, every method.

    from vrex_lib import longctx
    path = longctx.run("default")                       # results/data/retrieval_demand_default.json
    df = longctx.load_results(path)                     # one row per (trial, method)
    longctx.write_workload(path, "results/data/workload_retrieval_default.json")   # schema vrex.workload/1

The passkey task of Mohtashami & Jaggi (2023) and a needle in public-domain prose (:mod:`.task`), streamed through
the same runtime, KV store and policies as the video streams (:mod:`.run`), with every method's selection recorded
and the needle's recall computed from it (:mod:`.policy`). CLI: ``python -m vrex_lib.longctx run --profile
default [--grid full]``. Definitions: docs/DECISIONS.md D160-D166.
"""
from . import mechanism, power, variants
from .export import WORKLOAD_NOTE, accuracy_table, load_results, recall_per_layer, write_workload
from .grid import ALL_METHODS, GRIDS, Block, StudyMethod, StudyGrid, method_spec, method_specs, study_grid
from .policy import ExactTopK, StudyPolicy, TextStageOnly, fork, target_recall
from .run import (SCHEMA, answer_question, check_grid, default_out, encodes_densely, prefill_document, read_results,
                  run, run_policy, run_trial, system_tokens)
from .task import TASKS, Trial, answer_digits, book_sentences, exact_match, make_trial

__all__ = ["ALL_METHODS", "Block", "ExactTopK", "GRIDS", "StudyMethod", "SCHEMA", "StudyGrid", "StudyPolicy", "TASKS",
           "TextStageOnly", "Trial", "WORKLOAD_NOTE", "accuracy_table", "answer_digits", "answer_question",
           "book_sentences", "check_grid", "default_out", "encodes_densely", "exact_match", "fork", "load_results",
           "make_trial", "mechanism", "method_spec", "method_specs", "power", "prefill_document", "read_results",
           "recall_per_layer", "run", "run_policy", "run_trial", "study_grid", "system_tokens", "target_recall", "variants",
           "write_workload"]
