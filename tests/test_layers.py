"""The layer diagram (vrex_lib/__init__.py and README) is the import structure: every vrex_lib import points to
the module's own layer or below, and both copies of the diagram list the same layers."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import vrex_lib

PKG = Path(vrex_lib.__file__).resolve().parent
REPO = PKG.parent


def _diagram(text: str) -> list[tuple[str, ...]]:
    block = re.search(r"```\n(notebook, envcheck.*?)```", text, re.S)
    assert block, "no layer diagram block found"
    # a layer's line: "name, name, ...  description"; a continuation line starts with spaces
    return [tuple(n.strip() for n in ln.split("  ")[0].split(",")) for ln in block.group(1).splitlines()
            if ln and not ln.startswith(" ")]


def _imports(path: Path) -> set[str]:
    """Top-level vrex_lib modules imported anywhere in ``path`` (also inside functions)."""
    return _imports_src(path.read_text(), list(path.relative_to(PKG).parts[:-1]))


def _imports_src(src: str, pkg: list[str]) -> set[str]:
    out = set()
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.ImportFrom):
            if n.level:
                base = pkg[:len(pkg) - (n.level - 1)]
                parts = base + (n.module.split(".") if n.module else [])
                out |= {parts[0]} if parts else {a.name for a in n.names}
            elif n.module and n.module.split(".")[0] == "vrex_lib":
                ps = n.module.split(".")
                out |= {ps[1]} if len(ps) > 1 else {a.name for a in n.names}
        elif isinstance(n, ast.Import):
            out |= {a.name.split(".")[1] for a in n.names if a.name.startswith("vrex_lib.")}
    return out


def test_readme_and_package_show_the_same_layers():
    assert _diagram(vrex_lib.__doc__) == list(vrex_lib.LAYERS)
    assert _diagram((REPO / "README.md").read_text()) == list(vrex_lib.LAYERS)


def test_imports_point_down_only():
    rank = {m: i for i, layer in enumerate(vrex_lib.LAYERS) for m in layer}
    modules = {p.name.removesuffix(".py") for p in PKG.iterdir()
               if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()}
    unplaced = sorted(modules - set(rank))
    assert not unplaced, f"modules {unplaced} are in no layer: add them to vrex_lib.LAYERS and both diagrams"
    bad = []
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG).parts
        if parts == ("__init__.py",):
            continue
        me = parts[0].removesuffix(".py")
        for t in _imports(p) - {me}:
            if t in rank and rank[t] < rank[me]:
                bad.append(f"{p.relative_to(REPO)} ({me}) imports {t}, a higher layer")
    assert not bad, "\n".join(bad)


def test_the_check_sees_upward_imports():
    """Function-local relative imports (how eval once imported report) and absolute ones are both seen."""
    assert _imports_src("def f():\n    from .report import atomic_write_text\n", []) == {"report"}
    assert _imports_src("from ..config import X\nfrom .. import _io\n", ["runtime"]) == {"config", "_io"}
    assert _imports_src("import vrex_lib.perf.sim\nfrom vrex_lib import eval\n", ["hw"]) == {"perf", "eval"}
    assert _imports_src("from .sim import y\n", ["perf"]) == {"perf"}


def _long_functions(root: Path, limit: int = 80) -> list[str]:
    """Functions and methods under ``root`` longer than ``limit`` lines, as 'file:line name (n lines)'."""
    out = []
    for p in sorted(root.rglob("*.py")):
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit:
                out.append(f"{p.relative_to(root)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)")
    return out


def test_no_function_in_the_library_is_over_80_lines():
    """Small functions (the project's style rule): every function and method of vrex_lib is at most 80 lines."""
    long = _long_functions(PKG)
    assert not long, "split these functions:\n" + "\n".join(long)


def test_the_length_check_sees_a_long_method(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(80))
    (tmp_path / "m.py").write_text(f"class A:\n    def ok(self):\n        pass\n\n    def f(self):\n{body}\n")
    assert _long_functions(tmp_path) == ["m.py:5 f (81 lines)"]
