"""The batched evaluation (vrex_lib.eval.batch, docs/DECISIONS.md D520): run_study with every method of a task in one
lockstep per sample writes the files of the methods run one after another -- the same lines (timings aside), run
records, skip logs and traces (attention errors to fp32's last bits, D480) -- resumes as they do, and a row that
fails leaves no line of its sample anywhere."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vrex_lib import accuracy
from vrex_lib import eval as ev
from vrex_lib.config import RuntimeConfig
from vrex_lib.eval import batch as evbatch
from vrex_lib.eval import sample as evsample
from vrex_lib.retrieval import POLICIES
from vrex_lib.runtime import lockstep

TASKS = ("step", "task")
#: Budgets that make the tiny model's 4-frame streams retrieve (as tests/test_retrieval_study.py).
MODES = {"rekv": {"mode": "frame", "topk_blocks": 1}, "infinigen_p": {"mode": "oracle"}}
KW = dict(runtime_cfg=RuntimeConfig(measure_attn_error=True, strict=True), max_new_tokens=3, max_frames=4,
          method_kwargs=MODES)
#: Trace arrays that are this machine's times (a batched step's wall time is its batch's).
TRACE_TIMES = {"a_wall_s", "s_select_s"}
#: Trace arrays computed from a row's activations, which a [B, N] product may change in fp32's last bits (D480).
TRACE_FLOATS = {"a_attn_err"}


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _lines(path: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "timing_s"} for r in ev.read_jsonl(path)]


def assert_same_study(a: Path, b: Path, kinds: tuple[str, ...] = ()) -> None:
    """Every file under ``a`` is under ``b`` and, if its name ends with one of ``kinds`` (default: every file),
    holds the same content (timings aside; attention error to D480's tolerance)."""
    assert _files(a) == _files(b)
    for rel in _files(a):
        fa, fb = a / rel, b / rel
        if kinds and not rel.endswith(kinds):
            continue
        if rel.endswith(".jsonl"):
            assert _lines(fa) == _lines(fb), rel
        elif rel.endswith(".npz"):
            za, zb = np.load(fa), np.load(fb)
            assert za.files == zb.files
            for k in set(za.files) - TRACE_TIMES:
                if k in TRACE_FLOATS:
                    np.testing.assert_allclose(za[k], zb[k], rtol=1e-5, atol=1e-6, err_msg=f"{rel} {k}")
                else:
                    assert np.array_equal(za[k], zb[k], equal_nan=za[k].dtype.kind == "f"), (rel, k)
        elif rel.endswith(".run.json"):
            assert json.loads(fa.read_text()) == json.loads(fb.read_text()), rel
        else:
            assert fa.read_bytes() == fb.read_bytes(), rel


@pytest.fixture(scope="module")
def sequential(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("sequential")
    accuracy.run_study(list(POLICIES), TASKS, "smoke", root, model=tiny, max_samples=2, batched=False, **KW)
    return root


def test_batched_study_writes_the_sequential_files(tiny, sequential, tmp_path, monkeypatch):
    batches = []

    def counted(jobs, **kw):
        stats = {}
        out = lockstep(jobs, stats=stats, **kw)
        batches.append((len(jobs), stats))
        return out

    monkeypatch.setattr(evsample, "lockstep", counted)
    accuracy.run_study(list(POLICIES), TASKS, "smoke", tmp_path, model=tiny, max_samples=2, batched=True, **KW)
    assert_same_study(sequential, tmp_path)
    assert [n for n, _ in batches] == [len(POLICIES)] * len(TASKS) * 2, "one lockstep of every method per sample"
    assert all(st["row_steps"] / st["forwards"] > len(POLICIES) / 2 for _, st in batches), "rows stepped together"
    df = accuracy.load_study(tmp_path, list(POLICIES), TASKS)
    assert len(df) == len(POLICIES) * len(TASKS) * 2
    by = df[df.task == "step"].groupby("method")
    assert by.ref_answer_match.count().drop("full").eq(2).all(), "every method compared with the batch's full run"
    assert df[df.method == "full"].ref_answer_match.isna().all()


@pytest.mark.parametrize("gone", ["resv", "full"])
def test_batched_resume_is_sequential_resume(tiny, tmp_path, gone):
    """One sample, then resume to two (fresh=False), then resume after one method's results are gone (resv: it runs
    alone against full's finished lines; full: it runs again alone): batched and sequential write the same files."""
    for batched in (False, True):
        root = tmp_path / str(batched)
        for n, fresh in ((1, True), (2, False)):
            accuracy.run_study(list(POLICIES), TASKS, "smoke", root, model=tiny, max_samples=n, fresh=fresh,
                               batched=batched, **KW)
        for p in (root / gone).rglob("*.jsonl"):
            p.unlink()
        accuracy.run_study(list(POLICIES), TASKS, "smoke", root, model=tiny, max_samples=2, fresh=False,
                           batched=batched, **KW)
    assert_same_study(tmp_path / "False", tmp_path / "True")


def test_batched_variants_write_the_sequential_files(tiny, tmp_path):
    """run_variants: tagged variants of one method and of another, all against root/full, in one batch per task."""
    variants = {"legacy": ("rekv", {"mode": "legacy"}), "frame": ("rekv", {"mode": "frame", "topk_blocks": 1}),
                "oracle": ("infinigen_p", {"mode": "oracle"})}
    kw = {k: v for k, v in KW.items() if k != "method_kwargs"}
    for batched in (False, True):
        root = tmp_path / str(batched)
        accuracy.run_study(["full"], TASKS, "smoke", root, model=tiny, max_samples=2, **kw)
        accuracy.run_variants(variants, TASKS, "smoke", root, model=tiny, max_samples=2, batched=batched, **kw)
    assert_same_study(tmp_path / "False", tmp_path / "True")
    lines = ev.read_jsonl(tmp_path / "True" / "rekv@frame" / "step.jsonl")
    assert len(lines) == 2 and all(r["ref_answer_match"] is not None for r in lines)


class _Failing:
    """A policy that raises in its next selection once ``armed``."""

    armed = False

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, item):
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    def select(self, *args, **kwargs):
        if _Failing.armed:
            raise RuntimeError("resv row failed on purpose")
        return self.inner.select(*args, **kwargs)


def test_a_failing_row_leaves_no_line_of_its_sample(tiny, sequential, tmp_path, monkeypatch):
    """resv's row raises in the second sample's batch: every method's file holds the first sample only, no trace of
    the second is written, every run record stays incomplete; a resumed run completes the study as sequential."""
    make, write = evbatch.make_policy, evbatch._write
    monkeypatch.setattr(evbatch, "make_policy", lambda m, **kw: _Failing(make(m, **kw)) if m == "resv" else
                        make(m, **kw))
    monkeypatch.setattr(_Failing, "armed", False)

    def write_then_arm(*args):
        write(*args)
        _Failing.armed = True  # the first sample's lines are written: the next batch's resv row fails

    monkeypatch.setattr(evbatch, "_write", write_then_arm)
    with pytest.raises(RuntimeError, match="on purpose"):
        accuracy.run_study(list(POLICIES), ("step",), "smoke", tmp_path, model=tiny, max_samples=2, **KW)
    for m in POLICIES:
        d = tmp_path / m
        assert [r["index"] for r in ev.read_jsonl(d / "step.jsonl")] == [0], m
        assert len(list((d / "traces" / "step").glob("*.npz"))) == 1, m
        assert json.loads((d / "step.run.json").read_text())["complete"] is False, m
    monkeypatch.undo()
    accuracy.run_study(list(POLICIES), TASKS, "smoke", tmp_path, model=tiny, max_samples=2, fresh=False, **KW)
    assert_same_study(sequential, tmp_path, kinds=(".jsonl", ".npz"))  # the skip logs list what each run did


def test_batch_refusals(tiny, tmp_path):
    runs = [ev.MethodRun("resv", tmp_path / "resv" / "step.jsonl", reference=ev.BATCH_REFERENCE)]
    with pytest.raises(ValueError, match="no full run"):
        ev.run_eval_batch("step", runs, "smoke", model=tiny, max_samples=1, progress=False)
    twice = [ev.MethodRun("full", tmp_path / "x.jsonl"), ev.MethodRun("resv", tmp_path / "x.jsonl")]
    with pytest.raises(ValueError, match="same file"):
        ev.run_eval_batch("step", twice, "smoke", model=tiny, progress=False)
    with pytest.raises(ValueError, match="prebuilt model"):
        ev.run_eval_batch("step", runs, "smoke", model=None)
    with pytest.raises(TypeError, match="per-run"):
        ev.run_eval_batch("step", runs, "smoke", model=tiny, trace_dir=tmp_path)
