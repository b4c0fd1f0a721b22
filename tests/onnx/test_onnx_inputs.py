"""The plain functions behind --onnx with a model of one's own, without ONNX, TensorRT or a GPU: --onnx_shapes,
the inputs of --onnx_inputs checked against the model, inputs made from the seed, --steps' feeding back of the
states, the comparison with ONNX Runtime, the engine bindings of outputs aliasing an input."""

import numpy as np
import pytest

from cli.onnx_shapes import parse_onnx_shapes
from common.limits import DEFAULT_DYNAMIC_DIM
from onnx_path.inputs import (
    check_onnx_inputs,
    input_shapes,
    make_onnx_inputs,
    run_in_steps,
)
from onnx_path.compare import compare_output
from common.errors import EngineError, InputError
from onnx_path.rewrite import IndexBound, TensorSpec

F32, I64 = np.dtype(np.float32), np.dtype(np.int64)
# A GNN layer's inputs: a state [N, H, F] added into at rows idx, the sources [E, H, F], and a table [C, F]
# whose rows idx2 index (a constant row count, as zeros made in the graph with a fixed shape give).
SPECS = (TensorSpec("X", F32, ("N", 2, 3)), TensorSpec("src", F32, ("E", 2, 3)), TensorSpec("idx", I64, ("E",)),
         TensorSpec("idx2", I64, ("?",)))
BOUNDS = {"idx": IndexBound(input="X", axis=0), "idx2": IndexBound(rows=5)}
SOURCE = "--onnx_inputs in.npz"


def feeds(num_nodes=4, num_edges=6, **changes):
    arrays = {"X": np.zeros((num_nodes, 2, 3), np.float32), "src": np.ones((num_edges, 2, 3), np.float32),
              "idx": np.arange(num_edges, dtype=np.int64) % num_nodes, "idx2": np.array([0, 4], np.int64)}
    arrays.update(changes)
    return {name: value for name, value in arrays.items() if value is not None}


@pytest.mark.parametrize("text, shapes", [
    ("X:4x2x3,idx:6", {"X": (4, 2, 3), "idx": (6,)}),
    ("X:[4,2,3] idx:[6]", {"X": (4, 2, 3), "idx": (6,)}),  # polygraphy's --input-shapes form
    ("input:0:8x1", {"input:0": (8, 1)}),  # a name holding ':'
])
def test_onnx_shapes_take_trtexec_and_polygraphy_forms(text, shapes):
    assert parse_onnx_shapes(text) == shapes


@pytest.mark.parametrize("text, message", [
    ("X:4xq", "--onnx_shapes: 'X:4xq' is not NAME:D0xD1..."),
    ("X:0x3", "--onnx_shapes X: dimension '0' is not an integer from 1 to 2,147,483,647"),
    ("X:4,X:5", "--onnx_shapes: X is given twice"),
    ("X", "--onnx_shapes: 'X' is not NAME:D0xD1..."),
    (" ", "--onnx_shapes: no shape given"),
])
def test_bad_onnx_shapes_are_one_line_naming_the_value(text, message):
    with pytest.raises(InputError) as error:
        parse_onnx_shapes(text)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_dynamic_dimensions_come_from_the_given_shapes_by_name_else_the_default():
    shapes, notes = input_shapes(SPECS, {"src": (7, 2, 3)})
    assert shapes == {"X": (DEFAULT_DYNAMIC_DIM, 2, 3), "src": (7, 2, 3), "idx": (7,), "idx2": (DEFAULT_DYNAMIC_DIM,)}
    assert notes == ["E=7 (shape src:7x2x3)", f"N={DEFAULT_DYNAMIC_DIM} (default)"]


@pytest.mark.parametrize("given, message", [
    ({"W": (3,)}, "shape W: not an input of the model (its inputs: X, src, idx, idx2)"),
    ({"X": (4, 2)}, "shape X:4x2: rank 2, the model's input is X float32 [N, 2, 3]"),
    ({"X": (4, 2, 5)}, "shape X:4x2x5: dimension 2 is 5, the model's input is X float32 [N, 2, 3]"),
    ({"src": (7, 2, 3), "idx": (8,)}, "shape idx:8: dimension 0 (E) is 8, but shape src:7x2x3 "
                                      "makes E 7"),
])
def test_shapes_that_do_not_fit_the_model_are_one_line(given, message):
    with pytest.raises(InputError) as error:
        input_shapes(SPECS, given)
    assert str(error.value) == message


def test_inputs_that_fit_the_model_pass():
    check_onnx_inputs(SPECS, feeds(), BOUNDS, SOURCE)


@pytest.mark.parametrize("changes, message", [
    ({"idx2": None}, "no array 'idx2' (the model's inputs: X, src, idx, idx2)"),
    ({"W": np.zeros(3, np.float32)}, "array 'W' is not an input of the model"),
    ({"X": np.zeros((4, 2, 3))}, "X float64 [4, 2, 3], the model's input is X float32 [N, 2, 3]"),
    ({"idx": np.zeros(6, np.int32)}, "idx int32 [6], the model's input is idx int64 [E]"),
    ({"src": np.ones((6, 3), np.float32)}, "src [6, 3]: rank 2, the model's input is src float32 [E, 2, 3]"),
    ({"X": np.zeros((4, 2, 4), np.float32)}, "X [4, 2, 4]: dimension 2 is 4, the model's input is X float32 [N, 2, 3]"),
    ({"idx": np.zeros(5, np.int64)}, "idx [5]: dimension 0 (E) is 5, but --onnx_inputs in.npz: src [6, 2, 3] makes "
                                     "E 6"),
    ({"src": np.full((6, 2, 3), np.nan, np.float32)}, "src[0, 0, 0] = nan is not finite"),
    ({"idx": np.array([0, 1, 2, 3, 4, 1])}, "idx[4] = 4 is outside [0, 4), the rows of X it indexes"),
    ({"idx": np.array([0, 1, -1, 3, 0, 1])}, "idx[2] = -1 is outside [0, 4), the rows of X it indexes"),
    ({"idx2": np.array([5, 0])}, "idx2[0] = 5 is outside [0, 5), the 5 rows it indexes"),
])
def test_each_bad_input_is_one_line_naming_the_input_and_the_value(changes, message):
    with pytest.raises(InputError) as error:
        check_onnx_inputs(SPECS, feeds(**changes), BOUNDS, SOURCE)
    assert str(error.value).startswith(f"{SOURCE}: ") and message in str(error.value), str(error.value)


def test_made_inputs_are_standard_normal_floats_and_indices_in_range_seeded_per_run():
    shapes = {"X": (50, 2, 3), "src": (4000, 2, 3), "idx": (4000,), "idx2": (4000,)}
    made = make_onnx_inputs(SPECS, shapes, BOUNDS, seed=3)
    check_onnx_inputs(SPECS, made, BOUNDS, "made")  # every index in range, every dtype and shape the model's
    assert {name: value.shape for name, value in made.items()} == shapes
    assert abs(made["src"].mean()) < 0.05 and abs(made["src"].std() - 1.0) < 0.05
    assert set(np.unique(made["idx"])) == set(range(50)) and set(np.unique(made["idx2"])) == set(range(5))
    again = make_onnx_inputs(SPECS, shapes, BOUNDS, seed=3)
    assert all(np.array_equal(made[name], again[name]) for name in made)
    later = make_onnx_inputs(SPECS, shapes, BOUNDS, seed=3, run=1, only=["src", "idx"])
    assert sorted(later) == ["idx", "src"] and not np.array_equal(later["src"], made["src"])


def test_an_input_that_is_neither_a_float_nor_an_index_cannot_be_made_up():
    specs = (*SPECS, TensorSpec("mask", np.dtype(np.bool_), ("E",)))
    shapes, _ = input_shapes(specs, None)
    with pytest.raises(InputError, match=r"input mask bool \[E\]: no value can be made up .*give its values in an inputs file"):
        make_onnx_inputs(specs, shapes, BOUNDS, seed=0)


def test_steps_feed_each_state_back_and_fresh_inputs_to_every_later_run():
    """Two states updated in place (one of them also read), one output that is no state; run k sees run k-1's
    states and fresh(k)'s other inputs."""
    def run(feeds):
        return {"a_out": feeds["a"] + feeds["x"], "b_out": feeds["b"] * 2, "y": feeds["a"] * feeds["x"]}

    def fresh(step):
        return {"x": np.array([10.0 * step])}

    outputs = run_in_steps(run, {"a": np.array([1.0]), "b": np.array([1.0]), "x": np.array([0.5])}, fresh,
                           {"a_out": "a", "b_out": "b"}, steps=3)
    # a: 1 -> 1.5 -> 11.5 -> 31.5; b: 1 -> 2 -> 4 -> 8; y of the last run: 11.5 * 20
    assert outputs["a_out"].tolist() == [31.5] and outputs["b_out"].tolist() == [8.0] and outputs["y"].tolist() == [230.0]


def test_outputs_compare_within_a_tolerance_relative_to_their_largest_magnitude():
    expected = np.array([[100.0, -3.0], [0.0, 1.0]], np.float32)
    assert compare_output(expected + 9e-3, expected, F32).ok  # 1e-4 of 100
    check = compare_output(expected + np.array([[0, 0], [0, 2e-2]], np.float32), expected, F32)
    assert not check.ok and check.max_abs_error == pytest.approx(0.02) and check.tolerance == pytest.approx(0.01)
    assert compare_output(expected.astype(np.float16) + 0.5, expected.astype(np.float16), np.float16).ok  # 1e-2
    assert not compare_output(np.array([1, 2]), np.array([1, 3]), I64).ok  # integers exactly
    assert not compare_output(np.array([np.nan, 1.0]), np.array([0.0, 1.0]), F32).ok
    wrong_shape = compare_output(np.zeros((2, 2)), np.zeros((2, 3)), F32)
    assert not wrong_shape.ok and "shape [2, 2], ONNX Runtime's [2, 3]" in wrong_shape.summary()


def test_each_output_aliasing_an_input_is_bound_there_and_never_two_on_one_input():
    from network.execution import check_output_buffer, output_bindings

    class Buffer:
        shape, dtype = (4, 3), F32

    reported_none = {"a_out": None, "b_out": None, "y": None}  # what TensorRT reports for a plugin's alias
    assert output_bindings(["a_out", "b_out", "y"], reported_none, {"a_out": "a", "b_out": "b"}) == \
        {"a_out": "a", "b_out": "b", "y": None}
    with pytest.raises(EngineError, match=r"two engine outputs would be bound at input 'a': \['a_out', 'b_out'\]"):
        output_bindings(["a_out", "b_out"], None, {"a_out": "a", "b_out": "a"})
    check_output_buffer("a_out", (4, 3), F32, "a", Buffer())
    with pytest.raises(EngineError, match=r"engine output 'a_out' \(float32 \[4, 2\]\) cannot be bound at input 'a'"):
        check_output_buffer("a_out", (4, 2), F32, "a", Buffer())
    with pytest.raises(EngineError, match="data-dependent shape"):
        check_output_buffer("y", (-1, 3), F32, None, None)


def test_the_engine_profile_is_the_runs_shapes_and_the_report_names_each_binding():
    from cli.engine_report import model_engine_lines
    from network.model_engine import profile_shapes

    made = feeds()
    assert profile_shapes(made, ["X", "idx"]) == {"X": ((4, 2, 3),) * 3, "idx": ((6,),) * 3}
    lines = model_engine_lines({"X_new": "X"}, {"X_new": None, "y": None}, 3, [5.0, 1.0, 1.0], "10.16")
    assert lines[0].startswith("Engine output 'X_new': get_aliased_input_tensor -> None (what TensorRT answers for a "
                               "plugin's aliasing")
    assert "the runner binds X_new at X's address" in lines[0]
    assert lines[1].startswith("Runs: 3 executions") and "median 1 ms" in lines[1]


def test_an_index_whose_rows_the_model_does_not_tell_is_neither_checked_nor_made_up():
    """The plugin adds row idx[e] unchecked: an index of unknown range stops the run, given or made."""
    bounds = {**BOUNDS, "idx": IndexBound()}
    message = ("input idx indexes a scatter's rows, and the model does not tell how many there are (its data is "
               "computed), so its values can be neither checked nor made up")
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_onnx_inputs(SPECS, feeds(), bounds, SOURCE)
    with pytest.raises(InputError, match="input idx indexes a scatter's rows"):
        make_onnx_inputs(SPECS, input_shapes(SPECS, None)[0], bounds, seed=0)
