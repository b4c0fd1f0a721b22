"""Lazy imports in the style of polygraphy: heavy modules load when first used, with a one-line hint if absent."""

import importlib
from types import ModuleType

from common.errors import MissingDependencyError
from common.versions import CUDA12_REQUIREMENTS, POLYGRAPHY_FLOOR, TENSORRT_FLOOR

INSTALL_HINTS = {
    "tensorrt": f"TensorRT >= {TENSORRT_FLOOR} is needed to build and run the engine: pip install 'tensorrt>={TENSORRT_FLOOR}' "
    f"(its libraries come from NVIDIA's package index, pypi.nvidia.com, which the tensorrt package on PyPI fetches; "
    f"a CUDA 12 driver needs pip install -r {CUDA12_REQUIREMENTS} instead)",
    "cuda.bindings": "cuda-python is needed for the CUDA kernel: pip install cuda-python nvidia-cuda-nvrtc "
    f"nvidia-cuda-runtime (a CUDA 12 driver: pip install -r {CUDA12_REQUIREMENTS})",
    "polygraphy": f"polygraphy >= {POLYGRAPHY_FLOOR} is needed to build and run the engine: "
    f"pip install 'polygraphy>={POLYGRAPHY_FLOOR}'",
}
# --onnx and onnx_path/rewrite.py: the optional extras of requirements-onnx.txt
ONNX_INSTALL_HINT = "pip install -r requirements-onnx.txt (onnx, onnx-graphsurgeon, onnxruntime)"
INSTALL_HINTS.update(dict.fromkeys(("onnx", "onnx_graphsurgeon", "onnxruntime"), ONNX_INSTALL_HINT))


def import_module(name: str) -> ModuleType:
    """Imports `name`, or raises MissingDependencyError with the hint that says what to install."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        top = name if name in INSTALL_HINTS else name.split(".")[0]
        hint = INSTALL_HINTS.get(top, f"pip install {top}")
        raise MissingDependencyError(f"{name} could not be imported ({error}); {hint}") from None


def import_tensorrt() -> ModuleType:
    """Imports TensorRT; a folder of type stubs (tensorrt-stubs) imports as an empty namespace and counts as absent."""
    trt = import_module("tensorrt")
    if not hasattr(trt, "Builder"):
        raise MissingDependencyError(f"tensorrt is only type stubs or an empty package here; {INSTALL_HINTS['tensorrt']}")
    return trt


def is_full_tensorrt(trt: ModuleType) -> bool:
    """True for a TensorRT that can add Python plugins to a network (TensorRT-RTX cannot)."""
    network_type = getattr(trt, "INetworkDefinition", None)
    return network_type is not None and hasattr(network_type, "add_plugin_v3")
