"""An exponential moving average of selected rows, in place: state[idx] = alpha * state[idx] + (1 - alpha) * rows.

    import inplace.examples.ema                        # registers the op (and torch.ops.examples.ema_rows_)
    torch.ops.examples.ema_rows_(state, idx, rows, alpha)     # returns None; state changed in place

state [N, F] float32 or float16, idx [B] int64 (distinct rows: where an index repeats, one of its updates wins),
rows [B, F] of the state's dtype, alpha [1] float32 (a tensor: TensorRT passes a kernel int32 scalars only).
The kernel is Triton's (inplace/examples/triton_kernels.py: ema_rows), one element per thread.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from inplace.ptx import TritonSource
from inplace.registry import register
from inplace.spec import Chain, InplaceOp, Kernel, Launch, Step, TensorInput, cdiv, expr, maximum, size

BLOCK = 512
SOURCE = TritonSource("inplace.examples.triton_kernels:ema_rows",
                      pointers={"state": "state", "idx": "idx", "rows": "rows", "alpha": "alpha",
                                "state_out": "state"},
                      constexprs={"BLOCK": BLOCK}, num_warps=4)
LAUNCH = Launch(grid=(maximum(cdiv(size("B") * size("F"), BLOCK), 1), expr(1), expr(1)),
                block=SOURCE.block, extra_args=(size("N"), size("B"), size("F")))


def kernel(dtypes: Mapping[str, str]) -> Kernel:
    if dtypes["rows"] != dtypes["state"] or dtypes["alpha"] != "float32":
        raise ValueError("rows must have the state's dtype and alpha be float32")
    return Kernel("ema_rows", SOURCE, LAUNCH)


def reference(state: np.ndarray, idx: np.ndarray, rows: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray]:
    """float64: the new state (the last of repeated indices wins, one of the outcomes the kernel may give)."""
    new = state.astype(np.float64)
    a = float(np.asarray(alpha, np.float64).reshape(-1)[0])
    new[idx] = a * new[idx] + (1.0 - a) * rows.astype(np.float64)
    return (new,)


def ema_rows_(state: Any, idx: Any, rows: Any, alpha: Any) -> None:
    """The eager implementation (torch): the user's own, whatever it is (here torch's indexing)."""
    a = alpha.to(state.dtype)
    state[idx] = a * state[idx] + (1 - a) * rows


OP = register(InplaceOp(
    namespace="examples", name="ema_rows_",
    inputs=(TensorInput("state", ("float32", "float16"), 2), TensorInput("idx", ("int64",), 1),
            TensorInput("rows", ("float32", "float16"), 2), TensorInput("alpha", ("float32",), 1)),
    mutates=("state",),
    sizes={"N": ("state", 0), "F": ("state", 1), "B": ("idx", 0)},
    chains=(Chain(steps=(Step("ema_rows", inputs=("state", "idx", "rows", "alpha"), outputs=("state",),
                              kernel=kernel),)),),
    reference=reference,
), eager=ema_rows_)
