"""Each example's registration driven through TensorRT's real Python bindings (tensorrt.plugin, 10.16 and 11.x;
marked trt_bindings): the register function and the aot_impl with symbolic shapes (the launch and extra arguments
evaluated against the Launch's Exprs on ints), get_aliased_input through TensorRT's own AOT plugin class, and the
plugin host's AOT build (createPlugin(kSTRICT_AOT), TensorRT's build calls in TensorRT's order)."""

import importlib

import pytest

from inplace.aot import shared_memory
from inplace.checks import step_kernels
from inplace.ptx import entry_parameters
from tests.plugin.test_aot_plugin import (  # noqa: F401 (aot, symbolic: fixtures)
    SymbolicSizes,
    aot,
    aot_plugin_instance,
    evaluated,
    qdp_registry,
    symbolic,
)
from tests.support.own_ops import EXAMPLES, need_triton
from tests.support.trt_plugin_internals import register_creator

SIZES = [(50, 7, 5), (1, 0, 1), (10**6, 10**4, 64)]  # (rows, batch, features)
AOT_PROFILE = {"R": (1, 1000, 10**6), "B": (0, 100, 10**4)}


def registered(aot, name):
    """(trt, trtp, op, plugin ids) with the example registered as AOT plugins."""
    from inplace.aot import register_aot_op

    trt, trtp, _ = aot
    example = EXAMPLES[name]
    need_triton(example)
    return trt, trtp, example.op, register_aot_op(example.op)


def int_sizes(name, rows, batch, features):
    """The example's sizes by name for these counts."""
    return {"ring": {"C": rows, "F": features, "B": batch}}.get(name, {"N": rows, "F": features, "B": batch})


def shapes(name, rows, batch, features):
    """Each input's shape for these counts."""
    if name == "ring":
        return {"buffer": (rows, features), "pos": (1,), "rows": (batch, features)}
    return {"state": (rows, features), "idx": (batch,), "rows": (batch, features), "delta": (batch, features),
            "alpha": (1,)}


def plain(value):
    return value if isinstance(value, int) else evaluated(value)


def descs(trt, trtp, builder, names, dtypes, shape_of):
    return [trtp.from_shape_expr(trtp.ShapeExprs.from_tuple(tuple(trtp.ShapeExpr(builder.expr(n))
                                                                  for n in shape_of[name])),
                                 getattr(trt, dtypes[name])) for name in names]


@pytest.mark.trt_bindings
@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("rows, batch, features", SIZES)
def test_aot_impl_gives_the_kernel_its_ptx_and_the_symbolic_launch(aot, symbolic, name, rows, batch, features):
    trt, trtp, op, ids = registered(aot, name)
    chain = op.chains[0]
    for step in chain.steps:
        definition = qdp_registry()[f"{op.namespace}::{step.plugin}"]
        for dtypes, kernel in step_kernels(op, chain, step):
            inputs = descs(trt, trtp, symbolic, step.inputs, dtypes, shapes(name, rows, batch, features))
            outputs = definition.register_func(*inputs)
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            assert [getattr(trt, dtypes[out]) for out in step.outputs] == [out.dtype for out in outputs]
            kernel_name, ptx, launch, extra = definition.aot_impl_func(*inputs, outputs, 0)
            assert kernel_name == kernel.name and isinstance(ptx, bytes)
            assert len(entry_parameters(ptx, kernel_name)) == len(step.inputs) + len(extra) + len(step.outputs)
            sizes = int_sizes(name, rows, batch, features)
            assert [plain(getattr(launch, f"grid_{axis}")) for axis in "xyz"] == [
                dim.evaluate(sizes) for dim in kernel.launch.grid]
            assert [plain(arg) for arg in extra] == [arg.evaluate(sizes) for arg in kernel.launch.extra_args]
            assert tuple(plain(getattr(launch, f"block_{axis}")) for axis in "xyz") == kernel.launch.block
            assert plain(launch.shared_mem) == shared_memory(kernel, dtypes).evaluate(sizes)


@pytest.mark.trt_bindings
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_mutated_input_is_aliased_and_a_returned_tensor_is_new(aot, name):
    trt, trtp, op, ids = registered(aot, name)
    for chain in op.chains:
        for step in chain.steps:
            dtypes, _ = step_kernels(op, chain, step)[0]
            instance = aot_plugin_instance(trtp, qdp_registry()[f"{op.namespace}::{step.plugin}"], step.plugin,
                                           op.namespace)
            ranks = {tensor.name: tensor.rank for tensor in op.inputs}
            types = instance.get_output_data_types([getattr(trt, dtypes[n]) for n in step.inputs],
                                                   [ranks[n] for n in step.inputs])
            assert types == [getattr(trt, dtypes[n]) for n in step.outputs]
            assert [instance.get_aliased_input(i) for i in range(len(step.outputs))] == [
                step.inputs.index(out) if out in step.inputs else -1 for out in step.outputs]


@pytest.mark.trt_bindings
def test_a_dtype_the_op_does_not_take_fails_the_build_naming_the_plugin(aot):
    trt, trtp, op, ids = registered(aot, "ring")
    instance = aot_plugin_instance(trtp, qdp_registry()["examples::ring_write"], "ring_write", "examples")
    with pytest.raises(ValueError, match=r"examples::ring_write: buffer must be a 2-D float32 or float16 tensor, "
                                         r"got a 2-D int32 tensor"):
        instance.get_output_data_types([trt.int32, trt.int64, trt.int32], [2, 1, 2])


# --- the plugin host: TensorRT's C++ calls into the registration -------------------------------------------------
@pytest.fixture(scope="module")
def host_and_trt():
    from tests.plugin_host.host import PluginHost, host_library_path

    from common.errors import MissingDependencyError
    from common.imports import import_tensorrt

    try:
        trt = import_tensorrt()
    except MissingDependencyError as error:
        pytest.skip(f"needs TensorRT's Python package: {error}")
    if host_library_path() is None:
        pytest.skip("this tensorrt is no plugin host layout (tests/plugin_host/build.py DIR): "
                    "tests/plugin/test_real_bindings.py runs these on one, .ci/run's matrix on three releases")
    host = PluginHost(trt)
    if not host.aot:
        pytest.skip(f"the plugin host of TensorRT {trt.__version__} has no quickly deployable plugins (10.16+)")
    return host, trt


@pytest.mark.trt_bindings
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_plugin_host_builds_each_step_and_evaluates_its_launch(host_and_trt, name):
    host, trt = host_and_trt
    importlib.import_module("tensorrt.plugin")  # ImportError: no tensorrt.plugin in this TensorRT
    from inplace.aot import register_aot_op

    example = EXAMPLES[name]
    need_triton(example)
    op = example.op
    register_aot_op(op)
    chain = op.chains[0]
    for step in chain.steps:
        register_creator(step.plugin, op.namespace)  # what a network's first use does
        dtypes, kernel = step_kernels(op, chain, step)[0]
        symbolic = shapes(name, "R", "B", 5)
        spec = host.spec([(getattr(trt, dtypes[n]), list(symbolic[n])) for n in step.inputs], AOT_PROFILE)
        engine, report = host.aot_build(step.plugin, op.namespace, spec)
        try:
            assert report.ok, report
            assert report.step("getAliasedInput")["aliases"] == [
                step.inputs.index(out) if out in step.inputs else -1 for out in step.outputs]
            built_name, ptx = host.aot_kernel(engine)
            assert built_name == kernel.name and ptx.rstrip(b"\0") == kernel.source.ptx(kernel.name, dtypes)
            for rows, batch in [(1, 0), (50, 7), (10**6, 10**4)]:
                evaluated_launch = host.aot_evaluate(engine, {"R": rows, "B": batch})
                assert evaluated_launch.ok, evaluated_launch
                sizes = int_sizes(name, rows, batch, 5)
                launch = evaluated_launch.data["launch"]
                assert launch["grid"] == [dim.evaluate(sizes) for dim in kernel.launch.grid]
                assert launch["block"] == list(kernel.launch.block)
                assert launch["extra_args"] == [arg.evaluate(sizes) for arg in kernel.launch.extra_args]
        finally:
            host.free(engine)
