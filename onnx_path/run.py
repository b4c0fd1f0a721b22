"""Run: a read model on the CPU, each run(feeds) -> outputs by name: the ORIGINAL in ONNX Runtime (polygraphy's
convention: what an engine is compared with) and the REWRITTEN one with the plugin nodes by their CPU reference
(a dry run), in onnx_path.runtime's sessions, ONNX Runtime's refusals naming the model's file; the sample
network's output from such a run; outputs in the model's own dtypes. numpy (onnx and onnxruntime load inside the
sessions)."""

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from common.errors import InputError, ModelError
from common.text import shown_path
from onnx_path.check import FLOAT16_LARGEST
from onnx_path.read import OnnxModel

Run = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


@contextlib.contextmanager
def naming_the_model(model: OnnxModel) -> Iterator[None]:
    """An InputError of ONNX Runtime's (a model or feeds it refuses) as a ModelError naming the model's file
    first."""
    try:
        yield
    except InputError as error:
        raise ModelError(f"{shown_path(model.path)}: {error}") from None


def original_run(model: OnnxModel, proto: Any = None) -> Run:
    """The original model in one ONNX Runtime session (a float16 model runs as its float32 copy); plugin nodes
    it already holds (OnnxModel.holds_plugin_nodes) computed by their CPU reference (RewrittenSession).
    `proto`: a model run in its place (onnx_path.overwrite's probe: the original with more outputs)."""
    from onnx_path.runtime import OnnxRuntimeSession, RewrittenSession

    return _session_run(model, RewrittenSession if model.holds_plugin_nodes else OnnxRuntimeSession,
                        model.original if proto is None else proto)


def rewritten_run(model: OnnxModel) -> Run:
    """The rewritten model in ONNX Runtime, the plugin nodes by their CPU reference, in one session
    (onnx_path.runtime.RewrittenSession; the reference adds into copies, never into the feeds)."""
    from onnx_path.runtime import RewrittenSession

    return _session_run(model, RewrittenSession, model.rewritten.model)


def _session_run(model: OnnxModel, session_type: Any, proto: Any) -> Run:
    """run(feeds) of one `session_type` session of `proto`, ONNX Runtime's refusals naming the model's file."""
    with naming_the_model(model):
        session = session_type(proto)

    def run(feeds: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        with naming_the_model(model):
            return session.run(feeds)
    return run


def sample_output(run: Run, graph: Any, weights: np.ndarray, precision: str,
                  batches: list[np.ndarray] | None = None) -> np.ndarray:
    """The sample network's result from `run` on the graph (graph.Graph): the classifier's softmax on the
    engine's feeds (X, src, idx, W), or for --steps' `batches` the final state after one run per batch, X_out
    fed back as X (as --steps runs the engine); float64."""
    from onnx_path.inputs import run_in_steps
    from network.definition import INPUT_INDEX, INPUT_SOURCE, INPUT_STATE, OUTPUT_SOFTMAX, OUTPUT_STATE
    from network.run import feature_dtype, make_engine_inputs, state_and_features
    from network.steps import step_inputs

    if batches is None:
        return np.asarray(run(make_engine_inputs(graph, weights, precision))[OUTPUT_SOFTMAX], dtype=np.float64)
    state, features = state_and_features(graph.node_features, graph.state, feature_dtype(precision))

    def batch(step: int) -> dict[str, np.ndarray]:
        assert batches is not None
        return dict(zip((INPUT_SOURCE, INPUT_INDEX), step_inputs(features, batches[step])))

    outputs = run_in_steps(run, {INPUT_STATE: state, **batch(0)}, batch, {OUTPUT_STATE: INPUT_STATE}, len(batches))
    return np.asarray(outputs[OUTPUT_STATE], dtype=np.float64)


def as_output_dtype(outputs: Mapping[str, np.ndarray], specs: tuple[Any, ...], what: str) -> dict[str, np.ndarray]:
    """Each output in the model's dtype (a float16 model runs in ONNX Runtime as its float32 copy); InputError
    for a float16 output whose value lies beyond float16's range, where the engine's output would be inf."""
    result = {name: np.asarray(value) for name, value in outputs.items()}
    for spec in specs:
        value = result.get(spec.name)
        if value is None or spec.dtype != np.float16 or value.dtype == np.float16:
            continue
        with np.errstate(over="ignore"):
            half = value.astype(np.float16)
        beyond = np.isfinite(value) & ~np.isfinite(half)
        if beyond.any():
            position = [int(i) for i in np.argwhere(beyond)[0]]
            raise InputError(f"output {spec.name}{position} = {float(value[tuple(position)]):.6g} in {what} is beyond "
                             f"the largest float16 value {FLOAT16_LARGEST:g}: the engine's float16 output would be "
                             "inf; use smaller inputs")
        result[spec.name] = half
    return result
