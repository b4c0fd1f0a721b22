"""The checks of a path option before any work, and the writing of output files at the end of a run.

Inputs: a regular file to read. Outputs (--save_onnx, --save_engine, export_onnx's --out): a regular file in an
existing folder that takes new files (checked by creating and removing a temporary file there, which also
refuses /proc, /sys and read-only file systems), not an input of the run, not the running script or any Python
source file, and not another output of the same run. Every refusal is one InputError line that quotes the name
one way (common.text.shown_path). An output is written through a temporary file beside it, given the mode a new
file gets under the user's umask (or the mode of the file it replaces), then renamed onto it; callers write
outputs only once the run has succeeded (OutputFiles), so that a failed run leaves nothing behind.

Standard library only, so that the command line checks every path before numpy, TensorRT or CUDA is imported.
"""

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

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


# Why a folder refused the probe's new file, after "the folder F": ENOENT is /proc's answer, EROFS /sys's
_FOLDER_REFUSALS = {
    errno.ENOENT: "takes no new files",
    errno.EROFS: "is on a read-only file system",
    errno.EACCES: "is not writable",
    errno.EPERM: "is not writable",
    errno.ENOSPC: "is on a full device",
    errno.EDQUOT: "is over the disk quota",
}


def writable_file(path: str, option: str) -> str:
    """`path` when a regular file may be written there: a new file in a folder that takes new files, or an
    existing regular file the user may write; else InputError. A FIFO, a device, a folder, a file in /proc or
    /sys, and a Python source file are refused. The folder is probed by creating (and removing) a temporary
    file beside the target, as replacing() will at the end."""
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
    if path.endswith(".py") or os.path.realpath(path).endswith(".py"):
        what = "a Python file's name (.py)" if path.endswith(".py") else \
            f"a link to the Python file {shown_path(os.path.realpath(path))}"
        raise InputError(f"{option} {shown_path(path)}: {what}; give the output a name of its own (e.g. model.onnx, "
                         "state.engine)")
    folder = os.path.dirname(path) or "."
    folder_status = path_status(folder, option)
    if folder_status is None or not stat.S_ISDIR(folder_status.st_mode):
        raise InputError(f"{option} {shown_path(path)}: the folder {shown_path(folder)} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{option} {shown_path(path)}: not writable (the folder {shown_path(folder)} is not)")
    real_folder = os.path.dirname(os.path.realpath(path))
    if status is None and os.path.islink(path) and path_status(real_folder, option) is None:
        raise InputError(f"{option} {shown_path(path)}: a link to {shown_path(os.path.realpath(path))}, whose folder "
                         f"{shown_path(real_folder)} does not exist")
    try:
        with _temporary_beside(path):
            pass
    except OSError as error:
        reason = _FOLDER_REFUSALS.get(error.errno or 0, f"refuses a new file ({error.strerror or error})")
        raise InputError(f"{option} {shown_path(path)}: cannot write there: the folder {shown_path(real_folder)} "
                         f"{reason}") from None
    return path


def writable_folder(path: str, option: str) -> str:
    """`path` when a folder of output files may be made there: a new name in a folder that takes new files, or
    an empty folder the user may write (a run's files are never mixed with other files); else InputError."""
    if not path:
        raise InputError(f"{option} '': expected a folder name")
    status = path_status(path, option)
    if status is not None:
        if not stat.S_ISDIR(status.st_mode):
            raise InputError(f"{option} {shown_path(path)}: not a folder; give a new or an empty folder")
        try:
            entries = os.listdir(path)
        except OSError as error:
            raise _refused(option, path, error) from None
        if entries:
            raise InputError(f"{option} {shown_path(path)}: the folder is not empty; give a new or an empty folder")
    parent = os.path.dirname(os.path.realpath(path))
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".probe-", dir=parent))
    except OSError as error:
        reason = _FOLDER_REFUSALS.get(error.errno or 0, f"refuses a new folder ({error.strerror or error})")
        raise InputError(f"{option} {shown_path(path)}: cannot write there: the folder {shown_path(parent)} "
                         f"{reason}") from None
    return path


def check_outputs(outputs: Mapping[str, str | None], inputs: Mapping[str, str | None],
                  script: str | Path | None = None, folders: Collection[str] = ()) -> None:
    """InputError unless each output (option -> path; None: not given) is a file writable_file accepts (for the
    options in `folders`, a folder writable_folder accepts) that is no input of the run (what -> path), not the
    running `script` and not another output's file."""
    given = [(option, path) for option, path in outputs.items() if path is not None]
    named = [(what, str(other)) for what, other in (*inputs.items(), ("this script", script)) if other is not None]
    for index, (option, path) in enumerate(given):
        for what, other in named:
            if same_file(path, other):
                raise InputError(f"{option} {shown_path(path)} is {what}; writing there would overwrite it: give "
                                 "another file name")
        for other_option, other in given[:index]:
            if same_target(path, other):
                raise InputError(f"{option} {shown_path(path)} is also {other_option}'s file: give each output a "
                                 "file name of its own")
        if option in folders:
            writable_folder(path, option)
        else:
            writable_file(path, option)


def same_file(first: str, second: str) -> bool:
    """Whether two existing paths name one file (hard and symbolic links included); False if either is absent."""
    try:
        return os.path.samefile(first, second)
    except (OSError, ValueError):
        return False


def same_target(first: str, second: str) -> bool:
    """Whether two output names would write one file (the same name once links are resolved, or one file)."""
    try:
        return os.path.realpath(first) == os.path.realpath(second) or same_file(first, second)
    except ValueError:  # an embedded NUL byte: writable_file says so
        return False


@contextlib.contextmanager
def _temporary_beside(path: str) -> Iterator[str]:
    """A new empty temporary file (.NAME.tmp-XXXXXXXX.SUFFIX) in the folder of `path` (links resolved), removed
    when the block ends unless it was renamed."""
    real = os.path.realpath(path)
    stem, suffix = os.path.splitext(os.path.basename(real))  # the suffix kept: writers that go by it (onnx.save)
    handle, temporary = tempfile.mkstemp(prefix=f".{stem}.tmp-", suffix=suffix, dir=os.path.dirname(real))
    os.close(handle)
    try:
        yield temporary
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def _new_file_mode(path: str) -> int:
    """The mode open() would leave `path` with: an existing file's own, else 0o666 less the user's umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


@contextlib.contextmanager
def replacing(path: str, option: str) -> Iterator[str]:
    """A temporary file name beside `path` for the block to write; when the block succeeds it gets the mode a
    new file gets under the user's umask (or the mode of the file it replaces) and is renamed onto `path` (a
    link's target, where `path` is a link), so that `path` is never half written; when anything fails it is
    removed. OSError from the system becomes one InputError line naming `option`."""
    real = os.path.realpath(path)
    try:
        with _temporary_beside(real) as temporary:
            yield temporary
            os.chmod(temporary, _new_file_mode(real))
            os.replace(temporary, real)
    except OSError as error:
        raise InputError(f"{option} {shown_path(path)}: {error.strerror or error}") from None


@contextlib.contextmanager
def replacing_folder(path: str, option: str) -> Iterator[str]:
    """A new temporary folder beside `path` for the block to fill; when the block succeeds it is renamed onto
    `path` (absent or an empty folder: rename(2) replaces an empty folder), else removed with what it holds.
    OSError becomes one InputError line naming `option`."""
    import shutil

    real = os.path.realpath(path)
    try:
        temporary = tempfile.mkdtemp(prefix=f".{os.path.basename(real)}.tmp-", dir=os.path.dirname(real))
        try:
            yield temporary
            os.chmod(temporary, 0o777 & ~_umask())
            os.replace(temporary, real)
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise
    except OSError as error:
        raise InputError(f"{option} {shown_path(path)}: {error.strerror or error}") from None


def _umask() -> int:
    umask = os.umask(0o022)  # reading the umask means setting it; put back at once
    os.umask(umask)
    return umask


def _write_files(folder: str, files: Mapping[str, bytes]) -> None:
    """Each of `files` ({relative path: bytes}, folders made as needed) written under `folder`."""
    for relative, data in files.items():
        target = os.path.join(folder, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as file:
            file.write(data)


def write_output(path: str, data: bytes, option: str) -> None:
    """Writes `data` to `path` through replacing(): all of it or, on an error, nothing (InputError)."""
    with replacing(path, option) as temporary:
        with open(temporary, "wb") as file:
            file.write(data)


def serialized_model(model: Any, option: str) -> bytes:
    """An ONNX ModelProto's bytes (one file, no external data), for OutputFiles.hold; InputError when it does not
    serialize (over protobuf's 2 GiB), raised before any work that would follow."""
    try:
        return model.SerializeToString()
    except ValueError as error:
        reason = next(iter(str(error).strip().splitlines()), type(error).__name__)[:300]
        raise InputError(f"{option}: the model does not serialize ({reason})") from None


class OutputFiles:
    """The files a run writes (--save_onnx, --save_engine): their names, checked before any work
    (check_outputs); their contents, held as the run makes them; and the writing, at the end and only when
    the run succeeded, so that a failed run leaves nothing behind."""

    def __init__(self, targets: Mapping[str, str | None] | None = None, folders: Collection[str] = ()) -> None:
        self.targets = {option: path for option, path in (targets or {}).items() if path is not None}
        self.folders = frozenset(folders)  # the options whose target is a folder of files (writable_folder)
        self._held: dict[str, tuple[str, bytes | dict[str, bytes]]] = {}

    def hold(self, option: str, what: str, data: bytes | dict[str, bytes] | None) -> None:
        """Keeps `data` (`what`: "Engine", "Rewritten model") for `option`'s file, if that option was given; for
        a folder option, {relative path: bytes} of the files to make in it."""
        if option in self.targets and data is not None:
            self._held[option] = (what, data)

    def write(self) -> list[str]:
        """Writes every held file, each to its temporary file (or folder) first and then all renamed, so that an
        error (InputError) leaves none of them; the lines saying what was saved where."""
        with contextlib.ExitStack() as renames:  # on leaving: each temporary file renamed onto its target
            for option, (_, data) in self._held.items():
                if isinstance(data, dict):
                    folder = renames.enter_context(replacing_folder(self.targets[option], option))
                    _write_files(folder, data)
                    continue
                temporary = renames.enter_context(replacing(self.targets[option], option))
                with open(temporary, "wb") as file:
                    file.write(data)
        return [f"{what} saved to {shown_path(self.targets[option])}" for option, (what, _) in self._held.items()]

    def not_written(self) -> list[str]:
        """For a run that did not succeed: a line saying which held files were not written (none: no line)."""
        return [f"({', '.join(self._held)}: not written, since the run did not succeed.)"] if self._held else []
