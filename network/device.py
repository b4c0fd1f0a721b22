"""Device memory the caller owns, through cuda-python's runtime API, every call checked.

The engine's inputs live in these buffers, so after inference the caller can read X back and see whether the
plugin's in-place update reached the caller's own buffer. No polygraphy or TensorRT here.
"""

import numpy as np

from common.errors import MissingDependencyError
from common.imports import import_module


def require_cuda_device() -> None:
    """MissingDependencyError with a one-line hint unless cuda-python is installed and a CUDA GPU answers."""
    import_module("cuda.bindings")  # MissingDependencyError with the install hint
    from cuda.bindings import runtime

    status, count = runtime.cudaGetDeviceCount()
    if status != runtime.cudaError_t.cudaSuccess or count == 0:
        reason = "no CUDA GPU" if status == runtime.cudaError_t.cudaSuccess else status.name
        raise MissingDependencyError(f"a CUDA GPU is needed to build and run the engine ({reason}); run on a machine with an NVIDIA GPU and driver")


class DeviceBuffer:
    """A cudaMalloc'ed array with copies from and to host numpy arrays that return when done; free() releases it."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        from cuda.bindings import runtime

        from plugin.cuda_check import check

        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        # At least one byte, so that an empty tensor still has a non-null address (TensorRT rejects null).
        self.ptr: int = int(check(runtime.cudaMalloc(max(self.nbytes, 1))))

    @classmethod
    def from_array(cls, array: np.ndarray) -> "DeviceBuffer":
        """A new buffer holding a copy of `array`."""
        buffer = cls(array.shape, array.dtype)
        buffer.upload(array)
        return buffer

    def upload(self, array: np.ndarray) -> None:
        from cuda.bindings import runtime

        from plugin.cuda_check import check

        host = np.ascontiguousarray(array, dtype=self.dtype)
        if host.shape != self.shape:
            raise ValueError(f"cannot upload an array of shape {host.shape} into a buffer of shape {self.shape}")
        if self.nbytes:
            check(runtime.cudaMemcpy(self.ptr, host.ctypes.data, self.nbytes, runtime.cudaMemcpyKind.cudaMemcpyHostToDevice))
            # From pageable memory cudaMemcpy may return before the data has reached the device; wait for it.
            check(runtime.cudaDeviceSynchronize())

    def download(self) -> np.ndarray:
        """A host copy of the buffer's contents (waits for all work on the device)."""
        from cuda.bindings import runtime

        from plugin.cuda_check import check

        host = np.empty(self.shape, dtype=self.dtype)
        if self.nbytes:
            check(runtime.cudaMemcpy(host.ctypes.data, self.ptr, self.nbytes, runtime.cudaMemcpyKind.cudaMemcpyDeviceToHost))
        return host

    def free(self) -> None:
        if self.ptr:
            from cuda.bindings import runtime

            from plugin.cuda_check import check

            check(runtime.cudaFree(self.ptr))
            self.ptr = 0
