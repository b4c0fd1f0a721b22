"""The overwrite AOT plugin (aliased_io::overwrite_rows, the one step of plugin/overwrite_op.py OVERWRITE_ROWS)
without a GPU: overwrite.cu's PTX and each kernel's parameter list against the order TensorRT launches with (input
pointers, extra int32 arguments, output pointers), the step's launch, and `register` / `aot_impl` /
get_aliased_input of the step's registration (inplace.aot.register_aot_op over plugin/inplace_ops.py PROJECT_OPS)
on TensorRT's real Python bindings (trt_bindings; skipped with the reason where tensorrt.plugin is missing)."""

import inspect
import re

import pytest

from common.nvrtc import PTX_ARCH, PTX_ISA_VERSION, ptx_isa_version
from inplace.checks import plugin_id, plugin_name
from inplace.launch import evaluate_launch
from plugin.overwrite_op import MAX_BLOCKS, THREADS_PER_BLOCK
from plugin.kernels.overwrite import OVERWRITE_SOURCE_PATH, compile_overwrite_ptx
from plugin.overwrite_op import KERNEL_NAMES, OVERWRITE_ROWS, STEP, kernel
from tests.plugin.test_aot_plugin import aot, symbolic, tensor_descs  # noqa: F401 (fixtures)
from tests.support.trt_plugin_internals import aot_plugin_instance, evaluated, qdp_registry

SIZES = [(1, 0, 1), (5, 7, 3), (1000, 10**4, 64), (10**8, 10**6, 1), (2**31 - 1, 2**30 - 1, 4)]
DTYPES = ["float32", "float16"]
KERNEL_SIGNATURE = re.compile(r'extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\(([^)]*)\)',
                              re.DOTALL)


def sizes_of(num_nodes, num_edges, num_features):
    return {"N": num_nodes, "E": num_edges, "F": num_features}


def entry_params(ptx, name):
    """The PTX parameter types (u64, u32, ...) of entry `name`, in order."""
    body = re.search(rb"\.visible \.entry " + name.encode() + rb"\((.*?)\)", ptx, re.DOTALL).group(1)
    return [kind.decode() for kind in re.findall(rb"\.param \.(\w+)", body)]


def test_overwrite_ptx_has_its_kernels_for_compute_75_at_isa_8_0():
    ptx = compile_overwrite_ptx()
    assert re.search(rb"^\.target sm_" + str(PTX_ARCH).encode() + rb"$", ptx, re.MULTILINE)
    assert ptx_isa_version(ptx) == PTX_ISA_VERSION and b"\0" not in ptx
    assert sorted(re.findall(rb"\.visible \.entry (\w+)\(", ptx)) == sorted(n.encode() for n in KERNEL_NAMES.values())


@pytest.mark.parametrize("dtype", DTYPES)
def test_overwrite_kernel_parameters_follow_tensorrts_order(dtype):
    found = kernel({"state": dtype})
    expected = ["u64"] * len(STEP.inputs) + ["u32"] * len(found.launch.extra_args) + ["u64"] * len(STEP.outputs)
    assert entry_params(compile_overwrite_ptx(), found.name) == expected


@pytest.mark.parametrize("dtype", DTYPES)
def test_overwrite_kernel_parameter_names_follow_the_description(dtype):
    """By name, in overwrite.cu: two int32 sizes in the wrong order pass the PTX type check above."""
    source = re.sub(r"//[^\n]*", "", OVERWRITE_SOURCE_PATH.read_text())
    kernels = {name: [p.strip().rsplit(None, 1)[-1].lstrip("*") for p in params.split(",")]
               for name, params in KERNEL_SIGNATURE.findall(source)}
    assert sorted(kernels) == sorted(KERNEL_NAMES.values())
    found = kernel({"state": dtype})
    sizes = {"N": "num_nodes", "E": "num_edges", "F": "num_features"}
    (named,) = [sorted(arg.sizes()) for arg in found.launch.extra_args[:1]]  # each extra argument is one size
    assert all(len(arg.sizes()) == 1 for arg in found.launch.extra_args) and named
    expected = ([f"{n}_in" if n in STEP.outputs else n for n in STEP.inputs]
                + [sizes[next(iter(arg.sizes()))] for arg in found.launch.extra_args] + [f"{n}_out" for n in STEP.outputs])
    assert kernels[found.name] == expected


@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES)
def test_overwrite_launch_params_cover_each_element_with_at_least_one_block(num_nodes, num_edges, num_features):
    sizes = sizes_of(num_nodes, num_edges, num_features)
    for dtype in DTYPES:
        grid, block, shared, extra = evaluate_launch(kernel({"state": dtype}), sizes)
        work = num_edges * num_features
        assert (block, shared) == ((THREADS_PER_BLOCK, 1, 1), 0)
        assert grid == (max(1, min(-(-work // THREADS_PER_BLOCK), MAX_BLOCKS)), 1, 1)
        assert extra == (num_nodes, num_edges, num_features)


# --- register / aot_impl on TensorRT's real bindings ---------------------------------------------------------
def dtypes_of(dtype_name):
    return {"state": dtype_name, "src": dtype_name, "index": "int64"}


@pytest.mark.trt_bindings
@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES[:4])
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_overwrite_aot_impl_returns_its_kernel_ptx_and_symbolic_launch(aot, symbolic, dtype_name, num_nodes,
                                                                       num_edges, num_features):
    trt, trtp, _ = aot
    chain = OVERWRITE_ROWS.chains[0]
    sizes = sizes_of(num_nodes, num_edges, num_features)
    descs = tensor_descs(aot, symbolic, OVERWRITE_ROWS, chain, STEP, sizes, dtypes_of(dtype_name))
    definition = qdp_registry()[plugin_id(OVERWRITE_ROWS, STEP)]
    outputs = definition.register_func(*descs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)

    name, ptx, launch, extra = definition.aot_impl_func(*descs, outputs, 0)

    found = kernel({"state": dtype_name})
    assert name == found.name and ptx == compile_overwrite_ptx()
    assert re.search(rb"\.visible \.entry " + name.encode() + rb"\(", ptx)
    assert isinstance(extra, trtp.SymIntExprs) and all(isinstance(arg, trtp.SymInt32) for arg in extra)
    grid, block, shared, values = evaluate_launch(found, sizes)
    got = [evaluated(getattr(launch, field)) for field in ("grid_x", "grid_y", "grid_z", "block_x", "block_y",
                                                           "block_z", "shared_mem")]
    assert got == [*grid, *block, shared]
    assert tuple(evaluated(arg) for arg in extra) == values == (num_nodes, num_edges, num_features)


def overwrite_instance(aot):
    _, trtp, _ = aot
    return aot_plugin_instance(trtp, qdp_registry()[plugin_id(OVERWRITE_ROWS, STEP)], plugin_name(STEP),
                               OVERWRITE_ROWS.namespace)


@pytest.mark.trt_bindings
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_overwrite_register_declares_aliased_outputs_through_tensorrts_plugin_class(aot, dtype_name):
    """TensorRT's own AOT plugin class reports our aliasing: the output is the state, input 0."""
    trt, _, _ = aot
    instance = overwrite_instance(aot)
    types = {name: getattr(trt, dtype) for name, dtype in dtypes_of(dtype_name).items()}
    ranks = {"state": 2, "src": 2, "index": 1}
    output_types = instance.get_output_data_types([types[n] for n in STEP.inputs], [ranks[n] for n in STEP.inputs])

    definition = qdp_registry()[plugin_id(OVERWRITE_ROWS, STEP)]
    assert list(inspect.signature(definition.register_func).parameters) == list(STEP.inputs)
    assert output_types == [types[n] for n in STEP.outputs]
    assert [instance.get_aliased_input(i) for i in range(len(STEP.outputs))] == [0]


@pytest.mark.trt_bindings
@pytest.mark.parametrize("types, message", [
    (["int64", "int64", "int64"], "aliased_io::overwrite_rows: state must be a 2-D float32 or float16 tensor"),
    (["float16", "float32", "int64"], "aliased_io::overwrite_rows: no kernel takes"),  # src not the state's dtype
    (["float32", "float32", "int32"], "aliased_io::overwrite_rows: index must be a 1-D int64 tensor"),
])
def test_overwrite_register_refuses_the_wrong_types(aot, types, message):
    trt, _, _ = aot
    with pytest.raises(ValueError, match=message):
        overwrite_instance(aot).get_output_data_types([getattr(trt, t) for t in types], [2, 2, 1])


@pytest.mark.trt_bindings
def test_the_overwrite_plugin_is_among_the_ids_the_onnx_parser_needs(aot):
    from inplace.registry import register_aot_plugins

    assert "aliased_io::overwrite_rows" in register_aot_plugins()
    assert plugin_id(OVERWRITE_ROWS, STEP) == "aliased_io::overwrite_rows"
