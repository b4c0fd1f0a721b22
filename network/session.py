"""An execution context bound to device buffers on its own CUDA stream, for repeated and timed executions.

polygraphy's TrtRunner (network/runner.py) serves the single run; --steps and --benchmark execute the same
engine many times on the same buffers and time each execution, so they drive the execution context
directly: set the input shapes and tensor addresses once, then execute_async_v3 on this session's stream.

Engine outputs: where ICudaEngine.get_aliased_input_tensor(output) names an input, TensorRT updates that
input in place and the output must be bound to the input's own address (TensorRT's rule for aliased engine
I/O), so the session binds it there. Every other output gets its own buffer here. Where this TensorRT has no
get_aliased_input_tensor, every output gets its own buffer (nothing is assumed to be aliased).
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from plugin.cuda_check import check
from plugin.device_array import DeviceArray
from network.runner import engine_output_aliases, engine_output_names

if TYPE_CHECKING:
    from tensorrt import ICudaEngine


class ExecutionSession:
    """One execution context of `engine` with every I/O tensor bound; execute() enqueues on `self.stream`.

    `inputs` are the caller's buffers (shapes within the engine's profile); the caller may upload new contents
    between executions (same shapes). `aliases` is what get_aliased_input_tensor reported per output (None when
    it cannot be asked); `bound_to_input[output]` names the input buffer an output was bound to, and
    `outputs[output]` holds the buffers this session allocated for the others.
    """

    def __init__(self, trt: Any, engine: "ICudaEngine", inputs: Mapping[str, DeviceArray]) -> None:
        from cuda.bindings import runtime

        self.inputs = dict(inputs)
        self.outputs: dict[str, DeviceArray] = {}
        self.bound_to_input: dict[str, str] = {}
        self.aliases = engine_output_aliases(trt, engine)
        self.stream: int = 0
        self.context = engine.create_execution_context()
        if self.context is None:
            raise RuntimeError("TensorRT could not create an execution context (out of device memory?)")
        try:
            self.stream = int(check(runtime.cudaStreamCreate()))
            for name, buffer in self.inputs.items():
                if not self.context.set_input_shape(name, buffer.shape):
                    raise RuntimeError(f"TensorRT refused the shape {buffer.shape} for input {name!r}")
                self._bind(name, buffer.ptr)
            for name in engine_output_names(trt, engine):
                alias = (self.aliases or {}).get(name)
                if alias is not None:
                    self.bound_to_input[name] = alias
                    self._bind(name, self.inputs[alias].ptr)
                else:
                    dims = self.context.get_tensor_shape(name)
                    shape = tuple(int(dims[i]) for i in range(len(dims)))
                    self.outputs[name] = DeviceArray(shape, np.dtype(trt.nptype(engine.get_tensor_dtype(name))))
                    self._bind(name, self.outputs[name].ptr)
        except BaseException:
            self.close()
            raise

    def _bind(self, name: str, address: int) -> None:
        if not self.context.set_tensor_address(name, address):
            raise RuntimeError(f"TensorRT refused the address of tensor {name!r}")

    def execute(self) -> None:
        """Enqueues one execution on self.stream (returns before it finishes)."""
        if not self.context.execute_async_v3(self.stream):
            raise RuntimeError("TensorRT could not enqueue the engine (execute_async_v3 returned False; see its log)")

    def synchronize(self) -> None:
        from cuda.bindings import runtime

        check(runtime.cudaStreamSynchronize(self.stream))

    def close(self) -> None:
        """Waits for the stream, frees the buffers this session allocated and the stream; inputs stay the caller's."""
        from cuda.bindings import runtime

        if self.stream:
            check(runtime.cudaStreamSynchronize(self.stream))
        for buffer in self.outputs.values():
            buffer.free()
        self.outputs.clear()
        if self.stream:
            check(runtime.cudaStreamDestroy(self.stream))
            self.stream = 0


def copy_device_to_device(dst: DeviceArray, src: DeviceArray, stream: int) -> None:
    """Enqueues a copy of src's bytes into dst (same size) on `stream`."""
    from cuda.bindings import runtime

    if dst.nbytes != src.nbytes:
        raise ValueError(f"cannot copy {src.nbytes} bytes into a buffer of {dst.nbytes}")
    if src.nbytes:
        check(runtime.cudaMemcpyAsync(dst.ptr, src.ptr, src.nbytes, runtime.cudaMemcpyKind.cudaMemcpyDeviceToDevice, stream))
