"""The ONNX side of an in-place op of one's own (inplace/): its ONE custom node (domain op.namespace, op_type op.name, written
by the export: inplace.torch_op) rewritten into what TensorRT builds, the chain of AOT plugin nodes.

    write_chain(build, op, inputs, results)    the chain of `op` that InplaceOp.chain_for picks for the
                                          inputs' dtypes and constant sizes, as nodes (the one writer of every
                                          AOT chain in a model: the project's ops' too, onnx_path/nodes.py):
                                          each filled Scratch as ConstantOfShape over its shape expression
                                          (Shape, Gather, Add, Mul, Div, Min, Max nodes; an unfilled one is the
                                          first step node's output), then one node per Step (op_type
                                          the step's plugin, domain and plugin_namespace op.namespace, aot=1), the
                                          tensors passed between them by name; the op's existing output tensors
                                          written by the last step that writes each
    rewrite_calls(gs, graph, names, builder) -> [CallRewrite]    every registered op's custom node in the graph replaced by
                                          its chain (write_chain)
    call_aliases(graph, calls)            {graph output: graph input} for each mutated input that is a graph input
                                          and whose new value is a graph output (bind them at one address)

InputError (one line naming the node) for a call the rewrite cannot take: wrong arity, a dtype the op does not
take, or a mutated input that other nodes also read (nothing orders them before the in-place write).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from common.errors import InputError
from inplace.checks import plugin_name
from inplace.registry import find
from inplace.spec import BuildFacts, InplaceOp

VERSION_ATTRIBUTE, NAMESPACE_ATTRIBUTE, AOT_ATTRIBUTE = "plugin_version", "plugin_namespace", "aot"
SHAPE_READERS = ("Shape", "Size")


@dataclass(frozen=True)
class CallRewrite:
    """One custom node replaced: its name, the op, the chain's plugin nodes and scratch fills, in order."""

    node: str
    op: str
    plugin_nodes: tuple[str, ...]
    scratch: tuple[str, ...]

    def line(self) -> str:
        fills = f" after {len(self.scratch)} scratch fill(s)" if self.scratch else ""
        return f"{self.node} ({self.op}) -> {' + '.join(self.plugin_nodes)}{fills} (AOT plugins, in place)"


def step_attributes(op: InplaceOp) -> dict[str, Any]:
    """A step node's attributes, as TensorRT's ONNX parser reads them: the creator's namespace and version, and
    aot=1 (the AOT implementation; TensorRT >= 10.9)."""
    return {NAMESPACE_ATTRIBUTE: op.namespace, VERSION_ATTRIBUTE: op.version, AOT_ATTRIBUTE: 1}


class OnnxSizes:
    """Expr arithmetic as ONNX nodes over int64 [1] tensors (the sizes: Shape + Gather of the op's inputs)."""

    def __init__(self, build: Any) -> None:
        self.build = build

    def const(self, value: int) -> Any:
        return self.build.constant(np.array([value], np.int64), f"const_{value}")

    def _node(self, op: str, a: Any, b: Any) -> Any:
        return self.build.node(op, [a, b], np.int64, shape=[1], name=op.lower()).outputs[0]

    def add(self, a: Any, b: Any) -> Any:
        return self._node("Add", a, b)

    def mul(self, a: Any, b: Any) -> Any:
        return self._node("Mul", a, b)

    def floordiv(self, a: Any, b: Any) -> Any:
        return self._node("Div", a, b)  # sizes are non-negative: integer Div truncates, which is floor there

    def cdiv(self, a: Any, b: Any) -> Any:
        return self._node("Div", self._node("Sub", self._node("Add", a, b), self.const(1)), b)

    def min(self, a: Any, b: Any) -> Any:
        return self._node("Min", a, b)

    def max(self, a: Any, b: Any) -> Any:
        return self._node("Max", a, b)


class _Dims(dict[str, Any]):
    """Size name -> int64 [1] tensor, made (Shape + Gather) when an expression first reads it."""

    def __init__(self, build: Any, where: dict[str, tuple[Any, int]]) -> None:
        super().__init__()
        self.build, self.where = build, where

    def __missing__(self, name: str) -> Any:
        tensor, axis = self.where[name]
        self[name] = self.build.dim(tensor, axis)
        return self[name]


def _dtype_name(tensor: Any) -> str | None:
    try:
        return np.dtype(tensor.dtype).name if tensor.dtype is not None else None
    except TypeError:
        return None


def rewrite_calls(gs: Any, graph: Any, names: Any, builder: Any) -> list[CallRewrite]:
    """Replaces every registered op's custom node of `graph` (onnx-graphsurgeon) by its chain; `names` gives
    unused tensor and node names (onnx_path.nodes.NameSource), `builder` makes the node builder
    (onnx_path.nodes.Builder: gs, names, base name)."""
    calls = []
    for node in list(graph.nodes):
        entry = find(node.domain or "", node.op)
        if entry is not None:
            calls.append(_rewrite_call(graph, builder(gs, names, node.name), node, entry.op))
    return calls


def _rewrite_call(graph: Any, build: Any, node: Any, op: InplaceOp) -> CallRewrite:
    label = f"node {node.name} ({op.namespace}::{op.name})"
    inputs = [tensor.name for tensor in op.inputs]
    outputs = op.output_names()
    if len(node.inputs) != len(inputs) or len(node.outputs) != len(outputs):
        raise InputError(f"{label}: {len(node.inputs)} inputs and {len(node.outputs)} outputs; the op takes "
                         f"{len(inputs)} ({', '.join(inputs)}) and gives {len(outputs)} ({', '.join(outputs)})")
    values = dict(zip(inputs, node.inputs))
    for tensor in op.inputs:
        dtype = _dtype_name(values[tensor.name])
        if dtype is not None and dtype not in tensor.dtypes:
            raise InputError(f"{label}: its input {tensor.name} ({values[tensor.name].name}) is {dtype}; the op takes "
                             f"{' or '.join(tensor.dtypes)}")
    for name in op.mutates:
        readers = [reader.name for reader in values[name].outputs if reader is not node
                   and reader.op not in SHAPE_READERS]
        if readers:
            raise InputError(f"{label} updates {values[name].name} in place, but {', '.join(readers)} also read it, in "
                             "an order the engine need not keep: read it only after the update (through the op's "
                             "output)")
    results = dict(zip(outputs, node.outputs))
    node.inputs.clear()
    node.outputs.clear()
    written = write_chain(build, op, values, results)
    graph.nodes.extend(build.nodes)
    return CallRewrite(node.name, f"{op.namespace}::{op.name}", written.plugin_nodes, written.scratch)


def build_facts(op: InplaceOp, values: Mapping[str, Any]) -> BuildFacts:
    """What the model records of an op's inputs (op input name -> graphsurgeon tensor): their dtypes and the sizes
    that are constant dimensions."""
    dtypes = {name: dtype for name, tensor in values.items() for dtype in [_dtype_name(tensor)] if dtype}
    constants = {size: int(values[tensor].shape[axis]) for size, (tensor, axis) in op.sizes.items()
                 if values[tensor].shape is not None and len(values[tensor].shape) > axis
                 and isinstance(values[tensor].shape[axis], int) and values[tensor].shape[axis] >= 0}
    return BuildFacts(dtypes, constants)


def _recorded_dim(dim: Any, values: Mapping[str, Any], op: InplaceOp) -> Any:
    """What the model records of a scratch dimension: a constant, or a size read straight off an input's shape
    (its symbolic name or number there); None for anything computed."""
    if dim.op == "const":
        return int(dim.value)
    if dim.op == "size":
        tensor, axis = op.sizes[dim.value]
        shape = values[tensor].shape
        return shape[axis] if shape is not None and len(shape) > axis else None
    return None


@dataclass(frozen=True)
class WrittenChain:
    """The nodes write_chain added: the step nodes and the scratch fills' tensors, by name, in order."""

    plugin_nodes: tuple[str, ...]
    scratch: tuple[str, ...]


def write_chain(build: Any, op: InplaceOp, inputs: Mapping[str, Any], results: Mapping[str, Any]) -> WrittenChain:
    """Adds to `build` (onnx_path.nodes.Builder) the chain of `op` that InplaceOp.chain_for picks from what the
    model records of `inputs` (op input name -> tensor): each filled Scratch as ConstantOfShape over its shape
    expression (an unfilled one is the first step node's output), then one node per Step (op_type the step's
    plugin, domain op.namespace, step_attributes), the tensors passed between them by name. The last step that
    writes each op output writes the existing tensor `results[name]` (an output left out of `results` gets a tensor
    of its own)."""
    gs, names = build.gs, build.names
    values = dict(inputs)
    chain = op.chain_for(build_facts(op, values))
    sizes = _Dims(build, {size: (values[tensor], axis) for size, (tensor, axis) in op.sizes.items()})
    arithmetic = OnnxSizes(build)
    fills = []
    for scratch in chain.filled():
        parts = [dim.evaluate(sizes, arithmetic) for dim in scratch.shape]
        shape = build.concat(parts, f"{scratch.name}_shape") if parts else build.constant(
            np.zeros(0, np.int64), f"{scratch.name}_shape")
        filled = build.filled(shape, np.array([scratch.fill], np.dtype(scratch.dtype)), f"{scratch.name}_fill",
                              [_recorded_dim(dim, values, op) for dim in scratch.shape])
        values[scratch.name] = filled
        fills.append(filled.name)
    created = {scratch.name: scratch for scratch in chain.created()}
    last = {name: position for position, step in enumerate(chain.steps) for name in step.outputs}
    plugin_nodes = []
    for position, step in enumerate(chain.steps):
        written = []
        for name in step.outputs:
            if last[name] == position and results.get(name) is not None:
                written.append(results[name])
            elif name in created and name not in values:
                scratch = created[name]
                written.append(gs.Variable(names(f"{build.base}/{plugin_name(step)}_{name}"),
                                           dtype=np.dtype(scratch.dtype),
                                           shape=[_recorded_dim(dim, values, op) for dim in scratch.shape]))
            else:
                like = values.get(name)
                written.append(gs.Variable(names(f"{build.base}/{plugin_name(step)}_{name}"),
                                           dtype=None if like is None else like.dtype,
                                           shape=None if like is None else like.shape))
        plugin = build.node(plugin_name(step), [values[name] for name in step.inputs], None, step_attributes(op),
                            name=plugin_name(step), domain=op.namespace, outputs=written)
        values.update(zip(step.outputs, written))
        plugin_nodes.append(plugin.name)
    return WrittenChain(tuple(plugin_nodes), tuple(fills))


def call_aliases(graph: Any, before: dict[str, tuple[str, str]]) -> dict[str, str]:
    """{graph output: graph input} of `before` ({output tensor name: (input tensor name, op)}, the mutated inputs'
    new values) where both are the graph's."""
    inputs = {tensor.name for tensor in graph.inputs}
    outputs = {tensor.name for tensor in graph.outputs}
    return {out: into for out, (into, _) in before.items() if out in outputs and into in inputs}


def mutated_pairs(graph: Any) -> dict[str, tuple[str, str]]:
    """{new value's tensor name: (mutated input's tensor name, op id)} of every registered op's custom node."""
    pairs = {}
    for node in graph.nodes:
        entry = find(node.domain or "", node.op)
        if entry is None or len(node.inputs) != len(entry.op.inputs):
            continue
        names = [tensor.name for tensor in entry.op.inputs]
        for position, name in enumerate(entry.op.mutates):
            if position < len(node.outputs):
                pairs[node.outputs[position].name] = (node.inputs[names.index(name)].name,
                                                      f"{entry.op.namespace}::{entry.op.name}")
    return pairs
