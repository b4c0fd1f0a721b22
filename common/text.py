"""Quoting user input, and other libraries' errors, in one-line messages."""


def excerpt(text: str, start: int, end: int | None = None, limit: int = 24) -> str:
    """repr() of text[start:end], cut to `limit` characters with '...'."""
    end = len(text) if end is None else end
    piece = text[start:min(end, start + limit)]
    return repr(piece) + ("..." if end - start > limit else "")


MAX_SHOWN_PATH = 120  # longer names show their start and end, and their length


def shown_path(path: str) -> str:
    """The path as typed, or its repr() when it holds characters that would break a one-line message (a
    newline, an escape sequence, surrounding spaces); a very long one cut in the middle."""
    shown = path if path.isprintable() and path.strip() == path and path else repr(path)
    if len(shown) > MAX_SHOWN_PATH:
        shown = f"{shown[:60]}...{shown[-40:]} ({len(path):,} characters)"
    return shown


def quoted_bytes(data: bytes) -> str:
    """data read as UTF-8 in quotes, each undecodable byte (\\xff) and unprintable character (\\ufeff) escaped
    once, so that a word from a file shows in a one-line message as it is."""
    text = data.decode("utf-8", errors="surrogateescape")
    shown = "".join(
        char if char.isprintable()
        else f"\\x{ord(char) - 0xDC00:02x}" if 0xDC80 <= ord(char) <= 0xDCFF
        else repr(char)[1:-1]
        for char in text
    )
    return f"'{shown}'"


def first_line(error: BaseException) -> str:
    """The first non-empty line of an exception's message (polygraphy's can span many lines)."""
    return next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
