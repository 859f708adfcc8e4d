"""The method table (vrex_lib.methods): every list of method names derives from it, and it agrees with the policy
classes it names and with the simulator's method models."""
from __future__ import annotations

import subprocess

import pytest

from vrex_lib import accuracy, methods
from vrex_lib.perf import methods as perf_methods
from vrex_lib.perf import workload as perf_workload
from vrex_lib.retrieval import POLICIES, TABLE2_METHODS, make_policy
from vrex_lib.workload import ALL_METHODS


def test_every_list_reads_the_table():
    assert tuple(POLICIES) == methods.NAMES
    assert TABLE2_METHODS == methods.TABLE2 == ("full", "infinigen", "infinigen_p", "rekv", "resv")  # Table II rows
    assert ALL_METHODS == tuple(m for m in methods.SIMULATED if m not in methods.ALTERNATIVES)
    assert "resv" in ALL_METHODS and "resv_best" in methods.SIMULATED and "resv_best" not in ALL_METHODS
    assert accuracy.STUDY_METHODS == methods.STUDY and "resv_candwics" not in methods.STUDY
    assert dict(perf_workload.SIM_METHOD) == dict(methods.SIM_METHOD)
    assert set(methods.SIMULATED) == set(methods.SIM_METHOD)


@pytest.mark.parametrize("name", methods.NAMES)
def test_policy_classes_match_their_rows(name):
    row = methods.METHODS[name]
    cls = POLICIES[name]
    assert f"{cls.__module__.rsplit('.', 1)[1]}.{cls.__name__}" == row.policy and cls.name == name
    # the stages a row names are the paper's; a row whose default policy differs says which variant has them
    spec = methods.VARIANTS[row.sim_source] if row.sim_source else (name, {})
    assert make_policy(spec[0], **spec[1]).retrieves_at_frame == row.retrieves_at_frame


def test_simulator_methods_exist_and_agree_on_frame_retrieval():
    for name in methods.TABLE2:
        sim = perf_methods.METHODS[methods.METHODS[name].sim]
        assert sim.selects("frame") == methods.METHODS[name].retrieves_at_frame, name
    assert dict(methods.SIM_SOURCES) == perf_workload.SIM_METHOD_SOURCES
    assert set(methods.SIM_SOURCES.values()) <= set(methods.VARIANTS)


def test_unknown_names_list_the_choices():
    with pytest.raises(ValueError, match="unknown retrieval method 'resvv'.*resv_noclust"):
        methods.get("resvv")
    with pytest.raises(ValueError, match="unknown retrieval method"):
        make_policy("resvv")
    assert methods.variants_of(["resv"]) == {} and methods.variants_of(["rekv"]) == {"rekv@frame": ("rekv",
                                                                                                     {"mode": "frame"})}


def test_the_table_imports_without_torch(python_exe, repo):
    code = "import sys, vrex_lib.methods; assert 'torch' not in sys.modules, 'torch imported'"
    p = subprocess.run([python_exe, "-c", code], cwd=repo, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def _hand_lists(path, dicts: bool = True):
    """(line, names) of every tuple/list/set literal in ``path`` holding two or more method names (``choices=``
    included) and, with ``dicts``, of every dict literal keyed by two or more (a table by method name that the
    method table should hold, e.g. method -> study label)."""
    import ast

    names = set(methods.NAMES)
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else (
            node.keys if isinstance(node, ast.Dict) and dicts else [])
        hits = [e.value for e in elts if isinstance(e, ast.Constant) and e.value in names]
        if len(hits) >= 2:
            out.append((node.lineno, hits))
    return out


def test_no_hand_written_list_of_method_names_outside_the_method_table():
    """Every list of methods is derived from vrex_lib/methods.py (docs/ARCHITECTURE.md, "Add a method")."""
    import json
    from pathlib import Path

    root = Path(methods.__file__).resolve().parent
    # the paper's printed tables are keyed by the rows they print (vrex_lib/paper: records, not lists)
    offenders = [f"{p.relative_to(root.parent)}:{ln} {hits}" for p in sorted(root.rglob("*.py"))
                 if p.name != "methods.py" or p.parent != root
                 for ln, hits in _hand_lists(p, dicts=p.parent != root / "paper")]
    for nb in sorted((root.parent / "notebooks").glob("*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        import ast
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write("\n".join(ln for ln in code.splitlines() if not ln.lstrip().startswith(("%", "!"))))
        offenders += [f"{nb.name}:{ln} {hits}" for ln, hits in _hand_lists(Path(f.name), dicts=False)]
    assert not offenders, offenders


def test_the_hand_list_check_can_fail(tmp_path):
    f = tmp_path / "x.py"
    f.write_text('M = ("resv", "rekv")\nN = ["full"]\nL = {"resv": "paper-stated", "full": "reference"}\n'
                 'ap.add_argument("--method", choices=["rekv", "resv"])\n')
    assert sorted(_hand_lists(f)) == [(1, ["resv", "rekv"]), (3, ["resv", "full"]), (4, ["rekv", "resv"])]
