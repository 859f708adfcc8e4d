"""Every notebook executes end to end in the smoke profile as a user runs them -- `make reproduce PROFILE=smoke`:
one results folder, the Makefile's order (02/06/08/09 after the workload file, 05 after 04's yosys summary, 07
last) -- stores its figures as images and no absolute path of this machine, and every FAIL / NOT RUN row it writes
names its cause."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import make_ready

from vrex_lib import report

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))

pytestmark = [pytest.mark.slow, pytest.mark.long,
              pytest.mark.skipif(not make_ready(), reason="needs make and an up-to-date .venv and data/coin_mini "
                                                          "(make setup)")]


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """(results folder, the run) of `make reproduce PROFILE=smoke` into a fresh results folder."""
    res = tmp_path_factory.mktemp("chain") / "results"
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MAKELEVEL", "VREX_RESULTS_DIR", report.MANIFEST_ENV)}
    env.update(PYTHONPATH=str(REPO), VREX_THREADS="1")
    r = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "reproduce", "PROFILE=smoke",
                        f"RESULTS={res}"], capture_output=True, text=True, env=env, timeout=3000)
    return res, r


def _tail(r: subprocess.CompletedProcess) -> str:
    return (r.stdout[-1500:] + "\n--- stderr ---\n" + r.stderr[-3000:]).strip()


def test_make_reproduce_smoke_completes_with_a_complete_report(chain):
    res, r = chain
    assert r.returncode == 0, _tail(r)
    assert "reproduce: done" in r.stdout and "FAILED" not in r.stderr, _tail(r)
    text = (res / "REPORT.md").read_text()
    assert text.startswith("# vrex reproduction report") and "## Incomplete" not in text
    assert (res / report.REPORT_HTML).is_file() and (res / "tables" / "summary.csv").is_file()


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_the_smoke_chain(nb: Path, chain):
    res, r = chain
    executed = res / "executed" / nb.name
    assert executed.is_file(), f"{nb.name} did not complete in `make reproduce PROFILE=smoke`:\n{_tail(r)}"
    cells = json.loads(executed.read_text())["cells"]
    _check_outputs(nb.name, cells, res)
    man = json.loads((res / "executed" / f"{nb.stem}.manifest.json").read_text())
    mine = report.collect_tables(res)
    mine = mine[mine["table"].isin(man["tables"])]
    # a FAIL or NOT RUN row must say why (report.CAUSES): the library function that builds it sets the cause
    why = report.unexplained(mine)
    ids = list(why["table"] + ":" + why["claim"])
    assert not ids, f"{nb.name}: {len(ids)} FAIL / NOT RUN rows without a cause, e.g. {ids[:8]}"
    # a 'model' FAIL names its responsible term and the value a PASS would need (docs/DECISIONS.md D224)
    bare = report.without_term(mine)
    assert not len(bare), f"{nb.name}: 'model' FAILs without a term: {list(bare['table'] + ':' + bare['claim'])[:8]}"
    # every comparison table the notebook's code writes is there, complete, from this profile, with verdicts
    for tid in report.expected_tables(nb.parent)[nb.name]:
        df = report.read_table(tid, res)
        assert len(df) > 0 and tid in man["tables"], f"{nb.name}: table {tid} is empty or not its own"
        assert list(df.columns) == report.COLUMNS, f"{nb.name}: table {tid} has columns {list(df.columns)}"
        assert set(df["profile"]) == {"smoke"}, f"{nb.name}: table {tid} was not written by this run"
        assert set(df["verdict"]) <= set(report.VERDICTS), f"{nb.name}: table {tid}: {set(df['verdict'])}"
        assert (res / "tables" / f"{tid}.title").read_text().strip(), f"{nb.name}: table {tid} has no title"
    if nb.name.startswith("08_"):  # the exploration notebook writes a wide table, not claims
        df = report.read_table("design_space", res)
        assert len(df) > 0 and set(df["profile"]) == {"smoke"}, f"{nb.name}: design_space.csv not from this run"
        assert {"pareto_latency", "pareto_area", "is_paper"} <= set(df.columns) and df["is_paper"].any()


def _check_outputs(name: str, cells: list[dict], res: Path) -> None:
    """Figures are stored as images, widgets never as their text repr, progress bars never as a frozen frame, and
    no output names a folder of this machine (the checkout, the results folder, home)."""
    machine = [str(REPO), str(res), os.path.expanduser("~") + "/"]
    for c in cells:
        for o in c.get("outputs", []):
            text = json.dumps(o.get("data", {}).get("text/plain", "")) + json.dumps(o.get("text", ""))
            assert "interactive(children" not in text, f"{name}: a widget stored as text: {text[:120]}"
            assert "%|" not in text, f"{name}: a progress bar stored in the notebook: {text[:120]}"
            stored = json.dumps({k: v for k, v in o.items() if k != "data"}) + json.dumps(
                {m: v for m, v in o.get("data", {}).items() if m.startswith("text/")})
            hit = next((p for p in machine if p in stored), None)
            assert hit is None, f"{name}: a stored output names {hit}: {stored[stored.find(hit) - 80:][:200]}"
    if name.startswith("08_"):  # the design-space panel, drawn as static images under papermill
        src = next(c for c in cells if "panel(draw" in "".join(c.get("source", "")))
        n_img = sum("image/png" in o.get("data", {}) for o in src["outputs"])
        assert n_img == 4, f"{name}: the design-space panel shows {n_img} images, not its 4 settings once each"


#: What an executed notebook must not show (docs/DECISIONS.md D463): a stray stderr stream, a DataFrame dump of
#: nothing, a bare path as a cell's value, a library warning (they carry temporary paths), a temporary folder.
NOISE = ("Empty DataFrame", "PosixPath(", "UserWarning", "FutureWarning", "DeprecationWarning", "/tmp/")


def test_executed_notebooks_and_the_console_carry_no_noise(chain):
    res, r = chain
    assert "Kernel is running over TCP without encryption" not in r.stdout + r.stderr
    assert "%|" not in r.stdout + r.stderr, "a download-style progress bar on make reproduce's console"
    found = []
    for nb in sorted((res / "executed").glob("[0-9][0-9]_*.ipynb")):
        for i, c in enumerate(json.loads(nb.read_text())["cells"]):
            for o in c.get("outputs", []):
                if o.get("output_type") == "stream" and o.get("name") == "stderr":
                    found.append(f"{nb.name} cell {i}: stderr {''.join(o['text'])[:100]!r}")
                text = "".join(o.get("data", {}).get("text/plain", "")) + "".join(o.get("text", ""))
                found += [f"{nb.name} cell {i}: {n!r} in {text[:100]!r}" for n in NOISE if n in text]
    assert not found, "\n".join(found[:12])


def test_every_figure_shows_at_0_7_of_its_size_or_more_at_1280_px(chain):
    """The report page at a 1280-px window shrinks no figure below 0.7 of its pixel size (the content width
    follows from the page's style sheet, :func:`vrex_lib.report.render.content_width_px`)."""
    from vrex_lib.report import render

    res, _ = chain
    pngs = sorted((res / "figures").glob("*.png"))
    assert len(pngs) > 20
    small = {p.name: round(render.displayed_scale(p), 2) for p in pngs
             if render.displayed_scale(p) < render.MIN_FIGURE_SCALE}
    assert not small, f"figures shown below {render.MIN_FIGURE_SCALE} of their size at 1280 px: {small}"


def _chromium() -> str | None:
    import shutil

    return next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium on this machine (chromium, chromium-browser "
                                                "or google-chrome); the displayed scale is checked from the PNG "
                                                "widths and the page's CSS instead")
def test_every_figure_renders_at_0_7_or_more_in_headless_chromium(chain, tmp_path):
    from vrex_lib.report import render

    res, _ = chain
    page = (res / report.REPORT_HTML).read_text()
    probe = ("<script>window.onload=()=>{const s=[...document.images].map(i=>(i.width/i.naturalWidth).toFixed(3));"
             "document.body.setAttribute('data-scales',s.join(','));};</script>")
    (tmp_path / "p.html").write_text(page.replace("</body>", probe + "</body>"))
    out = subprocess.run([_chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--window-size=1280,900",
                          "--virtual-time-budget=5000", "--dump-dom", (tmp_path / "p.html").as_uri()],
                         capture_output=True, text=True, timeout=120)
    scales = [float(x) for x in out.stdout.split('data-scales="', 1)[1].split('"', 1)[0].split(",")]
    assert len(scales) == len(list((res / "figures").glob("*.png")))
    assert min(scales) >= render.MIN_FIGURE_SCALE, scales


def test_a_live_notebook_09_reuses_the_reproduced_study_and_writes_only_under_live(chain, tmp_path):
    """JupyterLab's run of notebook 09 (VREX_HEADLESS=0: live mode) after `make reproduce`: the study cache and
    the workload file are read from the reproduce folder, nothing outside ``live/`` changes, no checkpoint folder
    appears, and no output names a folder of this machine."""
    res, r = chain
    assert r.returncode == 0, _tail(r)
    before = {p: p.stat().st_mtime_ns for p in res.rglob("*") if p.is_file() and "live" not in p.relative_to(res).parts}
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MAKELEVEL", "VREX_RESULTS_DIR", report.MANIFEST_ENV)}
    env.update(PYTHONPATH=str(REPO), VREX_THREADS="1", VREX_HEADLESS="0")
    nb = next((REPO / "notebooks").glob("09_*.ipynb"))
    run = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "papermill", str(nb), str(tmp_path / nb.name),
                          "-k", "python3", "--cwd", str(REPO / "notebooks"), "--log-level", "WARNING",
                          "-p", "PROFILE", "smoke", "-p", "RESULTS_DIR", str(res)],
                         capture_output=True, text=True, env=env, timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    study = res / "live" / "data" / "retrieval_demand_smoke.json"
    assert study.is_symlink(), "the live run recomputed the study instead of reading make reproduce's"
    assert (res / "live" / "figures" / "retrieval_demand_sim.png").is_file()
    after = {p: p.stat().st_mtime_ns for p in res.rglob("*") if p.is_file() and "live" not in p.relative_to(res).parts}
    assert after == before, "a live run changed make reproduce's files"
    assert not list(res.rglob(".ipynb_checkpoints"))
    outputs = json.dumps([c.get("outputs", []) for c in json.loads((tmp_path / nb.name).read_text())["cells"]])
    for machine in (str(REPO), str(res)):
        assert machine not in outputs, f"a live output names {machine}"
