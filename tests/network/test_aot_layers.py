"""An op's scratch tensors as network layers (network.aot_layers), built with a real builder, and the chain the
--plugin aot network takes.

On the `trt` fixture (TensorRT-RTX where the full TensorRT is missing): the scratch of plugin/scatter_add_op.py's
float16 table chain with counts (keys [K] int32 -1, values [C, F] float32 0, counts [N, 1] int64 0, shapes from
the Expr through shape layers) marks as outputs with the right types and symbolic shapes and builds an engine
over a dynamic profile. The AOT plugins themselves need the full TensorRT (tests/network/test_e2e_aot.py).
"""

import pytest

pytestmark = pytest.mark.trt_standin

NUM_FEATURES = 3


def scratch_network(trt, chain, half):
    from network.aot_layers import ShapeTensors, _Sizes, add_scratch
    from plugin.scatter_add_op import SCATTER_ADD_COUNTS

    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    state = network.add_input("X", trt.float16 if half else trt.float32, trt.Dims([-1, NUM_FEATURES]))
    index = network.add_input("idx", trt.int64, trt.Dims([-1]))
    shapes = ShapeTensors(trt, network)
    tensors = {"state": state, "index": index}
    sizes = _Sizes(shapes, {name: (tensors[tensor], axis) for name, (tensor, axis) in SCATTER_ADD_COUNTS.sizes.items()
                            if tensor in tensors})
    made = {scratch.name: add_scratch(shapes, scratch, sizes) for scratch in chain.scratch}
    return builder, network, made, shapes


def test_table_chain_scratch_types_and_shapes(trt):
    from plugin.scatter_add_op import table_chain

    _, _, made, _ = scratch_network(trt, table_chain(True), half=True)
    assert made["keys"].dtype == trt.int32 and tuple(made["keys"].shape) == (-1,)
    assert made["values"].dtype == trt.float32 and tuple(made["values"].shape) == (-1, NUM_FEATURES)
    assert made["counts"].dtype == trt.int64 and tuple(made["counts"].shape) == (-1, 1)


def test_a_chain_without_scratch_adds_no_layers(trt):
    from plugin.scatter_add_op import state_chain

    _, network, made, _ = scratch_network(trt, state_chain(False), half=False)
    assert network.num_layers == 0 and made == {}


def test_table_chain_scratch_builds_over_a_dynamic_profile(trt):
    from plugin.scatter_add_op import table_chain

    builder, network, made, shapes = scratch_network(trt, table_chain(True), half=True)
    for tensor in made.values():
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


def test_x_feeds_at_most_one_shape_layer(trt):
    """The AOT plugin aliases X, and TensorRT may copy an aliased input it sees read elsewhere: the fills give X
    at most one more consumer, a shape layer (dimensions only, never its memory), however many sizes read N."""
    from plugin.scatter_add_op import table_chain

    _, network, _, _ = scratch_network(trt, table_chain(True), half=True)
    layers = [network.get_layer(i) for i in range(network.num_layers)]
    readers_of_x = [layer for layer in layers
                    if any(layer.get_input(j) is not None and layer.get_input(j).name == "X" for j in range(layer.num_inputs))]
    assert [layer.type for layer in readers_of_x] == [trt.LayerType.SHAPE]


def test_shape_layers_evaluate_an_expr_like_ints(trt):
    """ShapeLayers and the int backend agree on constant sizes (no layer: ints stay ints)."""
    from inplace.spec import cdiv, maximum, minimum, size
    from network.aot_layers import ShapeLayers, ShapeTensors

    network = trt.Builder(trt.Logger(trt.Logger.ERROR)).create_network(
        1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    expression = maximum(minimum(size("N") * 4, size("E") + 3), cdiv(size("E"), 7)) // 2
    sizes = {"N": 5, "E": 30}
    assert expression.evaluate(sizes, ShapeLayers(ShapeTensors(trt, network))) == expression.evaluate(sizes)
    assert network.num_layers == 0


@pytest.mark.parametrize("half,counts,features,max_edges,steps", [
    (False, False, NUM_FEATURES, None, ("add_rows",)),
    (False, True, NUM_FEATURES, None, ("add_rows_counts",)),
    (True, True, NUM_FEATURES, None, ("add_into_table_counts", "round_table")),
    (True, False, NUM_FEATURES, None, ("add_into_table", "round_table")),
    (True, False, 1, 1024, ("add_block",)),
    (True, False, 1, 20000, ("add_into_slots", "round_slots")),
    (True, False, 1, None, ("add_into_table", "round_table")),
])
def test_the_network_chooses_the_ops_chain(trt, half, counts, features, max_edges, steps):
    """What --plugin aot puts in an engine (N is dynamic there, so never the pairs or the sorted chains)."""
    from network.aot_layers import scatter_add_facts
    from plugin.scatter_add_op import SCATTER_ADD, SCATTER_ADD_COUNTS

    network = trt.Builder(trt.Logger(trt.Logger.ERROR)).create_network(
        1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    state = network.add_input("X", trt.float16 if half else trt.float32, trt.Dims([-1, features]))
    op = SCATTER_ADD_COUNTS if counts else SCATTER_ADD
    chain = op.chain_for(scatter_add_facts(trt, state, features, max_edges))
    assert tuple(step.plugin.rpartition("::")[2] for step in chain.steps) == steps


def recorded_aot_plugins(monkeypatch, *, half, num_features, max_edges, classifier=False):
    """The AOT plugin ids populate_state_network (populate_network with `classifier`) adds, in order, on a
    recording stand-in network (unittest.mock) with inplace.aot's registration and plugin calls stubbed: the real
    plugins need TensorRT >= 10.16 (tests/network/test_e2e_aot.py builds them). Only which plugins and fills the
    network composes is checked here, not TensorRT."""
    from unittest import mock

    import inplace.aot
    from common.plugin_kind import PluginKind
    from network.definition import populate_network, populate_state_network

    monkeypatch.setattr(inplace.aot, "register_aot_op", lambda op: [])
    monkeypatch.setattr(inplace.aot, "plugin_op", lambda plugin_id: lambda *tensors: plugin_id)
    trt = mock.MagicMock()
    trt.Dims = tuple
    network = mock.MagicMock()
    network.add_input.side_effect = lambda name, dtype, shape: mock.MagicMock(dtype=dtype, shape=shape)
    added = []

    def add_plugin(plugin_id, aot):
        assert aot is True
        added.append(plugin_id)
        return mock.MagicMock()

    network.add_plugin.side_effect = add_plugin
    dtype = trt.float16 if half else trt.float32
    if classifier:
        populate_network(trt, network, dtype, num_features, 4, PluginKind.AOT)
    else:
        populate_state_network(trt, network, dtype, num_features, PluginKind.AOT, max_edges=max_edges)
    return added, network.add_fill.call_count


@pytest.mark.parametrize("half, num_features, max_edges, expected, fills", [
    (True, 1, 1024, ["add_block"], 0),
    (True, 1, 1, ["add_block"], 0),
    (True, 1, 1025, ["add_into_slots", "round_slots"], 1),
    (True, 1, 2**15 + 1, ["add_into_table", "round_table"], 2),
    (True, 1, None, ["add_into_table", "round_table"], 2),
    (True, 2, 100, ["add_into_table", "round_table"], 2),
    (False, 1, 100, ["add_rows"], 0),
])
def test_aot_state_network_holds_the_chain_chosen_for_its_profile(monkeypatch, half, num_features, max_edges,
                                                                    expected, fills):
    added, filled = recorded_aot_plugins(monkeypatch, half=half, num_features=num_features, max_edges=max_edges)
    assert added == [f"aliased_io::{name}" for name in expected] and filled == fills


@pytest.mark.parametrize("half, expected, fills", [(False, ["add_rows_counts"], 1),
                                                   (True, ["add_into_table_counts", "round_table"], 3)])
def test_aot_classifier_holds_the_counts_chain(monkeypatch, half, expected, fills):
    added, filled = recorded_aot_plugins(monkeypatch, half=half, num_features=3, max_edges=None, classifier=True)
    assert added == [f"aliased_io::{name}" for name in expected] and filled == fills
