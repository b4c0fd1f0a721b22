"""The scatter-add plugin's rules as plain functions: tensor positions, data types, formats, shapes, aliasing.

The TensorRT plugin class (plugin.scatter_add_plugin) turns TensorRT's descriptors into numpy dtypes, shape
tuples and booleans and asks these functions, so every rule runs and is tested without TensorRT.

Plugin I/O (positions as TensorRT numbers them: inputs first, then outputs):
    0 state  [N, F] float32 or float16   (read and written: output 0 aliases it)
    1 src    [E, F] same dtype as state  (row e is added into state[index[e]])
    2 index  [E]    int64
    3 aggregated [N, F] same dtype as state  (output 0, the same memory as input 0)
    4 counts     [N, 1] int64                (output 1, in-edges per node)
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

STATE, SOURCE, INDEX = 0, 1, 2
NUM_INPUTS = 3
AGGREGATED, COUNTS = 0, 1
NUM_OUTPUTS = 2

FEATURE_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))
INDEX_DTYPE = np.dtype(np.int64)
COUNTS_DTYPE = np.dtype(np.int64)


def supports_combination(pos: int, dtypes: Sequence[np.dtype | None], linear: Sequence[bool]) -> bool:
    """Whether the plugin accepts the data type and format at `pos`, given the choices at positions before it.

    `dtypes[i]` is the numpy dtype TensorRT proposes for position i (None for a type numpy lacks, e.g. int8),
    `linear[i]` whether its format is LINEAR. TensorRT asks about one position at a time and has fixed the
    positions before it, so a rule may only look back: position 0 picks the feature dtype, the others follow it.
    """
    if pos < 0 or pos >= NUM_INPUTS + NUM_OUTPUTS or len(dtypes) != NUM_INPUTS + NUM_OUTPUTS:
        return False
    if not linear[pos]:
        return False
    dtype = dtypes[pos]
    if pos == STATE:
        return dtype in FEATURE_DTYPES
    if pos in (SOURCE, NUM_INPUTS + AGGREGATED):
        return dtype == dtypes[STATE]
    if pos == INDEX:
        return dtype == INDEX_DTYPE
    return dtype == COUNTS_DTYPE  # pos == NUM_INPUTS + COUNTS


def output_dtypes(input_dtypes: Sequence[np.dtype | None]) -> list[np.dtype]:
    """Data types of (aggregated, counts) for the given input types; ValueError names an unsupported input."""
    if len(input_dtypes) != NUM_INPUTS:
        raise ValueError(f"the scatter-add plugin takes {NUM_INPUTS} inputs (state, src, index), got {len(input_dtypes)}")
    state, src, index = input_dtypes
    if state not in FEATURE_DTYPES:
        raise ValueError(f"the state (input 0) must be float32 or float16, got {state}")
    if src != state:
        raise ValueError(f"src (input 1) must have the state's dtype {state}, got {src}")
    if index != INDEX_DTYPE:
        raise ValueError(f"index (input 2) must be int64, got {index}")
    return [state, COUNTS_DTYPE]


def aliased_input(output_index: int) -> int:
    """The input that an output shares memory with: output 0 (aggregated) is input 0 (state); -1 for none."""
    return STATE if output_index == AGGREGATED else -1


@dataclass(frozen=True)
class LaunchSizes:
    """The sizes the kernel needs: N nodes (state rows), E edges (src rows and index entries), F features."""

    num_nodes: int
    num_edges: int
    num_features: int


def check_input_ranks(shapes: Sequence[Sequence[int]]) -> None:
    """Checks ranks and the feature dimension of (state, src, index); -1 (unknown at build time) always fits."""
    if len(shapes) != NUM_INPUTS:
        raise ValueError(f"the scatter-add plugin takes {NUM_INPUTS} inputs (state, src, index), got {len(shapes)}")
    state, src, index = (tuple(shape) for shape in shapes)
    if len(state) != 2 or len(src) != 2 or len(index) != 1:
        raise ValueError(f"expected state [N, F], src [E, F], index [E]; got shapes {state}, {src}, {index}")
    if -1 not in (state[1], src[1]) and state[1] != src[1]:
        raise ValueError(f"state and src must have the same number of features, got {state[1]} and {src[1]}")
    if -1 not in (src[0], index[0]) and src[0] != index[0]:
        raise ValueError(f"src and index must have the same number of edges, got {src[0]} and {index[0]}")


def launch_sizes(shapes: Sequence[Sequence[int]]) -> LaunchSizes:
    """N, E and F from the concrete shapes of (state, src, index); ValueError when they do not fit together."""
    check_input_ranks(shapes)
    (num_nodes, num_features), (num_edges, _), _ = shapes
    if min(num_nodes, num_features, num_edges) < 0:
        raise ValueError(f"shapes must be concrete at run time, got {[tuple(shape) for shape in shapes]}")
    return LaunchSizes(num_nodes=int(num_nodes), num_edges=int(num_edges), num_features=int(num_features))


def state_nbytes(sizes: LaunchSizes, dtype: np.dtype) -> int:
    """Bytes of the state [N, F]: what enqueue copies when TensorRT gives the output its own buffer."""
    return sizes.num_nodes * sizes.num_features * np.dtype(dtype).itemsize
