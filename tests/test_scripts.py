"""The Makefile's helper scripts in-process: parameter types as papermill gives them, the results folder guard,
the COIN rerun stamp (docs/DECISIONS.md D71, D170). `make` itself runs them in tests/test_make.py."""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"_vrex_script_{name}", REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


params = _script("check_params")
folder = _script("results_folder")


# ------------------------------------------------------------------ check_params


@pytest.fixture
def nbdir(tmp_path) -> Path:
    cell = {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "outputs": [], "execution_count": None,
            "source": ['PROFILE = "default"\n', 'FRESH = True\n', 'N = 0\n', 'RATE = 0.5\n', 'ROOT = ""\n',
                       'ANY = None\n', 'CALC = 2 * 3\n']}
    d = tmp_path / "nbs"
    d.mkdir()
    (d / "03_x.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                              "nbformat_minor": 5}))
    return d


def test_papermill_types_values_as_assumed():
    """The type check relies on papermill 2.7's own typing of -p values; a papermill that types otherwise fails
    here rather than letting a value through."""
    resolve = params._papermill()[0]
    assert [resolve(v) for v in ("True", "False", "None", "3", "1e5", "false", "1,2")] == \
        [True, False, None, 3, 100000.0, "false", "1,2"]


@pytest.mark.parametrize("args", [["--cwd", "/tmp", "-p", "N", "1"], ["--log-level=INFO"], ["--report-mode"],
                                  ["-p", "FRESH", "False"], ["-p", "N", "-1"], ["-p", "RATE", "2"],
                                  ["-p", "RATE", "1e-3"], ["-p", "ROOT", "/data/coin"], ["-r", "ROOT", "123"],
                                  ["-p", "ANY", "7"], ["-p", "CALC", "x"], ["-y", "{FRESH: false, N: 3}"]])
def test_values_of_the_default_type_pass(nbdir, args):
    params.check(nbdir, args)


@pytest.mark.parametrize("args, msg", [
    (["-p", "FRESH", "false"], "'-p FRESH false' gives FRESH a str 'false', but 03_x.ipynb expects a bool"),
    (["-p", "FRESH", "1"], "expects a bool"),
    (["-r", "FRESH", "True"], "expects a bool"),
    (["-p", "N", "abc"], "gives N a str 'abc', but 03_x.ipynb expects an int"),
    (["-p", "N", "2.0"], "gives N a float 2.0"),
    (["-p", "N", "True"], "gives N a bool True"),
    (["-p", "RATE", "fast"], "expects a float"),
    (["-p", "ROOT", "123"], "use -r ROOT 123 to pass it as text"),
    (["-p", "ROOT", "None"], "gives ROOT None"),
    (["-y", "{FRESH: 'no'}"], "'-y {FRESH: 'no'}' gives FRESH a str 'no'"),
    (["-p", "PROFILE", "full"], "which make sets itself"),
    (["-p", "NOPE", "1"], "has the parameter(s) NOPE"),
    (["-p", "N"], "-p needs a NAME and a VALUE"),
    (["-y", "[1, 2]"], "must be a YAML mapping"),
    (["--no-such-option"], "papermill has no option --no-such-option"),
    (["stray"], "unexpected argument 'stray'"),
    (["--prepare-only"], "--prepare-only would not execute the notebooks"),
    (["--log-level"], "--log-level needs a value"),
])
def test_mistyped_or_unknown_parameters_are_one_line(nbdir, args, msg):
    with pytest.raises(params.ParamError) as e:
        params.check(nbdir, args)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_final_values_follow_papermills_order(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("ROOT: from-file\nN: 1\n")
    got = params.final_values(["-r", "ROOT", "raw", "-p", "ROOT", "p", "-f", str(f), "-y", "{N: 2}"])
    assert got == {"ROOT": "raw", "N": 2}  # -r beats -p beats -y beats -f, whatever the order given


# ------------------------------------------------------------------ results_folder


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    repo = tmp_path / "checkout"
    (repo / ".git").mkdir(parents=True)
    (repo / "results").mkdir()
    (repo / "results" / "README.md").write_text("kept")
    monkeypatch.setattr(folder, "REPO", repo)
    return repo


@pytest.mark.parametrize("raw, why", [("", "is empty"), ("/", "file-system root"), ("a b", "whitespace")])
def test_never_a_results_folder(checkout, raw, why):
    assert why in folder._refusal(raw)[1]


def test_the_checkout_and_its_parents_and_git_are_refused(checkout):
    for raw, why in ((checkout, "repository root"), (checkout.parent, "holding the repository"),
                     (checkout / ".git" / "objects", ".git")):
        assert why in folder._refusal(str(raw))[1]
        with pytest.raises(folder.FolderError, match="nothing was deleted"):
            folder.clean(str(raw))


def test_prepare_marks_only_new_empty_or_results_folders(checkout, tmp_path):
    new = tmp_path / "runs" / "one"
    assert folder.prepare(str(new)) == new and (new / folder.MARKER).is_file()
    busy = tmp_path / "home"
    busy.mkdir()
    (busy / "notes.txt").write_text("x")
    with pytest.raises(folder.FolderError, match="already holds files"):
        folder.prepare(str(busy))
    assert not (busy / folder.MARKER).exists()
    folder.prepare(str(checkout / "results" / "smoke"))  # below the checkout's results/
    file_ = tmp_path / "f"
    file_.write_text("x")
    with pytest.raises(folder.FolderError, match="cannot be written"):
        folder.prepare(str(file_ / "sub"))


def test_clean_empties_a_marked_folder_and_keeps_readme_and_marker(checkout, tmp_path):
    res = tmp_path / "res"
    folder.prepare(str(res))
    (res / "tables").mkdir()
    (res / "tables" / "t.csv").write_text("x")
    (res / "README.md").write_text("x")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("x")
    os.symlink(outside, res / "link")
    assert folder.clean(str(res)) == 3  # t.csv, tables/, the link (not what it points to)
    assert sorted(p.name for p in res.iterdir()) == [folder.MARKER, "README.md"]
    assert (outside / "keep.txt").exists()
    unmarked = tmp_path / "unmarked"
    unmarked.mkdir()
    (unmarked / "x").write_text("x")
    with pytest.raises(folder.FolderError, match="not a vrex results folder"):
        folder.clean(str(unmarked))
    assert folder.clean(str(tmp_path / "absent")) == 0


def test_clean_refuses_while_reproduce_holds_the_lock(checkout, tmp_path):
    import fcntl

    res = tmp_path / "res"
    folder.prepare(str(res))
    with open(res / ".lock", "a+") as held:
        held.write("make reproduce (pid 1)\n")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(folder.FolderError, match="make reproduce .pid 1. is running"):
            folder.clean(str(res))
    assert (res / ".lock").exists()


# ------------------------------------------------------------------ coin_stamp


def test_coin_stamp_follows_annotations_and_video_listing(tmp_path):
    stamp = _script("coin_stamp")
    coin = tmp_path / "coin"
    (coin / "videos").mkdir(parents=True)
    (coin / "COIN.json").write_text("{}")
    (coin / "videos" / "a.mp4").write_bytes(b"0")
    args = ["-r", "COIN_ROOT", str(coin)]
    first = stamp.stamp("full", args)
    assert "entries=1" in first and stamp.stamp("full", args) == first
    (coin / "videos" / "b.mp4").write_bytes(b"1")
    second = stamp.stamp("full", args)
    assert second != first and "entries=2" in second
    os.utime(coin / "videos" / "b.mp4", ns=(1, 1))  # a replaced video: same name, other mtime
    third = stamp.stamp("full", args)
    assert third != second and third.splitlines()[0] == first.splitlines()[0]
    (coin / "COIN.json").write_text("{} ")
    assert stamp.stamp("full", args).splitlines()[0] != first.splitlines()[0]
    assert stamp.stamp("full", []).startswith("COIN data unavailable (ValueError: profile 'full' needs coin_root")


# ------------------------------------------------------------------ choice parameters (D330)


@pytest.mark.parametrize("args, bad", [(["-p", "GRID", "ful"], "GRID 'ful'"),
                                       (["-y", "EXTRAPOLATION: linear"], "EXTRAPOLATION 'linear'"),
                                       (["-r", "SPLIT", "test"], "SPLIT 'test'")])
def test_a_choice_parameter_must_have_one_of_its_values(args, bad):
    with pytest.raises(params.ParamError, match=rf"the notebook parameter {bad}, which is not one of") as e:
        params.check(REPO / "notebooks", args)
    assert "grid=" not in str(e.value) and "(nothing was run or changed)" in str(e.value)
    params.check(REPO / "notebooks", ["-p", "GRID", "full", "-p", "EXTRAPOLATION", "loglog-fit",
                                      "-r", "SPLIT", "training"])


# ------------------------------------------------------------------ scrub_outputs (D329), locked.py (D325, D328)

scrub = _script("scrub_outputs")


def test_stored_outputs_lose_the_machine_folders_but_keep_sources(tmp_path):
    res = tmp_path / "res"
    home = os.path.expanduser("~")
    nb = {"cells": [{"cell_type": "code", "source": [f"RESULTS_DIR = '{res}'"], "outputs": [
        {"output_type": "stream", "name": "stderr", "text": [f"listed in {res}/eval03/x.skips.csv\n",
                                                             f"{REPO}/data/coin_tiny/COIN.json and {REPO}\n"]},
        {"output_type": "execute_result", "data": {"text/plain": f"PosixPath('{res}/figures/a.png')",
                                                   "image/png": "iVBOR"}},
        {"output_type": "error", "ename": "E", "evalue": f"{home}/x", "traceback": [f"File {REPO}/vrex_lib/x.py"]}]}]}
    cell = scrub.scrub_notebook(json.loads(json.dumps(nb)), str(res))["cells"][0]
    out = json.dumps(cell["outputs"])
    assert str(res) not in out and str(REPO) not in out
    assert "RESULTS_DIR/eval03/x.skips.csv" in out and "data/coin_tiny/COIN.json and ." in out
    assert "RESULTS_DIR/figures/a.png" in out and "File vrex_lib/x.py" in out and '"~/x"' in out
    assert cell["source"] == nb["cells"][0]["source"]  # the source is kept as it ran
    inside = scrub.replacements(str(REPO / "results" / "smoke"))
    assert scrub.scrub_text(f"-> {REPO}/results/smoke/t.csv; {home}fs", inside) == f"-> results/smoke/t.csv; {home}fs"


def test_locked_tells_its_command_the_lock_it_holds(tmp_path):
    import subprocess
    import sys

    lock = tmp_path / ".lock"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "locked.py"), str(lock), "demo", "--", sys.executable,
                        "-c", "import os; print(os.environ['VREX_RUN_LOCK'])"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == str(lock.resolve()), r.stderr
