"""The Makefile's structure on a throw-away notebook folder: parameters decide reruns, a bad PROFILE changes
nothing, two runs on one results folder cannot interleave, `make report` lists what is missing, `make lab` as
root. Each case runs real make + papermill on a two-cell notebook (seconds)."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import make_ready

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not make_ready(), reason="needs make and an up-to-date .venv and data/coin_mini "
                                                         "(make setup)")

NB = {
    "cells": [
        {"cell_type": "code", "id": "params", "metadata": {"tags": ["parameters"]}, "execution_count": None,
         "outputs": [],
         "source": ['PROFILE = "default"\n', 'RESULTS_DIR = ""\n', 'X = 1\n', 'FLAG = True\n']},
        {"cell_type": "code", "id": "work", "metadata": {}, "execution_count": None, "outputs": [],
         "source": ["from pathlib import Path\n",
                    "with open(Path(RESULTS_DIR) / 'runs.log', 'a') as f:\n",
                    "    f.write(f'{PROFILE} {X}\\n')\n",
                    "from vrex_lib import report\n",
                    "report.write_table(\"t_demo\", [report.info_row(\"demo\", \"x\", \"\", float(X))], "
                    "profile=PROFILE, out=RESULTS_DIR)\n"]},
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}


@pytest.fixture
def nbdir(tmp_path) -> Path:
    d = tmp_path / "nbs"
    d.mkdir()
    (d / "00_demo.ipynb").write_text(json.dumps(NB))
    return d


def make(*args, tmp, nbdir, env_extra=None, results=None, **kw):
    # The workload measurement `reproduce` runs first is not what these tests are about: an up-to-date stand-in
    # file makes make skip it (it is newer than every library source).
    stamp = tmp / "res" / ".workload"  # the workload arguments they were made with (D441), older than them
    if not stamp.exists():
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text("WORKLOAD_ARGS= LONG=\n")
        os.utime(stamp, (stamp.stat().st_mtime - 3600,) * 2)
    for prof in ("smoke", "default", "full", "bogus"):
        wl = tmp / "res" / "data" / f"workload_{prof}.json"
        if not wl.exists():
            wl.parent.mkdir(parents=True, exist_ok=True)
            wl.write_text("{}")
    (tmp / "res" / ".vrex-results").touch()  # the folder `reproduce` made (scripts/results_folder.py)
    env = {**os.environ, "PYTHONPATH": str(REPO), "VREX_THREADS": "1", **(env_extra or {})}
    env.pop("MAKEFLAGS", None)
    return subprocess.run(["make", "--no-print-directory", "-C", str(REPO), f"RESULTS={results or tmp / 'res'}",
                           f"NOTEBOOK_DIR={nbdir}", *args], capture_output=True, text=True, env=env, timeout=300,
                          **kw)


def _runs(tmp) -> list[str]:
    log = tmp / "res" / "runs.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.slow
@pytest.mark.long
def test_reproduce_reruns_on_parameters_refuses_bad_profile_and_report_lists_missing(tmp_path, nbdir):
    # nothing run yet: `make report` writes a REPORT.md that lists the absent table, and fails
    r = make("report", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode != 0 and "00_demo.ipynb: t_demo" in r.stderr
    assert "`notebooks/00_demo.ipynb`: `t_demo` absent" in (tmp_path / "res" / "REPORT.md").read_text()

    r = make("reproduce", "PROFILE=smoke", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode == 0, r.stderr
    assert "reproduce: done" in r.stdout and _runs(tmp_path) == ["smoke 1"]
    assert "absent" not in (tmp_path / "res" / "REPORT.md").read_text()
    # the same parameters: nothing reruns
    r = make("reproduce", "PROFILE=smoke", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode == 0 and _runs(tmp_path) == ["smoke 1"]
    # another papermill parameter (e.g. another COIN_ROOT) reruns the notebook with it
    r = make("reproduce", "PROFILE=smoke", "PAPERMILL_ARGS=-p X 2", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode == 0 and "parameters changed" in r.stdout and _runs(tmp_path) == ["smoke 1", "smoke 2"]
    # a bogus profile is refused before anything is touched: the stamp stays...
    stamp = tmp_path / "res" / ".params"
    before = (stamp.read_text(), stamp.stat().st_mtime_ns)
    r = make("reproduce", "PROFILE=bogus", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode != 0 and "PROFILE=bogus is not a profile" in r.stderr
    assert (stamp.read_text(), stamp.stat().st_mtime_ns) == before
    # so is a parameter no notebook declares (papermill would only warn and run without it)
    r = make("reproduce", "PROFILE=smoke", "PAPERMILL_ARGS=-p COIN_ROTO /data", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode != 0 and "COIN_ROTO" in r.stderr and "PROFILE, RESULTS_DIR, X" in r.stderr
    assert (stamp.read_text(), stamp.stat().st_mtime_ns) == before and len(_runs(tmp_path)) == 2
    # ...so going back to the last parameters reruns nothing
    r = make("reproduce", "PROFILE=smoke", "PAPERMILL_ARGS=-p X 2", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode == 0 and len(_runs(tmp_path)) == 2
    # a partial results folder (one table deleted): `make report` fails and names it
    (tmp_path / "res" / "tables" / "t_demo.csv").unlink()
    r = make("report", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode != 0 and "00_demo.ipynb: t_demo" in r.stderr


def test_concurrent_reproduce_is_refused_not_interleaved(tmp_path, nbdir):
    res = tmp_path / "res"
    res.mkdir()
    with open(res / ".lock", "a+") as held:  # another `make reproduce` holds the results folder
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = make("reproduce", "PROFILE=smoke", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode != 0 and "already running" in r.stderr and "done" not in r.stdout
    assert _runs(tmp_path) == [] and not (res / "executed").exists()


def test_lab_binds_localhost_and_allows_root(tmp_path, nbdir):
    r = make("-n", "lab", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode == 0
    assert "--ip=127.0.0.1" in r.stdout and "http://127.0.0.1:8888/lab" in r.stdout
    assert ("--allow-root" in r.stdout) == (os.geteuid() == 0)


# ------------------------------------------------------------------ refused before anything is written


def _untouched(res: Path) -> bool:
    """Nothing but the helper's stand-ins (data/, the marker, the workload stamp) in the results folder."""
    return sorted(p.name for p in res.iterdir()) == [".vrex-results", ".workload", "data"]


@pytest.mark.parametrize("args, msg", [
    (("PROFILE=default full",), "PROFILE=default full is not a profile"),
    (("PROFILE=",), "PROFILE= is not a profile"),
    (("PROFILE=smoke", "PAPERMILL_ARGS=-p FLAG false"), "'-p FLAG false' gives FLAG a str 'false'"),
    (("PROFILE=smoke", "PAPERMILL_ARGS=-p X two"), "but 00_demo.ipynb expects an int"),
    (("PROFILE=smoke", "PAPERMILL_ARGS=-p PROFILE full"), "use make ... PROFILE=<value>"),
    (("PROFILE=smoke", "JOBS=abc"), "JOBS=abc is not a number of notebooks to run at a time"),
    (("PROFILE=smoke", "NOTEBOOK_DIR=/nonexistent"), "NOTEBOOK_DIR=/nonexistent holds no notebooks"),
])
def test_bad_profile_or_parameter_is_refused_before_anything_is_written(tmp_path, nbdir, args, msg):
    r = make("reproduce", *args, tmp=tmp_path, nbdir=nbdir)
    assert r.returncode != 0 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert _untouched(tmp_path / "res") and _runs(tmp_path) == []


@pytest.mark.parametrize("threads", ["abc", "0", "-1", "1.5"])
def test_bad_vrex_threads_is_refused_by_make(tmp_path, nbdir, threads):
    r = make("reproduce", "PROFILE=smoke", tmp=tmp_path, nbdir=nbdir, env_extra={"VREX_THREADS": threads})
    assert r.returncode != 0 and f"VREX_THREADS={threads} is not a torch thread count" in r.stderr
    assert _untouched(tmp_path / "res")


def test_unwritable_results_is_one_line_naming_results(tmp_path, nbdir):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    r = make("reproduce", "PROFILE=smoke", tmp=tmp_path, nbdir=nbdir, results=blocker / "res")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert f"RESULTS={blocker / 'res'}" in r.stderr and "cannot be written" in r.stderr
    if os.geteuid() != 0:  # root writes into a read-only folder anyway
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        r = make("reproduce", "PROFILE=smoke", tmp=tmp_path, nbdir=nbdir, results=ro)
        assert r.returncode != 0 and f"RESULTS={ro}" in r.stderr and "Traceback" not in r.stderr


# ------------------------------------------------------------------ make clean


def _fake_checkout(tmp_path) -> Path:
    """A throw-away copy of the Makefile and the script `make clean` runs, with a .git and files to lose."""
    repo = tmp_path / "checkout"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "Makefile", repo)
    shutil.copy(REPO / "scripts" / "results_folder.py", repo / "scripts")
    (repo / ".git").mkdir()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "notebooks").mkdir()
    (repo / "notebooks" / "00_x.ipynb").write_text("{}")
    (repo / "results").mkdir()
    (repo / "results" / "README.md").write_text("kept\n")
    (repo / "results" / "tables").mkdir()
    (repo / "results" / "tables" / "t.csv").write_text("a\n")
    return repo


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_clean_refuses_anything_but_a_results_folder(tmp_path):
    repo = _fake_checkout(tmp_path)
    outside = tmp_path / "mine"
    outside.mkdir()
    (outside / "thesis.tex").write_text("x")
    before = _files(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
    for results in ("", ".", "..", str(repo), ".git", "notebooks", str(outside), str(tmp_path)):
        r = subprocess.run(["make", "--no-print-directory", "-C", str(repo), "clean", f"RESULTS={results}"],
                           capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode != 0 and "nothing was deleted" in r.stderr, (results, r.stderr)
        assert _files(tmp_path) == before, results
    # the checkout's own results/: emptied, README.md kept
    r = subprocess.run(["make", "--no-print-directory", "-C", str(repo), "clean"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert _files(tmp_path) == before - {"checkout/results/tables/t.csv"}
    assert not (repo / "results" / "tables").exists()


# ------------------------------------------------------------------ what decides a rerun besides the parameters

NB01 = {**NB, "cells": [
    {**NB["cells"][0], "source": ['PROFILE = "default"\n', 'RESULTS_DIR = ""\n', 'COIN_ROOT = ""\n']},
    {**NB["cells"][1], "source": ["from pathlib import Path\n",
                                  "with open(Path(RESULTS_DIR) / 'runs.log', 'a') as f:\n",
                                  "    f.write(f'coin {PROFILE}\\n')\n",
                                  # as every notebook does: a table, hence a manifest (a missing one is stale, D443)
                                  "from vrex_lib import report\n",
                                  "report.write_table(\"t_coin\", [report.info_row(\"coin\", \"x\", \"\", 1.0)], "
                                  "profile=PROFILE, out=RESULTS_DIR)\n"]}]}


@pytest.mark.slow
@pytest.mark.long
def test_changed_coin_annotations_or_videos_rerun_the_coin_notebooks(tmp_path, nbdir):
    (nbdir / "01_coin.ipynb").write_text(json.dumps(NB01))
    coin = tmp_path / "coin"
    (coin / "videos").mkdir(parents=True)
    (coin / "COIN.json").write_text('{"database": {}}')
    (coin / "videos" / "a.mp4").write_bytes(b"0")
    args = ("reproduce", "PROFILE=full", f"PAPERMILL_ARGS=-r COIN_ROOT {coin}")
    assert make(*args, tmp=tmp_path, nbdir=nbdir).returncode == 0
    assert sorted(_runs(tmp_path)) == ["coin full", "full 1"]
    assert make(*args, tmp=tmp_path, nbdir=nbdir).returncode == 0 and len(_runs(tmp_path)) == 2
    (coin / "COIN.json").write_text('{"database": {}} ')  # an edited annotation file: only the COIN notebook
    r = make(*args, tmp=tmp_path, nbdir=nbdir)
    assert r.returncode == 0 and "COIN annotations or videos changed" in r.stdout
    assert _runs(tmp_path)[2:] == ["coin full"]


# ------------------------------------------------------------------ interrupts, the run lock, stale results

NB_SLEEP = {**NB, "cells": [
    {**NB["cells"][0], "source": ['PROFILE = "default"\n', 'RESULTS_DIR = ""\n', 'SLEEP = 0\n']},
    {**NB["cells"][1], "source": ["import time\n", "from pathlib import Path\n",
                                  "with open(Path(RESULTS_DIR) / 'runs.log', 'a') as f:\n",
                                  "    f.write(f'{PROFILE} {SLEEP}\\n')\n",
                                  "time.sleep(SLEEP)\n",
                                  "from vrex_lib import report\n",
                                  "report.write_table(\"t_demo\", [report.info_row(\"demo\", \"x\", \"\", 1.0)], "
                                  "profile=PROFILE, out=RESULTS_DIR)\n"]}]}


def _start(tmp, nbdir, *args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "VREX_THREADS": "1"}
    env.pop("MAKEFLAGS", None)
    return subprocess.Popen(["make", "--no-print-directory", "-C", str(REPO), f"RESULTS={tmp / 'res'}",
                             f"NOTEBOOK_DIR={nbdir}", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)


def _wait_for(cond, p: subprocess.Popen, timeout_s: float = 120) -> None:
    t0 = time.monotonic()
    while not cond():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() - t0 < timeout_s, "the notebook did not start"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.long
def test_ctrl_c_is_an_interrupt_and_leaves_the_report_stale(tmp_path, nbdir):
    (nbdir / "00_demo.ipynb").write_text(json.dumps(NB_SLEEP))
    res = tmp_path / "res"
    assert make("reproduce", "PROFILE=smoke", tmp=tmp_path, nbdir=nbdir).returncode == 0
    # a rebuild with other parameters, interrupted (Ctrl-C reaches the whole process group) while the notebook runs
    p = _start(tmp_path, nbdir, "reproduce", "PROFILE=smoke", "PAPERMILL_ARGS=-p SLEEP 60")
    _wait_for(lambda: len(_runs(tmp_path)) == 2, p)
    # the same results folder cannot be reported on while the rebuild holds it: refused, the banner stays
    r = make("report", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode != 0 and "is running on this results folder" in r.stderr and "Traceback" not in r.stderr
    assert (res / "REPORT.md").read_text().startswith(report_stale_mark())
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=120)
    # (the kernel's start-up warning came before the interrupt, as in every papermill run)
    assert [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("[IPKernelApp] WARNING")] == [
        f"make reproduce (PROFILE=smoke, RESULTS={res}): interrupted; {res}/REPORT.md stays marked stale; the "
        "finished notebooks are kept and `make reproduce` continues from them"], err
    assert "FAILED" not in out + err and "done" not in out
    assert not list((res / "executed").glob("*FAILED*")) and not list((res / "executed").glob(".*.running.*"))
    assert (res / "REPORT.md").read_text().startswith(report_stale_mark())
    # after the interrupt the notebook's results are older than the parameters: `make report` says so
    r = make("report", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode != 0 and "00_demo.ipynb: stale" in r.stderr and "-p SLEEP 60" in r.stderr, r.stderr
    text = (res / "REPORT.md").read_text()
    assert text.startswith(report_stale_mark()) and "`notebooks/00_demo.ipynb`: stale" in text


def report_stale_mark() -> str:
    from vrex_lib import report

    return report.STALE_MARK


def test_lab_refuses_a_port_that_is_no_port(tmp_path, nbdir):
    r = make("lab", "LAB_PORT=88a8", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode != 0 and "LAB_PORT=88a8 is not a port number (1-65535)" in r.stderr, r.stderr


def test_lab_builds_the_coin_fixture_first(tmp_path, nbdir):
    r = make("-n", "-W", "data/make_coin_mini.py", "lab", tmp=tmp_path, nbdir=nbdir)
    assert r.returncode == 0
    out = r.stdout
    assert "make_coin_mini.py" in out and out.index("make_coin_mini.py") < out.index("jupyter lab")


def test_a_choice_parameter_is_checked_before_any_notebook_runs(tmp_path, nbdir):
    r = make("reproduce", "PROFILE=smoke", "PAPERMILL_ARGS=-p GRID ful", tmp=tmp_path,
             nbdir=REPO / "notebooks")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "the notebook parameter GRID 'ful', which is not one of 'profile', 'power', 'full'" in r.stderr
    assert "-p GRID profile or -p GRID power or -p GRID full" in r.stderr and "grid=" not in r.stderr
    assert _untouched(tmp_path / "res")


# ------------------------------------------------------------------ per-notebook dependencies


def test_notebook_dependencies_are_current():
    """notebooks/deps.mk is what scripts/nb_deps.py derives from the notebooks' and the library's imports."""
    r = subprocess.run(["python3", str(REPO / "scripts" / "nb_deps.py")], capture_output=True, text=True, check=True)
    assert r.stdout == (REPO / "notebooks" / "deps.mk").read_text(), \
        "notebooks/deps.mk is out of date: run `python3 scripts/nb_deps.py > notebooks/deps.mk`"


def _checkout_for_make(tmp_path) -> Path:
    """A copy of what `make reproduce` reads (library, notebooks, scripts, Makefile, pins), mtimes kept, data linked."""
    repo = tmp_path / "checkout"
    for d in ("vrex_lib", "notebooks", "scripts"):
        shutil.copytree(REPO / d, repo / d, ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("Makefile", "environment.yml", "requirements.txt", "requirements-nodeps.txt", "pyproject.toml"):
        shutil.copy2(REPO / f, repo / f)
    (repo / "data").mkdir()
    shutil.copy2(REPO / "data" / "make_coin_mini.py", repo / "data")
    for d in ("coin_mini", "coin_tiny"):
        (repo / "data" / d).symlink_to(REPO / "data" / d)
    return repo


def _up_to_date_results(repo: Path, res: Path) -> None:
    """A results folder newer than every source: stamps with today's parameters, the workload file, every notebook."""
    (res / "executed").mkdir(parents=True)
    (res / "data").mkdir()
    (res / ".vrex-results").touch()
    (res / ".params").write_text("PROFILE=default PAPERMILL_ARGS=\n")
    stamp = subprocess.run([str(REPO / ".venv" / "bin" / "python"), str(repo / "scripts" / "coin_stamp.py"), "default"],
                           capture_output=True, text=True, check=True)
    (res / ".coin").write_text(stamp.stdout)
    (res / ".workload").write_text("WORKLOAD_ARGS= LONG=\n")
    later = max(p.stat().st_mtime for p in repo.rglob("*") if p.is_file()) + 10
    order = [res / ".params", res / ".coin", res / ".workload", res / "data" / "workload_default.json"]
    order += sorted((repo / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for i, p in enumerate(order):
        target = res / "executed" / p.name if p.suffix == ".ipynb" else p
        if not target.exists():
            target.write_text("{}")
        os.utime(target, (later + i + (5 if "07_summary" in p.name else 0),) * 2)


def _dry_run(repo: Path, res: Path, *extra: str) -> tuple[set[str], str]:
    env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
    r = subprocess.run(["make", "--no-print-directory", "-C", str(repo), "-n", "reproduce", f"RESULTS={res}",
                        f"VENV={REPO / '.venv'}", *extra], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    import re

    return set(re.findall(r"papermill notebooks/(\d\d_\w+)\.ipynb", r.stdout)), r.stdout


def test_a_simulator_change_reruns_only_the_notebooks_that_import_the_simulator(tmp_path):
    repo, res = _checkout_for_make(tmp_path), tmp_path / "res"
    _up_to_date_results(repo, res)
    reran, out = _dry_run(repo, res)
    assert reran == set() and "workload measure" not in out, out  # up to date: nothing reruns
    sim = repo / "vrex_lib" / "perf" / "sim" / "schedule.py"
    newest = max(p.stat().st_mtime for p in res.rglob("*") if p.is_file())
    os.utime(sim, (newest + 3600,) * 2)  # `touch vrex_lib/perf/sim/schedule.py`, an hour after the newest result
    reran, out = _dry_run(repo, res)
    deps = (repo / "notebooks" / "deps.mk").read_text().split("\n\n")
    users = {b.split(".ipynb:")[0].rsplit("/", 1)[1] for b in deps if "vrex_lib/perf/sim/schedule.py" in b and ".ipynb:" in b}
    assert reran == users | {"07_summary"}, (reran, users)  # 07 summarises every other notebook
    assert "03_accuracy" not in reran and "04_dre_hardware" not in reran and "workload measure" not in out


# ------------------------------------------------------------------ make -n writes nothing; make follows its arguments
def _snapshot(folder: Path) -> dict:
    """Every path under ``folder`` with its bytes and mtime (folders: None), to compare byte for byte."""
    if not folder.exists():
        return {}
    return {p.relative_to(folder).as_posix(): (None if p.is_dir() else (p.read_bytes(), p.stat().st_mtime_ns))
            for p in sorted(folder.rglob("*"))}


def test_a_dry_run_on_a_new_results_folder_writes_nothing(tmp_path):
    """Issue 48: `make -n reproduce` created .lock, .params and .coin (the real run then refused the folder)."""
    repo, res = _checkout_for_make(tmp_path), tmp_path / "new_res"
    reran, out = _dry_run(repo, res)
    assert not res.exists(), sorted(p.name for p in res.rglob("*"))
    assert "03_accuracy" in reran and "workload measure" in out and "would be written" in out


def test_a_dry_run_with_other_arguments_leaves_the_folder_byte_identical_and_shows_the_reruns(tmp_path):
    """Issue 48: a dry run with other PAPERMILL_ARGS rewrote .params, so every notebook became stale; and
    WORKLOAD_ARGS / LONG / the -p WORKLOAD_FILE file re-measured nothing."""
    repo, res = _checkout_for_make(tmp_path), tmp_path / "res"
    _up_to_date_results(repo, res)
    before = _snapshot(res)
    nbs = {p.stem for p in (repo / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    reran, out = _dry_run(repo, res, "PAPERMILL_ARGS=-p N_SAMPLES 3")
    assert reran == nbs and "notebook parameters changed" in out, out
    assert _snapshot(res) == before
    reran, out = _dry_run(repo, res, "WORKLOAD_ARGS=--kv 300")
    readers = {"02_resv_algorithm", "06_performance", "08_design_space", "09_retrieval_demand", "07_summary"}
    assert "workload measure" in out and "--kv 300" in out and reran == readers & nbs, (reran, out)
    reran, out = _dry_run(repo, res, "LONG=1")
    assert "workload measure" in out and "--long" in out and reran == readers & nbs
    assert _snapshot(res) == before
    wl = tmp_path / "mine.json"
    wl.write_text("{}")
    stamp = res / ".params"
    subprocess.run([str(REPO / ".venv" / "bin" / "python"), str(repo / "scripts" / "stamp.py"), str(stamp), "m",
                    "--param-file", "WORKLOAD_FILE", str(repo / "notebooks"), "--",
                    f"PROFILE=default PAPERMILL_ARGS=-p WORKLOAD_FILE {wl}"], check=True)
    os.utime(stamp, (before[".params"][1] / 1e9,) * 2)
    assert _dry_run(repo, res, f"PAPERMILL_ARGS=-p WORKLOAD_FILE {wl}")[0] == set()
    wl.write_text('{"other": 1}')  # the same file name, other content: the notebooks rerun
    assert _dry_run(repo, res, f"PAPERMILL_ARGS=-p WORKLOAD_FILE {wl}")[0] == nbs


def test_an_edited_simulator_model_reruns_the_notebooks_that_simulate_it(tmp_path):
    """perf/methods/resv.py is loaded by the simulator's registry (pkgutil), never imported by name: the rule sees it
    (docs/DECISIONS.md D370)."""
    repo, res = _checkout_for_make(tmp_path), tmp_path / "res"
    _up_to_date_results(repo, res)
    model = repo / "vrex_lib" / "perf" / "methods" / "resv.py"
    newest = max(p.stat().st_mtime for p in res.rglob("*") if p.is_file())
    os.utime(model, (newest + 3600,) * 2)
    reran, out = _dry_run(repo, res)
    deps = (repo / "notebooks" / "deps.mk").read_text().split("\n\n")
    users = {b.split(".ipynb:")[0].rsplit("/", 1)[1] for b in deps if "vrex_lib/perf/methods/resv.py" in b
             and ".ipynb:" in b}
    assert {"06_performance", "09_retrieval_demand"} <= reran and "03_accuracy" not in reran, reran
    assert reran == users | {"07_summary"}, (reran, users)  # 07 summarises every other notebook
