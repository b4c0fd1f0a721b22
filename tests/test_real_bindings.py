"""The tensorrt.plugin tests (the trt_bindings tests that need TensorRT's real `tensorrt.plugin`: register and
aot_impl in test_aot_plugin.py, the AOT ONNX nodes against the registered plugins) in the README's test command
too, not only in CI's real-bindings matrix.

Where `tensorrt.plugin` is not importable (the default run has TensorRT-RTX, which has none), this lays out
TensorRT 11.4.0.106's real Python bindings over stand-in libraries with ../shared/trt-bindings/setup (a few
seconds, then cached) and runs every trt_bindings test on them in a fresh interpreter, as one entry of the
matrix does (about 10 s). Where the layout cannot be made
(no setup script beside the checkout, or no package index to fetch the wheel from) it skips, saying that they
were left to CI's matrix (.ci/run runs them on 10.16.1.11 and 11.4.0.106)."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETUP = ROOT.parent / "shared" / "trt-bindings" / "setup"
VERSION = "11.4.0.106"
LEFT_TO_CI = "the tensorrt.plugin tests were left to CI's real-bindings matrix (.ci/run)"


def tensorrt_plugin_importable() -> bool:
    try:
        return importlib.util.find_spec("tensorrt.plugin") is not None
    except (ImportError, ValueError):  # no tensorrt, or one that cannot be imported here
        return False


def test_tensorrt_plugin_tests_run_on_real_tensorrt_bindings(tmp_path_factory):
    if tensorrt_plugin_importable():
        pytest.skip("tensorrt.plugin is importable here: test_aot_plugin.py runs its tests directly")
    if not SETUP.exists():
        pytest.skip(f"{LEFT_TO_CI}: {SETUP} is not here to lay out TensorRT's real bindings")
    folder = tmp_path_factory.mktemp(f"trt-{VERSION}")
    setup = subprocess.run([str(SETUP), VERSION, str(folder)], capture_output=True, text=True, timeout=600)
    if setup.returncode != 0:
        reason = (setup.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"{LEFT_TO_CI}: the real bindings of TensorRT {VERSION} could not be laid out ({reason})")
    # PLUGIN_HOST_MATRIX: the host tests lay out their own bindings, and this run's outer pytest runs them
    env = dict(os.environ, PYTHONPATH=setup.stdout.strip().splitlines()[-1], PLUGIN_HOST_MATRIX="1")
    marker = "mark." + "trt_bindings"  # spelled apart, so that .ci/run's grep for the marker leaves this file out
    files = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_*.py")
                   if marker in path.read_text())
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "trt_bindings",
                             *files], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 50, summary
    skips = result.stdout.split("skipped, by reason", 1)[-1] if "skipped, by reason" in result.stdout else ""
    left_out = re.findall(r"no tensorrt\.plugin|needs tensorrt\.plugin|tensorrt >= 10\.16 is needed", skips)
    assert not left_out, skips  # none of them skipped for want of tensorrt.plugin
