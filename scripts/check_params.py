"""Refuse papermill parameters that no notebook declares, or whose value has another type than its default.

    python scripts/check_params.py NOTEBOOK_DIR [papermill arguments ...]

Reads each notebook's cell tagged ``parameters`` and checks every parameter that the papermill arguments set
(``-p/--parameters NAME VALUE``, ``-r/--parameters_raw NAME VALUE``, ``-y/--parameters_yaml YAML``,
``-f/--parameters_file FILE``, ``-b/--parameters_base64 B64``):

* the name must be declared by some notebook (papermill itself only warns and runs without it);
* the value, typed as papermill 2.7 types it, must have the type of the default in every notebook declaring the
  name: a ``-p`` value becomes ``True``/``False``/``None``, an int, a float or else a string
  (``papermill.cli._resolve_type``, used here itself), so ``-p FRESH false`` is the *string* "false" -- truthy --
  and is refused; ``-r`` values are always strings; YAML values keep YAML's types. An int is accepted for a
  float default, ``None`` only for a ``None`` default; a default that is not a literal accepts anything;
* ``PROFILE`` and ``RESULTS_DIR`` are set by the Makefile from ``PROFILE=`` and ``RESULTS=``; setting them here
  would run the notebooks with values the rerun stamp does not record;
* a parameter that takes one of a few values (``GRID``, ``EXTRAPOLATION``, ``SPLIT``: the library's table
  ``vrex_lib.config.NOTEBOOK_CHOICES``) must have one of them, compared exactly as the notebooks compare it;
* a numeric parameter (``N_SAMPLES``, ``KV_LEN_SIM``, ``ACTIVITY_VECTORS``, ``SHADOW_KV``: the table
  ``vrex_lib.config.NOTEBOOK_RANGES``) must lie in its declared range, checked as the notebooks check it.

Any other token must be a papermill option (checked against papermill's own command line), and not one after
which the notebooks would not run (``--prepare-only``, ``--help-notebook``). Exit 2 with one line naming the
parameter or option and the fix. Used by `make reproduce` before anything is written
(docs/DECISIONS.md D71, D171, D330); :func:`final_values` is reused by ``scripts/coin_stamp.py``.
"""
from __future__ import annotations

import ast
import base64
import json
import os
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's library, whatever the installed one is
from vrex_lib.config import (NOTEBOOK_CHOICES, NOTEBOOK_RANGES,  # noqa: E402  (stdlib-only: no torch imported)
                             ParamError as RangeError, param_range)

#: make's PROFILE, for the checks that depend on it (the study grid of notebook 09).
PROFILE_ENV = "VREX_CHECK_PROFILE"
#: Set by the Makefile itself (``-p PROFILE $(PROFILE) -p RESULTS_DIR $(RESULTS)``).
MAKE_OWNED = {"PROFILE": "PROFILE=", "RESULTS_DIR": "RESULTS="}
#: papermill options after which the notebooks would not be executed, yet make would record them as run.
NOT_A_RUN = ("--prepare-only", "--help-notebook", "--version", "--help", "-h")
_NO_LITERAL = object()
_PAIR_FLAGS = {"-p": "-p", "--parameters": "-p", "-r": "-r", "--parameters_raw": "-r"}
_ONE_FLAGS = {"-y": "-y", "--parameters_yaml": "-y", "-f": "-f", "--parameters_file": "-f",
              "-b": "-b", "--parameters_base64": "-b"}


class ParamError(ValueError):
    """A papermill argument this project cannot run with; the message is the one line to print."""


def declared(nb_dir: Path) -> dict[str, dict[str, object]]:
    """Parameter name -> {notebook file name: its default value} (``_NO_LITERAL`` if not a literal)."""
    out: dict[str, dict[str, object]] = {}
    for nb in sorted(nb_dir.glob("[0-9][0-9]_*.ipynb")):
        for c in json.loads(nb.read_text()).get("cells", []):
            if "parameters" not in c.get("metadata", {}).get("tags", []):
                continue
            for node in ast.parse("".join(c["source"])).body:
                value = getattr(node, "value", None)
                for t in getattr(node, "targets", [getattr(node, "target", None)]):
                    if isinstance(t, ast.Name):
                        try:
                            default = ast.literal_eval(value) if value is not None else _NO_LITERAL
                        except (ValueError, TypeError, SyntaxError):
                            default = _NO_LITERAL
                        out.setdefault(t.id, {})[nb.name] = default
    return out


def _papermill():
    """papermill's own value typing and YAML reading. Imported on first use: importing papermill takes a second of
    CPU, which every `make reproduce` without papermill arguments (the default) would otherwise pay three times."""
    from papermill.cli import _resolve_type  # exactly how papermill types a -p value
    from papermill.iorw import NoDatesSafeLoader, read_yaml_file  # YAML as papermill reads it: dates stay strings

    return _resolve_type, NoDatesSafeLoader, read_yaml_file


def _yaml(text: str | None, where: str, path: str | None = None) -> dict:
    _, NoDatesSafeLoader, read_yaml_file = _papermill()
    try:
        out = (read_yaml_file(path) if path is not None else yaml.load(text, Loader=NoDatesSafeLoader)) or {}
    except yaml.YAMLError as err:
        raise ParamError(f"PAPERMILL_ARGS: {where} is not valid YAML ({str(err).splitlines()[0]})") from None
    except Exception as err:  # papermill's readers raise their own types for a missing file or a bad extension
        raise ParamError(f"PAPERMILL_ARGS: {where}: cannot read it ({type(err).__name__}: {err})") from None
    if not isinstance(out, dict):
        raise ParamError(f"PAPERMILL_ARGS: {where} must be a YAML mapping NAME: VALUE, got {type(out).__name__}")
    return out


def parameters(args: list[str]) -> list[tuple[str, object, str]]:
    """The parameters papermill arguments set: (name, value as papermill types it, how it was given)."""
    out: list[tuple[str, object, str]] = []
    i = 0
    while i < len(args):
        flag = args[i]
        if flag in _PAIR_FLAGS:
            if i + 2 >= len(args):
                raise ParamError(f"PAPERMILL_ARGS: {flag} needs a NAME and a VALUE")
            name, text = args[i + 1], args[i + 2]
            value = _papermill()[0](text) if _PAIR_FLAGS[flag] == "-p" else text
            out.append((name, value, f"{_PAIR_FLAGS[flag]} {name} {text}"))
            i += 3
        elif flag in _ONE_FLAGS:
            if i + 1 >= len(args):
                raise ParamError(f"PAPERMILL_ARGS: {flag} needs a value")
            text, kind = args[i + 1], _ONE_FLAGS[flag]
            where, path = f"{kind} {text}", None
            if kind == "-f":
                path = text
            elif kind == "-b":
                try:
                    text = base64.b64decode(text, validate=True).decode("utf-8")
                except (ValueError, UnicodeDecodeError):
                    raise ParamError(f"PAPERMILL_ARGS: {where} is not base64 of UTF-8 YAML") from None
            out.extend((str(k), v, where) for k, v in _yaml(text, where, path).items())
            i += 2
        else:
            i += 1 + _other_option(args, i)
    return out


def _papermill_options() -> dict[str, int]:
    """Every option of papermill's command line -> how many values follow it (0 for a flag)."""
    import click
    from papermill.cli import papermill as command

    return {name: 0 if p.is_flag else p.nargs for p in command.params if isinstance(p, click.Option)
            for name in (*p.opts, *p.secondary_opts)}


def _other_option(args: list[str], i: int) -> int:
    """Check the non-parameter option at ``args[i]``; returns how many values after it belong to it."""
    token = args[i]
    name, inline = token.split("=", 1)[0], "=" in token
    if name in NOT_A_RUN:
        raise ParamError(f"PAPERMILL_ARGS: {name} would not execute the notebooks (each would then count as done); "
                         "remove it (nothing was run or changed)")
    options = _papermill_options()
    if not token.startswith("-") or name not in options:
        what = f"papermill has no option {name}" if token.startswith("-") else f"unexpected argument {token!r}"
        raise ParamError(f"PAPERMILL_ARGS: {what}; give papermill options only (make passes the notebook paths), "
                         "e.g. -p NAME VALUE (nothing was run or changed)")
    n = 0 if inline else options[name]
    if i + n >= len(args):
        raise ParamError(f"PAPERMILL_ARGS: {name} needs a value")
    return n


def final_values(args: list[str]) -> dict[str, object]:
    """What the notebooks receive: papermill applies -b, then -f, then -y, then -p, then -r (each in the order
    given), a later value replacing an earlier one (``papermill.cli.papermill``)."""
    order = ("-b", "-f", "-y", "-p", "-r")
    given = sorted(parameters(args), key=lambda t: order.index(t[2].split()[0]))  # stable: keeps the given order
    return {name: value for name, value, _ in given}


def _type_name(v: object) -> str:
    if v is None:
        return "None"
    name = type(v).__name__
    return ("an " if name[0] in "aeiou" else "a ") + name


def _describe(v: object) -> str:
    return "None" if v is None else f"{_type_name(v)} {v!r}"


def _fits(value: object, default: object) -> bool:
    if default is _NO_LITERAL:
        return True
    if default is None or value is None:
        return default is None
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return type(value) is type(default)


def _hint(name: str, value: object, default: object, how: str) -> str:
    """How to give ``name`` a value of ``default``'s type."""
    if isinstance(default, bool):
        return f"papermill reads only True and False as booleans: use -p {name} True or -p {name} False"
    if isinstance(default, str):
        return f"use -r {name} {value!s} to pass it as text" if how.startswith("-p") else "quote it in the YAML"
    if isinstance(default, int):
        return f"give a whole number, e.g. -p {name} {default}"
    if isinstance(default, float):
        return f"give a number, e.g. -p {name} {default}"
    return f"give a value like the default {default!r}"


def check(nb_dir: Path, args: list[str]) -> None:
    """Raise :class:`ParamError` (one line) for a folder without notebooks, then for the first unknown,
    Makefile-owned, mistyped or out-of-choice parameter."""
    if not sorted(nb_dir.glob("[0-9][0-9]_*.ipynb")):
        raise ParamError(f"NOTEBOOK_DIR={nb_dir} holds no notebooks (NN_name.ipynb); leave NOTEBOOK_DIR unset for "
                         "the repository's notebooks/ (nothing was run or changed)")
    known = declared(nb_dir)
    given = parameters(args)
    bad = [n for n, _, _ in given if n not in known]
    if bad:
        raise ParamError(f"PAPERMILL_ARGS: no notebook in {nb_dir} has the parameter(s) {', '.join(bad)}; the "
                         f"notebooks' parameters are {', '.join(sorted(known))} (nothing was run or changed)")
    for name, value, how in given:
        if name in MAKE_OWNED:
            raise ParamError(f"PAPERMILL_ARGS: '{how}' sets {name}, which make sets itself: use "
                             f"make ... {MAKE_OWNED[name]}<value> instead (nothing was run or changed)")
        for nb, default in known[name].items():
            if not _fits(value, default):
                raise ParamError(
                    f"PAPERMILL_ARGS: '{how}' gives {name} {_describe(value)}, but {nb} expects "
                    f"{_type_name(default)} (its default is {default!r}); {_hint(name, value, default, how)} "
                    "(nothing was run or changed)")
        _check_choice(name, value, how, known[name])
        if name == "GRID" and os.environ.get(PROFILE_ENV):
            _check_grid(os.environ[PROFILE_ENV], value, how)
        if name in NOTEBOOK_RANGES:
            try:
                param_range(name, value)
            except RangeError as err:
                raise ParamError(f"PAPERMILL_ARGS: '{how}': {err} (nothing was run or changed)") from None


def _check_choice(name: str, value: object, how: str, where: dict[str, object]) -> None:
    """A parameter of :data:`NOTEBOOK_CHOICES` must have one of its values."""
    choices = NOTEBOOK_CHOICES.get(name)
    if choices is not None and value not in choices:
        flag = "-r" if how.startswith("-r") else "-p"
        raise ParamError(f"PAPERMILL_ARGS: '{how}' gives the notebook parameter {name} {value!r}, which is not one "
                         f"of {', '.join(map(repr, choices))} (a parameter of {', '.join(where)}); use "
                         f"{' or '.join(f'{flag} {name} {c}' for c in choices)} (nothing was run or changed)")


def _check_grid(profile: str, value: object, how: str) -> None:
    """The study grid must exist for make's PROFILE (the smoke profile has no 'full' grid), checked as notebook 09
    checks it; the library is imported only when GRID is given (it loads torch)."""
    from vrex_lib.config import PROFILES, use_notebook_arg_names
    from vrex_lib.longctx.grid import study_grid

    if profile not in PROFILES:
        return  # make refuses the profile itself, with its own message
    use_notebook_arg_names()
    try:
        study_grid(profile, str(value))
    except ValueError as err:
        raise ParamError(f"PAPERMILL_ARGS: '{how}': {str(err).removeprefix('long-context study: ')} "
                         "(nothing was run or changed)") from None


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: check_params.py NOTEBOOK_DIR [papermill arguments ...]", file=sys.stderr)
        return 2
    try:
        check(Path(argv[0]), argv[1:])
    except ParamError as err:
        print(err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
