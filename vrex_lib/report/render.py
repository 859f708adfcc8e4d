"""Writing ``results/REPORT.md``, ``results/report.html`` and ``results/tables/summary.csv`` from the templates
in ``vrex_lib/report/templates`` (Jinja2); the HTML page is mistune's rendering of the same Markdown, figures
inlined as data URIs, so the two never differ in content.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html as _html
import os
import re
from collections.abc import Callable
from pathlib import Path

import jinja2
import mistune
from mistune.renderers.html import HTMLRenderer

from .. import _io
from ..config import results_dir
from . import content
from .tables import SUMMARY_ID

TEMPLATES = Path(__file__).resolve().parent / "templates"
REPORT_MD, REPORT_HTML = "REPORT.md", "report.html"
TITLE = "vrex reproduction report"
#: The first line of the banner :func:`mark_stale` puts on top of a report that no longer describes the results.
STALE_MARK = "> **Stale.**"
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                          autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",)),
                          trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
_ENV.filters["slug"] = content.slug


#: The page's layout in CSS pixels (the template's style sheet reads these): the widest the body gets, its side
#: padding, and the scroll bar a desktop browser takes from the viewport. A figure's displayed scale follows from
#: them (:func:`displayed_scale`).
PAGE_MAX_WIDTH_PX, PAGE_PADDING_PX, SCROLLBAR_PX = 1400, 16, 15
#: The scale every figure must keep at a 1280-px-wide window (tests check it on the smoke chain's figures).
MIN_FIGURE_SCALE, REVIEW_VIEWPORT_PX = 0.7, 1280


def content_width_px(viewport_px: int = REVIEW_VIEWPORT_PX) -> int:
    """The width a figure may take on report.html in a window ``viewport_px`` wide (body content box)."""
    return min(PAGE_MAX_WIDTH_PX, viewport_px - SCROLLBAR_PX - 2 * PAGE_PADDING_PX)


def png_width_px(path: str | os.PathLike) -> int:
    """A PNG's width in pixels, from its IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{Path(path).name}: not a PNG file")
    return int.from_bytes(head[16:20], "big")


def displayed_scale(path: str | os.PathLike, viewport_px: int = REVIEW_VIEWPORT_PX) -> float:
    """The fraction of its pixel size at which report.html shows the figure ``path`` (images shrink to the content
    width, never grow): 1.0 when it fits."""
    return min(1.0, content_width_px(viewport_px) / png_width_px(path))


class _InliningRenderer(HTMLRenderer):
    """mistune's HTML, with every image under the results folder inlined as a data URI (one self-contained page),
    an image alone in its paragraph shown as a ``<figure>`` whose caption is the text after it, and every heading
    id unique."""

    def __init__(self, base: Path):
        super().__init__(escape=True)
        self._base = base.resolve()
        self._ids: dict[str, int] = {}

    def heading(self, text: str, level: int, **attrs) -> str:
        """Every heading with the id GitHub gives it (:func:`content.slug`; a repeated one gets ``-1``, ``-2``, as
        GitHub numbers them), so the contents' links work here too and no id is used twice."""
        base = content.slug(_html.unescape(text))
        n = self._ids.get(base, 0)
        self._ids[base] = n + 1
        return f'<h{level} id="{base if n == 0 else f"{base}-{n}"}">{text}</h{level}>\n'

    def paragraph(self, text: str) -> str:
        m = _FIGURE_PARA.match(text)
        if m is None:
            return super().paragraph(text)
        return f'<figure>{m.group("img")}<figcaption>{m.group("caption").strip()}</figcaption></figure>\n'

    def image(self, text: str, url: str, title: str | None = None) -> str:
        path = (self._base / url).resolve()
        if path.suffix.lower() == ".png" and path.is_file() and path.is_relative_to(self._base):
            url = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
        return super().image(text, url, title)


def render_markdown(ctx: dict) -> str:
    """REPORT.md's text for a :func:`vrex_lib.report.content.context`."""
    return _ENV.get_template("report.md.j2").render(**ctx)


_FIGURE_PARA = re.compile(r"^(?P<img><img [^>]*/?>)\s*(?P<caption>\S.*)$", re.S)
_NOTE_ANCHOR = re.compile(r"&lt;a id=&quot;(note-\d+)&quot;&gt;&lt;/a&gt;")
_NOTE_LINK = re.compile(r'<a href="#note-(\d+)">\[(\d+)\]</a>')


def render_html(markdown: str, base: str | os.PathLike, notes: list[dict] | None = None) -> str:
    """A self-contained HTML page of ``markdown`` (REPORT.md's text); images are read from under ``base``. Every
    table sits in its own horizontal scroll box; with ``notes`` (:func:`content.context`'s), each ``[n]`` link of a
    cause cell opens its text and check id in place (a details element)."""
    md = mistune.create_markdown(renderer=_InliningRenderer(Path(base)), plugins=["table"])
    body = md(markdown)
    body = body.replace("<table>", '<div class="scroll"><table>').replace("</table>", "</table></div>")
    by = {int(n["n"]): n for n in notes or ()}
    first: set[int] = set()

    def details(m: re.Match) -> str:
        """The first use of a note gets the id its *Cause details* entry links back to; each use links to it."""
        k = int(m.group(1))
        n = by.get(k)
        if n is None:
            return m.group(0)
        anchor = "" if k in first else f' id="ref-{k}"'
        first.add(k)
        check = f"<code>{_html.escape(n['check'])}</code>: " if n["check"] else ""
        return (f'<details{anchor}><summary>[{m.group(2)}]</summary>{check}'
                f'{_html.escape(n["text"].replace(chr(92) + "|", "|"))} <a href="#note-{k}">(cause details)</a>'
                "</details>")
    body = _NOTE_LINK.sub(details, body)

    def anchor(m: re.Match) -> str:
        k = int(m.group(1).removeprefix("note-"))
        back = f' <a href="#ref-{k}" title="the first row citing it">↑</a>' if k in first else ""
        return f'<a id="note-{k}"></a>' + back
    body = _NOTE_ANCHOR.sub(anchor, body)
    return _ENV.get_template("report.html.j2").render(
        title=TITLE, body=body, max_width=PAGE_MAX_WIDTH_PX, padding=PAGE_PADDING_PX)


def _starts_with(*heads: str) -> Callable[[Path], tuple[bool | None, str]]:
    """An :class:`~vrex_lib._io.OutputKind` reader: a text file whose first KiB holds one of ``heads``."""
    def read(path: Path) -> tuple[bool | None, str]:
        try:
            with open(path, "rb") as f:
                head = f.read(1024).decode("utf-8", "replace")
        except OSError as err:
            return None, f"cannot be read: {err.strerror or err}"
        return (True, "") if any(h in head for h in heads) else (None, f"it does not start like one ({heads[0]!r})")
    return read


#: The files the report writes, each refused when it holds something else (docs/DECISIONS.md D320).
OUTPUTS = {REPORT_MD: _io.OutputKind("vrex report", "report", _starts_with(f"# {TITLE}", STALE_MARK)),
           REPORT_HTML: _io.OutputKind("vrex report page", "report", _starts_with(f"<title>{TITLE}</title>")),
           f"tables/{SUMMARY_ID}.csv": _io.OutputKind("vrex verdict count", "counts",
                                                      _starts_with("verdict,cause,claims,rows,tables",
                                                                   "verdict,cause,rows,tables"))}


def check_outputs(out: str | os.PathLike | None = None, *, force: bool = False) -> None:
    """Refuse to write the report into a folder whose REPORT.md, report.html or tables/summary.csv holds something
    else (a user's notes), unless ``force``."""
    base = results_dir(out)
    for name, kind in OUTPUTS.items():
        if (base / name).is_dir():  # the folder is the user's, not --results' fault: name it and the fix
            raise _io.OutputRefused(f"{base / name} is a folder, but the report writes its file {name} there: "
                                    "move or remove that folder, then build the report again")
        _io.check_output(base / name, kind, flag="--results", force=force)


def build_report(out: str | os.PathLike | None = None, *,
                 notebook_dir: str | os.PathLike | None = None, force: bool = False) -> Path:
    """Collect every ``results/tables/*.csv`` and ``results/figures/*.png`` into ``results/REPORT.md`` (paper order,
    headline claims first), the same page as ``results/report.html`` and the verdict counts per cause as
    ``results/tables/summary.csv``; returns REPORT.md's path.

    The report opens with what is incomplete (absent tables and figures, failed notebooks, damaged tables, tables
    of several profiles, stale notebooks), so a partial results folder never reads as a complete one; with stale
    notebooks it also carries the *Stale* banner. A REPORT.md, report.html or summary.csv that is not the
    report's own is refused unless ``force``.
    """
    base = results_dir(out)
    check_outputs(base, force=force)
    ctx = content.context(base, notebook_dir)
    text = render_markdown(ctx)
    if ctx["stale"]:
        text = _banner(f"The results of {', '.join(ctx['stale'])} are older than their inputs or were made with "
                       "other parameters (listed under *Incomplete*)", rebuilding=False) + "\n\n" + text
    _io.write_bytes(base / "tables" / f"{SUMMARY_ID}.csv", ctx["summary"].to_csv(index=False).encode())
    _io.write_text(base / REPORT_HTML, render_html(text, base, ctx["notes"]))
    return _io.write_text(base / REPORT_MD, text)


def markdown_section(text: str, heading: str) -> str:
    """The ``## heading...`` section of REPORT.md's ``text`` (heading line included, up to the next ``#``/``##``
    heading); '' when there is none."""
    out: list[str] = []
    for line in text.splitlines():
        if out and (line.startswith("## ") or line.startswith("# ")):
            break
        if out or line.startswith(f"## {heading}"):
            out.append(line)
    return "\n".join(out).strip() + ("\n" if out else "")


def _without_banner(text: str) -> str:
    if not text.startswith(STALE_MARK):
        return text
    _, _, rest = text.partition("\n\n")
    return rest


def _banner(why: str, rebuilding: bool = True) -> str:
    """The *stale* banner: the report no longer describes the results' inputs (``rebuilding``: a rebuild started)."""
    if not rebuilding:
        return f"{STALE_MARK} {why}: this report describes those results as they are. Run `make reproduce`."
    when = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return (f"{STALE_MARK} {why} (since {when}); this report describes the results before it, and is rewritten "
            "when the rebuild completes. If no rebuild is running, it failed or was stopped: a failed notebook is "
            "kept as `results/executed/<notebook>.FAILED.ipynb`. Run `make reproduce`.")


def mark_stale(out: str | os.PathLike | None = None, why: str = "") -> list[Path]:
    """Put a *stale* banner on top of an existing REPORT.md and report.html: the results are being rebuilt (or a
    rebuild failed) and the report describes the previous ones. The next :func:`build_report` removes it."""
    base = results_dir(out)
    md = base / REPORT_MD
    if not md.is_file():
        return []
    check_outputs(base)
    text = _banner(why or "The results are being rebuilt") + "\n\n" + _without_banner(md.read_text())
    return [_io.write_text(md, text), _io.write_text(base / REPORT_HTML, render_html(text, base))]
