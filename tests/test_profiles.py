"""The profiles are records (vrex_lib/profiles.py): no other module, and no notebook, compares profile names or
keys a table by them; and the records say what the code used to decide by name."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from vrex_lib import profiles
from vrex_lib.config import ParamError, param_profile

PKG = Path(profiles.__file__).resolve().parent
NAMES = set(profiles.PROFILES)
#: Tables keyed by names that are not decisions by profile: hw verify's run sizes are named after the profiles that
#: use them, and each profile's record picks one (``Profile.hardware.verify_size``).
ALLOWED = {("vrex_lib/hw/verify.py", "dict keyed by ['smoke', 'default', 'full']"),
           ("vrex_lib/hw/lxe.py", "dict keyed by ['smoke', 'default', 'full']")}  # size tables, not profiles


def _offences(src: str) -> list[tuple[int, str]]:
    """(line, what) of each comparison with a profile name and each dict literal keyed by two or more of them.

    'full' is also a method's name, so a comparison with 'full' counts only when the other side mentions a
    profile (``profile``, ``PROFILE``, ``a.profile``, ``ctx.profile``); 'smoke' and 'default' always count."""
    out = []
    tree = ast.parse(src)
    # a (profile, grid) key of a table keyed by two things, e.g. ("default", "full"), is not a list of profiles
    dict_keys = {id(k) for n in ast.walk(tree) if isinstance(n, ast.Dict) for k in n.keys}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            consts = [p.value for p in parts if isinstance(p, ast.Constant) and p.value in NAMES]
            consts += [e.value for p in parts if isinstance(p, (ast.Tuple, ast.List, ast.Set)) for e in p.elts
                       if isinstance(e, ast.Constant) and e.value in NAMES]
            other = " ".join(ast.unparse(p) for p in parts if not isinstance(p, ast.Constant)).lower()
            if any(c != "full" or "profile" in other for c in consts):
                out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in NAMES]
            if len(keys) >= 2:
                out.append((node.lineno, f"dict keyed by {keys}"))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in dict_keys:  # choices=(...)
            names = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in NAMES]
            if len(names) >= 2:
                out.append((node.lineno, f"list of {names}"))
    return out


def _makefile_offences(text: str) -> list[tuple[int, str]]:
    """(line, text) of each Makefile line, comments left out, that names two or more profiles."""
    words = re.compile(r"[\w-]+")
    return [(i, ln.strip()) for i, ln in enumerate(text.splitlines(), 1)
            if len(NAMES & set(words.findall(ln.split("#", 1)[0]))) >= 2]


def _notebook_code(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return "\n".join(ln for ln in code.splitlines() if not ln.lstrip().startswith(("%", "!")))


def test_no_profile_name_comparison_outside_the_profile_module():
    found = [f"{p.relative_to(PKG.parent)}:{ln} {what}" for p in sorted(PKG.rglob("*.py")) if p.name != "profiles.py"
             for ln, what in _offences(p.read_text()) if (str(p.relative_to(PKG.parent)), what) not in ALLOWED]
    found += [f"{nb.name}:{ln} {what}" for nb in sorted((PKG.parent / "notebooks").glob("*.ipynb"))
              for ln, what in _offences(_notebook_code(nb))]
    assert not found, found


def test_the_check_can_fail():
    assert len(_offences('if profile == "smoke": pass\nx = {"smoke": 1, "full": 2}[p]\nm == "full"\n'
                         'PROFILE != "full"\n')) == 3
    assert _offences('ap.add_argument("--profile", choices=("smoke", "default", "full"))\n') == [
        (1, "list of ['smoke', 'default', 'full']")]
    assert _makefile_offences("# smoke default full\nPROFILES := smoke default full\nx: ; PROFILE=smoke\n") == [
        (2, "PROFILES := smoke default full")]


def test_no_profile_list_in_the_makefile_benchmarks_or_scripts():
    """The Makefile reads PROFILES from vrex_lib/profiles.py; the benchmarks' and scripts' --profile choices too."""
    root = PKG.parent
    found = [f"Makefile:{ln} {what}" for ln, what in _makefile_offences((root / "Makefile").read_text())]
    found += [f"{p.relative_to(root)}:{ln} {what}" for d in ("benchmarks", "scripts")
              for p in sorted((root / d).rglob("*.py")) for ln, what in _offences(p.read_text())]
    assert not found, found
    r = subprocess.run(["make", "--no-print-directory", "-C", str(root), "help"], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}, timeout=60)
    assert f"PROFILE={'|'.join(profiles.PROFILES)} " in r.stdout, r.stdout  # what make read is the records


def test_the_makefile_workload_file_is_the_librarys():
    """The Makefile's WORKLOAD_FILE rule names the file :func:`vrex_lib.config.workload_path` gives, and no other
    file of the library, notebooks, benchmarks or scripts writes the name rule itself."""
    from vrex_lib.config import workload_path

    root = PKG.parent
    rule = re.search(r"^WORKLOAD_FILE := (.+)$", (root / "Makefile").read_text(), re.M).group(1)
    assert rule.replace("$(RESULTS)", "RES").replace("$(PROFILE)", "smoke") == str(workload_path("smoke", "RES"))
    files = [*PKG.rglob("*.py"), *(root / "notebooks").glob("*.ipynb"), *(root / "benchmarks").rglob("*.py"),
             *(root / "scripts").rglob("*.py")]
    found = [str(p.relative_to(root)) for p in files if p.name != "config.py" and "workload_{" in p.read_text()]
    assert not found, f"{found} write the workload file name themselves: use vrex_lib.config.workload_path"


def test_records_say_what_the_code_decided_by_name():
    smoke, default, full = (profiles.get(p) for p in ("smoke", "default", "full"))
    assert (smoke.model.kind, default.model.kind, full.model.kind) == ("tiny", "smollm2", "videollm_online")
    assert full.data.paper_workload and not default.data.paper_workload and full.data.root is None
    assert full.uses_flag("coin_root") and not default.uses_flag("coin_root") and default.uses_flag("llm_path")
    assert full.requires_flag("connector_path") and not full.requires_flag("tokenizer_path")
    assert (full.model.device, full.model.dtype, default.model.device) == ("cuda", "bfloat16", "cpu")
    assert full.longctx.always_full and full.longctx.grid == "default"
    assert smoke.hardware.verify_size == "smoke" and not smoke.hardware.synthesize and default.hardware.synthesize
    with pytest.raises(ValueError, match="unknown profile 'huge'.*smoke, default, full"):
        profiles.get("huge")


def test_path_parameters_follow_the_records():
    param_profile("LLM_PATH", "/x", "default")  # the default profile replaces SmolLM2 by a local HF folder
    param_profile("COIN_ROOT", "", "default")
    with pytest.raises(ParamError, match="COIN_ROOT.*used only by the full profile, not default"):
        param_profile("COIN_ROOT", "/x", "default")
    with pytest.raises(ParamError, match="CONNECTOR_PATH.*required by the full profile"):
        param_profile("CONNECTOR_PATH", "", "full")
    with pytest.raises(ParamError, match="LLM_PATH.*used only by the default / full profile, not smoke"):
        param_profile("LLM_PATH", "/x", "smoke")


def test_the_model_path_flags_are_declared_once():
    """Every CLI that builds a model adds --llm-path/--vision-path/--connector-path through
    ``runtime.checkpoint.add_model_path_flags``; none declares them itself."""
    from vrex_lib.runtime.checkpoint import MODEL_PATH_FLAGS

    found = [f"{p.relative_to(PKG.parent)}: {flag}" for p in sorted(PKG.rglob("*.py"))
             for flag in MODEL_PATH_FLAGS if f'add_argument("{flag}"' in p.read_text()]
    assert not found, found
    users = [p.relative_to(PKG) for p in sorted(PKG.rglob("*.py")) if "add_model_path_flags(" in p.read_text()]
    assert len(users) >= 5, users  # the helper's own file and the four CLIs
