"""Parsing the CLI's list strings ("[1.0,3.0]", "[[0,1],[1,2]]") without eval and without recursion.

Each character is classified with a lookup table, the string is cut into tokens ('[', ']', ',' and numbers),
and the structure is checked with whole-array operations: the bracket depth is a cumulative sum, the grammar
is a table of which token may follow which, and integers are read one digit column at a time. Nothing
recurses, so a deeply nested string is only a depth that is too large, and MAX_INPUT_CHARS bounds the memory
(the peak is about 13 bytes per input character: some 420 MB at the limit).
"""

from dataclasses import dataclass

import numpy as np

from common.errors import InputError
from common.limits import MAX_INPUT_CHARS
from common.text import excerpt

MAX_NUMBER_CHARS = 64
"""Longest accepted single number, in characters."""

MAX_ID_DIGITS = 18
"""Node ids have at most 18 digits, so that they fit int64 without overflow checks."""

NODE_FEATURES_EXAMPLE = "[1.0,3.0,5.0,7.0] or [[1.0,2.0],[3.0,4.0]]"
EDGES_EXAMPLE = "[[0,1],[1,2],[2,0]]"

_SPACE, _NUMBER, _OPEN, _CLOSE, _COMMA, _OTHER = range(6)

_CHAR_CLASS = np.full(256, _OTHER, dtype=np.uint8)
_CHAR_CLASS[list(b" \t\r\n")] = _SPACE
# Letters count as parts of numbers so that "nan", "inf" or "abc" reach the number check and get named there.
_CHAR_CLASS[list(b"0123456789+-.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")] = _NUMBER
_CHAR_CLASS[ord("[")] = _OPEN
_CHAR_CLASS[ord("]")] = _CLOSE
_CHAR_CLASS[ord(",")] = _COMMA

# _ALLOWED_NEXT[6 * previous + next]: which token may follow which. A trailing comma ("[1,2,]") is allowed, as in
# Python.
_ALLOWED_NEXT = np.zeros(36, dtype=bool)
for _previous, _next in [
    (_OPEN, _OPEN), (_OPEN, _NUMBER), (_OPEN, _CLOSE),
    (_NUMBER, _COMMA), (_NUMBER, _CLOSE),
    (_COMMA, _OPEN), (_COMMA, _NUMBER), (_COMMA, _CLOSE),
    (_CLOSE, _COMMA), (_CLOSE, _CLOSE),
]:
    _ALLOWED_NEXT[6 * _previous + _next] = True

_EXPECTED_AFTER = {
    _OPEN: "a number, '[' or ']'",
    _NUMBER: "',' or ']'",
    _COMMA: "a number or '['",
    _CLOSE: "',' or ']'",
}


class NumberError(Exception):
    """Internal: the number at `index` (in token order) is not valid; callers turn it into an InputError."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


@dataclass
class _Tokens:
    """The token stream of one string. Numbers are runs of number characters; depth counts open brackets."""

    text: str
    data: np.ndarray  # uint8 [chars]
    is_number_char: np.ndarray  # bool [chars]
    kind: np.ndarray  # uint8 [tokens]
    position: np.ndarray  # int64 [tokens]: offset of each token's first character
    depth: np.ndarray  # int32 [tokens]: open brackets after the token (a number: the depth of its list)
    number_start: np.ndarray  # int64 [numbers]
    number_end: np.ndarray  # int64 [numbers], exclusive

    def describe(self, token: int) -> str:
        """The token as the user wrote it, quoted and shortened."""
        start = int(self.position[token])
        if self.kind[token] != _NUMBER:
            return repr(self.text[start])
        end = int(self.number_end[np.searchsorted(self.number_start, start)])
        return excerpt(self.text, start, end)


def _tokenize(text: str, what: str, max_depth: int, example: str) -> _Tokens:
    if not isinstance(text, str):
        raise InputError(f"{what}: expected a string such as {example}, got {type(text).__name__}")
    if len(text) > MAX_INPUT_CHARS:
        raise InputError(
            f"{what}: the string has {len(text):,} characters, more than the limit of {MAX_INPUT_CHARS:,}; "
            "put large graphs in a file (--graph)"
        )
    try:
        data = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    except UnicodeEncodeError as error:
        raise InputError(f"{what}: unexpected character {text[error.start]!r} at position {error.start}") from None
    char_class = _CHAR_CLASS[data]
    other = np.flatnonzero(char_class == _OTHER)
    if other.size:
        offset = int(other[0])
        raise InputError(
            f"{what}: unexpected character {text[offset]!r} at position {offset}; "
            f"only numbers, '[', ']', ',' and spaces are allowed, as in {example}"
        )

    is_number_char = char_class == _NUMBER
    number_edge = np.diff(is_number_char.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    number_end = np.flatnonzero(number_edge == -1)
    position = np.flatnonzero((char_class >= _OPEN) | (number_edge[:-1] == 1))
    kind = char_class[position]
    number_start = position[kind == _NUMBER]
    if kind.size == 0:
        raise InputError(f"{what}: the string is empty; expected a list such as {example}")
    if kind[0] != _OPEN:
        raise InputError(f"{what}: expected a list such as {example}, got {excerpt(text, int(position[0]))}")

    # int32 suffices: MAX_INPUT_CHARS < 2**31.
    depth = np.cumsum((kind == _OPEN).view(np.int8) - (kind == _CLOSE).view(np.int8), dtype=np.int32)
    tokens = _Tokens(text, data, is_number_char, kind, position, depth, number_start, number_end)
    closed = np.flatnonzero(depth <= 0)
    if closed.size == 0:
        raise InputError(f"{what}: a '[' is never closed (']' missing at the end)")
    if closed[0] != kind.size - 1:
        extra = int(closed[0]) + 1
        raise InputError(
            f"{what}: unexpected {tokens.describe(extra)} at position {position[extra]} after the list's closing ']'"
        )
    too_deep = np.flatnonzero(depth > max_depth)
    if too_deep.size:
        raise InputError(
            f"{what}: lists nested deeper than {max_depth} levels at position {position[too_deep[0]]}; "
            f"expected a list such as {example}"
        )
    misplaced = np.flatnonzero(~_ALLOWED_NEXT[6 * kind[:-1] + kind[1:]])
    if misplaced.size:
        token = int(misplaced[0]) + 1
        raise InputError(
            f"{what}: expected {_EXPECTED_AFTER[int(kind[token - 1])]} at position {position[token]}, "
            f"got {tokens.describe(token)}"
        )
    too_long = np.flatnonzero(number_end - number_start > MAX_NUMBER_CHARS)
    if too_long.size:
        start = int(number_start[too_long[0]])
        raise InputError(f"{what}: the number at position {start} is longer than {MAX_NUMBER_CHARS} characters")
    return tokens


_POWERS_OF_TEN = 10 ** np.arange(MAX_ID_DIGITS, dtype=np.int64)
_INTEGER_CHUNK = 1 << 20  # numbers per step of read_integers: temporaries stay at a few MB


def read_integers(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Decimal integers (optional sign, at most MAX_ID_DIGITS digits) in data[start[i]:end[i]], as int64.

    Vectorized over the numbers, one digit column at a time from the right, in chunks of a million numbers.
    Raises NumberError with the index of the first invalid number.
    """
    values = np.empty(start.size, dtype=np.int64)
    for begin in range(0, start.size, _INTEGER_CHUNK):
        stop = min(begin + _INTEGER_CHUNK, start.size)
        chunk_values, invalid = _read_integer_chunk(data, start[begin:stop], end[begin:stop])
        if invalid.any():
            raise NumberError(begin + int(np.argmax(invalid)))
        values[begin:stop] = chunk_values
    return values


def _read_integer_chunk(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    first = data[start]
    negative = first == ord("-")
    num_digits = end - start - (negative | (first == ord("+")))
    invalid = (num_digits <= 0) | (num_digits > MAX_ID_DIGITS)
    values = np.zeros(start.size, dtype=np.int64)
    for column in range(min(int(num_digits.max()), MAX_ID_DIGITS)):  # column 0 is the last digit
        present = column < num_digits
        digit = data[np.where(present, end - 1 - column, start)] - np.uint8(ord("0"))  # uint8: below '0' wraps
        invalid |= present & (digit > 9)
        values += np.where(present, digit, 0) * _POWERS_OF_TEN[column]
    return np.where(negative, -values, values), invalid


def _read_floats(tokens: _Tokens) -> np.ndarray:
    """All numbers of the token stream as float64 (NaN and Inf parse; validation rejects them later).

    The numbers are cut out in one bytes.split() and converted by Python's float(), which is faster than
    numpy's string casts; only the letters of nan/inf/e reach it, never '_' or spaces.
    """
    blanked = np.where(tokens.is_number_char, tokens.data, np.uint8(ord(" ")))
    words = blanked.tobytes().split()
    try:
        return np.fromiter(map(float, words), dtype=np.float64, count=len(words))
    except ValueError:
        pass
    for index, word in enumerate(words):
        try:
            float(word)
        except ValueError:
            raise NumberError(index) from None
    raise AssertionError("unreachable: float() rejected a number and then accepted them all")


def _number_token(tokens: _Tokens, number_index: int) -> int:
    return int(np.searchsorted(tokens.position, tokens.number_start[number_index]))


def _numbers_per_list(is_list_open: np.ndarray, is_number: np.ndarray) -> np.ndarray:
    """How many numbers each inner list holds, given the tokens that open one; every number must be in one."""
    list_of_token = np.cumsum(is_list_open, dtype=np.int32) - 1
    return np.bincount(list_of_token[is_number], minlength=int(np.count_nonzero(is_list_open)))


def parse_edges(text: str) -> np.ndarray:
    """Parses "[[s,t],...]" (source -> target pairs of integer node ids) into int64 [E, 2]; no range checks."""
    what = "edges"
    tokens = _tokenize(text, what, max_depth=2, example=EDGES_EXAMPLE)
    is_number = tokens.kind == _NUMBER
    bare = np.flatnonzero(is_number & (tokens.depth == 1))
    if bare.size:
        token = int(bare[0])
        raise InputError(
            f"{what}: expected pairs such as [0,1], got the bare number {tokens.describe(token)} "
            f"at position {tokens.position[token]}"
        )
    pair_open = (tokens.kind == _OPEN) & (tokens.depth == 2)
    sizes = _numbers_per_list(pair_open, is_number)
    wrong_size = np.flatnonzero(sizes != 2)
    if wrong_size.size:
        pair = int(wrong_size[0])
        start = int(tokens.position[np.flatnonzero(pair_open)[pair]])
        end = tokens.text.find("]", start) + 1
        raise InputError(
            f"{what}: edge {pair} {excerpt(tokens.text, start, end)} at position {start} has {sizes[pair]} "
            f"value{'' if sizes[pair] == 1 else 's'}; each edge is a pair [source, target]"
        )
    try:
        values = read_integers(tokens.data, tokens.number_start, tokens.number_end)
    except NumberError as error:
        token = _number_token(tokens, error.index)
        raise InputError(
            f"{what}: {tokens.describe(token)} at position {tokens.position[token]} is not a node id "
            f"(an integer of at most {MAX_ID_DIGITS} digits)"
        ) from None
    return values.reshape(sizes.size, 2)


def parse_node_features(text: str) -> np.ndarray:
    """Parses "[x0,x1,...]" (one feature per node) or "[[..F..],[..F..],...]" into float64 [N, F].

    NaN and Inf parse here and are rejected by validate_graph, which names the node.
    """
    what = "node_features"
    tokens = _tokenize(text, what, max_depth=2, example=NODE_FEATURES_EXAMPLE)
    is_number = tokens.kind == _NUMBER
    row_open = (tokens.kind == _OPEN) & (tokens.depth == 2)
    num_rows = int(np.count_nonzero(row_open))
    if num_rows == 0:
        if not is_number.any():
            raise InputError(f"{what}: the node list is empty; expected a list such as {NODE_FEATURES_EXAMPLE}")
        shape = (int(np.count_nonzero(is_number)), 1)
    else:
        loose = np.flatnonzero(is_number & (tokens.depth == 1))
        if loose.size:
            token = int(loose[0])
            raise InputError(
                f"{what}: mixes numbers and lists: the number {tokens.describe(token)} at position "
                f"{tokens.position[token]} stands next to lists of features; use one form"
            )
        sizes = _numbers_per_list(row_open, is_number)
        row_position = tokens.position[np.flatnonzero(row_open)]
        empty = np.flatnonzero(sizes == 0)
        if empty.size:
            row = int(empty[0])
            raise InputError(f"{what}: node {row} has no features (the empty list at position {row_position[row]})")
        ragged = np.flatnonzero(sizes != sizes[0])
        if ragged.size:
            row = int(ragged[0])
            raise InputError(
                f"{what}: node {row} (position {row_position[row]}) has {sizes[row]} "
                f"feature{'' if sizes[row] == 1 else 's'} but node 0 has {sizes[0]}; every node needs the same number of features"
            )
        shape = (num_rows, int(sizes[0]))
    try:
        values = _read_floats(tokens)
    except NumberError as error:
        token = _number_token(tokens, error.index)
        raise InputError(f"{what}: {tokens.describe(token)} at position {tokens.position[token]} is not a number") from None
    return values.reshape(shape)
