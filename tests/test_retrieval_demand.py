"""The long-context retrieval study (vrex_lib.longctx, notebook 09): task generator, scoring, recall from the returned
selection, select-everything == full, the shared prefill, caching/resume, the workload file and the claim rows."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from vrex_lib import longctx, report
from vrex_lib.config import ReSVConfig, RuntimeConfig
from vrex_lib.longctx import task as T
from vrex_lib.retrieval import PolicyBase
from vrex_lib.runtime import ByteTokenizer
from vrex_lib.selection import Selection


class _Bytes:
    """ByteTokenizer with the StreamingVideoLLM encode/decode signature (one token per byte: hand-countable)."""

    def __init__(self):
        self.t = ByteTokenizer()

    def encode(self, s):
        return self.t.encode(s)

    def decode(self, ids):
        return self.t.decode(ids)


BYTES = _Bytes()
GRID = longctx.study_grid("smoke")
CFG = RuntimeConfig(kv_capacity=GRID.kv_capacity, interval_token=False)


# ---- the task generator ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", list(T.TASKS))
@pytest.mark.parametrize("n", [300, 777])
def test_trial_places_the_key_at_the_requested_depth_and_token_count(task, n):
    text = T.TASKS[task]
    pieces = text.filler or T.book_sentences()
    longest = max(len(BYTES.encode(p)) for p in pieces)
    for depth in (0.0, 0.3, 0.5, 1.0):
        tr = T.make_trial(BYTES, task, n, depth, seed=1, prefix="[")
        assert tr.n_tokens == n
        assert tr.intro_tokens == len(("[" + text.intro).encode())
        ns, ne = tr.needle_span
        needle = "".join(p.format(key=tr.key) for p in text.needle)
        assert BYTES.decode(tr.ids[ns:ne]) == needle
        target = tr.intro_tokens + round(depth * tr.filler_tokens)
        assert 0 <= target - ns < longest, (depth, target, ns)   # snapped down to a piece boundary
        if depth == 0.0:
            assert ns == tr.intro_tokens
        # the digit tokens are exactly the key, once per mention
        digits = "".join(BYTES.decode([tr.ids[p]]) for p in tr.value_positions)
        assert digits == tr.key * text.needle.count(" {key}")
        assert len(tr.key) == T.KEY_DIGITS and tr.key[0] != "0"
    # a hand-counted case: passkey, 1 token per byte, depth 0.5 of a 300-token document
    tr = T.make_trial(BYTES, "passkey", 300, 0.5, seed=0)
    intro = len(T.TASKS["passkey"].intro)
    needle = len("".join(p.format(key=tr.key) for p in T.TASKS["passkey"].needle))
    fill = 300 - intro - needle
    starts = np.cumsum([0] + [len(p) for p in T.TASKS["passkey"].filler] * 10)
    assert tr.needle_span[0] == intro + max(s for s in starts if s <= round(0.5 * fill))


def test_keys_are_seeded_per_cell_and_reproducible():
    a = T.make_trial(BYTES, "needle", 500, 0.5, seed=3)
    assert a == T.make_trial(BYTES, "needle", 500, 0.5, seed=3)
    keys = {T.make_trial(BYTES, "passkey", 400, d, seed=s).key for d in (0.0, 0.5, 1.0) for s in (0, 1)}
    assert len(keys) == 6
    assert a.book_sentence != T.make_trial(BYTES, "needle", 500, 0.5, seed=4).book_sentence


def test_bad_trials_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="depth 1.5 must be in"):
        T.make_trial(BYTES, "passkey", 400, 1.5)
    with pytest.raises(ValueError, match="not one of passkey, needle"):
        T.make_trial(BYTES, "haystack", 400, 0.5)
    with pytest.raises(ValueError, match="raise the context length to at least"):
        T.make_trial(BYTES, "passkey", 100, 0.5)
    with pytest.raises(ValueError, match="kv_capacity"):
        GRID.replace(kv_capacity=4096)
    with pytest.raises(ValueError, match="unknown method 'resvv'"):
        longctx.method_specs(["resvv"])
    with pytest.raises(ValueError, match="Th_r-wics must be in"):
        longctx.method_spec("resv@r1.5")


def test_method_names():
    assert longctx.method_spec("rekv@frame").kwargs == (("mode", "frame"),)
    s = longctx.method_spec("resv@text-r0.7")
    assert s.text_only and s.kwargs == (("th_r_wics", 0.7),) and s.policy == "resv"
    assert not longctx.method_spec("resv@r0.9").text_only


# ---- scoring --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer,ok", [("The pass key is 68231", True), ("68231.", True), ("68231 is it, 5", True),
                                       ("682310", False), ("6823", False), ("6 8231", False), ("key 1 68231", False),
                                       ("no digits", False), ("", False)])
def test_exact_match_on_the_digits(answer, ok):
    assert T.exact_match(answer, "68231") is ok


# ---- recall and the selection ---------------------------------------------------------------------------------
def test_target_recall_by_hand():
    pos = torch.tensor([5, 6, 7, 8])
    cand = torch.arange(2, 10)
    got = longctx.target_recall(pos, cand, [torch.tensor([5, 6]), torch.tensor([], dtype=torch.long),
                                            torch.arange(2, 10)])
    assert got.tolist() == [0.5, 0.0, 1.0]
    # positions that are not candidates (a sink, the recent window) are attended anyway
    assert longctx.target_recall(torch.tensor([1, 12]), cand, [torch.tensor([], dtype=torch.long)]).tolist() == [1.0]


class _Pick(PolicyBase):
    """Selects, per KV head, the candidates for which ``keep(position)`` is true."""

    name, retrieves_at_frame = "pick", True

    def __init__(self, keep):
        self.keep = keep

    def reset(self, n_layers, n_kv_heads, head_dim):
        self.h = n_kv_heads

    def observe(self, *a):
        pass

    def select(self, layer, query, keys, candidates, stage):
        ix = candidates[torch.tensor([bool(self.keep(int(c))) for c in candidates], dtype=torch.bool)]
        return Selection([ix.clone() for _ in range(self.h)], int(candidates.numel()))


def _trial(tiny, depth=0.25):
    return T.make_trial(tiny, "passkey", 512 - longctx.system_tokens(tiny, GRID.system_prompt), depth, 0, prefix="[")


def test_recall_is_computed_from_the_selection_the_policy_returned(tiny):
    tr = _trial(tiny)
    off = longctx.system_tokens(tiny, GRID.system_prompt)
    value = {off + p for p in tr.value_positions}
    half = set(sorted(value)[: len(value) // 2])
    spec = longctx.StudyMethod("pick", "pick")
    rec = {name: longctx.run_policy(tiny, GRID, tr, spec, _Pick(keep), CFG)
           for name, keep in (("none", lambda p: p not in value), ("only", lambda p: p in value),
                              ("half", lambda p: p in half))}
    assert rec["none"]["recall_value"] == 0.0 and rec["only"]["recall_value"] == 1.0
    assert rec["half"]["recall_value"] == pytest.approx(0.5)
    assert np.isnan(rec["only"]["recall_value_per_layer"][0])  # layer 0 is dense: never consulted
    assert rec["none"]["text"]["selected_frac"] < 1.0 and rec["none"]["n_text_steps"] >= 1


def test_a_policy_that_selects_everything_scores_as_full(tiny):
    tr = _trial(tiny, 0.75)
    every = longctx.run_policy(tiny, GRID, tr, longctx.StudyMethod("every", "pick"), _Pick(lambda p: True), CFG)
    full = longctx.run_policy(tiny, GRID, tr, longctx.method_spec("full"), None, CFG)
    flexgen = longctx.run_policy(tiny, GRID, tr, longctx.method_spec("flexgen"),
                                 longctx.method_spec("flexgen").build(ReSVConfig()), CFG)
    for r in (every, flexgen):
        assert (r["answer"], r["correct"]) == (full["answer"], full["correct"])
        assert r["recall_value"] == full["recall_value"] == 1.0
        assert r["text"]["selected_frac"] == 1.0 and r["text"]["selected_frac_offloaded"] == 1.0


def test_streamingllm_evicts_at_every_layer_layer_0_included(tiny):
    """D300/D380: a member's own first layer holds in the study as in a run of its own (StreamingLLM: layer 0)."""
    spec = longctx.method_spec("streamingllm")
    r = longctx.run_policy(tiny, GRID, _trial(tiny), spec, spec.build(ReSVConfig()), CFG)
    assert np.isfinite(r["recall_value_per_layer"][0]), "layer 0 must be consulted, not attended densely"
    assert r["text"]["selected_frac_offloaded"] == 0.0 and r["text"]["selected_frac"] < 1.0


def test_the_shared_prefill_fork_answers_as_each_method_alone(tiny):
    """D162: the dense-document methods answer from one prefill forked per method; alone they must agree."""
    specs = longctx.method_specs(["full", "infinigen", "rekv", "resv@text", "resv@text-r0.7"])
    shared = []
    longctx.run_trial(tiny, GRID, ("passkey", 512, 0.25, 0), specs, resv=ReSVConfig(), cfg=CFG,
                      on_record=shared.append)
    assert all(r["shared_prefill"] for r in shared)
    tr = _trial(tiny)
    for r in shared:
        s = longctx.method_spec(r["method"])
        alone = longctx.run_policy(tiny, GRID, tr, s, s.build(ReSVConfig()), CFG)
        assert alone["answer"] == r["answer"], s.name
        assert alone["recall_value"] == r["recall_value"], s.name
        assert alone["text"]["selected_frac"] == r["text"]["selected_frac"], s.name


# ---- the runner: cache, resume, errors ------------------------------------------------------------------------
def test_run_is_cached_by_its_inputs_and_resumes(tiny, tmp_path, monkeypatch):
    g = GRID.replace(blocks=(longctx.Block("passkey", (384,), (0.5,)),), methods=("full", "resv"))
    out = tmp_path / "study.json"
    calls = []
    real = longctx.run.__globals__["run_trial"]

    def counting(*a, **kw):
        calls.append([s.name for s in a[3]])
        return real(*a, **kw)

    monkeypatch.setitem(longctx.run.__globals__, "run_trial", counting)
    longctx.run("smoke", g, out=out, model=tiny, progress=False)
    assert calls == [["full", "resv"]] and not out.with_name(out.name + ".partial.json").exists()
    before = out.stat().st_mtime_ns
    longctx.run("smoke", g, out=out, model=tiny, progress=False)
    assert out.stat().st_mtime_ns == before and len(calls) == 1  # same inputs: reused
    # an interrupted run: the partial file holds one finished method, only the other is recomputed
    d = json.loads(out.read_text())
    g2 = g.replace(methods=("full", "resv", "infinigen"))
    key2 = longctx.run.__globals__["inputs_key"](longctx.run.__globals__["_key_parts"](
        tiny, g2, longctx.method_specs(g2.methods), ReSVConfig(), CFG))
    part = out.with_name(out.name + ".partial.json")
    part.write_text(json.dumps(dict(inputs_key=key2, records={d["records"][0]["trial"]: {
        r["method"]: r for r in d["records"]}})))
    with pytest.raises(ValueError, match=r"holds the study of another configuration \(.*methods"):
        longctx.run("smoke", g2, out=out, model=tiny, progress=False)  # out holds g's study: not replaced silently
    assert json.loads(out.read_text()) == d and len(calls) == 1
    longctx.run("smoke", g2, out=out, model=tiny, progress=False, replace=True)
    assert calls[-1] == ["infinigen"]
    assert [r["method"] for r in longctx.read_results(out)["records"]] == ["full", "resv", "infinigen"]


def test_grid_beyond_the_model_positions_is_refused_before_work(tiny, tmp_path):
    g = GRID.replace(blocks=(longctx.Block("passkey", (5000,), (0.5,)),))
    with pytest.raises(ValueError, match="context length 5000 .* max_position_embeddings 4096; drop length 5000"):
        longctx.run("smoke", g, out=tmp_path / "x.json", model=tiny, progress=False)
    assert not (tmp_path / "x.json.partial.json").exists()


# ---- the workload file and the claim rows ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def smoke_study(tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "retrieval_demand_smoke.json"
    g = GRID.replace(blocks=(longctx.Block("passkey", (384, 512), (0.25, 0.75)),),
                     methods=("full", "infinigen_p", "rekv", "rekv@frame", "resv"))
    return longctx.run("smoke", g, out=out, model=tiny, progress=False)


def test_workload_file_pools_the_text_stage_and_feeds_the_simulator(smoke_study, tmp_path):
    from vrex_lib.perf import Workload, simulate

    wl = longctx.write_workload(smoke_study, tmp_path / "workload_retrieval_smoke.json")
    d = json.loads(wl.read_text())
    assert {c["stage"] for c in d["checkpoints"]} == {"text"} and d["tokens_per_frame"] == GRID.chunk_tokens
    recs = [r for r in longctx.read_results(smoke_study)["records"]
            if r["method"] == "resv" and r["context_tokens"] == 512]
    c = next(c for c in d["checkpoints"] if c["method"] == "resv" and c["kv_target"] == 512)
    assert c["selected_frac_offloaded"] == pytest.approx(sum(r["sums"]["sel_off"] for r in recs)
                                                         / sum(r["sums"]["off"] for r in recs))
    assert c["exact_match"] == np.mean([r["correct"] for r in recs]) and c["tokens_per_cluster"] > 0
    w = Workload.from_measurement(wl)
    assert w.provenance["selected_frac"].kind == "measured" and "workload_retrieval_smoke.json" in w.source()
    v, _ = w.selected("resv", "text", 512)
    assert v == pytest.approx(c["selected_frac_offloaded"])
    r = simulate("vrex8", "resv", "text", 512, workload=wl)
    assert r.latency_ms > 0 and "workload_retrieval_smoke.json" in r.workload_source


def test_claim_rows_are_info_and_say_what_they_are(smoke_study):
    from vrex_lib.claims import retrieval_demand as C

    df = longctx.load_results(smoke_study)
    rows = C.accuracy_rows(df, profile="smoke", model="tiny-llama")
    assert rows and {r.verdict() for r in rows} == {report.INFO_V}
    acc = {r.claim: r.reproduced for r in rows}
    want = longctx.accuracy_table(df, by=("method",)).set_index("method").accuracy
    assert acc["retrieval_demand.resv.accuracy"] == pytest.approx(want["resv"])
    assert all("not COIN Top-1" in r.note for r in rows)
    frame = report.to_frame(rows, "smoke")
    assert set(frame.verdict) == {"INFO"}


def test_exact_reference_keeps_the_top_share_of_exact_attention():
    p = longctx.method_spec("exact@k0.5").build(ReSVConfig())
    p.reset(2, 1, 2)
    q = torch.tensor([[[1.0, 0.0]], [[1.0, 0.0]]])                    # 2 query heads -> KV head 0, one token
    keys = torch.tensor([[[0.0, 0.0], [3.0, 0.0], [1.0, 0.0], [2.0, 0.0], [-1.0, 0.0], [0.0, 0.0]]])
    sel = p.select(1, q, keys, torch.arange(1, 5), "text")
    assert sel.indices[0].tolist() == [1, 3]                          # the 2 of 4 candidates with the largest q·k
    assert p.select(1, q, keys, torch.arange(1, 5), "frame") is None  # dense document encoding
    with pytest.raises(ValueError, match="exact@k<frac>"):
        longctx.method_spec("exact@k2")


def test_simulation_rows_label_every_workload(smoke_study, tmp_path):
    from vrex_lib.claims import retrieval_demand as C

    wl = longctx.write_workload(smoke_study, tmp_path / "workload_retrieval_smoke.json")
    sim = C.simulate_text({"paper": "paper", "retrieval": wl}, (1000, 40000), points=(("vrex8", "resv"),))
    rows = C.simulation_rows(sim, kv_lens=(1000, 40000))
    assert len(rows) == 4 and {r.verdict() for r in rows} == {report.INFO_V}
    assert {r.claim.split(".")[-2] for r in C.simulation_rows(sim)} == {"40000"}  # ROW_KV: 8000 and 40000
    by = {r.claim: r for r in rows}
    assert by["retrieval_demand.sim.vrex8.resv.text.40000.paper"].quantity.endswith("[V-Rex: paper-stated workload]")
    ret = by["retrieval_demand.sim.vrex8.resv.text.40000.retrieval"]
    assert ret.quantity.endswith("[V-Rex: retrieval-demand workload]") and "workload_retrieval_smoke.json" in ret.note
    with pytest.raises(ValueError, match="workload label 'mine'"):
        C.simulate_text({"mine": wl}, (1000,))


def test_cli_refuses_bad_grid_values_before_loading_a_model(capsys):
    from vrex_lib.longctx.__main__ import main

    assert main(["run", "--profile", "smoke", "--depths", "0,2"]) == 2
    assert "--depths '0,2': '2' is not a depth in [0, 1]" in capsys.readouterr().err
    assert main(["run", "--profile", "smoke", "--lengths", "1k"]) == 2
    assert "--lengths '1k': '1k' is not a whole token count" in capsys.readouterr().err
