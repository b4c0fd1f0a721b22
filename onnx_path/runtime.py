"""ONNX Runtime runs on the CPU: the ORIGINAL model (polygraphy's convention: TensorRT against onnxrt), and the
REWRITTEN model with a CPU reference of the plugin nodes, so that a wrong rewrite shows on any machine.

    run_onnxruntime(model, feeds) -> OrtRun          the original model once; .outputs by name, .float32_copy
    OnnxRuntimeSession(model).run(feeds) -> {name: array}   the same with one session for many runs (--steps)
    run_rewritten(model, feeds) -> {name: array}     a rewritten model: ONNX Runtime for the standard nodes, the
                                                     plugin nodes computed here in numpy
    RewrittenSession(model).run(feeds)               the same for many runs
    float32_copy(model) -> onnx.ModelProto           every float16 tensor, attribute and Cast made float32

The rewritten model runs in stages: the nodes that need no plugin output run in one ONNX Runtime session, then the
plugin nodes whose inputs are all known, then the nodes that needed them, and so on. The plugin nodes are computed
from their definition alone (onnx_path/nodes.py), never from how the rewrite matched them: rows src[e] added into
state[idx[e]] (reference.gnn.scatter_add_rows, in float64, rounded once to the state's dtype), counts the edges per
row; an overwrite writes row src[e] into state[idx[e]] (where an index repeats, the plugin keeps one of its edges,
which one undefined; this reference keeps the last); an index outside the state's rows is an InputError naming the
node and the value. The saved model is never changed for this; docs/onnx.md says why this beats a custom op or a
model-local function.
ONNX Runtime's CPU provider lacks float16 ScatterND/ScatterElements with reduction add (and other float16
kernels), so a float16 model runs as float32_copy(model) on its feeds cast to float32 (float32_copy is then
True and the outputs are float32): compare at float16 tolerances.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from common.errors import InputError
from common.imports import import_module
from common.text import first_line
from inplace.registry import computed_here, node_outputs
from onnx_path.nodes import PLUGIN_DOMAIN, PLUGIN_OP, is_overwrite_node, is_plugin_node, step_of
from onnx_path.patterns import SCATTER_OPS
from plugin.rules import FEATURE_DTYPES, INDEX_DTYPE
from plugin.scatter_add_op import reference as scatter_add_reference
from reference.gnn import scatter_overwrite_numpy

if TYPE_CHECKING:
    import onnx


# ONNX Runtime's "[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/.../file.h:46 void f(args...) reason": the
# reason kept, the source location and C++ signature dropped
_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : (?P<code>\w+) : (?:/\S+:\d+ [^(]*\(.*?\) (?=[A-Z]))?")
MAX_REASON = 400


def short_line(error: BaseException) -> str:
    """common.text.first_line without ONNX Runtime's source location and C++ signature, at most MAX_REASON
    characters (cut at a word, marked with "...")."""
    line = first_line(error)
    match = _ORT_PREFIX.match(line)
    if match is not None:
        line = f"{match['code']}: {line[match.end():]}"
    if len(line) > MAX_REASON:
        line = line[:MAX_REASON].rsplit(" ", 1)[0] + " ..."
    return line


def input_names(model: "onnx.ModelProto") -> list[str]:
    """The graph inputs a caller feeds (initializers with a graph input entry are constant defaults: left out)."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    return [value.name for value in model.graph.input if value.name not in initializers]


def _checked_feeds(names: list[str], feeds: Mapping[str, np.ndarray], half_to_single: bool) -> dict[str, np.ndarray]:
    """Every input by name, in its dtype (float16 made float32 for a float32 copy); InputError for a missing or
    unknown feed."""
    missing = [name for name in names if name not in feeds]
    unknown = [name for name in feeds if name not in names]
    if missing or unknown:
        raise InputError(f"ONNX Runtime feeds: missing {missing or 'none'}, unknown {unknown or 'none'}; the "
                         f"model's inputs are {names}")
    arrays = {name: np.asarray(feeds[name]) for name in names}
    if half_to_single:
        arrays = {name: value.astype(np.float32) if value.dtype == np.float16 else value for name, value in arrays.items()}
    return arrays


QUIET = 4
"""ONNX Runtime's log severity for the sample's sessions and runs (fatal only): its error lines would come
before the sample's one line on stderr; the exception carries the same message."""


def _has_scatter(onnx: Any, graph: Any) -> bool:
    """Whether a graph (its subgraphs included) holds a scatter node."""
    for node in graph.node:
        if node.op_type in SCATTER_OPS:
            return True
        for attribute in node.attribute:
            graphs = [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else list(attribute.graphs)
            if any(_has_scatter(onnx, subgraph) for subgraph in graphs):
                return True
    return False


def session_options(model: "onnx.ModelProto") -> Any:
    """ONNX Runtime's SessionOptions for a sample's session of `model`: its logging silenced (QUIET), and one
    thread per operator for a model with a scatter, whose reductions ONNX Runtime's CPU provider splits among
    threads that lose or reorder additions (onnxruntime issues #18048, #23396: rows off by 1.14 on 2e7 edges):
    single-threaded, ScatterND/ScatterElements(add) adds each update in order, so the oracle is exact."""
    ort, onnx = import_module("onnxruntime"), import_module("onnx")
    ort.set_default_logger_severity(3)  # the default logger's (model loading) warnings
    options = ort.SessionOptions()
    options.log_severity_level = QUIET
    if _has_scatter(onnx, model.graph):
        options.intra_op_num_threads = 1
    return options


def _inference_session(model: "onnx.ModelProto", what: str) -> Any:
    ort = import_module("onnxruntime")
    try:
        return ort.InferenceSession(model.SerializeToString(), sess_options=session_options(model),
                                    providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime's Fail, InvalidGraph, NotImplemented...
        raise InputError(f"ONNX Runtime could not load {what}: {short_line(error)}") from None


def _run(session: Any, names: list[str], arrays: Mapping[str, np.ndarray], what: str) -> list[np.ndarray]:
    ort = import_module("onnxruntime")
    run_options = ort.RunOptions()
    run_options.log_severity_level = QUIET  # its "[E:onnxruntime:...]" line: the exception says the same
    try:
        return [np.asarray(value) for value in session.run(names, dict(arrays), run_options)]
    except Exception as error:  # onnxruntime's InvalidArgument, RuntimeException...
        raise InputError(f"ONNX Runtime could not run {what}: {short_line(error)}") from None


# --- the original model -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OrtRun:
    """ONNX Runtime's outputs by name; float32_copy is True where ORT ran float32_copy(model) on the feeds cast
    to float32 (its CPU provider has no float16 ScatterND/ScatterElements with reduction add), so the outputs
    are float32 there."""

    outputs: dict[str, np.ndarray]
    float32_copy: bool


def _float16_names(model: "onnx.ModelProto") -> set[str]:
    onnx = import_module("onnx")
    half = onnx.TensorProto.FLOAT16
    names = {value.name for value in [*model.graph.input, *model.graph.value_info, *model.graph.output]
             if value.type.tensor_type.elem_type == half}
    return names | {tensor.name for tensor in model.graph.initializer if tensor.data_type == half}


def _has_float16_scatter_add(model: "onnx.ModelProto") -> bool:
    float16 = _float16_names(model)
    return any(node.op_type in SCATTER_OPS and node.input and node.input[0] in float16 for node in model.graph.node)


class OnnxRuntimeSession:
    """One ONNX Runtime session (CPU provider) of a model, to run it on many feeds (--steps feeds X_out back as
    X): made once, run per call. A model with a float16 scatter-add runs as float32_copy(model), its float16
    feeds cast to float32 (float32_copy is then True). InputError (one line: ORT's own first line) for a model
    ONNX Runtime refuses, e.g. a rewritten one (ORT has no kernel for the plugin nodes: see RewrittenSession)."""

    def __init__(self, model: "onnx.ModelProto") -> None:
        self.input_names = input_names(model)
        self.float32_copy = _has_float16_scatter_add(model)
        self._session = _inference_session(float32_copy(model) if self.float32_copy else model, "the model")
        self.output_names = [output.name for output in self._session.get_outputs()]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs by name for `feeds` (every graph input by name, in its dtype); InputError for a missing
        or unknown feed or inputs ONNX Runtime refuses."""
        arrays = _checked_feeds(self.input_names, feeds, self.float32_copy)
        return dict(zip(self.output_names, _run(self._session, self.output_names, arrays, "the model")))


def run_onnxruntime(model: "onnx.ModelProto", feeds: Mapping[str, np.ndarray]) -> OrtRun:
    """Runs `model` once in ONNX Runtime (CPU provider) on `feeds`: OnnxRuntimeSession(model).run(feeds), with
    whether ORT ran the float32 copy."""
    session = OnnxRuntimeSession(model)
    return OrtRun(session.run(feeds), session.float32_copy)


def float32_copy(model: "onnx.ModelProto") -> "onnx.ModelProto":
    """A copy of `model` with every float16 tensor made float32: graph inputs, outputs and value_info,
    initializers, tensor attributes (Constant, ConstantOfShape) and the `to`/`dtype` attributes (Cast,
    EyeLike, RandomNormal...), subgraphs included. For running a float16 model where a runtime lacks float16
    kernels."""
    onnx = import_module("onnx")
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    _graph_to_float32(onnx, copy.graph)
    return copy


def _graph_to_float32(onnx: Any, graph: Any) -> None:
    half, single = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    for value in [*graph.input, *graph.output, *graph.value_info]:
        if value.type.tensor_type.elem_type == half:
            value.type.tensor_type.elem_type = single
    for index, tensor in enumerate(graph.initializer):
        if tensor.data_type == half:
            graph.initializer[index].CopyFrom(_tensor_to_float32(onnx, tensor))
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.INT and attribute.name in ("to", "dtype") and attribute.i == half:
                attribute.i = single
            elif attribute.type == onnx.AttributeProto.TENSOR and attribute.t.data_type == half:
                attribute.t.CopyFrom(_tensor_to_float32(onnx, attribute.t))
            elif attribute.type == onnx.AttributeProto.GRAPH:
                _graph_to_float32(onnx, attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for subgraph in attribute.graphs:
                    _graph_to_float32(onnx, subgraph)


def _tensor_to_float32(onnx: Any, tensor: Any) -> Any:
    return onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(tensor).astype(np.float32), tensor.name)


# --- the rewritten model: ONNX Runtime around a CPU reference of the plugin nodes ----------------------------------
def _node_inputs(onnx: Any, node: Any) -> list[str]:
    """The tensors a node reads: its inputs and the outer-scope names its subgraphs use."""
    names = [name for name in node.input if name]
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else \
            list(attribute.graphs) if attribute.type == onnx.AttributeProto.GRAPHS else []
        for graph in graphs:
            inner = {value.name for value in graph.input} | {tensor.name for tensor in graph.initializer}
            for inner_node in graph.node:
                inner |= set(inner_node.output)
            for inner_node in graph.node:
                names += [name for name in _node_inputs(onnx, inner_node) if name not in inner]
    return names


@dataclass
class _Stage:
    """Standard nodes that run together in one ONNX Runtime session, after the plugin nodes of `plugins`."""

    plugins: list[Any]
    nodes: list[Any]
    inputs: list[str]
    outputs: list[str]
    initializers: list[Any]
    sessions: dict[tuple[str, ...], Any]


class RewrittenSession:
    """A rewritten model on the CPU, for many runs: ONNX Runtime sessions for the standard nodes between the
    plugin nodes (made at the first run of each input dtype), the plugin nodes computed in numpy
    (plugin_reference). A model with float16 tensors runs as float32_copy(model) on its feeds cast to float32
    (float32_copy is then True). InputError (one line) for a missing or unknown feed, what ONNX Runtime
    refuses, or an index outside its state's rows."""

    def __init__(self, model: "onnx.ModelProto") -> None:
        onnx = import_module("onnx")
        import_module("onnxruntime")
        self.input_names = input_names(model)
        self.float32_copy = bool(_float16_names(model))
        self._model = float32_copy(model) if self.float32_copy else model
        graph = self._model.graph
        self.output_names = [value.name for value in graph.output]
        self._initializers = {tensor.name: tensor for tensor in graph.initializer}
        self._recorded = {value.name: value.type.tensor_type.elem_type
                          for value in [*graph.value_info, *graph.output] if value.type.tensor_type.elem_type}
        level = dict.fromkeys([*self.input_names, *self._initializers], 0)
        nodes = list(graph.node)
        reads = [_node_inputs(onnx, node) for node in nodes]
        levels: dict[int, tuple[list[int], list[int]]] = {}
        for position, node in enumerate(nodes):
            here = max((level.get(name, 0) for name in reads[position]), default=0)
            plugin = is_plugin_node(node.domain, node.op_type) or computed_here(node.domain, node.op_type)
            here += int(plugin)
            levels.setdefault(here, ([], []))[0 if plugin else 1].append(position)
            level.update((name, here) for name in node.output if name)
        needed_after: dict[str, int] = {name: max(levels, default=0) + 1 for name in self.output_names}
        for here, (plugins, standard) in levels.items():
            for position in [*plugins, *standard]:  # the plugins of a level run before its nodes, after the level below
                for name in reads[position]:
                    needed_after[name] = max(needed_after.get(name, -1), here)
        self._stages = []
        for here in sorted(levels):
            plugins, standard = levels[here]
            produced = {name for position in standard for name in nodes[position].output if name}
            read = list(dict.fromkeys(name for position in standard for name in reads[position]))
            self._stages.append(_Stage(
                plugins=[nodes[position] for position in plugins], nodes=[nodes[position] for position in standard],
                inputs=[name for name in read if name not in produced and name not in self._initializers],
                outputs=[name for position in standard for name in nodes[position].output
                         if name and needed_after.get(name, -1) > here],
                initializers=[self._initializers[name] for name in read if name in self._initializers],
                sessions={}))

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs by name for `feeds` (every graph input by name, in its dtype)."""
        onnx = import_module("onnx")
        values: dict[str, np.ndarray] = _checked_feeds(self.input_names, feeds, self.float32_copy)
        for stage in self._stages:
            for node in stage.plugins:
                arguments = [self._value(onnx, values, name) for name in node.input]
                values.update(zip(node.output, plugin_reference(node, arguments)))
            if stage.nodes:
                arrays = {name: self._value(onnx, values, name) for name in stage.inputs}
                session = self._session(onnx, stage, arrays)
                values.update(zip(stage.outputs, _run(session, stage.outputs, arrays, "the rewritten model")))
        return {name: self._value(onnx, values, name) for name in self.output_names}

    def _value(self, onnx: Any, values: dict[str, np.ndarray], name: str) -> np.ndarray:
        if name not in values:
            values[name] = onnx.numpy_helper.to_array(self._initializers[name])
        return values[name]

    def _session(self, onnx: Any, stage: _Stage, arrays: Mapping[str, np.ndarray]) -> Any:
        """The stage's session for these input dtypes: a model of the stage's nodes, its inputs typed from the
        arrays, its outputs as the model records them (or untyped: ONNX Runtime infers them)."""
        key = tuple(str(arrays[name].dtype) for name in stage.inputs)
        if key not in stage.sessions:
            helper = onnx.helper
            inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arrays[name].dtype), None)
                      for name in stage.inputs]
            outputs = [helper.make_tensor_value_info(name, self._recorded[name], None) if name in self._recorded
                       else onnx.ValueInfoProto(name=name) for name in stage.outputs]  # untyped: ORT infers it
            graph = helper.make_graph(stage.nodes, "stage", inputs, outputs, stage.initializers)
            opsets = [opset for opset in self._model.opset_import if opset.domain != PLUGIN_DOMAIN]
            model = helper.make_model(graph, opset_imports=opsets, ir_version=self._model.ir_version,
                                      functions=list(self._model.functions))
            stage.sessions[key] = _inference_session(model, "the rewritten model")
        return stage.sessions[key]


def run_rewritten(model: "onnx.ModelProto", feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Runs a rewritten `model` once on the CPU: RewrittenSession(model).run(feeds)."""
    return RewrittenSession(model).run(feeds)


# --- the plugin nodes on the CPU ------------------------------------------------------------------------------------
def plugin_reference(node: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs of one plugin node (a NodeProto of onnx_path/nodes.py's format) for its input arrays: the Python
    plugin's node here; a step node of an op's chain (the project's, or one of one's own) and an op's custom node
    by inplace.registry.node_outputs, a project step's index checked against its state's rows first."""
    name = f"node {node.name or node.op_type} ({node.op_type})"
    if step_of(node.domain, node.op_type) is not None:
        _check_step(name, node, inputs)
    if computed_here(node.domain, node.op_type):  # a step of an op's chain, or an in-place op of one's own
        return node_outputs(node, inputs)
    if is_overwrite_node(node):
        return [_overwrite(name, *inputs[:3])]
    if node.op_type == PLUGIN_OP:
        state, src, idx = inputs[:3]
        added, counts = _scatter_add(name, state, src, idx)
        return [added, counts][:len(node.output)]
    raise InputError(f"{name}: not a plugin node of this sample")


STEP_ROWS = ("state", "counts", "pairs")  # a project step's tensors whose rows are the state's


def _check_step(name: str, node: Any, inputs: list[np.ndarray]) -> None:
    """A project op's step node: state, src and idx as the plugin takes them, and every index inside the rows of
    the state (or of the tensors with a row per node the step reads instead); InputError otherwise."""
    found = step_of(node.domain, node.op_type)
    assert found is not None
    values = dict(zip(found[2].inputs, inputs))
    if all(role in values for role in ("state", "src", "index")):
        _check_rows(name, values["state"], values["src"], values["index"])
    rows = next((values[role].shape[0] for role in STEP_ROWS if role in values and values[role].ndim), None)
    if "index" in values and rows is not None:
        _check_range(name, "index", values["index"], rows, np.arange(values["index"].size))


def _check_state(name: str, state: np.ndarray) -> None:
    if state.dtype not in FEATURE_DTYPES or state.ndim != 2:
        raise InputError(f"{name}: its state is {state.dtype} {list(state.shape)}; the plugin adds into float32 or "
                         "float16 rows [R, F]")


def _check_edges(name: str, src: np.ndarray, idx: np.ndarray) -> None:
    if idx.dtype != INDEX_DTYPE or idx.ndim != 1 or src.ndim != 2 or src.shape[0] != idx.shape[0]:
        raise InputError(f"{name}: src {src.dtype} {list(src.shape)} and idx {idx.dtype} {list(idx.shape)}; the plugin "
                         "takes src [E, F] and idx [E] int64")


def _check_rows(name: str, state: np.ndarray, src: np.ndarray, idx: np.ndarray) -> None:
    """state [R, F] float32/float16, src [E, F] of its dtype, idx [E] int64; InputError otherwise."""
    _check_state(name, state)
    _check_edges(name, src, idx)
    if src.dtype != state.dtype or src.shape[1] != state.shape[1]:
        raise InputError(f"{name}: src {src.dtype} {list(src.shape)} is not rows of its state {state.dtype} "
                         f"{list(state.shape)}")


def _check_range(name: str, what: str, values: np.ndarray, rows: int, positions: np.ndarray) -> None:
    bad = np.flatnonzero((values < 0) | (values >= rows))
    if bad.size:
        first = int(bad[0])
        raise InputError(f"{name}: {what} {int(values[first])} at position {int(positions[first])} is outside the "
                         f"{rows} rows of its state")


def _scatter_add(name: str, state: np.ndarray, src: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """state with row src[e] added into row idx[e] (float64 sums, rounded once), and the edges per row: the
    scatter-add's one reference (plugin/scatter_add_op.py), which the AOT chains' steps are proved against too."""
    _check_rows(name, state, src, idx)
    _check_range(name, "index", idx, state.shape[0], np.arange(idx.size))
    total, counts = scatter_add_reference(state, src, idx, with_counts=True)
    return total.astype(state.dtype), counts


def _overwrite(name: str, state: np.ndarray, src: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """state with row src[e] written into row idx[e], the last edge where an index repeats (one of the winners the
    plugin may keep; rows copied exactly, in the state's dtype)."""
    _check_rows(name, state, src, idx)
    _check_range(name, "index", idx, state.shape[0], np.arange(idx.size))
    return scatter_overwrite_numpy(state, src, idx)
