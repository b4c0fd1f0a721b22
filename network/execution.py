"""How the engine executes: an execution context bound once to the caller's buffers, on its own CUDA stream.
The single run (network/run.py), --steps, --benchmark and a model of one's own all execute through it: set the
input shapes and tensor addresses once, then execute_async_v3 on the session's stream, as often as needed.

Engine outputs: the caller names the outputs it wants at an input's address (`outputs_at_inputs`): --steps binds
the state output X_out at the state input X (STATE_OUTPUT_AT_INPUT), as NVIDIA's in-place sample
quickly_deployable_plugins/qdp_runner.py binds its output, since TensorRT reports no engine alias for a plugin's
output; a model of one's own, each output its rewrite says aliases an input. An output that
ICudaEngine.get_aliased_input_tensor names an input for is bound there too (TensorRT's rule for aliased engine
I/O). Every other output gets its own buffer here; an output of a data-dependent shape, or one whose input
differs in shape or dtype, is refused (EngineError). What get_aliased_input_tensor said is kept for the report.
The session needs cuda-python and a GPU (imported inside it); network/timing.py times and captures its calls.
"""

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from common.errors import EngineError
from network.definition import INPUT_STATE, OUTPUT_STATE

if TYPE_CHECKING:
    from tensorrt import ICudaEngine

    from plugin.device_array import DeviceArray


# The state-update network's state output, bound at its state input's address: the engine's write of the
# updated state lands in X, so nothing is copied back. The classifier has no state output (X feeds the mean).
STATE_OUTPUT_AT_INPUT = {OUTPUT_STATE: INPUT_STATE}


def engine_output_names(trt: Any, engine: "ICudaEngine") -> list[str]:
    """The engine's output tensors, in the engine's I/O order."""
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    return [name for name in names if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT]


def engine_output_aliases(trt: Any, engine: "ICudaEngine") -> dict[str, str | None] | None:
    """For each engine output, the input that ICudaEngine.get_aliased_input_tensor names (None: not aliased).

    None when this TensorRT's engine has no get_aliased_input_tensor (older releases).
    """
    get_aliased_input_tensor = getattr(engine, "get_aliased_input_tensor", None)
    if get_aliased_input_tensor is None:
        return None
    return {name: get_aliased_input_tensor(name) or None for name in engine_output_names(trt, engine)}


def output_bindings(output_names: Sequence[str], aliases: Mapping[str, str | None] | None,
                    outputs_at_inputs: Mapping[str, str]) -> dict[str, str | None]:
    """For each engine output, the input whose address it is bound at (None: a buffer of its own).

    `outputs_at_inputs` are the caller's choices; `aliases` is what get_aliased_input_tensor reported (None when
    it cannot be asked), and an output it names an input for is bound there: for the sample's X_out and for
    any model's Rewritten.aliases alike. EngineError (one line, exit 4) when the two disagree, the engine lacks
    an output the caller binds (an engine this sample did not build) or two outputs would share one input.
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
    bound = [alias for alias in bindings.values() if alias is not None]
    shared = sorted({alias for alias in bound if bound.count(alias) > 1})
    if shared:
        raise EngineError(f"two engine outputs would be bound at input {shared[0]!r}: "
                          f"{sorted(name for name, alias in bindings.items() if alias == shared[0])}")
    return bindings


def check_output_buffer(name: str, shape: tuple[int, ...], dtype: np.dtype, alias: str | None, buffer: Any) -> None:
    """EngineError (one line) for an output this session cannot bind: a shape TensorRT knows only after the
    execution (data-dependent, -1), or one bound at input `alias` whose buffer has another shape or dtype
    (the output would write past it or misread it)."""
    if any(size < 0 for size in shape):
        raise EngineError(f"engine output {name!r} has the data-dependent shape {list(shape)}; this runner binds "
                          "outputs whose shape the input shapes decide")
    if alias is not None and (tuple(buffer.shape) != shape or np.dtype(buffer.dtype) != dtype):
        raise EngineError(f"engine output {name!r} ({dtype} {list(shape)}) cannot be bound at input {alias!r} "
                          f"({np.dtype(buffer.dtype)} {list(buffer.shape)}): not the same shape and dtype")


class ExecutionSession:
    """One execution context of `engine` with every I/O tensor bound; execute() enqueues on `self.stream`.

    `inputs` are the caller's buffers (shapes within the engine's profile); the caller may upload new contents
    between executions (same shapes). `outputs_at_inputs` {output: input} binds those outputs at their input's
    address (output_bindings). `aliases` is what get_aliased_input_tensor reported per output (None when it
    cannot be asked); `bound_to_input[output]` names the input an output was bound at, and `outputs[output]`
    holds the buffers this session allocated for the others.
    """

    def __init__(self, trt: Any, engine: "ICudaEngine", inputs: Mapping[str, "DeviceArray"],
                 outputs_at_inputs: Mapping[str, str] | None = None) -> None:
        from cuda.bindings import runtime

        from common.cuda_check import check
        from plugin.device_array import DeviceArray

        self.inputs = dict(inputs)
        self.outputs: dict[str, "DeviceArray"] = {}
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
                if not self.context.set_tensor_address(name, buffer.ptr):
                    raise EngineError(f"TensorRT refused the address of tensor {name!r}")
            for name, alias in bindings.items():
                dims = self.context.get_tensor_shape(name)
                shape = tuple(int(dims[i]) for i in range(len(dims)))
                dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
                check_output_buffer(name, shape, dtype, alias, self.inputs.get(alias) if alias else None)
                if alias is not None:  # e.g. the state output X_out at the state input X's address: in place
                    bound = self.context.set_tensor_address(name, self.inputs[alias].ptr)
                else:
                    self.outputs[name] = DeviceArray(shape, dtype)
                    bound = self.context.set_tensor_address(name, self.outputs[name].ptr)
                if not bound:
                    raise EngineError(f"TensorRT refused the address of tensor {name!r}")
        except BaseException:
            self.close()
            raise

    def execute(self) -> None:
        """Enqueues one execution on self.stream (returns before it finishes)."""
        if not self.context.execute_async_v3(self.stream):
            raise EngineError("TensorRT could not enqueue the engine (execute_async_v3 returned False; see its log)")

    def synchronize(self) -> None:
        from cuda.bindings import runtime

        from common.cuda_check import check

        check(runtime.cudaStreamSynchronize(self.stream))

    def close(self) -> None:
        """Waits for the stream, frees the buffers this session allocated and the stream; inputs stay the caller's."""
        from cuda.bindings import runtime

        from common.cuda_check import check

        if self.stream:
            check(runtime.cudaStreamSynchronize(self.stream))
        for buffer in self.outputs.values():
            buffer.free()
        self.outputs.clear()
        if self.stream:
            check(runtime.cudaStreamDestroy(self.stream))
            self.stream = 0
