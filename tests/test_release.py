"""The archivable release: CITATION.cff valid against the vendored CFF 1.2.0 schema (and a damaged copy not), one
version everywhere (pyproject.toml, vrex_lib.__version__, CITATION.cff, .zenodo.json, CHANGELOG.md)."""
from __future__ import annotations

import datetime
import json
import re
import tomllib

import jsonschema
import pytest
import yaml

import vrex_lib
from vrex_lib.config import REPO_ROOT

SCHEMA = REPO_ROOT / "data" / "schemas" / "cff-1.2.0.schema.json"


def _json_form(x):
    """YAML dates as the ISO strings of the schema's JSON form (what cffconvert validates); the rest unchanged."""
    if isinstance(x, dict):
        return {k: _json_form(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_json_form(v) for v in x]
    return x.isoformat() if isinstance(x, datetime.date) else x


def _cff() -> dict:
    return _json_form(yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text()))


def _validator():
    schema = json.loads(SCHEMA.read_text())
    assert schema["$id"] == "https://citation-file-format.github.io/1.2.0/schema.json"
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())


def test_citation_cff_validates_against_the_cff_1_2_0_schema():
    cff = _cff()
    errors = sorted(_validator().iter_errors(cff), key=str)
    assert not errors, "; ".join(e.message for e in errors[:5])
    pc = cff["preferred-citation"]
    assert pc["type"] == "conference-paper" and "V-Rex" in pc["title"] and len(pc["authors"]) == 4
    assert cff["type"] == "software" and cff["cff-version"] == "1.2.0"


@pytest.mark.parametrize("damage", ["no authors", "bad type", "unknown key", "bad date"])
def test_a_damaged_citation_file_fails_the_schema(damage):
    cff = _cff()
    if damage == "no authors":
        del cff["authors"]
    elif damage == "bad type":
        cff["preferred-citation"]["type"] = "preprint-ish"
    elif damage == "unknown key":
        cff["doi-please"] = "x"
    else:
        cff["date-released"] = "yesterday"
    assert list(_validator().iter_errors(cff))


def test_one_version_everywhere():
    v = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", v)
    assert vrex_lib.__version__ == v
    assert _cff()["version"] == v
    assert json.loads((REPO_ROOT / ".zenodo.json").read_text())["version"] == v
    first = next(x for x in (REPO_ROOT / "CHANGELOG.md").read_text().splitlines() if x.startswith("## "))
    assert first.startswith(f"## {v} ")
    z = json.loads((REPO_ROOT / ".zenodo.json").read_text())
    assert z["upload_type"] == "software" and z["license"] == "MIT" and z["creators"]



def _headline_rows(readme: str) -> list[str]:
    """The data rows of the README's headline table (after its header and separator)."""
    lines = readme[readme.index("**Headline claims**"):].splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    rows = []
    for ln in lines[first + 2:]:
        if not ln.startswith("|"):
            break
        rows.append(ln)
    return rows


def _bare_model_rows(rows: list[str]) -> list[str]:
    # a cell cut at the report's 160 visible characters ends in '…' (its full sentence is in REPORT.md's notes)
    return [r[:60] for r in rows if "**model**" in r and "would need" not in r and "…" not in r]


def test_every_model_fail_in_the_readme_headline_table_names_its_term_and_need():
    """The README's headline table follows the report's rule: a `model` FAIL names the responsible term and the
    value a PASS would need (a row that says only **model** is a copy gone stale)."""
    from vrex_lib.report import readme

    text = (REPO_ROOT / "README.md").read_text()
    for name in readme.BLOCKS:  # the table, the counts and the times are generated (scripts/readme_numbers.py)
        assert f"<!-- readme:{name} -->" in text and f"<!-- /readme:{name} -->" in text, name
    rows = _headline_rows(text)
    assert not _bare_model_rows(rows), _bare_model_rows(rows)
    stale = _headline_rows("**Headline claims**\n\n| claim | cause |\n|---|---|\n| power | **model** |\n\nafter\n")
    assert _bare_model_rows(stale) == ["| power | **model** |"]  # the check can fail


def test_the_version_names_the_evaluated_tag_everywhere():
    """CITATION.cff, .zenodo.json, CHANGELOG.md and the README's AE appendix name the tag of this version
    (v<version>) and the archive `make release` writes, so a reviewer knows which state to evaluate."""
    v = vrex_lib.__version__
    tag, src = f"v{v}", f"vrex-{v}-src.tar.gz"
    assert tag in _cff()["message"] and src in _cff()["message"]
    assert tag in json.loads((REPO_ROOT / ".zenodo.json").read_text())["notes"]
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text()
    assert f"`{tag}`" in changelog.split("\n## ")[1]
    readme = (REPO_ROOT / "README.md").read_text()
    appendix = readme[readme.index("### I. Archiving and citing"):]
    assert tag in appendix and src in appendix and "sha256sum -c SHA256SUMS" in appendix


def _release_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("vrex_release", REPO_ROOT / "scripts" / "release.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _complete_results(tmp_path):
    """A results folder that passes the release checks against an empty notebooks folder (nothing is missing)."""
    res, nbs = tmp_path / "results", tmp_path / "notebooks"
    for d in (res / "figures", res / "live" / "figures", nbs):
        d.mkdir(parents=True, exist_ok=True)
    (res / ".params").write_text("PROFILE=default PAPERMILL_ARGS=\n")
    (res / "REPORT.md").write_text("# vrex reproduction report\n")
    (res / "figures" / "a.png").write_bytes(b"\x89PNG not really")
    (res / "live" / "figures" / "b.png").write_bytes(b"a live session's figure")
    return res, nbs


def test_make_release_writes_the_archives_and_sums_that_sha256sum_checks(tmp_path, monkeypatch):
    import subprocess
    import tarfile

    rel = _release_module()
    monkeypatch.setattr(rel, "check_source", lambda: "0" * 40)  # a development checkout may have edits
    res, nbs = _complete_results(tmp_path)
    out = tmp_path / "dist"
    files = rel.release(res, nbs, out, calibration="machine: test")
    v = vrex_lib.__version__
    assert [f.name for f in files] == [f"vrex-{v}-src.tar.gz", f"vrex-{v}-results-default.tar.gz",
                                      "CALIBRATION.txt", "SHA256SUMS"]
    ok = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.count(": OK") == 3, ok.stdout + ok.stderr
    with tarfile.open(out / f"vrex-{v}-results-default.tar.gz") as t:
        names = t.getnames()
    assert f"vrex-{v}-results-default/figures/a.png" in names and not any("/live/" in n for n in names)
    with tarfile.open(out / f"vrex-{v}-src.tar.gz") as t:
        assert f"vrex-{v}/pyproject.toml" in t.getnames()
    assert "machine: test" in (out / "CALIBRATION.txt").read_text()
    (out / "CALIBRATION.txt").write_text("edited")  # the manifest catches a changed file
    assert subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True).returncode != 0


@pytest.mark.parametrize("damage", ["no report", "smoke profile", "stale banner", "failed notebook"])
def test_make_release_refuses_results_that_are_not_one_complete_default_run(tmp_path, monkeypatch, damage, capsys):
    rel = _release_module()
    monkeypatch.setattr(rel, "check_source", lambda: "0" * 40)
    res, nbs = _complete_results(tmp_path)
    if damage == "no report":
        (res / "REPORT.md").unlink()
    elif damage == "smoke profile":
        (res / ".params").write_text("PROFILE=smoke PAPERMILL_ARGS=\n")
    elif damage == "stale banner":
        (res / "REPORT.md").write_text("> **Stale.** rebuilding\n\n# vrex reproduction report\n")
    else:
        (res / "executed").mkdir()
        (res / "executed" / "06_performance.FAILED.ipynb").write_text("{}")
    out = tmp_path / "dist"
    rc = rel.main(["--results", str(res), "--notebooks", str(nbs), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "make reproduce" in err and "nothing was written" in err and not out.exists()
    assert str(tmp_path) not in err  # no absolute path of this machine in the message
