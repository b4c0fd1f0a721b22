"""Checked cuda-python calls: `check(driver.cuMemAlloc(n))` returns the allocation or raises CudaError.

cuda-python returns `(status, *values)` from every driver, runtime and NVRTC call instead of raising. `check`
unwraps that tuple: on success it returns None, the one value, or the tuple of values; on failure it raises
CudaError whose message carries the error's name, CUDA's description of it and the failing call.
"""

import inspect
from typing import Any

from common.errors import CudaError  # defined there so that the CLI can catch it without importing plugin/


class NvrtcError(CudaError):
    """NVRTC could not compile the kernel source; the message carries the compiler's log."""


def check(result: Any, call: str | None = None) -> Any:
    """Unwraps cuda-python's `(status, *values)`; raises CudaError unless status is success.

    `call` names the call in the error message; without it the caller's source line is used (read only when
    the call failed, so checking costs nothing on success).
    """
    status, values = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
    if int(status) != 0:  # CUDA_SUCCESS, cudaSuccess and NVRTC_SUCCESS are all 0
        name = getattr(status, "name", str(status))
        raise CudaError(f"{name}: {_describe(status)} (in {call or _caller_source()})", name)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _describe(status: Any) -> str:
    """CUDA's own one-line description of an error status, or '' where none can be had."""
    from cuda.bindings import driver, nvrtc, runtime

    try:
        if isinstance(status, driver.CUresult):
            text = driver.cuGetErrorString(status)[1]
        elif isinstance(status, runtime.cudaError_t):
            text = runtime.cudaGetErrorString(status)[1]
        elif isinstance(status, nvrtc.nvrtcResult):
            text = nvrtc.nvrtcGetErrorString(status)[1]
        else:
            return ""
    except Exception:  # e.g. cuGetErrorString where libcuda cannot be loaded: the name alone must do
        return ""
    return text.decode(errors="replace") if text else ""


def _caller_source() -> str:
    """The source line that called check(), e.g. 'check(driver.cuMemAlloc(size))'."""
    frame = inspect.currentframe()
    caller = frame.f_back.f_back if frame and frame.f_back else None
    if caller is None:
        return "an unnamed CUDA call"
    info = inspect.getframeinfo(caller)
    line = info.code_context[0].strip() if info.code_context else ""
    return f"{line} at {info.filename.rsplit('/', 1)[-1]}:{info.lineno}"


def current_context_id(driver: Any) -> int:
    """A process-unique id of the current CUDA context (cuCtxGetId: unlike the handle, never reused after a context
    is destroyed); if no context is current, device 0's primary context is made current first. MissingDependencyError
    where cuda-python finds no driver library (it raises rather than returning a status)."""
    try:
        result = driver.cuInit(0)
    except Exception as error:
        from common.errors import MissingDependencyError

        raise MissingDependencyError(f"no CUDA driver here ({error}); the kernel needs an NVIDIA GPU") from None
    check(result)
    context = check(driver.cuCtxGetCurrent())
    if int(context) == 0:
        device = check(driver.cuDeviceGet(0))
        context = check(driver.cuDevicePrimaryCtxRetain(device))
        check(driver.cuCtxSetCurrent(context))
    return int(check(driver.cuCtxGetId(context)))
