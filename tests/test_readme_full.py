"""Every full-profile command of the README, extracted from README.md and run as written against the tiny
checkpoint in VideoLLM-online's layout (tests/tiny_videollm.py) laid out as ``$CKPT`` and a copy of data/coin_tiny as
``$COIN``, on the CPU.

What is substituted, each as the README says: ``--device cuda --dtype bfloat16`` -> ``--device cpu --dtype float32``
(README: "On a machine without CUDA ..."); ``--nproc_per_node 8`` -> 2 (your GPU count); ``--max-samples 2
--max-new-tokens 2`` appended to ``torchrun`` ("--max-samples N for a first try") and ``--kv 120,240`` to the workload
measurement ("--kv" chooses the points); outputs under ``results/`` and ``/tmp/`` go to a temp folder (tests never
write into the repository's results).

What is run how: every ``python`` command runs for real here; the ``torchrun`` command and the ``merge`` after it run
for real in tests/test_full_profile.py (``test_readme_torchrun_two_ranks_then_merge_then_the_report``, which takes them
from here and carries the merged results into the report), not twice. ``make reproduce PROFILE=full ...`` runs every
notebook in the full profile (hours on a GPU, well over the test budget here), so it is expanded with ``make -n``
and the commands it would start are checked: its parameter check (scripts/check_params.py) and its workload
measurement (with ``--kv 120,240``) run for real from that expansion, and every notebook's papermill line carries the
parameters. Notebook 03 reading ``EVAL_DIR`` is tested end to end in tests/test_full_profile.py.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tiny_videollm import write_tiny_videollm

REPO = Path(__file__).resolve().parent.parent
SECTION = ("### Running the full profile with real data", "## V-Rex live on any video")


def readme_commands(readme: Path) -> list[str]:
    """The shell commands of the README's full-profile sections: ```bash blocks, continuation lines joined,
    comment lines and trailing comments dropped."""
    text = readme.read_text()
    body = text[text.index(SECTION[0]):text.index(SECTION[1])]
    cmds = []
    for block in re.findall(r"```bash\n(.*?)```", body, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                cmds.append(line)
    return cmds


def adapt(cmd: str, tmp: Path) -> str:
    cmd = cmd.replace("--device cuda --dtype bfloat16", "--device cpu --dtype float32")
    cmd = cmd.replace("--nproc_per_node 8", "--nproc_per_node 2")
    if cmd.startswith("torchrun"):
        cmd += " --max-samples 2 --max-new-tokens 2 --threads 1"
    cmd = re.sub(r"--kv [0-9,]+", "--kv 120,240", cmd)
    cmd = cmd.replace("/tmp/", f"{tmp}/tmpdir/")
    return re.sub(r"(?<![\w$/.-])results/", f"{tmp}/results/", cmd)


def readme_layout(tmp: Path) -> tuple[Path, dict]:
    """Under ``tmp``: the tiny checkpoint laid out as the README's ``$CKPT``, a copy of data/coin_tiny as ``$COIN``;
    returns (tmp, the environment the commands run in)."""
    repo = REPO
    ck = write_tiny_videollm(tmp / "ckpt")
    (tmp / "ckpt" / "videollm").symlink_to(ck.connector.name)  # the README's $CKPT/videollm
    shutil.copytree(repo / "data" / "coin_tiny", tmp / "coin")
    (tmp / "tmpdir").mkdir()
    env = dict(os.environ, COIN=str(tmp / "coin"), CKPT=str(tmp / "ckpt"), PYTHONPATH=str(repo), VREX_THREADS="1",
               PATH=f"{repo / '.venv' / 'bin'}:{os.environ['PATH']}", VREX_RESULTS_DIR=str(tmp / "results"))
    return tmp, env


def is_torchrun_step(cmd: str) -> bool:
    """The torchrun command and the merge of its shards (run by tests/test_full_profile.py)."""
    return cmd.startswith("torchrun") or " merge " in cmd


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    return readme_layout(tmp_path_factory.mktemp("readme"))


def run_command(cmd: str, repo: Path, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    r = subprocess.run(["bash", "-c", cmd], cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}\n{r.stderr[-3000:]}"
    return r


def _make_expansion(cmd: str, tmp: Path, repo: Path, env: dict) -> tuple[list[str], str]:
    """`make -n` of a README make command: the command lines it would run (one per line)."""
    assert cmd.startswith("make reproduce PROFILE=full")
    res = tmp / "results" / f"mk{len(list((tmp / 'results').glob('mk*')))}"  # a fresh folder: nothing up to date
    res.mkdir(parents=True)
    r = run_command(cmd.replace("make reproduce", f"make -n reproduce RESULTS={res}", 1), repo, env, 300)
    lines = re.sub(r"\\\n\s*", " ", r.stdout).splitlines()
    return lines, r.stdout


def _check_make(cmd: str, tmp: Path, repo: Path, env: dict, run_workload: bool) -> None:
    lines, out = _make_expansion(cmd, tmp, repo, env)
    check = next(x for x in lines if "scripts/check_params.py" in x)
    run_command(check.strip().lstrip("@"), repo, env)  # the parameter check make runs first, for real
    wl = next(x for x in lines if "vrex_lib.workload measure --profile full" in x)
    for flag in ("--llm-path", "--vision-path", "--connector-path"):
        assert f"{flag} {tmp}/ckpt/" in wl, f"the workload measurement lacks {flag}: {wl}"
    papermill = [x for x in lines if " -m papermill notebooks/" in x]
    assert len(papermill) == len(list((repo / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    assert all(f"-p COIN_ROOT {tmp}/coin" in x and "-p PROFILE full" in x for x in papermill)
    if run_workload:
        run_command(wl.strip().replace("VREX_THREADS=${VREX_THREADS:-1} ", "") + " --kv 120,240 --methods full,resv",
             repo, env)


@pytest.mark.slow
@pytest.mark.long
def test_every_full_profile_command_of_the_readme_runs(layout, repo, capsys):
    tmp, env = layout
    cmds = readme_commands(repo / "README.md")
    kinds = [c.split()[0] for c in cmds]
    assert kinds.count("make") == 3 and kinds.count("torchrun") == 1 and len(cmds) >= 9
    t0 = time.perf_counter()
    # the tiny-checkpoint commands first: their results stand in for gpu_check's timing file that `plan` reads
    tiny = [c for c in cmds if "tests/tiny_videollm.py" in c]
    times = {}
    for c in tiny:
        t1 = time.perf_counter()
        run_command(adapt(c, tmp), repo, env)
        times[f"tiny{len(times)}"] = time.perf_counter() - t1
    timing = tmp / "results" / "gpu_check" / "eval" / "resv" / "step.jsonl"
    timing.parent.mkdir(parents=True)
    shutil.copy(tmp / "tmpdir" / "tiny-eval" / "step.jsonl", timing)
    first_make = True
    for c in cmds:
        if c in tiny or is_torchrun_step(c):
            continue
        if c.startswith("make "):
            t1 = time.perf_counter()
            _check_make(adapt(c, tmp), tmp, repo, env, run_workload=first_make)
            times[f"make{len(times)}"] = time.perf_counter() - t1
            first_make = False
            continue
        t1 = time.perf_counter()
        r = run_command(adapt(c, tmp), repo, env)
        times[c.split()[0] + " " + c.split()[2]] = time.perf_counter() - t1
        if " plan " in c:
            assert "GPU-hours" in r.stdout and "s per frame, measured over" in r.stdout
    assert (tmp / "results" / "data" / "workload_full.json").is_file()
    with capsys.disabled():
        print(f"\n[README full-profile commands: {len(cmds)} run in {time.perf_counter() - t0:.0f} s: "
              + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()) + "]")


def test_the_first_make_command_without_workload_args_would_fail(layout, repo):
    """The check bites: the README's earlier command (no WORKLOAD_ARGS) expands to a workload measurement without
    the checkpoint's folders, which the full profile refuses."""
    tmp, env = layout
    old = ('make reproduce PROFILE=full PAPERMILL_ARGS="-p COIN_ROOT $COIN -p LLM_PATH $CKPT/llama '
           '-p VISION_PATH $CKPT/siglip -p CONNECTOR_PATH $CKPT/videollm -p TOKENIZER_PATH $CKPT/llama"')
    with pytest.raises(AssertionError, match="lacks --llm-path"):
        _check_make(adapt(old, tmp), tmp, repo, env, run_workload=False)
