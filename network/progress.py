"""A minimal progress indicator for slow steps (engine builds, large file loads), written to stderr.

    with progress("Building engine"):        # stderr: "Building engine ... done in 12.3 s"
        ...

The first part is written (and flushed) when the step starts, the rest when it ends: " done in 12.3 s", or
" failed" followed by a line break when the step raises (the exception then reports the problem itself).
Nothing is written when `enabled` is False. Plain Python, no TensorRT.
"""

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import TextIO

from common.limits import LARGE_FILE_BYTES  # loads of files at least this large show progress


def human_bytes(size: int) -> str:
    """1536 -> '1.5 KiB', 3 << 30 -> '3.0 GiB'."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


@contextlib.contextmanager
def progress(message: str, *, enabled: bool = True, stream: TextIO | None = None) -> Iterator[None]:
    """Writes "<message> ..." when the block starts and " done in <seconds> s" (or " failed") when it ends."""
    if not enabled:
        yield
        return
    out = stream if stream is not None else sys.stderr
    out.write(f"{message} ...")
    out.flush()
    start = time.perf_counter()
    try:
        yield
    except BaseException:
        out.write(" failed\n")
        out.flush()
        raise
    out.write(f" done in {time.perf_counter() - start:.1f} s\n")
    out.flush()


def file_load_progress(path: str, option: str) -> contextlib.AbstractContextManager[None]:
    """progress("Reading <option> <path> (<size>)") for a file of at least LARGE_FILE_BYTES, else a no-op."""
    try:
        size = os.stat(path).st_size
    except OSError:  # the loader itself reports a missing or unreadable file
        return contextlib.nullcontext()
    if size < LARGE_FILE_BYTES:
        return contextlib.nullcontext()
    return progress(f"Reading {option} {path} ({human_bytes(size)})")
