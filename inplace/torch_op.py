"""The torch side of an InplaceOp: the custom op (its schema's mutated arguments), its functional form, the
functionalization that makes torch.export record the update, and the translation to ONE custom ONNX node.

    define_torch_op(entry)           torch.ops.<namespace>.<name>: mutates op.mutates in place (schema Tensor(a!)),
                                     returns op.returns (None where it returns nothing); eager runs the user's
                                     implementation (inplace.registry.register calls this); the functional form
                                     (default <name>_functional) returns the mutated inputs' new values, then
                                     op.returns
    translation_table(ops)           {functional op: onnxscript function} for torch.onnx.export's
                                     custom_translation_table: one node, domain op.namespace, op_type the
                                     registration's CustomNode's (default op.name, with its fixed attributes),
                                     inputs op.inputs, outputs the new values, then the returned tensors
    export_onnx(module, args, path, ops, ...)   torch.onnx.export(dynamo=True) with that table, the update
                                     checked to be in the model (check_updates_exported), the modules that
                                     register the ops written into the model's metadata (inplace.registry)
    run_eager(entry, values)         the torch implementation on numpy arrays (the --validate oracle)

Why a Functionalize kernel (torch 2.13, onnxscript 0.7.2): torch.export functionalizes the program, and a mutating
custom op without one becomes auto_functionalized_v2(op, ...), which the ONNX exporter cannot translate. This
kernel records the functional op and makes its results the mutated inputs' new values, so torch.export records
input mutations and the exporter writes the functional op's node. The exporter adds no output for a mutated
input: forward must return the state (or something computed from it), or the update is not in the model.
"""

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from inplace.checks import InplaceOpError, check_call, check_new_values, op_id
from inplace.entries import MODULES_KEY, Registered, entry_of, registered
from inplace.spec import INTS, InplaceOp

_LIBRARIES: dict[str, Any] = {}  # namespace -> torch.library.Library (kept: a registration lives as long as it)
ONNX_TYPES = {"float32": "tensor(float)", "float16": "tensor(float16)", "int32": "tensor(int32)",
              "int64": "tensor(int64)"}


def _schema(op: InplaceOp, mutating: bool) -> str:
    arguments = []
    for tensor in op.inputs:
        if mutating and tensor.name in op.mutates:
            arguments.append(f"Tensor(a{op.mutates.index(tensor.name)}!) {tensor.name}")
        else:
            arguments.append(f"Tensor {tensor.name}")
    count = len(op.returns) + (0 if mutating else len(op.mutates))
    results = "()" if count == 0 else "Tensor" if count == 1 else "(" + ", ".join(["Tensor"] * count) + ")"
    return f"({', '.join(arguments)}) -> {results}"


class _TorchSizes:
    """Expr arithmetic on torch sizes, symbolic ones included (torch.sym_min / sym_max)."""

    const = staticmethod(INTS.const)
    add = staticmethod(INTS.add)
    mul = staticmethod(INTS.mul)
    floordiv = staticmethod(INTS.floordiv)
    cdiv = staticmethod(INTS.cdiv)

    @staticmethod
    def min(a: Any, b: Any) -> Any:
        return torch.sym_min(a, b)

    @staticmethod
    def max(a: Any, b: Any) -> Any:
        return torch.sym_max(a, b)


def _sizes(op: InplaceOp, values: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    return {name: values[tensor].shape[axis] for name, (tensor, axis) in op.sizes.items()}


def _new_returns(op: InplaceOp, values: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
    """Empty tensors of op.returns' shapes and dtypes (the fake implementations')."""
    sizes = _sizes(op, values)
    first = next(iter(values.values()))
    results = []
    for out in op.returns:
        like = out.dtype.removeprefix("like:")
        dtype = values[like].dtype if like in values else getattr(torch, out.dtype)
        shape = [dim.evaluate(sizes, _TorchSizes) for dim in out.shape]
        results.append(first.new_empty(shape, dtype=dtype))
    return results


def _result(items: Sequence[torch.Tensor]) -> Any:
    return None if not items else items[0] if len(items) == 1 else tuple(items)


def define_torch_op(entry: Registered) -> Any:
    """Defines torch.ops.<namespace>.<name> (in place, running entry.eager) and its functional form
    (entry.functional); returns the in-place op's OpOverloadPacket. Once per op (inplace.registry.register)."""
    op, eager, extra_check = entry.op, entry.eager, entry.check
    assert eager is not None
    namespace = op.namespace
    library = _LIBRARIES.get(namespace)
    if library is None:
        library = _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")
    functional = entry.functional
    names = [tensor.name for tensor in op.inputs]
    library.define(f"{op.name}{_schema(op, True)}")
    library.define(f"{functional}{_schema(op, False)}")
    packet = getattr(getattr(torch.ops, namespace), op.name)
    functional_packet = getattr(getattr(torch.ops, namespace), functional)

    def values_of(args: Sequence[Any], eager: bool) -> dict[str, Any]:
        """The arguments by name, checked: the op's own check first (its messages), then check_call."""
        if len(args) != len(names):
            raise InplaceOpError(f"{op_id(op)} takes {len(names)} tensors ({', '.join(names)}), got {len(args)}")
        values = dict(zip(names, args))
        if extra_check is not None:
            extra_check(values, eager)
        check_call(op, values)
        return values

    def run(*args: torch.Tensor) -> Any:
        values_of(args, True)
        returned = eager(*args)
        returned = () if returned is None else returned if isinstance(returned, tuple) else (returned,)
        if len(returned) != len(op.returns):
            raise InplaceOpError(f"{op_id(op)}: its implementation returned {len(returned)} tensors; the op returns "
                                 f"{len(op.returns)} ({', '.join(out.name for out in op.returns) or 'none: None'})")
        return _result(returned)

    def fake(*args: torch.Tensor) -> Any:
        values = values_of(args, False)
        return _result(_new_returns(op, values))

    def run_functional(*args: torch.Tensor) -> Any:
        values_of(args, True)
        copies = [arg.clone() if name in op.mutates else arg for name, arg in zip(names, args)]
        returned = packet(*copies)
        returned = () if returned is None else returned if isinstance(returned, tuple) else (returned,)
        return _result([copies[names.index(name)] for name in op.mutates] + list(returned))

    def fake_functional(*args: torch.Tensor) -> Any:
        values = values_of(args, False)
        return _result([torch.empty_like(values[name]) for name in op.mutates] + _new_returns(op, values))

    def functionalize(*args: torch.Tensor) -> Any:
        from torch._subclasses.functional_tensor import CppFunctionalizeAPI

        api = CppFunctionalizeAPI()
        unwrapped = api.unwrap_tensors(tuple(args))
        with api.redispatch_to_next():
            results = functional_packet(*unwrapped)
        results = results if isinstance(results, tuple) else (results,)
        check_new_values(op, dict(zip(names, unwrapped)), results, "the functional form")
        for name, new in zip(op.mutates, results):
            argument = args[names.index(name)]
            api.replace(argument, new)
            api.commit_update(argument)
            api.sync(argument)
        returned = results[len(op.mutates):]
        return _result(list(api.wrap_tensors(tuple(returned)))) if returned else None

    def refuse_tracing(*args: torch.Tensor) -> Any:
        raise RuntimeError(f"{op_id(op)} cannot be traced: torch.jit.trace (and torch.onnx.export(..., "
                           "dynamo=False)) would drop the update; export with torch.onnx.export(..., dynamo=True) "
                           "through inplace.torch_op.export_onnx")

    def refuse_grad_leaf(*args: torch.Tensor) -> Any:
        """At the autograd key, where grad mode is the caller's: a mutated leaf that requires grad is refused as
        torch's own in-place ops refuse it (RuntimeError); the op then runs below autograd."""
        if torch.is_grad_enabled():
            for name in op.mutates:
                value = args[names.index(name)] if len(args) == len(names) else None
                if isinstance(value, torch.Tensor) and value.requires_grad and value.is_leaf:
                    raise RuntimeError(f"{op_id(op)}: a leaf tensor that requires grad is being used in an in-place "
                                       f"operation ({name}: update it under torch.no_grad(), or pass a tensor of its "
                                       "own)")
        with torch._C._AutoDispatchBelowAutograd():
            return packet(*args)

    library.impl(op.name, run, "CompositeExplicitAutograd")
    library.impl(op.name, refuse_grad_leaf, "Autograd")
    library.impl(functional, run_functional, "CompositeExplicitAutograd")
    library.impl(op.name, functionalize, "Functionalize")
    library.impl(op.name, refuse_tracing, "Tracer")
    torch.library.register_fake(f"{namespace}::{op.name}", fake, lib=library)
    torch.library.register_fake(f"{namespace}::{functional}", fake_functional, lib=library)
    return packet


def _onnx_schema(op: InplaceOp, op_type: str, attributes: Mapping[str, Any]) -> Any:
    """The custom node's ONNX schema, for onnxscript to write the node with (never registered with onnx): the
    op's inputs and outputs, and the node's fixed attributes (str, int or float)."""
    from onnx.defs import OpSchema

    kinds = {str: OpSchema.AttrType.STRING, int: OpSchema.AttrType.INT, float: OpSchema.AttrType.FLOAT}

    def types(dtypes: Iterable[str]) -> list[str]:
        return [ONNX_TYPES[dtype] for dtype in dtypes]

    constraints = [(f"T_{tensor.name}", types(tensor.dtypes), f"the dtypes of {tensor.name}") for tensor in op.inputs]
    outputs = [OpSchema.FormalParameter(f"{name}_out", f"T_{name}") for name in op.mutates]
    for out in op.returns:
        like = out.dtype.removeprefix("like:")
        if out.dtype.startswith("like:"):
            outputs.append(OpSchema.FormalParameter(out.name, f"T_{like}"))
        else:
            constraints.append((f"T_{out.name}", types([out.dtype]), f"the dtype of {out.name}"))
            outputs.append(OpSchema.FormalParameter(out.name, f"T_{out.name}"))
    inputs = [OpSchema.FormalParameter(tensor.name, f"T_{tensor.name}") for tensor in op.inputs]
    return OpSchema(op_type, op.namespace, 1, inputs=inputs, outputs=outputs, type_constraints=constraints,
                    attributes=[OpSchema.Attribute(name, kinds[type(value)], name) for name, value in attributes.items()])


def translation(entry: Registered) -> Callable[..., Any]:
    """The onnxscript function writing one custom node (domain op.namespace, op_type and attributes entry.node's)
    for a call of the functional form: inputs op.inputs, outputs the mutated inputs' new values, then op.returns."""
    op = entry.op

    def write(*args: Any) -> Any:
        from onnxscript.values import Op, Opset

        node = Op(Opset(op.namespace, 1), entry.node.op_type, _onnx_schema(op, entry.node.op_type, entry.node.attributes))
        return node(*args, **entry.node.attributes)

    write.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(tensor.name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for tensor in op.inputs])
    write.__name__ = op.name
    return write


def translation_table(ops: Iterable[InplaceOp] | None = None) -> dict[Any, Callable[..., Any]]:
    """custom_translation_table entries of `ops` (default: every registered op with a torch op)."""
    return translation_table_of([entry for entry in registered() if not entry.chains_only] if ops is None
                                else [entry_of(op) for op in ops])


def translation_table_of(entries: Iterable[Registered]) -> dict[Any, Callable[..., Any]]:
    """{functional op: its translation} of registrations whose torch ops define_torch_op made."""
    return {getattr(getattr(torch.ops, entry.op.namespace), entry.functional).default: translation(entry)
            for entry in entries}


def check_updates_exported(program: Any, ops: Iterable[InplaceOp]) -> None:
    """InplaceOpError (one line) where a call of an op is not a custom node of the exported model: torch.onnx.export
    keeps only what forward returns, so an update nothing returned reads is dropped (it would never reach the
    state in TensorRT)."""
    graph = program.model_proto.graph
    for op in ops:
        entry = entry_of(op)
        target = getattr(getattr(torch.ops, op.namespace), entry.functional).default
        calls = [node for node in program.exported_program.graph.nodes if node.target is target]
        written = [node for node in graph.node if (node.domain, node.op_type) == (op.namespace, entry.node.op_type)]
        if len(written) < len(calls):
            raise InplaceOpError(f"{op_id(op)}: {len(calls) - len(written)} of its {len(calls)} calls are not in the "
                                 f"ONNX model: torch.onnx.export keeps only what forward returns; return the updated "
                                 f"{' and '.join(op.mutates)} (or something computed from it)")


def export_onnx(module: torch.nn.Module, args: tuple[Any, ...], path: str | Path, ops: Sequence[InplaceOp],
                **kwargs: Any) -> Path:
    """torch.onnx.export(module, args, dynamo=True, custom_translation_table=translation_table(ops), **kwargs),
    the updates checked (check_updates_exported), the registering modules named in the model's metadata, saved
    to `path` (no external data). The exporter's optimizer is off: it may fold an update away."""
    import onnx

    table = translation_table(ops)
    program = torch.onnx.export(module, args, dynamo=True, custom_translation_table=table, optimize=False,
                                external_data=False, verbose=False, **kwargs)
    assert program is not None
    check_updates_exported(program, ops)
    model = program.model_proto
    modules = sorted({entry_of(op).module for op in ops})
    if modules:
        model.metadata_props.add(key=MODULES_KEY, value=",".join(modules))
    onnx.save(model, str(path))
    return Path(path)


def run_eager(entry: Registered, values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The op's torch implementation on copies of numpy arrays (CPU): the mutated inputs' new values, then the
    returned tensors, as numpy arrays."""
    op = entry.op
    tensors = {name: torch.from_numpy(np.array(value, copy=True)) for name, value in values.items()}
    packet = getattr(getattr(torch.ops, op.namespace), op.name)
    with torch.no_grad():
        returned = packet(*(tensors[tensor.name] for tensor in op.inputs))
    returned = () if returned is None else returned if isinstance(returned, tuple) else (returned,)
    return [tensors[name].numpy() for name in op.mutates] + [value.numpy() for value in returned]
