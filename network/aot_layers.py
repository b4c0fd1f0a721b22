"""The AOT plugins' scatter-add (--plugin aot): the plugin pair of plugin/scatter_add_aot.py and the fill layers
that give them their zeroed inputs (add_aot_scatter_add). TensorRT launches one kernel per AOT plugin and nothing
before it, so what the atomics need already zeroed comes from layers here, as extra plugin inputs aliased to outputs:

    counts [N, 1] int64 = 0          classifier only (the mean divides by them); O(N), like the counts themselves
    keys [C] int32 = -1, values [C, F] float32 = 0, C = 2 E + 1     float16 only: the float32 accumulation
                                                                    table; O(E F), so a --steps execution stays
                                                                    independent of N

Each is a fill layer (LINSPACE with start = the value and delta = 0) whose shape is computed from X's and
idx's shapes by shape layers, so one engine serves its whole optimization profile. A float16 state-update network
of one feature whose profile allows at most 1024 edges (--max_edges) holds one plugin instead, scatter_add_block,
which sums in one block's shared memory: no fills, one kernel (plugin.kernels.aot.aot_takes_one_block).
The fill subgraph builds with TensorRT-RTX too (tests); the AOT plugins need TensorRT >= 10.16
(INetworkDefinition.add_plugin(..., aot=True)).
"""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from common.errors import EngineError

if TYPE_CHECKING:  # the types from tensorrt-stubs; at run time the module comes in as `trt` (maybe TensorRT-RTX)
    from tensorrt import INetworkDefinition, ITensor


KEYS_EMPTY = -1  # EMPTY_KEY in scatter_add_aot.cu
# plugin.kernels.aot.table_capacity: the float16 table has 2 E + 1 slots, computed from idx's shape here (shape
# layers) and in onnx_path.rewrite (ONNX nodes; tests/onnx/test_onnx_rewrite.py checks their result)
TABLE_SCALE, TABLE_OFFSET = 2, 1


@dataclass
class ShapeTensors:
    """Builds small int64 shape tensors from the network's inputs; keeps the constants' arrays alive (TensorRT
    reads them when the engine is built, not when the layer is added)."""

    trt: Any
    network: "INetworkDefinition"
    arrays: list[np.ndarray] = field(default_factory=list)

    def constant(self, array: np.ndarray) -> "ITensor":
        self.arrays.append(array)
        return self.network.add_constant(self.trt.Dims(array.shape), self.trt.Weights(array)).get_output(0)

    def dim(self, tensor: "ITensor", axis: int) -> "ITensor":
        """tensor.shape[axis] as an int64 [1] tensor."""
        shape = self.network.add_shape(tensor).get_output(0)
        return self.network.add_slice(shape, self.trt.Dims([axis]), self.trt.Dims([1]), self.trt.Dims([1])).get_output(0)

    def affine(self, size: "ITensor", scale: int, offset: int) -> "ITensor":
        """scale * size + offset for an int64 [1] size tensor."""
        op = self.trt.ElementWiseOperation
        scaled = self.network.add_elementwise(size, self.constant(np.array([scale], np.int64)), op.PROD)
        return self.network.add_elementwise(scaled.get_output(0), self.constant(np.array([offset], np.int64)),
                                            op.SUM).get_output(0)

    def shape(self, *sizes: "ITensor | int") -> "ITensor":
        """The int64 shape tensor [sizes...]; ints become constants."""
        parts = [self.constant(np.array([size], np.int64)) if isinstance(size, int) else size for size in sizes]
        if len(parts) == 1:
            return parts[0]
        concat = self.network.add_concatenation(parts)
        concat.axis = 0
        return concat.get_output(0)

    def filled(self, shape: "ITensor", rank: int, value: int | float, dtype: Any) -> "ITensor":
        """A tensor of `shape` (an int64 shape tensor of length `rank`) filled with `value` of numpy `dtype`
        (int32, int64 or float32), by a LINSPACE fill layer with start `value` and delta 0."""
        trt_types: dict[Any, Any] = {np.int32: self.trt.int32, np.int64: self.trt.int64, np.float32: self.trt.float32}
        fill = self.network.add_fill(self.trt.Dims([1] * rank), self.trt.FillOperation.LINSPACE, trt_types[dtype])
        fill.set_input(0, shape)
        fill.set_input(1, self.constant(np.array(value, dtype)))
        fill.set_input(2, self.constant(np.zeros(rank, dtype)))
        return fill.get_output(0)


@dataclass(frozen=True)
class AccumulationInputs:
    """The zero/-1 tensors the AOT plugins alias: counts (or None), keys and values (or None for float32)."""

    counts: "ITensor | None"
    keys: "ITensor | None"
    values: "ITensor | None"


def add_accumulation_inputs(shapes: ShapeTensors, state: "ITensor", index: "ITensor", num_features: int, *,
                            with_counts: bool, half: bool) -> AccumulationInputs:
    """counts [N, 1] int64 zeros (with_counts); keys [2E+1] int32 -1 and values [2E+1, F] float32 zeros (half).

    The counts' shape comes from X (add_shape(X)), so in the classifier X has a second consumer, a shape layer
    that reads X's dimensions, never its memory. N exists in no other tensor (src and idx carry E, W carries C
    and F): the alternatives are an engine input carrying N, which every caller (trtexec, the C++ program)
    would have to set, or zeroing inside the plugin, which TensorRT's one kernel per AOT plugin cannot do before
    its atomics. Whether TensorRT copies X for a shape-only consumer (getAliasedInput: "TensorRT may insert
    copies") has not been observed; the --steps network has no counts, and the table's size comes from idx."""
    counts = keys = values = None
    if with_counts:
        counts = shapes.filled(shapes.shape(shapes.dim(state, 0), 1), 2, 0, np.int64)
        counts.name = "aot_counts_zero"
    if half:
        capacity = shapes.affine(shapes.dim(index, 0), TABLE_SCALE, TABLE_OFFSET)
        keys = shapes.filled(capacity, 1, KEYS_EMPTY, np.int32)
        keys.name = "aot_table_keys_empty"
        values = shapes.filled(shapes.shape(capacity, num_features), 2, 0.0, np.float32)
        values.name = "aot_table_values_zero"
    return AccumulationInputs(counts, keys, values)


def add_aot_scatter_add(trt: Any, network: "INetworkDefinition", state: "ITensor", src: "ITensor", index: "ITensor",
                        num_features: int, *, with_counts: bool, max_edges: int | None = None
                        ) -> tuple["ITensor", "ITensor | None", list[Any]]:
    """Adds the AOT scatter-add on (X, src, idx); returns (aggregated [N, F] in X's memory, counts or None,
    what must stay alive until the engine is built). float32: one plugin; float16: the table plugin, then
    apply_table, or scatter_add_block alone where aot_takes_one_block(max_edges: the profile's bound on E)."""
    from plugin import scatter_add_aot as aot
    from plugin.kernels.aot import aot_takes_one_block

    def add(plugin_id: str, *tensors: "ITensor") -> Any:
        layer = network.add_plugin(aot.plugin_op(plugin_id)(*tensors), aot=True)
        if layer is None:
            raise EngineError(f"TensorRT could not add the AOT plugin {plugin_id}")
        layer.name = plugin_id.replace("::", "_")
        return layer

    half = state.dtype == trt.float16
    if aot_takes_one_block(half=half, with_counts=with_counts, num_features=num_features, max_edges=max_edges):
        return add(aot.SCATTER_ADD_BLOCK, state, src, index).get_output(0), None, []  # no fills, no shape layers
    shapes = ShapeTensors(trt, network)
    extra = add_accumulation_inputs(shapes, state, index, num_features, with_counts=with_counts, half=half)
    counts_tail = (extra.counts,) if extra.counts is not None else ()
    if not half:
        layer = add(aot.SCATTER_ADD_COUNTS if with_counts else aot.SCATTER_ADD, state, src, index, *counts_tail)
        return layer.get_output(0), layer.get_output(1) if with_counts else None, shapes.arrays
    assert extra.keys is not None and extra.values is not None
    table = add(aot.SCATTER_TABLE_COUNTS if with_counts else aot.SCATTER_TABLE, src, index, extra.keys,
                extra.values, *counts_tail)
    apply = add(aot.APPLY_TABLE, state, table.get_output(0), table.get_output(1))
    return apply.get_output(0), table.get_output(2) if with_counts else None, shapes.arrays
