"""An execution context bound to device buffers on its own CUDA stream, for repeated and timed executions.

polygraphy's TrtRunner (network/runner.py) serves the single run; --steps and --benchmark execute the same
engine many times on the same buffers and time each execution, so they drive the execution context
directly: set the input shapes and tensor addresses once, then execute_async_v3 on this session's stream.

Engine outputs: the caller names the outputs it wants at an input's address (`outputs_at_inputs`; --steps
binds its state output X_out at X, as NVIDIA's in-place sample quickly_deployable_plugins/qdp_runner.py
does), and an output that ICudaEngine.get_aliased_input_tensor names an input for is bound there too
(TensorRT's rule for aliased engine I/O). Every other output gets its own buffer here. What
get_aliased_input_tensor said is kept for the report (None where this TensorRT has no such method).
"""

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from common.errors import EngineError
from plugin.cuda_check import check
from plugin.device_array import DeviceArray
from network.runner import engine_output_aliases, engine_output_names

if TYPE_CHECKING:
    from tensorrt import ICudaEngine


def output_bindings(output_names: Sequence[str], aliases: Mapping[str, str | None] | None,
                    outputs_at_inputs: Mapping[str, str]) -> dict[str, str | None]:
    """For each engine output, the input whose address it is bound at (None: a buffer of its own).

    `outputs_at_inputs` are the caller's choices; `aliases` is what get_aliased_input_tensor reported (None when
    it cannot be asked), and an output it names an input for is bound there. EngineError (one line, exit 4)
    when the two disagree or the engine lacks an output the caller binds: an engine this sample did not build.
    """
    bindings: dict[str, str | None] = {}
    for name in output_names:
        wanted, reported = outputs_at_inputs.get(name), (aliases or {}).get(name)
        if wanted is not None and reported is not None and wanted != reported:
            raise EngineError(f"engine output {name!r}: TensorRT aliases it to input {reported!r}, not {wanted!r}")
        bindings[name] = wanted or reported
    unknown = sorted(set(outputs_at_inputs) - set(output_names))
    if unknown:
        raise EngineError(f"the engine has no output(s) {unknown}; its outputs are {list(output_names)}")
    return bindings


class ExecutionSession:
    """One execution context of `engine` with every I/O tensor bound; execute() enqueues on `self.stream`.

    `inputs` are the caller's buffers (shapes within the engine's profile); the caller may upload new contents
    between executions (same shapes). `outputs_at_inputs` {output: input} binds those outputs at their input's
    address (output_bindings). `aliases` is what get_aliased_input_tensor reported per output (None when it
    cannot be asked); `bound_to_input[output]` names the input an output was bound at, and `outputs[output]`
    holds the buffers this session allocated for the others.
    """

    def __init__(self, trt: Any, engine: "ICudaEngine", inputs: Mapping[str, DeviceArray],
                 outputs_at_inputs: Mapping[str, str] | None = None) -> None:
        from cuda.bindings import runtime

        self.inputs = dict(inputs)
        self.outputs: dict[str, DeviceArray] = {}
        self.aliases = engine_output_aliases(trt, engine)
        bindings = output_bindings(engine_output_names(trt, engine), self.aliases, outputs_at_inputs or {})
        self.bound_to_input = {name: alias for name, alias in bindings.items() if alias is not None}
        self.stream: int = 0
        self.context = engine.create_execution_context()
        if self.context is None:
            raise EngineError("TensorRT could not create an execution context (out of device memory?)")
        try:
            self.stream = int(check(runtime.cudaStreamCreate()))
            for name, buffer in self.inputs.items():
                if not self.context.set_input_shape(name, buffer.shape):
                    raise EngineError(f"TensorRT refused the shape {buffer.shape} for input {name!r}")
                self._bind(name, buffer.ptr)
            for name, alias in bindings.items():
                if alias is not None:
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
            raise EngineError(f"TensorRT refused the address of tensor {name!r}")

    def execute(self) -> None:
        """Enqueues one execution on self.stream (returns before it finishes)."""
        if not self.context.execute_async_v3(self.stream):
            raise EngineError("TensorRT could not enqueue the engine (execute_async_v3 returned False; see its log)")

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

