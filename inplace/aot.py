"""An InplaceOp registered as TensorRT AOT plugins (`tensorrt.plugin`, TensorRT >= 10.16): one register function
and one aot_impl per Step of every chain (and an autotune function where a Step offers tactics).

    register_aot_op(op) -> plugin ids          checks the description (inplace.checks), then registers each
                                               "<op.namespace>::<plugin name>" once per process
    require_aot_api() -> (trt, trtp)           --plugin aot's check: TensorRT >= 10.16 with tensorrt.plugin

The register function declares, for each tensor a step writes, `input.aliased()` where it writes one of its inputs
(TensorRT then gives that output the input's memory: IPluginV3OneBuildV2.get_aliased_input), else the dtype and the
shape expressions of the returned tensor (TensorOutput) or of the unfilled scratch tensor the first step creates
(Scratch with fill None: TensorRT allocates it and nothing initialises it). The aot_impl returns the step kernel's
name, its PTX (checked: input pointers, int32 extra arguments, output pointers), the launch and the extra arguments,
each an Expr evaluated with tensorrt.plugin's symbolic sizes (SymbolicBackend). The engine then holds the PTX and
runs with no Python. Where TensorRT has no plugin registry (its real bindings over stand-in libraries, in tests) the
creators are registered lazily, when a network first uses one.
"""

import inspect
from collections.abc import Mapping
from typing import Any

from common.errors import MissingDependencyError
from common.imports import import_tensorrt
from common.versions import AOT_TENSORRT_FLOOR, check_aot_tensorrt_version
from inplace.checks import check_op, new_outputs, op_id, plugin_name, step_kernels, step_size_sources
from inplace.checks import plugin_id as step_plugin_id
from inplace.ptx import check_entry_parameters
from inplace.spec import Chain, Expr, InplaceOp, Kernel, Step, expr, maximum

TRT_TYPE_NAMES = {"float32": "FP32", "float16": "FP16", "int32": "INT32", "int64": "INT64"}
_REGISTERED: dict[str, Step] = {}  # plugin id -> the step registered under it (one per process)


def import_plugin_api(needs: str = "an in-place op's AOT plugins need") -> tuple[Any, Any]:
    """(tensorrt, tensorrt.plugin); MissingDependencyError (one line, beginning with `needs`) where TensorRT or its
    plugin API is absent."""
    trt = import_tensorrt()
    try:
        import tensorrt.plugin as trtp
    except ImportError as error:
        raise MissingDependencyError(f"{needs} tensorrt.plugin (TensorRT >= {AOT_TENSORRT_FLOOR}); this TensorRT "
                                     f"{getattr(trt, '__version__', '?')} has none ({error})") from None
    if not hasattr(trtp, "aot_impl"):
        raise MissingDependencyError(f"{needs} tensorrt.plugin.aot_impl (TensorRT >= {AOT_TENSORRT_FLOOR}); this is "
                                     f"TensorRT {getattr(trt, '__version__', '?')}")
    return trt, trtp


def require_aot_api() -> tuple[Any, Any]:
    """(tensorrt, tensorrt.plugin) for --plugin aot: MissingDependencyError (one line, exit 3) on a TensorRT older
    than AOT_TENSORRT_FLOOR (common.versions.check_aot_tensorrt_version: a version, not hasattr(aot_impl), since
    10.9-10.15 have one) or without tensorrt.plugin."""
    check_aot_tensorrt_version(getattr(import_tensorrt(), "__version__", None))
    return import_plugin_api("--plugin aot needs")


class SymbolicBackend:
    """Expr arithmetic on tensorrt.plugin's symbolic sizes (ShapeExpr) and ints: int op int stays an int, anything
    else becomes TensorRT's expression (cdiv, min and max through trtp's functions)."""

    def __init__(self, trtp: Any) -> None:
        self.trtp = trtp

    def const(self, value: int) -> Any:
        return value

    def _lift(self, value: Any, like: Any) -> Any:
        return type(like)(value) if isinstance(value, int) else value

    def add(self, a: Any, b: Any) -> Any:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        return b + a if isinstance(a, int) else a + b

    def mul(self, a: Any, b: Any) -> Any:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        return b * a if isinstance(a, int) else a * b

    def floordiv(self, a: Any, b: Any) -> Any:
        if isinstance(a, int) and isinstance(b, int):
            return a // b
        return self._lift(a, b) // b

    def cdiv(self, a: Any, b: Any) -> Any:
        return -(-a // b) if isinstance(a, int) and isinstance(b, int) else self.trtp.cdiv(a, b)

    def min(self, a: Any, b: Any) -> Any:
        return min(a, b) if isinstance(a, int) and isinstance(b, int) else self.trtp.min(a, b)

    def max(self, a: Any, b: Any) -> Any:
        return max(a, b) if isinstance(a, int) and isinstance(b, int) else self.trtp.max(a, b)


def register_aot_op(op: InplaceOp) -> list[str]:
    """Registers every step plugin of every chain of `op` with tensorrt.plugin (once per process; a plugin id
    already registered for another step is refused). Returns the plugin ids. InplaceOpError (one line) for a
    misuse in the description, MissingDependencyError where TensorRT's plugin API is absent."""
    check_op(op)
    trt, trtp = import_plugin_api()
    lazy = trt.get_plugin_registry() is None
    ids = []
    for chain in op.chains:
        for step in chain.steps:
            plugin_id = step_plugin_id(op, step)
            ids.append(plugin_id)
            if _REGISTERED.get(plugin_id) is step:
                continue
            if plugin_id in _REGISTERED:
                from inplace.checks import InplaceOpError

                raise InplaceOpError(f"{op_id(op)}: plugin {plugin_id} is registered already for another step; give "
                                     "each step a plugin name of its own")
            _register_step(trt, trtp, op, chain, step, plugin_id, lazy)
            _REGISTERED[plugin_id] = step
    return list(dict.fromkeys(ids))


def _dtype_names(trt: Any) -> dict[Any, str]:
    return {getattr(trt, name): name for name in TRT_TYPE_NAMES}


def _signature(trtp: Any, names: tuple[str, ...], returns: Any, extra: tuple[inspect.Parameter, ...] = ()
               ) -> inspect.Signature:
    """The signature tensorrt.plugin reads: one TensorDesc parameter per input name, then `extra`."""
    parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=trtp.TensorDesc)
                  for name in names]
    return inspect.Signature([*parameters, *extra], return_annotation=returns)


def _register_step(trt: Any, trtp: Any, op: InplaceOp, chain: Chain, step: Step, plugin_id: str, lazy: bool) -> None:
    names = _dtype_names(trt)
    declared = {tensor.name: tensor for tensor in op.inputs}
    scratch = {tensor.name: tensor for tensor in chain.scratch}
    created = new_outputs(op, chain, step)
    sources = step_size_sources(op, chain, step)
    backend = SymbolicBackend(trtp)
    single = len(step.outputs) == 1

    def dtypes_of(descs: Mapping[str, Any]) -> dict[str, str]:
        """The step's dtypes by tensor name; ValueError (TensorRT fails the build naming the plugin) for one
        its description does not take."""
        dtypes = {}
        for name, desc in descs.items():
            dtype = names.get(desc.dtype, str(desc.dtype))
            if name in declared:
                tensor = declared[name]
                if dtype not in tensor.dtypes or desc.ndim != tensor.rank:
                    raise ValueError(f"{plugin_id}: {name} must be a {tensor.rank}-D {' or '.join(tensor.dtypes)} "
                                     f"tensor, got a {desc.ndim}-D {dtype} tensor")
            elif name in scratch and dtype != scratch[name].dtype:
                raise ValueError(f"{plugin_id}: scratch tensor {name} must be {scratch[name].dtype}, got {dtype}")
            dtypes[name] = dtype
        return dtypes

    def kernels(dtypes: Mapping[str, str]) -> tuple[Kernel, ...]:
        try:
            return (step.kernel(dtypes), *step.tactics(dtypes))
        except (KeyError, ValueError):
            taken = [dict(choice) for choice, _ in step_kernels(op, chain, step)]
            raise ValueError(f"{plugin_id}: no kernel takes {dict(dtypes)}; it takes {taken}") from None

    def sizes_of(descs: Mapping[str, Any]) -> dict[str, Any]:
        return {size: descs[tensor].shape_expr[axis] for size, (tensor, axis) in sources.items()}

    def evaluate(expression: Expr, sizes: Mapping[str, Any]) -> Any:
        return expression.evaluate(sizes, backend)

    def describe(*descs: Any) -> Any:
        by_name = dict(zip(step.inputs, descs))
        dtypes = dtypes_of(by_name)
        kernels(dtypes)
        sizes = sizes_of(by_name)
        outputs = []
        for name in step.outputs:
            if name in by_name:
                outputs.append(by_name[name].aliased())
                continue
            declared_dtype, declared_shape = created[name]
            dtype = declared_dtype.removeprefix("like:")
            dtype = dtypes.get(dtype, dtype)
            shape = tuple(evaluate(dim, sizes) for dim in declared_shape)
            outputs.append(trtp.from_shape_expr(shape, getattr(trt, dtype)))
        return outputs[0] if single else tuple(outputs)

    output_type = trtp.TensorDesc if single else tuple.__class_getitem__((trtp.TensorDesc,) * len(step.outputs))
    describe.__signature__ = _signature(trtp, step.inputs, output_type)  # type: ignore[attr-defined]
    describe.__name__ = f"{plugin_name(step)}_desc"
    trtp.register(plugin_id, lazy_register=lazy)(describe)

    outputs_parameter = inspect.Parameter("outputs", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                          annotation=tuple.__class_getitem__((trtp.TensorDesc,)))
    tactic_parameter = inspect.Parameter("tactic", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=int)

    def aot_impl(*arguments: Any) -> Any:
        by_name = dict(zip(step.inputs, arguments[:len(step.inputs)]))
        outputs, tactic = arguments[len(step.inputs)], arguments[len(step.inputs) + 1]
        dtypes = dtypes_of(by_name)
        dtypes.update((name, names.get(desc.dtype, str(desc.dtype))) for name, desc in zip(step.outputs, outputs)
                      if name not in dtypes)
        choices = kernels(dtypes)
        kernel = choices[tactic - 1] if 1 <= tactic <= len(choices) else choices[0]
        return aot_result(trtp, kernel, step, dtypes, sizes_of(by_name), backend)

    aot_impl.__signature__ = _signature(  # type: ignore[attr-defined]
        trtp, step.inputs, tuple[str | bytes, str | bytes, trtp.KernelLaunchParams, trtp.SymIntExprs],
        (outputs_parameter, tactic_parameter))
    aot_impl.__name__ = f"{plugin_name(step)}_aot"
    trtp.aot_impl(plugin_id)(aot_impl)

    if any(step.tactics(dtypes) for dtypes, _ in step_kernels(op, chain, step)):
        def autotune(*arguments: Any) -> Any:
            by_name = dict(zip(step.inputs, arguments[:len(step.inputs)]))
            dtypes = dtypes_of(by_name)
            outputs = arguments[len(step.inputs)]
            types = [TRT_TYPE_NAMES[names[desc.dtype]] for desc in (*by_name.values(), *outputs)]
            return [trtp.AutoTuneCombination(", ".join(types), "LINEAR",
                                             list(range(1, len(kernels(dtypes)) + 1)))]

        autotune.__signature__ = _signature(  # type: ignore[attr-defined]
            trtp, step.inputs, list[trtp.AutoTuneCombination],
            (inspect.Parameter("outputs", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                               annotation=tuple.__class_getitem__((trtp.TensorDesc,))),))
        autotune.__name__ = f"{plugin_name(step)}_autotune"
        trtp.autotune(plugin_id)(autotune)


def aot_result(trtp: Any, kernel: Kernel, step: Step, dtypes: Mapping[str, str], sizes: Mapping[str, Any],
               backend: Any) -> tuple[str, bytes, Any, Any]:
    """What an aot_impl returns for `kernel`: its name, its PTX (parameters checked against TensorRT's launch),
    KernelLaunchParams and the int32 extra arguments, each evaluated with `backend` on `sizes`."""
    launch = kernel.launch
    ptx = kernel.source.ptx(kernel.name, dtypes)
    check_entry_parameters(ptx, kernel.name, len(step.inputs), len(launch.extra_args), len(step.outputs))
    params = trtp.KernelLaunchParams()
    for axis, dim in zip("xyz", launch.grid):
        setattr(params, f"grid_{axis}", dim.evaluate(sizes, backend))
    for axis, threads in zip("xyz", launch.block):
        setattr(params, f"block_{axis}", threads)
    params.shared_mem = shared_memory(kernel, dtypes).evaluate(sizes, backend)
    extra = trtp.SymIntExprs.from_tuple([trtp.SymInt32(arg.evaluate(sizes, backend)) for arg in launch.extra_args])
    return kernel.name, ptx, params, extra


def shared_memory(kernel: Kernel, dtypes: Mapping[str, str]) -> Expr:
    """The kernel's dynamic shared memory: its launch's, and at least what its source needs (Triton's)."""
    needs = getattr(kernel.source, "shared_bytes", None)
    if needs is None:
        return kernel.launch.shared_mem
    bytes_needed = int(needs(dtypes))
    return maximum(kernel.launch.shared_mem, expr(bytes_needed)) if bytes_needed else kernel.launch.shared_mem


def plugin_op(plugin_id: str) -> Any:
    """The `tensorrt.plugin.op` entry of a registered step: calling it with ITensors gives what add_plugin takes."""
    import tensorrt.plugin as trtp

    namespace, name = plugin_id.split("::")
    return getattr(getattr(trtp.op, namespace), name)
