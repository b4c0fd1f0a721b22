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
The AOT plugins (plugin/scatter_add_aot.py, ids "aliased_io::<op>"), in domain "aliased_io" with
plugin_namespace "aliased_io", plugin_version "1" and aot 1; their zero-filled inputs (counts0, keys0,
values0) are ConstantOfShape nodes the rewrite adds:
    float32:  scatter_add(state, src, idx) -> state'          scatter_add_counts(state, src, idx, counts0) -> (state', counts)
    float16:  scatter_table[_counts](src, idx, keys0, values0[, counts0]) -> (keys, values[, counts])
              apply_table(state, keys, values) -> state'
    overwrite (either dtype): overwrite_rows(state, src, idx) -> state'

TensorRT's parser finds a creator by op_type, plugin_version and plugin_namespace (10.4 to 10.9); from 10.10 it
also tries the node's domain when plugin_namespace finds none. docs/onnx.md says why the domain is declared.
"""

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from common.errors import InputError
from common.plugin_kind import PluginKind
from network.aot_layers import KEYS_EMPTY, TABLE_OFFSET, TABLE_SCALE
from plugin.rules import (COMPUTE_COUNTS_FIELD, DEFAULT_COMPUTE_COUNTS, FEATURE_DTYPES, INDEX_DTYPE, PLUGIN_NAME,
                          PLUGIN_NAMESPACE, PLUGIN_VERSION)

PLUGIN_DOMAIN = "aliased_io"
PLUGIN_DOMAIN_VERSION = 1
PLUGIN_OP = PLUGIN_NAME  # the Python plugin's node: op_type, plugin_version, plugin_namespace are its creator's
VERSION_ATTRIBUTE = "plugin_version"
NAMESPACE_ATTRIBUTE = "plugin_namespace"
COUNTS_ATTRIBUTE = COMPUTE_COUNTS_FIELD  # INT: the parser makes it the creator's one INT32 field
# The AOT plugins: op_type is the id's name part; the namespace goes in the domain and in plugin_namespace.
AOT_NAMESPACE = PLUGIN_DOMAIN
AOT_SCATTER_ADD = "scatter_add"
AOT_SCATTER_ADD_COUNTS = "scatter_add_counts"
AOT_SCATTER_TABLE = "scatter_table"
AOT_SCATTER_TABLE_COUNTS = "scatter_table_counts"
AOT_APPLY_TABLE = "apply_table"
AOT_OVERWRITE_ROWS = "overwrite_rows"
AOT_PLUGIN_VERSION = "1"
AOT_ATTRIBUTE = "aot"  # 1: TensorRT uses the AOT implementation (10.9+)
AOT_OPS = (AOT_SCATTER_ADD, AOT_SCATTER_ADD_COUNTS, AOT_SCATTER_TABLE, AOT_SCATTER_TABLE_COUNTS, AOT_APPLY_TABLE,
           AOT_OVERWRITE_ROWS)
OVERWRITE_ATTRIBUTE = "overwrite"  # INT 1: the Python plugin writes rows (plugin.rules OVERWRITE_FIELD)
PLUGIN_OPS = (PLUGIN_OP, *AOT_OPS)
# What TensorRT's parser takes for an attribute a node leaves out (compute_counts: the creator's default).
PARSER_DEFAULTS: dict[str, Any] = {VERSION_ATTRIBUTE: "1", NAMESPACE_ATTRIBUTE: "", COUNTS_ATTRIBUTE: int(DEFAULT_COMPUTE_COUNTS),
                                   OVERWRITE_ATTRIBUTE: 0}
# Inputs and outputs of each plugin node, and which output is which input's memory (output -> input).
NODE_ARITY = {PLUGIN_OP: (3, (1, 2)), AOT_SCATTER_ADD: (3, (1,)), AOT_SCATTER_ADD_COUNTS: (4, (2,)),
              AOT_SCATTER_TABLE: (4, (2,)), AOT_SCATTER_TABLE_COUNTS: (5, (3,)), AOT_APPLY_TABLE: (3, (1,)),
              AOT_OVERWRITE_ROWS: (3, (1,))}
NODE_ALIASES = {PLUGIN_OP: {0: 0}, AOT_SCATTER_ADD: {0: 0}, AOT_SCATTER_ADD_COUNTS: {0: 0, 1: 3},
                AOT_SCATTER_TABLE: {0: 2, 1: 3}, AOT_SCATTER_TABLE_COUNTS: {0: 2, 1: 3, 2: 4},
                AOT_APPLY_TABLE: {0: 0}, AOT_OVERWRITE_ROWS: {0: 0}}


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


def aot_attributes() -> dict[str, Any]:
    return {NAMESPACE_ATTRIBUTE: AOT_NAMESPACE, VERSION_ATTRIBUTE: AOT_PLUGIN_VERSION, AOT_ATTRIBUTE: 1}


def is_plugin_node(domain: str, op_type: str) -> bool:
    """A node of the plugins' domain naming one of their ops (what run_rewritten computes on the CPU)."""
    return domain == PLUGIN_DOMAIN and op_type in PLUGIN_OPS


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
        expected = (_python_expected(name, node, attributes, kinds) if node.op_type == PLUGIN_OP
                    else aot_attributes())
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
        inputs, outputs = NODE_ARITY[node.op_type]
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
    """The recorded dtypes of a plugin node's inputs (where the model records them) against the plugin's."""
    roles: tuple[tuple[str, str, np.dtype | None, tuple[Any, ...]], ...]
    if node.op_type in (PLUGIN_OP, AOT_SCATTER_ADD, AOT_SCATTER_ADD_COUNTS, AOT_OVERWRITE_ROWS):
        state, src, idx = (types.get(tensor) for tensor in node.input[:3])
        roles = (("state", node.input[0], state, FEATURE_DTYPES), ("src", node.input[1], src, (state,) if state else FEATURE_DTYPES),
                 ("idx", node.input[2], idx, (INDEX_DTYPE,)))
    elif node.op_type in (AOT_SCATTER_TABLE, AOT_SCATTER_TABLE_COUNTS):
        roles = (("src", node.input[0], types.get(node.input[0]), (np.dtype(np.float16),)),
                 ("idx", node.input[1], types.get(node.input[1]), (INDEX_DTYPE,)))
    else:
        roles = (("state", node.input[0], types.get(node.input[0]), (np.dtype(np.float16),)),)
    for role, tensor, dtype, allowed in roles:
        if dtype is not None and dtype not in allowed:
            raise InputError(f"node {name} ({node.op_type}): its {role} {tensor} is {dtype}; the plugin takes "
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
    `aggregated` (state's memory) and `counts` (int64 [R, 1], or None for compute_counts=0)."""
    if plugin.aot:
        _aot_nodes(build, state, src, idx, aggregated, counts)
    else:
        build.node(PLUGIN_OP, [state, src, idx], None, plugin_attributes(counts is not None), name=PLUGIN_OP,
                   domain=PLUGIN_DOMAIN, outputs=[aggregated] + ([counts] if counts is not None else []))


def _aot_nodes(build: Builder, x: Any, src: Any, idx: Any, aggregated: Any, counts: Any) -> None:
    """The AOT plugin nodes and the zero-filled tensors they alias (network/aot_layers.py's fill layers, as ONNX
    nodes): counts [R, 1] int64 zeros (with counts); float16: keys [2E+1] int32 -1, values [2E+1, F] float32 0."""
    attrs = aot_attributes()
    tail = []
    if counts is not None:
        rows = build.concat([build.dim(x, 0), build.constant(np.array([1], np.int64), "one")], "counts_shape")
        tail = [build.filled(rows, np.array([0], np.int64), "counts_zero", [x.shape[0] if x.shape else None, 1])]
    outputs_counts = [counts] if counts is not None else []
    if np.dtype(x.dtype) == np.dtype(np.float32):
        op = AOT_SCATTER_ADD_COUNTS if counts is not None else AOT_SCATTER_ADD
        build.node(op, [x, src, idx, *tail], None, attrs, name=op, domain=PLUGIN_DOMAIN,
                   outputs=[aggregated, *outputs_counts])
        return
    edges = build.dim(idx, 0)
    scaled = build.node("Mul", [edges, build.constant(np.array([TABLE_SCALE], np.int64), "table_scale")], np.int64,
                        shape=[1], name="table_scaled").outputs[0]
    capacity = build.node("Add", [scaled, build.constant(np.array([TABLE_OFFSET], np.int64), "table_offset")],
                          np.int64, shape=[1], name="table_capacity").outputs[0]
    keys = build.filled(capacity, np.array([KEYS_EMPTY], np.int32), "table_keys_empty", [None])
    width = src.shape[1] if src.shape else None
    values = build.filled(build.concat([capacity, build.dim(src, 1)], "table_values_shape"),
                          np.array([0.0], np.float32), "table_values_zero", [None, width])
    op = AOT_SCATTER_TABLE_COUNTS if counts is not None else AOT_SCATTER_TABLE
    table_keys = build.gs.Variable(build.names(f"{build.base}/table_keys"), dtype=np.int32, shape=[None])
    table_values = build.gs.Variable(build.names(f"{build.base}/table_values"), dtype=np.float32, shape=[None, width])
    build.node(op, [src, idx, keys, values, *tail], None, attrs, name=op, domain=PLUGIN_DOMAIN,
               outputs=[table_keys, table_values, *outputs_counts])
    build.node(AOT_APPLY_TABLE, [x, table_keys, table_values], None, attrs, name=AOT_APPLY_TABLE,
               domain=PLUGIN_DOMAIN, outputs=[aggregated])


def overwrite_nodes(build: Builder, plugin: PluginKind, state: Any, src: Any, idx: Any, written: Any) -> None:
    """The `plugin` node writing rows src [E, F] into state [R, F] at idx [E] int64 (where an index repeats, one
    of its edges wins), writing the existing tensor `written` (state's memory)."""
    if plugin.aot:
        build.node(AOT_OVERWRITE_ROWS, [state, src, idx], None, aot_attributes(), name=AOT_OVERWRITE_ROWS,
                   domain=PLUGIN_DOMAIN, outputs=[written])
    else:
        build.node(PLUGIN_OP, [state, src, idx], None, plugin_attributes(False, overwrite=True), name=PLUGIN_OP,
                   domain=PLUGIN_DOMAIN, outputs=[written])
