"""The trt_bindings tests on TensorRT's real Python bindings, with the plugin host as their libnvinfer, in the
README's test command too, not only in CI's real-bindings matrix: among them the tests that need the real
`tensorrt.plugin` (register and aot_impl in test_aot_plugin.py, the AOT ONNX nodes against the registered
plugins) and those that need the host (tests/test_plugin_host.py, the registry tests).

Where `tensorrt` here is no plugin host layout (the default run has TensorRT-RTX), this lays out TensorRT
11.4.0.106's real Python bindings over stand-in libraries with ../shared/trt-bindings/setup and builds the host
into them (tests/plugin_host/build.py; in pytest's cache, rebuilt only when the host changes), then runs every
trt_bindings test there in a fresh interpreter, as one entry of the matrix does (about 20 s).
PLUGIN_HOST_RELEASES names other releases to run them on too (e.g. "10.4.0 11.4.0.106"). Where the layout
cannot be made (no setup script or compiler, or no package index to fetch the wheel from) it skips, saying that
they were left to CI's matrix, which runs them on 10.4.0, 10.16.1.11 and 11.4.0.106 (.ci/run sets
PLUGIN_HOST_MATRIX=1, so its own default run leaves them to the matrix)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin_host.host import host_library_path

ROOT = Path(__file__).resolve().parent.parent
LEFT_TO_CI = "the trt_bindings tests on real bindings and the plugin host were left to CI's real-bindings matrix (.ci/run)"


@pytest.mark.skipif(os.environ.get("PLUGIN_HOST_MATRIX") == "1",
                    reason=".ci/run runs the trt_bindings tests in its real-bindings matrix, with the plugin host on "
                           "10.4.0, 10.16.1.11 and 11.4.0.106")
def test_trt_bindings_tests_pass_on_real_bindings_with_the_plugin_host(request):
    if host_library_path() is not None:
        pytest.skip("tensorrt here is a plugin host layout: the trt_bindings tests run on it directly")
    from tests.plugin_host.build import HostBuildError, lay_out

    marker = "mark." + "trt_bindings"  # spelled apart, so that .ci/run's grep for the marker leaves this file out
    files = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_*.py")
                   if marker in path.read_text())
    cache = Path(cache.mkdir("plugin-host")) if (cache := getattr(request.config, "cache", None)) else Path("/tmp/plugin-host")
    for release in os.environ.get("PLUGIN_HOST_RELEASES", "11.4.0.106").split():
        try:
            layout = lay_out(release, cache / release)
        except HostBuildError as error:
            pytest.skip(f"{LEFT_TO_CI}: TensorRT {release}'s bindings with the plugin host cannot be laid out here "
                        f"({error})")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(layout), str(ROOT)]))
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
                                 "trt_bindings", *files], cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=600)
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
