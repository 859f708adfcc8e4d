"""COIN evaluation runner: sharding + merge == one shard, resume after a torn line, skips, CLI."""
from __future__ import annotations

import json
import shutil

import pytest
import torch

from vrex_lib import eval as ev

TIMING = ("timing_s",)


def _strip(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_two_shards_merged_equal_one_shard(tiny, tmp_path):
    kw = dict(model=tiny, max_samples=4, progress=False, reference=None)
    one = ev.run_eval("step", "rekv", "smoke", tmp_path / "one" / "step.jsonl", **kw)
    parts = [ev.run_eval("step", "rekv", "smoke", tmp_path / "two" / "step.jsonl", num_shards=2, shard_index=i,
                         **kw) for i in range(2)]
    assert [p.name for p in parts] == ["step.shard0of2.jsonl", "step.shard1of2.jsonl"]
    assert [r["index"] for r in ev.read_jsonl(parts[1])] == [1, 3]
    merged = ev.merge_shards(parts, tmp_path / "two" / "step.jsonl")
    a, b = ev.read_jsonl(one), ev.read_jsonl(merged)
    assert len(a) == 4 and _strip(a) == _strip(b)
    r = a[0]
    assert 0 < r["ratio_frame"] <= 1 and r["n_frames"] > 0 and len(r["frame_argmax"]) == r["n_frames"]
    # an incomplete merge is refused
    with pytest.raises(ValueError, match="missing"):
        ev.merge_shards(parts[:1], tmp_path / "bad.jsonl")


def test_resume_after_torn_line_and_reference_agreement(tiny, tmp_path):
    out = tmp_path / "smoke" / "full" / "next.jsonl"
    kw = dict(model=tiny, progress=False, reference=None)
    ev.run_eval("next", "full", "smoke", out, max_samples=2, **kw)
    first = ev.read_jsonl(out)
    with open(out, "a") as f:
        f.write('{"sample_id": "next/tinyB')  # an interrupted append: no newline
    ev.run_eval("next", "full", "smoke", out, max_samples=3, **kw)
    rows = ev.read_jsonl(out)
    assert [r["index"] for r in rows] == [0, 1, 2]
    assert rows[:2] == first, "done samples must not be rerun"
    assert out.read_bytes().endswith(b"\n")
    # another method finds the full run next to it and reports agreement with it
    other = tmp_path / "smoke" / "flexgen" / "next.jsonl"
    ev.run_eval("next", "flexgen", "smoke", other, max_samples=3, model=tiny, progress=False)
    for r in ev.read_jsonl(other):
        assert r["ref_first_token_agree"] is True and r["ref_answer_match"] is True
        assert r["ref_frame_argmax_agree"] == 1.0


def test_damaged_middle_line_is_an_error(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(ValueError, match="damaged"):
        ev.read_jsonl(p)


def test_undecodable_video_is_skipped_and_listed(tiny, tmp_path, repo):
    root = tmp_path / "coin"
    shutil.copytree(repo / "data" / "coin_tiny", root)
    (root / "videos" / "tinyB-ssd02.mp4").write_bytes(b"\x00not a video" * 100)
    out = tmp_path / "r" / "task.jsonl"
    ev.run_eval("task", "full", "full", out, coin_root=str(root), model=tiny, max_new_tokens=2, progress=False,
                reference=None)
    rows = ev.read_jsonl(out)
    skips = (out.parent / "task.skips.csv").read_text()
    assert "tinyB-ssd02" in skips and all(r["video_id"] != "tinyB-ssd02" for r in rows) and rows


def test_shards_from_torchrun_env(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    assert ev.shard_from_env(None, None) == (4, 3)
    assert ev.shard_from_env(2, 1) == (2, 1)
    with pytest.raises(ValueError, match="shard-index"):
        ev.shard_from_env(2, 2)


def test_cli_run_and_merge(tmp_path, capsys):
    out = tmp_path / "e" / "step.jsonl"
    ev.main(["--task", "step", "--method", "full", "--profile", "smoke", "--max-samples", "1", "--out", str(out),
             "--no-progress", "--max-new-tokens", "2"])
    assert "COIN Top-1" in capsys.readouterr().out
    ev.main(["merge", "--out", str(tmp_path / "m.jsonl"), str(out)])
    assert json.loads((tmp_path / "m.jsonl").read_text())["sample_id"] == ev.read_jsonl(out)[0]["sample_id"]
    assert ev.main(["--task", "step", "--method", "nope", "--profile", "smoke", "--out", str(out)]) == 2
    assert "unknown method" in capsys.readouterr().err


def test_full_profile_context_too_large_before_loading_weights(tmp_path, repo):
    """The full profile checks every sample's KV size from config.json alone: no weight file is ever opened."""
    from safetensors.torch import save_file

    from vrex_lib.runtime import ContextTooLarge

    llm_d, vis_d, ck_d = (tmp_path / n for n in ("llm", "vis", "ck"))
    for d in (llm_d, vis_d, ck_d):
        d.mkdir()
    (llm_d / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 2, "max_position_embeddings": 100}))  # shorter than any COIN span's stream
    (vis_d / "config.json").write_text(json.dumps({"model_type": "siglip_vision_model", "hidden_size": 32}))
    (ck_d / "adapter_config.json").write_text(json.dumps({"r": 4, "lora_alpha": 8}))
    save_file({"base_model.model.connector.0.weight": torch.zeros(64, 32)}, str(ck_d / "adapter_model.safetensors"))
    with pytest.raises(ContextTooLarge, match="max_position_embeddings"):
        ev.run_eval("task", "full", "full", tmp_path / "o.jsonl", coin_root=str(repo / "data" / "coin_tiny"),
                    llm_path=str(llm_d), vision_path=str(vis_d), connector_path=str(ck_d), progress=False,
                    device="cpu")
