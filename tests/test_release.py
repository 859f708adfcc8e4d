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
    return [r[:60] for r in rows if "**model**" in r and "would need" not in r]


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
