"""The AOT plugins without a GPU: the PTX (NVRTC), each kernel's parameter list against the order TensorRT
launches with, the launch-parameter function, and `register`/`aot_impl` run against TensorRT's real Python
bindings (tensorrt.plugin, 10.16 and 11.x; marked trt_bindings, skipped with the reason where it is missing).

Symbolic sizes: TensorRT hands aot_impl IDimensionExpr-backed shapes and an IExprBuilder. Here a small
builder evaluates the same operations on concrete numbers (its expressions are real trt.IDimensionExpr
instances, which tensorrt.plugin requires), so the launch parameters and extra arguments aot_impl returns can
be compared with aot_launch_params evaluated on plain ints.
"""

import importlib
import inspect
import re

import pytest

from common.nvrtc import PTX_ARCH, PTX_ISA_VERSION, declare_ptx_isa, ptx_isa_version
from plugin.kernels.aot import (
    AOT_KERNELS,
    BLOCK_MAX_EDGES,
    BLOCK_THREADS,
    MAX_BLOCKS,
    PRIVATE_MAX_FLOATS,
    THREADS_PER_BLOCK,
    aot_extra_args,
    aot_launch_params,
    aot_scatter_add_steps,
    aot_shared_bytes,
    aot_takes_one_block,
    check_aot_sizes,
    compile_aot_ptx,
    table_capacity,
)
from tests.support.trt_plugin_internals import aot_plugin_instance, evaluated, qdp_registry, symbolic_builder

SIZES = [  # (N, E, F)
    (1, 0, 1),
    (5, 7, 3),
    (1000, 10**4, 64),
    (10**6, 10**7, 1),
    (2**31 - 1, 2**30 - 1, 4),
]


def entry_params(ptx: bytes, name: str) -> list[str]:
    """The PTX parameter types of kernel `name`, in order (e.g. ['u64', 'u64', 'u32'])."""
    match = re.search(rb"\.entry " + name.encode() + rb"\((.*?)\)", ptx, re.DOTALL)
    assert match, f"kernel {name} not in the PTX"
    return [kind.decode() for kind in re.findall(rb"\.param \.(\w+) ", match.group(1))]


def int_sizes(num_nodes, num_edges, num_features):
    return {"num_nodes": num_nodes, "num_edges": num_edges, "num_features": num_features,
            "capacity": table_capacity(num_edges)}


# --- PTX and the plain launch description (no TensorRT) ------------------------------------------------------
def test_aot_ptx_has_every_kernel_for_compute_75_at_isa_8_0():
    ptx = compile_aot_ptx()
    assert re.search(rb"^\.target sm_" + str(PTX_ARCH).encode() + rb"$", ptx, re.MULTILINE)
    assert ptx_isa_version(ptx) == PTX_ISA_VERSION == (8, 0)
    assert b"\0" not in ptx and ptx.endswith(b"\n")  # the text without nvrtcGetPTX's NUL, as NVIDIA's samples pass it
    for name in AOT_KERNELS:
        assert re.search(rb"\.visible \.entry " + name.encode() + rb"\(", ptx), name


@pytest.mark.parametrize("name", sorted(AOT_KERNELS))
def test_aot_kernel_parameters_follow_tensorrts_order(name):
    """TensorRT passes input pointers, then the extra int32 arguments, then output pointers."""
    kernel = AOT_KERNELS[name]
    expected = ["u64"] * len(kernel.inputs) + ["u32"] * len(kernel.extra_args) + ["u64"] * len(kernel.outputs)
    assert entry_params(compile_aot_ptx(), name) == expected


def test_aot_kernels_alias_outputs_to_inputs_of_the_same_name():
    for kernel in AOT_KERNELS.values():
        assert set(kernel.outputs) <= set(kernel.inputs), kernel.name
        assert set(kernel.extra_args) <= {"num_nodes", "num_edges", "num_features", "capacity"}


@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES)
@pytest.mark.parametrize("name", sorted(AOT_KERNELS))
def test_aot_launch_params_cover_every_element_with_at_least_one_block(name, num_nodes, num_edges, num_features):
    kernel = AOT_KERNELS[name]
    sizes = int_sizes(num_nodes, num_edges, num_features)
    grid, block, shared = aot_launch_params(kernel, sizes)
    if kernel.one_block:  # its table is static shared memory; block 0 loops over every edge
        assert (grid, block, shared) == (1, BLOCK_THREADS, 0)
        return
    elements = sizes[kernel.rows] * num_features
    assert block == THREADS_PER_BLOCK and shared == aot_shared_bytes(kernel, sizes)
    assert 1 <= grid <= MAX_BLOCKS
    assert grid == max(1, min(-(-elements // block), MAX_BLOCKS))
    assert grid * block >= elements or grid == MAX_BLOCKS  # beyond that the kernels loop
    assert aot_extra_args(kernel, sizes) == tuple(sizes[arg] for arg in kernel.extra_args)


@pytest.mark.parametrize("name", sorted(AOT_KERNELS))
def test_aot_float32_kernels_get_shared_memory_for_their_privatised_sums_only_where_they_fit(name):
    # 4 N (F + counts) bytes up to PRIVATE_MAX_FLOATS words (under the 48 KiB a launch gets without an opt-in),
    # 0 beyond; the float16 kernels never sum in shared memory.
    kernel = AOT_KERNELS[name]
    words_per_node = 2 + ("counts" in kernel.inputs)  # F = 2
    fits = PRIVATE_MAX_FLOATS // words_per_node
    expected = 4 * fits * words_per_node if kernel.privatised else 0
    assert kernel.privatised == name.startswith("scatter_add_f32")
    assert aot_shared_bytes(kernel, int_sizes(fits, 10**6, 2)) == expected <= 48 * 1024
    assert aot_shared_bytes(kernel, int_sizes(fits + 1, 10**6, 2)) == 0
    assert aot_shared_bytes(kernel, int_sizes(2**31 - 1, 10**6, 2)) == 0


def test_aot_takes_one_block_only_for_float16_rows_of_one_feature_without_counts_within_its_edges():
    assert aot_takes_one_block(half=True, with_counts=False, num_features=1, max_edges=BLOCK_MAX_EDGES)
    assert aot_takes_one_block(half=True, with_counts=False, num_features=1, max_edges=1)
    for half, with_counts, features, max_edges in [(False, False, 1, 100), (True, True, 1, 100), (True, False, 2, 100),
                                                   (True, False, 1, BLOCK_MAX_EDGES + 1), (True, False, 1, None)]:
        assert not aot_takes_one_block(half=half, with_counts=with_counts, num_features=features, max_edges=max_edges)


def test_aot_steps_of_a_profile_within_one_block_are_one_kernel_and_no_fills():
    sizes, fills, names = aot_scatter_add_steps(half=True, with_counts=False, num_nodes=10**6, num_edges=1000,
                                                num_features=1, max_edges=1024)
    assert (fills, names) == ([], ["scatter_block_f16"]) and sizes["num_edges"] == 1000
    _, fills, names = aot_scatter_add_steps(half=True, with_counts=False, num_nodes=10**6, num_edges=1000,
                                            num_features=1, max_edges=1025)
    assert [tensor for tensor, _, _ in fills] == ["keys", "values"]
    assert names == ["scatter_table_f16", "apply_table_f16"]
    with pytest.raises(ValueError, match="more than the profile's max_edges 100"):
        aot_scatter_add_steps(half=True, with_counts=False, num_nodes=10, num_edges=101, num_features=1, max_edges=100)


@pytest.mark.parametrize("max_edges", [1024, 1025])
def test_aot_state_engine_is_populated_with_its_profiles_max_edges(monkeypatch, max_edges):
    """prepare_engine hands the profile's max E to the state-update network (where the one-block choice is made);
    stopped at the build, which needs TensorRT."""
    from unittest import mock

    from network import engine
    from common.plugin_kind import PluginKind
    from network.definition import STATE_UPDATE

    class Built(Exception):
        pass

    def build(populate, profile_shapes, verbose=False):
        assert profile_shapes["idx"][2] == (max_edges,)
        raise Built(populate)

    monkeypatch.setattr(engine, "build_engine_bytes", build)
    bounds = engine.ProfileBounds(nodes=engine.SizeRange(1, 100, 1000), edges=engine.SizeRange(1, 50, max_edges))
    with pytest.raises(Built) as built:
        engine.prepare_engine(mock.MagicMock(), kind=STATE_UPDATE, precision="fp16", num_nodes=100, num_edges=50,
                              num_features=1, num_classes=0, profile=bounds, plugin=PluginKind.AOT)
    populate = built.value.args[0]
    assert populate.keywords["max_edges"] == max_edges and populate.keywords["plugin"] is PluginKind.AOT


def test_aot_table_capacity_is_more_than_twice_the_edges():
    assert [table_capacity(e) for e in (0, 1, 10)] == [1, 3, 21]


def test_aot_check_sizes_rejects_what_int32_arguments_cannot_carry():
    check_aot_sizes({"num_nodes": 2**31 - 1, "num_edges": 0, "num_features": 1})
    with pytest.raises(ValueError, match="num_edges"):
        check_aot_sizes({"num_edges": 2**31})
    with pytest.raises(ValueError, match="num_features"):
        check_aot_sizes({"num_features": 0})


def test_aot_declare_ptx_isa_lowers_only_a_newer_version():
    ptx = b"//\n.version 9.5\n.target sm_75\n\0"
    assert declare_ptx_isa(ptx, (8, 0)) == b"//\n.version 8.0\n.target sm_75\n\0"
    assert declare_ptx_isa(b".version 7.8\n\0", (8, 0)) == b".version 7.8\n\0"
    with pytest.raises(ValueError, match="version"):
        ptx_isa_version(b".target sm_75\n")


# --- register / aot_impl on TensorRT's real bindings ---------------------------------------------------------
@pytest.fixture(scope="module")
def aot():
    """(tensorrt, tensorrt.plugin, plugin.scatter_add_aot) from the real bindings, or a skip saying why not."""
    from common.errors import MissingDependencyError
    from common.imports import import_tensorrt

    try:
        trt = import_tensorrt()
    except MissingDependencyError as error:
        pytest.skip(f"needs TensorRT's Python package with tensorrt.plugin (10.16+): {error}")
    try:
        trtp = importlib.import_module("tensorrt.plugin")
    except ImportError:
        pytest.skip(f"this tensorrt ({getattr(trt, '__version__', '?')}) has no tensorrt.plugin (TensorRT 10.16+ has; "
                    "test_real_bindings.py runs these on 11.4's real bindings, CI's matrix on 10.16 and 11.4)")
    if not hasattr(trtp, "aot_impl"):
        pytest.skip(f"TensorRT {getattr(trt, '__version__', '?')} has no tensorrt.plugin.aot_impl (needs 10.16+)")
    return trt, trtp, importlib.import_module("plugin.scatter_add_aot")


class SymbolicSizes:
    """A stand-in for TensorRT's IExprBuilder that evaluates on concrete numbers; its expressions are real
    trt.IDimensionExpr objects (made without TensorRT's factory) carrying their value."""

    def __init__(self, trt):
        self.trt = trt
        op = trt.DimensionOperation
        self.operations = {
            op.SUM: lambda a, b: a + b, op.PROD: lambda a, b: a * b, op.SUB: lambda a, b: a - b,
            op.MAX: max, op.MIN: min, op.FLOOR_DIV: lambda a, b: a // b, op.CEIL_DIV: lambda a, b: -(-a // b),
            op.EQUAL: lambda a, b: int(a == b), op.LESS: lambda a, b: int(a < b),
        }
        expr_type = type("EvaluatedExpr", (trt.IDimensionExpr,), {})
        self.expr_type = expr_type

    def expr(self, value):
        expr = self.trt.IDimensionExpr.__new__(self.expr_type)
        expr.value = int(value)
        expr.is_constant = lambda: True  # every size here is a number, as F is in a build
        expr.get_constant_value = lambda: expr.value
        return expr

    def constant(self, value):
        return self.expr(value)

    def operation(self, op, first, second):
        return self.expr(self.operations[op](first.value, second.value))


@pytest.fixture
def symbolic(aot):
    """Sets tensorrt.plugin's expression builder to SymbolicSizes for one test, as TensorRT does during a build."""
    trt, trtp, _ = aot
    with symbolic_builder(trtp, SymbolicSizes(trt)) as builder:
        yield builder


def tensor_descs(aot, builder, kernel, num_nodes, num_edges, num_features, dtype):
    """TensorDescs of the kernel's inputs with symbolic shapes for these sizes (types as the network makes them)."""
    trt, trtp, _ = aot
    capacity = table_capacity(num_edges)
    shapes = {"state": (num_nodes, num_features), "src": (num_edges, num_features), "index": (num_edges,),
              "counts": (num_nodes, 1), "keys": (capacity,), "values": (capacity, num_features)}
    types = {"state": dtype, "src": dtype, "index": trt.int64, "counts": trt.int64, "keys": trt.int32,
             "values": trt.float32}
    descs = {}
    for name in kernel.inputs:
        shape = trtp.ShapeExprs.from_tuple(tuple(trtp.ShapeExpr(builder.expr(n)) for n in shapes[name]))
        descs[name] = trtp.from_shape_expr(shape, types[name])
    return descs


VARIANTS = [  # (plugin id suffix, dtype name): both dtypes, with and without counts
    ("scatter_add", "float32"),
    ("scatter_add_counts", "float32"),
    ("scatter_table", "float16"),
    ("scatter_table_counts", "float16"),
    ("apply_table", "float16"),
    ("scatter_add_block", "float16"),
]


@pytest.mark.trt_bindings
@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES[:4])
@pytest.mark.parametrize("plugin,dtype_name", VARIANTS)
def test_aot_impl_returns_kernel_ptx_and_symbolic_launch(aot, symbolic, plugin, dtype_name, num_nodes, num_edges,
                                                         num_features):
    trt, trtp, module = aot
    plugin_id = f"{module.NAMESPACE}::{plugin}"
    kernel = AOT_KERNELS[module.PLUGIN_KERNELS[plugin_id]]
    num_features = 1 if kernel.one_block else num_features  # rows of one feature only
    descs = tensor_descs(aot, symbolic, kernel, num_nodes, num_edges, num_features, getattr(trt, dtype_name))
    definition = qdp_registry()[plugin_id]
    outputs = definition.register_func(*descs.values())
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)

    name, ptx, launch, extra = definition.aot_impl_func(*descs.values(), outputs, 0)

    assert isinstance(name, str) and isinstance(ptx, bytes)
    assert re.search(rb"\.visible \.entry " + name.encode() + rb"\(", ptx)
    assert ptx == compile_aot_ptx()
    assert isinstance(launch, trtp.KernelLaunchParams)
    assert isinstance(extra, trtp.SymIntExprs) and len(extra) == len(kernel.extra_args)
    assert all(isinstance(arg, trtp.SymInt32) for arg in extra)  # what get_launch_params accepts
    assert_symbolic_launch(launch, extra, kernel, int_sizes(num_nodes, num_edges, num_features))


def assert_symbolic_launch(launch, extra, kernel, sizes):
    """aot_impl's symbolic launch parameters and extra arguments, evaluated, equal aot_launch_params' for `sizes`."""
    grid, block, shared = aot_launch_params(kernel, sizes)
    got = [evaluated(getattr(launch, field)) for field in ("grid_x", "grid_y", "grid_z", "block_x", "block_y",
                                                           "block_z", "shared_mem")]
    assert got == [grid, 1, 1, block, 1, 1, shared]
    assert [evaluated(arg) for arg in extra] == list(aot_extra_args(kernel, sizes))


@pytest.mark.trt_bindings
@pytest.mark.parametrize("plugin,dtype_name", VARIANTS)
def test_aot_register_declares_aliased_outputs_through_tensorrts_plugin_class(aot, plugin, dtype_name):
    """TensorRT's own AOT plugin class (tensorrt.plugin) reports get_aliased_input from our register function."""
    trt, trtp, module = aot
    plugin_id = f"{module.NAMESPACE}::{plugin}"
    kernel = AOT_KERNELS[module.PLUGIN_KERNELS[plugin_id]]
    instance = aot_plugin_instance(trtp, qdp_registry()[plugin_id], plugin, module.NAMESPACE)
    types = {"state": getattr(trt, dtype_name), "src": getattr(trt, dtype_name), "index": trt.int64,
             "counts": trt.int64, "keys": trt.int32, "values": trt.float32}
    ranks = {"state": 2, "src": 2, "index": 1, "counts": 2, "keys": 1, "values": 2}
    output_types = instance.get_output_data_types([types[n] for n in kernel.inputs], [ranks[n] for n in kernel.inputs])

    assert list(inspect.signature(qdp_registry()[plugin_id].register_func).parameters) == list(kernel.inputs)
    assert instance.get_num_outputs() == len(kernel.outputs)
    assert output_types == [types[n] for n in kernel.outputs]
    assert [instance.get_aliased_input(i) for i in range(len(kernel.outputs))] == [
        kernel.inputs.index(name) for name in kernel.outputs
    ]


@pytest.mark.trt_bindings
def test_aot_register_refuses_the_wrong_dtype(aot):
    trt, trtp, module = aot
    instance = aot_plugin_instance(trtp, qdp_registry()[module.SCATTER_ADD], "scatter_add", module.NAMESPACE)
    with pytest.raises(ValueError, match="state must be a 2-D"):
        instance.get_output_data_types([trt.float16, trt.float16, trt.int64], [2, 2, 1])


@pytest.mark.trt_bindings
@pytest.mark.parametrize("state_features, src_features, name", [(3, 3, "state"), (1, 2, "src")])
def test_aot_scatter_add_block_refuses_rows_of_more_than_one_feature(aot, symbolic, state_features, src_features,
                                                                      name):
    trt, trtp, module = aot
    kernel = AOT_KERNELS["scatter_block_f16"]
    descs = tensor_descs(aot, symbolic, kernel, 100, 10, 1, trt.float16)
    for tensor, features in (("state", state_features), ("src", src_features)):
        rows = descs[tensor].shape_expr[0]
        shape = trtp.ShapeExprs.from_tuple((rows, trtp.ShapeExpr(symbolic.expr(features))))
        descs[tensor] = trtp.from_shape_expr(shape, trt.float16)
    with pytest.raises(ValueError, match=f"{name} must have one feature per row for aliased_io::scatter_add_block"):
        qdp_registry()[module.SCATTER_ADD_BLOCK].register_func(*descs.values())


# --- the CLI's --plugin option (no TensorRT needed: checked before any engine work) ----------------------------
BAD_AOT_OPTIONS = [
    (["--plugin", "cuda"], "argument --plugin: invalid choice: 'cuda'"),
    (["--plugin", "aot", "--benchmark", "3"], "for --plugin aot run benchmarks/bench_aot.py"),
    (["--plugin", "python", "--load_engine", "{engine}"], "--plugin python chooses the scatter-add of a new engine"),
    (["--plugin", "aot", "--precision", "fp16", "--max_edges", "1073741824"],
     "--max_edges 1,073,741,824 is more than --plugin aot --precision fp16 takes (1,073,741,823"),
]


@pytest.mark.parametrize("args, message", BAD_AOT_OPTIONS)
def test_aot_cli_option_clashes_exit_2_with_one_line(capsys, tmp_path, args, message):
    import aliased_io_plugin as cli
    from tests.cli.test_cli import assert_one_line_error

    engine = tmp_path / "saved.engine"
    engine.write_bytes(b"only its existence is checked before TensorRT loads")
    status = cli.main([arg.format(engine=engine) for arg in args] + ["--seed", "1"])
    assert_one_line_error(status, capsys.readouterr(), message)


def test_aot_cli_option_reaches_the_engine_options():
    from cli.options import parse_arguments, parse_engine_options

    assert parse_engine_options(parse_arguments([])).plugin == "python"
    assert parse_engine_options(parse_arguments(["--plugin", "aot", "--precision", "fp16"])).plugin == "aot"
    assert parse_engine_options(parse_arguments(["--plugin", "aot", "--max_edges", "2000000000"])).plugin == "aot"


def test_aot_cli_dry_run_imports_neither_tensorrt_nor_cuda():
    from tests.support.import_check import heavy_modules_imported_by

    assert heavy_modules_imported_by(["--plugin", "aot", "--dry-run", "--seed", "1"]) == []
