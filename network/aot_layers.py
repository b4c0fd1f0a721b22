"""An in-place op's chain as network layers (--plugin aot): inplace/spec.py's InplaceOp built into a network.

    add_inplace_chain(trt, network, op, chain, tensors)   each filled Scratch as a fill layer (LINSPACE with
                                                          start = its fill and delta 0), its shape the Scratch's
                                                          Expr evaluated with shape layers (ShapeLayers), then one
                                                          AOT plugin layer per Step (add_plugin(..., aot=True));
                                                          an unfilled Scratch is the first plugin layer's output
    add_aot_scatter_add(...)                              --plugin aot: plugin/scatter_add_op.py's SCATTER_ADD
                                                          (SCATTER_ADD_COUNTS in the classifier) on X, src, idx,
                                                          the chain chosen from the dtype, F and the profile's E

TensorRT launches one kernel per AOT plugin and nothing before it, so what a chain needs already filled (the
classifier's zeroed counts [N, 1], the float16 table's keys -1 and values 0) comes from fill layers here, as
extra plugin inputs aliased to outputs. Their shapes are computed from the inputs' shapes by shape layers (a fixed
dimension is a constant), so one engine serves its whole optimization profile; the same Expr becomes ONNX nodes in
onnx_path/own_ops.py and TensorRT's symbolic sizes in inplace/aot.py. A chain without scratch adds no shape layers.
The fill subgraph builds with TensorRT-RTX too (tests); the AOT plugins need TensorRT >= 10.16
(INetworkDefinition.add_plugin(..., aot=True)).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from common.errors import EngineError

if TYPE_CHECKING:  # the types from tensorrt-stubs; at run time the module comes in as `trt` (maybe TensorRT-RTX)
    from tensorrt import INetworkDefinition, ITensor

    from inplace.spec import BuildFacts, Chain, InplaceOp, Scratch


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
        dtype = np.dtype(dtype).type
        trt_types: dict[Any, Any] = {np.int32: self.trt.int32, np.int64: self.trt.int64, np.float32: self.trt.float32}
        if dtype not in trt_types:
            raise EngineError(f"a fill layer makes int32, int64 or float32 tensors, not {np.dtype(dtype).name}")
        fill = self.network.add_fill(self.trt.Dims([1] * rank), self.trt.FillOperation.LINSPACE, trt_types[dtype])
        fill.set_input(0, shape)
        fill.set_input(1, self.constant(np.array(value, dtype)))
        fill.set_input(2, self.constant(np.zeros(rank, dtype)))
        return fill.get_output(0)


class ShapeLayers:
    """inplace.spec's Expr arithmetic as shape layers over int64 [1] tensors: the network's backend of the Expr an
    op's scratch shapes are written in (onnx_path.own_ops.OnnxSizes is the ONNX one, SymbolicBackend the AOT
    implementation's). Ints stay ints until a tensor meets them, so constant sizes give constant shapes."""

    def __init__(self, shapes: ShapeTensors) -> None:
        self.shapes = shapes

    def const(self, value: int) -> int:
        return value

    def _tensor(self, value: "ITensor | int") -> "ITensor":
        return self.shapes.constant(np.array([value], np.int64)) if isinstance(value, int) else value

    def _layer(self, name: str, a: Any, b: Any) -> "ITensor":
        operation = getattr(self.shapes.trt.ElementWiseOperation, name)
        return self.shapes.network.add_elementwise(self._tensor(a), self._tensor(b), operation).get_output(0)

    def add(self, a: Any, b: Any) -> Any:
        return a + b if isinstance(a, int) and isinstance(b, int) else self._layer("SUM", a, b)

    def mul(self, a: Any, b: Any) -> Any:
        return a * b if isinstance(a, int) and isinstance(b, int) else self._layer("PROD", a, b)

    def floordiv(self, a: Any, b: Any) -> Any:
        return a // b if isinstance(a, int) and isinstance(b, int) else self._layer("FLOOR_DIV", a, b)

    def cdiv(self, a: Any, b: Any) -> Any:
        if isinstance(a, int) and isinstance(b, int):
            return -(-a // b)
        return self._layer("FLOOR_DIV", self._layer("SUB", self._layer("SUM", a, b), 1), b)

    def min(self, a: Any, b: Any) -> Any:
        return min(a, b) if isinstance(a, int) and isinstance(b, int) else self._layer("MIN", a, b)

    def max(self, a: Any, b: Any) -> Any:
        return max(a, b) if isinstance(a, int) and isinstance(b, int) else self._layer("MAX", a, b)


class _Sizes(dict[str, Any]):
    """Size name -> its int (a fixed dimension of the network) or an int64 [1] tensor (one shape layer per
    tensor, sliced), made when an expression first reads it."""

    def __init__(self, shapes: ShapeTensors, where: Mapping[str, tuple["ITensor", int]]) -> None:
        super().__init__()
        self.shapes, self.where = shapes, where
        self.shape_of: dict[str, Any] = {}

    def __missing__(self, name: str) -> Any:
        tensor, axis = self.where[name]
        if int(tensor.shape[axis]) >= 0:
            self[name] = int(tensor.shape[axis])
            return self[name]
        if tensor.name not in self.shape_of:
            self.shape_of[tensor.name] = self.shapes.network.add_shape(tensor).get_output(0)
        trt = self.shapes.trt
        self[name] = self.shapes.network.add_slice(self.shape_of[tensor.name], trt.Dims([axis]), trt.Dims([1]),
                                                   trt.Dims([1])).get_output(0)
        return self[name]


def add_scratch(shapes: ShapeTensors, scratch: "Scratch", sizes: Mapping[str, Any]) -> "ITensor":
    """One filled Scratch of a chain as a fill layer: its shape evaluated on `sizes` with shape layers (ShapeLayers).
    ValueError for an unfilled one (fill None): the chain's first step creates it."""
    if scratch.fill is None:
        raise ValueError(f"scratch tensor {scratch.name} is unfilled: the chain's first step creates it, no layer")
    backend = ShapeLayers(shapes)
    parts = [dim.evaluate(sizes, backend) for dim in scratch.shape]
    tensor = shapes.filled(shapes.shape(*parts), len(parts), scratch.fill, scratch.dtype)
    tensor.name = f"{scratch.name}_fill"
    return tensor


def add_inplace_chain(trt: Any, network: "INetworkDefinition", op: "InplaceOp", chain: "Chain",
                      tensors: Mapping[str, "ITensor"]) -> tuple[list["ITensor"], list[np.ndarray]]:
    """Adds `chain` of `op` on `tensors` (op input name -> ITensor): each filled Scratch as a fill layer (an unfilled
    one is the first plugin layer's output), then one AOT plugin layer per Step (add_plugin(..., aot=True); inplace.aot
    registers the op's plugins first), the tensors passed between them by name. Returns (the op's outputs in
    op.output_names() order, the constants' arrays, which must stay alive until the engine is built). Needs TensorRT >=
    10.16 with tensorrt.plugin."""
    from inplace.aot import plugin_op, register_aot_op
    from inplace.checks import plugin_id, plugin_name

    register_aot_op(op)
    shapes = ShapeTensors(trt, network)
    sizes = _Sizes(shapes, {name: (tensors[tensor], axis) for name, (tensor, axis) in op.sizes.items()})
    values: dict[str, "ITensor"] = dict(tensors)
    for scratch in chain.filled():
        values[scratch.name] = add_scratch(shapes, scratch, sizes)
    for step in chain.steps:
        step_id = plugin_id(op, step)
        layer = network.add_plugin(plugin_op(step_id)(*(values[name] for name in step.inputs)), aot=True)
        if layer is None:
            raise EngineError(f"TensorRT could not add the AOT plugin {step_id}")
        layer.name = plugin_name(step)
        values.update((name, layer.get_output(position)) for position, name in enumerate(step.outputs))
    return [values[name] for name in op.output_names()], shapes.arrays


def scatter_add_facts(trt: Any, state: "ITensor", num_features: int, max_edges: int | None) -> "BuildFacts":
    """What a network knows when it builds the scatter-add: the dtypes, F (fixed) and the profile's max E."""
    from inplace.spec import BuildFacts

    dtype = "float16" if state.dtype == trt.float16 else "float32"
    return BuildFacts({"state": dtype, "src": dtype, "index": "int64"}, constants={"F": num_features},
                      maxima={} if max_edges is None else {"E": max_edges})


def add_aot_scatter_add(trt: Any, network: "INetworkDefinition", state: "ITensor", src: "ITensor", index: "ITensor",
                        num_features: int, *, with_counts: bool, max_edges: int | None = None
                        ) -> tuple["ITensor", "ITensor | None", list[Any]]:
    """Adds the AOT scatter-add on (X, src, idx): plugin.scatter_add_op's SCATTER_ADD (SCATTER_ADD_COUNTS with
    counts), the chain it chooses for the network's dtype, F and the profile's bound on E (`max_edges`).
    Returns (aggregated [N, F] in X's memory, counts or None, what must stay alive until the engine is built)."""
    from plugin.scatter_add_op import scatter_add_for

    op = scatter_add_for(with_counts)
    chain = op.chain_for(scatter_add_facts(trt, state, num_features, max_edges))
    outputs, arrays = add_inplace_chain(trt, network, op, chain, {"state": state, "src": src, "index": index})
    return outputs[0], outputs[1] if with_counts else None, arrays
