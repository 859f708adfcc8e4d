import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENV_PY = REPO / ".venv" / "bin" / "python"


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def python_exe() -> str:
    """The interpreter the Makefile uses (the venv's), falling back to this one."""
    return str(VENV_PY if VENV_PY.exists() else Path(sys.executable))


@pytest.fixture(autouse=True)
def _isolated_results(tmp_path, monkeypatch):
    """No test may write into the user's results/: point the default results folder at a temp dir."""
    monkeypatch.setenv("VREX_RESULTS_DIR", str(tmp_path / "results"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    """One intra-op torch thread for the whole suite, as the notebooks use (vrex_lib.notebook).

    These models' ops are too small to split, and on a loaded 2-core machine a second OpenMP thread waits for
    a time slice at every op (measured up to 10x slower).
    """
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def tiny():
    """The smoke-profile streaming model (tiny random Llama + tiny SigLIP), built once per test module."""
    from vrex_lib.runtime import build_model

    return build_model("smoke")


@pytest.fixture(scope="session")
def tiny_videollm(tmp_path_factory):
    """A tiny random checkpoint in VideoLLM-online's layout (tests/tiny_videollm.py), written once per session."""
    from tiny_videollm import write_tiny_videollm

    return write_tiny_videollm(tmp_path_factory.mktemp("tiny_videollm"))


def pytest_addoption(parser):
    parser.addoption("--lxe-10k", action="store_true", default=False,
                     help="also run the LXE RTL's 10,000-vector Verilator acceptance run (marker lxe10k; minutes)")


def pytest_collection_modifyitems(config, items):
    """``lxe10k`` tests take minutes on 2 cores: outside `make test`'s budget unless asked for (notebook 05 in the
    default profile runs the same check)."""
    if config.getoption("--lxe-10k"):
        return
    skip = pytest.mark.skip(reason="the 10,000-vector LXE run takes minutes: run it with `pytest --lxe-10k` "
                                   "(notebook 05 runs 3,000 Icarus vectors per block instead, D286)")
    for item in items:
        if "lxe10k" in item.keywords:
            item.add_marker(skip)
