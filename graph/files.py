"""Graph input from files: .npz archives, edge-list text files and .npy node features.

Loaders only read; validate_graph checks shapes, dtypes and values afterwards. Any file that cannot be read
(missing, a directory, corrupt, pickled objects, too large) raises InputError with one line.
"""

import codecs
import tokenize
import zipfile
from collections.abc import Callable
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from common.errors import InputError
from common.paths import readable_file
from common.text import quoted_bytes, shown_path
from graph.parse import MAX_ID_DIGITS, NumberError, read_integers

GRAPH_ARRAYS = ("edges", "node_features", "state")
MAX_EDGE_LIST_BYTES = 2**30
"""Largest edge-list text file (1 GiB, about 70 million edges); larger graphs belong in an .npz."""

# What np.load and the zip/zlib readers raise for files that are not what they claim to be (found by fuzzing
# archives: zipfile raises NotImplementedError for unknown compression and RuntimeError for encryption; a .npy
# header that is not a complete Python literal raises tokenize.TokenError or SyntaxError).
UNREADABLE = (
    OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, MemoryError,
    tokenize.TokenError, SyntaxError,
)

_WORD, _SPACE, _NEWLINE, _HASH = range(4)
_EDGE_LIST_CLASS = np.full(256, _WORD, dtype=np.uint8)
_EDGE_LIST_CLASS[list(b" \t\r\v\f,")] = _SPACE
_EDGE_LIST_CLASS[ord("\n")] = _NEWLINE
_EDGE_LIST_CLASS[ord("#")] = _HASH


@dataclass(frozen=True)
class GraphArrays:
    """The raw arrays of a graph file, before validation; node_features and state may be absent."""

    edges: np.ndarray
    node_features: np.ndarray | None = None
    state: np.ndarray | None = None


def why_unreadable(error: BaseException) -> str:
    """The sample's own words for a reader's exception: short, whole, with nothing the user cannot act on."""
    if "Object arrays" in str(error):
        return "it holds an array of Python objects (pickled), which the sample never loads; save numeric arrays"
    if "pickle" in str(error):  # np.load takes a file that is neither .npy nor .npz for a pickle
        return "not in NumPy's format (neither a .npy file nor a zip archive of them)"
    if isinstance(error, zipfile.BadZipFile):
        return "not a zip archive, or a damaged one"
    if isinstance(error, (EOFError, zlib.error, tokenize.TokenError)) or "EOF" in str(error) or \
            "could only read" in str(error):  # TokenError: a header Python's tokenizer cannot end (worded by version)
        return "the file is truncated or damaged"
    if isinstance(error, NotImplementedError):
        return "an archive compressed with a method Python cannot read; save it with numpy.savez"
    if isinstance(error, RuntimeError):
        return "an encrypted archive; save it with numpy.savez"
    if isinstance(error, MemoryError):
        return "not enough memory to read it"
    if isinstance(error, OSError) and error.strerror:
        return f"cannot read it ({error.strerror})"
    return "the file is damaged or not in NumPy's format"


@dataclass(frozen=True)
class NpzMember:
    """One array of an .npz archive, as its zip directory and .npy header tell: the name numpy.load gives it
    (the member's name less .npy), the member, its dtype and shape."""

    name: str
    member: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def npz_members(path: str | Path, source: str) -> list[NpzMember]:
    """The arrays of an .npz archive from its zip directory and each member's .npy header alone (nothing beyond
    the headers is decompressed), so that names, dtypes and shapes are checked before any data is read.
    InputError (one line, `source` first): not a zip archive, a member that is not a .npy array (numpy.load
    would hand it over as bytes), two members of one name (S.npy twice, or S and S.npy), an array of Python
    objects, a damaged header."""
    try:
        with open(path, "rb") as file:
            if file.read(len(np.lib.format.MAGIC_PREFIX)) == np.lib.format.MAGIC_PREFIX:
                raise InputError(f"{source}: holds a single array, not an .npz archive of named arrays (a .npy file)")
        archive = zipfile.ZipFile(path)
    except InputError:
        raise
    except UNREADABLE as error:
        raise InputError(f"{source}: not a readable .npz archive: {why_unreadable(error)}") from None
    members: dict[str, NpzMember] = {}
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            member = info.filename
            name = member.removesuffix(".npy")
            if name in members or member in members:
                raise InputError(f"{source}: holds {members.get(name, members.get(member)).member!r} and "  # type: ignore[union-attr]
                                 f"{member!r}, two arrays named {name!r}")
            if not member.endswith(".npy"):
                raise InputError(f"{source}: member {member!r} is not a .npy array (an .npz holds NAME.npy members, "
                                 "as numpy.savez writes them)")
            try:
                with archive.open(info) as file:
                    dtype, shape = _npy_header(file)
            except InputError as error:
                raise InputError(f"{source}: member {member!r} {error}") from None
            except UNREADABLE as error:
                raise InputError(f"{source}: member {member!r}: {why_unreadable(error)}") from None
            members[name] = NpzMember(name, member, dtype, shape)
    return list(members.values())


def _npy_header(file: Any) -> tuple[np.dtype, tuple[int, ...]]:
    """(dtype, shape) from the header of a .npy file object; InputError for what is not NumPy's format or holds
    Python objects."""
    fmt = np.lib.format
    if file.read(len(fmt.MAGIC_PREFIX)) != fmt.MAGIC_PREFIX:
        raise InputError("is not in NumPy's .npy format (no .npy header)")
    version = tuple(file.read(2))
    file.seek(0)
    fmt.read_magic(file)
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise InputError(f"is .npy format version {version}, which numpy cannot read")
    private = getattr(fmt, "_read_array_header", None)  # the one reader of every version, 3.0 included
    if private is not None:
        shape, _, dtype = private(file, version)
    else:
        reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = reader(file)
    if dtype.hasobject:
        raise InputError("holds an array of Python objects (pickled), which the sample never loads; save numeric "
                         "arrays")
    return np.dtype(dtype), tuple(int(dim) for dim in shape)


def read_npz_member(path: str | Path, member: NpzMember, source: str) -> np.ndarray:
    """One array of an .npz archive (npz_members' member), decompressed and read without pickle; InputError."""
    try:
        with zipfile.ZipFile(path) as archive, archive.open(member.member) as file:
            return np.lib.format.read_array(file, allow_pickle=False)
    except UNREADABLE as error:
        raise InputError(f"{source}: member {member.member!r}: {why_unreadable(error)}") from None


def _check_file(path: Path, option: str) -> str:
    """`option` and the path as messages show it, after checking that the file can be read."""
    readable_file(str(path), option)
    return f"{option} {shown_path(str(path))}"


def load_graph_file(path: str | Path, on_progress: Callable[[float], None] | None = None) -> GraphArrays:
    """Reads --graph FILE: an .npz archive (arrays `edges`, optional `node_features`, `state`) or, for any
    other suffix, an edge-list text file (one `source target` pair per line; see parse_edge_list, which calls
    `on_progress` with the fraction parsed)."""
    path = Path(path)
    source = _check_file(path, "--graph")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return _load_npz(path, source)
    if suffix == ".npy":
        raise InputError(
            f"{source}: a .npy file holds a single array; use an .npz with an 'edges' array "
            "(and optional 'node_features', 'state') or an edge-list text file"
        )
    return GraphArrays(edges=parse_edge_list(_read_edge_list(path, source), source, on_progress))


def _read_edge_list(path: Path, source: str) -> bytes:
    size = path.stat().st_size
    if size > MAX_EDGE_LIST_BYTES:
        raise InputError(
            f"{source}: {size:,} bytes is more than the edge-list limit of {MAX_EDGE_LIST_BYTES:,}; "
            "store large graphs as .npz"
        )
    try:
        return path.read_bytes()
    except OSError as error:
        raise InputError(f"{source}: {why_unreadable(error)}") from None


def edge_list_line(path: str | Path, edge: int) -> int | None:
    """The 1-based line of edge-list file `path` that holds edge `edge` (0-based), for a message about that
    edge; None when the file no longer gives one. Reads and parses the file again: called only on an error."""
    try:
        lines = parse_edge_list(Path(path).read_bytes(), with_lines=True)[1]
    except (OSError, InputError):
        return None
    return int(lines[edge]) if 0 <= edge < len(lines) else None


def _load_npz(path: Path, source: str) -> GraphArrays:
    """The graph's arrays, their names checked from the archive's directory and headers (npz_members) before
    any is decompressed."""
    members = npz_members(path, source)
    names = [member.name for member in members]
    unknown = [name for name in names if name not in GRAPH_ARRAYS]
    if unknown:
        raise InputError(f"{source}: unknown array {unknown[0]!r}; the archive may hold {', '.join(GRAPH_ARRAYS)}")
    if "edges" not in names:
        raise InputError(f"{source}: no 'edges' array (found: {', '.join(names) or 'nothing'})")
    return GraphArrays(**{member.name: read_npz_member(path, member, source) for member in members})


def load_node_features_file(path: str | Path) -> np.ndarray:
    """Reads --node_features_file FILE.npy: one array [N] or [N, F] (checked later by validate_graph)."""
    path = Path(path)
    source = _check_file(path, "--node_features_file")
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.ndarray):
            loaded.close()
            raise InputError(f"{source}: an .npz archive; expected a .npy file with one array")
    except InputError:
        raise
    except UNREADABLE as error:
        raise InputError(f"{source}: not a readable .npy file: {why_unreadable(error)}") from None
    return loaded


EDGE_LIST_BLOCK_BYTES = 16 * 2**20  # bytes parsed at a time (whole lines): bounds the temporaries at ~10x that


def parse_edge_list(data: bytes, source: str = "edge list", on_progress: Callable[[float], None] | None = None,
                    *, with_lines: bool = False, block_bytes: int = EDGE_LIST_BLOCK_BYTES):
    """Parses edge-list text into int64 [E, 2]: one `source target` pair per line, separated by spaces, tabs
    and/or a comma; blank lines and everything after '#' on a line are ignored, and so is a UTF-8 byte order mark.
    With `with_lines`, returns (edges, the 1-based line of each edge).

    The text is parsed in blocks of whole lines (about block_bytes each), each vectorized like the string
    parser, so the memory beyond the result stays bounded whatever the file size. Messages count lines from 1
    (as editors do) and edges from 0 (their row in the array), as every message about an edge does.
    """
    blocks, line_blocks = [], []
    begin = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0  # as Windows editors save UTF-8
    first_line = first_edge = 0
    while begin < len(data):
        stop = len(data)
        if begin + block_bytes < len(data):
            stop = data.rfind(b"\n", begin, begin + block_bytes) + 1
            if stop <= begin:  # one line longer than a block: take it whole
                stop = data.find(b"\n", begin + block_bytes) + 1 or len(data)
        edges, lines = _parse_edge_lines(memoryview(data)[begin:stop], first_line, first_edge, source)
        blocks.append(edges)
        if with_lines:
            line_blocks.append(lines.astype(np.int64) + first_line + 1)
        first_line += data.count(b"\n", begin, stop)
        first_edge += len(edges)
        begin = stop
        if on_progress is not None:
            on_progress(stop / len(data))
    edges = np.concatenate(blocks) if blocks else np.empty((0, 2), dtype=np.int64)
    if with_lines:
        return edges, np.concatenate(line_blocks) if line_blocks else np.empty(0, dtype=np.int64)
    return edges


def _parse_edge_lines(block: memoryview, first_line: int, first_edge: int, source: str) -> tuple[np.ndarray, np.ndarray]:
    """One block of whole lines: (edges, each edge's 0-based line in the block). Words, newlines and '#' form one token
    stream: a word's line is the count of newlines before it, and a word is in a comment when a '#' came after
    its line's start."""
    text = np.frombuffer(block, dtype=np.uint8)
    char_class = _EDGE_LIST_CLASS[text]
    word_edge = np.diff((char_class == _WORD).view(np.int8), prepend=np.int8(0), append=np.int8(0))
    word_end = np.flatnonzero(word_edge == -1)
    position = np.flatnonzero((word_edge[:-1] == 1) | (char_class >= _NEWLINE))
    del word_edge, char_class
    kind = _EDGE_LIST_CLASS[text[position]]
    is_newline = kind == _NEWLINE
    line = np.cumsum(is_newline, dtype=np.int32)  # line of each token within the block
    is_word = kind == _WORD
    keep = is_word
    if (kind == _HASH).any():
        hashes = np.cumsum(kind == _HASH, dtype=np.int32)
        hashes_before_line = np.maximum.accumulate(np.where(is_newline, hashes, 0))
        keep = is_word & (hashes == hashes_before_line)
        word_end = word_end[keep[is_word]]
    start, line = position[keep], line[keep]
    words_per_line = np.bincount(line)
    wrong = np.flatnonzero((words_per_line != 0) & (words_per_line != 2))
    if wrong.size:
        bad_line = int(wrong[0])
        count = int(words_per_line[bad_line])
        raise InputError(
            f"{source}: line {first_line + bad_line + 1} has {count} value{'' if count == 1 else 's'}; each line "
            "holds 'source target' (separated by spaces or a comma; '#' starts a comment)"
        )
    try:
        values = read_integers(text, start, word_end)
    except NumberError as error:
        word = quoted_bytes(bytes(block[start[error.index]:word_end[error.index]][:40]))
        raise InputError(
            f"{source}: line {first_line + int(line[error.index]) + 1} (edge {first_edge + error.index // 2}): "
            f"{word} is not a node id (an integer of at most {MAX_ID_DIGITS} digits; '#' starts a comment)"
        ) from None
    return values.reshape(-1, 2), line[::2]  # the block's 0-based line of each edge
