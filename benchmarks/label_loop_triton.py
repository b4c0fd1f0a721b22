"""A label-loop scatter-add in Triton, in the style of the project's seed kernel, for comparison only.

Each program takes a block of edges and loops over every node label n, summing the block's values whose
target is n and adding that sum (and the count) atomically: O(E * N / BLOCK) iterations, fine for a handful of
labels and hopeless for many. Single feature (F = 1); sums in float32.
"""

from typing import Any


def label_loop_scatter_add(state: Any, src: Any, index: Any, counts: Any, block: int = 1024) -> None:
    """state[:, 0] += scatter of src[:, 0] by index; counts[:, 0] = degree (both float32/int32 here)."""
    import triton

    num_edges, num_nodes = index.shape[0], state.shape[0]
    grid = (triton.cdiv(num_edges, block),)
    counts.zero_()
    _kernel()[grid](src, index, state, counts, num_edges, num_nodes, BLOCK=block)


_compiled: list[Any] = []


def _kernel() -> Any:
    if _compiled:
        return _compiled[0]
    import triton
    import triton.language as tl

    @triton.jit
    def label_loop_kernel(src_ptr, index_ptr, state_ptr, counts_ptr, num_edges, num_nodes, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        valid = offsets < num_edges
        targets = tl.load(index_ptr + offsets, mask=valid, other=-1)
        values = tl.load(src_ptr + offsets, mask=valid, other=0.0).to(tl.float32)
        for label in range(0, num_nodes):
            selected = targets == label
            total = tl.sum(tl.where(selected, values, 0.0), axis=0)
            count = tl.sum(selected.to(tl.int32), axis=0)
            tl.atomic_add(state_ptr + label, total, mask=count > 0)
            tl.atomic_add(counts_ptr + label, count, mask=count > 0)

    _compiled.append(label_loop_kernel)
    return label_loop_kernel
