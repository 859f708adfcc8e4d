"""The full profile through its real loader, on a tiny random checkpoint in VideoLLM-online's layout
(tests/tiny_videollm.py): the LoRA merge, the strict connector, the model's identity, one COIN sample, a
two-checkpoint workload measurement, torchrun shards + merge, and the --device / --dtype checks."""
from __future__ import annotations

import importlib
import json
import shutil
import subprocess

import pytest
import torch
from safetensors.torch import load_file, save_file

from tiny_videollm import ALPHA, CONNECTOR_NAME, LORA_TARGETS, R, write_tiny_videollm
from vrex_lib import eval as ev
from vrex_lib.perf import Workload
from vrex_lib.report.content import profile_models
from vrex_lib.runtime import build_model, checkpoint_name, fingerprint, identify
from vrex_lib.workload.__main__ import main as workload_main

CPU32 = dict(device="cpu", dtype="float32")
EIGHT_B = "videollm-online-8b"  # the paper's checkpoint: results of the tiny one must never carry its name


@pytest.fixture(scope="module")
def full32(tiny_videollm):
    return build_model("full", **tiny_videollm.kwargs(), **CPU32)


def _eval_args(ck, repo, out, *extra: str) -> list[str]:
    return ["--task", "step", "--method", "full", "--profile", "full", "--coin-root", str(repo / "data" / "coin_tiny"),
            *ck.flags(), "--max-samples", "2", "--max-new-tokens", "2", "--no-progress", "--reference", "none",
            "--out", str(out), *extra]


def _no_model(*a, **k):
    raise AssertionError("the model was built although the input was bad")


# ------------------------------------------------------------------------------------------------ the loader
def test_lora_is_merged_by_exactly_alpha_over_r_times_b_a(tiny_videollm, full32):
    from transformers import LlamaForCausalLM

    base = dict(LlamaForCausalLM.from_pretrained(tiny_videollm.llm, dtype=torch.float32).named_parameters())
    merged = dict(full32.llm.named_parameters())
    state = load_file(str(tiny_videollm.connector / "adapter_model.safetensors"))
    targets = set()
    for k, a in state.items():
        if ".lora_A." in k:
            name = k.removeprefix("base_model.model.").replace(".lora_A.weight", ".weight")
            b = state[k.replace(".lora_A.", ".lora_B.")]
            torch.testing.assert_close(merged[name] - base[name], ALPHA / R * b @ a, rtol=0, atol=1e-6)
            targets.add(name)
    assert len(targets) == full32.n_layers * len(LORA_TARGETS) + 1  # every projection of every layer + lm_head
    assert all(torch.equal(merged[n], w) for n, w in base.items() if n not in targets)  # nothing else moved
    for k, v in full32.connector.state_dict().items():
        assert torch.equal(v, state[f"base_model.model.connector.{k}"])


@pytest.mark.parametrize("damage, says", [
    ("extra", "unexpected connector.4.weight"),
    ("missing", "missing connector.2.bias"),
    ("shape", "wrong shape 2.weight (64, 63) (expected (64, 64))"),
])
def test_connector_is_loaded_strictly(tiny_videollm, tmp_path, damage, says):
    ck = tmp_path / "ck"
    shutil.copytree(tiny_videollm.connector, ck)
    f = ck / "adapter_model.safetensors"
    state = load_file(str(f))
    if damage == "extra":
        state["base_model.model.connector.4.weight"] = torch.zeros(64, 64)
    elif damage == "missing":
        del state["base_model.model.connector.2.bias"]
    else:
        state["base_model.model.connector.2.weight"] = torch.zeros(64, 63)
    save_file(state, str(f))
    with pytest.raises(ValueError) as e:
        build_model("full", llm_path=tiny_videollm.llm, vision_path=tiny_videollm.vision, connector_path=ck, **CPU32)
    assert says in str(e.value) and str(f) in str(e.value) and "--connector-path" in str(e.value)


def test_identity_names_what_was_loaded(tiny_videollm, full32):
    ident = full32.identity
    assert (ident.name, ident.llm, ident.vision, ident.adapter) == (CONNECTOR_NAME, "llama", "siglip", CONNECTOR_NAME)
    assert (ident.n_layers, ident.hidden_size, ident.n_q_heads, ident.n_kv_heads, ident.head_dim) == (2, 64, 4, 2, 16)
    assert (ident.dtype, ident.lora_r, ident.lora_alpha, ident.vocab_size) == ("float32", R, ALPHA, 258)
    assert full32.name == CONNECTOR_NAME and EIGHT_B not in ident.summary()
    assert ident.summary() == ("videollm-tiny (llama + LoRA r=4 alpha=8, vision siglip, 2 layers x 64 hidden, "
                               "4 Q / 2 KV heads x 16, float32)")
    # what the evaluation keys on before loading is what the load gives; the dtype is part of it
    assert identify("full", **tiny_videollm.kwargs(), dtype="float32") == ident
    assert identify("full", **tiny_videollm.kwargs()).dtype == "bfloat16"
    assert identify("smoke") == build_model("smoke").identity and build_model("smoke").name == "tiny-llama"


def test_checkpoint_names_and_fingerprints(tmp_path):
    snap = tmp_path / "hub" / "models--chenjoya--videollm-online-8b-v1plus" / "snapshots" / "0a1b2c"
    trainer = tmp_path / "outputs" / "live1+" / "checkpoint-500"
    for d in (snap, trainer):
        d.mkdir(parents=True)
    assert checkpoint_name(snap) == "chenjoya/videollm-online-8b-v1plus"
    assert checkpoint_name(trainer) == "live1+/checkpoint-500" and checkpoint_name(tmp_path / "hub") == "hub"
    d = tmp_path / "w"
    d.mkdir()
    (d / "config.json").write_text("{}")
    blob = bytearray(torch.randint(0, 256, (3 << 20,), generator=torch.Generator().manual_seed(0),
                                   dtype=torch.uint8).numpy().tobytes())
    (d / "model.safetensors").write_bytes(blob)
    f0 = fingerprint(d)
    (d / "README.md").write_text("notes")  # not a file a build reads
    shutil.copytree(d, tmp_path / "moved")
    assert fingerprint(d) == f0 == fingerprint(tmp_path / "moved")
    for at in (100, len(blob) - 100):  # a changed byte in the header MiB or the last MiB
        changed = bytearray(blob)
        changed[at] ^= 1
        (d / "model.safetensors").write_bytes(changed)
        assert fingerprint(d) != f0
    (d / "model.safetensors").write_bytes(blob + b"\x00")
    assert fingerprint(d) != f0


def test_the_tiny_checkpoint_is_deterministic(tiny_videollm, tmp_path):
    again = write_tiny_videollm(tmp_path)
    assert fingerprint(again.llm, again.vision, again.connector) == fingerprint(
        tiny_videollm.llm, tiny_videollm.vision, tiny_videollm.connector)
    assert fingerprint(write_tiny_videollm(tmp_path / "other", seed=1).connector) != fingerprint(again.connector)


# ------------------------------------------------------------------------------------------------ the commands
def test_eval_runs_a_sample_and_names_the_tiny_model(tiny_videollm, tmp_path, repo, capsys):
    out = tmp_path / "full" / "step.jsonl"
    assert ev.main(_eval_args(tiny_videollm, repo, out, "--device", "cpu", "--dtype", "float32")) == 0
    assert "COIN Top-1" in capsys.readouterr().out
    run = json.loads(ev.run_file(out).read_text())
    rows = ev.read_jsonl(out)
    assert len(rows) == 2 and {r["model"] for r in rows} == {CONNECTOR_NAME} == {run["model"]}
    assert run["model_identity"]["n_layers"] == 2 and run["model_identity"]["dtype"] == "float32"
    assert run["model_identity"]["fingerprint"] == fingerprint(tiny_videollm.llm, tiny_videollm.vision,
                                                               tiny_videollm.connector)
    assert run["device"] == "cpu" and EIGHT_B not in out.read_text() + ev.run_file(out).read_text()
    # the identity is in the configuration key: the same file does not resume under another dtype
    assert ev.main(_eval_args(tiny_videollm, repo, out, "--device", "cpu", "--dtype", "bfloat16")) == 2
    err = capsys.readouterr().err
    assert "another configuration" in err and "model_identity" in err


def test_workload_measure_two_checkpoints_names_the_tiny_model(tiny_videollm, tmp_path):
    out = tmp_path / "workload_full.json"
    rc = workload_main(["measure", "--profile", "full", *tiny_videollm.flags(), "--device", "cpu", "--dtype", "float32",
                        "--kv", "120,240", "--methods", "full,resv", "--out", str(out), "--no-progress"])
    assert rc == 0
    d = json.loads(out.read_text())
    assert d["model"] == CONNECTOR_NAME and d["model_identity"]["lora_r"] == R and d["n_layers"] == 2
    assert sorted({c["kv_target"] for c in d["checkpoints"]}) == [120, 240] and EIGHT_B not in out.read_text()
    summary = d["model_identity"]["summary"]
    assert summary.startswith(f"{CONNECTOR_NAME} (llama + LoRA r=4 alpha=8")
    assert f"model {summary}" in Workload.from_measurement(out).source()  # the simulator's measured column says it
    (tmp_path / "data").mkdir()
    shutil.copy(out, tmp_path / "data" / "workload_full.json")
    assert profile_models(tmp_path, ["full", "smoke"]) == (
        f"; model — full: {summary}, recorded in `data/workload_full.json`; smoke: not recorded "
        "(`data/workload_smoke.json` is missing or unreadable)")


@pytest.mark.long
def test_readme_torchrun_two_ranks_then_merge_then_the_report(tmp_path, repo):
    """The README's torchrun command (two CPU ranks, as tests/test_readme_full.py adapts it) and its merge, then a
    second method sharded the same way, then notebook 03's reader of merged results (EVAL_DIR) and the report's
    Table II rows with the 95 % interval beside each COIN accuracy verdict."""
    from test_readme_full import adapt, is_torchrun_step, readme_commands, readme_layout, run_command

    tmp, env = readme_layout(tmp_path)
    steps = [adapt(c, tmp) for c in readme_commands(repo / "README.md") if is_torchrun_step(c)]
    assert [c.split()[0] for c in steps] == ["torchrun", "python"] and "--nproc_per_node 2" in steps[0]
    for c in steps:
        run_command(c, repo, env)
    eval_dir = tmp / "results" / "eval" / "full"
    out = eval_dir / "resv" / "step.jsonl"
    assert sorted(p.name for p in out.parent.glob("step.shard*of2.jsonl")) == ["step.shard0of2.jsonl",
                                                                             "step.shard1of2.jsonl"]
    rows = ev.read_jsonl(out)
    assert [r["index"] for r in rows] == [0, 1] and {r["model"] for r in rows} == {CONNECTOR_NAME}
    run = json.loads(ev.run_file(out).read_text())
    assert run["complete"] and run["model_identity"]["n_layers"] == 2 and run["device"] == "cpu"
    # the reference method, sharded the same way (--num-shards / --shard-index are what torchrun's RANK sets)
    full = eval_dir / "full" / "step.jsonl"
    ck = TinyCk(tmp / "ckpt")
    for i in range(2):
        args = _eval_args(ck, repo, full, "--device", "cpu", "--dtype", "float32", "--num-shards", "2",
                          "--shard-index", str(i), "--coin-root", str(tmp / "coin"))
        assert ev.main(args) == 0
    assert ev.main(["merge", "--out", str(full), *map(str, sorted(full.parent.glob("step.shard*of2.jsonl")))]) == 0
    _merged_results_reach_the_report(eval_dir, tmp / "coin", run["model_identity"], tmp_path, repo)


class TinyCk:
    """The README's ``$CKPT`` layout (llama/, siglip/, videollm/) as the flags of the tiny checkpoint."""

    def __init__(self, root):
        self.root = root

    def flags(self) -> list[str]:
        return ["--llm-path", str(self.root / "llama"), "--vision-path", str(self.root / "siglip"),
                "--connector-path", str(self.root / "videollm")]


def _merged_results_reach_the_report(eval_dir, coin_root, identity, tmp_path, repo):
    from vrex_lib.claims import accuracy as claims
    from vrex_lib.claims.provenance import Provenance
    from vrex_lib.report import write_table

    acc, strict, found = claims.merged_accuracy(eval_dir, ["full", "resv", "rekv"], ["step"], "full", str(coin_root),
                                                identity)
    assert found.startswith("2 of 3 method x task results") and acc.loc["rekv", "step"] != acc.loc["rekv", "step"]
    ci = claims.accuracy_intervals(eval_dir, ["full", "resv"], ["step"], "full", str(coin_root))
    assert ci["table2.acc.full.step"].n == 2 and ci["table2.acc.full.step"].value == acc.loc["full", "step"]
    prov = Provenance("full", CONNECTOR_NAME, "siglip", f"the user's COIN at {coin_root}", paper_workload=True)
    res = tmp_path / "results"
    write_table("table2", claims.accuracy_rows(acc, prov, ["step"], strict, "as merged", ci), profile="full",
                title="Table II", out=res)
    from vrex_lib.report.cli import main as report_main

    report_main(["--results", str(res), "--notebooks", str(repo / "notebooks")])  # exit 1: the other notebooks
    md = (res / "REPORT.md").read_text()
    line = next(x for x in md.splitlines() if "table2.acc.resv.step" in x)
    assert "95 % CI" in line and "n = 2" in line and "tolerance is below this sampling error" in line
    assert "table2.acc.rekv.step" in md  # a method without merged results: NOT RUN, named
    # results of another model never enter the table
    with pytest.raises(ValueError, match="not the model this notebook loads"):
        claims.merged_accuracy(eval_dir, ["full"], ["step"], "full", str(coin_root), dict(identity, dtype="bfloat16"))


# ------------------------------------------------------------------------------------------------ --device / --dtype
@pytest.mark.parametrize("extra, says", [
    (["--device", "cpu", "--dtype", "int8"], "--dtype 'int8' is not a dtype the runtime runs"),
    (["--device", "tpu:0"], "--device 'tpu:0' is not a device"),
    (["--device", "cuda:0"], "--device cuda:0: torch sees no CUDA device"),
    ([], "--device cuda (the full profile's default): torch sees no CUDA device"),
])
def test_device_and_dtype_are_checked_before_anything_loads(tiny_videollm, tmp_path, repo, capsys, monkeypatch,
                                                            extra, says):
    if "CUDA" in says and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    monkeypatch.setattr("vrex_lib.eval.run.build_model", _no_model)
    monkeypatch.setattr(importlib.import_module("vrex_lib.workload.measure"), "build_model", _no_model)
    out = tmp_path / "o" / "step.jsonl"
    assert ev.main(_eval_args(tiny_videollm, repo, out, *extra)) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and not out.parent.exists()
    assert workload_main(["measure", "--profile", "full", *tiny_videollm.flags(), *extra,
                          "--out", str(tmp_path / "w.json")]) == 2
    assert says in capsys.readouterr().err and not (tmp_path / "w.json").exists()


@pytest.mark.slow
def test_default_profile_identity_is_known_before_smollm2_loads():
    ident = identify("default")
    assert ident == build_model("default").identity and ident.name == "SmolLM2-135M-Instruct"
    assert (ident.n_layers, ident.hidden_size, ident.n_q_heads, ident.n_kv_heads, ident.head_dim) == (30, 576, 9, 3, 64)
