"""An update that also returns a small tensor computed from the state: an aliased output and a new one (Triton).

    import inplace.examples.accumulate
    norms = torch.ops.examples.accumulate_rows_(state, idx, delta)   # state changed in place

state [N, F] float32, idx [B] int64 (distinct rows), delta [B, F] float32: state[idx[b]] += delta[b], and
norms [B] float32 is the L2 norm of each updated row. One Triton program per batch row
(inplace/examples/triton_kernels.py: accumulate_rows), so the work follows B F, not N F.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from inplace.ptx import TritonSource
from inplace.registry import register
from inplace.spec import Chain, InplaceOp, Kernel, Launch, Step, TensorInput, TensorOutput, expr, maximum, size

BLOCK = 128
SOURCE = TritonSource("inplace.examples.triton_kernels:accumulate_rows",
                      pointers={"state": "state", "idx": "idx", "delta": "delta", "state_out": "state",
                                "norms_out": "norms"},
                      constexprs={"BLOCK": BLOCK}, num_warps=4)
LAUNCH = Launch(grid=(maximum(size("B"), 1), expr(1), expr(1)), block=SOURCE.block,
                extra_args=(size("N"), size("B"), size("F")))


def kernel(dtypes: Mapping[str, str]) -> Kernel:
    return Kernel("accumulate_rows", SOURCE, LAUNCH)


def reference(state: np.ndarray, idx: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64: the new state and the norms of the updated rows."""
    new = state.astype(np.float64)
    np.add.at(new, idx, delta.astype(np.float64))
    return new, np.sqrt((new[idx] ** 2).sum(axis=1))


def accumulate_rows_(state: Any, idx: Any, delta: Any) -> Any:
    """The eager implementation (torch): returns the norms, a new tensor."""
    state.index_add_(0, idx, delta)
    return state[idx].norm(dim=1)


OP = register(InplaceOp(
    namespace="examples", name="accumulate_rows_",
    inputs=(TensorInput("state", ("float32",), 2), TensorInput("idx", ("int64",), 1),
            TensorInput("delta", ("float32",), 2)),
    mutates=("state",),
    returns=(TensorOutput("norms", "float32", (size("B"),)),),
    sizes={"N": ("state", 0), "F": ("state", 1), "B": ("idx", 0)},
    chains=(Chain(steps=(Step("accumulate_rows", inputs=("state", "idx", "delta"), outputs=("state", "norms"),
                              kernel=kernel),)),),
    reference=reference,
), eager=accumulate_rows_)
