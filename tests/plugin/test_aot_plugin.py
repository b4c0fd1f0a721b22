"""The AOT plugins without a GPU: the project's ops' chains (plugin/inplace_ops.py) registered as a user's op's are,
`register`/`aot_impl` of each step run against TensorRT's real Python bindings (tensorrt.plugin, 10.16 and 11.x;
marked trt_bindings, skipped with the reason where it is missing), and the CLI's --plugin option.

Symbolic sizes: TensorRT hands aot_impl IDimensionExpr-backed shapes and an IExprBuilder. Here a small
builder evaluates the same operations on concrete numbers (its expressions are real trt.IDimensionExpr
instances, which tensorrt.plugin requires), so the launch parameters and extra arguments aot_impl returns can
be compared with the step's Launch evaluated on plain ints.
"""

import importlib
import inspect
import re

import pytest

from common.nvrtc import declare_ptx_isa, ptx_isa_version
from tests.support.trt_plugin_internals import aot_plugin_instance, evaluated, qdp_registry, symbolic_builder

SIZES = [  # (N, E, F)
    (1, 0, 1),
    (5, 7, 3),
    (1000, 10**4, 64),
    (10**6, 10**7, 1),
    (2**31 - 1, 2**30 - 1, 4),
]


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


def test_aot_declare_ptx_isa_lowers_only_a_newer_version():
    ptx = b"//\n.version 9.5\n.target sm_75\n\0"
    assert declare_ptx_isa(ptx, (8, 0)) == b"//\n.version 8.0\n.target sm_75\n\0"
    assert declare_ptx_isa(b".version 7.8\n\0", (8, 0)) == b".version 7.8\n\0"
    with pytest.raises(ValueError, match="version"):
        ptx_isa_version(b".target sm_75\n")


# --- register / aot_impl on TensorRT's real bindings ---------------------------------------------------------
@pytest.fixture(scope="module")
def aot():
    """(tensorrt, tensorrt.plugin, plugin.inplace_ops) from the real bindings, the project's ops registered as AOT
    plugins (inplace.registry.register_aot_plugins, as --onnx --plugin aot registers them), or a skip saying why
    not."""
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
    from inplace.registry import register_aot_plugins

    module = importlib.import_module("plugin.inplace_ops")
    register_aot_plugins()
    return trt, trtp, module


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


def tensor_descs(aot, builder, op, chain, step, sizes, dtypes):
    """TensorDescs of the step's inputs with symbolic shapes for these sizes (types as the network makes them):
    the op's inputs by its sizes, the chain's scratch tensors by their shape expressions."""
    trt, trtp, _ = aot
    shapes = {"state": ("N", "F"), "src": ("E", "F"), "index": ("E",)}
    dims = {name: tuple(sizes[n] for n in shape) for name, shape in shapes.items()}
    dims.update((scratch.name, tuple(dim.evaluate(sizes) for dim in scratch.shape)) for scratch in chain.scratch)
    return [trtp.from_shape_expr(trtp.ShapeExprs.from_tuple(tuple(trtp.ShapeExpr(builder.expr(n)) for n in dims[name])),
                                 getattr(trt, dtypes[name])) for name in step.inputs]


def variants():
    """(op, chain, step, dtypes) of each step of the chains an engine takes for both dtypes, with and without
    counts (float32 the state chain, float16 the table, F = 1 without counts at most 1024 edges one block)."""
    from plugin.scatter_add_op import SCATTER_ADD, SCATTER_ADD_COUNTS, block_chain, state_chain, table_chain

    found = []
    for op, chain, dtype in ((SCATTER_ADD, state_chain(False), "float32"), (SCATTER_ADD_COUNTS, state_chain(True), "float32"),
                             (SCATTER_ADD, table_chain(False), "float16"), (SCATTER_ADD_COUNTS, table_chain(True), "float16"),
                             (SCATTER_ADD, block_chain(), "float16")):
        dtypes = {"state": dtype, "src": dtype, "index": "int64",
                  **{scratch.name: scratch.dtype for scratch in chain.scratch}}
        found += [(op, chain, step, dtypes) for step in chain.steps]
    return found


VARIANT_IDS = [f"{op.name}{step.plugin.rpartition('::')[2]}-{dtypes['state']}" for op, _, step, dtypes in variants()]


@pytest.mark.trt_bindings
@pytest.mark.parametrize("num_nodes,num_edges,num_features", SIZES[:4])
@pytest.mark.parametrize("variant", range(len(VARIANT_IDS)), ids=VARIANT_IDS)
def test_aot_impl_returns_kernel_ptx_and_symbolic_launch(aot, symbolic, variant, num_nodes, num_edges, num_features):
    """Each step's registration as TensorRT calls it: the register function, then aot_impl with symbolic shapes,
    its kernel's PTX and the launch and extra arguments of the step's Launch evaluated on these sizes."""
    from inplace.aot import shared_memory
    from inplace.checks import plugin_id

    trt, trtp, _ = aot
    op, chain, step, dtypes = variants()[variant]
    sizes = {"N": num_nodes, "E": num_edges, "F": num_features}
    descs = tensor_descs(aot, symbolic, op, chain, step, sizes, dtypes)
    definition = qdp_registry()[plugin_id(op, step)]
    outputs = definition.register_func(*descs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)

    name, ptx, launch, extra = definition.aot_impl_func(*descs, outputs, 0)

    kernel = step.kernel(dtypes)
    assert name == kernel.name and isinstance(ptx, bytes)
    assert re.search(rb"\.visible \.entry " + name.encode() + rb"\(", ptx)
    assert isinstance(launch, trtp.KernelLaunchParams)
    assert isinstance(extra, trtp.SymIntExprs) and len(extra) == len(kernel.launch.extra_args)
    assert all(isinstance(arg, trtp.SymInt32) for arg in extra)  # what get_launch_params accepts
    got = [evaluated(getattr(launch, field)) for field in ("grid_x", "grid_y", "grid_z", "block_x", "block_y",
                                                           "block_z", "shared_mem")]
    assert got == [*(dim.evaluate(sizes) for dim in kernel.launch.grid), *kernel.launch.block,
                   shared_memory(kernel, dtypes).evaluate(sizes)]
    assert [evaluated(arg) for arg in extra] == [arg.evaluate(sizes) for arg in kernel.launch.extra_args]


@pytest.mark.trt_bindings
@pytest.mark.parametrize("tactic", [1, 2])
@pytest.mark.parametrize("counted", [False, True], ids=["no counts", "counts"])
def test_a_chain_pinned_to_a_tactic_registers_that_kernel_alone(aot, symbolic, counted, tactic):
    """tests/support/tactics.py, which the end-to-end tests build an engine of per tactic: the pinned op registers
    with tensorrt.plugin beside the project's, its scatter step offers TensorRT no tactic to time (no autotune)
    and its aot_impl returns the tactic's kernel, the other steps their own."""
    from inplace.aot import register_aot_op
    from inplace.checks import plugin_id
    from plugin.scatter_add_op import SCATTER_ADD, SCATTER_ADD_COUNTS, SCATTER_TACTICS, table_chain
    from tests.support.tactics import pinned_tactic

    op, chain = pinned_tactic(SCATTER_ADD_COUNTS if counted else SCATTER_ADD, table_chain(counted), tactic)
    assert register_aot_op(op) == [plugin_id(op, step) for step in chain.steps]
    assert op.namespace == f"aliased_io_tactic{tactic}" and op.chain_for(None) is chain  # type: ignore[arg-type]
    dtypes = {"state": "float16", "src": "float16", "index": "int64",
              **{scratch.name: scratch.dtype for scratch in chain.scratch}}
    sizes = {"N": 1000, "E": 20000, "F": 64}
    kernels = []
    for step in chain.steps:
        definition = qdp_registry()[plugin_id(op, step)]
        descs = tensor_descs(aot, symbolic, op, chain, step, sizes, dtypes)
        outputs = definition.register_func(*descs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        name, ptx, _, _ = definition.aot_impl_func(*descs, outputs, 0)
        assert re.search(rb"\.visible \.entry " + name.encode() + rb"\(", ptx) and definition.autotune_func is None
        kernels.append(name)
    suffix = SCATTER_TACTICS[tactic - 1]
    assert kernels == [f"aot_scatter_table{'_counts' if counted else ''}_{suffix}", "aot_apply_table"]


@pytest.mark.trt_bindings
@pytest.mark.parametrize("variant", range(len(VARIANT_IDS)), ids=VARIANT_IDS)
def test_aot_register_declares_aliased_outputs_through_tensorrts_plugin_class(aot, variant):
    """TensorRT's own AOT plugin class (tensorrt.plugin) reports get_aliased_input from the step's registration:
    each output named like an input is that input's memory."""
    from inplace.checks import plugin_id, plugin_name

    trt, trtp, _ = aot
    op, chain, step, dtypes = variants()[variant]
    instance = aot_plugin_instance(trtp, qdp_registry()[plugin_id(op, step)], plugin_name(step), op.namespace)
    ranks = {"state": 2, "src": 2, "index": 1, **{scratch.name: len(scratch.shape) for scratch in chain.scratch}}
    output_types = instance.get_output_data_types([getattr(trt, dtypes[n]) for n in step.inputs],
                                                  [ranks[n] for n in step.inputs])

    assert list(inspect.signature(qdp_registry()[plugin_id(op, step)].register_func).parameters) == list(step.inputs)
    assert instance.get_num_outputs() == len(step.outputs)
    assert output_types == [getattr(trt, dtypes[n]) for n in step.outputs]
    assert [instance.get_aliased_input(i) for i in range(len(step.outputs))] == [
        step.inputs.index(name) for name in step.outputs
    ]


@pytest.mark.trt_bindings
def test_aot_register_refuses_the_wrong_dtype(aot):
    trt, trtp, _ = aot
    instance = aot_plugin_instance(trtp, qdp_registry()["aliased_io::add_rows"], "add_rows", "aliased_io")
    with pytest.raises(ValueError, match="aliased_io::add_rows: state must be a 2-D float32 or float16 tensor"):
        instance.get_output_data_types([trt.int32, trt.int32, trt.int64], [2, 2, 1])


# --- the CLI's --plugin option (no TensorRT needed: checked before any engine work) ----------------------------
BAD_AOT_OPTIONS = [
    (["--plugin", "cuda"], "argument --plugin: invalid choice: 'cuda'"),
    (["--plugin", "aot", "--benchmark", "3"], "for --plugin aot run benchmarks/bench_aot.py"),
    (["--plugin", "python", "--load_engine", "{engine}"], "--plugin python chooses the scatter-add of a new engine"),
]  # the profile's limit under --plugin aot: tests/cli/test_cli_engine_options.py test_the_aot_edge_limit_is_the_chains_own


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
