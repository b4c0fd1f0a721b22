"""What an InplaceOp description must satisfy, checked once at registration, and what a call must satisfy, checked
at every eager call and export: each misuse is refused with ONE line (InplaceOpError) naming the op, the argument
and what to do, before any kernel, torch export or TensorRT work.

    check_op(op)                    the description: mutated arguments are inputs, returns are new tensors, sizes
                                    name an input's axis, every expression reads known sizes, every chain writes
                                    every output and reads only what exists at each step
    check_call(op, values)          a call's tensors: dtypes the kernel takes, ranks, no view as a mutated argument
    check_new_values(op, ...)       what an implementation or reference returned for the mutated inputs: their shape
    step_size_sources(op, chain, step)   where a step finds each size: {size: (tensor, axis)} among its own inputs
    new_outputs(op, chain, step)    what a step creates (TensorRT allocates): {output: (dtype, shape)}

A returned tensor named like a scratch tensor is that scratch tensor after the chain (the network makes and fills
it, or the first step creates it unfilled; a step writes it in place): e.g. counts the network zeroes, which the
scatter step adds into.
"""

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from common.errors import InputError
from inplace.spec import DTYPES, Chain, Expr, InplaceOp, Kernel, Step


class InplaceOpError(InputError):
    """A misuse of the facility: an InplaceOp description or a call that cannot run in place (one line)."""


def op_id(op: InplaceOp) -> str:
    return f"{op.namespace}::{op.name}"


def plugin_name(step: Step) -> str:
    """The step's plugin name (its ONNX node's op_type, TensorRT's creator name): Step.plugin, given either as the
    name or as the plugin id "<namespace>::<name>" (the namespace is the op's: check_op refuses another)."""
    return step.plugin.rpartition("::")[2]


def plugin_id(op: InplaceOp, step: Step) -> str:
    return f"{op.namespace}::{plugin_name(step)}"


def _fail(op: InplaceOp, message: str) -> None:
    raise InplaceOpError(f"{op_id(op)}: {message}")


def _identifier(op: InplaceOp, what: str, name: str) -> None:
    if not name.isidentifier():
        _fail(op, f"{what} {name!r} must be a Python identifier (torch schemas, ONNX names and TensorRT plugin "
                  "ids are made from it)")


def check_op(op: InplaceOp) -> None:
    """InplaceOpError (one line) for the first misuse in `op`'s description; nothing where it is sound."""
    _identifier(op, "namespace", op.namespace)
    _identifier(op, "name", op.name)
    names = [tensor.name for tensor in op.inputs]
    for tensor in op.inputs:
        _identifier(op, "input", tensor.name)
        bad = [dtype for dtype in tensor.dtypes if dtype not in DTYPES]
        if bad or not tensor.dtypes:
            _fail(op, f"input {tensor.name} takes dtypes {list(tensor.dtypes)}; each must be one of {list(DTYPES)}")
        if tensor.rank < 0:
            _fail(op, f"input {tensor.name} has rank {tensor.rank}; a rank is 0 or more")
    if len(set(names)) != len(names):
        _fail(op, f"inputs {names} name one tensor twice")
    if not op.mutates:
        _fail(op, "mutates no input; list the inputs it writes in place in `mutates` (torch's mutates_args)")
    for name in op.mutates:
        if name not in names:
            _fail(op, f"mutates {name!r}, which is not an input (inputs: {', '.join(names)}); a mutated argument "
                      "must be a tensor argument of the op")
    if len(set(op.mutates)) != len(op.mutates):
        _fail(op, f"mutates {list(op.mutates)} names an input twice")
    for out in op.returns:
        _identifier(op, "returned tensor", out.name)
        if out.name in op.mutates:
            _fail(op, f"returns {out.name!r}, which it mutates: torch forbids returning an input (an alias); drop "
                      f"it from returns, its new value is an output already (the first outputs are the mutated "
                      "inputs), or return a new tensor computed from it")
        if out.name in names:
            _fail(op, f"returns {out.name!r}, an input: torch forbids returning an alias of an input; return a new "
                      "tensor under another name")
        like = out.dtype.removeprefix("like:")
        if out.dtype not in DTYPES and (not out.dtype.startswith("like:") or like not in names):
            _fail(op, f"returns {out.name} of dtype {out.dtype!r}; give one of {list(DTYPES)} or 'like:INPUT'")
    outputs = [out.name for out in op.returns]
    if len(set(outputs)) != len(outputs):
        _fail(op, f"returns {outputs} names a tensor twice")
    ranks = {tensor.name: tensor.rank for tensor in op.inputs}
    for size_name, (owner, axis) in op.sizes.items():
        _identifier(op, "size", size_name)
        if owner not in ranks:
            _fail(op, f"size {size_name} is axis {axis} of {owner!r}, which is not an input (inputs: "
                      f"{', '.join(names)})")
        if not 0 <= axis < ranks[owner]:
            _fail(op, f"size {size_name} is axis {axis} of {owner}, which has rank {ranks[owner]}")
    for out in op.returns:
        _check_expressions(op, f"the shape of returned {out.name}", out.shape)
    if not op.chains:
        _fail(op, "has no chain: give at least one Chain of Steps (the AOT plugins that run it)")
    for number, chain in enumerate(op.chains):
        _check_chain(op, chain, number)
    if op.reference is not None and not callable(op.reference):
        _fail(op, "reference must be a function of the inputs returning the outputs (numpy, float64)")


def _check_expressions(op: InplaceOp, where: str, expressions: Sequence[Expr]) -> None:
    """Every size an expression reads must be one of op.sizes: a launch or shape expression naming a size that no
    input has is refused here, not when TensorRT builds."""
    known = dict(op.sizes)
    for expression in expressions:
        if not isinstance(expression, Expr):
            _fail(op, f"{where} holds {expression!r}; give an Expr (inplace.spec.size, cdiv, minimum, ...) or an int")
        unknown = sorted(expression.sizes() - set(known))
        if unknown:
            have = ", ".join(f"{name} (axis {axis} of {tensor})" for name, (tensor, axis) in known.items()) or "none"
            _fail(op, f"{where} reads size {unknown[0]!r}, which no input has (the sizes: {have}); add it to `sizes` "
                      "as (input, axis)")


def step_size_sources(op: InplaceOp, chain: Chain, step: Step) -> dict[str, tuple[str, int]]:
    """{size: (tensor, axis)} a step finds among its own inputs: op.sizes of the inputs it reads, then the axes of
    scratch tensors and earlier steps' new outputs whose shape expression is that size alone."""
    sources = {name: where for name, where in op.sizes.items() if where[0] in step.inputs}
    shapes = {scratch.name: scratch.shape for scratch in chain.scratch} | {out.name: out.shape for out in op.returns}
    for tensor in step.inputs:
        for axis, dim in enumerate(shapes.get(tensor, ())):
            if dim.op == "size" and dim.value not in sources:
                sources[dim.value] = (tensor, axis)
    return sources


def new_outputs(op: InplaceOp, chain: Chain, step: Step) -> dict[str, tuple[str, tuple[Expr, ...]]]:
    """{output: (dtype, shape)} of the outputs a step creates rather than aliases, each allocated by TensorRT: the
    returned tensors (TensorOutput; dtype "like:INPUT" for an input's) and, for the chain's first step, the
    unfilled scratch tensors (Scratch)."""
    described = {out.name: (out.dtype, out.shape) for out in op.returns}
    if chain.steps and step is chain.steps[0]:
        described.update((scratch.name, (scratch.dtype, scratch.shape)) for scratch in chain.created())
    return {name: described[name] for name in step.outputs if name not in step.inputs and name in described}


def dtype_choices(op: InplaceOp, tensors: Sequence[str], chain: Chain) -> list[dict[str, str]]:
    """Every {tensor: dtype} a step reading `tensors` may see: the declared dtypes of the op's inputs among them
    (a scratch tensor's or returned tensor's dtype is fixed by its description)."""
    declared = {tensor.name: tensor.dtypes for tensor in op.inputs}
    fixed = {scratch.name: scratch.dtype for scratch in chain.scratch}
    free = [name for name in tensors if name in declared]
    choices = []
    for combination in itertools.product(*(declared[name] for name in free)):
        dtypes = dict(zip(free, combination))
        for name in tensors:
            if name in fixed:
                dtypes[name] = fixed[name]
        for out in op.returns:
            if out.name in tensors:
                dtypes[out.name] = dtypes.get(out.dtype.removeprefix("like:"), out.dtype)
        choices.append(dtypes)
    return choices


def step_kernels(op: InplaceOp, chain: Chain, step: Step) -> list[tuple[dict[str, str], Kernel]]:
    """(dtypes, kernel) for every dtype combination of the step's inputs its `kernel` takes (a combination it
    refuses with KeyError or ValueError is one the step does not run)."""
    found = []
    tensors = (*step.inputs, *(name for name in step.outputs if name not in step.inputs))
    for dtypes in dtype_choices(op, tensors, chain):
        try:
            kernel = step.kernel(dtypes)
        except (KeyError, ValueError):
            continue
        found.append((dtypes, kernel))
    return found


def _check_chain(op: InplaceOp, chain: Chain, number: int) -> None:
    where = f"chain {number}"
    inputs = [tensor.name for tensor in op.inputs]
    returns = {out.name for out in op.returns}
    returned = {out.name: out for out in op.returns}
    scratch_names = {scratch.name for scratch in chain.scratch}
    for scratch in chain.scratch:
        _identifier(op, "scratch tensor", scratch.name)
        if scratch.name in inputs:
            _fail(op, f"{where}: scratch tensor {scratch.name} has the name of an input")
        out = returned.get(scratch.name)
        if out is not None and (out.dtype != scratch.dtype or out.shape != scratch.shape):
            _fail(op, f"{where}: scratch tensor {scratch.name} is returned, so it has the returned tensor's dtype and "
                      f"shape ({out.dtype}, not {scratch.dtype}, or another shape)")
        if scratch.dtype not in DTYPES:
            _fail(op, f"{where}: scratch tensor {scratch.name} has dtype {scratch.dtype!r}; give one of {list(DTYPES)}")
        _check_expressions(op, f"{where}: the shape of scratch tensor {scratch.name}", scratch.shape)
    known = set(inputs) | {scratch.name for scratch in chain.filled()}
    created = {scratch.name: scratch for scratch in chain.created()}
    written: set[str] = set()
    if not chain.steps:
        _fail(op, f"{where} has no step")
    first = chain.steps[0]
    for name in created:
        if name in first.inputs or name not in first.outputs:
            _fail(op, f"{where}: unfilled scratch tensor {name} (fill None) is created by the first step "
                      f"{plugin_name(first)}: list it in that step's outputs, not in its inputs")
    plugins = [plugin_name(step) for step in chain.steps]
    for step in chain.steps:
        namespace, _, name = step.plugin.rpartition("::")
        if namespace and namespace != op.namespace:
            _fail(op, f"{where}: step plugin {step.plugin!r} is in namespace {namespace!r}; a step's plugin is in the "
                      f"op's namespace {op.namespace!r}")
        _identifier(op, "step plugin", name)
        label = f"{where}, step {name}"
        for name in step.inputs:
            if name not in known:
                _fail(op, f"{label} reads {name!r}, which is neither an input, a scratch tensor nor written by an "
                          "earlier step")
        if len(set(step.outputs)) != len(step.outputs) or not step.outputs:
            _fail(op, f"{label} writes {list(step.outputs)}: each tensor once (TensorRT aliases an input to one "
                      "output), at least one")
        for name in step.outputs:
            if name in step.inputs or (name in returns and name not in scratch_names):
                continue
            if name in created and step is first:
                continue
            if name in created:
                _fail(op, f"{label} creates unfilled scratch tensor {name!r}; only the first step "
                          f"({plugin_name(first)}) creates one, later steps take it as an input and write it in place")
            if name in scratch_names:
                _fail(op, f"{label} creates scratch tensor {name!r}, which has a fill: the network makes it, so a "
                          "step takes it as an input; give it fill None for the first step to create it unfilled")
            _fail(op, f"{label} writes {name!r}, which is neither one of its inputs (written in place), a returned "
                      f"tensor ({', '.join(sorted(returns)) or 'none'}) nor an unfilled scratch tensor of the first "
                      "step")
        kernels = step_kernels(op, chain, step)
        if not kernels:
            _fail(op, f"{label}: its kernel function takes none of the dtype combinations of its inputs")
        sources = step_size_sources(op, chain, step)
        for dtypes, kernel in kernels:
            if not isinstance(kernel, Kernel):
                _fail(op, f"{label}: its kernel function returned {type(kernel).__name__}, not a Kernel")
            for tactic in (kernel, *step.tactics(dtypes)):
                launch = tactic.launch
                expressions = (*launch.grid, *launch.extra_args, launch.shared_mem)
                _check_expressions(op, f"{label}: the launch of kernel {tactic.name}", expressions)
                missing = sorted(set().union(*(e.sizes() for e in expressions)) - set(sources))
                if missing:
                    _fail(op, f"{label}: the launch of kernel {tactic.name} reads size {missing[0]!r}, which none of "
                              f"its inputs ({', '.join(step.inputs)}) carries; read that input in the step too")
                if any(not isinstance(b, int) or b < 1 for b in launch.block) or len(launch.block) != 3:
                    _fail(op, f"{label}: kernel {tactic.name}'s block {launch.block} must be three positive ints")
        for name, (_, shape) in new_outputs(op, chain, step).items():
            missing = sorted(set().union(*(e.sizes() for e in shape)) - set(sources))
            if missing:
                _fail(op, f"{label} writes {name}, whose shape reads size {missing[0]!r}, which none of its "
                          f"inputs carries")
        known |= set(step.outputs)
        written |= set(step.outputs)
    if len(set(plugins)) != len(plugins):
        _fail(op, f"{where}: steps {plugins} name one plugin twice")
    unwritten = [name for name in op.output_names() if name not in written]
    if unwritten:
        _fail(op, f"{where} never writes {unwritten[0]!r}; every mutated input and returned tensor is written by a "
                  "step")


def check_call(op: InplaceOp, values: Mapping[str, Any]) -> None:
    """A call's tensors (torch or numpy, by input name): each of a dtype its input declares (the kernels take
    those alone) and of its rank; a mutated argument that is a view of another tensor is refused (the engine
    writes a tensor's own buffer: a view's base would not change as torch's does)."""
    for tensor in op.inputs:
        value = values[tensor.name]
        dtype = str(getattr(value, "dtype", "")).removeprefix("torch.")
        if dtype not in tensor.dtypes:
            _fail(op, f"{tensor.name} is {dtype or type(value).__name__}; the kernel takes "
                      f"{' or '.join(tensor.dtypes)}")
        if len(value.shape) != tensor.rank:
            _fail(op, f"{tensor.name} has shape {list(value.shape)}; the op takes a tensor of rank {tensor.rank}")
    for name in op.mutates:
        value = values[name]
        if getattr(value, "_base", None) is not None or not _contiguous(value):
            _fail(op, f"mutates {name}, which is a view of another tensor (or not contiguous): the engine writes the "
                      f"tensor's own buffer; pass {name} itself (a contiguous tensor of its own), not a slice of it")


def _contiguous(value: Any) -> bool:
    method = getattr(value, "is_contiguous", None)
    if method is not None:
        return bool(method())
    flags = getattr(value, "flags", None)
    return bool(flags is None or flags["C_CONTIGUOUS"])


def check_new_values(op: InplaceOp, inputs: Mapping[str, Any], new_values: Sequence[Any], who: str) -> None:
    """The mutated inputs' new values (`who`: the implementation or the reference that returned them) each of its
    input's shape: an aliased output IS its input's memory."""
    if len(new_values) < len(op.mutates):
        _fail(op, f"{who} returned {len(new_values)} tensors; it returns each mutated input's new value "
                  f"({', '.join(op.mutates)}) first, then the returned tensors")
    for name, value in zip(op.mutates, new_values):
        if tuple(value.shape) != tuple(inputs[name].shape):
            _fail(op, f"{who} returned {name}'s new value of shape {list(value.shape)}; an aliased output has its "
                      f"input's shape {list(inputs[name].shape)} and dtype")
