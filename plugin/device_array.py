"""Device memory owned by the caller, through cuda-python's driver API, every call checked.

One small class serves the kernel's host entry (plugin.kernels.scatter_add_numpy), the engine's buffers
(network/) and the GPU tests. Copies block until the data has arrived, so the buffer can be used from any
stream right after.
"""

import numpy as np

from common.cuda_check import check


class DeviceArray:
    """cuMemAlloc'ed memory for one numpy shape and dtype, with blocking copies; free() releases it."""

    def __init__(self, shape: tuple[int, ...], dtype: object) -> None:
        from cuda.bindings import driver

        from plugin.kernels.launch import current_context

        current_context()  # device 0's primary context, the one the CUDA runtime and TensorRT use
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)  # type: ignore[call-overload]
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        # At least one byte, so that an empty tensor still has a non-null address (TensorRT rejects null).
        self.ptr = int(check(driver.cuMemAlloc(max(self.nbytes, 1))))

    @classmethod
    def from_array(cls, array: np.ndarray) -> "DeviceArray":
        """A new device array holding a copy of `array`."""
        buffer = cls(array.shape, array.dtype)
        buffer.upload(array)
        return buffer

    def upload(self, array: np.ndarray) -> None:
        from cuda.bindings import driver

        host = np.ascontiguousarray(array, dtype=self.dtype)
        if host.shape != self.shape:
            raise ValueError(f"cannot upload an array of shape {host.shape} into a device array of shape {self.shape}")
        if self.nbytes:
            check(driver.cuMemcpyHtoD(self.ptr, host.ctypes.data, self.nbytes))
            # From pageable memory the copy may return before the data reaches the device, and a
            # non-blocking stream would not wait for it: wait here.
            check(driver.cuCtxSynchronize())

    def fill_bytes(self, byte: int) -> None:
        """Sets every byte to `byte` (e.g. 0xFF to poison an output before a launch); waits until done."""
        from cuda.bindings import driver

        if self.nbytes:
            check(driver.cuMemsetD8(self.ptr, byte, self.nbytes))
            check(driver.cuCtxSynchronize())

    def download(self) -> np.ndarray:
        """A host copy of the contents, after all work already queued on the device."""
        from cuda.bindings import driver

        host = np.empty(self.shape, dtype=self.dtype)
        if self.nbytes:
            check(driver.cuCtxSynchronize())
            check(driver.cuMemcpyDtoH(host.ctypes.data, self.ptr, self.nbytes))
        return host

    def free(self) -> None:
        from cuda.bindings import driver

        if self.ptr:
            check(driver.cuMemFree(self.ptr))
            self.ptr = 0
