"""The in-place ops of this process: one `register(op, eager)` per op, from which every stage finds it.

    register(op, eager=None) -> op     checks the description (one line per misuse); where torch is installed,
                                       defines torch.ops.<namespace>.<name> (inplace.torch_op) running `eager`
    register_chains(op, module) -> op  an op whose chains alone are the facility's (the project's own, whose
                                       node is a plugin's: plugin/inplace_ops.py): its steps are found, its
                                       AOT plugins registered; `find` does not see it, so no rewrite expands it
    registered() / find(domain, op_type)         the ops, and the op whose ONNX custom node this is
    find_step(domain, op_type)         (op, chain, step) of an AOT plugin node the rewrite wrote
    import_model_ops(model)            imports the modules an exported model names (MODULES_KEY in its
                                       metadata_props, written by inplace.torch_op.export_onnx) so that their
                                       ops are registered before the model is read
    node_outputs(node, inputs, eager)  a custom node's or a step node's outputs on the CPU: the op's torch
                                       implementation (eager, where torch is installed) or its numpy reference
"""

import importlib
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from inplace.checks import InplaceOpError, check_new_values, check_op, op_id, plugin_name
from inplace.entries import MODULES_KEY, OPS, CustomNode, Registered, entry_of, registered
from inplace.spec import Chain, InplaceOp, Step

__all__ = ["MODULES_KEY", "CustomNode", "Registered", "entry_of", "registered"]  # inplace.entries', re-exported

def register(op: InplaceOp, eager: Callable[..., Any] | None = None, module: str | None = None, *,
             node: CustomNode | None = None, functional: str | None = None,
             check: Callable[[Mapping[str, Any], bool], None] | None = None) -> InplaceOp:
    """Registers `op` (checked: InplaceOpError, one line) with its eager implementation (a function of the inputs
    that writes the mutated ones in place and returns the returned tensors, or None), under `module` (the module
    that registers it when imported: default eager's or the reference's). Where torch is installed the torch op
    is defined too. `node`, `functional` and `check`: Registered's (defaults: op_type op.name, no attributes,
    "<name without its trailing _>_functional", none). Registering the same op again is a no-op."""
    owner = module or getattr(eager, "__module__", None) or getattr(op.reference, "__module__", None) or ""
    entry = _add(op, lambda: Registered(op, eager, owner, node or CustomNode(op.name),
                                        functional or f"{op.name.rstrip('_')}_functional", check))
    if entry is not None and eager is not None and importlib.util.find_spec("torch") is not None:
        from inplace.torch_op import define_torch_op

        define_torch_op(entry)
    return op


def register_chains(op: InplaceOp, module: str) -> InplaceOp:
    """Registers `op` (checked) for its chains alone, under `module`: find_step, computed_here, node_outputs and
    register_aot_plugins see its steps; `find` does not (no custom node of the facility's, no torch op). Registering
    the same op again is a no-op."""
    _add(op, lambda: Registered(op, None, module, CustomNode(op.name), f"{op.name.rstrip('_')}_functional",
                                chains_only=True))
    return op


def _add(op: InplaceOp, make: Callable[[], Registered]) -> Registered | None:
    """Checks `op` and adds make()'s entry for it; None where this op is registered already (a no-op),
    InplaceOpError where another op of its id is."""
    check_op(op)
    key = op_id(op)
    if key in OPS:
        if OPS[key].op is op:
            return None
        raise InplaceOpError(f"{key}: registered already by {OPS[key].module}")
    OPS[key] = make()
    return OPS[key]


def register_aot_plugins() -> list[str]:
    """Registers every registered op's AOT plugins with tensorrt.plugin (inplace.aot.register_aot_op), as TensorRT's
    ONNX parser needs before it parses their nodes; returns the plugin ids."""
    from inplace.aot import register_aot_op

    return [plugin_id for entry in OPS.values() for plugin_id in register_aot_op(entry.op)]


def find(domain: str | None, op_type: str) -> Registered | None:
    """The op whose custom node (domain = namespace, op_type = its CustomNode's) this is."""
    return next((entry for entry in OPS.values() if not entry.chains_only and entry.op.namespace == (domain or "")
                 and entry.node.op_type == op_type), None)


def find_step(domain: str | None, op_type: str) -> tuple[InplaceOp, Chain, Step] | None:
    """(op, chain, step) of the AOT plugin node of one step (domain = namespace, op_type = the step's plugin)."""
    for entry in OPS.values():
        if entry.op.namespace != domain:
            continue
        for chain in entry.op.chains:
            for step in chain.steps:
                if plugin_name(step) == op_type:
                    return entry.op, chain, step
    return None


def computed_here(domain: str | None, op_type: str) -> bool:
    """Whether a node is a registered op's custom node or one of its step nodes (computed on the CPU by
    node_outputs where ONNX Runtime runs a model)."""
    return find(domain or "", op_type) is not None or find_step(domain, op_type) is not None


def import_model_ops(model: Any) -> list[str]:
    """Imports the modules the model's metadata names (MODULES_KEY, comma-separated), registering their ops;
    returns the module names. InplaceOpError (one line) for a module that cannot be found."""
    names = [entry.value for entry in model.metadata_props if entry.key == MODULES_KEY]
    modules = [name.strip() for value in names for name in value.split(",") if name.strip()]
    for name in modules:
        if importlib.util.find_spec(name.split(".")[0]) is None or importlib.util.find_spec(name) is None:
            raise InplaceOpError(f"the model's in-place ops are registered by module {name} (its metadata "
                                 f"{MODULES_KEY}), which is not importable: run from the folder that holds it or "
                                 "put it on PYTHONPATH")
        importlib.import_module(name)
    return modules


def unknown_custom_nodes(model: Any, known_domains: Sequence[str]) -> list[Any]:
    """The model's nodes of a custom domain that is neither one of `known_domains` nor a registered op's."""
    return [node for node in model.graph.node if node.domain not in ("", "ai.onnx", *known_domains)
            and not computed_here(node.domain, node.op_type)]


def computed_by(model: Any) -> str:
    """How node_outputs computes the model's custom nodes of registered ops ("" where it has none): their torch
    implementation (torch eager) where torch is installed, else their numpy reference."""
    entries = {op_id(entry.op): entry for node in model.graph.node for entry in [find(node.domain, node.op_type)]
               if entry is not None}
    nodes = sorted(entries)
    if not nodes:
        return ""
    eager = importlib.util.find_spec("torch") is not None and all(entry.eager is not None for entry in entries.values())
    return f"its {', '.join(nodes)} node(s) by " + ("torch eager (CPU)" if eager else "the op's numpy reference")


def node_outputs(node: Any, inputs: Sequence[np.ndarray], eager: bool = True) -> list[np.ndarray]:
    """The outputs of a registered op's custom node (the op's torch implementation where torch is installed and
    `eager`, else its numpy reference) or of one of its step nodes (the op's reference for a chain of one step,
    else the step's own), for input arrays in the node's order; each output in its tensor's dtype."""
    entry = find(node.domain, node.op_type)
    if entry is not None:
        op = entry.op
        values = dict(zip((tensor.name for tensor in op.inputs), inputs))
        if eager and entry.eager is not None and importlib.util.find_spec("torch") is not None:
            from inplace.torch_op import run_eager

            return run_eager(entry, values)
        return run_reference(op, values)
    found = find_step(node.domain, node.op_type)
    if found is None:
        raise InplaceOpError(f"node {node.name or node.op_type}: {node.domain}::{node.op_type} is no registered "
                             "in-place op")
    op, chain, step = found
    values = dict(zip(step.inputs, inputs))
    if len(chain.steps) == 1:
        outputs = dict(zip(op.output_names(), run_reference(op, {t.name: values[t.name] for t in op.inputs})))
        return [outputs[name] for name in step.outputs]
    if step.reference is None:
        raise InplaceOpError(f"{op_id(op)}: step {plugin_name(step)} of a chain of {len(chain.steps)} steps has no "
                             "reference; give Step.reference for the ONNX Runtime proof")
    results = step.reference(*inputs)
    declared = {scratch.name: np.dtype(scratch.dtype) for scratch in chain.created()}
    return [np.asarray(value).astype(values[name].dtype if name in values
                                     else declared.get(name, np.asarray(value).dtype))
            for name, value in zip(step.outputs, results)]


def run_reference(op: InplaceOp, values: dict[str, np.ndarray]) -> list[np.ndarray]:
    """op.reference on copies of the inputs (float64 results rounded once to each output's dtype)."""
    if op.reference is None:
        raise InplaceOpError(f"{op_id(op)}: has no reference; give InplaceOp.reference (numpy) for the ONNX Runtime "
                             "proof")
    arrays = {name: np.array(value, copy=True) for name, value in values.items()}
    results = tuple(op.reference(*(arrays[tensor.name] for tensor in op.inputs)))
    check_new_values(op, values, results, "the reference")
    outputs = []
    for position, value in enumerate(results):
        if position < len(op.mutates):
            dtype = values[op.mutates[position]].dtype
        else:
            declared = op.returns[position - len(op.mutates)].dtype
            like = declared.removeprefix("like:")
            dtype = values[like].dtype if like in values else np.dtype(declared)
        outputs.append(np.asarray(value).astype(dtype))
    return outputs
