"""The GPU check before engine work. The engine's buffers are plugin.device_array.DeviceArray objects that
the caller owns, so after inference the caller can read X back and see whether the plugin's in-place update
reached the caller's own buffer.
"""

from common.errors import MissingDependencyError
from common.imports import import_module


def require_cuda_device() -> None:
    """MissingDependencyError with a one-line hint unless cuda-python is installed and a CUDA GPU answers."""
    import_module("cuda.bindings")  # MissingDependencyError with the install hint
    from cuda.bindings import runtime

    try:
        status, count = runtime.cudaGetDeviceCount()
    except Exception as error:  # cuda-python 13 raises when the driver library itself is missing
        raise MissingDependencyError(f"no CUDA driver here ({type(error).__name__}); run on a machine with an NVIDIA GPU and driver") from None
    if status != runtime.cudaError_t.cudaSuccess or count == 0:
        reason = "no CUDA GPU" if status == runtime.cudaError_t.cudaSuccess else status.name
        raise MissingDependencyError(f"a CUDA GPU is needed to build and run the engine ({reason}); run on a machine with an NVIDIA GPU and driver")
