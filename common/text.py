"""Quoting user input in one-line messages."""


def excerpt(text: str, start: int, end: int | None = None, limit: int = 24) -> str:
    """repr() of text[start:end], cut to `limit` characters with '...'."""
    end = len(text) if end is None else end
    piece = text[start:min(end, start + limit)]
    return repr(piece) + ("..." if end - start > limit else "")


def shown_path(path: str) -> str:
    """The path as typed, or its repr() when it holds characters that would break a one-line message."""
    return path if path.isprintable() and path.strip() == path and path else repr(path)
