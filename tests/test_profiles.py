"""The profiles are records (vrex_lib/profiles.py): no other module, and no notebook, compares profile names or
keys a table by them; and the records say what the code used to decide by name."""
from __future__ import annotations

import ast
import json
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
    for node in ast.walk(ast.parse(src)):
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
    return out


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
