"""Every policy through the real runtime (tiny random model, smoke COIN fixture) via vrex_lib.accuracy."""
from __future__ import annotations

import numpy as np
import pytest

from vrex_lib import accuracy
from vrex_lib.config import RuntimeConfig
from vrex_lib.retrieval import POLICIES

TASKS = ("step",)
# The smoke model has 2 layers, all dense under InfiniGen's reference rule (layers 0-1), and ReKV's reference mode
# does not retrieve while encoding frames: run the modes that exercise frame-stage retrieval through the runtime
# (the reference modes run through the runtime in tests/test_baselines.py).
MODES = {"rekv": {"mode": "frame", "topk_blocks": 1}, "infinigen_p": {"mode": "oracle"}}  # 1 block: < 4 frames


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from vrex_lib.runtime import build_model

    root = tmp_path_factory.mktemp("study")
    model = build_model("smoke")
    accuracy.run_study(list(POLICIES), TASKS, "smoke", root, model=model, max_samples=1,
                       runtime_cfg=RuntimeConfig(measure_attn_error=True, strict=True), max_new_tokens=3,
                       max_frames=4, method_kwargs=MODES)
    return root, accuracy.load_study(root, list(POLICIES), TASKS)


def test_every_method_ran_with_valid_ratios(study) -> None:
    _, df = study
    assert sorted(df.method) == sorted(POLICIES)
    assert df.ratio_frame.between(0, 1).all() and df.ratio_text.between(0, 1).all()
    by = df.set_index("method")
    assert by.loc["full", "ratio_frame"] == 1.0 and by.loc["flexgen", "ratio_frame"] == 1.0
    assert by.loc["infinigen", "ratio_frame"] == 1.0, "InfiniGen must not retrieve during frame prefill"
    assert by.loc["infinigen_p", "ratio_frame"] < 1.0 and by.loc["rekv", "ratio_frame"] < 1.0


def test_flexgen_equals_full_and_costs_are_counted(study) -> None:
    _, df = study
    by = df.set_index("method")
    # flexgen fetches everything: same answer, same next tokens, attention equal to full up to float error.
    assert by.loc["flexgen", "ref_answer_match"] == 1.0 and by.loc["flexgen", "ref_frame_argmax_agree"] == 1.0
    assert by.loc["flexgen", "attn_err"] < 1e-5
    # ReSV scores clusters, w/o clustering every key: never fewer rows scored, more keys scored.
    assert by.loc["resv_noclust", "scored_frame"] >= by.loc["resv", "scored_frame"] > 0
    assert by.loc["resv", "hash_macs_frame"] > 0


def test_ratio_and_per_layer_tables(study) -> None:
    root, df = study
    summ = accuracy.summarize(df)
    r = accuracy.retrieval_ratio_frame(summ, "smoke")
    assert list(r.columns) == ["method", "task", "stage", "retrieval_ratio", "profile"]
    assert len(r) == 2 * len(POLICIES)
    from vrex_lib.runtime import load_trace

    sid = df.sample_id.iloc[0]
    plh = accuracy.per_layer_head(load_trace(accuracy.trace_path(root, "resv", "step", sid)))
    assert {"layer", "kv_head", "retrieval_ratio"} <= set(plh.columns)
    assert np.isnan(plh[plh.layer == 0].retrieval_ratio).all(), "layer 0 is dense: no ratio"
    assert plh[plh.layer > 0].retrieval_ratio.between(0, 1).all()
