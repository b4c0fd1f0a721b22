"""The trt_bindings tests on TensorRT's real Python bindings, with the plugin host as their libnvinfer, in the
README's test command too, not only in CI's real-bindings matrix: among them the tests that need the real
`tensorrt.plugin` (register and aot_impl in test_aot_plugin.py, the AOT ONNX nodes against the registered
plugins) and those that need the host (tests/plugin/test_plugin_host.py, the registry tests).

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
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.background import BackgroundJob
from tests.plugin_host.host import host_library_path

ROOT = Path(__file__).resolve().parents[2]
LEFT_TO_CI = "the trt_bindings tests on real bindings and the plugin host were left to CI's real-bindings matrix (.ci/run)"
IN_THE_MATRIX = os.environ.get("PLUGIN_HOST_MATRIX") == "1"

# The background run (tests/conftest.py calls start_background): results["runs"] gets (release, outcome), an
# outcome being the trt_bindings run's CompletedProcess or the HostBuildError that stopped the layout.
_RUN: dict[str, BackgroundJob] = {}


def binding_test_files() -> list[str]:
    marker = "mark." + "trt_bindings"  # spelled apart, so that .ci/run's grep for the marker leaves this file out
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
                  if marker in path.read_text())


def _run_releases(job: BackgroundJob, cache: Path, releases: list[str]) -> None:
    from tests.plugin_host.build import HostBuildError, lay_out

    runs = job.results["runs"] = []
    files = binding_test_files()
    for release in releases:
        if job.stopped:
            return
        try:
            layout = lay_out(release, cache / release)
        except HostBuildError as error:
            runs.append((release, error))
            return
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(layout), str(ROOT)]))
        result = job.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          f"--basetemp={job.folder / release}", "-m", "trt_bindings", *files], cwd=ROOT, env=env)
        if result is not None:
            runs.append((release, result))


def start_background(config: pytest.Config) -> None:
    """Starts the layouts and their trt_bindings runs, once per session (where this test would not skip for the
    matrix or for a host layout already under it), with a --basetemp of their own."""
    if "job" in _RUN or IN_THE_MATRIX or host_library_path() is not None:
        return
    cache = Path(cache.mkdir("plugin-host")) if (cache := getattr(config, "cache", None)) else Path("/tmp/plugin-host")
    releases = os.environ.get("PLUGIN_HOST_RELEASES", "11.4.0.106").split()
    _RUN["job"] = BackgroundJob("trt-bindings-run", lambda job: _run_releases(job, cache, releases),
                                Path(tempfile.mkdtemp(prefix="trt-bindings-run-")))


def stop_background() -> None:
    """Ends a background run this test did not wait for and removes its folder (pytest_sessionfinish)."""
    if "job" in _RUN:
        _RUN["job"].stop()


@pytest.mark.skipif(IN_THE_MATRIX,
                    reason=".ci/run runs the trt_bindings tests in its real-bindings matrix, with the plugin host on "
                           "10.4.0, 10.16.1.11 and 11.4.0.106")
def test_trt_bindings_tests_pass_on_real_bindings_with_the_plugin_host(request):
    if host_library_path() is not None:
        pytest.skip("tensorrt here is a plugin host layout: the trt_bindings tests run on it directly")
    start_background(request.config)  # started at the end of collection already, unless run otherwise
    job = _RUN["job"]
    job.wait(timeout=1800)
    for release, result in job.results["runs"]:
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
    assert [release for release, _ in job.results["runs"]] == releases, job.results["runs"]
