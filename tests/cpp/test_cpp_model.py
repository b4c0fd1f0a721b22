"""cpp/aliased_io_state --inputs: any engine of a model of one's own, from its description (cpp/aliased_io_bindings.h)
and .npy files (cpp/npy.h), on the CPU without TensorRT: built against every header set (tests/cpp/test_cpp_state.py's
builds, -Wall -Wextra, no warning), --plan prints which buffer each tensor is bound to, the .npy reader and writer
round-trip every dtype it takes, --expected compares, the files Python writes (--save_outputs, the description)
are read, and every bad description, file or argument is exit 2 and one line, before the runtime (exit 3 with the
stand-in libnvinfer). The end-to-end test (`tensorrt`) runs a model's engine saved by the CLI.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from common.engine_description import IndexRows, TensorDescription, describe_engine, format_description
from tests.support.onnx_helpers import REWRITE_MISSING
from tests.cpp.test_cpp_state import BUILDS, assert_one_line, installed_tensorrt_build, program, recent_program, run_program
from tests.cpp.test_engine_description import BAD_DESCRIPTIONS, BAD_IDS, GOOD

__all__ = ["program", "recent_program"]  # the fixtures, shared with tests/cpp/test_cpp_state.py (one build per set)

ROOT = Path(__file__).resolve().parents[2]
CLI = str(ROOT / "aliased_io_plugin.py")
DTYPES = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "int32": np.int32}


def good_inputs(rng=None) -> dict[str, np.ndarray]:
    """Inputs of tests.cpp.test_engine_description.GOOD: N = 8 (its profile), M = 10, B = 5, C = 3."""
    rng = rng or np.random.default_rng(1)
    return {"S": rng.standard_normal((8, 4)).astype(np.float32), "T": rng.standard_normal((10, 2)).astype(np.float16),
            "idx": np.array([0, 7, 3, 3, 1], np.int64), "rows": rng.standard_normal((5, 4)).astype(np.float32),
            "idx2": np.array([9, 0, 4], np.int32), "vals": rng.standard_normal((3, 2)).astype(np.float16)}


def folder_of(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        np.save(path / f"{name}.npy", array)
    return path


def described(tmp_path: Path, text: str = GOOD) -> Path:
    path = tmp_path / "model.engine.desc"
    path.write_text(text)
    return path


def plan(program_path: Path, tmp_path: Path, *args: str, text: str = GOOD, inputs=None):
    description = described(tmp_path, text)
    folder = folder_of(tmp_path / "inputs", good_inputs() if inputs is None else inputs)
    return run_program(program_path, "--plan", f"--description={description}", f"--inputs={folder}", *args)


def test_plan_prints_which_buffer_each_tensor_is_bound_to(program, tmp_path):
    result = plan(program[1], tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stdout + result.stderr
    folder = tmp_path / "inputs"
    assert (f"Engine description: {tmp_path / 'model.engine.desc'} (aot plugin): 6 input(s), 3 output(s), 2 written "
            "into an input's memory\n") in result.stdout
    assert f"Inputs: {folder}, the same set for every step\n" in result.stdout
    assert (f"  input S float32 [8, 4] from {folder}/S.npy: a buffer of its own (128 bytes), uploaded once: a state\n"
            f"  input T float16 [10, 2] from {folder}/T.npy: a buffer of its own (40 bytes), uploaded once: a state\n"
            f"  input idx int64 [5] from {folder}/idx.npy: a buffer of its own (40 bytes)\n") in result.stdout
    assert ("  output S_out float32 [N,4]: bound at input S's address (written into its memory, in place)\n"
            "  output T_out float16 [M,2]: bound at input T's address (written into its memory, in place)\n"
            "  output total float32 []: a buffer of its own\n") in result.stdout
    assert "--plan: no TensorRT runtime, no GPU, no execution" in result.stdout


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 2), ()])
def test_npy_files_round_trip_through_the_program_bit_for_bit(recent_program, tmp_path, dtype, shape):
    """--plan --save_outputs writes the states after zero executions, their inputs: read and written again."""
    text = format_description(describe_engine("python", [TensorDescription("X", dtype, tuple(f"d{i}" for i in
                                                                                            range(len(shape))))],
                                              [TensorDescription("Y", dtype, tuple(f"d{i}" for i in range(len(shape))))],
                                              {"Y": "X"}))
    values = (np.random.default_rng(3).standard_normal(shape) * 1000).astype(DTYPES[dtype])
    out = tmp_path / "out"
    result = plan(recent_program, tmp_path, f"--save_outputs={out}", text=text, inputs={"X": values})
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Outputs saved to {out} (1 .npy file(s))" in result.stdout
    written = np.load(out / "Y.npy")
    assert written.dtype == values.dtype and written.shape == values.shape
    assert written.tobytes() == values.tobytes()
    np.save(tmp_path / "numpy.npy", values)  # the header too: padded as numpy pads it
    assert (out / "Y.npy").read_bytes() == (tmp_path / "numpy.npy").read_bytes()


def test_an_own_max_index_takes_any_row_from_zero_up(recent_program, tmp_path):
    inputs = dict(good_inputs(), idx2=np.array([12, 0, 4], np.int32))
    result = plan(recent_program, tmp_path, text=GOOD.replace("index idx2 10", "index idx2 own_max"), inputs=inputs)
    assert result.returncode == 0 and result.stderr == "", result.stdout + result.stderr
    assert any(line.startswith("  input idx2 ") and "idx2.npy" in line for line in result.stdout.splitlines())
    bounded = plan(recent_program, tmp_path, text=GOOD, inputs=inputs)  # row 12 where the description says 10 rows
    assert_one_line(bounded, 2, "idx2.npy")
    assert "12" in bounded.stderr and "10" in bounded.stderr


HETERO = format_description(describe_engine(  # to_hetero: edge_index row 0 gathers U's 50 rows, row 1 adds into X's 70
    "aot", [TensorDescription("U", "float32", (50, 3)), TensorDescription("X", "float32", (70, 3)),
            TensorDescription("edge_index", "int64", (2, "E"))], [TensorDescription("X_out", "float32", (70, 3))],
    {"X_out": "X"}, {"edge_index": (IndexRows(input="X", row=1), IndexRows(input="U", row=0))}))


def hetero_inputs(row_0: int, row_1: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4)
    edge_index = np.stack([rng.integers(0, 50, 40), rng.integers(0, 70, 40)])
    edge_index[0, 7], edge_index[1, 3] = row_0, row_1
    return {"U": rng.standard_normal((50, 3)).astype(np.float32), "X": rng.standard_normal((70, 3)).astype(np.float32),
            "edge_index": edge_index}


def test_each_row_of_an_edge_index_is_checked_against_the_rows_it_indexes(recent_program, tmp_path):
    """A row 0 value of 55 lies in the items' 70 rows but past the users' 50 that row 0 indexes: exit 2 naming the
    file, the element, the value and the bound; 49 in row 0 and 69 in row 1 are taken."""
    result = plan(recent_program, tmp_path, text=HETERO, inputs=hetero_inputs(49, 69))
    assert result.returncode == 0 and result.stderr == "", result.stdout + result.stderr
    result = plan(recent_program, tmp_path, text=HETERO, inputs=hetero_inputs(55, 69))
    assert_one_line(result, 2, f"{tmp_path / 'inputs'}/edge_index.npy: element 7 (row 0) is 55, outside [0, 50), "
                               "dimension 0 of input U that it indexes")
    result = plan(recent_program, tmp_path, text=HETERO, inputs=hetero_inputs(0, 70))
    assert_one_line(result, 2, "edge_index.npy: element 43 (row 1) is 70, outside [0, 70), dimension 0 of input X")


def test_an_index_the_model_wraps_takes_negative_values_down_to_minus_its_rows(recent_program, tmp_path):
    text = GOOD.replace("index idx2 10", "index idx2 10 wraps")
    inputs = dict(good_inputs(), idx2=np.array([9, -10, 4], np.int32))
    result = plan(recent_program, tmp_path, text=text, inputs=inputs)
    assert result.returncode == 0 and result.stderr == "", result.stdout + result.stderr
    inputs["idx2"][1] = -11
    assert_one_line(plan(recent_program, tmp_path, text=text, inputs=inputs), 2,
                    "idx2.npy: element 1 is -11, outside [-10, 10), the 10 rows it indexes (the model wraps")
    assert_one_line(plan(recent_program, tmp_path, text=GOOD, inputs=dict(inputs, idx2=np.array([9, -1, 4], np.int32))),
                    2, "idx2.npy: element 1 is -1, outside [0, 10)")


def test_expected_compares_with_the_tolerance_and_a_failure_writes_nothing(recent_program, tmp_path):
    inputs = good_inputs()
    expected = folder_of(tmp_path / "expected", {"S_out": inputs["S"], "T_out": inputs["T"],
                                                 "total": np.float32(1.0)})
    result = plan(recent_program, tmp_path, f"--expected={expected}", inputs=inputs)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("\nValidation against reference successful!\n"
            f"Output S_out against {expected}/S_out.npy: largest absolute error 0, tolerance ") in result.stdout
    assert "Output total: not computed by --plan (no execution), not compared" in result.stdout
    off = inputs["S"].copy()
    off[2, 1] += 1e-3 * np.abs(off).max()  # beyond 1e-4 of the largest magnitude
    folder_of(expected, {"S_out": off})
    out = tmp_path / "out"
    result = run_program(recent_program, "--plan", f"--description={tmp_path / 'model.engine.desc'}",
                         f"--inputs={tmp_path / 'inputs'}", f"--expected={expected}", f"--save_outputs={out}")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Validation against reference failed!" in result.stdout and not out.exists()


def test_expected_takes_its_tolerance_from_the_expected_output_so_an_infinite_one_fails(recent_program, tmp_path):
    """An output blown up to inf must not widen its own tolerance (onnx_path/run.py compare_output's rule)."""
    inputs = good_inputs()
    expected = folder_of(tmp_path / "expected", {"S_out": inputs["S"], "T_out": inputs["T"], "total": np.float32(1.0)})
    blown = dict(inputs, S=inputs["S"].copy())
    blown["S"][2, 1] = np.inf  # --plan's S_out is S: the state after zero executions
    result = plan(recent_program, tmp_path, f"--expected={expected}", inputs=blown)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Validation against reference failed!" in result.stdout


@pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")
def test_the_files_of_a_python_dry_run_are_read_step_by_step(recent_program, tmp_path):
    """--dry-run --onnx M --save_outputs D writes D/inputs/step_K: the program reads each step's set, the states
    only from step_0, and binds X_out at the state."""
    from tests.cli.test_cli_onnx_any import own_state_model

    saved = tmp_path / "run"
    python = subprocess.run([sys.executable, CLI, "--dry-run", "--seed", "3", "--onnx", own_state_model(tmp_path),
                             "--onnx_shapes", "state:6x3,src:4x3", "--steps", "3", "--save_outputs", str(saved)],
                            capture_output=True, text=True, cwd=ROOT)
    assert python.returncode == 0, python.stdout + python.stderr
    text = format_description(describe_engine(
        "aot", [TensorDescription("state", "float32", ("N", 3)), TensorDescription("src", "float32", ("E", 3)),
                TensorDescription("idx", "int64", ("E",))], [TensorDescription("X_out", "float32", ("N", 3))],
        {"X_out": "state"}, {"idx": (IndexRows(input="state"),)}))
    description = described(tmp_path, text)
    out = tmp_path / "out"
    result = run_program(recent_program, "--plan", f"--description={description}", f"--inputs={saved}/inputs",
                         f"--save_outputs={out}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Inputs: {saved}/inputs, one set per step (3 steps)" in result.stdout
    assert "  input src float32 [4, 3] from " in result.stdout and "uploaded each step" in result.stdout
    np.testing.assert_array_equal(np.load(out / "X_out.npy"), np.load(saved / "inputs/step_0/state.npy"))
    result = run_program(recent_program, "--plan", f"--description={description}", f"--inputs={saved}/inputs",
                         "--steps=4")
    assert_one_line(result, 2, f"--steps 4, but --inputs {saved}/inputs holds the inputs of 3 step(s) (step_0 to "
                               "step_2)")


@pytest.mark.parametrize("text, message", BAD_DESCRIPTIONS, ids=BAD_IDS)
def test_each_broken_rule_of_the_description_is_exit_2_and_one_line(recent_program, tmp_path, text, message):
    """The texts common.engine_description refuses (tests/cpp/test_engine_description.py), refused here too."""
    result = plan(recent_program, tmp_path, text=text)
    assert_one_line(result, 2, f"the engine description {tmp_path / 'model.engine.desc'}")
    assert message in result.stderr


def test_a_description_that_is_missing_or_not_text_is_exit_2(recent_program, tmp_path):
    folder = folder_of(tmp_path / "inputs", good_inputs())
    assert_one_line(run_program(recent_program, "--plan", f"--description={tmp_path / 'none.desc'}",
                                f"--inputs={folder}"), 2,
                    f"cannot read the engine description {tmp_path / 'none.desc'} (--save_engine of an --onnx model")
    (tmp_path / "binary.desc").write_bytes(GOOD.encode() + b"\xff")
    assert_one_line(run_program(recent_program, "--plan", f"--description={tmp_path / 'binary.desc'}",
                                f"--inputs={folder}"), 2, "not an engine description (not ASCII text)")


def npy_header(descr: str, shape: str, fortran: str = "False") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()


def broken(case: str, folder: Path) -> str:
    """Breaks one thing in the inputs folder (or the step folders made of it); returns the message expected."""
    s = folder / "S.npy"
    data = np.load(s).tobytes()
    if case == "big-endian":
        s.write_bytes(npy_header(">f4", "(8, 4)") + data)
        return f"{s}: dtype '>f4', expected little-endian float32, float16, int64 or int32"
    if case == "fortran":
        s.write_bytes(npy_header("<f4", "(8, 4)", "True") + data)
        return f"{s}: a Fortran-order array; save it in C order"
    if case == "bool":
        np.save(s, np.zeros((8, 4), bool))
        return f"{s}: dtype '|b1', expected little-endian"
    if case == "float64":
        np.save(s, np.zeros((8, 4)))
        return f"{s}: dtype '<f8', expected little-endian"
    if case == "truncated":
        s.write_bytes(npy_header("<f4", "(8, 4)") + data[:-4])
        return f"{s}: 124 bytes of data, its header says 128 (a damaged or truncated file)"
    if case == "longer":
        s.write_bytes(npy_header("<f4", "(8, 4)") + data + b"\0")
        return f"{s}: 129 bytes of data, its header says 128"
    if case == "not npy":
        s.write_text("state")
        return f"{s}: not a .npy file (no \\x93NUMPY magic)"
    if case == "version 9":
        s.write_bytes(b"\x93NUMPY\x09\x00" + npy_header("<f4", "(8, 4)")[8:] + data)
        return f"{s}: .npy format version 9, expected 1, 2 or 3"
    if case == "another dtype":
        np.save(s, np.zeros((8, 4), np.float16))
        return f"{s}: float16 [8, 4], the engine's input S float32 [N,4]"
    if case == "a static dimension":
        np.save(s, np.zeros((8, 5), np.float32))
        return f"{s}: float32 [8, 5], the engine's input S float32 [N,4]"
    if case == "another rank":
        np.save(s, np.zeros((32,), np.float32))
        return f"{s}: float32 [32], the engine's input S float32 [N,4]"
    if case == "a named dimension twice":
        np.save(folder / "rows.npy", np.zeros((6, 4), np.float32))
        return f"{folder}/rows.npy: float32 [6, 4], the engine's input rows float32 [B,4]: dimension B is 5 elsewhere"
    if case == "an index outside":
        np.save(folder / "idx.npy", np.array([0, 7, 8, 3, 1], np.int64))
        return f"{folder}/idx.npy: element 2 is 8, outside [0, 8), dimension 0 of input S that it indexes"
    if case == "a negative index":
        np.save(folder / "idx2.npy", np.array([9, -1, 4], np.int32))
        return f"{folder}/idx2.npy: element 1 is -1, outside [0, 10), the 10 rows it indexes"
    if case == "a constant rows index":
        np.save(folder / "idx2.npy", np.array([10, 0, 4], np.int32))
        return f"{folder}/idx2.npy: element 0 is 10, outside [0, 10)"
    if case == "an extra file":
        np.save(folder / "weights.npy", np.zeros(3, np.float32))
        return f"{folder}/weights.npy is not an input of the engine (see its description)"
    if case == "a missing input":
        (folder / "vals.npy").unlink()
        return f"--inputs: no file {folder}/vals.npy for input vals float16 [C,2]"
    if case == "a negative own_max index":
        (folder.parent / "model.engine.desc").write_text(GOOD.replace("index idx2 10", "index idx2 own_max"))
        np.save(folder / "idx2.npy", np.array([12, -1, 4], np.int32))
        return f"{folder}/idx2.npy: element 1 is -1, negative (its rows are its own largest value + 1)"
    if case == "the profile":
        np.save(s, np.zeros((9, 4), np.float32))
        return "--inputs: input S [9, 4] is outside the engine's profile [8, 4]..[8, 4] (its description)"
    raise AssertionError(case)


NPY_CASES = ["a negative own_max index", "big-endian", "fortran", "bool", "float64", "truncated", "longer", "not npy", "version 9", "another dtype",
             "a static dimension", "another rank", "a named dimension twice", "an index outside", "a negative index",
             "a constant rows index", "an extra file", "a missing input", "the profile"]


@pytest.mark.parametrize("case", NPY_CASES)
def test_each_bad_input_file_is_exit_2_and_one_line(recent_program, tmp_path, case):
    folder = folder_of(tmp_path / "inputs", good_inputs())
    description = described(tmp_path)
    message = broken(case, folder)  # may write its own description
    result = run_program(recent_program, "--plan", f"--description={description}", f"--inputs={folder}")
    assert_one_line(result, 2, message)


@pytest.mark.parametrize("case, message", [
    ("a state in step_1", "step_1/S.npy: S is a state (an output is written into its memory): it is read once, "
                          "from step_0, and stays in place"),
    ("a missing input in step_1", "--inputs: no file {folder}/step_1/rows.npy for input rows float32 [B,4]"),
    ("another shape in step_1", "step_1/idx.npy: int64 [4], the engine's input idx int64 [B]: dimension B is 5 "
                                "elsewhere"),
    ("an index outside in step_1", "step_1/idx.npy: element 0 is 8, outside [0, 8)"),
    ("a file beside the step folders", "{folder}/rows.npy lies beside the step_ folders: put each step's inputs in "
                                       "its step_K folder"),
    ("a gap before step_5", "step_5"),  # step_0, step_1, step_5: not 2 steps with step_5 left unread
])
def test_each_bad_step_folder_is_exit_2_and_one_line(recent_program, tmp_path, case, message):
    inputs = good_inputs()
    folder = tmp_path / "inputs"
    folder_of(folder / "step_0", inputs)
    later = {name: value for name, value in inputs.items() if name not in ("S", "T")}
    folder_of(folder / "step_1", later)
    if case == "a state in step_1":
        np.save(folder / "step_1/S.npy", inputs["S"])
    elif case == "a missing input in step_1":
        (folder / "step_1/rows.npy").unlink()
    elif case == "a file beside the step folders":
        np.save(folder / "rows.npy", inputs["rows"])
    elif case == "a gap before step_5":
        folder_of(folder / "step_5", later)
    elif case == "another shape in step_1":
        np.save(folder / "step_1/idx.npy", np.zeros(4, np.int64))
    else:
        np.save(folder / "step_1/idx.npy", np.array([8, 0, 0, 0, 0], np.int64))
    result = run_program(recent_program, "--plan", f"--description={described(tmp_path)}", f"--inputs={folder}")
    assert_one_line(result, 2, message.format(folder=folder))


@pytest.mark.parametrize("case, message", [
    ("a missing output", "--expected: no file {expected}/T_out.npy for output T_out float16 [M,2]"),
    ("another dtype", "{expected}/S_out.npy: float16 [8, 4], the engine's output S_out float32 [N,4]"),
    ("a named dimension", "{expected}/S_out.npy: float32 [9, 4], the engine's output S_out float32 [N,4]: "
                          "dimension N is 8 elsewhere"),
    ("an extra file", "{expected}/S.npy is not an output of the engine"),
    ("save_outputs not empty", "--save_outputs {out}: not an empty folder; give a new or an empty folder"),
])
def test_bad_expected_files_and_output_folders_are_exit_2_before_anything_runs(recent_program, tmp_path, case, message):
    inputs = good_inputs()
    arrays = {"S_out": inputs["S"], "T_out": inputs["T"], "total": np.float32(1.0)}
    expected, out = tmp_path / "expected", tmp_path / "out"
    if case == "a missing output":
        del arrays["T_out"]
    elif case == "another dtype":
        arrays["S_out"] = arrays["S_out"].astype(np.float16)
    elif case == "a named dimension":
        arrays["S_out"] = np.zeros((9, 4), np.float32)
    elif case == "an extra file":
        arrays["S"] = inputs["S"]
    folder_of(expected, arrays)
    if case == "save_outputs not empty":
        folder_of(out, {"mine": np.zeros(1, np.float32)})
    result = plan(recent_program, tmp_path, f"--expected={expected}", f"--save_outputs={out}", inputs=inputs)
    assert_one_line(result, 2, message.format(expected=expected, out=out))


@pytest.mark.parametrize("args, message", [
    (["--plan"], "--plan, --description, --expected and --save_outputs go with a model's engine: give --inputs=DIR"),
    (["--inputs=d"], "--inputs=DIR needs --engine=FILE (or --plan)"),
    (["--inputs=d", "--plan"], "--plan needs --engine=FILE or --description=FILE"),
    (["--engine=e", "--inputs=d", "--validate"], "--validate serves the sample's state run; --inputs runs a model's"),
    (["--engine=e", "--inputs=d", "--seed=3"], "--seed serves the sample's state run"),
    (["--engine=e", "--inputs=d", "--nodes=3"], "--nodes serves the sample's state run"),
    (["--engine=e", "--inputs="], "--inputs needs a file or folder name, got ''"),
    (["--engine=e", "--inputs=/does/not/exist"], "cannot read the engine description e.desc"),
])
def test_bad_model_arguments_exit_2_with_one_line(recent_program, args, message):
    assert_one_line(run_program(recent_program, *args), 2, message)


def test_without_a_tensorrt_runtime_a_model_run_is_exit_3_after_its_files_are_checked(program, tmp_path):
    headers, path = program
    engine = tmp_path / "model.engine"
    engine.write_bytes(b"not read before the runtime exists")
    description = tmp_path / "model.engine.desc"
    description.write_text(GOOD)
    folder = folder_of(tmp_path / "inputs", good_inputs())
    library = ".".join(BUILDS[headers].split(".")[:3])
    result = run_program(path, f"--engine={engine}", f"--inputs={folder}", "--steps=2")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Bindings (aliased_io_bindings.h):" in result.stdout
    assert f"no TensorRT runtime: createInferRuntime returned null (libnvinfer {library}" in result.stderr
    description.write_text(GOOD.replace("alias T_out T", "alias T_out S"))  # a bad one stops before the runtime
    assert_one_line(run_program(path, f"--engine={engine}", f"--inputs={folder}"), 2, "cannot share its memory")


def test_help_lists_the_model_options(recent_program):
    result = run_program(recent_program, "--help")
    for option in ("--inputs=DIR", "--description=F", "--expected=DIR", "--save_outputs=DIR", "--plan"):
        assert option in result.stdout


# --- end to end on the full TensorRT ------------------------------------------------------------------------------


@pytest.mark.tensorrt
@pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")
@pytest.mark.parametrize("plugin", ["python", "aot"])
def test_the_program_runs_a_models_engine_in_place_against_the_python_dry_run(tmp_path, plugin):
    """--onnx M --plugin P --save_engine E writes E and E.desc; the dry run's --save_outputs D gives the inputs of
    every step and the final state; the program binds X_out at the state, runs the steps and matches D/outputs."""
    if plugin == "aot":
        pytest.importorskip("tensorrt.plugin", reason="--plugin aot needs TensorRT >= 10.16 (tensorrt.plugin)")
    from tests.cli.test_cli_onnx_any import own_state_model

    path = installed_tensorrt_build(tmp_path)
    model, engine, saved = own_state_model(tmp_path), tmp_path / "own.engine", tmp_path / "run"
    shapes = ["--seed", "6", "--onnx", model, "--onnx_shapes", "state:100000x3,src:2000x3", "--steps", "5"]
    built = subprocess.run([sys.executable, CLI, "--plugin", plugin, *shapes, "--validate", "--save_engine",
                            str(engine)], capture_output=True, text=True, cwd=ROOT)
    assert built.returncode == 0, built.stdout + built.stderr
    assert Path(f"{engine}.desc").exists()
    dry = subprocess.run([sys.executable, CLI, "--dry-run", *shapes, "--validate", "--save_outputs", str(saved)],
                         capture_output=True, text=True, cwd=ROOT)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    out = tmp_path / "out"
    result = run_program(path, f"--engine={engine}", f"--inputs={saved}/inputs", f"--expected={saved}/outputs",
                         f"--save_outputs={out}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  output X_out float32 [N,3]: bound at input state's address" in result.stdout
    assert "Validation against reference successful!" in result.stdout
    assert "Steps: 5 execution(s), the states kept in their input buffers" in result.stdout
    np.testing.assert_allclose(np.load(out / "X_out.npy"), np.load(saved / "outputs/X_out.npy"), rtol=1e-4, atol=1e-4)
    # A description that is not the engine's (its output renamed) is refused once the engine is read: exit 2
    Path(f"{engine}.desc").write_text(Path(f"{engine}.desc").read_text().replace("X_out", "Y"))
    assert_one_line(run_program(path, f"--engine={engine}", f"--inputs={saved}/inputs"), 2,
                    f"the engine description {engine}.desc does not match --engine {engine}: engine output X_out is "
                    "not described as one")
