"""Builds the plugin host (plugin_host.cpp) into a layout of TensorRT's real Python bindings, as its libnvinfer.

    python3 tests/plugin_host/build.py DIR [DIR ...]

DIR is a layout of ../shared/trt-bindings/setup (tensorrt/, tensorrt_bindings/, tensorrt_libs/). The host is
compiled with g++ against the TensorRT header set of the bindings' release line (10.4.0 for 10.4, 10.16.0 for
10.16, 11.1.0 for 11.x; TRT_HEADERS names the folder holding them, default ../shared/trt-headers) and replaces
DIR/tensorrt_libs/libnvinfer.so.N; tensorrt_libs/__init__.py then names it (PLUGIN_HOST), so that `import
tensorrt` with PYTHONPATH=DIR loads it and trt.get_plugin_registry() is the host's registry. Rebuilt only when
the source, the headers or the command change. One line per DIR; exit status 2 for a DIR that is no layout,
3 for a missing compiler, header set or CUDA header.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SOURCE = HERE / "plugin_host.cpp"
DEFAULT_HEADERS = ROOT.parent / "shared" / "trt-headers"
SETUP = ROOT.parent / "shared" / "trt-bindings" / "setup"
# The releases whose bindings have a header set of their line (../shared/trt-headers/README.md).
RELEASES = ("10.4.0", "10.16.1.11", "11.4.0.106")


class HostBuildError(Exception):
    """Why the host cannot be built here (exit_status 2: the layout, 3: a missing tool or header)."""

    def __init__(self, message: str, exit_status: int = 3) -> None:
        super().__init__(message)
        self.exit_status = exit_status


def bindings_version(layout: Path) -> str:
    """The release of the bindings in a layout, from tensorrt_bindings/__init__.py (read, not imported: the
    layout may be for another Python)."""
    init = layout / "tensorrt_bindings" / "__init__.py"
    if not init.is_file() or not (layout / "tensorrt_libs").is_dir():
        raise HostBuildError(f"{layout} is not a layout of ../shared/trt-bindings/setup (no tensorrt_bindings or "
                             "tensorrt_libs)", 2)
    found = re.search(r'^__version__ = "([0-9.]+)"', init.read_text(), re.MULTILINE)
    if not found:
        raise HostBuildError(f"no __version__ in {init}", 2)
    return found.group(1)


def header_set(version: str) -> str:
    """The header set of a bindings release's line, e.g. '11.1.0' for '11.4.0.106'."""
    major, minor = (int(part) for part in version.split(".")[:2])
    if major == 11:
        return "11.1.0"
    if (major, minor) == (10, 4):
        return "10.4.0"
    if (major, minor) == (10, 16):
        return "10.16.0"
    raise HostBuildError(f"no TensorRT header set of the {major}.{minor} line (there are 10.4.0, 10.16.0 and 11.1.0): "
                         f"the host cannot be built for the bindings {version}")


def cuda_include() -> Path:
    """A folder with cuda_runtime_api.h (NvInferRuntimeBase.h includes it): CUDA_INCLUDE, a CUDA toolkit, or
    the nvidia-cuda-runtime wheel."""
    candidates = [os.environ.get("CUDA_INCLUDE"), "/usr/local/cuda/include"]
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        candidates.append(find_nvidia_header_directory("cudart"))
    except Exception:  # cuda-pathfinder missing or finding nothing: the other candidates remain
        pass
    for candidate in filter(None, candidates):
        if (Path(candidate) / "cuda_runtime_api.h").is_file():
            return Path(candidate)
    raise HostBuildError("no cuda_runtime_api.h (set CUDA_INCLUDE, install a CUDA toolkit or pip install "
                         "nvidia-cuda-runtime)")


def source_digest() -> str:
    """The SHA-256 of plugin_host.cpp: compiled into the host (host_source_digest) and kept beside it, so that a
    host built from another source is found where it cannot be rebuilt (tests/plugin_host/host.py refuses it)."""
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()


def compile_command(version: str, headers: Path, output: Path) -> list[str]:
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        raise HostBuildError("no C++ compiler (g++, or CXX) to build the plugin host")
    parts = (version.split(".") + ["0", "0", "0"])[:4]
    return [compiler, "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-DTENSORRT_BUILD_LIB",
            "-Wall", "-Wno-deprecated-declarations", *(f"-DHOST_TRT_{name}={int(value)}" for name, value in
                                                       zip(("MAJOR", "MINOR", "PATCH", "BUILD"), parts)),
            f'-DHOST_SOURCE_SHA256="{source_digest()}"', f"-I{headers}", f"-I{cuda_include()}", str(SOURCE), "-o",
            str(output),
            f"-Wl,-soname,libnvinfer.so.{parts[0]}", "-ldl", "-pthread"]


INIT = '''\
# STAND-IN for the tensorrt_libs package of tensorrt-cuXX-libs, as TensorRT's Python bindings load it:
# libnvinfer.so.{major} is the project's plugin host (tests/plugin_host, built against TensorRT {headers}'s headers:
# a plugin registry and the host's driver entry points, no Builder or Runtime); the others are stubs.
import ctypes as _ctypes
import os as _os

_dir = _os.path.dirname(_os.path.abspath(__file__))
for _name in ("libnvinfer.so.{major}", "libnvinfer_plugin.so.{major}", "libnvonnxparser.so.{major}"):
    _ctypes.CDLL(_os.path.join(_dir, _name), mode=_ctypes.RTLD_GLOBAL)
STUB = True
PLUGIN_HOST = _os.path.join(_dir, "libnvinfer.so.{major}")
PLUGIN_HOST_HEADERS = "{headers}"
'''


def build(layout: Path, headers_root: Path | None = None) -> Path:
    """Builds the host into `layout` (unless it is up to date) and returns the library's path."""
    layout = Path(layout).resolve()
    version = bindings_version(layout)
    headers_name = header_set(version)
    headers = Path(headers_root or os.environ.get("TRT_HEADERS") or DEFAULT_HEADERS) / headers_name
    major = version.split(".")[0]
    libs = layout / "tensorrt_libs"
    library = libs / f"libnvinfer.so.{major}"
    stamp = libs / "plugin_host.stamp"
    source_stamp = libs / "plugin_host.source"  # the source's digest alone: checkable where there are no headers
    current = source_digest()
    if not (headers / "NvInferRuntime.h").is_file():
        if stamp.is_file() and library.is_file():
            if not source_stamp.is_file() or source_stamp.read_text() != current:
                raise HostBuildError(f"the plugin host in {libs} was built from another plugin_host.cpp, and there "
                                     f"are no TensorRT {headers_name} headers here to rebuild it: run "
                                     "tests/plugin_host/build.py on the layout where they are, then carry it")
            return library  # built before this layout was carried here, where there are no headers
        raise HostBuildError(f"no TensorRT {headers_name} headers in {headers.parent} (set TRT_HEADERS to the folder "
                             "holding 10.4.0/, 10.16.0/ and 11.1.0/)")
    built = libs / f".plugin_host.so.{major}"  # moved over the library once g++ succeeded
    command = compile_command(version, headers, built)
    digest = hashlib.sha256(SOURCE.read_bytes() + "\0".join(command).encode())
    for header in sorted(headers.rglob("*.h")):
        digest.update(header.read_bytes())
    if stamp.is_file() and stamp.read_text() == digest.hexdigest() and library.is_file():
        source_stamp.write_text(current)  # layouts built before the source stamp existed
        init = INIT.format(major=major, headers=headers_name)
        if not (libs / "__init__.py").is_file() or (libs / "__init__.py").read_text() != init:
            (libs / "__init__.py").write_text(init)  # a host kept over a fresh setup (lay_out)
        return library
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise HostBuildError(f"g++ failed to build the plugin host for {version}: {result.stderr.strip()[-2000:]}")
    os.replace(built, library)
    (libs / "__init__.py").write_text(INIT.format(major=major, headers=headers_name))
    stamp.write_text(digest.hexdigest())
    source_stamp.write_text(current)
    return library


HOST_FILES = ("libnvinfer.so.{major}", "plugin_host.stamp", "plugin_host.source")


def lay_out(version: str, layout: Path) -> Path:
    """../shared/trt-bindings/setup VERSION LAYOUT, then the host built into it; returns the layout.

    setup lays tensorrt_libs/ out afresh (its stub libnvinfer in place of the host), so a host built into LAYOUT
    before is kept over it with its stamp: build() then compiles only when the source, the headers or the command
    changed (g++ takes 7 to 8 s of CPU), as its stamp promises."""
    if not SETUP.is_file():
        raise HostBuildError(f"no {SETUP} to lay out TensorRT's Python bindings")
    libs = Path(layout) / "tensorrt_libs"
    names = [name.format(major=version.split(".")[0]) for name in HOST_FILES]
    kept = {name: ((libs / name).read_bytes(), (libs / name).stat().st_mode) for name in names
            if (libs / name).is_file()} if (libs / "plugin_host.stamp").is_file() else {}
    result = subprocess.run(["bash", str(SETUP), version, str(layout)], capture_output=True, text=True)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
        raise HostBuildError(f"{SETUP.name} {version} failed: {lines[-1]}")
    if len(kept) == len(names):
        for name, (content, mode) in kept.items():  # through a new file: a process may have the stub mapped
            (libs / f".{name}.kept").write_bytes(content)
            os.chmod(libs / f".{name}.kept", mode)
            os.replace(libs / f".{name}.kept", libs / name)
    build(layout)
    return layout


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[1].strip(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    for argument in argv:
        try:
            library = build(Path(argument))
        except HostBuildError as error:
            print(f"plugin host: {error}", file=sys.stderr)
            return error.exit_status
        print(f"plugin host for TensorRT {bindings_version(library.parent.parent)}: {library}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
