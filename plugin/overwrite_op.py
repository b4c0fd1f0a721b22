"""The row overwrite described once as TensorRT's AOT plugin runs it (inplace/spec.py InplaceOp): one step,
aliased_io::overwrite_rows, launching plugin/kernels/overwrite.cu's overwrite_rows_f32 / overwrite_rows_f16.

    OVERWRITE_ROWS   overwrite_rows_(state, src, index): state[index[e]] = src[e] in place, for every edge e

The kernel's parameters are TensorRT's AOT order already (state_in, src, index, int N, E, F, state_out; the
output's pointer is the state's). LAUNCH is the one launch rule of the overwrite: the AOT plugin hands it to
TensorRT, and the Python plugin (plugin/kernels/overwrite.py) reads its grid from it. Every run is O(E F):
nothing of size N, no scratch. Where an index repeats, which edge wins is undefined on the GPU (overwrite.cu);
the reference keeps the last, one of the winners the kernel may keep. Indices outside [0, N) are skipped.
"""

from collections.abc import Mapping
from typing import Any

from inplace.spec import Chain, InplaceOp, Kernel, Launch, Step, TensorInput, cdiv, expr, maximum, minimum, size
from plugin.scatter_add_op import NAMESPACE
from reference.gnn import scatter_overwrite_numpy

N, E, F = size("N"), size("E"), size("F")
THREADS_PER_BLOCK = 256  # overwrite.cu's OVERWRITE_THREADS
MAX_BLOCKS = 1 << 16  # the grid's cap: the kernel loops over its elements, so any grid covers any size
KERNEL_NAMES = {"float32": "overwrite_rows_f32", "float16": "overwrite_rows_f16"}  # by the state's dtype


class OverwritePtx:
    """overwrite.cu's PTX (both kernels) for the build's target: compute_90 where the engine is built on a Hopper
    or newer, else compute_75 (plugin.kernels.aot aot_target_arch, as the scatter-add's FamilyPtx), compiled by
    NVRTC once per target (plugin.kernels.aot compile_overwrite_ptx)."""

    def ptx(self, kernel: str, dtypes: Mapping[str, str]) -> bytes:
        from plugin.kernels.aot import aot_target_arch, compile_overwrite_ptx

        return compile_overwrite_ptx(aot_target_arch())


PTX = OverwritePtx()
# A thread per element of the E rows (the kernel copies up to 16 bytes per thread, so at least a thread per word),
# at most MAX_BLOCKS blocks (the kernel loops beyond) and at least one (E = 0 is a valid, empty launch).
LAUNCH = Launch(grid=(maximum(minimum(cdiv(E * F, THREADS_PER_BLOCK), MAX_BLOCKS), 1), expr(1), expr(1)),
                block=(THREADS_PER_BLOCK, 1, 1), extra_args=(N, E, F))
KERNELS = {dtype: Kernel(name, PTX, LAUNCH) for dtype, name in KERNEL_NAMES.items()}


def reference(state: Any, src: Any, index: Any) -> tuple[Any, ...]:
    """(the state after `state[index[e]] = src[e]` for e in order,): rows copied exactly in the state's dtype (no
    float64), the last edge winning where an index repeats, indices outside [0, N) skipped
    (reference.gnn.scatter_overwrite_numpy)."""
    return (scatter_overwrite_numpy(state, src, index),)


def kernel(dtypes: Mapping[str, str]) -> Kernel:
    """The kernel of the state's dtype; ValueError where src has another (the kernel copies rows bit for bit)."""
    state = dtypes["state"]
    if dtypes.get("src", state) != state:
        raise ValueError(f"src is {dtypes['src']}: the overwrite copies rows of the state's dtype, {state}")
    return KERNELS[state]


STEP = Step(f"{NAMESPACE}::overwrite_rows", ("state", "src", "index"), ("state",), kernel)

OVERWRITE_ROWS = InplaceOp(
    namespace=NAMESPACE, name="overwrite_rows_",
    inputs=(TensorInput("state", ("float32", "float16"), 2), TensorInput("src", ("float32", "float16"), 2),
            TensorInput("index", ("int64",), 1)),
    mutates=("state",), sizes={"N": ("state", 0), "F": ("state", 1), "E": ("index", 0)},
    chains=(Chain((STEP,)),), reference=reference)
