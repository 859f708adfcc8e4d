"""REPORT.md / report.html: headline claims first, the paper's order, every FAIL with its cause, nothing dropped,
one self-contained page; the manifests that make a deleted table visible; the stale mark; headless notebooks."""
from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from vrex_lib import _io, notebook, paper, report
from vrex_lib.report import layout
from helpers import make_ready, write_notebook

REPO = Path(__file__).resolve().parent.parent
TOL = paper.Tolerance("rel", 0.1)


def _fig(out: Path, fig_id: str) -> None:
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1])
    report.write_figure(fig_id, fig, out=out)
    plt.close(fig)


def _results(out: Path) -> Path:
    """A small results folder: headline rows (paired, one FAIL without a cause), Table III, Table II, Fig. 13 and
    Fig. 4 tables written in reverse paper order, an unknown table, figures, a detail table."""
    R = report.Row
    report.write_table("headline", [
        R("fig13.edge.b1.fps_min", "fig13.edge.b1.fps_min [V-Rex: paper-stated workload]", "FPS", 3.9, 1.9, TOL,
          "abstract", cause="paper-inconsistent", cause_detail="the paper's own inputs allow at most 1.2 FPS; see implied.vrex8.max_sel_frac_pcie.40k",
          check="implied.vrex8.max_sel_frac_pcie.40k"),
        R("fig13.edge.b1.fps_min.measured_workload", "fig13.edge.b1.fps_min [V-Rex: measured workload]", "FPS", 3.9,
          11.5, TOL, "abstract", cause="stand-in-workload", cause_detail="SmolLM2 selects 1 %"),
        R("headline.speedup_max", "headline.speedup_max [V-Rex: paper-stated workload]", "x", 19.7, 21.0, TOL,
          "abstract"),
        R("headline.speedup_max.measured_workload", "headline.speedup_max [V-Rex: measured workload]", "x", 19.7,
          79.0, TOL, "abstract")], profile="default", title="Headline claims (abstract)", out=out)
    report.write_table("table3", [R("table3.power_mw.total", "core power", "mW", 2609.43, 750.0, TOL, "Table III",
                                    cause="model", cause_detail="no clock-tree constant",
                                    term=report.model_term("DPE logic switching", 0.8, "DPE at 2100 mW (now 600)",
                                                           "x3.5 is outside x0.5-x2: a 14 nm library")),
                                  R("dre.area_share_pct", "DRE area share", "%", 2.0, 2.05, TOL, "abstract")],
                       profile="default", title="Table III — area and power", out=out)
    report.write_table("table2", [R("fig19.acc_drop.resv", "accuracy drop", "pt", 0.8, None, TOL, "Fig. 19",
                                    cause="not-run", cause_detail="PROFILE=full on a GPU"),
                                  report.info_row("fidelity.resv.attn_err", "attention error", "", 0.25)],
                       profile="default", title="Table II — retrieval ratio", out=out)
    report.write_table("fig13", [R("fig13.x", "latency", "ms", 100.0, 101.0, TOL, "Fig. 13")], profile="default",
                       title="Fig. 13 — latency", out=out)
    report.write_table("fig4", [R("fig4.x", "share", "%", 50.0, 51.0, TOL, "Fig. 4")], profile="default",
                       title="Fig. 4 — motivation", out=out)
    report.write_table("zz_longctx", [report.info_row("long.x", "a long-context study", "", 1.0)],
                       profile="default", title="Long-context retrieval study (INFO, under Table II)", out=out)
    report.write_table("zz_unmapped", [report.info_row("u.x", "something new", "", 2.0)], profile="default",
                       title="A table no section knows", out=out)
    report.write_table("perf_implied", [report.info_row("implied.vrex8.max_sel_frac_pcie.40k", "selected", "", 0.2)],
                       profile="default", title="What the printed latencies imply", out=out)
    report.write_table("fig16", [R("fig16.x", "speedup", "x", 8.1, 8.0, TOL, "Fig. 16")], profile="default",
                       title="Fig. 16 — ablation", out=out)
    for f in ("fig13a", "fig4", "table3_blocks", "zz_new_plot", "fig15_16"):
        _fig(out, f)
    return out


@pytest.fixture
def built(tmp_path) -> tuple[Path, str]:
    out = _results(tmp_path / "results")
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    return out, report.build_report(out, notebook_dir=nbs).read_text()


def _headings(md: str) -> list[str]:
    return [ln for ln in md.splitlines() if ln.startswith("## ") or ln.startswith("# ")]


def test_report_opens_with_the_headline_claims_then_follows_the_paper(built):
    out, md = built
    heads = _headings(md)
    assert heads[0] == "# vrex reproduction report" and heads[1] == "## Contents" and heads[2] == "## Findings"
    assert heads[3].startswith("## Headline claims")
    first_screen = md[:md.index("## What this artifact")]
    # every headline claim with both V-Rex columns, its verdicts and causes, on the first screen
    row = next(ln for ln in first_screen.splitlines() if "frame rate, low end" in ln)
    assert "| 3.9 FPS | 1.9 FPS | **FAIL** | 11.5 FPS | **FAIL** |" in row
    assert "paper-stated: **paper-inconsistent** — the paper's own inputs allow at most 1.2 FPS [[" in row
    assert "measured: **stand-in-workload**" in row
    assert "| 19.7× | 21× | **PASS** | 79× | **FAIL** | measured: **unexplained** |" in first_screen
    # a cause cell is one short sentence; its detail and check id sit behind a footnote link
    assert ("**model** — DPE logic switching (80% of it) would need DPE at 2100 mW (now 600), ×3.5, beyond the "
            "cited devices' range [[") in first_screen
    assert "**not-run** — PROFILE=full on a GPU [[" in first_screen
    details = md[md.index("## Cause details"):]
    assert "`implied.vrex8.max_sel_frac_pcie.40k`: the paper's own inputs allow at most 1.2 FPS; see implied" in details
    assert '<a id="note-1"></a>**[1]**' in details
    # headline claims no table holds are shown as absent, not dropped
    assert "peak throughput, V-Rex8 |  | – | – | – |  |  | not in these results: no table holds" in first_screen
    order = [h for h in heads if h.startswith("## Fig.") or h.startswith("## Table")]
    want = ["Fig. 4", "Fig. 13", "Fig. 15", "Fig. 16", "Table II", "Table III"]
    assert [h.split(" — ")[0].removeprefix("## ") for h in order] == want
    assert heads.index("# Appendix") > max(heads.index(h) for h in order)
    assert "**1 FAIL / NOT RUN rows name no cause**" in md


def test_unknown_tables_and_figures_land_in_a_labelled_section(built):
    out, md = built
    table2 = md[md.index("## Table II"):md.index("## Table III")]
    assert "Long-context retrieval study" in table2  # its title names Table II
    other = md[md.index("## " + layout.OTHER.heading):]
    assert "A table no section knows" in other and "figures/zz_new_plot.png" in other
    assert "figures/table3_blocks.png" in md[md.index("## Table III"):md.index("# Appendix")]
    fig16 = md[md.index("## Fig. 16"):md.index("## Table II")]  # one figure for Fig. 15-17: shown once, linked
    assert "Figure: [figures/fig15_16.png](figures/fig15_16.png), shown under Fig. 15." in fig16
    # shown once (with its full-size link), linked from Fig. 16
    assert md.count("](figures/fig15_16.png)") == 3 and md.count("![fig15_16]") == 1
    # every table and figure written is somewhere in the report
    for t in (out / "tables").glob("*.csv"):
        assert f"tables/{t.name}" in md, t.name
    for f in (out / "figures").glob("*.png"):
        assert f"](figures/{f.name})" in md, f.name


@pytest.mark.parametrize("kind,item,title,writer,want", [
    ("table", "table2_longctx", "", "", "table2"),
    ("table", "anything", "Study of ... (Fig. 16, §VI.B)", "", "fig16"),
    ("table", "anything", "Table III cross-check", "", "table3"),
    ("table", "t9", "no reference", "09_long_context.ipynb", "table2"),
    ("table", "t0", "no reference", "42_new.ipynb", "other"),
    ("table", "design_space", "", "", "design"),
    ("figure", "fig15_16_17", "", "", "fig15"),
    ("figure", "fig19_more", "", "", "fig19"),
    ("figure", "my_table", "", "", "fig14"),
    ("figure", "summary_verdicts", "", "", "summary"),
])
def test_placement_rules(kind, item, title, writer, want):
    assert layout.place(kind, item, title=title, writer=writer, table_places={"my_table": "fig14"}) == want


def test_paper_refs_are_parsed_in_order():
    assert layout.paper_refs("ReSV (Fig.7(b), Table II and Table III, §VI.E)") == ["Fig. 7", "Table II", "Table III",
                                                                                   "§VI.E"]


def test_fail_counts_per_cause_go_to_summary_csv_which_is_no_table(built):
    out, md = built
    s = pd.read_csv(out / "tables" / "summary.csv", keep_default_na=False).set_index(["verdict", "cause"])
    assert s.loc[("FAIL", "paper-inconsistent"), "rows"] == 1 and s.loc[("FAIL", "model"), "rows"] == 1
    assert s.loc[("FAIL", "unexplained"), "rows"] == 1 and s.loc[("NOT RUN", "not-run"), "rows"] == 1
    assert s.loc[("PASS", ""), "rows"] == 5 and s.loc[("FAIL", "stand-in-workload"), "rows"] == 1
    assert "summary" not in set(report.collect_tables(out)["table"])
    assert "summary" not in report.mixed_profiles(out) and not report.damaged_tables(out)
    with pytest.raises(ValueError, match="reserved"):
        report.write_table("summary", [], profile="smoke", out=out)
    why = report.unexplained(report.collect_tables(out))
    assert list(why["claim"]) == ["headline.speedup_max.measured_workload"]
    unexplained = md[md.index("## Unexplained"):]
    assert "`headline.speedup_max.measured_workload`" in unexplained.split("\n## ")[0]


def test_a_cause_that_is_not_one_of_the_causes_is_unexplained(tmp_path):
    out = tmp_path / "results"
    df = report.to_frame([report.Row("x.f", "q", "", 1.0, 3.0, TOL)], profile="smoke").assign(cause="modle")
    report.write_table("t", df, profile="smoke", out=out)
    assert list(report.unexplained(report.collect_tables(out))["claim"]) == ["x.f"]
    md = report.build_report(out, notebook_dir=tmp_path).read_text()
    assert "**unexplained** (`modle` is not one of the causes)" in md


def test_main_prints_the_fail_counts_per_cause(tmp_path, capsys):
    out = _results(tmp_path / "results")
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    assert report.main(["--results", str(out), "--notebooks", str(nbs)]) == 0
    printed = capsys.readouterr()
    # per distinct claim (the measured-workload twins are the same claims' other column), rows in parentheses
    assert ("FAIL by cause, claims (rows): paper-inconsistent 1 (1), stand-in-workload 0 (1), model 1 (1), "
            "unexplained 0 (1)") in printed.out
    assert "verdicts per distinct claim: " in printed.out and "(rows, measured-workload twins" in printed.out
    assert "NOT RUN by cause, claims (rows): not-run 1 (1)" in printed.out and "1 FAIL / NOT RUN rows name no cause" in printed.err


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.hrefs, self.heads, self._h, self.ids, self.tags = [], [], [], None, set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        elif tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        elif tag in ("h1", "h2"):
            self._h = ""

    def handle_data(self, data):
        if self._h is not None:
            self._h += data

    def handle_endtag(self, tag):
        if tag in ("h1", "h2") and self._h is not None:
            self.heads.append(self._h.strip())
            self._h = None


def test_html_page_is_self_contained_and_matches_the_markdown(built):
    out, md = built
    page = _Page()
    page.feed((out / "report.html").read_text())
    n_figs = len(list((out / "figures").glob("*.png")))
    assert len(page.imgs) == n_figs == len(re.findall(r"!\[[^\]]*\]\(figures/", md))
    for src in page.imgs:  # every image inlined, and a real PNG
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    for href in page.hrefs:  # every link is a file of the results folder or an anchor of the page
        if href.startswith("#"):
            assert href[1:] in page.ids, href
        else:
            assert not re.match(r"^[a-z]+:", href) and (out / href).is_file(), href
    assert page.heads == [h.lstrip("# ").strip() for h in _headings(md)]
    # the contents link every section; every table sits in a scroll box; cause details open in place
    toc = md[md.index("## Contents"):md.index("## Findings")]
    assert toc.count("](#") >= 8 and "#cause-details" in toc
    tags = [t for t, _ in page.tags]
    assert tags.count("table") == sum(1 for i, t in enumerate(tags) if t == "table" and tags[i - 1] == "div")
    assert "details" in tags and "summary" in tags


def test_a_missing_figure_is_no_broken_image(built, tmp_path):
    out, _ = built
    (out / "figures" / "fig4.png").unlink()
    report.build_report(out, notebook_dir=tmp_path / "nbs")
    page = _Page()
    page.feed((out / "report.html").read_text())
    assert all(s.startswith("data:image/png;base64,") for s in page.imgs)
    assert "figures/fig4.png" not in (out / "REPORT.md").read_text()


def test_ids_written_at_run_time_are_expected_through_the_manifest(tmp_path, monkeypatch, capsys):
    out, nbs = tmp_path / "results", tmp_path / "nbs"
    nbs.mkdir()
    write_notebook(nbs / "06_perf.ipynb", "for tid in ('fig13', 'fig14'):\n    report.write_table(tid, rows)\n"
                                     "if FULL:\n    report.write_figure('full_only', fig)")
    assert report.expected_tables(nbs) == {"06_perf.ipynb": []}  # no literal id in its code
    assert report.expected_outputs(out, nbs)["06_perf.ipynb"]["figures"] == ["full_only"]  # no manifest yet
    monkeypatch.setenv(report.MANIFEST_ENV, str(out / "executed" / "06_perf.manifest.json"))
    report.start_manifest()
    for tid in ("fig13", "fig14"):
        report.write_table(tid, [report.info_row("c", "q", "u", 1.0)], profile="smoke", out=out)
    _fig(out, "fig13")
    monkeypatch.delenv(report.MANIFEST_ENV)
    assert report.expected_outputs(out, nbs) == {"06_perf.ipynb": {"tables": ["fig13", "fig14"],
                                                                   "figures": ["fig13"]}}
    assert report.main(["--results", str(out), "--notebooks", str(nbs)]) == 0
    (out / "tables" / "fig14.csv").unlink()
    (out / "figures" / "fig13.png").unlink()
    assert report.main(["--results", str(out), "--notebooks", str(nbs)]) == 1
    err = capsys.readouterr().err
    assert "notebooks/06_perf.ipynb: fig14" in err and "figures fig13 absent" in err
    md = (out / "REPORT.md").read_text()
    assert "## Incomplete" in md and "`notebooks/06_perf.ipynb`: `fig14` absent" in md
    # the next run starts the manifest afresh: a table the notebook no longer writes is no longer expected
    monkeypatch.setenv(report.MANIFEST_ENV, str(out / "executed" / "06_perf.manifest.json"))
    report.start_manifest()
    monkeypatch.delenv(report.MANIFEST_ENV)
    assert report.missing_tables(out, nbs) == {} and report.missing_figures(out, nbs) == {}
    (out / "executed" / "06_perf.manifest.json").write_text("[1, 2]")
    assert report.main(["--results", str(out), "--notebooks", str(nbs)]) == 1
    assert "06_perf.manifest.json: not a vrex.manifest/1 manifest" in capsys.readouterr().err


def test_a_comparison_table_of_another_schema_is_damaged_not_an_exploration_table(tmp_path):
    out = tmp_path / "results"
    report.write_table("t", [report.info_row("c", "q", "u", 1.0)], profile="smoke", out=out)
    df = pd.read_csv(out / "tables" / "t.csv").drop(columns=["cause", "cause_detail"])
    df.to_csv(out / "tables" / "t.csv", index=False)
    assert "without the columns cause, cause_detail" in report.damaged_tables(out)["t.csv"]
    assert not len(report.collect_tables(out))


def test_mark_stale_puts_a_banner_that_the_next_build_removes(built, tmp_path):
    out, md = built
    report.mark_stale(out, "make reproduce started")
    report.mark_stale(out, "make reproduce started again")  # one banner, not two
    stale = (out / "REPORT.md").read_text()
    assert stale.startswith(report.STALE_MARK + " make reproduce started again")
    assert stale.count(report.STALE_MARK) == 1 and stale.split("\n\n", 1)[1] == md
    assert "Stale." in (out / "report.html").read_text()
    report.build_report(out, notebook_dir=tmp_path / "nbs")
    assert (out / "REPORT.md").read_text() == md
    assert report.mark_stale(tmp_path / "empty") == []


def test_markdown_section():
    text = "# T\n\n## A\n\nx\n\n## B b\n\ny\n\n# Appendix\n"
    assert report.markdown_section(text, "B") == "## B b\n\ny\n"
    assert report.markdown_section(text, "C") == ""


# --- headless notebooks -----------------------------------------------------------------------------------


class _FakeShell:
    def __init__(self, hist_file):
        self.config = {"IPKernelApp": {}}
        self.history_manager = type("H", (), {"hist_file": hist_file})()


def test_headless_detection(monkeypatch):
    monkeypatch.delenv(notebook.HEADLESS_ENV, raising=False)
    assert not notebook.headless() and not notebook._interactive()  # plain Python
    monkeypatch.setattr(notebook, "_ipython", lambda: _FakeShell(":memory:"))  # papermill / nbclient
    assert notebook.headless() and not notebook._interactive()
    monkeypatch.setattr(notebook, "_ipython", lambda: _FakeShell(Path("/home/u/.ipython/history.sqlite")))
    assert not notebook.headless() and notebook._interactive()  # JupyterLab
    monkeypatch.setenv(notebook.HEADLESS_ENV, "1")
    assert notebook.headless()
    monkeypatch.setenv(notebook.HEADLESS_ENV, "yes")
    with pytest.raises(ValueError, match=r"\$VREX_HEADLESS='yes': use 1"):
        notebook.headless()


def test_panel_draws_each_figure_once(monkeypatch):
    import ipywidgets

    shown = []
    monkeypatch.setattr(notebook, "display", lambda obj: shown.append(obj))
    monkeypatch.delenv(notebook.HEADLESS_ENV, raising=False)

    def draw(a=1):
        fig, ax = plt.subplots()
        ax.set_title(str(a))
        return fig

    plt.close("all")
    monkeypatch.setattr(notebook, "_ipython", lambda: _FakeShell(":memory:"))  # headless: the static settings
    notebook.panel(draw, static=[dict(a=1), dict(a=2)], a=ipywidgets.IntSlider(1, 0, 3))
    assert [f.axes[0].get_title() for f in shown] == ["1", "2"] and not plt.get_fignums()
    shown.clear()
    calls = []

    def interact(fn, **controls):  # what ipywidgets.interact does: call, then display a returned value
        calls.append(controls)
        result = fn(a=controls["a"].value)
        if result is not None:
            shown.append(result)

    monkeypatch.setattr(ipywidgets, "interact", interact)
    monkeypatch.setattr(notebook, "_ipython", lambda: _FakeShell("history.sqlite"))  # live
    notebook.panel(draw, static=[dict(a=1)], a=ipywidgets.IntSlider(3, 0, 3))
    assert len(calls) == 1 and [f.axes[0].get_title() for f in shown] == ["3"] and not plt.get_fignums()


@pytest.mark.slow
def test_headless_notebook_stores_images_and_no_frozen_progress_bar(tmp_path):
    papermill = pytest.importorskip("papermill")
    nb, res = tmp_path / "00_bar.ipynb", tmp_path / "results"
    write_notebook(nb, "from vrex_lib.notebook import setup, show\nctx = setup('smoke', RESULTS_DIR)\n"
                  "from tqdm.auto import tqdm\nfor _ in tqdm(range(50), desc='loading'):\n    pass\n"
                  "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([0, 1])\nshow(fig)\n")
    with pytest.MonkeyPatch.context() as mp:  # detection must work without the Makefile's variable
        for k in (notebook.HEADLESS_ENV, "TQDM_DISABLE"):
            mp.delenv(k, raising=False)
        papermill.execute_notebook(str(nb), str(tmp_path / "out.ipynb"), parameters=dict(RESULTS_DIR=str(res)),
                                   kernel_name="python3", progress_bar=False)
    outputs = json.loads((tmp_path / "out.ipynb").read_text())["cells"][-1]["outputs"]
    text = json.dumps(outputs)
    assert "loading" not in text and "%|" not in text, text[:300]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 1  # shown once, as a static image


@pytest.mark.slow
@pytest.mark.skipif(not make_ready(), reason="needs make and an up-to-date .venv and data/coin_mini (make setup)")
@pytest.mark.long
def test_make_reproduce_manifest_and_stale_report(tmp_path):
    """End to end through make + papermill: a table id computed at run time, deleted, makes `make report` fail;
    a failed `make reproduce` leaves the previous REPORT.md marked stale."""
    nbs, res = tmp_path / "nbs", tmp_path / "res"
    nbs.mkdir()
    code = ("from vrex_lib import report\nfrom vrex_lib.notebook import setup\nctx = setup(PROFILE, RESULTS_DIR)\n"
            "for tid in ['t_' + s for s in ('a', 'b')]:\n"
            "    report.write_table(tid, [report.info_row('c', 'q', '', 1.0)], profile=PROFILE)\n")
    write_notebook(nbs / "00_dyn.ipynb", code)
    wl = res / "data" / "workload_smoke.json"  # the workload measurement is not what this test is about
    wl.parent.mkdir(parents=True)
    # its arguments' stamp as make writes it (D441), older than the file, so make takes the file as measured
    subprocess.run([sys.executable, str(REPO / "scripts" / "stamp.py"), str(res / ".workload"), "x", "--",
                    "WORKLOAD_ARGS= LONG="], check=True)
    os.utime(res / ".workload", (1, 1))
    wl.write_text("{}")
    (res / ".vrex-results").touch()  # a results folder the project made (D170): it already holds a file
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", report.MANIFEST_ENV)}
    env.update(PYTHONPATH=str(REPO), VREX_THREADS="1")

    def make(*args):
        return subprocess.run(["make", "--no-print-directory", "-C", str(REPO), f"RESULTS={res}",
                               f"NOTEBOOK_DIR={nbs}", "PROFILE=smoke", *args], capture_output=True, text=True,
                              env=env, timeout=300)

    r = make("reproduce")
    assert r.returncode == 0, r.stderr
    assert "FAIL by cause, claims (rows): none" in r.stdout and (res / "report.html").is_file()
    man = json.loads((res / "executed" / "00_dyn.manifest.json").read_text())
    assert man["tables"] == ["t_a", "t_b"]
    (res / "tables" / "t_b.csv").unlink()
    r = make("report")
    assert r.returncode != 0 and "notebooks/00_dyn.ipynb: t_b" in r.stderr
    write_notebook(nbs / "00_dyn.ipynb", "raise RuntimeError('deliberately broken')")
    r = make("reproduce")
    assert r.returncode != 0 and "00_dyn.ipynb FAILED" in r.stderr
    text = (res / "REPORT.md").read_text()
    assert text.startswith(report.STALE_MARK + " a make run started rebuilding these results")


# --- every table validated, stale notebooks, the run lock (docs/DECISIONS.md D325-D327) --------------------------
def _manifest_run(out: Path, monkeypatch, nb: str, write) -> None:
    """``write()`` as notebook ``nb``'s run under make (its manifest records what it wrote)."""
    monkeypatch.setenv(report.MANIFEST_ENV, str(out / "executed" / f"{nb}.manifest.json"))
    report.start_manifest()
    write()
    monkeypatch.delenv(report.MANIFEST_ENV)


def test_a_cut_or_edited_table_is_damaged_and_out_of_every_count(tmp_path, monkeypatch, capsys):
    out, nbs = _results(tmp_path / "results"), tmp_path / "nbs"
    nbs.mkdir()
    write_notebook(nbs / "05_area.ipynb", "pass")
    rows = [report.Row(f"table3.x{i}", "q", "mW", 10.0, 10.5, TOL, "Table III") for i in range(8)]
    _manifest_run(out, monkeypatch, "05_area",
                  lambda: report.write_table("table3", rows, profile="default", title="Table III", out=out))
    path = out / "tables" / "table3.csv"
    whole = path.read_bytes()
    assert report.main(["--results", str(out), "--notebooks", str(nbs)]) == 0
    n_pass = int(pd.read_csv(out / "tables" / "summary.csv").query("verdict == 'PASS'")["rows"].sum())
    path.write_bytes(whole[:300])  # cut mid-row: a truncated copy
    assert "cut: its last line is unfinished" in report.damaged_tables(out)["table3.csv"]
    path.write_bytes(whole[:whole.index(b"\n", 300) + 1])  # cut at a line boundary: the row count tells
    assert "rows, but the last run of its notebook wrote 8" in report.damaged_tables(out)["table3.csv"]
    assert report.main(["--results", str(out), "--notebooks", str(nbs)]) == 1
    assert "table3.csv: " in capsys.readouterr().err
    summary = pd.read_csv(out / "tables" / "summary.csv")
    assert int(summary.query("verdict == 'PASS'")["rows"].sum()) == n_pass - 8  # none of its rows is counted
    md = (out / "REPORT.md").read_text()
    assert "`results/tables/table3.csv`: " in md and "table3.x0" not in md
    path.write_bytes(whole.replace(b"PASS", b"PASSED", 1))  # an edited verdict
    assert "has verdict 'PASSED', not one of" in report.damaged_tables(out)["table3.csv"]
    path.write_bytes(whole)
    assert "table3.csv" not in report.damaged_tables(out)


def test_notebooks_older_than_their_inputs_are_stale(tmp_path):
    out, nbs = _results(tmp_path / "results"), tmp_path / "nbs"
    nbs.mkdir()
    write_notebook(nbs / "00_a.ipynb", "pass")
    write_notebook(nbs / "01_b.ipynb", "pass")
    (out / "executed").mkdir()
    for nb in ("00_a", "01_b"):
        (out / "executed" / f"{nb}.ipynb").write_text("{}")
        (out / "executed" / f"{nb}.manifest.json").write_text("{}")
    t = (out / "executed" / "00_a.ipynb").stat().st_mtime
    (out / ".params").write_text("PROFILE=default PAPERMILL_ARGS=\n")
    (out / ".coin").write_text("COIN.json x\n")  # 01 reads COIN (the Makefile's .coin stamp)
    for p in [out / ".params", out / ".coin", *nbs.iterdir()]:
        os.utime(p, (t - 60, t - 60))  # inputs older than the runs: nothing stale
    assert report.stale_notebooks(out, nbs) == {}
    os.utime(nbs / "01_b.ipynb", (t + 60, t + 60))  # a notebook edited after its run
    os.utime(out / ".params", (t + 60, t + 60))  # and parameters changed by a rebuild that stopped
    (out / ".params").write_text("PROFILE=default PAPERMILL_ARGS=-p GRID full\n")
    stale = report.stale_notebooks(out, nbs)
    assert "parameters changed to `PROFILE=default PAPERMILL_ARGS=-p GRID full`" in stale["00_a.ipynb"]
    assert "older than" in stale["01_b.ipynb"] and "01_b.ipynb" in stale["01_b.ipynb"]
    (out / "executed" / ".00_a.running.ipynb").write_text("{}")  # a run killed without cleaning up
    assert "stopped before it finished" in report.stale_notebooks(out, nbs)["00_a.ipynb"]
    md = report.build_report(out, notebook_dir=nbs).read_text()
    assert md.startswith(report.STALE_MARK + " The results of 00_a.ipynb, 01_b.ipynb are older than their inputs")
    assert "`notebooks/01_b.ipynb`: stale (" in md


def test_the_report_is_refused_while_a_run_holds_the_results_folder(built, capsys):
    out, _ = built
    before = (out / "REPORT.md").read_bytes()
    with open(out / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("make reproduce (PROFILE=default, RESULTS=results) (pid 1)\n")
        held.flush()
        assert report.main(["--results", str(out), "--mark-stale", "x"]) == 75
        assert report.main(["--results", str(out)]) == 75
    err = capsys.readouterr().err
    assert "refused: make reproduce (PROFILE=default, RESULTS=results) (pid 1) is running" in err
    assert (out / "REPORT.md").read_bytes() == before
    os.environ[_io.RUN_LOCK_ENV] = str((out / ".lock").resolve())  # a step of that very run (scripts/locked.py)
    try:
        with open(out / ".lock", "a+") as held:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            assert report.main(["--results", str(out), "--allow-missing"]) == 0
    finally:
        del os.environ[_io.RUN_LOCK_ENV]


def test_a_live_session_never_writes_into_the_folder_make_owns(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(notebook.HEADLESS_ENV, raising=False)
    monkeypatch.delenv("VREX_RESULTS_DIR", raising=False)
    made = tmp_path / "res"
    made.mkdir()
    (made / ".params").write_text("PROFILE=default PAPERMILL_ARGS=\n")  # `make reproduce` filled it
    mine = tmp_path / "mine"
    assert notebook.results_folder(str(made)) == made  # plain Python (a script, the tests)
    monkeypatch.setattr(notebook, "_ipython", lambda: _FakeShell(":memory:"))  # papermill: make's own run
    assert notebook.results_folder(str(made)) == made
    monkeypatch.setattr(notebook, "_ipython", lambda: _FakeShell(Path("/home/u/.ipython/history.sqlite")))  # live
    assert notebook.results_folder(str(made)) == made / notebook.LIVE_SUBDIR
    assert "live session: results go to" in capsys.readouterr().out
    assert notebook.results_folder("") == REPO / "results" / notebook.LIVE_SUBDIR
    assert notebook.results_folder(str(mine)) == mine  # a folder of the user's own choosing


def test_a_results_folder_that_does_not_exist_is_not_created_by_the_report(tmp_path, capsys):
    typo = tmp_path / "resluts"
    assert report.main(["--results", str(typo)]) == 2
    assert f"--results {typo} does not exist" in capsys.readouterr().err and not typo.exists()


class _Ids(HTMLParser):
    """Every id and href of a page, each figure's children, and the text of every figure's caption."""

    def __init__(self):
        super().__init__()
        self.ids, self.hrefs, self.figures, self._fig = [], [], [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "figure":
            self._fig = dict(tags=[], hrefs=[], caption="")
        elif self._fig is not None:
            self._fig["tags"].append(tag)
            if tag == "a":
                self._fig["hrefs"].append(a.get("href", ""))
            if tag == "figcaption":
                self._fig["in_caption"] = True

    def handle_data(self, data):
        if self._fig is not None and self._fig.get("in_caption"):
            self._fig["caption"] += data

    def handle_endtag(self, tag):
        if tag == "figcaption" and self._fig is not None:
            self._fig["in_caption"] = False
        if tag == "figure" and self._fig is not None:
            self.figures.append(self._fig)
            self._fig = None


def _page_ids(out: Path) -> _Ids:
    p = _Ids()
    p.feed((out / report.REPORT_HTML).read_text())
    return p


def test_report_html_ids_are_unique_and_every_cause_note_is_linked(built):
    """No id twice (Appendix B repeats the body's table titles as headings), and each *Cause details* entry is
    reached from the row citing it (the row's details element links to it; it links back to that row)."""
    out, md = built
    p = _page_ids(out)
    dup = sorted({i for i in p.ids if p.ids.count(i) > 1})
    assert not dup, f"duplicate ids: {dup}"
    notes = [i for i in p.ids if i.startswith("note-")]
    assert notes, "the fixture's FAIL rows cite cause notes"
    assert all(f"#{n}" in p.hrefs for n in notes), [n for n in notes if f"#{n}" not in p.hrefs]
    assert all(h[1:] in p.ids for h in p.hrefs if h.startswith("#")), "a link to an anchor that does not exist"
    assert any(h.startswith("#ref-") for h in p.hrefs)
    # Appendix B's heading repeats the Table II section's title, and gets its own id
    assert md.count("### Table II — retrieval ratio") == 2


def test_report_tables_name_both_verdict_columns_and_keep_their_headers_in_view(built):
    out, md = built
    head = next(ln for ln in md.splitlines() if ln.startswith("| claim | printed in |"))
    cols = [c.strip() for c in head.strip("|").split("|")]
    assert "verdict, paper-stated workload" in cols and "verdict, measured workload" in cols
    assert "verdict" not in cols  # no bare 'verdict' column beside another
    page = (out / report.REPORT_HTML).read_text()
    style = page[page.index("<style>"):page.index("</style>")]
    # sticky header cells need a scroll box of bounded height (else the page, not the box, scrolls)
    assert re.search(r"\.scroll \{[^}]*max-height:", style) and re.search(r"th \{[^}]*position: sticky", style)


def test_every_figure_is_a_captioned_figure_linked_to_its_full_size_png(built):
    out, md = built
    p = _page_ids(out)
    pngs = sorted(f.name for f in (out / "figures").glob("*.png"))
    assert len(p.figures) == len(pngs)
    for f in p.figures:
        assert "img" in f["tags"] and "figcaption" in f["tags"]
        assert len(f["caption"].strip()) > 20 and any(h.startswith("figures/") for h in f["hrefs"]), f
    assert sorted(h.split("/")[-1] for f in p.figures for h in f["hrefs"] if h.startswith("figures/")) == pngs
    assert "Fig. 13(a), edge" in md and "[Full size](figures/fig13a.png)" in md


def test_displayed_scale_follows_the_page_width(tmp_path):
    from vrex_lib.report import render

    width = render.content_width_px(1280)
    assert 1100 < width < 1280
    paths = {}
    for inches, ok in ((10, True), (26, False)):
        fig, ax = plt.subplots(figsize=(inches, 2))
        ax.plot([0, 1])
        assert report.write_figure(f"w{inches}", fig, out=tmp_path) is None  # a cell ending with it shows nothing
        paths[inches] = report.figure_path(f"w{inches}", tmp_path)
        plt.close(fig)
        scale = render.displayed_scale(paths[inches])
        assert (scale >= render.MIN_FIGURE_SCALE) is ok, (inches, scale)
    assert render.displayed_scale(paths[10], viewport_px=4000) == 1.0  # never enlarged
    (tmp_path / "x.png").write_bytes(b"GIF89a....................")
    with pytest.raises(ValueError, match="not a PNG"):
        render.png_width_px(tmp_path / "x.png")


def test_every_figure_a_notebook_writes_has_its_own_caption(tmp_path):
    """Each figure id in the notebooks' write_figure calls has a caption saying what its marks are (none falls
    back to the generic line), and no caption is kept for a figure no notebook writes."""
    from vrex_lib.report import captions

    written = {f for nb in report.expected_outputs(tmp_path, REPO / "notebooks").values() for f in nb["figures"]}
    assert len(written) > 30
    assert not written - set(captions.CAPTIONS), sorted(written - set(captions.CAPTIONS))
    assert not set(captions.CAPTIONS) - written, sorted(set(captions.CAPTIONS) - written)
    assert all(len(c) <= 200 and "\n" not in c and "|" not in c for c in captions.CAPTIONS.values())
    assert captions.caption("zz_new", "42_x.ipynb") == "Figure `zz_new`, drawn by `notebooks/42_x.ipynb`."
