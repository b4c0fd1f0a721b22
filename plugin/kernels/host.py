"""Host convenience: scatter-add on numpy arrays (allocate, copy in, launch, wait, copy out, free).

For tests, benchmarks and users who want the kernel without TensorRT. Each call allocates and frees; the
plugin and anyone who keeps data on the GPU call scatter_add_launch with their own buffers instead.
"""

from typing import Any

import numpy as np

from common.cuda_check import check
from plugin.device_array import DeviceArray
from plugin.kernels.compile import kernel_dtype
from plugin.kernels.launch import current_context, scatter_add_launch
from plugin.kernels.plan import workspace_size


def check_host_arrays(state: Any, src: Any, index: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """state [N, F] (or [N]), src [E, F] (or [E]) of one dtype, float32 or float16; index [E] of integers.

    Returns them as contiguous arrays (index as int64); ValueError naming the mismatch otherwise.
    """
    state = np.ascontiguousarray(state)
    src = np.ascontiguousarray(src)
    index = np.ascontiguousarray(index)
    dtype = kernel_dtype(state.dtype)
    if src.dtype != dtype:
        raise ValueError(f"src dtype {src.dtype} differs from state dtype {dtype}")
    if state.ndim not in (1, 2) or src.ndim != state.ndim:
        raise ValueError(f"state and src must both be [N, F] or both [N]; got shapes {state.shape} and {src.shape}")
    if state.ndim == 2 and src.shape[1] != state.shape[1]:
        raise ValueError(f"src has {src.shape[1]} features per row, state has {state.shape[1]}")
    if state.ndim == 2 and state.shape[1] == 0:
        raise ValueError("state must have at least one feature per row")
    if index.ndim != 1 or index.shape[0] != src.shape[0]:
        raise ValueError(f"index must be 1-D with one entry per src row ({src.shape[0]}); got shape {index.shape}")
    if index.size and not np.issubdtype(index.dtype, np.integer):
        raise ValueError(f"index must hold integers, got {index.dtype}")
    return state, src, index.astype(np.int64, copy=False)


def scatter_add_numpy(
    state: Any,
    src: Any,
    index: Any,
    return_skipped: bool = False,
    *,
    with_counts: bool = True,
    algorithm: str = "auto",
    paired: bool | None = None,
) -> tuple[Any, ...]:
    """(state + scatter of src rows by index, counts int64 [N, 1]) computed on the GPU; inputs are not changed.

    With return_skipped=True also returns the number of index values outside [0, N) (those rows are
    ignored). with_counts=False launches without counts (returns None for them); `algorithm` and `paired` pick
    a kernel variant as in scatter_add_launch.
    """
    from cuda.bindings import driver

    state, src, index = check_host_arrays(state, src, index)
    num_nodes, num_edges = state.shape[0], src.shape[0]
    num_features = state.shape[1] if state.ndim == 2 else 1
    current_context()
    buffers: list[DeviceArray] = []

    def device(array_or_shape: Any, dtype: Any = None) -> DeviceArray:
        buffer = DeviceArray.from_array(array_or_shape) if dtype is None else DeviceArray(array_or_shape, dtype)
        buffers.append(buffer)
        return buffer

    stream = None
    try:
        state_d, src_d, index_d = device(state), device(src), device(index)
        counts_d = device((num_nodes, 1), np.int64) if with_counts else None
        skipped_d = device((1,), np.uint64)
        size = workspace_size(num_nodes, num_edges, num_features, state.dtype, with_counts=with_counts,
                              algorithm=algorithm)
        workspace_d = device((size,), np.uint8) if size else None
        stream = check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))
        scatter_add_launch(
            state=state_d.ptr,
            src=src_d.ptr,
            index=index_d.ptr,
            counts=counts_d.ptr if counts_d else 0,
            num_nodes=num_nodes,
            num_edges=num_edges,
            num_features=num_features,
            dtype=state.dtype,
            stream=int(stream),
            workspace=workspace_d.ptr if workspace_d else 0,
            workspace_size=size,
            skipped=skipped_d.ptr,
            algorithm=algorithm,
            paired=paired,
        )
        check(driver.cuStreamSynchronize(stream))
        result: tuple[Any, ...] = (state_d.download(), counts_d.download() if counts_d else None)
        if return_skipped:
            result += (int(skipped_d.download()[0]),)
        return result
    finally:
        if stream is not None:
            check(driver.cuStreamDestroy(stream))
        for buffer in buffers:
            buffer.free()
