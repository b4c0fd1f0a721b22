"""The ONNX side of the sample: load an exported model, put the in-place plugin where it has scatter-adds, save
it, run the original in ONNX Runtime. Plain functions over onnx and onnx-graphsurgeon (imported when first
used); no TensorRT here, so all of it runs and is tested on a machine without TensorRT or a GPU.

API (stable; the CLI's --onnx, --validate and --dry-run --onnx are built on it; --save_onnx's checks and writing
are common.paths'):
    load_model(path) -> onnx.ModelProto            InputError (one line): missing, unreadable, not ONNX, invalid
    rewrite_model(model, plugin="python") -> Rewritten
                                                   each scatter-add into a graph input replaced by the plugin
                                                   node(s) ("python" or "aot"); InputError naming the node and
                                                   the value for anything it cannot rewrite safely
    Rewritten.model, .plugin, .scatters (ScatterRewrite per replaced scatter), .summary() -> lines to print
    run_onnxruntime(model, feeds) -> OrtRun        ONNX Runtime on the CPU provider; .outputs by name and
                                                   .float32_copy (True where ORT ran the float32 copy: its CPU
                                                   provider has no float16 scatter-add)
    OnnxRuntimeSession(model).run(feeds) -> {name: array}
                                                   the same with one session for many runs (--steps)
    float32_copy(model) -> onnx.ModelProto         every float16 tensor, attribute and Cast made float32
    model_io(model) -> (inputs, outputs)           TensorSpec(name, dtype, shape): a str is a dynamic dimension
    sample_network(model) -> SampleNetwork | None  the sample's own network (inputs X, src, idx[, W], output
                                                   softmax or X_out, named and shaped as network/definition.py's),
                                                   whose outputs the float64 reference (reference/) also gives

What is rewritten (torch.onnx.export(dynamo=True) of torch 2.13 writes these; docs/onnx.md has the node lists).
X is a graph input [N, F] float32/float16, src [E, F] of X's dtype, idx [E] int64 (any tensor):
    index_add     Unsqueeze(idx, axes=[1] or [-1]) (or Reshape(idx, [-1, 1])) -> ScatterND(X, ., src, reduction=add)
    scatter_add   Unsqueeze(idx, [1]) -> Expand(., [E, F] from Shape(src) or Shape(idx)) -> ScatterElements(X, ., src,
                  axis=0, reduction=add); without the Expand where src is [E, 1]
    counts        either form with data = zeros [N, 1] shaped from X (Expand or ConstantOfShape of 0 over
                  Concat(Shape(X)[0:1], [1]), or recorded as [N, 1] with X's N), updates = ones, index = the
                  same idx as a scatter-add into X: becomes the plugin's counts output (compute_counts=1); a
                  Cast follows where those counts are not int64. Without such a scatter, compute_counts=0.
The Python plugin is one node ScatterAddInPlace(X, src, idx) -> (aggregated[, counts]) with attributes
plugin_version, plugin_namespace and compute_counts (INT: the parser makes it the INT32 field). --plugin aot
gives the AOT plugin nodes of plugin/scatter_add_aot.py (domain and plugin_namespace "aliased_io", aot=1) with
their zero-filled inputs made by ConstantOfShape nodes from X's, src's and idx's shapes (network/definition.py
makes the same with fill layers). Dead index plumbing goes with the scatter. Refused (InputError): a Scatter*
whose data is not a graph input (and is not the counts pattern), whose data has consumers other than Shape
nodes, a reduction other than add, an axis other than 0, an index not built as above, a dtype the plugin
lacks, and the legacy exporter's pattern (dynamo=False: ScatterElements without reduction into zeros, then
Add), with a line saying to export with dynamo=True. Every Scatter* node is either rewritten or refused.
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from common.errors import InputError
from common.imports import import_module
from common.text import shown_path
from network.definition import (
    AOT_PLUGIN,
    CLASSIFIER,
    INPUT_INDEX,
    INPUT_SOURCE,
    INPUT_STATE,
    INPUT_WEIGHTS,
    KEYS_EMPTY,
    OUTPUT_SOFTMAX,
    OUTPUT_STATE,
    PLUGINS,
    PYTHON_PLUGIN,
    STATE_UPDATE,
    TABLE_OFFSET,
    TABLE_SCALE,
)
from network.engine import first_line
from plugin.rules import COMPUTE_COUNTS_FIELD

if TYPE_CHECKING:
    import onnx


# The Python plugin as the TensorRT ONNX parser looks its creator up: the node's op_type is the creator's name,
# the attributes plugin_version and plugin_namespace the rest of its key (plugin/scatter_add_plugin.py
# PLUGIN_NAME, PLUGIN_VERSION, PLUGIN_NAMESPACE; tests/test_onnx_rewrite.py checks they agree). Its node stays
# in the default domain: from TensorRT 10.10 the parser may take the namespace from a node's domain.
PLUGIN_OP = "ScatterAddInPlace"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = ""
# The AOT plugins (plugin/scatter_add_aot.py, ids "aliased_io::<op>"): op_type is the id's name part, the
# namespace goes in the domain and in plugin_namespace, aot=1 selects the AOT implementation (TensorRT 10.9+).
AOT_NAMESPACE = "aliased_io"
AOT_SCATTER_ADD = "scatter_add"
AOT_SCATTER_ADD_COUNTS = "scatter_add_counts"
AOT_SCATTER_TABLE = "scatter_table"
AOT_SCATTER_TABLE_COUNTS = "scatter_table_counts"
AOT_APPLY_TABLE = "apply_table"
AOT_PLUGIN_VERSION = "1"
AOT_OPS = (AOT_SCATTER_ADD, AOT_SCATTER_ADD_COUNTS, AOT_SCATTER_TABLE, AOT_SCATTER_TABLE_COUNTS, AOT_APPLY_TABLE)

SCATTER_OPS = ("ScatterND", "ScatterElements", "Scatter")
FEATURE_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))
INDEX_DTYPE = np.dtype(np.int64)
SHAPE_ONLY_OPS = ("Shape",)  # consumers that read a tensor's shape, not its values: safe beside an in-place update
PASS_THROUGH_OPS = ("Cast", "Identity", "Unsqueeze", "Reshape", "Squeeze")  # keep a fill a fill


# --- loading and saving --------------------------------------------------------------------------------------
def load_model(path: str | Path) -> "onnx.ModelProto":
    """The ONNX model at `path` (external data next to it loaded too), checked by onnx.checker; InputError
    (one line) for a missing or unreadable file, one that is not ONNX, or a model onnx.checker rejects."""
    onnx = import_module("onnx")
    shown = shown_path(str(path))
    file = Path(path)
    if not str(path) or not file.exists():
        raise InputError(f"{shown}: file not found")
    if not file.is_file():
        raise InputError(f"{shown}: not a regular file")
    if not os.access(file, os.R_OK):
        raise InputError(f"{shown}: not readable")
    try:
        model = onnx.load(str(file))
    except Exception as error:  # protobuf's DecodeError, OSError, a missing external-data file
        raise InputError(f"{shown}: not an ONNX model ({_first_line(error)})") from None
    if not model.opset_import or not model.graph.node:
        raise InputError(f"{shown}: not an ONNX model (no operator set or no nodes)")
    try:
        onnx.checker.check_model(model)
    except Exception as error:  # onnx.checker.ValidationError, or a model over 2 GiB
        raise InputError(f"{shown}: onnx.checker rejects the model: {_first_line(error)}") from None
    return model


def _first_line(error: BaseException) -> str:
    """network.engine.first_line, at most 300 characters (onnx's and ONNX Runtime's first lines can be long)."""
    return first_line(error)[:300]


# --- the rewrite ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScatterRewrite:
    """One scatter-add replaced: the node, its form, the tensors the plugin reads and writes, and the new nodes."""

    node: str  # the ScatterND / ScatterElements node replaced
    form: str  # "index_add" (ScatterND) or "scatter_add" (ScatterElements)
    state: str  # X: the graph input added into in place
    source: str
    index: str
    output: str  # the aggregated state (the plugin's output 0, X's memory)
    counts_node: str | None  # the counts scatter the plugin's counts output replaces, if any
    counts: str | None
    plugin_nodes: tuple[str, ...]  # the plugin node(s), in order


@dataclass(frozen=True)
class Rewritten:
    """The rewritten model and what was replaced; the model has no Scatter* node left."""

    model: "onnx.ModelProto"
    plugin: str
    scatters: tuple[ScatterRewrite, ...]

    def summary(self) -> list[str]:
        """One line per replaced scatter-add, for the CLI's report."""
        lines = []
        for scatter in self.scatters:
            counts = f", counts {scatter.counts} from {scatter.counts_node}" if scatter.counts_node else ""
            lines.append(f"{scatter.node} ({scatter.form} into {scatter.state}{counts}) -> "
                         f"{' + '.join(scatter.plugin_nodes)} ({self.plugin} plugin, in place)")
        return lines


@dataclass
class _Match:
    """A scatter-add recognised: its node, form, data, index (the 1-D idx) and updates."""

    node: Any
    form: str
    data: Any
    index: Any
    updates: Any


def rewrite_model(model: "onnx.ModelProto", plugin: str = PYTHON_PLUGIN) -> Rewritten:
    """`model` with every scatter-add into a graph input replaced by the `plugin` ("python" or "aot") node(s)
    and the matching counts scatter by the plugin's counts output; the input model is not changed.

    InputError (one line naming the node and the value) when the model has no Scatter* node or any it
    cannot rewrite safely (see the module docstring)."""
    if plugin not in PLUGINS:
        raise InputError(f"plugin must be one of {', '.join(PLUGINS)}, got {plugin!r}")
    gs, onnx = import_module("onnx_graphsurgeon"), import_module("onnx")
    source = onnx.ModelProto()
    source.CopyFrom(model)  # graphsurgeon's graph shares parts of the proto (its opset list) with the model
    _refuse_nested_scatters(onnx, source)
    graph = gs.import_onnx(source)
    scatters = [node for node in graph.nodes if node.op in SCATTER_OPS]
    for position, node in enumerate(graph.nodes):
        node.name = node.name or f"{node.op}_{position}"  # every message names a node
    if not scatters:
        raise InputError("the model has no ScatterND or ScatterElements node, so nothing to rewrite in place "
                         "(export X.index_add_(0, idx, src) with torch.onnx.export(..., dynamo=True))")
    inputs = {tensor.name for tensor in graph.inputs}
    states: list[_Match] = []
    counts: list[_Match] = []
    for node in scatters:
        match = _match_scatter(node)
        if match.data.name in inputs and isinstance(match.data, gs.Variable):
            states.append(match)
        elif _is_counts(match):
            counts.append(match)
        else:
            raise InputError(f"node {node.name} ({node.op}): its data {match.data.name} is {_made_by(match.data)}, "
                             "not a graph input; only a scatter-add into a graph input is done in place (the counts "
                             "form, ones into zeros [N, 1] shaped from X with X's index, excepted)")
    paired = _pair_counts(states, counts)
    for state in states:
        _check_state(state, graph)
    results = []
    names = _NameSource(graph)
    for state in states:
        counts_match = paired.get(id(state.node))
        output = state.node.outputs[0].name
        counts_name = counts_match.node.outputs[0].name if counts_match else None
        nodes = _plugin_nodes(gs, state, counts_match, plugin, names)
        graph.nodes.extend(nodes)
        results.append(ScatterRewrite(
            node=state.node.name, form=_FORMS[state.node.op], state=state.data.name, source=state.updates.name,
            index=state.index.name, output=output, counts_node=counts_match.node.name if counts_match else None,
            counts=counts_name,
            plugin_nodes=tuple(node.name for node in nodes if node.domain == AOT_NAMESPACE or node.op == PLUGIN_OP)))
    graph.cleanup(remove_unused_graph_inputs=False).toposort()
    rewritten = gs.export_onnx(graph)
    rewritten.ir_version = model.ir_version
    left = [node.name for node in rewritten.graph.node if node.op_type in SCATTER_OPS]
    assert not left, f"Scatter nodes left after the rewrite: {left}"
    return Rewritten(rewritten, plugin, tuple(results))


_FORMS = {"ScatterND": "index_add", "ScatterElements": "scatter_add"}


def _refuse_nested_scatters(onnx: Any, model: "onnx.ModelProto") -> None:
    """InputError for a Scatter* inside a subgraph (If, Loop, Scan) or a model-local function: only the main
    graph's scatters are rewritten, and none may be left behind."""
    def nested(graph: Any) -> list[str]:
        found = []
        for node in graph.node:
            for attribute in node.attribute:
                subgraphs = [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else list(attribute.graphs)
                for subgraph in subgraphs:
                    found += [f"{inner.name or inner.op_type} in {node.name or node.op_type}"
                              for inner in subgraph.node if inner.op_type in SCATTER_OPS] + nested(subgraph)
        return found

    found = nested(model.graph) + [f"{node.name or node.op_type} in function {function.name}"
                                   for function in model.functions for node in function.node
                                   if node.op_type in SCATTER_OPS]
    if found:
        raise InputError(f"node {found[0]}: a scatter inside a subgraph or a local function is not rewritten; "
                         "only the main graph's scatter-adds become the in-place plugin")


def _made_by(tensor: Any) -> str:
    """How a tensor comes about, for a message: a graph input, a constant, or made by node NAME (OP)."""
    if not tensor.inputs:
        return "a constant" if tensor.__class__.__name__ == "Constant" else "a graph input"
    producer = tensor.inputs[0]
    return f"made by node {producer.name} ({producer.op})"


def _producer(tensor: Any, *ops: str) -> Any:
    """The node that makes `tensor` when it is one of `ops`, else None."""
    if tensor is None or not tensor.inputs:
        return None
    node = tensor.inputs[0]
    return node if node.op in ops else None


def _constant(tensor: Any) -> np.ndarray | None:
    """The values of an initializer or of a Constant node's output, else None."""
    values = getattr(tensor, "values", None)
    if values is not None and not tensor.inputs:
        return np.asarray(values)
    node = _producer(tensor, "Constant")
    if node is None:
        return None
    if "value" in node.attrs:
        return np.asarray(node.attrs["value"].values)
    for name in ("value_int", "value_ints", "value_float", "value_floats"):
        if name in node.attrs:
            return np.asarray(node.attrs[name])
    return None


def _fill_value(tensor: Any) -> float | None:
    """The one value of a tensor filled with a constant (Expand of a one-element constant, ConstantOfShape,
    a uniform constant, through Cast/Unsqueeze/Reshape/...); None otherwise."""
    values = _constant(tensor)
    if values is not None:
        return float(values.flat[0]) if values.size and np.all(values == values.flat[0]) else None
    node = _producer(tensor, "Expand", "ConstantOfShape", *PASS_THROUGH_OPS)
    if node is None:
        return None
    if node.op == "ConstantOfShape":
        value = node.attrs.get("value")
        return 0.0 if value is None else float(np.asarray(value.values).flat[0])
    if node.op == "Expand":
        values = _constant(node.inputs[0])
        return float(values.flat[0]) if values is not None and values.size == 1 else None
    return _fill_value(node.inputs[0])


def _fill_shape(tensor: Any) -> Any:
    """The shape tensor of a fill (Expand's or ConstantOfShape's), through the pass-through ops; else None."""
    node = _producer(tensor, "Expand", "ConstantOfShape", *PASS_THROUGH_OPS)
    if node is None:
        return None
    if node.op == "Expand":
        return node.inputs[1]
    if node.op == "ConstantOfShape":
        return node.inputs[0]
    return None if node.op in ("Unsqueeze", "Reshape", "Squeeze") else _fill_shape(node.inputs[0])


def _leading_dim_of(tensor: Any) -> Any:
    """T where `tensor` is T's first dimension as an int64 [1] (Shape(T, start=0, end=1), Slice(Shape(T), 0, 1),
    Gather(Shape(T), [0]) or Unsqueeze(Gather(Shape(T), 0))); else None."""
    node = _producer(tensor, "Shape", "Slice", "Gather", "Unsqueeze")
    if node is None:
        return None
    if node.op == "Shape":
        return node.inputs[0] if node.attrs.get("start", 0) == 0 and node.attrs.get("end") == 1 else None
    if node.op == "Unsqueeze":
        inner = _producer(node.inputs[0], "Gather")
        return _leading_dim_of(inner.outputs[0]) if inner is not None and _unsqueeze_axes(node) == [0] else None
    shape = _producer(node.inputs[0], "Shape")
    if shape is None or shape.attrs.get("start", 0) != 0 or "end" in shape.attrs:
        return None
    if node.op == "Gather":
        index = _constant(node.inputs[1])
        return shape.inputs[0] if index is not None and index.size == 1 and int(index.flat[0]) == 0 else None
    parts = [_constant(tensor) for tensor in node.inputs[1:]]  # Slice: starts, ends[, axes[, steps]]
    values = [int(part.reshape(-1)[0]) for part in parts if part is not None and part.size == 1]
    if len(values) != len(parts) or values[:2] != [0, 1] or any(value not in (0, 1) for value in values[2:]):
        return None
    return shape.inputs[0]


def _unsqueeze_axes(node: Any) -> list[int] | None:
    """The axes of an Unsqueeze node (an input from opset 13, an attribute before)."""
    if "axes" in node.attrs:
        return [int(axis) for axis in node.attrs["axes"]]
    axes = _constant(node.inputs[1]) if len(node.inputs) > 1 else None
    return None if axes is None else [int(axis) for axis in axes.reshape(-1)]


def _column_of(tensor: Any) -> Any:
    """idx where `tensor` is idx [E] made a column [E, 1]: Unsqueeze(idx, [1] or [-1]) or Reshape(idx, [-1, 1])."""
    node = _producer(tensor, "Unsqueeze", "Reshape")
    if node is None or _rank(node.inputs[0]) not in (1, None):
        return None
    if node.op == "Unsqueeze":
        return node.inputs[0] if _unsqueeze_axes(node) in ([1], [-1]) else None
    shape = _constant(node.inputs[1])
    return node.inputs[0] if shape is not None and shape.reshape(-1).tolist() == [-1, 1] else None


def _rank(tensor: Any) -> int | None:
    return None if getattr(tensor, "shape", None) is None else len(tensor.shape)


def _dtype(tensor: Any) -> np.dtype | None:
    dtype = getattr(tensor, "dtype", None)
    if dtype is None:
        return None
    try:
        return np.dtype(dtype)
    except TypeError:  # an onnx type numpy lacks (bfloat16, float8)
        return None


def _expanded_from_updates(shape: Any, updates: Any, index: Any) -> bool:
    """Whether an Expand's shape is the updates' [E, F]: Shape(updates), or Concat(first dim of updates or idx, ...)."""
    node = _producer(shape, "Shape", "Concat")
    if node is None:
        return False
    if node.op == "Shape":
        return node.inputs[0] is updates and "start" not in node.attrs and "end" not in node.attrs
    return bool(node.inputs) and _leading_dim_of(node.inputs[0]) in (updates, index) and len(node.inputs) == 2


def _scatter_index(node: Any) -> Any:
    """The 1-D idx of an exported index_add / scatter_add (see the module docstring); InputError otherwise."""
    indices, updates = node.inputs[1], node.inputs[2]
    index = _column_of(indices)
    if index is None and node.op == "ScatterElements":
        expand = _producer(indices, "Expand")
        if expand is not None and _expanded_from_updates(expand.inputs[1], updates, _column_of(expand.inputs[0])):
            index = _column_of(expand.inputs[0])
    if index is None:
        wanted = ("Unsqueeze(idx, [1]) (index_add)" if node.op == "ScatterND"
                  else "Expand(Unsqueeze(idx, [1]), shape of the updates) (scatter_add)")
        raise InputError(f"node {node.name} ({node.op}): its indices {indices.name} ({_made_by(indices)}) are not "
                         f"{wanted} of a 1-D index; that index shape is not rewritten")
    return index


def _reduction(node: Any) -> str:
    return "none" if node.op == "Scatter" else str(node.attrs.get("reduction", "none"))


def _match_scatter(node: Any) -> _Match:
    """The scatter-add of `node`, or InputError for the legacy exporter's pattern, another reduction, another
    axis or an index shape not recognised."""
    data, updates = node.inputs[0], node.inputs[2]
    reduction = _reduction(node)
    if reduction == "none" and _fill_value(data) == 0.0:
        adds = [consumer.name for consumer in node.outputs[0].outputs if consumer.op == "Add"]
        if adds:
            raise InputError(
                f"node {node.name} ({node.op} without reduction into zeros, then Add {adds[0]}) is the legacy "
                "exporter's index_add (torch.onnx.export(..., dynamo=False)), which keeps one row where an index "
                "repeats; export with torch.onnx.export(..., dynamo=True)")
    if reduction != "add":
        raise InputError(f"node {node.name} ({node.op}): reduction {reduction!r}; only reduction 'add' (index_add, "
                         "scatter_add) becomes the in-place plugin")
    if node.op == "ScatterElements":
        axis, rank = int(node.attrs.get("axis", 0)), _rank(data)
        if axis != 0 and not (rank is not None and axis == -rank):
            raise InputError(f"node {node.name} (ScatterElements): axis {axis}; the plugin adds rows (axis 0) only")
    return _Match(node, node.op, data, _scatter_index(node), updates)


def _same_dim(a: Any, b: Any) -> bool:
    """Whether two recorded dimensions are known to be equal (the same int, or the same symbolic name)."""
    return a is not None and a == b and not (isinstance(a, int) and a < 0)


def _is_rows_of(shape: Any, zeros: Any, state: Any) -> bool:
    """Whether a fill's shape is [N, 1] with N the state's first dimension."""
    node = _producer(shape, "Concat")
    if node is not None and len(node.inputs) == 2 and _leading_dim_of(node.inputs[0]) is state:
        last = _constant(node.inputs[1])
        return last is not None and last.reshape(-1).tolist() == [1]
    recorded, rows = getattr(zeros, "shape", None), getattr(state, "shape", None)
    return recorded is not None and rows is not None and len(recorded) == 2 and len(rows) == 2 \
        and _same_dim(recorded[0], rows[0]) and recorded[1] == 1


def _is_counts(match: _Match) -> bool:
    """The counts pattern, X not yet known: ones added into zeros [?, 1] (see _pair_counts for X)."""
    return _fill_value(match.data) == 0.0 and _fill_value(match.updates) == 1.0 and _rank(match.data) in (2, None)


def _pair_counts(states: list[_Match], counts: list[_Match]) -> dict[int, _Match]:
    """Each counts scatter paired with the scatter-add into X that has the same idx and X's N; InputError for
    one without such a scatter-add, or a second one for the same X."""
    paired: dict[int, _Match] = {}
    for match in counts:
        zeros_shape = _fill_shape(match.data)
        owner = next((state for state in states if state.index is match.index
                      and _is_rows_of(zeros_shape, match.data, state.data)), None)
        if owner is None:
            raise InputError(
                f"node {match.node.name} ({match.node.op}): counts (ones into zeros {match.data.name}) with no "
                f"scatter-add into a graph input of the same index {match.index.name} and the zeros' rows; its data "
                "is not a graph input, so it cannot be done in place")
        if id(owner.node) in paired:
            raise InputError(f"node {match.node.name} ({match.node.op}): a second counts scatter for {owner.data.name} "
                             f"(the first is {paired[id(owner.node)].node.name}); compute the counts once")
        paired[id(owner.node)] = match
    return paired


def _check_state(match: _Match, graph: Any) -> None:
    """InputError unless X, src and idx have the plugin's types and ranks and nothing but Shape nodes reads X."""
    node, state = match.node, match.data
    others = [consumer.name for consumer in state.outputs if consumer is not node and consumer.op not in SHAPE_ONLY_OPS]
    if state in graph.outputs:
        others.append("a graph output")
    if others:
        raise InputError(f"node {node.name} ({node.op}): its data {state.name} has other consumers "
                         f"({', '.join(others)}); adding into it in place would change what they read")
    dtype = _dtype(state)
    if dtype not in FEATURE_DTYPES or _rank(state) != 2:
        raise InputError(f"node {node.name} ({node.op}): its data {state.name} is {_describe(state)}; the plugin adds "
                         "into a 2-D float32 or float16 tensor")
    if _dtype(match.updates) != dtype or _rank(match.updates) not in (2, None):
        raise InputError(f"node {node.name} ({node.op}): its updates {match.updates.name} are "
                         f"{_describe(match.updates)}; the plugin wants [E, F] of {state.name}'s {dtype}")
    if _dtype(match.index) != INDEX_DTYPE:
        raise InputError(f"node {node.name} ({node.op}): its index {match.index.name} is {_describe(match.index)}; the "
                         "plugin wants int64 (torch's index_add exports int64 indices)")


def _describe(tensor: Any) -> str:
    shape = getattr(tensor, "shape", None)
    dims = "?" if shape is None else ", ".join(str(dim) for dim in shape)
    return f"{_dtype(tensor) or tensor.dtype} [{dims}]"


class _NameSource:
    """Tensor and node names not yet in the graph."""

    def __init__(self, graph: Any) -> None:
        self.used = set(graph.tensors()) | {node.name for node in graph.nodes}

    def __call__(self, wanted: str) -> str:
        name, suffix = wanted, 1
        while name in self.used:
            name, suffix = f"{wanted}_{suffix}", suffix + 1
        self.used.add(name)
        return name


class _Builder:
    """Adds small ONNX nodes for the plugin's inputs: shapes and ConstantOfShape fills."""

    def __init__(self, gs: Any, names: _NameSource, base: str) -> None:
        self.gs, self.names, self.base = gs, names, base
        self.nodes: list[Any] = []
        self.dims: dict[tuple[str, int], Any] = {}

    def node(self, op: str, inputs: list[Any], dtype: Any, attrs: dict[str, Any] | None = None,
             shape: Any = None, name: str = "", domain: str | None = None, outputs: list[Any] | None = None) -> Any:
        label = self.names(f"{self.base}/{name or op}")
        if outputs is None:
            outputs = [self.gs.Variable(self.names(f"{label}_output"), dtype=dtype, shape=shape)]
        node = self.gs.Node(op=op, name=label, attrs=attrs or {}, inputs=inputs, outputs=outputs, domain=domain)
        self.nodes.append(node)
        return node

    def constant(self, values: np.ndarray, name: str) -> Any:
        return self.gs.Constant(self.names(f"{self.base}/{name}"), values)

    def dim(self, tensor: Any, axis: int) -> Any:
        """tensor.shape[axis] as int64 [1]: Shape, then Gather (every opset); made once per tensor and axis."""
        key = (tensor.name, axis)
        if key not in self.dims:
            shape = self.node("Shape", [tensor], np.int64, shape=[_rank(tensor)], name=f"shape_{tensor.name}").outputs[0]
            self.dims[key] = self.node("Gather", [shape, self.constant(np.array([axis], np.int64), f"axis_{axis}")],
                                       np.int64, {"axis": 0}, shape=[1], name=f"dim{axis}_{tensor.name}").outputs[0]
        return self.dims[key]

    def filled(self, shape: Any, value: Any, name: str, dims: list[Any]) -> Any:
        """ConstantOfShape(shape) with `value` (a one-element numpy array fixes the dtype)."""
        return self.node("ConstantOfShape", [shape], value.dtype, {"value": self.gs.Constant(f"{name}_value", value)},
                         shape=dims, name=name).outputs[0]

    def concat(self, parts: list[Any], name: str) -> Any:
        return self.node("Concat", parts, np.int64, {"axis": 0}, shape=[len(parts)], name=name).outputs[0]


def _plugin_nodes(gs: Any, state: _Match, counts: _Match | None, plugin: str, names: _NameSource) -> list[Any]:
    """The plugin node(s) for one scatter-add (and its counts), wired to X, src, idx and to the scatters'
    outputs, which are detached from the scatter nodes (graph.cleanup removes those and their plumbing)."""
    aggregated = state.node.outputs[0]
    state.node.outputs.clear()
    counts_out = None
    if counts is not None:
        counts_out = counts.node.outputs[0]
        counts.node.outputs.clear()
    build = _Builder(gs, names, state.node.name)
    plugin_counts = counts_out
    if counts_out is not None and _dtype(counts_out) != np.dtype(np.int64):
        plugin_counts = gs.Variable(names(f"{counts_out.name}_int64"), dtype=np.int64, shape=counts_out.shape)
    x, src, idx = state.data, state.updates, state.index
    if plugin == PYTHON_PLUGIN:
        attrs = {"plugin_version": PLUGIN_VERSION, "plugin_namespace": PLUGIN_NAMESPACE,
                 COMPUTE_COUNTS_FIELD: int(counts is not None)}
        build.node(PLUGIN_OP, [x, src, idx], None, attrs, name="ScatterAddInPlace",
                   outputs=[aggregated] + ([plugin_counts] if plugin_counts is not None else []))
    elif plugin == AOT_PLUGIN:
        _aot_nodes(build, x, src, idx, aggregated, plugin_counts)
    if plugin_counts is not counts_out:  # counts of another dtype in the model: the plugin's int64, cast
        assert counts_out is not None
        build.node("Cast", [plugin_counts], None, {"to": _onnx_type(counts_out.dtype)}, name="counts_cast",
                   outputs=[counts_out])
    return build.nodes


def _onnx_type(dtype: Any) -> int:
    return int(import_module("onnx").helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def _aot_nodes(build: _Builder, x: Any, src: Any, idx: Any, aggregated: Any, counts: Any) -> None:
    """The AOT plugin nodes and the zero-filled tensors they alias (network/definition.py's fill layers, as ONNX nodes):
    counts [N, 1] int64 zeros (with counts); float16: keys [2E+1] int32 -1, values [2E+1, F] float32 zeros."""
    attrs = {"plugin_namespace": AOT_NAMESPACE, "plugin_version": AOT_PLUGIN_VERSION, "aot": 1}
    tail = []
    if counts is not None:
        rows = build.concat([build.dim(x, 0), build.constant(np.array([1], np.int64), "one")], "counts_shape")
        tail = [build.filled(rows, np.array([0], np.int64), "counts_zero", [x.shape[0] if x.shape else None, 1])]
    outputs_counts = [counts] if counts is not None else []
    if _dtype(x) == np.dtype(np.float32):
        op = AOT_SCATTER_ADD_COUNTS if counts is not None else AOT_SCATTER_ADD
        build.node(op, [x, src, idx, *tail], None, attrs, name=op, domain=AOT_NAMESPACE,
                   outputs=[aggregated, *outputs_counts])
        return
    edges = build.dim(idx, 0)
    scaled = build.node("Mul", [edges, build.constant(np.array([TABLE_SCALE], np.int64), "table_scale")], np.int64,
                        shape=[1], name="table_scaled").outputs[0]
    capacity = build.node("Add", [scaled, build.constant(np.array([TABLE_OFFSET], np.int64), "table_offset")],
                          np.int64, shape=[1], name="table_capacity").outputs[0]
    keys = build.filled(capacity, np.array([KEYS_EMPTY], np.int32), "table_keys_empty", [None])
    table_shape = build.concat([capacity, build.dim(src, 1)], "table_values_shape")
    values = build.filled(table_shape, np.array([0.0], np.float32), "table_values_zero", [None, src.shape[1]])
    op = AOT_SCATTER_TABLE_COUNTS if counts is not None else AOT_SCATTER_TABLE
    table_keys = build.gs.Variable(build.names(f"{build.base}/table_keys"), dtype=np.int32, shape=[None])
    table_values = build.gs.Variable(build.names(f"{build.base}/table_values"), dtype=np.float32,
                                     shape=[None, src.shape[1]])
    build.node(op, [src, idx, keys, values, *tail], None, attrs, name=op, domain=AOT_NAMESPACE,
               outputs=[table_keys, table_values, *outputs_counts])
    build.node(AOT_APPLY_TABLE, [x, table_keys, table_values], None, attrs, name=AOT_APPLY_TABLE,
               domain=AOT_NAMESPACE, outputs=[aggregated])


# --- the model's inputs and outputs, the sample's own network ---------------------------------------------
@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output: name, numpy dtype (None for a type numpy lacks) and shape (an int, or a str for
    a dynamic dimension: its symbolic name, or "?" for none)."""

    name: str
    dtype: np.dtype | None
    shape: tuple[int | str, ...]


def _spec(value_info: Any) -> TensorSpec:
    onnx = import_module("onnx")
    tensor_type = value_info.type.tensor_type
    try:
        dtype: np.dtype | None = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
    except (KeyError, TypeError, ValueError):
        dtype = None
    dims: list[int | str] = []
    for dim in tensor_type.shape.dim:
        dims.append(int(dim.dim_value) if dim.HasField("dim_value") else (dim.dim_param or "?"))
    return TensorSpec(value_info.name, dtype, tuple(dims))


def model_io(model: "onnx.ModelProto") -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """(inputs, outputs) of the graph; inputs that are initializers (constant defaults) left out."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    inputs = tuple(_spec(value) for value in model.graph.input if value.name not in initializers)
    return inputs, tuple(_spec(value) for value in model.graph.output)


@dataclass(frozen=True)
class SampleNetwork:
    """The sample's own network recognised by its inputs and outputs: kind (network.definition CLASSIFIER or
    STATE_UPDATE), precision ("fp32" or "fp16"), F and C (None for the state update)."""

    kind: str
    precision: str
    num_features: int
    num_classes: int | None


_PRECISIONS = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16"}


def sample_network(model: "onnx.ModelProto") -> SampleNetwork | None:
    """The SampleNetwork when the model's inputs and outputs are the sample's (network/definition.py): X [N, F],
    src [E, F], idx [E] int64 and W [C, F] -> softmax [C, N], or X, src, idx -> X_out [N, F]; F and C fixed,
    one float dtype. None otherwise (the CLI then compares with ONNX Runtime only)."""
    inputs, outputs = model_io(model)
    by_name = {spec.name: spec for spec in inputs}
    names = tuple(spec.name for spec in inputs)
    output_names = tuple(spec.name for spec in outputs)
    classifier = names == (INPUT_STATE, INPUT_SOURCE, INPUT_INDEX, INPUT_WEIGHTS) and output_names == (OUTPUT_SOFTMAX,)
    state = names == (INPUT_STATE, INPUT_SOURCE, INPUT_INDEX) and output_names == (OUTPUT_STATE,)
    if not (classifier or state):
        return None
    x, src, idx = by_name[INPUT_STATE], by_name[INPUT_SOURCE], by_name[INPUT_INDEX]
    precision = _PRECISIONS.get(x.dtype) if x.dtype is not None else None
    if precision is None or src.dtype != x.dtype or idx.dtype != INDEX_DTYPE or outputs[0].dtype != x.dtype:
        return None
    if len(x.shape) != 2 or len(src.shape) != 2 or len(idx.shape) != 1 or not isinstance(x.shape[1], int):
        return None
    num_features = x.shape[1]
    if src.shape[1] != num_features or not _dims_agree(src.shape[0], idx.shape[0]):
        return None
    if state:
        out = outputs[0].shape
        ok = len(out) == 2 and _dims_agree(out[0], x.shape[0]) and out[1] == num_features
        return SampleNetwork(STATE_UPDATE, precision, num_features, None) if ok else None
    weights, out = by_name[INPUT_WEIGHTS], outputs[0].shape
    if weights.dtype != x.dtype or len(weights.shape) != 2 or not isinstance(weights.shape[0], int) \
            or weights.shape[1] != num_features or len(out) != 2 or out[0] != weights.shape[0] \
            or not _dims_agree(out[1], x.shape[0]):
        return None
    return SampleNetwork(CLASSIFIER, precision, num_features, weights.shape[0])


def _dims_agree(a: int | str, b: int | str) -> bool:
    """Two recorded dimensions that may be the same size: equal, or either one unnamed/dynamic of another name."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return a == b or "?" in (a, b) or isinstance(a, int) != isinstance(b, int)


# --- ONNX Runtime --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OrtRun:
    """ONNX Runtime's outputs by name; float32_copy is True where ORT ran float32_copy(model) on the feeds cast
    to float32 (its CPU provider has no float16 ScatterND/ScatterElements with reduction add), so the outputs
    are float32 there."""

    outputs: dict[str, np.ndarray]
    float32_copy: bool


def _has_float16_scatter_add(model: "onnx.ModelProto") -> bool:
    onnx = import_module("onnx")
    float16 = {value.name for value in [*model.graph.input, *model.graph.value_info, *model.graph.output]
               if value.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16}
    float16 |= {tensor.name for tensor in model.graph.initializer if tensor.data_type == onnx.TensorProto.FLOAT16}
    return any(node.op_type in SCATTER_OPS and node.input and node.input[0] in float16 for node in model.graph.node)


class OnnxRuntimeSession:
    """One ONNX Runtime session (CPU provider) of a model, to run it on many feeds (--steps feeds X_out back as
    X): made once, run per call. A model with a float16 scatter-add runs as float32_copy(model), its float16
    feeds cast to float32 (float32_copy is then True). InputError (one line: ORT's own first line) for a model
    ONNX Runtime refuses, e.g. a rewritten one (ORT has no kernel for the plugin nodes)."""

    def __init__(self, model: "onnx.ModelProto") -> None:
        ort = import_module("onnxruntime")
        inputs, _ = model_io(model)
        self.input_names = [spec.name for spec in inputs]
        self.float32_copy = _has_float16_scatter_add(model)
        run_model = float32_copy(model) if self.float32_copy else model
        options = ort.SessionOptions()
        options.log_severity_level = 3  # errors only: the exception carries the message
        try:
            self._session = ort.InferenceSession(run_model.SerializeToString(), sess_options=options,
                                                 providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime's Fail, InvalidGraph, NotImplemented...
            raise InputError(f"ONNX Runtime could not load the model: {_first_line(error)}") from None
        self.output_names = [output.name for output in self._session.get_outputs()]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs by name for `feeds` (every graph input by name, in its dtype); InputError for a missing
        or unknown feed or inputs ONNX Runtime refuses."""
        missing = [name for name in self.input_names if name not in feeds]
        unknown = [name for name in feeds if name not in self.input_names]
        if missing or unknown:
            raise InputError(f"ONNX Runtime feeds: missing {missing or 'none'}, unknown {unknown or 'none'}; the "
                             f"model's inputs are {self.input_names}")
        arrays = {name: np.asarray(feeds[name]) for name in self.input_names}
        if self.float32_copy:
            arrays = {name: value.astype(np.float32) if value.dtype == np.float16 else value
                      for name, value in arrays.items()}
        try:
            values = self._session.run(self.output_names, arrays)
        except Exception as error:  # onnxruntime's InvalidArgument, RuntimeException...
            raise InputError(f"ONNX Runtime could not run the model: {_first_line(error)}") from None
        return dict(zip(self.output_names, (np.asarray(value) for value in values)))


def run_onnxruntime(model: "onnx.ModelProto", feeds: Mapping[str, np.ndarray]) -> OrtRun:
    """Runs `model` once in ONNX Runtime (CPU provider) on `feeds`: OnnxRuntimeSession(model).run(feeds), with
    whether ORT ran the float32 copy."""
    session = OnnxRuntimeSession(model)
    return OrtRun(session.run(feeds), session.float32_copy)


def float32_copy(model: "onnx.ModelProto") -> "onnx.ModelProto":
    """A copy of `model` with every float16 tensor made float32: graph inputs, outputs and value_info,
    initializers, tensor attributes (Constant, ConstantOfShape) and the `to`/`dtype` attributes (Cast,
    EyeLike, ...), subgraphs included. For running a float16 model where a runtime lacks float16 kernels."""
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


__all__ = [
    "AOT_NAMESPACE", "AOT_OPS", "OnnxRuntimeSession", "OrtRun", "PLUGIN_NAMESPACE", "PLUGIN_OP", "PLUGIN_VERSION", "Rewritten",
    "SampleNetwork", "ScatterRewrite", "TensorSpec", "float32_copy", "load_model",
    "model_io", "rewrite_model", "run_onnxruntime", "sample_network",
]
