"""--steps and engine reuse, the plain parts: batches, step inputs, the reference of all batches, the worst-case
rounding bound of the final state (checked against numpy emulations of float32 and float16 accumulation),
profile bounds from --max_nodes/--max_edges, engine kinds, and the lines printed. No TensorRT, no GPU."""

import numpy as np
import pytest

from common.errors import InputError
from common.plugin_kind import PluginKind
from graph import MAX_RANDOM_EDGES
from network.definition import CLASSIFIER, STATE_UPDATE
from network.engine import (
    DEFAULT_MAX_EDGES,
    DEFAULT_MAX_NODES,
    EngineSignature,
    ProfileBounds,
    SizeRange,
    check_graph_fits,
    requested_profile_bounds,
)
from graph import portable_edge_batches
from cli.engine_report import describe_signature, steps_report_lines
from network.steps import StepsRun, step_inputs
from reference.state import (
    accumulated_magnitude,
    check_state_range,
    compare_state,
    expected_final_state,
    rounding_bound,
    state_error_bound,
)

# --- batches and step inputs -------------------------------------------------------------------------------


def test_batches_are_seeded_shaped_and_in_range():
    batches = portable_edge_batches(50, 4, 30, seed=7)
    assert len(batches) == 4
    for batch in batches:
        assert batch.shape == (30, 2) and batch.dtype == np.int64
        assert batch.min() >= 0 and batch.max() < 50
    again = portable_edge_batches(50, 4, 30, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))
    other = portable_edge_batches(50, 4, 30, seed=8)
    assert not all(np.array_equal(a, b) for a, b in zip(batches, other))
    assert not np.array_equal(batches[0], batches[1])  # a new batch each step


def test_batches_beyond_the_edge_limit_are_an_input_error():
    with pytest.raises(InputError, match="exceed the limit"):
        portable_edge_batches(10, 1000, MAX_RANDOM_EDGES // 1000 + 1, seed=0)


def test_step_inputs_take_the_sources_features_and_the_targets():
    features = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]], dtype=np.float16)
    batch = np.array([[2, 0], [0, 1], [2, 2]], dtype=np.int64)
    src, index = step_inputs(features, batch)
    np.testing.assert_array_equal(src, [[3.0, 30.0], [1.0, 10.0], [3.0, 30.0]])
    assert src.dtype == np.float16 and src.flags.c_contiguous
    np.testing.assert_array_equal(index, [0, 1, 2])
    assert index.dtype == np.int64 and index.flags.c_contiguous


# --- the reference and the rounding bound -----------------------------------------------------------------


def test_expected_final_state_adds_every_batch_into_the_initial_state():
    features = np.array([1.0, 3.0, 5.0])
    batches = [np.array([[0, 1], [2, 1]]), np.array([[1, 0], [1, 1]])]
    state = np.array([[100.0], [200.0], [300.0]])
    expected = expected_final_state(features, batches, state)
    # node 1 receives 1 + 5 (batch 0) + 3 (batch 1); node 0 receives 3; node 2 nothing
    np.testing.assert_array_equal(expected, [[103.0], [209.0], [300.0]])
    np.testing.assert_array_equal(expected_final_state(features, batches, None), [[3.0], [9.0], [0.0]])


def test_accumulated_magnitude_counts_absolute_values_and_additions():
    features = np.array([[1.0, -2.0], [-3.0, 4.0]])
    batches = [np.array([[0, 1], [1, 1]])]
    magnitude, additions = accumulated_magnitude(features, batches, np.array([[0.5, -0.5], [-1.0, 1.0]]))
    np.testing.assert_array_equal(magnitude, [[0.5, 0.5], [5.0, 7.0]])
    np.testing.assert_array_equal(additions, [[0], [2]])


def emulate_float32_atomics(features, batches, state, rng):
    """Every addition rounded to float32, in a random order per batch (as atomics may land)."""
    result = np.asarray(state, np.float64).astype(np.float32)
    rows = features.astype(np.float32)
    for batch in batches:
        order = rng.permutation(len(batch))
        np.add.at(result, batch[order, 1], rows[batch[order, 0]])  # unbuffered: one float32 rounding per edge
    return result


def emulate_float16_kernel(features, batches, state, rng):
    """Per batch, sums kept in float32, then added into the float16 state (one half rounding per step)."""
    result = np.asarray(state, np.float64).astype(np.float16)
    rows = features.astype(np.float16).astype(np.float32)
    for batch in batches:
        order = rng.permutation(len(batch))
        partial = np.zeros(result.shape, np.float32)
        np.add.at(partial, batch[order, 1], rows[batch[order, 0]])
        touched = np.unique(batch[:, 1])
        result[touched] = (result[touched].astype(np.float32) + partial[touched]).astype(np.float16)
    return result


def emulate_float16_sequential(features, batches, state, rng):
    """Every addition rounded to float16 (the loosest way the state could be accumulated)."""
    result = np.asarray(state, np.float64).astype(np.float16)
    rows = features.astype(np.float16)
    for batch in batches:
        order = rng.permutation(len(batch))
        np.add.at(result, batch[order, 1], rows[batch[order, 0]])
    return result


def random_case(seed, num_nodes=300, features=2, steps=12, batch_edges=400):
    rng = np.random.default_rng(seed)
    node_features = rng.standard_normal((num_nodes, features)) * rng.choice([1e-3, 1.0, 30.0], size=(num_nodes, 1))
    state = rng.standard_normal((num_nodes, features)) * 10
    batches = portable_edge_batches(num_nodes, steps, batch_edges, seed)
    return node_features, batches, state, rng


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("precision, emulate", [
    ("fp32", emulate_float32_atomics),
    ("fp16", emulate_float16_kernel),
    ("fp16", emulate_float16_sequential),
])
def test_emulated_accumulation_stays_within_the_bound(seed, precision, emulate):
    features, batches, state, rng = random_case(seed)
    expected = expected_final_state(features, batches, state)
    bound = state_error_bound(features, batches, state, precision)
    check = compare_state(emulate(features, batches, state, rng), expected, bound)
    assert check.ok, check.summary()
    assert check.max_abs_error > 0  # rounding happened, so the comparison was not trivially exact


@pytest.mark.parametrize("precision, emulate", [("fp32", emulate_float32_atomics), ("fp16", emulate_float16_kernel)])
def test_a_missing_or_repeated_batch_fails(precision, emulate):
    features, batches, state, rng = random_case(11, steps=6)
    expected = expected_final_state(features, batches, state)
    bound = state_error_bound(features, batches, state, precision)
    missing = compare_state(emulate(features, batches[:-1], state, rng), expected, bound)
    repeated = compare_state(emulate(features, batches + batches[-1:], state, rng), expected, bound)
    for check in (missing, repeated):
        assert not check.ok
        assert check.elements_beyond_bound > 0.25 * check.elements  # 74% of the nodes get an edge per batch


def test_fp32_bound_is_tight_enough_to_matter():
    features, batches, state, _ = random_case(3)
    bound = state_error_bound(features, batches, state, "fp32")
    magnitude, additions = accumulated_magnitude(features, batches, state)
    # (k + 1) u S to first order; for these sizes (k ~ 16 additions) a few 1e-6 of the magnitudes
    assert np.all(bound <= (additions + 1) * 2.0**-24 * magnitude * 1.001 + 1e-40)
    assert bound.max() < 1e-3 * magnitude.max()


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_range_check_returns_the_magnitudes_the_bound_needs(precision):
    features, batches, state, _ = random_case(4)
    magnitude, additions = check_state_range(features, batches, state, precision)
    expected_magnitude, expected_additions = accumulated_magnitude(features, batches, state)
    np.testing.assert_array_equal(magnitude, expected_magnitude)
    np.testing.assert_array_equal(additions, expected_additions)
    np.testing.assert_array_equal(rounding_bound(magnitude, additions, precision),
                                  state_error_bound(features, batches, state, precision))


def test_bound_for_an_untouched_node_covers_only_the_state_rounding():
    bound = state_error_bound(np.array([1.0, 2.0]), [np.array([[0, 0]])], np.array([[3.0], [4.0]]), "fp16")
    unit = 2.0**-11
    assert bound[1, 0] == pytest.approx(unit / (1 - unit) * 4.0 + 2.0**-24)
    assert bound[0, 0] == pytest.approx(2 * unit / (1 - 2 * unit) * 4.0 + 2 * 2.0**-24)


def test_compare_state_reports_the_worst_element_and_nan():
    expected = np.array([[1.0, 2.0], [3.0, 4.0]])
    bound = np.full((2, 2), 0.1)
    check = compare_state(np.array([[1.05, 2.0], [3.0, 4.3]]), expected, bound)
    assert not check.ok and check.elements_beyond_bound == 1 and check.elements == 4
    assert check.max_abs_error == pytest.approx(0.3) and check.bound_at_max_error == 0.1
    nan = compare_state(np.array([[np.nan, 2.0], [3.0, 4.0]]), expected, bound)
    assert not nan.ok and np.isnan(nan.max_abs_error)
    assert compare_state(expected.copy(), expected, bound).ok
    with pytest.raises(ValueError, match="shapes differ"):
        compare_state(expected[:1], expected, bound)


def test_fp16_state_that_could_overflow_is_an_input_error():
    features = np.array([[3e4], [1.0]])
    batches = [np.array([[0, 1]]), np.array([[0, 1]]), np.array([[0, 1]])]  # node 1 reaches 9e4
    with pytest.raises(InputError, match=r"node 1 could reach 90000 .* beyond the largest fp16 value 65504"):
        check_state_range(features, batches, None, "fp16")
    check_state_range(features, batches, None, "fp32")
    check_state_range(features, batches[:2], None, "fp16")  # 6e4 fits


@pytest.mark.parametrize("what, value, features, state", [
    ("node_features", "-70000", np.array([1.0, -7e4]), None),
    ("state", "-100000", np.array([1.0, 2.0]), np.array([[0.0], [-1e5]])),
])
def test_fp16_feature_or_state_out_of_range_is_an_input_error(what, value, features, state):
    with pytest.raises(InputError, match=rf"--precision fp16: {what} at \[1, 0\] is {value}, beyond"):
        check_state_range(features, [np.array([[0, 0]])], state, "fp16")
    check_state_range(features, [np.array([[0, 0]])], state, "fp32")


# --- profile bounds and engine kinds -----------------------------------------------------------------------


def test_requested_profile_bounds():
    default = requested_profile_bounds(10, 30)
    assert (default.nodes.max, default.edges.max) == (DEFAULT_MAX_NODES, DEFAULT_MAX_EDGES)
    chosen = requested_profile_bounds(10, 30, max_nodes=1000, max_edges=50)
    assert chosen.nodes == SizeRange(1, 10, 1000) and chosen.edges == SizeRange(1, 30, 50)
    exact = requested_profile_bounds(10, 30, max_nodes=10)
    assert exact.nodes == SizeRange(1, 10, 10) and exact.edges.max == DEFAULT_MAX_EDGES
    big = requested_profile_bounds(10**8, 10**4, max_nodes=10**8)
    assert big.nodes.max == 10**8  # above the defaults on request


@pytest.mark.parametrize("arguments, message", [
    (dict(num_nodes=17, num_edges=30, max_nodes=16), "the graph has 17 nodes, more than --max_nodes 16"),
    (dict(num_nodes=10, num_edges=2_000_000, max_edges=1_000_000), "the graph has 2,000,000 edges, more than --max_edges 1,000,000"),
    (dict(num_nodes=10, num_edges=51, max_edges=50, edges_source="each --steps batch"), "each --steps batch has 51 edges"),
])
def test_requested_profile_smaller_than_the_graph_is_an_input_error(arguments, message):
    with pytest.raises(InputError, match=message):
        requested_profile_bounds(**arguments)


STATE_SIGNATURE = EngineSignature("fp32", 2, 0, ProfileBounds(SizeRange(1, 8, 100), SizeRange(1, 4, 16)), STATE_UPDATE)
CLASSIFIER_SIGNATURE = EngineSignature("fp32", 2, 3, ProfileBounds(SizeRange(1, 8, 100), SizeRange(1, 4, 16)))


def test_state_engine_ignores_classes_and_names_the_batch():
    check_graph_fits(STATE_SIGNATURE, "fp32", 100, 16, 2, 7, kind=STATE_UPDATE)
    with pytest.raises(InputError, match=r"each --steps batch has 17 edges, outside the engine's profile \[1, 16\]"):
        check_graph_fits(STATE_SIGNATURE, "fp32", 100, 17, 2, 0, kind=STATE_UPDATE, edges_source="each --steps batch")


def test_engine_of_the_other_kind_is_an_input_error():
    with pytest.raises(InputError, match="holds the state update network, which --steps uses"):
        check_graph_fits(STATE_SIGNATURE, "fp32", 10, 10, 2, 3, kind=CLASSIFIER)
    with pytest.raises(InputError, match="holds the classifier network, which a run without --steps uses"):
        check_graph_fits(CLASSIFIER_SIGNATURE, "fp32", 10, 10, 2, 0, kind=STATE_UPDATE)


def test_signature_description_names_the_network():
    assert "state update network (output X_out)" in describe_signature(STATE_SIGNATURE)
    assert "C=3" in describe_signature(CLASSIFIER_SIGNATURE)


# --- report lines ------------------------------------------------------------------------------------------


def steps_run(**changes):
    fields = dict(final_state=np.zeros((4, 1), np.float32), step_ms=[0.020, 0.022, 0.021], aliases={"X_out": "X"},
                  first_step_changed_state=True, warmup_executions=1)
    fields.update(changes)
    return StepsRun(**fields)


BOUND_AT_X = "the runner binds X_out at X's address, so every execution leaves the state in X and nothing is copied back"


@pytest.mark.parametrize("aliases, reported", [
    ({"X_out": "X"}, "get_aliased_input_tensor -> 'X'"),
    ({"X_out": None}, "get_aliased_input_tensor -> None (what TensorRT answers for a plugin's aliasing, as NVIDIA's "
                      "own runs show: the method reports layer aliasing such as KVCacheUpdate; not a failure)"),
    (None, "TensorRT 10.13.3.9 has no ICudaEngine.get_aliased_input_tensor to ask"),
])
def test_report_says_what_tensorrt_answered_and_that_x_out_is_bound_at_x(aliases, reported):
    lines = steps_report_lines(steps_run(aliases=aliases), 4, 1, 100, "10.13.3.9")
    assert lines[0].startswith("Steps: 3 executions on one state buffer X [4, 1], each adding a new batch of 100")
    assert lines[1] == f"Engine output 'X_out': {reported}; {BOUND_AT_X}"
    assert lines[2] == "X's buffer after the first execution: changed (the update reached X)"
    assert lines[-1] == "Per-step engine time (CUDA events around execute_async_v3): median 21.0 us, p90 22.0 us, min 20.0 us, max 22.0 us over 3 runs"
    assert not any("cop" in line for line in lines[2:])  # no copy-back line, whatever TensorRT answered


def test_report_says_how_each_step_was_issued_and_its_host_time():
    host_ms = [0.0071, 0.0069, 0.0090]
    direct = steps_report_lines(steps_run(host_ms=host_ms), 4, 1, 100)
    assert direct[0].endswith("(after 1 warm-up execution(s) that add zeros)")
    assert direct[-2].startswith("Per-step engine time (CUDA events around execute_async_v3): median 21.0 us")
    assert direct[-1] == "Host time to issue one step: median 7.1 us (execute_async_v3 with the Python plugin's enqueue)"
    replayed = steps_report_lines(steps_run(host_ms=[0.0019, 0.0018, 0.0020], cuda_graph=True), 4, 1, 100)
    assert replayed[0].endswith("(after 1 warm-up execution(s) that add zeros, then as many replays of the captured one)")
    assert replayed[-2].startswith("Per-step engine time (CUDA events around cuGraphLaunch of the execution captured "
                                   "once after the warm-up): median 21.0 us")
    assert replayed[-1] == "Host time to issue one step: median 1.9 us (cuGraphLaunch of the captured execution)"


@pytest.mark.parametrize("plugin, issued", [
    (PluginKind.AOT, "execute_async_v3; the AOT plugin runs no Python"),
    (None, "execute_async_v3 with the engine file's plugin"),
])
def test_host_time_line_names_the_plugin_that_enqueues(plugin, issued):
    lines = steps_report_lines(steps_run(host_ms=[0.004]), 4, 1, 100, plugin=plugin)
    assert lines[-1] == f"Host time to issue one step: median 4.0 us ({issued})"
    graph = steps_report_lines(steps_run(host_ms=[0.002], cuda_graph=True), 4, 1, 100, plugin=plugin)
    assert graph[-1].endswith("(cuGraphLaunch of the captured execution)")  # no plugin code runs per replay


def test_steps_run_host_summary():
    assert steps_run().host_summary() is None  # no host times taken: no host line
    assert not any(line.startswith("Host time") for line in steps_report_lines(steps_run(), 4, 1, 100))
    summary = steps_run(host_ms=[0.003, 0.001, 0.002, 0.010]).host_summary()
    assert summary is not None and summary.count == 4
    assert (summary.median_ms, summary.min_ms, summary.max_ms) == (0.0025, 0.001, 0.010)


def test_report_when_the_first_step_cannot_show_or_did_not_reach_x():
    unseen = "\n".join(steps_report_lines(steps_run(first_step_changed_state=None), 4, 1, 8))
    assert "the first batch adds zero everywhere, so the update cannot be seen" in unseen
    missed = "\n".join(steps_report_lines(steps_run(first_step_changed_state=False), 4, 1, 8))
    assert "unchanged (the update did not reach X: see the validation)" in missed


@pytest.mark.parametrize("aliases", [{"X_out": "X"}, {"X_out": None}, None])
def test_x_out_is_bound_at_x_whatever_get_aliased_input_tensor_says(aliases):
    """--steps binds X_out at X's address like NVIDIA's qdp_runner.py: with TensorRT's alias, without it, and on a
    TensorRT that cannot be asked (before 10.15). No buffer of its own, so nothing to copy back."""
    from network.execution import output_bindings

    assert output_bindings(["X_out"], aliases, {"X_out": "X"}) == {"X_out": "X"}


def test_output_bindings_follow_tensorrt_for_other_outputs_and_refuse_contradictions():
    from common.errors import EngineError
    from network.execution import output_bindings

    assert output_bindings(["softmax"], {"softmax": None}, {}) == {"softmax": None}  # the classifier: its own buffer
    assert output_bindings(["cache_out"], {"cache_out": "cache"}, {}) == {"cache_out": "cache"}  # TensorRT's rule
    assert output_bindings(["softmax"], None, {}) == {"softmax": None}
    with pytest.raises(EngineError, match="TensorRT aliases it to input 'W', not 'X'"):
        output_bindings(["X_out"], {"X_out": "W"}, {"X_out": "X"})
    with pytest.raises(EngineError, match=r"the engine has no output\(s\) \['X_out'\]"):
        output_bindings(["softmax"], None, {"X_out": "X"})


def test_state_network_inputs_and_output_on_the_standin(trt):
    """The state network's inputs (no W) and its X_out marking, with TensorRT-RTX's real network (the plugin
    itself cannot be added there: no add_plugin_v3)."""
    from network.definition import OUTPUT_STATE, STATE_INPUT_NAMES, add_network_inputs, mark_state_output

    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    inputs = add_network_inputs(trt, network, trt.float16, 3, None)
    assert tuple(inputs) == STATE_INPUT_NAMES
    assert [network.get_input(i).name for i in range(network.num_inputs)] == list(STATE_INPUT_NAMES)
    stand_in_for_plugin = network.add_identity(inputs["X"]).get_output(0)
    output = mark_state_output(network, stand_in_for_plugin)
    assert network.num_outputs == 1 and network.get_output(0).name == OUTPUT_STATE == output.name
    assert tuple(output.shape) == (-1, 3) and output.dtype == trt.float16


@pytest.mark.trt_standin
def test_run_steps_refuses_tensorrt_without_add_plugin_v3_before_any_work(trt):
    from common.errors import MissingDependencyError
    from common.imports import is_full_tensorrt
    from network.steps import run_steps

    if is_full_tensorrt(trt):
        pytest.skip("the full TensorRT is installed here (see tests/network/test_e2e_state.py)")
    with pytest.raises(MissingDependencyError, match="add_plugin_v3") as raised:
        run_steps(None, "not-a-precision", [])  # neither the graph nor the batches are read
    assert "\n" not in str(raised.value)


def test_engine_state_benchmark_table_has_no_copy_back_column():
    from benchmarks.bench_engine_state import table

    row = dict(N=1000, median_us=10.0, min_us=9.0, max_us=11.0, alias="None", changed=True, ok=True)
    header, _, columns, _, cells, *_ = table([row], "H200").splitlines()
    assert columns == ("| N | per-step median (us) | min | max | get_aliased_input_tensor('X_out') | X changed by step 1 | "
                       "final state ok |")
    assert cells == "| 1e+03 | 10.0 | 9.0 | 11.0 | None | True | True |"
