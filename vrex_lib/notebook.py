"""The two lines every notebook starts with: validate the profile, seed, pick the results folder.

    ctx = vrex_lib.notebook.setup(PROFILE, RESULTS_DIR)
    ctx.profile, ctx.cfg, ctx.out   # 'default', its Profile record (vrex_lib.profiles), Path to results/

A notebook runs either live (JupyterLab: widgets, progress bars) or headless (papermill, ``nbconvert
--execute``, ``make reproduce``: figures stored as static images, no widgets, no progress bars); :func:`headless`
tells which, and :func:`show` / :func:`panel` draw each figure once in either.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import ipywidgets
from IPython import get_ipython
from IPython.display import display
from tqdm import notebook as tqdm_notebook, std as tqdm_std

from . import _io, report
from .config import (REPO_ROOT, Profile, arg_name, profile_config, results_dir, seed_everything,
                     torch_threads, use_notebook_arg_names)

if TYPE_CHECKING:  # matplotlib is imported when a notebook draws, not at import
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Context:
    profile: str
    cfg: Profile
    out: Path


#: Forces the mode: 1 = headless (the Makefile sets it for papermill), 0 = live; unset = detect.
HEADLESS_ENV = "VREX_HEADLESS"


#: Where a live session (JupyterLab) writes inside a folder that `make reproduce` owns (docs/DECISIONS.md D76).
LIVE_SUBDIR = "live"


def results_folder(results: str | os.PathLike | None) -> Path:
    """The folder a notebook writes: ``results`` (RESULTS_DIR), else ``$VREX_RESULTS_DIR``, else ``results/``. A
    live session (JupyterLab, not papermill) writes into ``results/live/`` by default and never into a folder
    `make reproduce` filled (one holding its ``.params`` stamp), but into that folder's ``live/``: the report of a
    results folder reads only what make wrote there, never a session's numbers."""
    given = results or os.environ.get("VREX_RESULTS_DIR")
    folder = Path(given or REPO_ROOT / "results")
    if _interactive() and (not given or (folder / ".params").is_file()):
        shown = folder.relative_to(REPO_ROOT) if folder.is_relative_to(REPO_ROOT) else Path(folder.name)
        n = link_reproduce_inputs(folder, folder / LIVE_SUBDIR)
        print(f"live session: results go to {shown / LIVE_SUBDIR}, not {shown}, which `make reproduce` owns "
              f"(docs/DECISIONS.md D76); {n} of its inputs and caches are read from there" if n else
              f"live session: results go to {shown / LIVE_SUBDIR}, not {shown}, which `make reproduce` owns "
              "(docs/DECISIONS.md D76)")
        return folder / LIVE_SUBDIR
    return folder


#: The folders of a results folder that hold inputs and caches a later run reuses (the workload file, the
#: retrieval study's and the design space's caches, CACTI and InfiniGen caches, 04's yosys summary for 05).
REUSED_SUBDIRS = ("data", "cache", "hdl")


def link_reproduce_inputs(source: Path, live: Path) -> int:
    """Make what `make reproduce` computed in ``source`` readable from the live folder ``live`` without copying it
    (docs/DECISIONS.md D462): each file under :data:`REUSED_SUBDIRS` gets a relative symbolic link at the same
    place under ``live`` unless ``live`` holds that file already. Every write of a result is atomic (a temporary
    file renamed over the name, :mod:`vrex_lib._io`), so a live run that recomputes a cache replaces the link in
    ``live`` and never writes through it into ``source``. Returns the number of links made."""
    made = 0
    for sub in REUSED_SUBDIRS:
        base = source / sub
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if not path.is_file() or path.is_symlink() or path.name.startswith("."):
                continue
            link = live / path.relative_to(source)
            if link.exists() or link.is_symlink():
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(path, link.parent))
            made += 1
    return made


def setup(profile: str, results: str | None = None, seed: int | None = None) -> Context:
    use_notebook_arg_names()  # error messages name PROFILE, VISION_PATH, ... rather than CLI flags
    if headless():
        _quiet_progress_bars()
    cfg = profile_config(profile)
    folder = results_folder(results)
    # Checked before any expensive cell runs, not at the first table write.
    _io.check_writable_dir(folder, arg_name("--results-dir"))
    out = results_dir(folder)
    # Later report.* calls default to this folder too.
    os.environ["VREX_RESULTS_DIR"] = str(out)
    report.start_manifest()  # under make: this run's tables and figures are recorded afresh
    seed_everything(cfg.seed if seed is None else seed)
    _set_threads()
    try:
        import matplotlib

        # In any kernel (live or papermill) the inline backend stores figures as images; Agg only outside one.
        matplotlib.use("Agg") if _ipython() is None else None
        import seaborn as sns

        sns.set_theme(context="notebook", style="whitegrid")
    except ImportError:  # pragma: no cover
        pass
    return Context(profile, cfg, out)


def _set_threads() -> None:
    """One torch thread unless $VREX_THREADS says otherwise.

    The default/smoke models are small (SmolLM2-135M, hidden 576): on a 2-core machine a second thread buys
    little and costs a lot under any background load (measured 8-10x slower per step), and a fixed thread
    count keeps floating-point reductions -- hence the tables -- identical from run to run.
    """
    n = torch_threads()
    try:
        import torch
    except ImportError:  # pragma: no cover
        return
    torch.set_num_threads(n)


def _quiet_progress_bars() -> None:
    """No progress bars in a headless kernel: papermill stores a notebook bar as its first frame ("0%| 0/272",
    the GGUF loader's) because the widget's updates never reach the saved file. A bar whose caller asks for it
    (``disable=False``) is still drawn. tqdm's console bar reads ``$TQDM_DISABLE`` only when tqdm is first
    imported (kept for subprocesses) and its notebook bar ignores it (it passes ``disable=False`` itself), so the
    default of both classes is set here."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    for cls in (tqdm_std.tqdm, tqdm_notebook.tqdm_notebook):
        if not cls.__dict__.get("_vrex_quiet"):
            cls.__init__ = functools.partialmethod(cls.__init__, disable=True)
            cls._vrex_quiet = True


def _ipython():
    """The running IPython kernel's shell, or None (plain Python, or IPython without a kernel)."""
    ip = get_ipython()
    return ip if ip is not None and "IPKernelApp" in ip.config else None


def headless() -> bool:
    """True when this notebook runs without a live frontend: papermill, ``nbconvert --execute`` or any nbclient
    run (they start the kernel with ``--HistoryManager.hist_file=:memory:``, which JupyterLab never does), or
    ``$VREX_HEADLESS=1`` (set by ``make reproduce``). ``$VREX_HEADLESS=0`` forces live mode. False outside a kernel."""
    forced = os.environ.get(HEADLESS_ENV, "").strip()
    if forced not in ("", "0", "1"):
        raise ValueError(f"${HEADLESS_ENV}={forced!r}: use 1 (static figures, no widgets) or 0 (live widgets), "
                         "or unset it to detect papermill")
    ip = _ipython()
    if ip is None:
        return False
    if forced:
        return forced == "1"
    return str(getattr(getattr(ip, "history_manager", None), "hist_file", "")) == ":memory:"


def _interactive() -> bool:
    """True in a live Jupyter kernel (widgets work); False under papermill/nbconvert or plain Python."""
    return _ipython() is not None and not headless()


def show(fig: "Figure") -> None:
    """Display ``fig`` once and close it: the inline backend would otherwise show it again when the cell (or an
    ``interact`` callback) ends. Outside a kernel it is only closed."""
    import matplotlib.pyplot as plt  # not at the top: setup() picks the backend before pyplot is imported

    if _ipython() is not None:
        display(fig)
    plt.close(fig)


def panel(draw: Callable[..., object], static: Sequence[Mapping], **controls) -> None:
    """An interactive figure: live, ``ipywidgets.interact(draw, **controls)`` with each redraw shown once; headless
    (papermill), ``draw(**kw)`` for each ``kw`` in ``static``, shown as static images. ``draw`` returns the
    matplotlib figure it made."""
    if not _interactive():
        for kw in static:
            show(draw(**kw))
        return

    def redraw(**kw) -> None:  # returns None: interact would display a returned figure a second time
        show(draw(**kw))

    ipywidgets.interact(redraw, **controls)
