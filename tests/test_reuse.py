"""One rule for reuse (docs/DECISIONS.md D440): a cached or resumable result is reused only when every input that
made it is the same -- the model's full config and weight files, the code, the input files, the arguments. Each
kind of input is perturbed and the result must be recomputed, for every kind of cached result."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from vrex_lib import _io, longctx, workload
from vrex_lib.config import ReSVConfig, RuntimeConfig, VRexCoreConfig

GRID = longctx.study_grid("smoke")
CFG = RuntimeConfig(kv_capacity=GRID.kv_capacity, interval_token=False)
ENTRIES = ("vrex_lib.longctx.run", "vrex_lib.workload.measure", "vrex_lib.eval.run", "vrex_lib.hw.lxe",
           "vrex_lib.hw.activity")


# ----------------------------------------------------------------------------------------------- the key itself
def test_the_key_follows_every_kind_of_input(tmp_path):
    f = tmp_path / "input.bin"
    f.write_bytes(b"abcd" * 100)
    base = dict(model={"llm_config": {"rms_norm_eps": 1e-5}}, code=["vrex_lib.longctx.run"], inputs=[f],
                args={"kv": [300]})
    k0 = _io.reuse_key(**base)
    assert _io.reuse_key(**base) == k0  # the same inputs: the same key (reuse)
    assert _io.reuse_key(**dict(base, model={"llm_config": {"rms_norm_eps": 1e-6}})) != k0
    assert _io.reuse_key(**dict(base, args={"kv": [301]})) != k0
    assert _io.reuse_key(**dict(base, code=["vrex_lib.workload.measure"])) != k0
    st = f.stat()
    f.write_bytes(b"abce" * 100)  # same name, same size, and the old mtime put back
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _io.reuse_key(**base) != k0


@pytest.mark.parametrize("entry", ENTRIES)
def test_the_code_hashed_is_every_module_the_entry_imports(entry):
    names = {p.relative_to(_io._PKG).as_posix() for p in _io.code_files(entry)}
    assert "config.py" in names and "_io.py" in names and entry.split(".")[-1] + ".py" in {Path(n).name for n in names}
    if not entry.startswith("vrex_lib.hw"):  # the runners build models: the weights' and configs' code counts
        assert {"llm_weights.py", "runtime/model.py", "runtime/checkpoint.py"} <= names


@pytest.mark.parametrize("entry", ENTRIES)
def test_a_code_edit_anywhere_below_the_entry_changes_the_key(entry, monkeypatch):
    k0 = _io.reuse_key(code=[entry])
    real = _io.file_sha256
    target = "llm_weights.py" if not entry.startswith("vrex_lib.hw") else "config.py"
    monkeypatch.setattr(_io, "file_sha256", lambda p: ("edited" if Path(p).name == target else real(p)))
    assert _io.reuse_key(code=[entry]) != k0


def test_an_unknown_module_is_an_error():
    with pytest.raises(ValueError, match="not a vrex_lib module"):
        _io.code_files("vrex_lib.no_such_module")


# ----------------------------------------------------------------------------------------------- the models
def _edited_eps_model(monkeypatch):
    """The smoke model with one field of ``tiny_llama_config`` changed (``rms_norm_eps``)."""
    from vrex_lib.runtime import build_model
    from vrex_lib.runtime import model as M

    real = M.tiny_llama_config

    def edited(**kw):
        cfg = real(**kw)
        cfg.rms_norm_eps = cfg.rms_norm_eps * 10
        return cfg

    monkeypatch.setattr(M, "tiny_llama_config", edited)
    m = build_model("smoke")
    monkeypatch.setattr(M, "tiny_llama_config", real)
    return m


def _same_shape_other_weights(folder: Path) -> None:
    """Rewrite ``folder``'s model.safetensors with other values of the same names, shapes and size."""
    from safetensors.torch import load_file, save_file

    f = folder / "model.safetensors"
    size = f.stat().st_size
    state = load_file(str(f))
    name = next(k for k in sorted(state) if k.endswith("q_proj.weight"))
    state[name] = state[name] * 0.5
    save_file(state, str(f), metadata={"format": "pt"})
    assert f.stat().st_size == size


@pytest.fixture(scope="module")
def llm_folder(tmp_path_factory):
    from tiny_videollm import write_tiny_videollm

    return write_tiny_videollm(tmp_path_factory.mktemp("tiny")).llm


def test_a_config_field_changes_the_model_record(tiny, monkeypatch):
    assert _io.reuse_key(model=tiny.reuse_record()) != _io.reuse_key(model=_edited_eps_model(monkeypatch)
                                                                     .reuse_record())


def test_other_weights_of_the_same_name_and_shape_change_the_record(llm_folder, tmp_path):
    import shutil

    from vrex_lib.runtime import build_model

    mine = tmp_path / llm_folder.name
    shutil.copytree(llm_folder, mine)
    a = build_model("default", llm_path=mine)
    rec_a = a.reuse_record()
    _same_shape_other_weights(mine)
    b = build_model("default", llm_path=mine)
    assert (a.name, a.identity.n_layers, a.dtype) == (b.name, b.identity.n_layers, b.dtype)  # name, shape alike
    assert _io.reuse_key(model=rec_a) != _io.reuse_key(model=b.reuse_record())  # ... the content does


# ----------------------------------------------------------------------------------------------- every cache kind
def _count_trials(monkeypatch) -> list:
    calls: list = []
    real = longctx.run.__globals__["run_trial"]

    def counting(*a, **kw):
        calls.append([s.name for s in a[3]])
        return real(*a, **kw)

    monkeypatch.setitem(longctx.run.__globals__, "run_trial", counting)
    return calls


def test_longctx_study_reruns_after_a_config_field_changes(tiny, tmp_path, monkeypatch):
    """Issue 48: ``rms_norm_eps`` in ``tiny_llama_config`` changed -> the study is rerun, not reused."""
    g = GRID.replace(blocks=(longctx.Block("passkey", (384,), (0.5,)),), methods=("full",))
    out = tmp_path / "study.json"
    other = _edited_eps_model(monkeypatch)
    calls = _count_trials(monkeypatch)
    longctx.run("smoke", g, out=out, model=tiny, progress=False)
    longctx.run("smoke", g, out=out, model=tiny, progress=False)
    assert len(calls) == 1  # the same inputs: reused
    longctx.run("smoke", g, out=out, model=other, progress=False)
    assert len(calls) == 2  # another config: rerun


def test_longctx_study_reruns_with_other_weights_of_the_same_name(llm_folder, tmp_path, monkeypatch):
    """Issue 48: ``--llm-path`` to a folder with other weights of the same name and shape -> rerun."""
    import shutil

    from vrex_lib.runtime import build_model

    mine = tmp_path / llm_folder.name
    shutil.copytree(llm_folder, mine)
    g = GRID.replace(blocks=(longctx.Block("passkey", (384,), (0.5,)),), methods=("full",))
    out = tmp_path / "study.json"
    calls = _count_trials(monkeypatch)
    longctx.run("default", g, out=out, model=build_model("default", llm_path=mine), progress=False)
    _same_shape_other_weights(mine)
    longctx.run("default", g, out=out, model=build_model("default", llm_path=mine), progress=False)
    assert len(calls) == 2


def test_workload_measure_remeasures_after_a_config_field_changes(tiny, tmp_path, monkeypatch, capsys):
    """Issue 48: ``workload measure`` said 'reused (inputs_key matches)' after the config edit."""
    out = tmp_path / "w.json"
    workload.measure("smoke", ["full"], [200], out, model=tiny, progress=False, fidelity_kv=())
    k0 = json.loads(out.read_text())["inputs_key"]
    workload.measure("smoke", ["full"], [200], out, model=_edited_eps_model(monkeypatch), progress=False,
                     fidelity_kv=())
    assert json.loads(out.read_text())["inputs_key"] != k0


def test_eval_lines_are_keyed_on_the_weight_files_and_the_code(llm_folder, tmp_path, monkeypatch):
    from vrex_lib.eval.plan import model_files, run_config
    from vrex_lib.runtime import identify

    mine = tmp_path / llm_folder.name
    import shutil

    shutil.copytree(llm_folder, mine)
    data = tmp_path / "COIN.json"
    data.write_text("{}")

    def cfg():
        return run_config(task="step", method="full", method_kwargs=None, profile="default",
                          model=identify("default", llm_path=mine), split="test", data_file=data, max_new_tokens=4,
                          max_frames=None, runtime_cfg=RuntimeConfig(), seed=0,
                          weights=model_files("default", None, mine))["config_key"]

    k0 = cfg()
    _same_shape_other_weights(mine)
    k1 = cfg()
    assert k1 != k0
    real = _io.file_sha256
    monkeypatch.setattr(_io, "file_sha256", lambda p: "edited" if Path(p).name == "session.py" else real(p))
    assert cfg() != k1


def test_rtl_caches_follow_the_code_and_their_inputs(monkeypatch, tmp_path):
    from vrex_lib.hw import activity, lxe
    from vrex_lib.hw.blocks import OperatingPoint

    k0 = lxe.inputs_key("smoke", 0, VRexCoreConfig(), "icarus", {})
    a0 = activity.inputs_key("hcu", 10, 0, "icarus", {}, OperatingPoint(), trace_file=tmp_path / "none")
    real = _io.file_sha256
    monkeypatch.setattr(_io, "file_sha256", lambda p: "edited" if Path(p).name == "config.py" else real(p))
    assert lxe.inputs_key("smoke", 0, VRexCoreConfig(), "icarus", {}) != k0
    assert activity.inputs_key("hcu", 10, 0, "icarus", {}, OperatingPoint(), trace_file=tmp_path / "none") != a0
    monkeypatch.setattr(_io, "file_sha256", real)
    assert lxe.inputs_key("smoke", 1, VRexCoreConfig(), "icarus", {}) != k0


def test_the_design_space_fidelity_file_follows_the_model_config(tiny, monkeypatch):
    """Notebook 08's fidelity file was keyed on the model's name only."""
    from vrex_lib import dse

    spec = dse.sweep_spec("smoke")
    assert dse.spec_inputs_key(spec, tiny) == dse.spec_inputs_key(spec, tiny)
    assert dse.spec_inputs_key(spec, tiny) != dse.spec_inputs_key(spec, _edited_eps_model(monkeypatch))


def test_large_file_digests_are_remembered_across_runs_and_follow_rewrites(tmp_path, monkeypatch):
    cache = tmp_path / "digests.json"
    monkeypatch.setenv("VREX_DIGEST_CACHE", str(cache))
    monkeypatch.setattr(_io, "_PERSIST_BYTES", 10)
    f = tmp_path / "weights.bin"
    f.write_bytes(b"x" * 100)
    d0 = _io.file_sha256(f)
    assert cache.is_file() and d0 in json.loads(cache.read_text()).values()
    _io._DIGESTS.clear()  # a new process: the digest comes from the cache, not from reading the file
    monkeypatch.setattr(_io.hashlib, "sha256", lambda *a: pytest.fail("read again"))
    assert _io.file_sha256(f) == d0
    monkeypatch.undo()
    monkeypatch.setenv("VREX_DIGEST_CACHE", str(cache))
    st = f.stat()
    f.write_bytes(b"y" * 100)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _io.file_sha256(f) != d0


def test_the_cacti_cache_follows_its_technology_files(tmp_path, monkeypatch):
    """A CACTI result is keyed on the binary, the configuration and every technology file CACTI reads."""
    import shutil

    from vrex_lib.estimate import cacti

    src = cacti.cacti_dir()
    d = tmp_path / "cacti"
    shutil.copytree(src / "tech_params", d / "tech_params")
    shutil.copy2(src / "cacti", d / "cacti")
    monkeypatch.setenv("VREX_CACTI_DIR", str(d))
    k0 = cacti._key("cfg")
    assert cacti._key("cfg") == k0 and cacti._key("cfg2") != k0
    t = d / "tech_params" / "22nm.dat"
    t.write_text(t.read_text().replace("-Vdd (V)", "-Vdd (V) ", 1))
    assert cacti._key("cfg") != k0
