"""--onnx MODEL.onnx in a run of aliased_io_plugin.py: the model read and rewritten with the in-place plugin
(onnx_path.rewrite), then either the sample's own network (sample_network recognises it by its graph), checked
against the run and compared with ONNX Runtime and the float64 reference, or a model of the user's own, which
onnx_path.run runs on inputs of its own. onnx, onnx-graphsurgeon and onnxruntime only, no TensorRT; a bad model
stops with exit 2 before any engine work.
"""

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
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
# An engine and ONNX Runtime each lie within the float64 reference's tolerance (bound) of the exact result, so
# within twice of each other.
AGAINST_ONNXRUNTIME = 2.0

Run = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


def require_onnx_packages(with_runtime: bool) -> None:
    """MissingDependencyError (one line, exit 3) unless onnx and onnx-graphsurgeon (and, to run the model in
    ONNX Runtime, onnxruntime) can be imported; checked before the model or the graph is read."""
    import importlib.util

    wanted = ONNX_PACKAGES + ((RUNTIME_PACKAGE,) if with_runtime else ())
    absent = [name.replace("_", "-") for name in wanted if importlib.util.find_spec(name) is None]
    if absent:
        needs = "--onnx needs" if not with_runtime else "--onnx with --validate or --dry-run needs"
        raise MissingDependencyError(f"{', '.join(absent)} not installed; {needs} onnx, onnx-graphsurgeon"
                                     + (" and onnxruntime" if with_runtime else "") + f": {INSTALL_LINE}")


@dataclass(frozen=True)
class OnnxModel:
    """The model as read (the original, for ONNX Runtime), its rewrite, and the sample network it is (None for
    a model of the user's own). `own_inputs` names the option (--onnx_inputs, --onnx_shapes) that makes even the
    sample's network run as a model of one's own, on those inputs instead of a graph."""

    path: str
    original: Any  # onnx.ModelProto
    rewritten: Any  # onnx_path.rewrite.Rewritten
    network: Any  # onnx_path.rewrite.SampleNetwork or None
    own_inputs: str | None = None

    @property
    def is_sample(self) -> bool:
        return self.network is not None and self.own_inputs is None

    @property
    def holds_plugin_nodes(self) -> bool:
        """Whether the original model already holds plugin nodes (torch.ops.aliased_io.scatter_add_ exported
        through export.ops), which ONNX Runtime has no kernel for."""
        from onnx_path.nodes import is_plugin_node

        return any(is_plugin_node(node.domain, node.op_type) for node in self.original.graph.node)

    def original_name(self) -> str:
        """How the original model is named where ONNX Runtime's run of it is compared."""
        return f"the original {self.path}" + (", its plugin nodes by their CPU reference" if self.holds_plugin_nodes
                                              else "")

    def engine_source(self) -> Any:
        """The rewritten model as network.onnx_parse.OnnxSource, for the engine build."""
        from network.onnx_parse import OnnxSource

        return OnnxSource(self.rewritten.model.SerializeToString(), self.path, self.rewritten.plugin)

    def lines(self) -> list[str]:
        """What the model is and what the rewrite did (Rewritten.summary: each scatter, each output aliasing an
        input)."""
        network = self.network
        if network is None:
            what = "a model of your own (not the sample's network)"
        else:
            classes = f", C={network.num_classes}" if network.num_classes is not None else ""
            what = f"the sample's {network.kind} network ({network.precision}, F={network.num_features}{classes})"
            what += f", run as a model of your own ({self.own_inputs})" if self.own_inputs else ""
        lines = [f"ONNX model {self.path}: {what}, rewritten for the {self.rewritten.plugin} plugin:"]
        return lines + [f"  {line}" for line in self.rewritten.summary()]


def read_onnx_model(options: Any, engine: EngineOptions) -> OnnxModel:
    """--onnx: the model loaded, rewritten for --plugin and recognised as the sample's network or not;
    InputError naming the file and the problem (the node, for the rewrite). The sample's network must suit
    --steps (checked here, before the graph is read)."""
    from common.plugin_kind import PluginKind
    from onnx_path.rewrite import load_model, rewrite_model, sample_network

    assert engine.onnx is not None
    require_onnx_packages(with_runtime=bool(options.dry_run or options.validate))
    path = engine.onnx
    try:
        model = load_model(path)
    except InputError as error:
        raise InputError(f"--onnx {error}") from None
    check_dimensions(model, f"--onnx {shown_path(path)}")
    try:
        rewritten = rewrite_model(model, engine.plugin)
    except InputError as error:
        raise InputError(f"--onnx {shown_path(path)}: {error}") from None
    if rewritten.plugin != engine.plugin and getattr(options, "plugin", None) is not None:
        raise InputError(f"--plugin {engine.plugin}: --onnx {shown_path(path)} holds plugin nodes of the "
                         f"{rewritten.plugin} plugin already, which run only as that plugin: drop --plugin")
    python_rewrite = rewritten.model if rewritten.plugin is PluginKind.PYTHON else None  # the sample's check reads it
    result = OnnxModel(path, model, rewritten, sample_network(model, python_rewrite), engine.own_inputs)
    if result.is_sample:
        check_network_kind(result, engine)
    return result


def check_dimensions(model: Any, shown: str) -> None:
    """InputError for a static dimension below 0 of a graph input or output (onnx.checker accepts -3, which
    no tensor can have)."""
    from onnx_path.rewrite import model_io

    inputs, outputs = model_io(model)
    for what, specs in (("input", inputs), ("output", outputs)):
        for spec in specs:
            for axis, dim in enumerate(spec.shape):
                if isinstance(dim, int) and dim < 0:
                    raise InputError(f"{shown}: {what} {spec.name} has dimension {dim} at axis {axis}; a dimension "
                                     "is a size of 0 or more, or a name (dynamic)")


def check_network_kind(model: OnnxModel, engine: EngineOptions) -> None:
    """InputError unless the sample's network suits the run: the classifier without --steps, the state update
    with --steps K --batch_edges B."""
    from network.definition import CLASSIFIER, STATE_UPDATE

    shown, kind, steps = f"--onnx {shown_path(model.path)}", model.network.kind, engine.steps is not None
    if kind == CLASSIFIER and steps:
        raise InputError(f"{shown} holds the {CLASSIFIER} network; --steps needs the {STATE_UPDATE} network "
                         "(python3 -m export.export_onnx --network state)")
    if kind == STATE_UPDATE and not steps:
        raise InputError(f"{shown} holds the {STATE_UPDATE} network; a run without --steps needs the {CLASSIFIER} "
                         "network (python3 -m export.export_onnx --network classifier), or add --steps K "
                         "--batch_edges B to run this one")
    if steps and engine.batch_edges is None:
        raise InputError(f"{shown} holds the {STATE_UPDATE} network: --steps {engine.steps} needs --batch_edges B, "
                         "the number of edges each step adds")


def check_against_run(model: OnnxModel, *, precision: str, num_features: int, num_classes: int) -> None:
    """InputError naming the first difference between the sample network of the model and this run
    (--precision, the graph's F, --num_classes), as an engine's are checked against a graph."""
    from network.definition import CLASSIFIER

    network, shown = model.network, f"--onnx {shown_path(model.path)}"
    if network.precision != precision:
        raise InputError(f"{shown} is an {network.precision} model (X, src are "
                         f"{'float16' if network.precision == 'fp16' else 'float32'}); got --precision {precision}")
    if network.num_features != num_features:
        raise InputError(f"{shown} takes F={network.num_features} features per node (X [N, {network.num_features}]), "
                         f"the graph has {num_features}")
    if network.kind == CLASSIFIER and network.num_classes != num_classes:
        raise InputError(f"{shown} has {network.num_classes} classes (W [{network.num_classes}, F]), got "
                         f"--num_classes {num_classes}")


def plan_onnx(model: OnnxModel, options: Any, settings: Any, prepared: Any) -> Any:
    """The run's cli.inputs.Prepared with the model (its `onnx`), after the sample's network is checked against
    the run; holds the rewritten model for --save_onnx (written once the run has succeeded: engine.outputs)
    and prints what the rewrite did."""
    from cli.console import out
    engine = settings.engine
    check_against_run(model, precision=options.precision, num_features=prepared.graph.num_features,
                      num_classes=settings.num_classes)
    hold_rewritten(model, engine)
    out("\n".join(model.lines()))
    out(flush=True)
    return dataclasses.replace(prepared, onnx=model)


def hold_rewritten(model: OnnxModel, engine: EngineOptions) -> None:
    """--save_onnx: the rewritten model's bytes held in engine.outputs, written once the run has succeeded;
    InputError now when it does not serialize."""
    from common.paths import serialized_model

    if engine.save_onnx is not None:
        engine.outputs.hold("--save_onnx", "Rewritten model", serialized_model(model.rewritten.model, "--save_onnx"))


@contextlib.contextmanager
def naming_the_model(model: OnnxModel) -> Iterator[None]:
    """An InputError of ONNX Runtime's (a model or feeds it refuses) with the --onnx file named first."""
    try:
        yield
    except InputError as error:
        raise InputError(f"--onnx {shown_path(model.path)}: {error}") from None


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
    """run(feeds) of one `session_type` session of `proto`, ONNX Runtime's refusals naming the --onnx file."""
    with naming_the_model(model):
        session = session_type(proto)

    def run(feeds: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        with naming_the_model(model):
            return session.run(feeds)
    return run


def sample_output(prepared: Any, precision: str, run: Run) -> np.ndarray:
    """The sample network's result from `run`: the classifier's softmax on the engine's feeds (X, src, idx, W),
    or with --steps the final state after one run per batch, X_out fed back as X (as --steps runs the engine);
    float64."""
    from onnx_path.inputs import run_in_steps
    from network.definition import INPUT_INDEX, INPUT_SOURCE, INPUT_STATE, OUTPUT_SOFTMAX, OUTPUT_STATE
    from network.run import feature_dtype, make_engine_inputs, state_and_features
    from network.steps import step_inputs

    if prepared.steps is None:
        return np.asarray(run(make_engine_inputs(prepared.graph, prepared.weights, precision))[OUTPUT_SOFTMAX],
                          dtype=np.float64)
    state, features = state_and_features(prepared.graph.node_features, prepared.graph.state, feature_dtype(precision))
    batches = prepared.steps.batches

    def batch(step: int) -> dict[str, np.ndarray]:
        return dict(zip((INPUT_SOURCE, INPUT_INDEX), step_inputs(features, batches[step])))

    outputs = run_in_steps(run, {INPUT_STATE: state, **batch(0)}, batch, {OUTPUT_STATE: INPUT_STATE}, len(batches))
    return np.asarray(outputs[OUTPUT_STATE], dtype=np.float64)


def against_onnxruntime(model: OnnxModel) -> str:
    """How the comparison with ONNX Runtime is named in the --validate --onnx report."""
    return f"Against ONNX Runtime ({model.original_name()}, same inputs, twice the reference's tolerance)"


def classifier_validation(model: OnnxModel, actual: np.ndarray, onnxruntime: np.ndarray, reference: np.ndarray,
                          precision: str) -> tuple[list[str], int]:
    """--validate --onnx: the softmax against ONNX Runtime's (twice the tolerance: both lie within it of the
    exact result) and against the float64 reference; the seed's verdict line first, then one line each."""
    from reference import compare

    return verdict((against_onnxruntime(model), compare(actual, onnxruntime, precision, scale=AGAINST_ONNXRUNTIME)),
                   ("Against the float64 reference", compare(actual, reference, precision)))


def steps_validation(model: OnnxModel, actual: np.ndarray, onnxruntime: np.ndarray, reference: np.ndarray,
                     bound: np.ndarray, steps: int) -> tuple[list[str], int]:
    """--validate --onnx --steps: the final state against ONNX Runtime's (twice the rounding bound) and against
    the float64 reference of all batches (the bound)."""
    from reference.state import compare_state

    return verdict((against_onnxruntime(model), compare_state(actual, onnxruntime, AGAINST_ONNXRUNTIME * bound)),
                   (state_label(steps), compare_state(actual, reference, bound)))


def validate_against_onnxruntime(prepared: Any, actual: np.ndarray, precision: str) -> tuple[list[str], int]:
    """--validate --onnx with the sample's network: the softmax (or with --steps the final state) of an engine,
    or in a dry run of the rewritten model, against ONNX Runtime running the original model on the same inputs
    and against the float64 reference."""
    model = prepared.onnx
    onnxruntime = sample_output(prepared, precision, original_run(model))
    if prepared.steps is not None:
        assert prepared.steps.final_state is not None and prepared.steps.bound is not None
        return steps_validation(model, actual, onnxruntime, prepared.steps.final_state, prepared.steps.bound,
                                len(prepared.steps.batches))
    assert prepared.reference is not None
    return classifier_validation(model, actual, onnxruntime, prepared.reference["softmax"], precision)
