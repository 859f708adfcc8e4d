"""Pack the evaluated state for an archive: `make release` (docs/DECISIONS.md D460).

    python scripts/release.py --results results --notebooks notebooks --out dist

writes into ``--out``:

* ``vrex-<version>-src.tar.gz``: ``git archive`` of HEAD (the committed source, prefix ``vrex-<version>/``);
* ``vrex-<version>-results-default.tar.gz``: the default profile's results folder (``results/`` as `make reproduce`
  wrote it: REPORT.md, report.html, tables, figures, executed notebooks, the workload file), without a live
  session's ``live/``, Jupyter checkpoints, the run lock or a half-written notebook;
* ``CALIBRATION.txt``: the version, the commit, the machine's calibration line (``vrex_lib.envcheck``);
* ``SHA256SUMS``: one ``<sha256>  <file>`` line per file above, checked with ``sha256sum -c SHA256SUMS``.

Refused (one line on stderr naming the fix, exit 2, nothing written) when the results are not one complete,
current default-profile run (no REPORT.md, a *Stale* banner, another profile, absent / failed / stale notebooks)
or when tracked files differ from HEAD (the source archive would not be what produced the results).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PROFILE = "default"
#: Names never packed from the results folder: a live session's writes, Jupyter's checkpoints, make's run lock and
#: a notebook still being written (``.<nb>.running.ipynb``).
SKIP_NAMES = ("live", ".ipynb_checkpoints", ".lock")


class ReleaseError(ValueError):
    """Why no release is written; the message is the line to print."""


def version() -> str:
    import vrex_lib

    return vrex_lib.__version__


def _git(*args: str) -> str:
    r = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    if r.returncode:
        raise ReleaseError(f"release: `git {' '.join(args)}` failed ({r.stderr.strip() or r.returncode}); "
                           "run `make release` in a git checkout of vrex")
    return r.stdout


def check_source() -> str:
    """HEAD's commit id; refused when a tracked file differs from HEAD."""
    dirty = _git("status", "--porcelain", "--untracked-files=no").splitlines()
    if dirty:
        raise ReleaseError(f"release: {len(dirty)} tracked file(s) differ from HEAD (e.g. {dirty[0][3:]}): commit "
                           "or stash them, rerun `make reproduce`, then `make release` (nothing was written)")
    return _git("rev-parse", "HEAD").strip()


def check_results(results: Path, notebooks: Path) -> None:
    """Refuse results that are not one complete, current run of the default profile."""
    from vrex_lib import report
    from vrex_lib.report import content, stale

    shown = _shown(results)
    md = results / report.REPORT_MD
    if not md.is_file():
        raise ReleaseError(f"release: {shown}/REPORT.md is missing: run `make reproduce` (PROFILE={PROFILE}) first "
                           "(nothing was written)")
    params = results / stale.PARAMS_FILE
    said = params.read_text().split() if params.is_file() else []
    if f"PROFILE={PROFILE}" not in said:
        got = next((w for w in said if w.startswith("PROFILE=")), "no .params stamp")
        raise ReleaseError(f"release: {shown} holds {got}, not PROFILE={PROFILE}: run `make reproduce` into it, or "
                           "name the default profile's folder with RESULTS=... (nothing was written)")
    if md.read_text().startswith(report.STALE_MARK):
        raise ReleaseError(f"release: {shown}/REPORT.md is marked stale: run `make reproduce` to finish it "
                           "(nothing was written)")
    gaps = content.incomplete(results, notebooks)
    if gaps:
        raise ReleaseError(f"release: {shown} is not one complete, current run ({len(gaps)} gap(s), e.g. "
                           f"{gaps[0]}): run `make reproduce` (nothing was written)")


def _shown(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return p.name


def _packed(results: Path) -> list[Path]:
    out = []
    for p in sorted(results.rglob("*")):
        rel = p.relative_to(results)
        if any(part in SKIP_NAMES for part in rel.parts) or p.name.endswith(".running.ipynb") or p.is_dir():
            continue
        out.append(p)
    return out


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def results_archive(results: Path, prefix: str) -> bytes:
    """The results folder as a gzipped tar (sorted entries, owners dropped, gzip time 0: the same folder packs to
    the same bytes)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for p in _packed(results):
            info = tar.gettarinfo(str(p), arcname=f"{prefix}/{p.relative_to(results).as_posix()}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(p, "rb") as f:
                tar.addfile(info, f)
    return buf.getvalue()


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def release(results: Path, notebooks: Path, out: Path, calibration: str | None = None) -> list[Path]:
    """Check, then write the archives, CALIBRATION.txt and SHA256SUMS into ``out``; returns the files written."""
    commit = check_source()
    check_results(results, notebooks)
    v = version()
    out.mkdir(parents=True, exist_ok=True)
    src = out / f"vrex-{v}-src.tar.gz"
    tmp = src.with_name(f".{src.name}.tmp")
    _git("archive", "--format=tar.gz", f"--prefix=vrex-{v}/", "-o", str(tmp), "HEAD")
    os.replace(tmp, src)
    res = out / f"vrex-{v}-results-{PROFILE}.tar.gz"
    _write_atomic(res, results_archive(results, f"vrex-{v}-results-{PROFILE}"))
    if calibration is None:
        from vrex_lib.envcheck import calibration_line

        calibration = calibration_line()
    cal = out / "CALIBRATION.txt"
    _write_atomic(cal, (f"vrex {v}, commit {commit} (tag v{v}), profile {PROFILE}\n{calibration}\n").encode())
    files = [src, res, cal]
    sums = out / "SHA256SUMS"
    _write_atomic(sums, "".join(f"{sha256(f)}  {f.name}\n" for f in files).encode())
    return [*files, sums]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results", help="the default profile's results folder (RESULTS)")
    ap.add_argument("--notebooks", default="notebooks", help="the notebooks folder (NOTEBOOK_DIR)")
    ap.add_argument("--out", default="dist", help="where the archives and SHA256SUMS go (DIST)")
    a = ap.parse_args(argv)
    try:
        files = release(Path(a.results), Path(a.notebooks), Path(a.out))
    except ReleaseError as err:
        print(err, file=sys.stderr)
        return 2
    for f in files:
        print(f"release: wrote {_shown(f)}")
    print(f"release: check with `cd {_shown(Path(a.out))} && sha256sum -c SHA256SUMS`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
