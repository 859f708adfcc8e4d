"""Issue 48's silent and poor cases: each a test naming the flag or file and the fix (docs/DECISIONS.md D440-D449).
The reuse rule itself is tests/test_reuse.py; make's arguments and dry runs tests/test_make.py."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY_WORKLOAD = ROOT / "tests" / "data" / "workload_tiny.json"


def test_a_workload_file_of_another_profile_is_refused_naming_both(tmp_path):
    """Issue 48: a smoke-profile workload file at workload_default.json was used by notebook 06 with no warning."""
    from vrex_lib.claims import performance as CMP

    d = json.loads(TINY_WORKLOAD.read_text())
    p = tmp_path / "workload_default.json"
    p.write_text(json.dumps(dict(d, profile="smoke")))
    with pytest.raises(ValueError, match=r"workload_default.json holds the workload of the 'smoke' profile.*"
                                         r"uses the 'default' profile.*--profile default"):
        CMP.workload_for_claims(p, profile="default")
    assert CMP.workload_for_claims(p, profile="smoke")[0] is None  # its own profile: read (NOT RUN for its gaps)


@pytest.mark.parametrize("tol", ["0", "-1", "nan"])
def test_plan_refuses_a_tolerance_that_is_not_positive(capsys, tol):
    """Issue 48: `eval plan --tolerance 0` was a ZeroDivisionError and `-1` was accepted."""
    from vrex_lib import eval as ev

    assert ev.main(["plan", "--profile", "smoke", "--seconds-per-frame", "1", "--tolerance", tol]) == 2
    err = capsys.readouterr().err
    assert "--tolerance must be a number of points > 0" in err and err.count("\n") == 1


def test_plan_on_a_pilot_with_no_differing_pair_uses_the_wilson_bound(tiny, tmp_path, capsys):
    """Issue 48: a pilot with no disagreeing pair printed ±0.00 and '0 samples needed' (D340's fallback)."""
    from vrex_lib import eval as ev
    from vrex_lib.eval import stats

    a = ev.run_eval("step", "full", "smoke", tmp_path / "full" / "step.jsonl", model=tiny, max_samples=2,
                    progress=False, reference=None, max_new_tokens=2)
    assert ev.main(["plan", "--profile", "smoke", "--tasks", "step", "--timing", str(a), "--pilot", str(a),
                    str(a)]) == 0
    out = capsys.readouterr().out
    n = len(stats.pooled_counts(a, "smoke"))
    delta = stats.wilson(0, n)[1]
    assert delta > 0 and f"δ={delta:.3g}" in out and "Wilson 95 % upper bound of 0 differing" in out
    line = next(x for x in out.splitlines() if x.startswith("step "))
    assert " 0.00 " not in f" {line} " and not line.rstrip().endswith(" 0")


def test_num_shards_under_torchrun_takes_this_ranks_shard(monkeypatch):
    """Issue 48: `--num-shards 2` under torchrun made every rank take shard 0."""
    from vrex_lib import eval as ev

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert ev.shard_from_env(2, None) == (2, 1)
    monkeypatch.setenv("RANK", "3")
    with pytest.raises(ValueError, match=r"from \$RANK=3.*--nproc-per-node"):
        ev.shard_from_env(2, None)


def test_rank_without_world_size_names_the_variables(monkeypatch):
    """Issue 48: RANK without WORLD_SIZE named flags the user never passed."""
    from vrex_lib import eval as ev

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(ValueError, match=r"\$RANK=1 is set but \$WORLD_SIZE is not.*unset RANK"):
        ev.shard_from_env(None, None)
    assert ev.shard_from_env(4, 2) == (4, 2)  # explicit flags win


# ----------------------------------------------------------------------------------------------- CACTI
def _cacti_copy(tmp_path: Path, *, truncate: bool = False, drop: str | None = None, no_vdd: bool = False) -> Path:
    from vrex_lib.estimate import cacti

    src = cacti.cacti_dir()
    d = tmp_path / "cacti"
    (d / "tech_params").mkdir(parents=True)
    for f in (src / "tech_params").iterdir():
        if f.name != drop:
            shutil.copy2(f, d / "tech_params" / f.name)
    if no_vdd:
        t = d / "tech_params" / "22nm.dat"
        t.write_text("".join(ln for ln in t.read_text().splitlines(True) if not ln.startswith("-Vdd (V)")))
    data = (src / "cacti").read_bytes()
    (d / "cacti").write_bytes(data[:len(data) // 10] if truncate else data)
    (d / "cacti").chmod(0o755)
    return d


@pytest.mark.parametrize("case, says", [
    (dict(drop="22nm.dat"), "22nm.dat cannot be read"),
    (dict(no_vdd=True), "22nm.dat has no '-Vdd (V)' row"),
    (dict(truncate=True), "make cacti"),
])
def test_a_damaged_cacti_installation_is_not_blamed_on_the_configuration(tmp_path, monkeypatch, capsys, case, says):
    """Issue 48: a truncated binary, a missing 22nm.dat and one without its Vdd row were blamed on the config."""
    from vrex_lib.estimate import cacti

    monkeypatch.setenv("VREX_CACTI_DIR", str(_cacti_copy(tmp_path, **case)))
    assert cacti.main(["check"]) == 1
    err = capsys.readouterr().err
    assert says in err and "choose another size" not in err, err


def test_cacti_check_refuses_an_extra_word(capsys):
    """Issue 48: `estimate cacti check 7nm` ignored the extra word."""
    from vrex_lib.estimate.__main__ import main

    assert main(["cacti", "check", "7nm"]) == 2
    err = capsys.readouterr().err
    assert "'check' takes no further argument, got '7nm'" in err


def test_longctx_refuses_out_and_workload_the_same_file(tmp_path, capsys):
    """Issue 48: `longctx --out F --workload F` wrote one over the other."""
    from vrex_lib.longctx.__main__ import main

    f = tmp_path / "study.json"
    assert main(["run", "--profile", "smoke", "--out", str(f), "--workload", str(tmp_path / "." / "study.json")]) == 2
    err = capsys.readouterr().err
    assert "--out and --workload are the same file" in err and not f.exists()


def test_a_resume_across_the_full_methods_results_is_refused_not_mixed(tiny, tmp_path):
    """Issue 48: an eval started before the `full` run existed and resumed after it mixed lines with and without
    the agreement columns; accuracy.summarize averaged agreement over 3 samples while reporting 6."""
    import pandas as pd

    from vrex_lib import accuracy
    from vrex_lib import eval as ev

    kw = dict(model=tiny, progress=False, max_new_tokens=2)
    out = tmp_path / "resv" / "step.jsonl"
    ev.run_eval("step", "resv", "smoke", out, max_samples=1, **kw)  # no full results yet: no agreement
    ev.run_eval("step", "full", "smoke", tmp_path / "full" / "step.jsonl", max_samples=2, **kw)
    with pytest.raises(ValueError, match=r"no agreement columns.*--reference none.*--replace"):
        ev.run_eval("step", "resv", "smoke", out, max_samples=2, **kw)
    ev.run_eval("step", "resv", "smoke", out, max_samples=2, reference=None, **kw)  # finished without: consistent
    rows = ev.read_jsonl(out)
    assert len(rows) == 2 and all(r["ref_first_token_agree"] is None for r in rows)
    mixed = pd.DataFrame([dict(method="resv", task="step", ref_answer_match=v, correct=1.0) for v in (1.0, None)])
    with pytest.raises(ValueError, match=r"1 of 2 lines carry agreement columns"):
        accuracy.summarize(mixed)


# ----------------------------------------------------------------------------------------------- report staleness
def _executed(out: Path, nbs: Path, names: list[str], t: float) -> None:
    import os

    from helpers import write_notebook

    (out / "executed").mkdir(parents=True, exist_ok=True)
    (out / "data").mkdir(exist_ok=True)
    (out / ".params").write_text("PROFILE=default PAPERMILL_ARGS=\n")
    (out / "data" / "workload_default.json").write_text("{}")
    for n in names:
        write_notebook(nbs / f"{n}.ipynb", "pass")
        (out / "executed" / f"{n}.ipynb").write_text("{}")
        (out / "executed" / f"{n}.manifest.json").write_text("{}")
    for p in [out / ".params", out / "data" / "workload_default.json", *nbs.iterdir()]:
        os.utime(p, (t - 60, t - 60))
    for p in (out / "executed").iterdir():
        os.utime(p, (t, t))


def test_a_remeasured_workload_makes_its_readers_stale(tmp_path):
    """Issue 48: after make's workload file was re-measured, `make report` said nothing was stale."""
    import os

    from vrex_lib import report

    out, nbs = tmp_path / "results", tmp_path / "nbs"
    nbs.mkdir()
    import time

    t = time.time()
    _executed(out, nbs, ["04_hw", "05_area", "06_performance"], t)
    assert report.stale_notebooks(out, nbs) == {}
    os.utime(out / "data" / "workload_default.json", (t + 60, t + 60))  # re-measured after 06 ran
    stale = report.stale_notebooks(out, nbs)
    assert list(stale) == ["06_performance.ipynb"] and "workload_default.json" in stale["06_performance.ipynb"]
    (out / "data" / "workload_default.json").unlink()  # a missing input is stale too
    assert "workload_default.json` is missing" in report.stale_notebooks(out, nbs)["06_performance.ipynb"]
    (out / "executed" / "04_hw.ipynb").unlink()  # 05 reads 04's results
    assert "04_hw.ipynb` is missing" in report.stale_notebooks(out, nbs)["05_area.ipynb"]


def test_a_deleted_manifest_makes_its_notebook_stale(tmp_path):
    """Issue 48: with a notebook's manifest deleted, one of its tables cut at a line boundary passed."""
    import time

    from vrex_lib import report

    out, nbs = tmp_path / "results", tmp_path / "nbs"
    nbs.mkdir()
    _executed(out, nbs, ["04_hw"], time.time())
    (out / "executed" / "04_hw.manifest.json").unlink()
    assert "04_hw.manifest.json` is missing" in report.stale_notebooks(out, nbs)["04_hw.ipynb"]


def test_the_stale_check_reads_the_makefiles_own_inputs():
    """report.stale.MAKE_INPUTS names what the Makefile's rules make each notebook depend on."""
    import re

    from vrex_lib.report.stale import MAKE_INPUTS

    mk = (ROOT / "Makefile").read_text()
    rules = re.findall(r"wildcard \$\(NOTEBOOK_DIR\)/([0-9\[\]]+)_\*\.ipynb\)\)\)\)\): *(?:\\\n)?\s*([^\n]+)", mk)
    kinds = {"$(WORKLOAD_FILE)": "workload", "$(COIN_STAMP)": "coin"}
    got = {}
    for pat, dep in rules:
        if dep.strip() in kinds:
            got[pat] = (kinds[dep.strip()],)
        elif "/04_" in dep:
            got[pat] = ("executed:04",)
        elif "filter-out" in dep:
            got[pat] = ("executed:*",)
    assert got == MAKE_INPUTS, rules


# ----------------------------------------------------------------------------------------------- report errors
def _one_table(out: Path, monkeypatch) -> None:
    from vrex_lib import paper, report

    monkeypatch.setenv("VREX_RESULTS_DIR", str(out))
    report.write_table("headline", [report.Row("fig13.edge.b1.fps_min", "x", "FPS", 3.9, 1.9,
                                               paper.Tolerance("rel", 0.1), "abstract")], profile="smoke", title="t")


def test_report_errors_name_the_file_and_the_fix(tmp_path, capsys, monkeypatch):
    """Issue 48: the report blamed --results for a summary.csv that is a folder, called an empty table
    'OSError Errno 22', and on a full disk said only '[Errno 28]'."""
    import errno

    from vrex_lib import report
    from vrex_lib.report import cli

    out = tmp_path / "res"
    _one_table(out, monkeypatch)
    (out / "tables" / "summary.csv").mkdir()
    assert report.main(["--results", str(out), "--allow-missing"]) == 2
    err = capsys.readouterr().err
    assert "summary.csv is a folder, but the report writes its file tables/summary.csv there" in err
    assert "--results" not in err
    (out / "tables" / "summary.csv").rmdir()
    (out / "tables" / "empty_t.csv").write_bytes(b"")
    assert report.main(["--results", str(out), "--allow-missing"]) == 0
    err = capsys.readouterr().err
    assert "empty_t.csv: unreadable (empty: 0 bytes" in err and "Errno 22" not in err

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli, "build_report", full)
    assert report.main(["--results", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {out}" in err and "free space" in err


# ----------------------------------------------------------------------------------------------- notebook parameters
@pytest.mark.parametrize("args, says", [
    (["-p", "N_SAMPLES", "-3"], "N_SAMPLES=-3 must be >= 0"),
    (["-p", "KV_LEN_SIM", "-5"], "KV_LEN_SIM=-5 must be >= 0"),
    (["-p", "ACTIVITY_VECTORS", "-1"], "ACTIVITY_VECTORS=-1 must be >= 1"),
    (["-r", "SHADOW_KV", "1000,-2"], "has -2, which is not >= 1"),
])
def test_check_params_refuses_out_of_range_values_before_anything_runs(python_exe, args, says):
    """Issue 48: these were checked only inside the notebook, after the workload measurement had started."""
    import subprocess

    r = subprocess.run([python_exe, str(ROOT / "scripts" / "check_params.py"), str(ROOT / "notebooks"), *args],
                       capture_output=True, text=True)
    assert r.returncode == 2 and says in r.stderr and "nothing was run" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1


def test_every_numeric_notebook_parameter_declares_its_range():
    import importlib.util

    from vrex_lib.config import NOTEBOOK_RANGES

    spec = importlib.util.spec_from_file_location("check_params", ROOT / "scripts" / "check_params.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    numeric = {name for name, by_nb in mod.declared(ROOT / "notebooks").items()
               if any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in by_nb.values())}
    assert numeric and numeric <= set(NOTEBOOK_RANGES), numeric - set(NOTEBOOK_RANGES)


def test_the_grid_message_reads_as_a_sentence():
    """Issue 48: `-p GRID full` under the smoke profile read 'no the notebook parameter GRID ...'."""
    from vrex_lib import config
    from vrex_lib.longctx.grid import GRIDS, study_grid

    missing = next(((p, g) for p in config.PROFILES for g in config.STUDY_GRIDS
                    if (config.profile_config(p).longctx.grid, g) not in GRIDS
                    and not config.profile_config(p).longctx.always_full), None)
    if missing is None:
        pytest.skip("every profile has every grid")
    config._ARG_STYLE["style"] = "notebook"
    try:
        with pytest.raises(ValueError) as e:
            study_grid(*missing)
    finally:
        config._ARG_STYLE["style"] = "cli"
    msg = str(e.value)
    assert "no the" not in msg and f"the {missing[0]} profile has no {missing[1]!r} grid" in msg
    assert "set the notebook parameter GRID to 'profile'" in msg


# ----------------------------------------------------------------------------------------------- scripts/gpu_check.sh
@pytest.mark.parametrize("args, says", [
    (["--kv", "abc"], "--kv 'abc': give context lengths"),
    (["--steps", "0"], "--steps 0: must be a whole number >= 1"),
    (["--eval-samples", "0"], "--eval-samples 0: must be a whole number >= 1"),
    (["--out", "scripts/gpu_check.sh"], "scripts/gpu_check.sh is a file, not a folder"),
])
def test_gpu_check_refuses_bad_arguments_before_any_work(args, says):
    """Issue 48: these ended in tracebacks, and --out a file failed only after all the timings."""
    import subprocess

    r = subprocess.run(["bash", "scripts/gpu_check.sh", "--tiny", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and says in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert "build_s=" not in r.stdout


def test_gpu_check_without_a_venv_says_make_setup(tmp_path):
    import os
    import subprocess

    (tmp_path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "gpu_check.sh", tmp_path / "scripts" / "gpu_check.sh")
    env = {k: v for k, v in os.environ.items() if k != "PY"}
    r = subprocess.run(["bash", "scripts/gpu_check.sh", "--tiny"], cwd=tmp_path, capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 2 and "no .venv here" in r.stderr and "make setup" in r.stderr


def test_the_simulator_names_the_file_with_a_negative_tokens_per_cluster(tmp_path):
    """Issue 48: the simulator fed a negative tokens-per-cluster named no file."""
    from vrex_lib.perf import Workload

    d = json.loads(TINY_WORKLOAD.read_text())
    c = next(c for c in d["checkpoints"] if c.get("tokens_per_cluster") is not None)
    c["tokens_per_cluster"] = -3.0
    p = tmp_path / "w.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"w\.json: checkpoint \d+ .*tokens_per_cluster = -3\.0, which must be > 0"):
        Workload.from_measurement(p)


@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_a_checkpoint_without_a_whole_tokenizer_fails_before_its_weights_load(tiny_videollm, tmp_path, monkeypatch,
                                                                             damage):
    """Issue 48: a deleted or truncated tokenizer.json failed after the weights loaded, naming no file."""
    import transformers

    from vrex_lib.runtime import build_model

    llm = tmp_path / "llm"
    shutil.copytree(tiny_videollm.llm, llm)
    tj = llm / "tokenizer.json"
    if damage == "delete":
        tj.unlink()
    else:
        tj.write_bytes(tj.read_bytes()[: tj.stat().st_size // 2])
    loaded = []
    real = transformers.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: loaded.append(a) or real(*a, **k))
    with pytest.raises(ValueError, match=r"--llm-path .*tokenizer\.json") as e:
        build_model("default", llm_path=llm)
    assert not loaded and ("is missing" in str(e.value) if damage == "delete" else "damaged or cut" in str(e.value))


def test_live_on_a_video_damaged_mid_file_fails_before_the_model_loads(tmp_path, monkeypatch, capsys):
    """Issue 48: `live` on a video damaged mid-file failed after the model loaded."""
    from vrex_lib import live

    data = bytearray((ROOT / "data" / "coin_mini" / "videos" / "mini00-replac.mp4").read_bytes())
    start = int(len(data) * 0.4)
    data[start:start + len(data) // 4] = bytes(len(data) // 4)  # the container still opens; frames do not decode
    video = tmp_path / "damaged.mp4"
    video.write_bytes(bytes(data))

    def no_model(*a, **k):
        raise AssertionError("the model was built before the video was checked")

    monkeypatch.setattr(live, "build_model", no_model)
    assert live.main([str(video), "--profile", "smoke", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "damaged.mp4" in err and "cannot be decoded" in err and "--end" in err


@pytest.mark.parametrize("lanes", [-4, 2.5, float("nan"), "4"])
def test_pcie_power_refuses_a_lane_count_that_is_not_one(lanes):
    """Issue 48: estimate.pcie_power_w(-4) returned -12 W."""
    from vrex_lib import estimate

    with pytest.raises(ValueError, match="lanes must be a whole number >= 0"):
        estimate.pcie_power_w(lanes)
    assert estimate.pcie_power_w(4) == pytest.approx(4 * estimate.PCIE_W_PER_LANE)


def test_check_params_refuses_a_grid_the_profile_lacks(python_exe):
    """Issue 48: `-p GRID full` under the smoke profile failed inside notebook 09, after the measurement started."""
    import os
    import subprocess

    cmd = [python_exe, str(ROOT / "scripts" / "check_params.py"), str(ROOT / "notebooks"), "-p", "GRID", "full"]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "VREX_CHECK_PROFILE": "smoke"})
    assert r.returncode == 2 and "the smoke profile has no 'full' grid" in r.stderr and "no the" not in r.stderr
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "VREX_CHECK_PROFILE": "default"})
    assert r.returncode == 0, r.stderr
