"""The in-place custom-op convention: torch.ops.aliased_io.scatter_add_, exported to ONNX as the plugin node.

    import export.ops                                   # registers the ops (imports torch)
    torch.ops.aliased_io.scatter_add_(X, src, idx)      # X[idx[e]] += src[e] in place (repeats add up); None
    torch.onnx.export(model, args, dynamo=True, custom_translation_table=export.ops.custom_translation_table)

torch's convention for an in-place op (it names the argument it writes in mutates_args and returns None)
becomes TensorRT's (the plugin's output 0 is input 0's memory): the exported model holds the sample's plugin
node, ScatterAddInPlace(X, src, idx) in domain aliased_io, written by the translation with no pattern matching.

The op goes through the in-place facility (inplace/, docs/own_inplace_op.md) as a user's own op does: its
description is plugin/scatter_add_op.py's SCATTER_ADD (whose chains --plugin aot builds); its torch op,
functional form aliased_io::scatter_add (state, src, index) -> Tensor, Functionalize kernel (why:
inplace/torch_op.py) and translation are inplace.torch_op's; only its node format
(the Python plugin's ScatterAddInPlace with its attributes), its argument checks and their messages, and
check_updates_exported's reader rule are its own. The exporter adds no output for the mutated input and inserts
no copy: the model's outputs are what forward returns, so return the state (or something computed from it), or
the update is not in the model; check_updates_exported(program) says so.
"""

from collections.abc import Mapping
from typing import Any

import torch

# The plugin node's format, the one the rewrite writes (numpy only: no onnx, no TensorRT).
from inplace.entries import CustomNode, Registered
from inplace.torch_op import define_torch_op, translation_table_of
from onnx_path.nodes import PLUGIN_DOMAIN, PLUGIN_OP, plugin_attributes
from onnx_path.patterns import SHAPE_ONLY_OPS
from plugin.scatter_add_op import NAMESPACE as OP_NAMESPACE
from plugin.scatter_add_op import SCATTER_ADD

OP_NAME = f"{OP_NAMESPACE}::{SCATTER_ADD.name}"  # torch.ops.aliased_io.scatter_add_
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


def check_index_range(op: str, state: torch.Tensor, index: torch.Tensor) -> None:
    """RuntimeError (one line, as torch's index_add_ says it) for an index outside [0, N): the plugin adds row
    index[e] unchecked. Eager only (the fake kernels of an export have no values)."""
    outside = (index < 0) | (index >= state.shape[0])
    if bool(outside.any()):
        position = int(torch.nonzero(outside)[0, 0])
        raise RuntimeError(f"{op}: index {int(index[position])} at position {position} is out of bounds for the "
                           f"{state.shape[0]} rows of state")


def _check(values: Mapping[str, Any], eager: bool) -> None:
    """scatter_add_'s own checks, with its messages: the arguments (check_arguments), and in eager torch the
    indices against the state's rows (fake tensors of an export have no values)."""
    check_arguments(OP_NAME, values["state"], values["src"], values["index"])
    if eager:
        check_index_range(OP_NAME, values["state"], values["index"])


def _add_rows(state: torch.Tensor, src: torch.Tensor, index: torch.Tensor) -> None:
    """The eager implementation: torch's own index_add_ (repeated indices add up)."""
    state.index_add_(0, index, src)


REGISTRATION = Registered(SCATTER_ADD, _add_rows, __name__,
                          CustomNode(PLUGIN_OP, plugin_attributes(compute_counts=False)),  # the Python plugin's node
                          functional="scatter_add", check=_check)
define_torch_op(REGISTRATION)  # torch.ops.aliased_io.scatter_add_ and .scatter_add, made as any in-place op's
custom_translation_table = translation_table_of([REGISTRATION])


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
