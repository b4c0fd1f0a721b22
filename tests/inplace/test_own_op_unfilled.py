"""An unfilled scratch tensor (Scratch fill None) on a small op of the test's own: `sum_rows_(state, idx, rows)`
adds rows into state[idx] through a table [cdiv(B, 2) * 2 + 1, F] that no fill makes: the first step, fill_table,
creates it (an output that is none of its inputs) and writes its first B rows, the second reads those rows. The
rewrite writes no ConstantOfShape for it and ONNX Runtime proves the chain step by step against torch eager; the
registration gives the created output the Scratch's dtype and shape (trt_bindings), as it does the sorted chain's
five unfilled scratch tensors of plugin/scatter_add_op.py."""

import numpy as np
import pytest

from inplace.registry import register
from inplace.spec import Chain, InplaceOp, Kernel, Scratch, Step, TensorInput, size
from tests.inplace.test_own_op_chain import LAUNCH, TABLE_ROWS, apply_table, reference, sum_rows_
from tests.plugin.test_aot_plugin import aot, symbolic  # noqa: F401 (fixtures)
from tests.support.own_ops import TextPtx, dry_run_sum_rows, export_sum_rows

PTX = """.version 8.0
.target sm_75
.address_size 64
.visible .entry fill(.param .u64 a, .param .u64 b, .param .u32 c, .param .u64 d)
{ ret; }
.visible .entry apply(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 d, .param .u64 e)
{ ret; }
"""


def fill_table(idx, rows):
    """The table fill_table creates: rows in its first B rows, the rest whatever it holds (here 7, never read)."""
    table = np.full((-(-idx.shape[0] // 2) * 2 + 1, rows.shape[1]), 7, np.float32)
    table[: rows.shape[0]] = rows
    return (table,)


CHAIN = Chain(scratch=(Scratch("table", "float32", (TABLE_ROWS, size("F")), None),),
              steps=(Step("fill_table", ("idx", "rows"), ("table",),
                          lambda dtypes: Kernel("fill", TextPtx(PTX), LAUNCH), reference=fill_table),
                     Step("apply_table", ("state", "idx", "table"), ("state",),
                          lambda dtypes: Kernel("apply", TextPtx(PTX), LAUNCH), reference=apply_table)))
OP = register(InplaceOp(
    namespace="unfilled_tests", name="sum_rows_",
    inputs=(TensorInput("state", ("float32",), 2), TensorInput("idx", ("int64",), 1),
            TensorInput("rows", ("float32",), 2)),
    mutates=("state",), sizes={"N": ("state", 0), "F": ("rows", 1), "B": ("idx", 0)}, chains=(CHAIN,),
    reference=reference,
), eager=sum_rows_, module=__name__)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return export_sum_rows(OP, tmp_path_factory.mktemp("unfilled") / "sum_rows.onnx")


def test_the_chain_is_two_plugin_nodes_and_no_fill_proved_step_by_step(exported, tmp_path, capsys):
    out, model = dry_run_sum_rows(exported, tmp_path, capsys)
    assert ("-> node_sum_rows_functional/fill_table + node_sum_rows_functional/apply_table (AOT plugins, in place)"
            in out)
    ops = [node.op_type for node in model.graph.node]
    assert "ConstantOfShape" not in ops and ops.index("fill_table") < ops.index("apply_table")
    fill = next(node for node in model.graph.node if node.op_type == "fill_table")
    apply = next(node for node in model.graph.node if node.op_type == "apply_table")
    assert list(fill.input) == ["idx", "rows"] and len(fill.output) == 1
    assert fill.output[0] == apply.input[2] and list(apply.output) == ["state_out"]


def test_write_chain_gives_the_created_table_its_dtype_and_recorded_dims():
    gs = pytest.importorskip("onnx_graphsurgeon", reason="onnx-graphsurgeon writes the nodes")
    from onnx_path.nodes import Builder, NameSource
    from onnx_path.own_ops import write_chain

    state = gs.Variable("state", np.float32, (20, 3))
    idx, rows = gs.Variable("idx", np.int64, ("B",)), gs.Variable("rows", np.float32, ("B", 3))
    out = gs.Variable("state_out", np.float32, (20, 3))
    graph = gs.Graph(inputs=[state, idx, rows], outputs=[out])
    build = Builder(gs, NameSource(graph), "call")
    written = write_chain(build, OP, {"state": state, "idx": idx, "rows": rows}, {"state": out})
    assert written.scratch == () and [node.op for node in build.nodes] == ["fill_table", "apply_table"]
    table = build.nodes[0].outputs[0]
    assert (table.name, table.dtype, list(table.shape)) == ("call/fill_table_table", np.float32, [None, 3])
    assert build.nodes[1].inputs[2] is table and build.nodes[1].outputs[0] is out


@pytest.mark.trt_bindings
def test_the_created_table_is_a_new_output_of_the_scratchs_dtype_and_shape(aot, symbolic):
    from inplace.aot import register_aot_op
    from tests.plugin.test_aot_plugin import aot_plugin_instance, evaluated, qdp_registry

    trt, trtp, _ = aot
    register_aot_op(OP)

    def desc(shape, dtype):
        exprs = tuple(trtp.ShapeExpr(symbolic.expr(n)) for n in shape)
        return trtp.from_shape_expr(trtp.ShapeExprs.from_tuple(exprs), dtype)

    definition = qdp_registry()["unfilled_tests::fill_table"]
    output = definition.register_func(desc((9,), trt.int64), desc((9, 3), trt.float32))
    assert output.dtype == trt.float32
    assert [evaluated(dim) for dim in output.shape_expr] == [11, 3]
    instance = aot_plugin_instance(trtp, definition, "fill_table", "unfilled_tests")
    assert instance.get_output_data_types([trt.int64, trt.float32], [1, 2]) == [trt.float32]
    assert instance.get_aliased_input(0) == -1


@pytest.mark.trt_bindings
@pytest.mark.parametrize("nodes, edges, features", [(10, 100, 64), (1000, 10**6, 3)])
def test_sort_count_creates_the_sorted_chains_unfilled_scratch_of_their_shapes(aot, symbolic, nodes, edges, features):
    """tile_sums [SORT_MAX_TILES], cursor [N + 1], sorted [E, 2] int32; head and tail [partials, F] float32; the
    kernel's PTX takes the three inputs, the extra arguments and the six outputs (NVRTC)."""
    from inplace.ptx import entry_parameters
    from plugin.scatter_add_op import sort_partials
    from tests.plugin.test_aot_plugin import evaluated, qdp_registry

    trt, trtp, _ = aot

    def desc(shape, dtype):
        exprs = tuple(trtp.ShapeExpr(symbolic.expr(n)) for n in shape)
        return trtp.from_shape_expr(trtp.ShapeExprs.from_tuple(exprs), dtype)

    definition = qdp_registry()["aliased_io::sort_count"]
    inputs = (desc((nodes, features), trt.float16), desc((edges,), trt.int64), desc((nodes, 1), trt.int64))
    outputs = definition.register_func(*inputs)
    got = [(out.dtype, [dim if isinstance(dim, int) else evaluated(dim) for dim in out.shape_expr])
           for out in outputs[1:]]
    partials = sort_partials().evaluate({"E": edges})
    assert got == [(trt.int32, [1024]), (trt.int32, [nodes + 1]), (trt.int32, [edges, 2]),
                   (trt.float32, [partials, features]), (trt.float32, [partials, features])]
    assert partials == (4 if edges == 100 else 4096)
    name, ptx, _, extra = definition.aot_impl_func(*inputs, outputs, 0)  # its PTX's parameters checked there
    assert name == "aot_sort_count" and len(entry_parameters(ptx, name)) == 3 + len(extra) + 6 == 12
