"""scripts/nb_deps.py sees every library file a notebook runs, registries included, and the stale report reads the
same list (docs/DECISIONS.md D301, D370)."""
from __future__ import annotations

import ast
import functools
import importlib.util
import os
import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def _nb_deps():
    spec = importlib.util.spec_from_file_location("nb_deps", REPO / "scripts" / "nb_deps.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _is_program(f: Path) -> bool:
    """A module run as a program (``python -m``): a ``__main__.py`` or a file with an ``if __name__ == "__main__"``
    block; what no notebook imports but a command runs."""
    if f.name == "__main__.py":
        return True
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__":
            return True
    return False


@functools.lru_cache(maxsize=None)
def _listed() -> frozenset[str]:
    return frozenset(re.findall(r"vrex_lib/\S+\.py", _nb_deps().rules()))


def test_every_library_file_but_the_programs_is_in_some_notebooks_list():
    listed = _listed()
    missing = sorted(str(f.relative_to(REPO)) for f in (REPO / "vrex_lib").rglob("*.py")
                     if str(f.relative_to(REPO)) not in listed and not _is_program(f))
    assert missing == [], f"no notebook's rule in notebooks/deps.mk lists {missing}: `make` would rerun nothing " \
                          "when they change (scripts/nb_deps.py follows imports and registries)"


def test_the_registries_modules_are_followed():
    listed = _listed()
    for sub in ("paper", "perf/methods", "retrieval"):  # pkgutil, pkgutil, importlib by the names methods.py gives
        for f in (REPO / "vrex_lib" / sub).glob("*.py"):
            assert f"vrex_lib/{sub}/{f.name}" in listed, f
    # the rule is what the code does, not a list: a package whose __init__ enumerates itself, and one that does not
    nb = _nb_deps()
    assert "vrex_lib.paper.coin" in nb.module_dependencies(REPO / "vrex_lib" / "paper" / "__init__.py")
    assert "vrex_lib.retrieval.streamingllm" in nb.module_dependencies(REPO / "vrex_lib" / "retrieval" / "__init__.py")
    assert "vrex_lib.coin.metric" not in nb.module_dependencies(REPO / "vrex_lib" / "coin" / "tasks.py")


def test_an_edited_simulator_model_marks_the_notebooks_that_simulate_it_stale(tmp_path, monkeypatch):
    from vrex_lib import report
    from vrex_lib.report import stale

    repo = tmp_path / "checkout"
    shutil.copytree(REPO / "vrex_lib", repo / "vrex_lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "notebooks", repo / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    monkeypatch.setattr(stale, "REPO_ROOT", repo)
    monkeypatch.setattr(stale, "DEPS_FILE", repo / "notebooks" / "deps.mk")
    out = tmp_path / "results"
    (out / "executed").mkdir(parents=True)
    later = max(p.stat().st_mtime for p in repo.rglob("*") if p.is_file()) + 10
    nbs = sorted((repo / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for nb in nbs:  # an executed copy and its manifest (a missing manifest is stale by itself, D443)
        for f in (out / "executed" / nb.name, out / "executed" / f"{nb.stem}.manifest.json"):
            f.write_text("{}")
            os.utime(f, (later, later))
    assert report.stale_notebooks(out, repo / "notebooks") == {}
    model = repo / "vrex_lib" / "perf" / "methods" / "resv.py"
    os.utime(model, (later + 60, later + 60))  # `touch vrex_lib/perf/methods/resv.py` after every run
    stale_now = report.stale_notebooks(out, repo / "notebooks")
    users = {f"{stem}.ipynb" for stem, files in stale.library_inputs().items() if model in files}
    assert "06_performance.ipynb" in users and "03_accuracy.ipynb" not in users
    assert set(stale_now) == users
    assert all("vrex_lib/perf/methods/resv.py" in why for why in stale_now.values())
