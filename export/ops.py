"""The in-place custom-op convention: torch.ops.aliased_io.scatter_add_, exported to ONNX as the plugin node.

    import export.ops                                   # registers the ops (imports torch)
    torch.ops.aliased_io.scatter_add_(X, src, idx)      # X[idx[e]] += src[e] in place (repeats add up); None
    torch.onnx.export(model, args, dynamo=True, custom_translation_table=export.ops.custom_translation_table)

torch's convention for an in-place op (it names the argument it writes in mutates_args and returns None)
becomes TensorRT's (the plugin's output 0 is input 0's memory): the exported model holds the sample's plugin
node, ScatterAddInPlace(X, src, idx) in domain aliased_io, written by the translation with no pattern matching.

How the export gets there (torch 2.13, onnxscript 0.7.2): torch.export functionalizes the program, and a
mutating custom op with no Functionalize kernel becomes auto_functionalized_v2(op, ...), which the ONNX
exporter cannot translate (it fails converting the op argument; a table entry for the op or the HOP is never
reached). So scatter_add_ has a Functionalize kernel: it records the functional form aliased_io::scatter_add
(state, src, index) -> Tensor and makes its result the state's new value (torch.export records an input
mutation), and the table maps that functional op to the plugin node. The exporter adds no output for the
mutated input and inserts no copy: the model's outputs are what forward returns, so return the state (or
something computed from it), or the update is not in the model; check_updates_exported(program) says so.
"""

from typing import Any

import torch

# The plugin node's format, the one the rewrite writes (numpy only: no onnx, no TensorRT).
from onnx_path.nodes import (
    COUNTS_ATTRIBUTE,
    NAMESPACE_ATTRIBUTE,
    PLUGIN_DOMAIN,
    PLUGIN_DOMAIN_VERSION,
    PLUGIN_OP,
    VERSION_ATTRIBUTE,
    plugin_attributes,
)
from onnx_path.patterns import SHAPE_ONLY_OPS

OP_NAMESPACE = "aliased_io"  # torch.ops.aliased_io.*
FEATURE_DTYPES = (torch.float32, torch.float16)


def _describe(tensor: torch.Tensor) -> str:
    return f"{str(tensor.dtype).removeprefix('torch.')} {list(tensor.shape)}"


def check_arguments(op: str, state: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> None:
    """What the plugin takes: state [N, F] float32 or float16, src [E, F] of its dtype, index [E] int64, one
    device. TypeError or ValueError (one line naming the argument and the value); E checked with torch._check,
    so that an export with dynamic E records it instead of failing."""
    for name, value in (("state", state), ("src", src), ("index", index)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(value).__name__}")
    if state.dtype not in FEATURE_DTYPES or state.dim() != 2:
        raise TypeError(f"{op}: state must be a 2-D float32 or float16 tensor [N, F], got {_describe(state)}")
    if src.dtype != state.dtype or src.dim() != 2 or src.shape[1] != state.shape[1]:
        raise TypeError(f"{op}: src must be [E, F] of the state's dtype and F ({_describe(state)}), got "
                        f"{_describe(src)}")
    if index.dtype != torch.int64 or index.dim() != 1:
        raise TypeError(f"{op}: index must be a 1-D int64 tensor [E], got {_describe(index)}")
    if not state.device == src.device == index.device:
        raise ValueError(f"{op}: state, src and index must be on one device, got {state.device}, {src.device}, "
                         f"{index.device}")
    torch._check(src.shape[0] == index.shape[0],
                 lambda: f"{op}: src has {src.shape[0]} rows and index {index.shape[0]} entries; they must agree")


@torch.library.custom_op(f"{OP_NAMESPACE}::scatter_add_", mutates_args=("state",))
def scatter_add_(state: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> None:
    """Adds row src[e] into state[index[e]] for every e, in place (repeated indices add up); returns None."""
    check_arguments("aliased_io::scatter_add_", state, src, index)
    check_index_range("aliased_io::scatter_add_", state, index)
    state.index_add_(0, index, src)


def check_index_range(op: str, state: torch.Tensor, index: torch.Tensor) -> None:
    """RuntimeError (one line, as torch's index_add_ says it) for an index outside [0, N): the plugin adds row
    index[e] unchecked. Eager only (the fake kernels of an export have no values)."""
    outside = (index < 0) | (index >= state.shape[0])
    if bool(outside.any()):
        position = int(torch.nonzero(outside)[0, 0])
        raise RuntimeError(f"{op}: index {int(index[position])} at position {position} is out of bounds for the "
                           f"{state.shape[0]} rows of state")


@scatter_add_.register_fake
def _scatter_add__fake(state: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> None:
    check_arguments("aliased_io::scatter_add_", state, src, index)


@torch.library.custom_op(f"{OP_NAMESPACE}::scatter_add", mutates_args=())
def scatter_add(state: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The functional form of scatter_add_ (a new tensor: state with the src rows added): what functionalization
    records for scatter_add_, and what the table translates."""
    check_arguments("aliased_io::scatter_add", state, src, index)
    check_index_range("aliased_io::scatter_add", state, index)
    return state.index_add(0, index, src)


@scatter_add.register_fake
def _scatter_add_fake(state: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    check_arguments("aliased_io::scatter_add", state, src, index)
    return torch.empty_like(state)


def _functionalize_scatter_add_(state: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> None:
    """scatter_add_ under functionalization (torch.export): state's new value is scatter_add(state, src, index)."""
    from torch._subclasses.functional_tensor import CppFunctionalizeAPI

    api = CppFunctionalizeAPI()
    unwrapped = api.unwrap_tensors((state, src, index))
    with api.redispatch_to_next():
        updated = scatter_add(*unwrapped)
    api.replace(state, updated)
    api.commit_update(state)
    api.sync(state)


def _refuse_tracing(state: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> None:
    """scatter_add_ under torch.jit.trace, which the legacy exporter (torch.onnx.export(..., dynamo=False))
    runs: the trace would not record the update, and the model written would return the state unchanged."""
    raise RuntimeError("aliased_io::scatter_add_ cannot be traced: torch.jit.trace (and torch.onnx.export(..., "
                       "dynamo=False)) would drop the update; export with torch.onnx.export(..., dynamo=True, "
                       "custom_translation_table=export.ops.custom_translation_table)")


def _autograd_scatter_add_(state: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> None:
    """scatter_add_ at the autograd key, where grad mode is the caller's: a leaf that requires grad is refused
    as torch's own in-place ops refuse it (RuntimeError), then the op runs below autograd."""
    if torch.is_grad_enabled() and isinstance(state, torch.Tensor) and state.requires_grad and state.is_leaf:
        raise RuntimeError("aliased_io::scatter_add_: a leaf tensor that requires grad is being used in an in-place "
                           "operation (update it under torch.no_grad(), or add into a tensor of its own)")
    with torch._C._AutoDispatchBelowAutograd():
        torch.ops.aliased_io.scatter_add_(state, src, index)


_LIBRARY = torch.library.Library(OP_NAMESPACE, "FRAGMENT")  # kept: the registration lives as long as it does
_LIBRARY.impl("scatter_add_", _functionalize_scatter_add_, "Functionalize")
_LIBRARY.impl("scatter_add_", _refuse_tracing, "Tracer")
_LIBRARY.impl("scatter_add_", _autograd_scatter_add_, "Autograd")


def _plugin_schema() -> Any:
    """The plugin node's ONNX schema, for onnxscript to write the node with (never registered with onnx: the
    checker checks no schema in a custom domain, and TensorRT's parser reads none)."""
    from onnx.defs import OpSchema

    def parameter(name: str, type_str: str) -> Any:
        return OpSchema.FormalParameter(name, type_str)

    return OpSchema(PLUGIN_OP, PLUGIN_DOMAIN, PLUGIN_DOMAIN_VERSION,
                    inputs=[parameter("state", "T"), parameter("src", "T"), parameter("idx", "tensor(int64)")],
                    outputs=[parameter("aggregated", "T")],
                    type_constraints=[("T", ["tensor(float)", "tensor(float16)"], "the state's dtype")],
                    attributes=[OpSchema.Attribute(VERSION_ATTRIBUTE, OpSchema.AttrType.STRING, "creator version"),
                                OpSchema.Attribute(NAMESPACE_ATTRIBUTE, OpSchema.AttrType.STRING, "creator namespace"),
                                OpSchema.Attribute(COUNTS_ATTRIBUTE, OpSchema.AttrType.INT, "0: no counts output")])


def scatter_add_plugin_node(state: Any, src: Any, index: Any) -> Any:
    """The translation of aliased_io::scatter_add: one ScatterAddInPlace node (state, src, index) -> the updated
    state, compute_counts=0; the exporter declares domain aliased_io (version 1) in the model's opset_import."""
    from onnxscript.values import Op, Opset

    plugin = Op(Opset(PLUGIN_DOMAIN, PLUGIN_DOMAIN_VERSION), PLUGIN_OP, _plugin_schema())
    return plugin(state, src, index, **plugin_attributes(compute_counts=False))


custom_translation_table = {torch.ops.aliased_io.scatter_add.default: scatter_add_plugin_node}


def check_updates_exported(program: Any) -> None:
    """ValueError (one line) unless every aliased_io::scatter_add_ call of `program` (the ONNXProgram that
    torch.onnx.export returned) is a plugin node of its ONNX model that alone reads its state:
    - the exporter keeps only what forward returns and drops an update nothing returned reads, which in
      TensorRT would never reach the state;
    - a layer that reads the state beside the plugin node (forward read it before the update) has nothing
      ordering it before the in-place write (Shape nodes excepted: they read no values)."""
    calls = [node for node in program.exported_program.graph.nodes
             if node.target is torch.ops.aliased_io.scatter_add.default]
    graph = program.model_proto.graph
    written = [node for node in graph.node if (node.domain, node.op_type) == (PLUGIN_DOMAIN, PLUGIN_OP)]
    if len(written) < len(calls):
        user_inputs = list(program.exported_program.graph_signature.user_inputs)
        names = [value.name for value in graph.input]
        states = sorted({names[user_inputs.index(call.args[0].name)] for call in calls
                         if call.args[0].op == "placeholder" and call.args[0].name in user_inputs})
        raise ValueError(f"{len(calls) - len(written)} of the {len(calls)} aliased_io::scatter_add_ updates (of "
                         f"{', '.join(states) or 'intermediate tensors'}) are not in the ONNX model: torch.onnx.export "
                         "keeps only what forward returns; return the updated state (or something computed from it)")
    for plugin in written:
        state = plugin.input[0]
        readers = [node.name or node.op_type for node in graph.node
                   if node is not plugin and state in node.input and node.op_type not in SHAPE_ONLY_OPS]
        if readers:
            raise ValueError(f"node {plugin.name} ({PLUGIN_OP}) adds into {state} in place, but {', '.join(readers)} "
                             f"also read {state}, in an order the engine need not keep: read the state only after "
                             "the update (through its result)")
