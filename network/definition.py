"""How the network is defined: with TensorRT's network API (X, src, idx, W -> scatter-add plugin -> Cast, DIV,
MatrixMultiply, ReLU, SoftMax; the state-update network of --steps). --onnx parses a rewritten model instead
(network/onnx_parse.py).

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

With --plugin aot the scatter-add is plugin/scatter_add_op.py's chain of AOT plugins (SCATTER_ADD, with counts
SCATTER_ADD_COUNTS) and the fill layers they alias (network/aot_layers.py); the rest of each network is the same.

The network is strongly typed: every tensor's type follows from the inputs' types (float32 or float16 for
X, src, W; int64 for idx), with one explicit Cast of the counts. N and E are dynamic (-1); F and C are fixed.
Functions take the tensorrt module as `trt` so the plugin-free part also builds with TensorRT-RTX in tests; the
Python plugin needs the full TensorRT (add_plugin_v3).
"""

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from common.errors import EngineError
from common.plugin_kind import PluginKind
from network.aot_layers import add_aot_scatter_add

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


def builder_config(trt: Any, profile_shapes: Mapping[str, Sequence[tuple[int, ...]]]) -> Any:
    """The builder config, as polygraphy's CreateConfig loader (network/engine.py builds with it): one optimization
    profile, the (min, opt, max) shapes of each dynamic input, and the preview feature without which TensorRT
    ignores get_aliased_input and refuses the build ("Aliased I/O used by plugin ... but
    PreviewFeature::kALIASED_PLUGIN_IO_10_03 not enabled")."""
    from polygraphy.backend.trt import CreateConfig, Profile

    profile = Profile()
    for name, (low, opt, high) in profile_shapes.items():
        profile.add(name, min=low, opt=opt, max=high)
    return CreateConfig(profiles=[profile], preview_features=[trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03])


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
    trt: Any, network: "INetworkDefinition", inputs: dict[str, "ITensor"], kind: str, plugin: PluginKind,
    max_edges: int | None = None,
) -> tuple["ITensor", "ITensor | None", Any]:
    """The scatter-add for `kind` with the `plugin` --plugin chose: returns (aggregated, counts or None, what must
    stay alive until the engine is built). `max_edges`: the profile's bound on E, which the AOT float16 path may
    use (add_aot_scatter_add)."""
    if plugin.aot:
        num_features = int(inputs[INPUT_STATE].shape[1])
        return add_aot_scatter_add(trt, network, inputs[INPUT_STATE], inputs[INPUT_SOURCE], inputs[INPUT_INDEX],
                                   num_features, with_counts=kind == CLASSIFIER, max_edges=max_edges)
    layer, python_plugin = add_scatter_add_layer(network, inputs, kind)
    return layer.get_output(0), layer.get_output(1) if kind == CLASSIFIER else None, python_plugin


def populate_network(trt: Any, network: "INetworkDefinition", dtype: "DataType", num_features: int, num_classes: int,
                     plugin: PluginKind = PluginKind.PYTHON) -> Any:
    """Fills an empty strongly typed network with the whole graph; returns what must stay alive until the
    engine is built (the Python plugin object: add_plugin_v3 does not hold a Python reference).

    Needs the full TensorRT (add_plugin_v3; with PluginKind.AOT, add_plugin and tensorrt.plugin, 10.16+).
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
                           plugin: PluginKind = PluginKind.PYTHON, max_edges: int | None = None) -> Any:
    """Fills an empty strongly typed network with X, src, idx -> plugin -> "X_out"; returns the plugin object.

    For --steps: the plugin's aggregated output is an engine output, so the state it adds into persists after
    the execution. Whether TensorRT makes "X_out" share X's memory at the engine boundary is TensorRT's choice,
    reported by ICudaEngine.get_aliased_input_tensor("X_out"). The plugin is built with compute_counts=0, so
    aggregated is its only output and an execution costs in proportion to the batch, not to N (the field is
    serialized: a loaded engine keeps it). With PluginKind.AOT the AOT plugins without counts (float16: the table
    is sized from E), so an execution is O(E*F) there too; `max_edges`, the profile's bound on E, chooses the
    chain (add_aot_scatter_add: a float16 state of one feature and at most 1024 edges takes one kernel). Needs
    the full TensorRT; keep the returned object alive until the engine is built.
    """
    inputs = add_network_inputs(trt, network, dtype, num_features, None)
    aggregated, _, keep_alive = add_scatter_add(trt, network, inputs, STATE_UPDATE, plugin, max_edges)
    mark_state_output(network, aggregated)
    return keep_alive
