"""The scatter-add CUDA kernel: CUDA C in scatter_add.cu, compiled at run time by NVRTC, launched through
cuda-python's driver API. Importing this package needs no GPU; cuda-python is imported inside the functions.

    scatter_add_workspace_size(num_nodes, num_edges, num_features, dtype, with_counts=True) -> bytes
    scatter_add_launch(*, state, src, index, counts, num_nodes, num_edges, num_features, dtype, stream,
                       workspace=0, workspace_size=0, skipped=0)   device pointers as ints, async on stream
    PreparedScatterAdd(num_nodes=..., ..., with_counts=...)(state, src, index, counts, workspace, stream)
                                       the same launch with the plan and kernel arguments made once per shape
    prepare_kernels(dtype)             compile + load for the current CUDA context (cached), outside enqueue
    compile_scatter_add(arch, dtype)   the CUBIN for sm_<arch> (cached)
    scatter_add_numpy(state, src, index, return_skipped=False) -> (new_state, counts[, skipped])

plan.py documents which kernel runs when; docs/kernel.md and BENCHMARKS.md the rest.
"""

from common.cuda_check import CudaError, NvrtcError
from plugin.kernels.compile import compile_scatter_add
from plugin.kernels.host import scatter_add_numpy
from plugin.kernels.launch import PreparedScatterAdd, prepare_kernels, scatter_add_launch
from plugin.kernels.plan import workspace_size as scatter_add_workspace_size

__all__ = [
    "CudaError",
    "NvrtcError",
    "PreparedScatterAdd",
    "compile_scatter_add",
    "prepare_kernels",
    "scatter_add_launch",
    "scatter_add_numpy",
    "scatter_add_workspace_size",
]
