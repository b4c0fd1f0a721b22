"""A chain of two steps with a scratch tensor (what the project's float16 scatter-add needs), on a small op of the
test's own: `sum_rows_(state, idx, rows)` adds rows into state[idx] through a table the network makes (a
ConstantOfShape over cdiv(B, 2) * 2 + 1 rows, its shape an ONNX expression of idx's length), filled by step one
and applied by step two. The rewrite writes the fill and both plugin nodes, ONNX Runtime runs each step by its
Step.reference against torch eager on the original, and each step registers through tensorrt.plugin with the
table's sizes read from the table itself (trt_bindings)."""

import numpy as np
import pytest

from inplace.registry import register
from inplace.spec import Chain, InplaceOp, Kernel, Launch, Scratch, Step, TensorInput, cdiv, expr, size
from tests.support.own_ops import TextPtx, dry_run_sum_rows, export_sum_rows

TABLE_ROWS = cdiv(size("B"), 2) * 2 + 1


PTX = """.version 8.0
.target sm_75
.address_size 64
.visible .entry fill(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 d, .param .u64 e)
{ ret; }
.visible .entry apply(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 d, .param .u64 e)
{ ret; }
"""


def fill_table(idx, rows, table):
    table = table.astype(np.float64)
    table[: rows.shape[0]] = rows
    return (table.astype(np.float32),)


def apply_table(state, idx, table):
    total = state.astype(np.float64)
    np.add.at(total, idx, table[: idx.shape[0]].astype(np.float64))
    return (total.astype(state.dtype),)


def reference(state, idx, rows):
    total = state.astype(np.float64)
    np.add.at(total, idx, rows.astype(np.float64))
    return (total,)


def sum_rows_(state, idx, rows):
    state.index_add_(0, idx, rows)


LAUNCH = Launch(grid=(cdiv(size("B"), 128) + 1, expr(1), expr(1)), block=(128, 1, 1), extra_args=(size("B"),))
OP = register(InplaceOp(
    namespace="chain_tests", name="sum_rows_",
    inputs=(TensorInput("state", ("float32",), 2), TensorInput("idx", ("int64",), 1),
            TensorInput("rows", ("float32",), 2)),
    mutates=("state",), sizes={"N": ("state", 0), "F": ("state", 1), "B": ("idx", 0)},
    chains=(Chain(scratch=(Scratch("table", "float32", (TABLE_ROWS, size("F"))),),
                  steps=(Step("fill_table", ("idx", "rows", "table"), ("table",),
                              lambda dtypes: Kernel("fill", TextPtx(PTX), LAUNCH), reference=fill_table),
                         Step("apply_table", ("state", "idx", "table"), ("state",),
                              lambda dtypes: Kernel("apply", TextPtx(PTX), LAUNCH), reference=apply_table))),),
    reference=reference,
), eager=sum_rows_, module=__name__)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return export_sum_rows(OP, tmp_path_factory.mktemp("chain") / "sum_rows.onnx")


def test_the_chain_is_a_fill_and_two_plugin_nodes_proved_step_by_step(exported, tmp_path, capsys):
    out, model = dry_run_sum_rows(exported, tmp_path, capsys)
    assert "-> node_sum_rows_functional/fill_table + node_sum_rows_functional/apply_table after 1 scratch fill(s)" in out
    ops = [node.op_type for node in model.graph.node]
    assert ops.index("ConstantOfShape") < ops.index("fill_table") < ops.index("apply_table")
    fill = next(node for node in model.graph.node if node.op_type == "fill_table")
    apply = next(node for node in model.graph.node if node.op_type == "apply_table")
    assert fill.output[0] == apply.input[2] and list(apply.output) == ["state_out"]


def test_the_tables_shape_expression_evaluates_in_onnx_runtime(exported, tmp_path):
    """The ConstantOfShape's shape is cdiv(B, 2) * 2 + 1 by F, computed by ONNX nodes from idx's length."""
    import onnx

    from onnx_path.rewrite import rewrite_model
    from onnx_path.runtime import RewrittenSession

    rewritten = rewrite_model(onnx.load(str(exported))).model
    fill = next(node for node in rewritten.graph.node if node.op_type == "ConstantOfShape")
    rewritten.graph.output.append(onnx.helper.make_tensor_value_info(fill.output[0], onnx.TensorProto.FLOAT, None))
    session = RewrittenSession(rewritten)
    for batch in (1, 2, 7):
        feeds = {"state": np.zeros((20, 3), np.float32), "idx": np.zeros(batch, np.int64),
                 "rows": np.ones((batch, 3), np.float32)}
        assert session.run(feeds)[fill.output[0]].shape == (-(-batch // 2) * 2 + 1, 3)


@pytest.mark.trt_bindings
def test_each_step_registers_with_the_tables_sizes_read_from_the_table(aot, symbolic):
    """fill_table reads no input that op.sizes names for F: it finds F (and nothing else) in the table's shape;
    its output is the table's memory; the launch is evaluated on TensorRT's sizes."""
    from inplace.aot import register_aot_op
    from inplace.checks import step_size_sources
    from tests.plugin.test_aot_plugin import aot_plugin_instance, evaluated, qdp_registry

    trt, trtp, _ = aot
    register_aot_op(OP)
    chain = OP.chains[0]
    assert step_size_sources(OP, chain, chain.steps[0]) == {"B": ("idx", 0), "F": ("table", 1)}

    def desc(shape, dtype):
        exprs = tuple(trtp.ShapeExpr(symbolic.expr(n)) for n in shape)
        return trtp.from_shape_expr(trtp.ShapeExprs.from_tuple(exprs), dtype)

    inputs = (desc((9,), trt.int64), desc((9, 3), trt.float32), desc((11, 3), trt.float32))
    definition = qdp_registry()["chain_tests::fill_table"]
    output = definition.register_func(*inputs)
    instance = aot_plugin_instance(trtp, definition, "fill_table", "chain_tests")
    assert instance.get_output_data_types([trt.int64, trt.float32, trt.float32], [1, 2, 2]) == [trt.float32]
    assert instance.get_aliased_input(0) == 2
    name, ptx, launch, extra = definition.aot_impl_func(*inputs, (output,), 0)
    assert name == "fill" and ptx == PTX.encode()
    assert evaluated(launch.grid_x) == -(-9 // 128) + 1 and [evaluated(arg) for arg in extra] == [9]


from tests.plugin.test_aot_plugin import aot, symbolic  # noqa: E402,F401 (fixtures)
