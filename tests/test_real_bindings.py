"""The trt_bindings tests on TensorRT's real Python bindings, with the plugin host as their libnvinfer, in the
README's test command too, not only in CI's real-bindings matrix: among them the tests that need the real
`tensorrt.plugin` (register and aot_impl in test_aot_plugin.py, the AOT ONNX nodes against the registered
plugins) and those that need the host (tests/test_plugin_host.py, the registry tests).

Where `tensorrt` here is no plugin host layout (the default run has TensorRT-RTX), this lays out TensorRT
11.4.0.106's real Python bindings over stand-in libraries with ../shared/trt-bindings/setup and builds the host
into them (tests/plugin_host/build.py; in pytest's cache, rebuilt only when the host changes), then runs every
trt_bindings test there in a fresh interpreter, as one entry of the matrix does (about 25 s of CPU). That run
starts in the background when collection ends (tests/conftest.py), so that it overlaps the tests before this
one; this test waits for it and checks what it reported.
PLUGIN_HOST_RELEASES names other releases to run them on too (e.g. "10.4.0 11.4.0.106"). Where the layout
cannot be made (no setup script or compiler, or no package index to fetch the wheel from) it skips, saying that
they were left to CI's matrix, which runs them on 10.4.0, 10.16.1.11 and 11.4.0.106 (.ci/run sets
PLUGIN_HOST_MATRIX=1, so its own default run leaves them to the matrix)."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.background import lower_this_thread
from tests.plugin_host.host import host_library_path

ROOT = Path(__file__).resolve().parent.parent
LEFT_TO_CI = "the trt_bindings tests on real bindings and the plugin host were left to CI's real-bindings matrix (.ci/run)"
IN_THE_MATRIX = os.environ.get("PLUGIN_HOST_MATRIX") == "1"

# The background run: "thread" runs _run_releases, which fills "results" with (release, outcome), an outcome
# being a CompletedProcess or the HostBuildError that stopped the layout; "process" is the pytest running now.
_RUN: dict[str, Any] = {}


def binding_test_files() -> list[str]:
    marker = "mark." + "trt_bindings"  # spelled apart, so that .ci/run's grep for the marker leaves this file out
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_*.py")
                  if marker in path.read_text())


def _run_releases(cache: Path, releases: list[str], basetemp: Path) -> None:
    from tests.plugin_host.build import HostBuildError, lay_out

    lower_this_thread()  # beside the tests, below them; setup, g++ and the pytest inherit it (tests/background.py)
    files = binding_test_files()
    for release in releases:
        if _RUN.get("stopped"):
            return
        try:
            layout = lay_out(release, cache / release)
        except HostBuildError as error:
            _RUN["results"].append((release, error))
            return
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(layout), str(ROOT)]))
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={basetemp / release}",
                "-m", "trt_bindings", *files]
        with _RUN["lock"]:
            if _RUN.get("stopped"):
                return
            # a session of its own: stopping it (stop_background) ends its background exports too
            process = _RUN["process"] = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                                         stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            _kill(process)
            stdout, stderr = process.communicate()
        _RUN["results"].append((release, subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)))


def _kill(process: subprocess.Popen) -> None:
    """Kills the run's process group (the pytest and what it started)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def start_background(config: pytest.Config) -> None:
    """Starts the layouts and their trt_bindings runs in a background thread, once per session (where this test
    would not skip for the matrix or for a host layout already under it)."""
    if "thread" in _RUN or IN_THE_MATRIX or host_library_path() is not None:
        return
    cache = Path(cache.mkdir("plugin-host")) if (cache := getattr(config, "cache", None)) else Path("/tmp/plugin-host")
    basetemp = Path(tempfile.mkdtemp(prefix="trt-bindings-run-"))  # its own: never a folder of this session's
    releases = os.environ.get("PLUGIN_HOST_RELEASES", "11.4.0.106").split()
    _RUN.update(results=[], lock=threading.Lock(), basetemp=basetemp,
                thread=threading.Thread(target=_run_releases, args=(cache, releases, basetemp),
                                        name="trt-bindings-run", daemon=True))
    _RUN["thread"].start()


def stop_background() -> None:
    """Ends a background run this test did not wait for and removes its folder (pytest_sessionfinish)."""
    if "thread" not in _RUN:
        return
    with _RUN["lock"]:
        _RUN["stopped"] = True
        process = _RUN.get("process")
        if process is not None and process.poll() is None:
            _kill(process)
    _RUN["thread"].join(timeout=60)
    shutil.rmtree(_RUN["basetemp"], ignore_errors=True)


@pytest.mark.skipif(IN_THE_MATRIX,
                    reason=".ci/run runs the trt_bindings tests in its real-bindings matrix, with the plugin host on "
                           "10.4.0, 10.16.1.11 and 11.4.0.106")
def test_trt_bindings_tests_pass_on_real_bindings_with_the_plugin_host(request):
    if host_library_path() is not None:
        pytest.skip("tensorrt here is a plugin host layout: the trt_bindings tests run on it directly")
    start_background(request.config)  # started at the end of collection already, unless run otherwise
    _RUN["thread"].join(timeout=1800)
    assert not _RUN["thread"].is_alive(), "the trt_bindings run on real bindings did not end within 30 minutes"
    for release, result in _RUN["results"]:
        if not isinstance(result, subprocess.CompletedProcess):
            pytest.skip(f"{LEFT_TO_CI}: TensorRT {release}'s bindings with the plugin host cannot be laid out here "
                        f"({result})")
        assert result.returncode == 0, f"TensorRT {release}: {result.stdout[-4000:]}{result.stderr[-2000:]}"
        summary = result.stdout.strip().splitlines()[-1]
        passed = re.search(r"(\d+) passed", summary)
        assert passed and int(passed.group(1)) >= 50, f"TensorRT {release}: {summary}"
        skips = result.stdout.split("skipped, by reason", 1)[-1] if "skipped, by reason" in result.stdout else ""
        # the host tests ran on the host (none skipped for want of a host layout)
        assert "no plugin host layout" not in skips, f"TensorRT {release}: {skips}"
        if tuple(int(part) for part in release.split(".")[:2]) >= (10, 16):  # tensorrt.plugin's releases
            left_out = re.findall(r"no tensorrt\.plugin|needs tensorrt\.plugin|tensorrt >= 10\.16 is needed", skips)
            assert not left_out, f"TensorRT {release}: {skips}"  # none of them skipped for want of tensorrt.plugin
    releases = os.environ.get("PLUGIN_HOST_RELEASES", "11.4.0.106").split()
    assert [release for release, _ in _RUN["results"]] == releases, _RUN["results"]
