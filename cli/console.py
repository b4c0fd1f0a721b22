"""stdout and stderr of aliased_io_plugin.py: every write checked (a full disk is one line and exit 74, not a
traceback), errors as one line. Standard library only."""

import os
import sys

from common.errors import OutputError

NUMPY_HINT = ("numpy is not installed; every run needs it, --dry-run included: pip install numpy "
              "(or pip install -r requirements.txt for the engine, -r requirements-test.txt for the tests)")


def out(*parts: object, sep: str = " ", flush: bool = False) -> None:
    """print() to stdout, with a failed write raised as OutputError (stdout to a file flushes in blocks,
    so the error may surface at any later print or at the final flush)."""
    try:
        print(*parts, sep=sep, flush=flush)
    except OSError as error:
        raise OutputError(error.strerror or str(error)) from None


def error_line(prog: str, message: object, status: int) -> int:
    """`prog: error: message` on stderr; returns `status`."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return status


def flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except OSError as error:
        raise OutputError(error.strerror or str(error)) from None


def drop_stdout() -> None:
    """Points stdout at /dev/null, so that the interpreter's flush at exit does not fail a second time."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # a stdout without a file descriptor (a test's capture)
        pass
