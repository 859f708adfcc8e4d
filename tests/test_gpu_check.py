"""scripts/gpu_check.sh: valid bash, a dry run that loads nothing, and the same code at tiny shapes on the CPU
(figures printed, a results file `eval plan --timing` reads). The CUDA run itself needs a GPU (README AE appendix)."""
from __future__ import annotations

import subprocess

from vrex_lib import eval as ev

SCRIPT = "scripts/gpu_check.sh"


def test_gpu_check_is_valid_bash_and_dry_runs(repo):
    assert subprocess.run(["bash", "-n", SCRIPT], cwd=repo).returncode == 0
    r = subprocess.run(["bash", SCRIPT, "--dry-run"], cwd=repo, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Llama-3-8B (32 x 4096, 8 KV heads)" in r.stdout and "dry run" in r.stdout and "build_s=" not in r.stdout


def test_gpu_check_tiny_on_cpu_prints_the_figures(repo, tmp_path, capsys):
    r = subprocess.run(["bash", SCRIPT, "--tiny", "--kv", "150", "--steps", "2", "--new-tokens", "2",
                        "--eval-samples", "1", "--out", str(tmp_path)], cwd=repo, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    figs = dict(x.split("=", 1) for x in r.stdout.splitlines() if "=" in x and not x.startswith("#"))
    for k in ("build_s", "frame_step_ms.full@150", "frame_step_ms.resv@150", "tpot_ms.resv@150",
              "resv_step_vs_full@150", "eval_s_per_sample", "eval_s_per_frame"):
        assert float(figs[k]) > 0, k
    timing = figs["eval_results.resv"]
    assert ev.main(["plan", "--profile", "smoke", "--tasks", "step", "--timing", timing]) == 0
    assert "s per frame, measured over 1 samples" in capsys.readouterr().out


def test_gpu_check_refuses_cuda_without_a_gpu(repo, python_exe):
    import torch

    if torch.cuda.is_available():
        return
    r = subprocess.run([python_exe, "scripts/gpu_check.py", "--kv", "10"], cwd=repo, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "torch sees no CUDA device" in r.stderr and r.stderr.count("\n") == 1
