"""The engine of a model of the user's own (--onnx, not the sample's network): built by TensorRT's ONNX parser
from the rewritten model with one optimization profile, the run's input shapes, then run once or --steps K times
on buffers the caller owns, each output that aliases an input (Rewritten.aliases) bound at that input's address.

TensorRT reports no engine alias for a plugin's output (ICudaEngine.get_aliased_input_tensor answers None, as
NVIDIA's AliasedIOPlugin log shows), so polygraphy's TrtRunner and trtexec give such an output a buffer of its
own that the plugin never writes: the result lies in the input's buffer. The run binds the output there itself
(network.execution.ExecutionSession's outputs_at_inputs), as --steps binds the sample's X_out at X. Between
runs only the inputs that are no state are uploaded again. run_model_engine needs TensorRT, cuda-python and a
GPU; profile_shapes is plain Python (the report: cli/engine_report.py). The same runs serve an engine saved by
--save_engine and loaded with its description (common.engine_description: the aliases, the I/O checked against
the engine's).
"""

import contextlib
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from common.progress import progress
from network.onnx_parse import OnnxSource, populate_from_onnx
from common.engine_description import EngineDescription, EngineTensor, check_engine_tensors
from network.engine import (
    ShapeRange,
    build_engine_bytes,
    deserialize_engine,
    read_engine_file,
    require_engine_dependencies,
)


def profile_shapes(feeds: Mapping[str, np.ndarray], dynamic: Iterable[str]) -> dict[str, ShapeRange]:
    """The one optimization profile: min = opt = max = the run's shape, for each input with a dynamic dimension."""
    return {name: (shape, shape, shape) for name in dynamic for shape in [tuple(np.shape(feeds[name]))]}


@dataclass(frozen=True)
class ModelEngineRun:
    """The outputs of the last run (host copies); the state outputs ({output: input}) and what
    get_aliased_input_tensor reported per output (None: this TensorRT cannot tell); each run's engine time in ms;
    the engine's I/O tensors as TensorRT reports them (for its description); where the engine came from: built
    from `built_from` in `build_seconds` (its serialized bytes for --save_engine, written by the caller once the
    run has succeeded) or loaded (`loaded`: engine file, description file, plugin; no bytes)."""

    outputs: dict[str, np.ndarray]
    states: dict[str, str]
    aliases: dict[str, str | None] | None
    run_ms: list[float]
    tensors: list[EngineTensor]
    engine_data: bytes | None
    build_seconds: float | None = None
    built_from: str | None = None
    loaded: tuple[str, str, str] | None = None
    tensorrt_version: str = "?"


# TensorRT's DataType names -> the dtype names of common.engine_description
_DTYPE_NAMES = {"FLOAT": "float32", "HALF": "float16", "BF16": "bfloat16", "INT64": "int64", "INT32": "int32",
                "INT8": "int8", "UINT8": "uint8", "BOOL": "bool"}


def engine_tensors(trt: Any, engine: Any) -> list[EngineTensor]:
    """Each I/O tensor of `engine`: (name, is an input, dtype name, shape with -1 for a dynamic dimension)."""
    tensors = []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        dtype = engine.get_tensor_dtype(name)
        dims = engine.get_tensor_shape(name)
        tensors.append((name, engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT,
                        _DTYPE_NAMES.get(getattr(dtype, "name", ""), str(dtype)),
                        tuple(int(dims[axis]) for axis in range(len(dims)))))
    return tensors


def run_model_engine(source: OnnxSource | None, feeds: Mapping[str, np.ndarray], states: Mapping[str, str], runs: int,
                     fresh: Callable[[int], Mapping[str, np.ndarray]], dynamic: Iterable[str], *,
                     loaded: tuple[str, str, EngineDescription] | None = None, verbose: bool = False,
                     show_progress: bool = False) -> ModelEngineRun:
    """Builds the engine of the rewritten model `source` for the shapes of `feeds` (`dynamic`: the inputs with a
    dynamic dimension), or loads `loaded` (engine file, its description's file, the description; source None),
    and runs it `runs` times: run 0 on `feeds`, run k with fresh(k) uploaded into the other inputs' buffers,
    every output of `states` ({output: input}) bound at its input. MissingDependencyError, EngineError or
    InputError (the parser refused a node; a loaded engine that is not its description's) as one line."""
    data: bytes | None
    seconds: float | None
    if loaded is None:
        assert source is not None
        trt = require_engine_dependencies(source.plugin, onnx=True)
        populate = functools.partial(populate_from_onnx, source=source, verbose=verbose)
        with progress("Building the engine from the rewritten model", enabled=show_progress):
            data, seconds = build_engine_bytes(populate, profile_shapes(feeds, dynamic), verbose=verbose)
        engine = deserialize_engine(data, "the engine just built", verbose=verbose, just_built=True)
    else:
        path, description_file, description = loaded
        trt = require_engine_dependencies()  # an AOT engine carries its kernels: no tensorrt.plugin needed to load
        engine = deserialize_engine(read_engine_file(path), path, verbose=verbose)
        check_engine_tensors(description, engine_tensors(trt, engine), f"the engine description {description_file}")
        data, seconds = None, None
    tensors = engine_tensors(trt, engine)
    with progress(f"Running the engine {runs:,} time(s)", enabled=show_progress):
        outputs, aliases, run_ms = _execute(trt, engine, feeds, states, runs, fresh)
    return ModelEngineRun(outputs, dict(states), None if aliases is None else dict(aliases), run_ms, tensors, data,
                          seconds, None if source is None else source.path,
                          None if loaded is None else (loaded[0], loaded[1], loaded[2].plugin),
                          getattr(trt, "__version__", "?"))


def _execute(trt: Any, engine: Any, feeds: Mapping[str, np.ndarray], states: Mapping[str, str], runs: int,
             fresh: Callable[[int], Mapping[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], Any, list[float]]:
    """The runs on one execution context (network.execution.ExecutionSession): the last run's outputs, what
    get_aliased_input_tensor reported, each run's engine time in ms."""
    from network.execution import ExecutionSession, engine_output_names
    from network.timing import EventTimer
    from plugin.device_array import DeviceArray

    with contextlib.ExitStack() as resources:  # released in reverse: the timer, the session, the buffers
        buffers: dict[str, DeviceArray] = {}
        for name, array in feeds.items():
            buffers[name] = DeviceArray.from_array(np.asarray(array))
            resources.callback(buffers[name].free)
        session = ExecutionSession(trt, engine, buffers, outputs_at_inputs=states)
        resources.callback(session.close)
        timer = EventTimer()
        resources.callback(timer.close)
        run_ms = []
        for run in range(runs):
            for name, array in (fresh(run).items() if run else ()):
                buffers[name].upload(array)
            run_ms.append(timer.time(session.stream, session.execute))
        outputs = {name: (buffers[session.bound_to_input[name]] if name in session.bound_to_input
                          else session.outputs[name]).download() for name in engine_output_names(trt, engine)}
        return outputs, session.aliases, run_ms
