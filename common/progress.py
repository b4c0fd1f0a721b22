"""Progress of slow steps (reading, validating, the reference, building, running), written to stderr.

    with progress("Building engine", enabled=show):            # "Building engine ... done in 12.3 s"
        ...
    with progress("Drawing the graph", enabled=show) as advance:
        for part in parts:
            ...
            advance(done_fraction)                              # a bar, on a terminal

On a terminal the line is live: it shows a bar while `advance` reports the fraction done, and a step that
ends within QUICK_STEP_S is erased, so only slow steps leave a line. Elsewhere (a file, a pipe: `enabled`
there comes from -v) each step writes "<message> ..." when it starts and " done in <seconds> s" when it ends.
A step that raises ends its line there (erased on a terminal), so that the error the exception reports is
the one line of the failure. Nothing is written when `enabled` is False. Standard library only.
"""

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from common.limits import LARGE_FILE_BYTES  # loads of files at least this large show progress
from common.text import shown_path

QUICK_STEP_S = 1.0  # a step that ends sooner leaves no line on a terminal
BAR_WIDTH = 30
REDRAW_S = 0.1  # at most ten redraws of a bar per second
_ERASE_LINE = "\r\x1b[K"


def human_bytes(size: int) -> str:
    """1536 -> '1.5 KiB', 3 << 30 -> '3.0 GiB'."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def shows_progress(verbose: bool, stream: TextIO | None = None) -> bool:
    """Whether the command line reports progress: on a terminal always, elsewhere only with -v."""
    out = stream if stream is not None else sys.stderr
    return verbose or _is_terminal(out)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """0.42 -> '[############------------------]  42%'."""
    fraction = min(max(fraction, 0.0), 1.0)
    filled = int(fraction * width)
    return f"[{'#' * filled}{'-' * (width - filled)}] {fraction:4.0%}"


@contextlib.contextmanager
def progress(message: str, *, enabled: bool = True, stream: TextIO | None = None) -> Iterator[Callable[[float], None]]:
    """Reports the step `message` on `stream` (stderr); yields advance(fraction done) for a bar."""
    if not enabled:
        yield lambda fraction: None
        return
    out = stream if stream is not None else sys.stderr
    live = _is_terminal(out)
    start = last_draw = time.perf_counter()

    def advance(fraction: float) -> None:
        nonlocal last_draw
        now = time.perf_counter()
        if live and now - last_draw >= REDRAW_S:
            last_draw = now
            out.write(f"{_ERASE_LINE}{message} {bar(fraction)}")
            out.flush()

    try:  # the line is begun inside: an interrupt right after it is written still ends it
        out.write(f"{message} ...")
        out.flush()
        yield advance
    except BaseException:
        out.write(_ERASE_LINE if live else "\n")
        out.flush()
        raise
    elapsed = time.perf_counter() - start
    if live and elapsed < QUICK_STEP_S:
        out.write(_ERASE_LINE)
    else:
        out.write(f"{_ERASE_LINE}{message} ... done in {elapsed:.1f} s\n" if live else f" done in {elapsed:.1f} s\n")
    out.flush()


def file_load_progress(path: str, option: str, *, enabled: bool = True) -> contextlib.AbstractContextManager:
    """progress("Reading <option> <path> (<size>)") for a file of at least LARGE_FILE_BYTES, else a no-op."""
    try:
        size = os.stat(path).st_size
    except OSError:  # the loader itself reports a missing or unreadable file
        return contextlib.nullcontext(lambda fraction: None)
    if size < LARGE_FILE_BYTES:
        return contextlib.nullcontext(lambda fraction: None)
    return progress(f"Reading {option} {shown_path(path)} ({human_bytes(size)})", enabled=enabled)
