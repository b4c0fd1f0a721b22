"""The plugin nodes in an ONNX model: their format (what TensorRT's ONNX parser looks the creators up by), the
checks a model's plugin nodes must pass, and the builder the rewrite writes them with. export/ops.py's
translation table writes the same Python plugin node from these constants. Importing this module needs numpy
only; onnx and onnx-graphsurgeon are imported by the functions that use them.

The Python plugin (plugin/scatter_add_plugin.py), one node:
    ScatterAddInPlace(state [R, F], src [E, F], idx [E] int64) -> (aggregated [R, F][, counts [R, 1] int64])
    domain "aliased_io" (declared in the model's opset_import, version 1)
    plugin_version "1", plugin_namespace "" (STRING), compute_counts 0 or 1 (INT; one output more with 1)
    aggregated is input 0's memory: row src[e] is added into state[idx[e]] in place.
    overwrite 1 (INT; 0 or absent: add) writes the rows instead, state[idx[e]] = src[e] (where an index repeats,
    one of its edges wins, which one undefined); it has one output, so compute_counts 0.
The AOT plugins: the chains of the project's in-place ops (plugin/inplace_ops.py: plugin/scatter_add_op.py's
SCATTER_ADD and SCATTER_ADD_COUNTS, plugin/overwrite_op.py's OVERWRITE_ROWS), written as a user's own op's are
(onnx_path/own_ops.write_chain): the scratch tensors a chain needs filled as ConstantOfShape nodes, then one
node per step, op_type the step's plugin name (plugin id "aliased_io::<name>"), in domain "aliased_io" with
plugin_namespace "aliased_io", plugin_version "1" and aot 1, its inputs and outputs the step's in order (an
output named like an input is that input's memory). The chain is the op's choice for the dtypes and the
constant sizes the model records, e.g. float32: add_rows(state, src, index) -> state; float16 with rows of
several features: add_into_table(state, src, index, keys, values) -> (keys, values), then
round_table(state, index, keys, values) -> state; an overwrite: overwrite_rows(state, src, index) -> state.

TensorRT's parser finds a creator by op_type, plugin_version and plugin_namespace (10.4 to 10.9); from 10.10 it
also tries the node's domain when plugin_namespace finds none. docs/onnx.md says why the domain is declared.
"""

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from common.errors import InputError
from common.plugin_kind import PluginKind
from inplace.registry import find_step
from inplace.spec import Chain, InplaceOp, Step
from onnx_path.own_ops import step_attributes, write_chain
from plugin.inplace_ops import PROJECT_OPS  # noqa: F401 (importing it registers them: step_of finds their steps)
from plugin.rules import (COMPUTE_COUNTS_FIELD, DEFAULT_COMPUTE_COUNTS, FEATURE_DTYPES, INDEX_DTYPE, PLUGIN_NAME,
                          PLUGIN_NAMESPACE, PLUGIN_VERSION)
from plugin.scatter_add_op import scatter_add_for

PLUGIN_DOMAIN = "aliased_io"
PLUGIN_DOMAIN_VERSION = 1
PLUGIN_OP = PLUGIN_NAME  # the Python plugin's node: op_type, plugin_version, plugin_namespace are its creator's
VERSION_ATTRIBUTE = "plugin_version"
NAMESPACE_ATTRIBUTE = "plugin_namespace"
COUNTS_ATTRIBUTE = COMPUTE_COUNTS_FIELD  # INT: the parser makes it the creator's one INT32 field
OVERWRITE_ATTRIBUTE = "overwrite"  # INT 1: the Python plugin writes rows (plugin.rules OVERWRITE_FIELD)
# What TensorRT's parser takes for an attribute a node leaves out (compute_counts: the creator's default).
PARSER_DEFAULTS: dict[str, Any] = {VERSION_ATTRIBUTE: "1", NAMESPACE_ATTRIBUTE: "", COUNTS_ATTRIBUTE: int(DEFAULT_COMPUTE_COUNTS),
                                   OVERWRITE_ATTRIBUTE: 0}
PYTHON_ARITY = (3, (1, 2))  # the Python plugin node's inputs and outputs (output 0 is input 0's memory)


def plugin_attributes(compute_counts: bool, overwrite: bool = False) -> dict[str, Any]:
    """The Python plugin node's attributes (plugin_version, plugin_namespace as STRING, compute_counts as INT;
    overwrite 1 as INT for an overwrite only, so an adding node stays as earlier releases wrote it)."""
    attributes = {VERSION_ATTRIBUTE: PLUGIN_VERSION, NAMESPACE_ATTRIBUTE: PLUGIN_NAMESPACE,
                  COUNTS_ATTRIBUTE: int(compute_counts)}
    return {**attributes, OVERWRITE_ATTRIBUTE: 1} if overwrite else attributes


def is_overwrite_node(node: Any) -> bool:
    """A Python plugin node (NodeProto) with overwrite=1: it writes rows instead of adding them."""
    return node.op_type == PLUGIN_OP and any(attribute.name == OVERWRITE_ATTRIBUTE and attribute.i == 1
                                             for attribute in node.attribute)


def step_of(domain: str | None, op_type: str) -> tuple[InplaceOp, Chain, Step] | None:
    """(op, chain, step) of an AOT step node in the plugins' domain (a step of a project op's chain)."""
    return find_step(domain, op_type) if domain == PLUGIN_DOMAIN else None


def is_plugin_node(domain: str, op_type: str) -> bool:
    """A node of the plugins' domain naming the Python plugin or a step of a project op's chain (what
    run_rewritten computes on the CPU)."""
    return domain == PLUGIN_DOMAIN and (op_type == PLUGIN_OP or step_of(domain, op_type) is not None)


def node_aliases(domain: str, op_type: str) -> dict[int, int]:
    """{output position: the input position whose memory it is} of a plugin node."""
    if op_type == PLUGIN_OP:
        return {0: 0}
    found = step_of(domain, op_type)
    if found is None:
        return {}
    step = found[2]
    return {step.outputs.index(out): step.inputs.index(into) for out, into in step.aliases().items()}


def declare_domain(model: Any) -> None:
    """Adds the plugins' domain to the model's opset_import (once): onnx.checker accepts a custom-domain op only
    in a declared domain, and it checks no schema there."""
    if not any(opset.domain == PLUGIN_DOMAIN for opset in model.opset_import):
        entry = model.opset_import.add()
        entry.domain, entry.version = PLUGIN_DOMAIN, PLUGIN_DOMAIN_VERSION


def check_plugin_nodes(model: Any) -> list[Any]:
    """The model's plugin nodes (NodeProto), each checked: its domain declared, its attributes as this module
    writes them, its number of inputs and outputs, and the dtypes the model records for them. InputError (one
    line naming the node and the value) otherwise. A ScatterAddInPlace node outside the domain is refused too:
    onnx.checker rejects it, so no tool that checks models would take the file."""
    onnx = _onnx()
    types = _recorded_types(model)
    declared = any(opset.domain == PLUGIN_DOMAIN for opset in model.opset_import)
    nodes = []
    for position, node in enumerate(model.graph.node):
        name = node.name or f"{node.op_type}_{position}"
        if node.op_type == PLUGIN_OP and node.domain != PLUGIN_DOMAIN:
            raise InputError(f"node {name} ({PLUGIN_OP}): domain {node.domain!r}; the plugin node belongs to domain "
                             f"{PLUGIN_DOMAIN!r} (declared in the model's opset_import)")
        if not is_plugin_node(node.domain, node.op_type):
            continue
        if not declared:
            raise InputError(f"node {name} ({node.op_type}): its domain {PLUGIN_DOMAIN!r} is not in the model's "
                             "opset_import")
        attributes = {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in node.attribute}
        kinds = {attribute.name: attribute.type for attribute in node.attribute}
        found = step_of(node.domain, node.op_type)
        expected = (step_attributes(found[0]) if found is not None
                    else _python_expected(name, node, attributes, kinds))
        for key, value in expected.items():
            kind = onnx.AttributeProto.INT if isinstance(value, int) else onnx.AttributeProto.STRING
            wanted = value.encode() if isinstance(value, str) else value
            if key not in attributes and key in PARSER_DEFAULTS and PARSER_DEFAULTS[key] == value:
                continue  # left out, and the parser's (or the creator's) default is the value
            got = attributes.get(key)
            if got != wanted or kinds.get(key) != kind:
                shown = "missing" if got is None else repr(got.decode() if isinstance(got, bytes) else got)
                raise InputError(f"node {name} ({node.op_type}): attribute {key} is {shown}; the plugin node has "
                                 f"{key}={value!r} ({onnx.AttributeProto.AttributeType.Name(kind)})")
        inputs, outputs = (PYTHON_ARITY if found is None
                           else (len(found[2].inputs), (len(found[2].outputs),)))
        if len(node.input) != inputs or len(node.output) not in outputs:
            raise InputError(f"node {name} ({node.op_type}): {len(node.input)} inputs and {len(node.output)} outputs; "
                             f"the plugin node has {inputs} and {' or '.join(map(str, outputs))}")
        _check_dtypes(name, node, types)
        nodes.append(node)
    return nodes


def _python_expected(name: str, node: Any, attributes: Mapping[str, Any], kinds: Mapping[str, int]) -> dict[str, Any]:
    """The attributes a Python plugin node must have: an adding one's by its outputs, an overwrite's (overwrite
    INT 1, compute_counts 0, one output); InputError for an overwrite attribute other than INT 0 or 1."""
    onnx = _onnx()
    overwrite = attributes.get(OVERWRITE_ATTRIBUTE, 0)
    if overwrite not in (0, 1) or kinds.get(OVERWRITE_ATTRIBUTE, onnx.AttributeProto.INT) != onnx.AttributeProto.INT:
        raise InputError(f"node {name} ({node.op_type}): attribute {OVERWRITE_ATTRIBUTE} is {overwrite!r}; the plugin "
                         f"node has {OVERWRITE_ATTRIBUTE}=0 (add) or 1 (overwrite) (INT)")
    if overwrite and len(node.output) != 1:
        raise InputError(f"node {name} ({node.op_type}): {OVERWRITE_ATTRIBUTE}=1 with {len(node.output)} outputs; an "
                         "overwrite has one output (the state) and compute_counts=0")
    expected = plugin_attributes(len(node.output) == 2, bool(overwrite))
    return {**expected, OVERWRITE_ATTRIBUTE: 0} if OVERWRITE_ATTRIBUTE in attributes and not overwrite else expected


def _check_dtypes(name: str, node: Any, types: Mapping[str, np.dtype]) -> None:
    """The recorded dtypes of a plugin node's inputs (where the model records them) against the plugin's: the
    Python plugin's state, src (the state's dtype) and idx; a step node's inputs against its op's inputs and
    its chain's scratch tensors."""
    found = step_of(node.domain, node.op_type)
    if found is None:
        names: tuple[str, ...] = ("state", "src", "index")
        declared: dict[str, tuple[Any, ...]] = {"state": FEATURE_DTYPES, "src": FEATURE_DTYPES, "index": (INDEX_DTYPE,)}
    else:
        op, chain, step = found
        names = step.inputs
        declared = {tensor.name: tuple(np.dtype(dtype) for dtype in tensor.dtypes) for tensor in op.inputs}
        declared.update((scratch.name, (np.dtype(scratch.dtype),)) for scratch in chain.scratch
                        if scratch.name not in declared)
    recorded = {role: types.get(tensor) for role, tensor in zip(names, node.input)}
    for role, tensor in zip(names, node.input):
        allowed: tuple[Any, ...] | None = declared.get(role)
        if role == "src" and recorded.get("state") is not None:
            allowed = (recorded["state"],)
        dtype = recorded[role]
        if allowed is not None and dtype is not None and dtype not in allowed:
            shown = "idx" if role == "index" else role
            raise InputError(f"node {name} ({node.op_type}): its {shown} {tensor} is {dtype}; the plugin takes "
                             f"{' or '.join(str(item) for item in allowed)}")


def _recorded_types(model: Any) -> dict[str, np.dtype]:
    """numpy dtypes the model records: graph inputs, outputs, value_info and initializers."""
    onnx = _onnx()
    types: dict[str, np.dtype] = {}
    for value in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        elem = value.type.tensor_type.elem_type
        if elem:
            try:
                types[value.name] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
            except (KeyError, TypeError, ValueError):
                pass
    for tensor in model.graph.initializer:
        types[tensor.name] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
    return types


def _onnx() -> Any:
    from common.imports import import_module

    return import_module("onnx")


# --- writing the nodes (onnx-graphsurgeon) ----------------------------------------------------------------------
class NameSource:
    """Tensor and node names not yet in the graph."""

    def __init__(self, graph: Any) -> None:
        self.used = set(graph.tensors()) | {node.name for node in graph.nodes}

    def __call__(self, wanted: str) -> str:
        name, suffix = wanted, 1
        while name in self.used:
            name, suffix = f"{wanted}_{suffix}", suffix + 1
        self.used.add(name)
        return name


class Builder:
    """Adds nodes named after `base` (the scatter they replace): the plugin nodes, shapes, reshapes and fills."""

    def __init__(self, gs: Any, names: NameSource, base: str) -> None:
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

    def shape(self, tensor: Any) -> Any:
        rank = None if tensor.shape is None else len(tensor.shape)
        return self.node("Shape", [tensor], np.int64, shape=[rank], name=f"shape_{tensor.name}").outputs[0]

    def dim(self, tensor: Any, axis: int) -> Any:
        """tensor.shape[axis] as int64 [1]: Shape, then Gather (every opset); made once per tensor and axis."""
        key = (tensor.name, axis)
        if key not in self.dims:
            self.dims[key] = self.node("Gather", [self.shape(tensor), self.constant(np.array([axis], np.int64), f"axis_{axis}")],
                                       np.int64, {"axis": 0}, shape=[1], name=f"dim{axis}_{tensor.name}").outputs[0]
        return self.dims[key]

    def rows(self, tensor: Any, name: str) -> Any:
        """`tensor` as rows [R, the product of its other dimensions] (Reshape to [0, -1])."""
        shape = None if tensor.shape is None else [tensor.shape[0], _product(tensor.shape[1:])]
        return self.node("Reshape", [tensor, self.constant(np.array([0, -1], np.int64), f"{name}_rows_shape")],
                         tensor.dtype, shape=shape, name=f"{name}_rows").outputs[0]

    def filled(self, shape: Any, value: np.ndarray, name: str, dims: list[Any] | None) -> Any:
        """ConstantOfShape(shape) with `value` (a one-element numpy array fixes the dtype)."""
        return self.node("ConstantOfShape", [shape], value.dtype, {"value": self.gs.Constant(self.names(f"{name}_value"), value)},
                         shape=dims, name=name).outputs[0]

    def concat(self, parts: list[Any], name: str) -> Any:
        return self.node("Concat", parts, np.int64, {"axis": 0}, shape=[len(parts)], name=name).outputs[0]


def _product(dims: Iterable[Any]) -> Any:
    """The product of recorded dimensions, or None when one is not a number."""
    total = 1
    for dim in dims:
        if not isinstance(dim, int) or dim < 0:
            return None
        total *= dim
    return total


def plugin_nodes(build: Builder, plugin: PluginKind, state: Any, src: Any, idx: Any, aggregated: Any,
                 counts: Any | None) -> None:
    """The `plugin` node(s) adding src [E, F] into state [R, F] at idx [E] int64, writing the existing tensors
    `aggregated` (state's memory) and `counts` (int64 [R, 1], or None for compute_counts=0): the Python plugin's
    node, or for the AOT plugin the chain of SCATTER_ADD_COUNTS (with counts) or SCATTER_ADD (write_chain)."""
    if plugin.aot:
        write_chain(build, scatter_add_for(counts is not None), {"state": state, "src": src, "index": idx},
                    {"state": aggregated, "counts": counts})
    else:
        build.node(PLUGIN_OP, [state, src, idx], None, plugin_attributes(counts is not None), name=PLUGIN_OP,
                   domain=PLUGIN_DOMAIN, outputs=[aggregated] + ([counts] if counts is not None else []))


def overwrite_nodes(build: Builder, plugin: PluginKind, state: Any, src: Any, idx: Any, written: Any) -> None:
    """The `plugin` node(s) writing rows src [E, F] into state [R, F] at idx [E] int64 (where an index repeats, one
    of its edges wins), writing the existing tensor `written` (state's memory): the Python plugin's node with
    overwrite=1, or for the AOT plugin OVERWRITE_ROWS's chain (write_chain)."""
    if plugin.aot:
        from plugin.overwrite_op import OVERWRITE_ROWS

        write_chain(build, OVERWRITE_ROWS, {"state": state, "src": src, "index": idx}, {"state": written})
    else:
        build.node(PLUGIN_OP, [state, src, idx], None, plugin_attributes(False, overwrite=True), name=PLUGIN_OP,
                   domain=PLUGIN_DOMAIN, outputs=[written])
