"""The tensors the AOT plugins alias (network.aot_layers' fill layers), built with a real builder.

On the `trt` fixture (TensorRT-RTX where the full TensorRT is missing): zeroed counts [N, 1] int64, keys
[2E+1] int32 filled with -1 and values [2E+1, F] float32 zeros, shaped from X and idx by shape layers, mark as
outputs with the right types and symbolic shapes and build an engine over a dynamic profile. The AOT plugins
themselves need the full TensorRT (tests/network/test_e2e_aot.py).
"""

import pytest

pytestmark = pytest.mark.trt_standin

NUM_FEATURES = 3


def accumulation_network(trt, *, with_counts, half):
    from network.aot_layers import ShapeTensors, add_accumulation_inputs

    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    state = network.add_input("X", trt.float16 if half else trt.float32, trt.Dims([-1, NUM_FEATURES]))
    index = network.add_input("idx", trt.int64, trt.Dims([-1]))
    shapes = ShapeTensors(trt, network)
    extra = add_accumulation_inputs(shapes, state, index, NUM_FEATURES, with_counts=with_counts, half=half)
    return builder, network, extra, shapes


@pytest.mark.parametrize("with_counts,half", [(True, False), (False, True), (True, True)])
def test_aot_accumulation_inputs_types_and_shapes(trt, with_counts, half):
    _, _, extra, _ = accumulation_network(trt, with_counts=with_counts, half=half)
    if with_counts:
        assert extra.counts.dtype == trt.int64 and tuple(extra.counts.shape) == (-1, 1)
    else:
        assert extra.counts is None
    if half:
        assert extra.keys.dtype == trt.int32 and tuple(extra.keys.shape) == (-1,)
        assert extra.values.dtype == trt.float32 and tuple(extra.values.shape) == (-1, NUM_FEATURES)
    else:
        assert extra.keys is None and extra.values is None


def test_aot_float32_without_counts_needs_no_extra_layers(trt):
    _, network, extra, _ = accumulation_network(trt, with_counts=False, half=False)
    assert network.num_layers == 0 and extra == type(extra)(None, None, None)


def test_aot_accumulation_inputs_build_over_a_dynamic_profile(trt):
    builder, network, extra, shapes = accumulation_network(trt, with_counts=True, half=True)
    for tensor in (extra.counts, extra.keys, extra.values):
        network.mark_output(tensor)
    fills = [network.get_layer(i) for i in range(network.num_layers)
             if network.get_layer(i).type == trt.LayerType.FILL]
    assert len(fills) == 3
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("X", (1, NUM_FEATURES), (10, NUM_FEATURES), (1000, NUM_FEATURES))
    profile.set_shape("idx", (1,), (20,), (5000,))
    config.add_optimization_profile(profile)
    assert builder.build_serialized_network(network, config) is not None
    assert shapes.arrays  # the constants' memory, kept until the build is done


@pytest.mark.parametrize("with_counts,half", [(True, False), (False, True), (True, True), (False, False)])
def test_x_feeds_only_one_shape_layer_and_only_where_the_counts_need_n(trt, with_counts, half):
    """The AOT plugin aliases X, and TensorRT may copy an aliased input it sees read elsewhere: the fills give X
    at most one more consumer, a shape layer (dimensions only, never its memory), and only for the classifier's
    counts, since N exists in no other tensor; the table's size comes from idx, so --steps engines add none."""
    _, network, _, _ = accumulation_network(trt, with_counts=with_counts, half=half)
    layers = [network.get_layer(i) for i in range(network.num_layers)]
    readers_of_x = [layer for layer in layers
                    if any(layer.get_input(j) is not None and layer.get_input(j).name == "X" for j in range(layer.num_inputs))]
    assert [layer.type for layer in readers_of_x] == ([trt.LayerType.SHAPE] if with_counts else [])
