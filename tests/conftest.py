"""Markers that skip with a reason where the GPU or the full TensorRT is missing, and the TensorRT stand-in."""

import functools
import importlib
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common.errors import MissingDependencyError  # noqa: E402
from common.imports import import_tensorrt, is_full_tensorrt  # noqa: E402


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


@functools.lru_cache(maxsize=None)
def full_tensorrt_missing_reason() -> str | None:
    """None where the full TensorRT (with add_plugin_v3) and a GPU exist, else why not."""
    if os.environ.get("TRT_RTX"):
        return "TensorRT-RTX is loaded as `tensorrt` (TRT_RTX=1): it cannot add Python plugins to a network"
    try:
        trt = import_tensorrt()
    except MissingDependencyError:
        return "TensorRT is not installed (pip install 'tensorrt>=10.3' where NVIDIA's package index is reachable)"
    if not is_full_tensorrt(trt):
        return f"this tensorrt ({getattr(trt, '__version__', '?')}) cannot add Python plugins (no add_plugin_v3)"
    return cuda_gpu_missing_reason()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.keywords:
            reason = cuda_gpu_missing_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"GPU test: {reason}"))
        if "tensorrt" in item.keywords:
            reason = full_tensorrt_missing_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"end-to-end test on real TensorRT: {reason}"))


@pytest.fixture(scope="session")
def trt():
    """The full TensorRT where it is installed, else TensorRT-RTX standing in for it (aliased as `tensorrt`).

    The stand-in has the real builder, DataType, TensorFormat, PluginTensorDesc and IPluginV3* bases, so the
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
