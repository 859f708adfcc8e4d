"""The stand-in vision encoder, the long-stream builder and the workload measurement (smoke profile)."""
import json

import numpy as np
import pytest
import torch

from vrex_lib.config import RuntimeConfig
from vrex_lib.runtime.session import ContextTooLarge
from vrex_lib.runtime.vision import PatchEmbedEncoder, dct_basis
from vrex_lib.streams import build_stream, frames_for_tokens


@pytest.fixture(scope="module")
def patch_model():
    from vrex_lib.runtime import build_model

    return build_model("smoke", vision="patch-dct")


@pytest.fixture(scope="module")
def stream():
    return build_stream(64, seed=3, size=64)


def test_dct_basis_is_orthonormal():
    b = dct_basis(16, 8).reshape(64, -1)
    assert torch.allclose(b @ b.T, torch.eye(64, dtype=b.dtype), atol=1e-12)


def test_patch_encoder_keeps_frames_apart_and_is_deterministic(patch_model, stream):
    frames = stream.frames(0, 40)
    a = patch_model.embed_frames(frames)
    b = patch_model.embed_frames(frames)
    assert torch.equal(a, b)  # same frame -> identical tokens
    flat = a.float().flatten(1)
    # every pair of distinct frames gives distinct tokens
    diff = torch.cdist(flat, flat)
    distinct = torch.tensor([[not np.array_equal(frames[i], frames[j]) for j in range(40)] for i in range(40)])
    assert bool((diff[distinct] > 1e-4).all())
    # and the tokens follow the pixels more closely than the random SigLIP's: lower adjacent-frame cosine
    from vrex_lib.runtime import build_model

    rand = build_model("smoke", vision="siglip-random").embed_frames(frames).float().flatten(1)
    cos = lambda x: torch.nn.functional.cosine_similarity(x[1:], x[:-1]).mean()
    assert cos(flat) < cos(rand)


def test_patch_encoder_shapes():
    enc = PatchEmbedEncoder(k=8, image_size=224)
    out = enc(pixel_values=torch.zeros(2, 3, 224, 224))
    assert out.last_hidden_state.shape == (2, 196, 192) and out.pooler_output.shape == (2, 192)
    with pytest.raises(ValueError, match="multiple"):
        PatchEmbedEncoder(image_size=100)


def test_unknown_vision_encoder_is_a_clear_error():
    from vrex_lib.runtime import build_model

    with pytest.raises(ValueError, match="unknown vision encoder"):
        build_model("smoke", vision="clip")


def test_stream_is_deterministic_and_reaches_length():
    n = frames_for_tokens(40_000, 11)
    assert n >= 3600
    a, b = build_stream(n, seed=1, size=32), build_stream(n, seed=1, size=32)
    assert sum(s.n_frames for s in a.segments) == n == a.n_frames
    assert [(s.start, s.shot, s.kind) for s in a.segments] == [(s.start, s.shot, s.kind) for s in b.segments]
    assert np.array_equal(a.frames(n - 5, n), b.frames(n - 5, n))
    assert a.frames(n - 1, n).shape == (1, 32, 32, 3)
    kinds = {s.kind for s in a.segments}
    assert {"step", "revisit"} <= kinds  # scene changes and revisits, as in procedure videos
    assert "composition of real footage" in a.source
    c = build_stream(n, seed=2, size=32)
    assert [(s.start, s.shot) for s in c.segments] != [(s.start, s.shot) for s in a.segments]
    with pytest.raises(IndexError):
        a.frames(0, n + 1)


def test_measure_smoke(tmp_path, tiny):
    from vrex_lib.workload import curve_table, load_curves, measure, read_measurement

    out = tmp_path / "wl.json"
    # resv_best (beyond the paper) is not a default method (workload.ALL_METHODS) but is measured on request
    methods = ["full", "flexgen", "infinigen", "infinigen_p", "rekv", "resv", "resv_best"]
    p = measure("smoke", methods, [200, 320], out, model=tiny, progress=False)
    d = read_measurement(p)
    assert d["schema"] == "vrex.workload/1" and d["profile"] == "smoke"
    for k in ("model", "vision", "stream", "tokens_per_frame", "kv_capacity", "inputs_key", "n_layers",
              "kv_bytes_per_token", "resv"):
        assert k in d
    ck = d["checkpoints"]
    # every method, and ReKV's every-step mode beside it (the simulator's ReKV reads that one)
    assert {(c["method"], c["stage"]) for c in ck} == {(m, s) for m in methods + ["rekv@frame"] for s in ("frame", "text")}
    assert all(c["kv_len"] >= c["kv_target"] for c in ck)
    late = [c for c in ck if c["kv_target"] == 320]
    assert all(c["offloaded_bytes"] > 0 for c in late)  # capacity 96: the host tier is exercised
    resv = [c for c in ck if c["method"] == "resv"]
    assert all(c["tokens_per_cluster"] and c["tokens_per_cluster"] >= 1 for c in resv)
    assert all(c["dre_hcu_cycles"] > 0 and c["dre_wtu_cycles"] > 0 for c in resv)
    best = [c for c in ck if c["method"] == "resv_best"]
    assert best and all(1 <= c["tokens_per_cluster"] <= 8 for c in best if c["tokens_per_cluster"])  # cap 8
    assert all(len(c["per_layer"]["selected_frac"]) == d["n_layers"] for c in ck)
    full = [c for c in ck if c["method"] == "full"]
    assert all(c["selected_frac"] == 1.0 for c in full)
    ig = {c["stage"]: c["selected_frac"] for c in ck if c["method"] == "infinigen" and c["kv_target"] == 320}
    # InfiniGen never retrieves at frames; the smoke model's 2 layers are both dense under its reference rule
    # (layers 0-1, docs/DECISIONS.md D61), so its text stage fetches everything too
    assert ig["frame"] == 1.0 and ig["text"] == 1.0
    igp = {c["stage"]: c["selected_frac"] for c in ck if c["method"] == "infinigen_p" and c["kv_target"] == 320}
    assert igp["frame"] == 1.0
    fid = [c for c in ck if c["kv_target"] == 200 and c["method"] == "resv" and c["stage"] == "text"][0]
    assert fid["fidelity_source"] and 0 <= fid["answer_agreement"] <= 1 and fid["attn_rel_error"] >= 0
    assert all(c["fidelity_source"] is None for c in late)
    from vrex_lib.perf import Workload  # the simulator reads the file

    w = Workload.from_measurement(p)
    assert ("resv", "frame") in w.selected_frac and ("rekv", "text") in w.selected_frac
    # cached: same inputs -> the file is reused untouched; another configuration -> refused before any work unless
    # replace=True, which recomputes it under another key
    mtime = out.stat().st_mtime_ns
    measure("smoke", methods, [200, 320], out, model=tiny, progress=False)
    assert out.stat().st_mtime_ns == mtime
    with pytest.raises(ValueError, match=r"another configuration \(methods .*fidelity_kv \[200\] there, \[\] now"):
        measure("smoke", ["full", "rekv"], [200, 320], out, model=tiny, progress=False, fidelity_kv=())
    assert out.stat().st_mtime_ns == mtime
    measure("smoke", ["full", "rekv"], [200, 320], out, model=tiny, progress=False, fidelity_kv=(), replace=True)
    d2 = json.loads(out.read_text())
    assert d2["inputs_key"] != d["inputs_key"] and {c["method"] for c in d2["checkpoints"]} == {"full", "rekv", "rekv@frame"}
    assert list(curve_table(p, "selected_frac", "text").columns) == ["full", "rekv", "rekv@frame"]
    assert len(load_curves(p)) == 12  # 3 methods x 2 stages x 2 kv points


def test_measure_variants_and_bad_input(tmp_path, tiny):
    from vrex_lib.workload import measure, read_measurement

    out = tmp_path / "v.json"
    measure("smoke", ["resv"], [200], out, model=tiny, progress=False, fidelity_kv=(),
            variants={"resv@nhp16": ("resv", {"n_hp": 16})})
    ms = {c["method"] for c in read_measurement(out)["checkpoints"]}
    assert ms == {"resv", "resv@nhp16"}
    with pytest.raises(ValueError, match="unknown method"):
        measure("smoke", ["resvv"], [200], tmp_path / "x.json", model=tiny, progress=False)
    with pytest.raises(ValueError, match="unknown --profile"):
        measure("huge", ["resv"], [200], tmp_path / "x.json", model=tiny, progress=False)
    with pytest.raises(ContextTooLarge, match="--kv"):
        measure("smoke", ["resv"], [100_000], tmp_path / "x.json", model=tiny, progress=False,
                runtime=RuntimeConfig(kv_capacity=96, max_kv_bytes=1 << 20))
    assert not (tmp_path / "x.json").exists()


def test_shadow_policies_do_not_steer_the_stream(tiny, stream):
    """Shadow selection leaves the stream exactly full attention, and each policy sees every step's keys."""
    from vrex_lib.config import ReSVConfig
    from vrex_lib.runtime import StreamingSession
    from vrex_lib.workload.measure import _make
    from vrex_lib.workload.shadow import ShadowPolicy

    emb = tiny.embed_frames(stream.frames(0, 12))
    plain = StreamingSession(tiny, None, RuntimeConfig(kv_capacity=64))
    shadow = ShadowPolicy({m: _make(m, {}, ReSVConfig()) for m in ("resv", "rekv", "infinigen_p")}, 1)
    sess = StreamingSession(tiny, shadow, RuntimeConfig(kv_capacity=64), observers=[shadow])
    shadow.active = True
    for s in (plain, sess):
        s.add_system_prompt("sys")
        for e in emb:
            s.add_frame_embeds(e)
    assert torch.equal(plain.next_token_logits(), sess.next_token_logits())
    recs = [r for r in shadow.records["resv"] if r.stage == "frame"]
    assert len(recs) == 12 and recs[-1].kv_len == sess.n_tokens - recs[-1].n_new
    assert shadow.policies["resv"].tables[1].n_tokens == sess.n_tokens
    late = recs[-1]
    assert late.n_off_cand[1] > 0 and (late.sel_off[1] <= late.n_off_cand[1]).all()
    assert (recs[-1].reused_off[1] >= 0).all() and (recs[0].reused_off == -1).all()
