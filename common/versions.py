"""The oldest TensorRT and polygraphy this sample runs on, and the check the engine path makes before any CUDA work.

Plain functions on version strings: the parsing and the decision are tested without TensorRT.
"""

import re

from common.errors import MissingDependencyError

TENSORRT_FLOOR = "10.4"
POLYGRAPHY_FLOOR = "0.53.6"
TENSORRT_WHY = ("10.3's Python bindings crash the process whenever a Python plugin object is freed; "
                "older releases have no aliased plugin I/O")
POLYGRAPHY_WHY = "older releases cannot build engines on TensorRT 11 and do not bind an aliased output to its input"

_LEADING_NUMBERS = re.compile(r"\s*(\d+(?:\.\d+)*)")


def parse_version(text: object) -> tuple[int, ...] | None:
    """The leading dotted numbers of a version string as a tuple ("10.13.3.9" -> (10, 13, 3, 9),
    "0.53.6.post1" -> (0, 53, 6)); None when it does not start with a number."""
    match = _LEADING_NUMBERS.match(text) if isinstance(text, str) else None
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def version_problem(package: str, found: object, floor: str, why: str) -> str | None:
    """None when version `found` is `floor` or newer, else one line naming the version found, the floor and why."""
    version = parse_version(found)
    if version is not None and version >= (parse_version(floor) or ()):
        return None
    shown = f"{package} {found} found" if version is not None else f"{package}'s version is unreadable ({found!r})"
    return f"{shown}; {package} >= {floor} is needed ({why}): pip install '{package}>={floor}'"


def check_tensorrt_version(found: object) -> None:
    """MissingDependencyError (exit 3) for a TensorRT older than 10.4, naming the version found and why."""
    problem = version_problem("tensorrt", found, TENSORRT_FLOOR, TENSORRT_WHY)
    if problem:
        raise MissingDependencyError(problem)


def check_polygraphy_version(found: object) -> None:
    """MissingDependencyError (exit 3) for a polygraphy older than 0.53.6, naming the version found and why."""
    problem = version_problem("polygraphy", found, POLYGRAPHY_FLOOR, POLYGRAPHY_WHY)
    if problem:
        raise MissingDependencyError(problem)
