"""The oldest TensorRT and polygraphy this sample runs on, the TensorRT that --plugin aot needs, and whether the
driver runs the CUDA that the installed TensorRT and cuda-python were built for: the checks the engine path
makes before any CUDA work.

Plain functions on version strings and numbers: the parsing and the decisions are tested without TensorRT or a GPU.
"""

import re
from collections.abc import Iterable, Mapping, Sequence

from common.errors import MissingDependencyError

TENSORRT_FLOOR = "10.4"
AOT_TENSORRT_FLOOR = "10.16"  # the first release --plugin aot was checked against (10.9-10.15 have aot_impl too)
POLYGRAPHY_FLOOR = "0.53.6"
TENSORRT_WHY = ("10.3's Python bindings crash the process whenever a Python plugin object is freed; "
                "older releases have no aliased plugin I/O")
AOT_TENSORRT_WHY = "the first release whose tensorrt.plugin AOT plugins this sample was checked against"
POLYGRAPHY_WHY = "older releases cannot build engines on TensorRT 11"
CUDA12_REQUIREMENTS = "requirements-cu12.txt"
DRIVER_BRANCHES = {12: "R525", 13: "R580"}  # the oldest driver of each CUDA major version

_LEADING_NUMBERS = re.compile(r"\s*(\d+(?:\.\d+)*)")
_CUDA_SUFFIX = re.compile(r"[-_]cu(\d+)(?:[-_]|$)")


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


def check_aot_tensorrt_version(found: object) -> None:
    """MissingDependencyError (exit 3) for --plugin aot on a TensorRT older than 10.16, naming the version found."""
    problem = version_problem("tensorrt", found, AOT_TENSORRT_FLOOR, AOT_TENSORRT_WHY)
    if problem:
        raise MissingDependencyError(f"--plugin aot: {problem}")


def check_polygraphy_version(found: object) -> None:
    """MissingDependencyError (exit 3) for a polygraphy older than 0.53.6, naming the version found and why."""
    problem = version_problem("polygraphy", found, POLYGRAPHY_FLOOR, POLYGRAPHY_WHY)
    if problem:
        raise MissingDependencyError(problem)


def cuda_major_of_distributions(names: Iterable[str]) -> int | None:
    """The CUDA major version that package names carry ("tensorrt_cu13_bindings" -> 13, "tensorrt-cu12-libs" -> 12);
    None when none carries one or they disagree."""
    majors = {int(match.group(1)) for name in names if (match := _CUDA_SUFFIX.search(name))}
    return majors.pop() if len(majors) == 1 else None


def driver_version_problem(driver_version: int, needs: Sequence[tuple[str, int]]) -> str | None:
    """None when the driver (cuDriverGetVersion's number, 12080 for CUDA 12.8) runs every CUDA major version in
    `needs` ((what, major) pairs such as ("tensorrt_cu13_bindings 11.4.0.106", 13)), else one line naming the
    driver's CUDA version, what needs a newer one, and what to install."""
    major, minor = driver_version // 1000, driver_version % 1000 // 10
    too_new = [(what, need) for what, need in needs if need > major]
    if not too_new:
        return None
    need = max(need for _, need in too_new)
    what = " and ".join(what for what, _ in too_new)
    branch = DRIVER_BRANCHES.get(need)
    driver = f"{branch} or newer" if branch else f"one for CUDA {need}"
    if major == 12:  # requirements-cu12.txt holds the CUDA 12 builds of every package; no other major has a file
        fix = (f"with this driver use CUDA {major} packages: pip install -r {CUDA12_REQUIREMENTS} in a new virtual "
               f"environment (or update the driver to {driver})")
    else:
        fix = f"update the NVIDIA driver ({driver})"
    return (f"the NVIDIA driver runs CUDA up to {major}.{minor} (cuDriverGetVersion: {driver_version}), but {what} "
            f"need{'s' if len(too_new) == 1 else ''} CUDA {need}: {fix}")


def installed_cuda_needs(tensorrt_distributions: Mapping[str, Sequence[str]], tensorrt_version: str,
                         cuda_bindings_version: str | None) -> list[tuple[str, int]]:
    """(what, CUDA major) for the installed TensorRT (its bindings' or libraries' distribution names, from
    importlib.metadata.packages_distributions(), say cu12 or cu13) and cuda-python (cuda.bindings' major version
    is its CUDA's). A TensorRT whose distribution names say nothing (a tarball or Debian install) is left out."""
    needs = []
    names = [name for module in ("tensorrt_bindings", "tensorrt_libs", "tensorrt")
             for name in tensorrt_distributions.get(module, ())]
    tensorrt_major = cuda_major_of_distributions(names)
    if tensorrt_major is not None:
        needs.append((f"TensorRT {tensorrt_version} (tensorrt-cu{tensorrt_major})", tensorrt_major))
    bindings = parse_version(cuda_bindings_version)
    if bindings:
        needs.append((f"cuda-python {cuda_bindings_version}", bindings[0]))
    return needs


def check_driver_version(driver_version: int, needs: Sequence[tuple[str, int]]) -> None:
    """MissingDependencyError (exit 3) when the driver is older than the CUDA of what is installed."""
    problem = driver_version_problem(driver_version, needs)
    if problem:
        raise MissingDependencyError(problem)
