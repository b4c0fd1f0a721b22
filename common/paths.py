"""The checks of a path option before any work: a file to read, or a file name to write, with one-line
InputErrors that quote the name one way (common.text.shown_path) and say what the system refused.

Standard library only, so that the command line checks every path before numpy, TensorRT or CUDA is imported.
"""

import errno
import os
import stat

from common.errors import InputError
from common.text import shown_path

_REFUSALS = {
    errno.ENAMETOOLONG: "the name is longer than this system allows",
    errno.EACCES: "permission denied (a folder on the way may not be entered)",
    errno.EPERM: "permission denied",
    errno.ELOOP: "too many levels of symbolic links",
}


def _refused(option: str, path: str, error: OSError) -> InputError:
    reason = _REFUSALS.get(error.errno or 0, error.strerror or type(error).__name__)
    return InputError(f"{option} {shown_path(path)}: {reason}")


def path_status(path: str, option: str) -> os.stat_result | None:
    """os.stat(path), or None when nothing is there (no such file, or a file where a folder was expected);
    InputError for what the system refuses (a name too long, a folder the user may not enter)."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise _refused(option, path, error) from None
    except ValueError:  # an embedded NUL byte
        raise InputError(f"{option} {shown_path(path)}: a file name cannot hold a NUL character") from None


def readable_file(path: str, option: str) -> str:
    """`path` when it is a regular file the user may read, else InputError naming the option and the path."""
    if not path:
        raise InputError(f"{option} '': expected a file name")
    status = path_status(path, option)
    if status is None:
        raise InputError(f"{option} {shown_path(path)}: file not found")
    if not stat.S_ISREG(status.st_mode):
        what = " (a folder)" if stat.S_ISDIR(status.st_mode) else ""
        raise InputError(f"{option} {shown_path(path)}: not a regular file{what}")
    if not os.access(path, os.R_OK):
        raise InputError(f"{option} {shown_path(path)}: not readable (permission denied)")
    return path


def writable_file(path: str, option: str) -> str:
    """`path` when a regular file may be written there (a new file in a writable folder, or an existing regular
    file the user may write), else InputError. A FIFO, a device or a folder is refused."""
    if not path:
        raise InputError(f"{option} '': expected a file name")
    status = path_status(path, option)
    if status is not None:
        if stat.S_ISDIR(status.st_mode):
            raise InputError(f"{option} {shown_path(path)}: is a folder, expected a file name")
        if not stat.S_ISREG(status.st_mode):
            raise InputError(f"{option} {shown_path(path)}: not a regular file (a FIFO, socket or device); "
                             "give the name of a file to write")
        if not os.access(path, os.W_OK):
            raise InputError(f"{option} {shown_path(path)}: not writable (permission denied)")
        return path
    folder = os.path.dirname(path) or "."
    folder_status = path_status(folder, option)
    if folder_status is None or not stat.S_ISDIR(folder_status.st_mode):
        raise InputError(f"{option} {shown_path(path)}: the folder {shown_path(folder)} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{option} {shown_path(path)}: not writable (the folder {shown_path(folder)} is not)")
    return path


def same_file(first: str, second: str) -> bool:
    """Whether two existing paths name one file (hard and symbolic links included); False if either is absent."""
    try:
        return os.path.samefile(first, second)
    except (OSError, ValueError):
        return False
