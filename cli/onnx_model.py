"""--onnx MODEL.onnx in a run of aliased_io_plugin.py: the model read and rewritten with the in-place plugin
(network.onnx_rewrite), checked against the run, written with --save_onnx, and the ORIGINAL model run in ONNX
Runtime for --validate and --dry-run (polygraphy's convention: TensorRT against onnxrt). onnx,
onnx-graphsurgeon and onnxruntime only, no TensorRT; a bad model stops with exit 2 before any engine work.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cli.options import EngineOptions
from cli.report import state_label, verdict
from common.errors import InputError, MissingDependencyError
from common.text import shown_path

ONNX_PACKAGES = ("onnx", "onnx_graphsurgeon")
RUNTIME_PACKAGE = "onnxruntime"
INSTALL_LINE = "pip install -r requirements-onnx.txt"
SAMPLE_IO = ("X [N, F], src [E, F], idx [E] int64 and W [C, F] -> softmax [C, N] (the classifier), or X, src, "
             "idx -> X_out [N, F] (the state update of --steps), as python3 -m export.export_onnx writes them")
# An engine and ONNX Runtime each lie within the float64 reference's tolerance (bound) of the exact result, so
# within twice of each other.
AGAINST_ONNXRUNTIME = 2.0


def require_onnx_packages(with_runtime: bool) -> None:
    """MissingDependencyError (one line, exit 3) unless onnx and onnx-graphsurgeon (and, to run the original
    model, onnxruntime) can be imported; checked before the model or the graph is read."""
    import importlib.util

    wanted = ONNX_PACKAGES + ((RUNTIME_PACKAGE,) if with_runtime else ())
    absent = [name.replace("_", "-") for name in wanted if importlib.util.find_spec(name) is None]
    if absent:
        needs = "--onnx needs" if not with_runtime else "--onnx with --validate or --dry-run needs"
        raise MissingDependencyError(f"{', '.join(absent)} not installed; {needs} onnx, onnx-graphsurgeon"
                                     + (" and onnxruntime" if with_runtime else "") + f": {INSTALL_LINE}")


@dataclass(frozen=True)
class OnnxModel:
    """The model as read (the original, for ONNX Runtime), its rewrite, and the sample network it holds."""

    path: str
    original: Any  # onnx.ModelProto
    rewritten: Any  # network.onnx_rewrite.Rewritten
    network: Any  # network.onnx_rewrite.SampleNetwork


def read_onnx_model(engine: EngineOptions, with_runtime: bool) -> OnnxModel:
    """--onnx: the model loaded, recognised as the sample's classifier or state-update network, and rewritten
    for --plugin; InputError naming the file and the problem (the node, for the rewrite)."""
    from network.onnx_rewrite import load_model, model_io, rewrite_model, sample_network

    assert engine.onnx is not None
    require_onnx_packages(with_runtime)
    path = engine.onnx
    try:
        model = load_model(path)
    except InputError as error:
        raise InputError(f"--onnx {error}") from None
    try:
        rewritten = rewrite_model(model, engine.plugin)
    except InputError as error:
        raise InputError(f"--onnx {shown_path(path)}: {error}") from None
    network = sample_network(model)
    if network is None:
        inputs, outputs = model_io(model)
        raise InputError(f"--onnx {shown_path(path)}: inputs {[spec.name for spec in inputs]}, outputs "
                         f"{[spec.name for spec in outputs]} (or their shapes or types) are not the sample's: "
                         f"{SAMPLE_IO}")
    return OnnxModel(path, model, rewritten, network)


def check_against_run(model: OnnxModel, *, steps: bool, precision: str, num_features: int, num_classes: int) -> None:
    """InputError naming the first difference between the model's network and this run (--steps, --precision,
    the graph's F, --num_classes), as an engine's are checked against a graph."""
    from network.definition import CLASSIFIER, STATE_UPDATE

    network, shown = model.network, f"--onnx {shown_path(model.path)}"
    wanted = STATE_UPDATE if steps else CLASSIFIER
    if network.kind != wanted:
        export = "--network state" if steps else "--network classifier"
        raise InputError(f"{shown} holds the {network.kind} network; {'--steps' if steps else 'a run without --steps'} "
                         f"needs the {wanted} network (python3 -m export.export_onnx {export})")
    if network.precision != precision:
        raise InputError(f"{shown} is an {network.precision} model (X, src are "
                         f"{'float16' if network.precision == 'fp16' else 'float32'}); got --precision {precision}")
    if network.num_features != num_features:
        raise InputError(f"{shown} takes F={network.num_features} features per node (X [N, {network.num_features}]), "
                         f"the graph has {num_features}")
    if not steps and network.num_classes != num_classes:
        raise InputError(f"{shown} has {network.num_classes} classes (W [{network.num_classes}, F]), got "
                         f"--num_classes {num_classes}")


@dataclass(frozen=True)
class OnnxPlan:
    """What a run with --onnx carries to the engine and the validation: the model, read and rewritten."""

    model: OnnxModel

    def engine_source(self) -> Any:
        """The rewritten model as network.definition.OnnxSource, for the engine build."""
        from network.definition import OnnxSource

        rewritten = self.model.rewritten
        return OnnxSource(rewritten.model.SerializeToString(), self.model.path, rewritten.plugin)

    def lines(self) -> list[str]:
        network = self.model.network
        classes = f", C={network.num_classes}" if network.num_classes is not None else ""
        lines = [f"ONNX model {self.model.path}: the sample's {network.kind} network ({network.precision}, "
                 f"F={network.num_features}{classes}), rewritten for the {self.model.rewritten.plugin} plugin:"]
        lines += [f"  {line}" for line in self.model.rewritten.summary()]
        return lines


def plan_onnx(model: OnnxModel, engine: EngineOptions, *, steps: bool, precision: str, num_features: int,
              num_classes: int) -> OnnxPlan:
    """Checks the model against the run, then holds the rewritten model for --save_onnx (written once the run
    has succeeded: engine.outputs)."""
    from common.paths import serialized_model

    check_against_run(model, steps=steps, precision=precision, num_features=num_features, num_classes=num_classes)
    if engine.save_onnx is not None:
        engine.outputs.hold("--save_onnx", "Rewritten model", serialized_model(model.rewritten.model, "--save_onnx"))
    return OnnxPlan(model)


def onnxruntime_softmax(model: OnnxModel, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The original classifier in ONNX Runtime on the engine's feeds (X, src, idx, W): softmax [C, N], float64."""
    from network.definition import OUTPUT_SOFTMAX
    from network.onnx_runtime import run_onnxruntime

    try:
        outputs = run_onnxruntime(model.original, feeds).outputs
    except InputError as error:
        raise InputError(f"--onnx {shown_path(model.path)}: {error}") from None
    return np.asarray(outputs[OUTPUT_SOFTMAX], dtype=np.float64)


def onnxruntime_final_state(model: OnnxModel, initial_state: np.ndarray, features: np.ndarray,
                            batches: Sequence[np.ndarray]) -> np.ndarray:
    """The original state-update model in ONNX Runtime once per batch, X_out fed back as X (as --steps runs the
    engine), in one session (network.onnx_runtime.OnnxRuntimeSession; a float16 model runs as its float32
    copy): the final state, float64. InputError naming the file when ONNX Runtime refuses the model."""
    from network.definition import INPUT_INDEX, INPUT_SOURCE, INPUT_STATE, OUTPUT_STATE
    from network.onnx_runtime import OnnxRuntimeSession
    from network.steps import step_inputs

    state = initial_state
    try:
        session = OnnxRuntimeSession(model.original)
        for batch in batches:
            src, index = step_inputs(features, batch)
            state = session.run({INPUT_STATE: state, INPUT_SOURCE: src, INPUT_INDEX: index})[OUTPUT_STATE]
    except InputError as error:
        raise InputError(f"--onnx {shown_path(model.path)}: {error}") from None
    return np.asarray(state, dtype=np.float64)


def against_onnxruntime(model: OnnxModel) -> str:
    """How the comparison with ONNX Runtime is named in the --validate --onnx report."""
    return f"Against ONNX Runtime (the original {model.path}, same inputs, twice the reference's tolerance)"


def classifier_validation(model: OnnxModel, actual: np.ndarray, onnxruntime: np.ndarray, reference: np.ndarray,
                          precision: str) -> tuple[list[str], int]:
    """--validate --onnx: the engine's softmax against ONNX Runtime's (twice the tolerance: both lie within it
    of the exact result) and against the float64 reference; the seed's verdict line first, then one line each."""
    from reference import compare

    return verdict((against_onnxruntime(model), compare(actual, onnxruntime, precision, scale=AGAINST_ONNXRUNTIME)),
                   ("Against the float64 reference", compare(actual, reference, precision)))


def steps_validation(model: OnnxModel, actual: np.ndarray, onnxruntime: np.ndarray, reference: np.ndarray,
                     bound: np.ndarray, steps: int) -> tuple[list[str], int]:
    """--validate --onnx --steps: the final state against ONNX Runtime's (twice the rounding bound) and against
    the float64 reference of all batches (the bound)."""
    from network.steps import compare_state

    return verdict((against_onnxruntime(model), compare_state(actual, onnxruntime, AGAINST_ONNXRUNTIME * bound)),
                   (state_label(steps), compare_state(actual, reference, bound)))


def dry_run_validation(actual: np.ndarray, reference: np.ndarray, precision: str,
                       bound: np.ndarray | None = None) -> tuple[list[str], int]:
    """--dry-run --onnx --validate: ONNX Runtime's output of the original model against the float64 reference
    (the classifier's tolerance, or the final state's rounding bound with --steps)."""
    from network.steps import compare_state
    from reference import compare

    summary: Any = compare(actual, reference, precision) if bound is None else compare_state(actual, reference, bound)
    return verdict(("ONNX Runtime against the float64 reference", summary))


def engine_inputs_of(prepared: Any, precision: str) -> dict[str, np.ndarray]:
    """The classifier's X, src, idx, W exactly as network.run.run_graph feeds the engine."""
    from network.run import make_engine_inputs

    return make_engine_inputs(prepared.graph, prepared.weights, precision)


def steps_onnxruntime(prepared: Any, precision: str) -> np.ndarray:
    """ONNX Runtime's final state over the run's --steps batches, from the state and features the engine gets."""
    from network.run import feature_dtype, state_and_features

    assert prepared.steps is not None
    initial_state, features = state_and_features(prepared.graph.node_features, prepared.graph.state,
                                                 feature_dtype(precision))
    return onnxruntime_final_state(prepared.onnx.model, initial_state, features, prepared.steps.batches)


def validate_against_onnxruntime(prepared: Any, actual: np.ndarray, precision: str) -> tuple[list[str], int]:
    """--validate --onnx after an engine run: the softmax (or with --steps the final state) against ONNX Runtime
    running the original model on the same inputs and against the float64 reference."""
    model = prepared.onnx.model
    if prepared.steps is not None:
        assert prepared.steps.final_state is not None and prepared.steps.bound is not None
        return steps_validation(model, actual, steps_onnxruntime(prepared, precision), prepared.steps.final_state,
                                prepared.steps.bound, len(prepared.steps.batches))
    assert prepared.reference is not None
    onnxruntime = onnxruntime_softmax(model, engine_inputs_of(prepared, precision))
    return classifier_validation(model, actual, onnxruntime, prepared.reference["softmax"], precision)


def dry_run_output(prepared: Any, precision: str) -> tuple[str, np.ndarray]:
    """--dry-run --onnx: the heading and ONNX Runtime's output of the original model (softmax, or the final
    state after every --steps batch), instead of an engine's."""
    model = prepared.onnx.model
    if prepared.steps is not None:
        steps = len(prepared.steps.batches)
        return (f"Final state X after {steps:,} batches (ONNX Runtime, the original {model.path}):",
                steps_onnxruntime(prepared, precision))
    return (f"Classifier output (ONNX Runtime, the original {model.path}):",
            onnxruntime_softmax(model, engine_inputs_of(prepared, precision)))
