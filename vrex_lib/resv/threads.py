"""One-thread sections for ReSV's tiny, latency-bound array ops: torch's intra-op pool and NumPy's OpenBLAS.

On a busy CPU, waking a thread pool costs milliseconds per op (measured on the shared 2-core box: ~9 ms for a
1600-element torch min, 60-80 ms for a [33, 64] x [64, 690] NumPy matmul with OpenBLAS's 2 threads, 0.3 ms on one;
docs/DECISIONS.md D360). torch exposes its thread count; NumPy does not, so the OpenBLAS that the NumPy wheels
bundle (``numpy.libs/*openblas*``) is reached through ctypes. Without it (another BLAS) only torch's is set.
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from collections.abc import Callable, Iterator

import numpy as np
import torch


def _find_openblas_threads() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """(get, set) of the OpenBLAS bundled with NumPy (the wheels' ``scipy_openblas``), or None if not found."""
    libdir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libdir, "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""), ("openblas", "64_"),
                               ("openblas", "")):
            get, set_ = (getattr(lib, f"{prefix}_{n}_num_threads{suffix}", None) for n in ("get", "set"))
            if get is not None and set_ is not None:
                return get, set_
    return None


_OPENBLAS = _find_openblas_threads()


def openblas_threads() -> int | None:
    """OpenBLAS's current thread count, or None when NumPy's OpenBLAS cannot be reached."""
    return None if _OPENBLAS is None else int(_OPENBLAS[0]())


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run the enclosed array ops on one thread, torch's and NumPy's BLAS alike; both counts are restored after."""
    n = torch.get_num_threads()
    nb = int(_OPENBLAS[0]()) if _OPENBLAS is not None else 1
    if n != 1:
        torch.set_num_threads(1)
    if nb != 1:
        _OPENBLAS[1](1)
    try:
        yield
    finally:
        if n != 1:
            torch.set_num_threads(n)
        if nb != 1:
            _OPENBLAS[1](nb)
