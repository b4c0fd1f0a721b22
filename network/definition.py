"""How the network is defined: with TensorRT's network API (X, src, idx, W -> scatter-add plugin -> Cast, DIV,
MatrixMultiply, ReLU, SoftMax; the state-update network of --steps; the AOT plugins' fill layers, --plugin aot),
or parsed by TensorRT's ONNX parser from a model onnx_path.rewrite rewrote (--onnx, populate_from_onnx).

    X [N, F]      src [E, F]      idx [E] int64
       |              |                |
       +-------- ScatterAdd plugin ----+        (adds src rows into X's rows idx, in place)
                 |               |
     aggregated [N, F]       counts [N, 1] int64
     (X's memory)                |
                 |          Cast to X's dtype
                 |               |
                 +----- DIV -----+
                         |
                    mean [N, F]          W [C, F]
                         |                  |
                         +-- MatrixMultiply(W, mean^T) --> [C, N] --> ReLU --> SoftMax(axis 0) --> "softmax" [C, N]

With --steps the engine holds the state-update network instead: the same inputs without W, the plugin built
with compute_counts=0 (one output, aggregated: no counts, so no O(N) zeroing of counts per execution), and that
output marked as the engine output "X_out", so the updated state outlives the execution (populate_state_network).

With --plugin aot the scatter-add is the AOT plugin pair of plugin/scatter_add_aot.py instead (add_aot_scatter_add);
the rest of each network is the same. TensorRT launches one kernel per AOT plugin and nothing before it, so what
the atomics need already zeroed comes from layers here, as extra plugin inputs aliased to outputs:

    counts [N, 1] int64 = 0          classifier only (the mean divides by them); O(N), like the counts themselves
    keys [C] int32 = -1, values [C, F] float32 = 0, C = 2 E + 1     float16 only: the float32 accumulation
                                                                    table; O(E F), so a --steps execution stays
                                                                    independent of N

Each is a fill layer (LINSPACE with start = the value and delta = 0) whose shape is computed from X's and
idx's shapes by shape layers, so one engine serves its whole optimization profile. A float16 state-update network
of one feature whose profile allows at most 1024 edges (--max_edges) holds one plugin instead, scatter_add_block,
which sums in one block's shared memory: no fills, one kernel (plugin.kernels.aot.aot_takes_one_block).

The network is strongly typed: every tensor's type follows from the inputs' types (float32 or float16 for
X, src, W; int64 for idx), with one explicit Cast of the counts. N and E are dynamic (-1); F and C are fixed.
Functions take the tensorrt module as `trt` so the plugin-free part (and the AOT fill subgraph) also builds with
TensorRT-RTX in tests; the Python plugin needs the full TensorRT (add_plugin_v3), the AOT plugins TensorRT >= 10.16
(INetworkDefinition.add_plugin(..., aot=True)).
"""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from common.errors import EngineError, InputError

if TYPE_CHECKING:  # the types from tensorrt-stubs; at run time the module comes in as `trt` (maybe TensorRT-RTX)
    from tensorrt import DataType, INetworkDefinition, IPluginV3Layer, ITensor
INPUT_STATE = "X"
INPUT_SOURCE = "src"
INPUT_INDEX = "idx"
INPUT_WEIGHTS = "W"
OUTPUT_SOFTMAX = "softmax"
OUTPUT_STATE = "X_out"
INPUT_NAMES = (INPUT_STATE, INPUT_SOURCE, INPUT_INDEX, INPUT_WEIGHTS)
STATE_INPUT_NAMES = (INPUT_STATE, INPUT_SOURCE, INPUT_INDEX)
PYTHON_PLUGIN = "python"  # ScatterAddPlugin: IPluginV3 in Python, needs Python at run time
AOT_PLUGIN = "aot"  # tensorrt.plugin AOT plugins: PTX in the engine, no Python at run time
PLUGINS = (PYTHON_PLUGIN, AOT_PLUGIN)

CLASSIFIER = "classifier"  # inputs X, src, idx, W; output softmax (the sample's network)
STATE_UPDATE = "state update"  # inputs X, src, idx; output X_out (the plugin's aggregated state; --steps)


def add_classifier_head(
    trt: Any,
    network: "INetworkDefinition",
    aggregated: "ITensor",
    counts: "ITensor",
    weights_tensor: "ITensor",
    dtype: "DataType",
) -> "ITensor":
    """Adds mean = aggregated / float(counts), softmax over classes of relu(W x mean^T); marks "softmax".

    aggregated [N, F] and weights_tensor [C, F] have `dtype` (trt.float32 or trt.float16), counts [N, 1] is
    int64. Returns the output tensor, [C, N] of `dtype`.
    """
    counts_cast = network.add_cast(counts, dtype)
    counts_cast.name = "counts_to_features_dtype"
    divide = network.add_elementwise(aggregated, counts_cast.get_output(0), trt.ElementWiseOperation.DIV)
    divide.name = "mean"
    matmul = network.add_matrix_multiply(
        weights_tensor, trt.MatrixOperation.NONE, divide.get_output(0), trt.MatrixOperation.TRANSPOSE
    )
    matmul.name = "classifier"
    relu = network.add_activation(matmul.get_output(0), trt.ActivationType.RELU)
    relu.name = "relu"
    softmax = network.add_softmax(relu.get_output(0))
    softmax.axes = 1 << 0  # over the class axis of [C, N]
    softmax.name = "softmax_over_classes"
    output = softmax.get_output(0)
    output.name = OUTPUT_SOFTMAX
    network.mark_output(output)
    return output


def add_network_inputs(
    trt: Any, network: "INetworkDefinition", dtype: "DataType", num_features: int, num_classes: int | None
) -> dict[str, "ITensor"]:
    """Adds X [-1, F], src [-1, F] (dtype), idx [-1] int64 and, unless num_classes is None, W [C, F] (dtype):
    N and E are dynamic."""
    inputs = {
        INPUT_STATE: network.add_input(INPUT_STATE, dtype, trt.Dims([-1, num_features])),
        INPUT_SOURCE: network.add_input(INPUT_SOURCE, dtype, trt.Dims([-1, num_features])),
        INPUT_INDEX: network.add_input(INPUT_INDEX, trt.int64, trt.Dims([-1])),
    }
    if num_classes is not None:
        inputs[INPUT_WEIGHTS] = network.add_input(INPUT_WEIGHTS, dtype, trt.Dims([num_classes, num_features]))
    return inputs


def aliasing_preview_features(trt: Any) -> list[Any]:
    """The builder config's preview features for a network with an aliased plugin: without
    ALIASED_PLUGIN_IO_10_03 TensorRT ignores get_aliased_input and refuses the build ("Aliased I/O used by plugin
    ... but PreviewFeature::kALIASED_PLUGIN_IO_10_03 not enabled"). network/engine.py passes them to the config."""
    return [trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03]


def scatter_add_plugin_for(kind: str) -> Any:
    """A new ScatterAddPlugin for a network kind: with counts for CLASSIFIER (the mean divides by them), without
    for STATE_UPDATE (nothing reads counts there; computing them would zero N int64 values every execution).

    Imports the plugin module, so TensorRT (or the stand-in) must be importable.
    """
    from plugin.scatter_add_plugin import ScatterAddPlugin

    computes_counts = {CLASSIFIER: True, STATE_UPDATE: False}
    if kind not in computes_counts:
        raise ValueError(f"unknown network kind {kind!r}; expected {CLASSIFIER!r} or {STATE_UPDATE!r}")
    return ScatterAddPlugin(compute_counts=computes_counts[kind])


def add_scatter_add_layer(
    network: "INetworkDefinition", inputs: dict[str, "ITensor"], kind: str
) -> tuple["IPluginV3Layer", Any]:
    """Registers the plugin creator and adds the scatter-add plugin for `kind` on X, src, idx; returns (layer,
    plugin). Keep the plugin alive until the engine is built: add_plugin_v3 does not hold a Python reference.
    Needs the full TensorRT (INetworkDefinition.add_plugin_v3); TensorRT-RTX has no add_plugin_v3.
    """
    from plugin.scatter_add_plugin import PLUGIN_NAME, PLUGIN_VERSION, register_scatter_add_creator

    register_scatter_add_creator()
    plugin = scatter_add_plugin_for(kind)
    layer = network.add_plugin_v3([inputs[INPUT_STATE], inputs[INPUT_SOURCE], inputs[INPUT_INDEX]], [], plugin)
    if layer is None:  # TensorRT logs why (a build callback of the plugin failed) and returns no layer
        raise EngineError(
            f"TensorRT could not add the {PLUGIN_NAME} plugin (version {PLUGIN_VERSION}, {kind} network) to the "
            "network: add_plugin_v3 returned None; TensorRT's log says which plugin method failed (run with -v)"
        )
    layer.name = "scatter_add_in_place"
    return layer, plugin


def add_scatter_add(
    trt: Any, network: "INetworkDefinition", inputs: dict[str, "ITensor"], kind: str, plugin: str,
    max_edges: int | None = None,
) -> tuple["ITensor", "ITensor | None", Any]:
    """The scatter-add for `kind` with the `plugin` implementation ("python" or "aot"): returns (aggregated,
    counts or None, what must stay alive until the engine is built). `max_edges`: the profile's bound on E, which
    the AOT float16 path may use (add_aot_scatter_add)."""
    if plugin == PYTHON_PLUGIN:
        layer, python_plugin = add_scatter_add_layer(network, inputs, kind)
        return layer.get_output(0), layer.get_output(1) if kind == CLASSIFIER else None, python_plugin
    if plugin == AOT_PLUGIN:
        num_features = int(inputs[INPUT_STATE].shape[1])
        return add_aot_scatter_add(trt, network, inputs[INPUT_STATE], inputs[INPUT_SOURCE], inputs[INPUT_INDEX],
                                   num_features, with_counts=kind == CLASSIFIER, max_edges=max_edges)
    raise ValueError(f"unknown plugin {plugin!r}; expected one of {', '.join(PLUGINS)}")


def populate_network(trt: Any, network: "INetworkDefinition", dtype: "DataType", num_features: int, num_classes: int,
                     plugin: str = PYTHON_PLUGIN) -> Any:
    """Fills an empty strongly typed network with the whole graph; returns what must stay alive until the
    engine is built (the Python plugin object: add_plugin_v3 does not hold a Python reference).

    Needs the full TensorRT (add_plugin_v3; with plugin="aot", add_plugin and tensorrt.plugin, 10.16+).
    """
    inputs = add_network_inputs(trt, network, dtype, num_features, num_classes)
    aggregated, counts, keep_alive = add_scatter_add(trt, network, inputs, CLASSIFIER, plugin)
    assert counts is not None
    add_classifier_head(trt, network, aggregated, counts, inputs[INPUT_WEIGHTS], dtype)
    return keep_alive


def mark_state_output(network: "INetworkDefinition", aggregated: "ITensor") -> "ITensor":
    """Names the plugin's aggregated output "X_out" and marks it as the engine output (the state after the update)."""
    aggregated.name = OUTPUT_STATE
    network.mark_output(aggregated)
    return aggregated


def populate_state_network(trt: Any, network: "INetworkDefinition", dtype: "DataType", num_features: int,
                           plugin: str = PYTHON_PLUGIN, max_edges: int | None = None) -> Any:
    """Fills an empty strongly typed network with X, src, idx -> plugin -> "X_out"; returns the plugin object.

    For --steps: the plugin's aggregated output is an engine output, so the state it adds into persists after
    the execution. Whether TensorRT makes "X_out" share X's memory at the engine boundary is TensorRT's choice,
    reported by ICudaEngine.get_aliased_input_tensor("X_out"). The plugin is built with compute_counts=0, so
    aggregated is its only output and an execution costs in proportion to the batch, not to N (the field is
    serialized: a loaded engine keeps it). With plugin="aot" the AOT plugins without counts (float16: the table
    is sized from E), so an execution is O(E*F) there too; `max_edges`, the profile's bound on E, may make the
    float16 one a single kernel (add_aot_scatter_add). Needs the full TensorRT; keep the returned object alive
    until the engine is built.
    """
    inputs = add_network_inputs(trt, network, dtype, num_features, None)
    aggregated, _, keep_alive = add_scatter_add(trt, network, inputs, STATE_UPDATE, plugin, max_edges)
    mark_state_output(network, aggregated)
    return keep_alive


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


# --- The network parsed from a rewritten ONNX model (--onnx) ---------------------------------------------------
@dataclass(frozen=True)
class OnnxSource:
    """A rewritten ONNX model (onnx_path.rewrite) to build the engine from instead of the network API: its
    serialized bytes, the file it came from (for messages) and the plugin ("python" or "aot") its nodes use."""

    model_bytes: bytes
    path: str
    plugin: str


def register_plugin_creators(plugin: str) -> None:
    """Registers the creator(s) TensorRT's ONNX parser looks the plugin nodes up by: ScatterAddPluginCreator for
    "python"; for "aot" tensorrt.plugin's, which importing plugin.scatter_add_aot registers."""
    if plugin == PYTHON_PLUGIN:
        from plugin.scatter_add_plugin import register_scatter_add_creator

        register_scatter_add_creator()
    elif plugin == AOT_PLUGIN:
        from plugin.scatter_add_aot import require_aot_creators

        require_aot_creators()
    else:
        raise ValueError(f"unknown plugin {plugin!r}; expected one of {', '.join(PLUGINS)}")


def parser_error_line(path: str, error: Any) -> str:
    """One line for the ONNX parser's first error (a trt.ParserError, or None): the node's name and operator and
    the first line of TensorRT's description."""
    if error is None:
        return f"{path}: TensorRT's ONNX parser could not parse the model (-v shows TensorRT's log)"
    description = next((line.strip() for line in str(error.desc()).splitlines() if line.strip()), "no description")
    name = error.node_name() or f"#{error.node()}"
    operator = error.node_operator()
    return f"{path}: TensorRT's ONNX parser refused node {name}" + (f" ({operator})" if operator else "") + \
        f": {description}"


def populate_from_onnx(trt: Any, network: "INetworkDefinition", source: OnnxSource, verbose: bool = False) -> Any:
    """Parses the rewritten model into an empty strongly typed network, the plugin's creator(s) registered first;
    returns the parser, which holds the model's weights until the engine is built. InputError (one line naming
    the node) when TensorRT's ONNX parser refuses the model; the parser's own error lines are logged only with
    verbose. Needs the full TensorRT (the plugin nodes)."""
    from polygraphy.backend.trt import get_trt_logger
    from polygraphy.logger import G_LOGGER

    register_plugin_creators(source.plugin)
    if hasattr(trt, "init_libnvinfer_plugins"):  # TensorRT's own plugins, for other nodes of the model
        trt.init_libnvinfer_plugins(get_trt_logger(), "")
    parser = trt.OnnxParser(network, get_trt_logger())
    with G_LOGGER.verbosity(G_LOGGER.EXTRA_VERBOSE if verbose else G_LOGGER.CRITICAL):
        parsed = parser.parse(source.model_bytes)
    if not parsed:
        raise InputError(parser_error_line(source.path, parser.get_error(0) if parser.num_errors else None))
    return parser
