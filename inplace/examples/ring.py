"""A ring-buffer write that advances its position: two mutated inputs, a CUDA C kernel (NVRTC).

    import inplace.examples.ring
    torch.ops.examples.ring_write_(buffer, pos, rows)   # None; buffer and pos changed in place

buffer [C, F] float32 or float16, pos [1] int64, rows [B, F] of the buffer's dtype: row b goes to slot
(pos + b) mod C (the last C rows where B > C), then pos becomes (pos + B) mod C. The kernel is
inplace/examples/ring.cu, one block of 256 threads (the write costs in proportion to B F, never to C).
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from inplace.ptx import CudaSource
from inplace.registry import register
from inplace.spec import Chain, InplaceOp, Kernel, Launch, Step, TensorInput, expr, size

SOURCE = CudaSource(Path(__file__).with_name("ring.cu"))
LAUNCH = Launch(grid=(expr(1), expr(1), expr(1)), block=(256, 1, 1), extra_args=(size("C"), size("F"), size("B")))
KERNELS = {"float32": "ring_write_f32", "float16": "ring_write_f16"}


def kernel(dtypes: Mapping[str, str]) -> Kernel:
    if dtypes["rows"] != dtypes["buffer"]:
        raise ValueError("rows must have the buffer's dtype")
    return Kernel(KERNELS[dtypes["buffer"]], SOURCE, LAUNCH)


def reference(buffer: np.ndarray, pos: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 buffer and int64 pos after the write (sequential: a later row wins its slot)."""
    new = buffer.astype(np.float64)
    capacity, count = buffer.shape[0], rows.shape[0]
    if capacity == 0:
        return new, pos.copy()
    start = int(pos[0]) % capacity
    for b in range(count):
        new[(start + b) % capacity] = rows[b]
    return new, np.array([(start + count) % capacity], np.int64)


def ring_write_(buffer: Any, pos: Any, rows: Any) -> None:
    """The eager implementation (torch)."""
    import torch

    capacity, count = buffer.shape[0], rows.shape[0]
    if capacity == 0:
        return
    start = pos % capacity
    first = max(count - capacity, 0)
    slots = (start + torch.arange(first, count, device=buffer.device)) % capacity
    buffer[slots] = rows[first:]
    pos.copy_((start + count) % capacity)


OP = register(InplaceOp(
    namespace="examples", name="ring_write_",
    inputs=(TensorInput("buffer", ("float32", "float16"), 2), TensorInput("pos", ("int64",), 1),
            TensorInput("rows", ("float32", "float16"), 2)),
    mutates=("buffer", "pos"),
    sizes={"C": ("buffer", 0), "F": ("buffer", 1), "B": ("rows", 0)},
    chains=(Chain(steps=(Step("ring_write", inputs=("buffer", "pos", "rows"), outputs=("buffer", "pos"),
                              kernel=kernel),)),),
    reference=reference,
), eager=ring_write_)
