"""The scatter-add plugin's rules as plain functions: its name, tensor positions, data types, formats, shapes,
and its fields, compute_counts and overwrite.

The TensorRT plugin class (plugin.scatter_add_plugin) turns TensorRT's descriptors into numpy dtypes, shape
tuples and booleans and asks these functions, so every rule runs and is tested without TensorRT.

Plugin I/O (positions as TensorRT numbers them: inputs first, then outputs):
    0 state  [N, F] float32 or float16   (read and written: output 0 aliases it)
    1 src    [E, F] same dtype as state  (row e is added into state[index[e]])
    2 index  [E]    int64
    3 aggregated [N, F] same dtype as state  (output 0, the same memory as input 0)
    4 counts     [N, 1] int64                (output 1, in-edges per node; only with compute_counts)

compute_counts (plugin field "compute_counts", int32 0 or 1, default 1) says whether the plugin has the counts
output. Computing counts zeroes N int64 values on every execution, O(N) whatever the update's size, so a
network that does not use counts (the state-update network of --steps) builds the plugin with 0: then it has
one output and each execution costs in proportion to the update (E rows), not to the state.

overwrite (plugin field "overwrite", int32 0 or 1, default 0) makes the plugin write rows instead of adding them:
state[index[e]] = src[e]; where an index repeats, which of its edges wins is undefined, as in ONNX and torch
(docs/overwrite.md). It has one output (aggregated, input 0's memory), so it needs compute_counts 0.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

# The creator's name, version and namespace: what TensorRT's registry, a serialized engine and an ONNX node
# (onnx_path/nodes.py: op_type, plugin_version, plugin_namespace) find the plugin by.
PLUGIN_NAME = "ScatterAddInPlace"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = ""

STATE, SOURCE, INDEX = 0, 1, 2
NUM_INPUTS = 3
AGGREGATED, COUNTS = 0, 1

FEATURE_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))
INDEX_DTYPE = np.dtype(np.int64)
COUNTS_DTYPE = np.dtype(np.int64)

COMPUTE_COUNTS_FIELD = "compute_counts"
OVERWRITE_FIELD = "overwrite"
FIELD_NAMES = (COMPUTE_COUNTS_FIELD, OVERWRITE_FIELD)
FIELD_DTYPE = np.dtype(np.int32)  # every field is one int32 (PluginFieldType.INT32)
DEFAULT_COMPUTE_COUNTS = True  # also what an engine serialized before the field existed gets back
DEFAULT_OVERWRITE = False  # add rows; also what an engine serialized before the field existed gets back


def _as_flag(value: object, name: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
        return bool(value)
    if isinstance(value, (int, np.integer, float, np.floating)):
        shown = str(value.item() if isinstance(value, np.generic) else value)  # 7, not np.int64(7)
    else:
        shown = repr(value)
    raise ValueError(f"{name} must be 0 or 1, got {shown}")


def as_compute_counts(value: object) -> bool:
    """compute_counts as a bool from True/False or the integers 0/1; ValueError for anything else."""
    return _as_flag(value, COMPUTE_COUNTS_FIELD)


def as_overwrite(value: object) -> bool:
    """overwrite as a bool from True/False or the integers 0/1; ValueError for anything else."""
    return _as_flag(value, OVERWRITE_FIELD)


def check_overwrite(*, overwrite: bool, compute_counts: bool) -> None:
    """ValueError for overwrite with counts: an overwrite has one output (the state), so it needs compute_counts 0."""
    if overwrite and compute_counts:
        raise ValueError(f"{OVERWRITE_FIELD}=1 writes rows and has no counts output: it needs {COMPUTE_COUNTS_FIELD}=0, "
                         f"got {COMPUTE_COUNTS_FIELD}=1")


def num_outputs(*, compute_counts: bool) -> int:
    """aggregated, plus counts when the plugin computes them."""
    return 2 if compute_counts else 1


def supports_combination(
    pos: int, dtypes: Sequence[np.dtype | None], linear: Sequence[bool], *, num_io: int, compute_counts: bool
) -> bool:
    """Whether the plugin accepts the data type and format at `pos`, given the choices at positions before it.

    TensorRT asks about one position at a time and has fixed only the positions up to `pos`: what it passes
    for later positions is undefined, so the caller hands over positions 0..pos only. `dtypes[i]` is the numpy
    dtype TensorRT proposes for position i (None for a type numpy lacks, e.g. int8), `linear[i]` whether its
    format is LINEAR; `num_io` is how many descriptors TensorRT passed (3 inputs and num_outputs outputs).
    Position 0 picks the feature dtype, the others follow it.
    """
    total = NUM_INPUTS + num_outputs(compute_counts=compute_counts)
    if num_io != total or pos < 0 or pos >= total or len(dtypes) != pos + 1 or len(linear) != pos + 1:
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


def output_dtypes(input_dtypes: Sequence[np.dtype | None], *, compute_counts: bool) -> list[np.dtype]:
    """Data types of (aggregated, counts), or of (aggregated,) without counts, for the given input types;
    ValueError names an unsupported input."""
    if len(input_dtypes) != NUM_INPUTS:
        raise ValueError(f"the scatter-add plugin takes {NUM_INPUTS} inputs (state, src, index), got {len(input_dtypes)}")
    state, src, index = input_dtypes
    if state not in FEATURE_DTYPES:
        raise ValueError(f"the state (input 0) must be float32 or float16, got {state}")
    if src != state:
        raise ValueError(f"src (input 1) must have the state's dtype {state}, got {src}")
    if index != INDEX_DTYPE:
        raise ValueError(f"index (input 2) must be int64, got {index}")
    return [state, COUNTS_DTYPE] if compute_counts else [state]


Dim = TypeVar("Dim")


def output_shapes(num_nodes: Dim, num_features: Dim, one: Dim, *, compute_counts: bool) -> list[list[Dim]]:
    """Shapes of (aggregated [N, F], counts [N, 1]), or of (aggregated,) without counts.

    The dimensions are whatever the caller computes with: TensorRT's symbolic expressions (the state's N and F,
    and `one` = the constant 1) in get_output_shapes, plain ints in tests.
    """
    shapes = [[num_nodes, num_features], [num_nodes, one]]
    return shapes[: num_outputs(compute_counts=compute_counts)]


def check_field_names(names: Sequence[str]) -> None:
    """ValueError for a field name the plugin does not know, or one given twice."""
    unknown = [name for name in names if name not in FIELD_NAMES]
    if unknown:
        raise ValueError(f"unknown plugin field(s) {unknown}; the scatter-add plugin takes only {list(FIELD_NAMES)}")
    repeated = sorted(name for name, count in Counter(names).items() if count > 1)
    if repeated:
        raise ValueError(f"plugin field(s) {repeated} given more than once")


def _one_int32(fields: Mapping[str, np.ndarray], name: str, allowed: str) -> int:
    values = np.asarray(fields[name])
    if values.dtype != FIELD_DTYPE or values.shape != (1,):
        raise ValueError(f"{name} must be one int32 value ({allowed}), got {values.size} value(s) of type {values.dtype}")
    return int(values[0])


def compute_counts_from_fields(fields: Mapping[str, np.ndarray]) -> bool:
    """compute_counts from the plugin fields by name (each an int32 array): what the creator builds the plugin with.

    A missing field means DEFAULT_COMPUTE_COUNTS (1), so engines serialized before the field existed keep their
    meaning. ValueError for an unknown name, an array that is not exactly one int32, or a value other than 0/1.
    """
    check_field_names(list(fields))
    if COMPUTE_COUNTS_FIELD not in fields:
        return DEFAULT_COMPUTE_COUNTS
    return as_compute_counts(_one_int32(fields, COMPUTE_COUNTS_FIELD, "0 or 1"))


def overwrite_from_fields(fields: Mapping[str, np.ndarray]) -> bool:
    """overwrite from the plugin fields by name: missing means DEFAULT_OVERWRITE (add rows); ValueError for an
    array that is not exactly one int32, or a value other than 0/1. With overwrite, compute_counts must be 0
    (check_overwrite)."""
    check_field_names(list(fields))
    if OVERWRITE_FIELD not in fields:
        return DEFAULT_OVERWRITE
    return as_overwrite(_one_int32(fields, OVERWRITE_FIELD, "0 or 1"))


def fields_to_serialize(*, compute_counts: bool, overwrite: bool = DEFAULT_OVERWRITE) -> dict[str, np.ndarray]:
    """The plugin fields that recreate a plugin: {"compute_counts": int32 [0 or 1]} and, for an overwrite only,
    "overwrite": int32 [1]; the inverse of compute_counts_from_fields and overwrite_from_fields."""
    fields = {COMPUTE_COUNTS_FIELD: np.array([int(compute_counts)], dtype=FIELD_DTYPE)}
    if overwrite:
        fields[OVERWRITE_FIELD] = np.array([1], dtype=FIELD_DTYPE)
    return fields


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


def profile_maximum_sizes(max_shapes: Sequence[Sequence[int]], state_dtype: np.dtype | None) -> LaunchSizes:
    """N, E and F of the profile's largest shapes (what the workspace is sized for); ValueError when a maximum
    is dynamic (-1), the shapes do not fit together, or the state's type is not float32/float16."""
    check_input_ranks(max_shapes)
    if any(-1 in tuple(shape) for shape in max_shapes):
        raise ValueError(f"the profile's largest shapes must be concrete, got {[tuple(shape) for shape in max_shapes]}")
    if state_dtype not in FEATURE_DTYPES:
        raise ValueError(f"the state (input 0) must be float32 or float16, got {state_dtype}")
    return launch_sizes(max_shapes)


def state_nbytes(sizes: LaunchSizes, dtype: np.dtype) -> int:
    """Bytes of the state [N, F]: what enqueue copies when TensorRT gives the output its own buffer."""
    return sizes.num_nodes * sizes.num_features * np.dtype(dtype).itemsize
