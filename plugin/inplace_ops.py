"""The project's own in-place operations, registered with the in-place facility (inplace/) for their chains:

    PROJECT_OPS    plugin/scatter_add_op.py's SCATTER_ADD and SCATTER_ADD_COUNTS, plugin/overwrite_op.py's
                   OVERWRITE_ROWS

Importing this module registers them (inplace.registry.register_chains), so that the stages that serve a user's
op serve these too: the ONNX rewrite writes their chains' step nodes (onnx_path/own_ops.write_chain), ONNX
Runtime computes those nodes (registry.node_outputs), TensorRT's ONNX parser finds their AOT plugins
(registry.register_aot_plugins). Their custom node is the Python plugin's ScatterAddInPlace, not the
facility's, so rewrite_calls leaves it to onnx_path/rewrite.py. Plain Python and numpy: no torch, onnx or
TensorRT.
"""

from inplace.registry import register_chains
from inplace.spec import InplaceOp
from plugin.overwrite_op import OVERWRITE_ROWS
from plugin.scatter_add_op import SCATTER_ADD, SCATTER_ADD_COUNTS

PROJECT_OPS: tuple[InplaceOp, ...] = (SCATTER_ADD, SCATTER_ADD_COUNTS, OVERWRITE_ROWS)

for _op in PROJECT_OPS:
    register_chains(_op, __name__)


def is_overwrite(op: InplaceOp) -> bool:
    """Whether `op` writes rows rather than adding them (OVERWRITE_ROWS)."""
    return op is OVERWRITE_ROWS


def is_project_op(op: InplaceOp) -> bool:
    return any(op is project for project in PROJECT_OPS)
