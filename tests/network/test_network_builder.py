"""The plugin-free part of the network (Cast, DIV, MatrixMultiply, ReLU, SoftMax) built with a real builder.

On the `trt` fixture: the full TensorRT where installed, else TensorRT-RTX, whose builder builds strongly typed
networks with dynamic shapes on a machine without a GPU. TensorRT-RTX cannot add the Python plugin itself
(INetworkDefinition has no add_plugin_v3), so the head is fed by network inputs standing where the plugin's
outputs go; the whole network is built only by the end-to-end tests, on a machine with the full TensorRT.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from common.imports import is_full_tensorrt

pytestmark = pytest.mark.trt_standin

ROOT = Path(__file__).resolve().parents[2]
NUM_FEATURES, NUM_CLASSES = 3, 4


def head_network(trt, dtype):
    """A strongly typed network: inputs aggregated [-1, F], counts [-1, 1] int64, W [C, F] -> the head."""
    from network.definition import add_classifier_head

    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    aggregated = network.add_input("aggregated", dtype, (-1, NUM_FEATURES))
    counts = network.add_input("counts", trt.int64, (-1, 1))
    weights = network.add_input("W", dtype, (NUM_CLASSES, NUM_FEATURES))
    output = add_classifier_head(trt, network, aggregated, counts, weights, dtype)
    return builder, network, output


@pytest.mark.parametrize("precision", ["float32", "float16"])
def test_head_output_shape_and_dtype(trt, precision):
    dtype = getattr(trt, precision)
    _, network, output = head_network(trt, dtype)
    assert network.get_flag(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    assert output.name == "softmax" and output.is_network_output
    assert tuple(output.shape) == (NUM_CLASSES, -1)  # [C, N], N dynamic
    assert output.dtype == dtype


def test_head_layers_in_order(trt):
    _, network, _ = head_network(trt, trt.float16)
    layers = [network.get_layer(i) for i in range(network.num_layers)]
    assert [layer.type for layer in layers] == [
        trt.LayerType.CAST,
        trt.LayerType.ELEMENTWISE,
        trt.LayerType.MATRIX_MULTIPLY,
        trt.LayerType.ACTIVATION,
        trt.LayerType.SOFTMAX,
    ]
    cast, divide, matmul, relu, softmax = layers
    cast.__class__ = trt.ICastLayer
    divide.__class__ = trt.IElementWiseLayer
    matmul.__class__ = trt.IMatrixMultiplyLayer
    relu.__class__ = trt.IActivationLayer
    softmax.__class__ = trt.ISoftMaxLayer
    assert cast.to_type == trt.float16
    assert divide.op == trt.ElementWiseOperation.DIV  # true division, not the seed's FLOOR_DIV
    assert (matmul.op0, matmul.op1) == (trt.MatrixOperation.NONE, trt.MatrixOperation.TRANSPOSE)
    assert relu.type == trt.ActivationType.RELU
    assert softmax.axes == 1  # axis 0 of [C, N]: over the classes


@pytest.mark.parametrize("precision", ["float32", "float16"])
def test_head_builds_an_engine_with_dynamic_nodes(trt, precision):
    dtype = getattr(trt, precision)
    builder, network, _ = head_network(trt, dtype)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("aggregated", (1, NUM_FEATURES), (8, NUM_FEATURES), (4096, NUM_FEATURES))
    profile.set_shape("counts", (1, 1), (8, 1), (4096, 1))
    config.add_optimization_profile(profile)
    config.set_preview_feature(trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03, True)
    serialized = builder.build_serialized_network(network, config)
    assert serialized is not None and serialized.nbytes > 0


@pytest.mark.parametrize("kind", ["classifier", "state update"])
def test_tensorrt_rtx_cannot_add_python_plugins(trt, kind):
    """TensorRT-RTX has no INetworkDefinition.add_plugin_v3, so neither network can be built with it: both
    populate functions get as far as adding the plugin."""
    if is_full_tensorrt(trt):
        pytest.skip("the full TensorRT is installed here: the end-to-end tests build the whole network")
    from network.definition import populate_network, populate_state_network

    assert not hasattr(trt.INetworkDefinition, "add_plugin_v3")
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    with pytest.raises(AttributeError, match="add_plugin_v3"):
        if kind == "classifier":
            populate_network(trt, network, trt.float32, NUM_FEATURES, NUM_CLASSES)
        else:
            populate_state_network(trt, network, trt.float32, NUM_FEATURES)


@pytest.mark.trt_bindings
def test_each_network_gets_its_plugin_variant(trt):
    """The classifier's plugin computes counts (its mean divides by them); the state-update network's plugin does
    not (compute_counts=0: one output, no O(N) zeroing per execution), and it serializes that choice."""
    from network.definition import CLASSIFIER, STATE_UPDATE, scatter_add_plugin_for

    classifier = scatter_add_plugin_for(CLASSIFIER)
    assert classifier.compute_counts is True and classifier.num_outputs == 2
    state = scatter_add_plugin_for(STATE_UPDATE)
    assert state.compute_counts is False and state.num_outputs == 1
    assert state.get_output_data_types([trt.float32, trt.float32, trt.int64]) == [trt.float32]
    (field,) = state.get_fields_to_serialize()
    assert (field.name, field.data.tolist()) == ("compute_counts", [0])
    with pytest.raises(ValueError, match="unknown network kind 'other'"):
        scatter_add_plugin_for("other")


@pytest.mark.parametrize("kind", ["classifier", "state update"])
def test_add_plugin_v3_returning_none_is_one_clear_error_naming_the_plugin(trt, plugin_registry, kind):
    """TensorRT's add_plugin_v3 returns None (no exception) when the plugin's build callbacks fail: the builder
    stops there with one line naming the plugin, not with an AttributeError on None further on. The network
    is a stand-in whose add_plugin_v3 answers None, as TensorRT's does then."""
    from network.definition import INPUT_NAMES, add_scatter_add_layer

    class NetworkRefusingThePlugin:
        def add_plugin_v3(self, inputs, shape_inputs, plugin):
            assert len(inputs) == 3 and shape_inputs == [] and plugin.plugin_name == "ScatterAddInPlace"
            return None

    from common.errors import EngineError

    with pytest.raises(EngineError) as raised:
        add_scatter_add_layer(NetworkRefusingThePlugin(), {name: object() for name in INPUT_NAMES}, kind)
    message = str(raised.value)
    assert message.startswith(f"TensorRT could not add the ScatterAddInPlace plugin (version 1, {kind} network)")
    assert "add_plugin_v3 returned None" in message and "\n" not in message


@pytest.mark.parametrize("precision", ["float32", "float16"])
def test_state_network_without_the_plugin_builds(trt, precision):
    """The state-update network's plugin-free part: inputs X, src, idx with the sample's profile, an identity
    standing where the plugin's only output goes, marked "X_out"; one engine output, no counts anywhere."""
    from network.definition import OUTPUT_STATE, STATE_INPUT_NAMES, add_network_inputs, mark_state_output
    from network.engine import ProfileBounds, SizeRange, sample_profile_shapes

    dtype = getattr(trt, precision)
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    inputs = add_network_inputs(trt, network, dtype, NUM_FEATURES, None)
    mark_state_output(network, network.add_identity(inputs["X"]).get_output(0))
    assert [network.get_input(i).name for i in range(network.num_inputs)] == list(STATE_INPUT_NAMES)
    assert [network.get_output(i).name for i in range(network.num_outputs)] == [OUTPUT_STATE]
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    bounds = ProfileBounds(nodes=SizeRange(1, 8, 4096), edges=SizeRange(1, 16, 1024))
    for name, (low, opt, high) in sample_profile_shapes(bounds, NUM_FEATURES).items():
        profile.set_shape(name, low, opt, high)
    config.add_optimization_profile(profile)
    config.set_preview_feature(trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03, True)
    serialized = builder.build_serialized_network(network, config)
    assert serialized is not None and serialized.nbytes > 0


POLYGRAPHY_BUILD = textwrap.dedent(
    """
    import sys
    import tensorrt_rtx_bindings
    sys.modules["tensorrt"] = tensorrt_rtx_bindings
    from network.definition import add_classifier_head
    from network.engine import build_engine_bytes

    F, C = 3, 4
    def populate(trt, network):
        assert network.get_flag(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        aggregated = network.add_input("aggregated", trt.float16, (-1, F))
        counts = network.add_input("counts", trt.int64, (-1, 1))
        weights = network.add_input("W", trt.float16, (C, F))
        add_classifier_head(trt, network, aggregated, counts, weights, trt.float16)

    shapes = {"aggregated": ((1, F), (4, F), (64, F)), "counts": ((1, 1), (4, 1), (64, 1))}
    data, seconds = build_engine_bytes(populate, shapes, verbose=sys.argv[1] == "verbose")
    print(f"ENGINE {len(data)} bytes in {seconds:.3f} s")
    """
)


def run_on_tensorrt_rtx(tmp_path, code: str, *args: str) -> subprocess.CompletedProcess:
    """`code` (with `args`) in a subprocess whose polygraphy drives TensorRT-RTX (POLYGRAPHY_USE_TENSORRT_RTX=1,
    its tensorrt_rtx module a shim in `tmp_path` over tensorrt_rtx_bindings): polygraphy picks its TensorRT module
    once, at import. Skips where TensorRT-RTX is not installed."""
    pytest.importorskip("tensorrt_rtx_bindings", reason="TensorRT-RTX is not installed")
    shim = tmp_path / "tensorrt_rtx"
    shim.mkdir(exist_ok=True)
    (shim / "__init__.py").write_text("from tensorrt_rtx_bindings import *\nfrom tensorrt_rtx_bindings import __version__\n")
    env = dict(os.environ, POLYGRAPHY_USE_TENSORRT_RTX="1", PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("verbose", [False, True])
def test_polygraphy_loader_builds_strongly_typed_with_aliasing_preview(trt, tmp_path, verbose):
    """network.engine.build_engine_bytes through polygraphy, driving TensorRT-RTX (POLYGRAPHY_USE_TENSORRT_RTX=1),
    in a subprocess (run_on_tensorrt_rtx)."""
    result = run_on_tensorrt_rtx(tmp_path, POLYGRAPHY_BUILD, "verbose" if verbose else "quiet")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "ENGINE" in output
    if verbose:  # TensorRT's own messages and polygraphy's config summary appear
        assert "ALIASED_PLUGIN_IO_10_03" in output and "STRONGLY_TYPED" in output
        assert len(output.splitlines()) > 20
    else:
        assert output.strip().splitlines() == [line for line in output.strip().splitlines() if line.startswith("ENGINE")]
