"""Markers that skip with a reason where the GPU or the full TensorRT is missing, and the TensorRT stand-ins.

Three kinds of `tensorrt` can be under the tests, and the report header names the one in use:
- the full TensorRT (a user's machine with a GPU): everything runs;
- none (CI's default run): the `trt` fixture gives TensorRT-RTX, which has a real builder but no add_plugin_v3;
- TensorRT's real Python bindings over stand-in libraries (`../shared/trt-bindings/setup VERSION DIR`, then
  PYTHONPATH=DIR; CI's real-bindings matrix): real classes, enums and descriptor types, no Builder or Runtime.
  Tests marked `trt_bindings` run there; other tests that use `trt` and `tensorrt` tests skip there, saying so.
  Where tests/plugin_host/build.py made the project's plugin host the layout's libnvinfer (10.4.0, 10.16.1.11 and
  11.4.0.106 in the matrix), `plugin_registry` is the host's registry; without it, tests that ask for it skip.
"""

import collections
import functools
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common.errors import MissingDependencyError  # noqa: E402
from common.imports import import_tensorrt, is_full_tensorrt  # noqa: E402
from common.versions import TENSORRT_FLOOR  # noqa: E402
from tests.plugin_host.host import host_library_path  # noqa: E402

pytest_plugins = ("tests.support.nvrtc_cubins",)  # the cubin_for fixture: NVRTC compiles in the background, cached


@functools.lru_cache(maxsize=None)
def cuda_gpu_missing_reason() -> str | None:
    """None where a CUDA GPU answers through cuda-python's driver API, else why not."""
    try:
        from cuda.bindings import driver
    except ImportError as error:
        return f"cuda-python is not installed ({error})"
    try:
        (status,) = driver.cuInit(0)
    except Exception as error:  # cuda-python 13 raises when the driver library itself is absent
        return f"no CUDA driver library here ({type(error).__name__})"
    if status != driver.CUresult.CUDA_SUCCESS:
        return f"no CUDA driver or GPU here (cuInit: {status.name})"
    status, count = driver.cuDeviceGetCount()
    if status != driver.CUresult.CUDA_SUCCESS or count == 0:
        return "no CUDA GPU here"
    return None


def installed_tensorrt() -> ModuleType | None:
    """The importable `tensorrt` (full TensorRT or the real bindings over stand-in libraries), else None."""
    try:
        return import_tensorrt()
    except MissingDependencyError:
        return None


@functools.lru_cache(maxsize=None)
def stand_in_libraries_reason() -> str | None:
    """Why this `tensorrt` has no Builder, Runtime or plugin registry where it is TensorRT's real Python bindings
    over the stand-in libraries of ../shared/trt-bindings/setup (tensorrt_libs.STUB, or no plugin registry);
    None for the full TensorRT or none at all."""
    trt = installed_tensorrt()
    if trt is None:
        return None
    stub = getattr(sys.modules.get("tensorrt_libs"), "STUB", False)
    if not stub and trt.get_plugin_registry() is not None:
        return None
    return (f"needs TensorRT's Builder, Runtime or plugin registry: this tensorrt {trt.__version__} is the real Python "
            "bindings over stand-in libraries (tensorrt_libs.STUB), which have none")


@functools.lru_cache(maxsize=None)
def full_tensorrt_missing_reason() -> str | None:
    """None where the full TensorRT (with add_plugin_v3) and a GPU exist, else why not."""
    if os.environ.get("TRT_RTX"):
        return "TensorRT-RTX is loaded as `tensorrt` (TRT_RTX=1): it cannot add Python plugins to a network"
    trt = installed_tensorrt()
    if trt is None:
        return f"TensorRT is not installed (pip install 'tensorrt>={TENSORRT_FLOOR}' where NVIDIA's package index is reachable)"
    if not is_full_tensorrt(trt):
        return f"this tensorrt ({getattr(trt, '__version__', '?')}) cannot add Python plugins (no add_plugin_v3)"
    return stand_in_libraries_reason() or cuda_gpu_missing_reason()


def pytest_report_header(config):
    """Which `tensorrt` this run uses, so that every run of the matrix says what it tested."""
    trt = installed_tensorrt()
    if trt is None:
        try:
            standin = importlib.import_module("tensorrt_rtx_bindings")
        except ImportError:
            return "tensorrt: not installed, nor TensorRT-RTX: tests that use TensorRT's types skip"
        return (f"tensorrt: not installed; the `trt` fixture uses TensorRT-RTX {standin.__version__} "
                f"({Path(standin.__file__).parent}) as a stand-in")
    kind = "real Python bindings over stand-in libraries" if stand_in_libraries_reason() else "full TensorRT"
    if host_library_path():
        kind += "; libnvinfer is the plugin host, tests/plugin_host"
    return f"tensorrt: {trt.__version__} from {Path(trt.__file__).parent} ({kind})"


def pytest_collection_modifyitems(config, items):
    stand_in_reason = stand_in_libraries_reason()
    for item in items:
        if "gpu" in item.keywords:
            reason = cuda_gpu_missing_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"GPU test: {reason}"))
        if "tensorrt" in item.keywords:
            reason = full_tensorrt_missing_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"end-to-end test on real TensorRT: {reason}"))
        elif stand_in_reason and "trt" in getattr(item, "fixturenames", ()) and "trt_bindings" not in item.keywords:
            item.add_marker(pytest.mark.skip(reason=stand_in_reason))


_STARTED: list[ModuleType] = []  # test modules whose start_background ran (stop_background at the end)


def pytest_configure(config):
    """The folder of exported models this test command shares (tests/support/onnx_helpers.py, open_exports)."""
    from tests.support.onnx_helpers import open_exports

    open_exports()


def pytest_unconfigure(config):
    from tests.support.onnx_helpers import close_exports

    close_exports()


def pytest_collection_finish(session):
    """Started in the background while the tests before them run, where a test that will run (selected, not
    skipped) needs them: PyG's layers and the script's sample model exported (tests/support/onnx_pyg.py,
    tests/support/onnx_helpers.py), and the start_background(config) of each test module that has one and a test to run
    (tests/plugin/test_real_bindings.py: the trt_bindings run on real bindings with the plugin host;
    tests/cpp/test_own_model_walk.py: the docs walk's export and dry run)."""
    option = session.config.option
    if any(getattr(option, name, False) for name in ("collectonly", "setuponly", "setupplan")):
        return
    running = [item for item in session.items if not item.get_closest_marker("skip")]
    if any("pyg_models" in getattr(item, "fixturenames", ()) for item in running):
        from tests.support.onnx_pyg import start_pyg_export

        start_pyg_export()
    modules = list({id(module): module for item in running if (module := getattr(item, "module", None))}.values())
    from tests.support.onnx_helpers import start_background_exports

    start_background_exports(modules)  # the script's export of the sample model (tests/support/onnx_helpers.py)
    for module in modules:
        if hasattr(module, "start_background"):
            _STARTED.append(module)
            module.start_background(session.config)


def pytest_runtest_setup(item):
    """After the session's first ONNX export, the later ones reuse onnxscript's table of torchlib functions
    (tests/onnx_helpers.share_torchlib_ops)."""
    helpers = sys.modules.get("tests.support.onnx_helpers")
    if helpers is not None:
        helpers.share_torchlib_ops()


def pytest_sessionfinish(session):
    """A background export or run no test waited for does not outlive the session."""
    helpers = sys.modules.get("tests.support.onnx_helpers")
    if helpers is not None:
        helpers.stop_script_export()
    pyg = sys.modules.get("tests.support.onnx_pyg")
    if pyg is not None:
        pyg.stop_pyg_export()
    for module in _STARTED:
        module.stop_background()


def pytest_terminal_summary(terminalreporter):
    """The skips grouped by reason, one line each with its count (pytest.ini asks -rfE: no line per skip)."""
    reasons: collections.Counter[str] = collections.Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if reasons:
        terminalreporter.section("skipped, by reason", sep="-")
        for reason, count in reasons.most_common():
            terminalreporter.write_line(f"{count:4d}  {reason}")


@pytest.fixture
def plugin_registry(trt):
    """TensorRT's plugin registry: the full TensorRT's, TensorRT-RTX's, or over stand-in libraries the plugin
    host's (tests/plugin_host, laid out by tests/plugin_host/build.py); skips (saying why) where there is none."""
    registry = trt.get_plugin_registry()
    if registry is None:
        pytest.skip(stand_in_libraries_reason() or f"this tensorrt {trt.__version__} has no plugin registry")
    return registry


@pytest.fixture(scope="session")
def trt():
    """The installed `tensorrt` (the full TensorRT, or in the real-bindings matrix TensorRT's real Python bindings
    over stand-in libraries), else TensorRT-RTX standing in for it (aliased as `tensorrt`).

    TensorRT-RTX has the real builder, DataType, TensorFormat, PluginTensorDesc and IPluginV3* bases, so the
    plugin's build-time methods and the plugin-free part of the network run on it; it cannot add a Python
    plugin to a network (no add_plugin_v3).
    """
    try:
        return import_tensorrt()
    except MissingDependencyError:
        pass
    try:
        standin = importlib.import_module("tensorrt_rtx_bindings")
    except ImportError:
        pytest.skip("neither tensorrt nor tensorrt_rtx_bindings (pip install tensorrt-rtx-cu13-bindings) is installed")
    sys.modules["tensorrt"] = standin
    return standin
