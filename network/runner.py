"""Runs an engine with polygraphy's TrtRunner on device buffers the caller owns, and reads X back afterwards.

The inputs are uploaded into DeviceArrays (cuda-python) and handed to TrtRunner as polygraphy DeviceViews, so
TensorRT reads the caller's memory directly; after inference X's buffer is copied back to see whether the
plugin's in-place write reached it.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from common.errors import EngineError
from network.builder import INPUT_STATE, OUTPUT_SOFTMAX
from plugin.device_array import DeviceArray
from network.loaders import first_line, tensorrt_log_level

if TYPE_CHECKING:
    from tensorrt import ICudaEngine


@dataclass(frozen=True)
class EngineOutputs:
    """The classifier output, X's buffer before and after inference, and each output's engine-level alias
    (None when this TensorRT cannot report it)."""

    softmax: np.ndarray
    state_before: np.ndarray
    state_after: np.ndarray
    aliased_inputs: dict[str, str | None] | None


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


def run_engine(trt: Any, engine: "ICudaEngine", feeds: Mapping[str, np.ndarray], *, verbose: bool = False) -> EngineOutputs:
    """One inference: upload the feeds, run with TrtRunner, return softmax (float64) and X read back.
    EngineError (one line) when polygraphy reports that TensorRT could not create the context or execute."""
    from polygraphy import cuda as polygraphy_cuda
    from polygraphy.backend.trt import TrtRunner
    from polygraphy.datatype import DataType
    from polygraphy.exception import PolygraphyException

    buffers: dict[str, DeviceArray] = {}
    try:
        for name, array in feeds.items():
            buffers[name] = DeviceArray.from_array(array)
        views = {
            name: polygraphy_cuda.DeviceView(buffer.ptr, buffer.shape, DataType.from_dtype(buffer.dtype))
            for name, buffer in buffers.items()
        }
        try:
            with tensorrt_log_level(verbose), TrtRunner(engine) as runner:
                # Shapes and dtypes were checked against the engine before (network.profile.check_graph_fits).
                outputs = runner.infer(views, check_inputs=False, copy_outputs_to_host=True)
                softmax = np.array(outputs[OUTPUT_SOFTMAX], dtype=np.float64)
        except PolygraphyException as error:
            raise EngineError(f"TensorRT could not run the engine ({first_line(error)}); -v shows TensorRT's log") from None
        state_after = buffers[INPUT_STATE].download()
    finally:
        for buffer in buffers.values():
            buffer.free()
    return EngineOutputs(
        softmax=softmax,
        state_before=np.array(feeds[INPUT_STATE]),
        state_after=state_after,
        aliased_inputs=engine_output_aliases(trt, engine),
    )
