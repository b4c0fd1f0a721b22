"""The overwrite AOT plugin (aliased_io::overwrite_rows) without a GPU: overwrite.cu's PTX and each kernel's
parameter list against the order TensorRT launches with (input pointers, extra int32
arguments, output pointers), their launch parameters, and `register` / `aot_impl` on TensorRT's real Python
bindings (trt_bindings; skipped with the reason where tensorrt.plugin is missing)."""

import inspect
import re

import pytest

from common.nvrtc import PTX_ARCH, PTX_ISA_VERSION, ptx_isa_version
from plugin.kernels.aot import MAX_BLOCKS, THREADS_PER_BLOCK, aot_extra_args, aot_launch_params
from plugin.kernels.overwrite import OVERWRITE_KERNELS, OVERWRITE_SOURCE_PATH, compile_overwrite_ptx, overwrite_kernel
from tests.kernels.test_aot_kernel_signatures import KERNEL_SIGNATURE
from tests.plugin.test_aot_plugin import (  # noqa: F401 (fixtures)
    aot,
    assert_symbolic_launch,
    entry_params,
    symbolic,
)
from tests.support.trt_plugin_internals import aot_plugin_instance, qdp_registry

SIZES = [(1, 0, 1), (5, 7, 3), (1000, 10**4, 64), (10**8, 10**6, 1), (2**31 - 1, 2**30 - 1, 4)]


def sizes_of(num_nodes, num_edges, num_features):
    return {"num_nodes": num_nodes, "num_edges": num_edges, "num_features": num_features}


def test_overwrite_ptx_has_its_kernels_for_compute_75_at_isa_8_0():
    ptx = compile_overwrite_ptx()
    assert re.search(rb"^\.target sm_" + str(PTX_ARCH).encode() + rb"$", ptx, re.MULTILINE)
    assert ptx_isa_version(ptx) == PTX_ISA_VERSION and b"\0" not in ptx
    assert sorted(re.findall(rb"\.visible \.entry (\w+)\(", ptx)) == sorted(n.encode() for n in OVERWRITE_KERNELS)


@pytest.mark.parametrize("name", sorted(OVERWRITE_KERNELS))
def test_overwrite_kernel_parameters_follow_tensorrts_order(name):
    kernel = OVERWRITE_KERNELS[name]
    expected = ["u64"] * len(kernel.inputs) + ["u32"] * len(kernel.extra_args) + ["u64"] * len(kernel.outputs)
    assert entry_params(compile_overwrite_ptx(), name) == expected


@pytest.mark.parametrize("name", sorted(OVERWRITE_KERNELS))
def test_overwrite_kernel_parameter_names_follow_the_description(name):
    """By name, in overwrite.cu: two int32 sizes in the wrong order pass the PTX type check above."""
    source = re.sub(r"//[^\n]*", "", OVERWRITE_SOURCE_PATH.read_text())
    kernels = {kernel: [p.strip().rsplit(None, 1)[-1].lstrip("*") for p in params.split(",")]
               for kernel, params in KERNEL_SIGNATURE.findall(source)}
    assert sorted(kernels) == sorted(OVERWRITE_KERNELS)
    kernel = OVERWRITE_KERNELS[name]
    expected = ([f"{n}_in" if n in kernel.outputs else n for n in kernel.inputs] + list(kernel.extra_args)
                + [f"{n}_out" for n in kernel.outputs])
    assert kernels[name] == expected


@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES)
def test_overwrite_launch_params_cover_each_element_with_at_least_one_block(num_nodes, num_edges, num_features):
    sizes = sizes_of(num_nodes, num_edges, num_features)
    for kernel in OVERWRITE_KERNELS.values():
        grid, block, shared = aot_launch_params(kernel, sizes)
        work = num_edges * num_features
        assert (block, shared) == (THREADS_PER_BLOCK, 0)
        assert grid == max(1, min(-(-work // block), MAX_BLOCKS))
        assert aot_extra_args(kernel, sizes) == (num_nodes, num_edges, num_features)


# --- register / aot_impl on TensorRT's real bindings ---------------------------------------------------------
DTYPES = ["float32", "float16"]


def overwrite_descs(aot, builder, kernel, num_nodes, num_edges, num_features, dtype):
    trt, trtp, _ = aot
    shapes = {"state": (num_nodes, num_features), "src": (num_edges, num_features), "index": (num_edges,)}
    types = {"state": dtype, "src": dtype, "index": trt.int64}
    descs = {}
    for name in kernel.inputs:
        shape = trtp.ShapeExprs.from_tuple(tuple(trtp.ShapeExpr(builder.expr(n)) for n in shapes[name]))
        descs[name] = trtp.from_shape_expr(shape, types[name])
    return descs


@pytest.mark.trt_bindings
@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES[:4])
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_overwrite_aot_impl_returns_its_kernel_ptx_and_symbolic_launch(aot, symbolic, dtype_name, num_nodes,
                                                                       num_edges, num_features):
    trt, trtp, module = aot
    plugin_id = module.OVERWRITE_ROWS
    kernel = overwrite_kernel(dtype_name)
    descs = overwrite_descs(aot, symbolic, kernel, num_nodes, num_edges, num_features, getattr(trt, dtype_name))
    definition = qdp_registry()[plugin_id]
    outputs = definition.register_func(*descs.values())
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)

    name, ptx, launch, extra = definition.aot_impl_func(*descs.values(), outputs, 0)

    assert name == kernel.name and ptx == compile_overwrite_ptx()
    assert re.search(rb"\.visible \.entry " + name.encode() + rb"\(", ptx)
    assert isinstance(extra, trtp.SymIntExprs) and all(isinstance(arg, trtp.SymInt32) for arg in extra)
    assert_symbolic_launch(launch, extra, kernel, sizes_of(num_nodes, num_edges, num_features))


@pytest.mark.trt_bindings
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_overwrite_register_declares_aliased_outputs_through_tensorrts_plugin_class(aot, dtype_name):
    """TensorRT's own AOT plugin class reports our aliasing: the output is the state, input 0."""
    trt, trtp, module = aot
    plugin_id = module.OVERWRITE_ROWS
    kernel = overwrite_kernel(dtype_name)
    instance = aot_plugin_instance(trtp, qdp_registry()[plugin_id], "overwrite_rows", module.NAMESPACE)
    dtype = getattr(trt, dtype_name)
    types = {"state": dtype, "src": dtype, "index": trt.int64}
    ranks = {"state": 2, "src": 2, "index": 1}
    output_types = instance.get_output_data_types([types[n] for n in kernel.inputs], [ranks[n] for n in kernel.inputs])

    assert list(inspect.signature(qdp_registry()[plugin_id].register_func).parameters) == list(kernel.inputs)
    assert output_types == [types[n] for n in kernel.outputs]
    aliases = [instance.get_aliased_input(i) for i in range(len(kernel.outputs))]
    assert aliases == [0]


@pytest.mark.trt_bindings
@pytest.mark.parametrize("types, message", [
    (["int64", "int64", "int64"], "state must be a 2-D float32 or float16"),
    (["float16", "float32", "int64"], "src must be a 2-D DataType.HALF"),
    (["float32", "float32", "int32"], "index must be a 1-D DataType.INT64"),
])
def test_overwrite_register_refuses_the_wrong_types(aot, types, message):
    trt, trtp, module = aot
    instance = aot_plugin_instance(trtp, qdp_registry()[module.OVERWRITE_ROWS], "overwrite_rows", module.NAMESPACE)
    ranks = [2, 2, 1]
    with pytest.raises(ValueError, match=message):
        instance.get_output_data_types([getattr(trt, t) for t in types], ranks)


@pytest.mark.trt_bindings
def test_the_overwrite_plugin_is_among_the_ids_the_onnx_parser_needs(aot):
    _, _, module = aot
    assert module.OVERWRITE_ROWS in module.PLUGIN_IDS and module.OVERWRITE_ROWS == "aliased_io::overwrite_rows"
