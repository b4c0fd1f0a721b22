"""The engine description beside a saved engine of a model of one's own (common/engine_description.py, E.desc):
written and read back, every rule refused in one line (the same texts the C++ reader refuses:
tests/cpp/test_cpp_model.py), checked against an engine's tensors; and the CLI flows without TensorRT: --save_outputs
of a dry run (the .npy files cpp/aliased_io_state reads), --load_engine E of a model's engine from its description
(the description and the inputs checked before TensorRT; --dry-run stops there), and every refusal before work.
The real engine path (--save_engine writing E.desc, --load_engine running it) is marked tensorrt at the end.
"""

from pathlib import Path

import numpy as np
import pytest

import aliased_io_plugin as cli
from common.errors import InputError
from common.engine_description import (
    IndexRows,
    TensorDescription,
    check_engine_tensors,
    describe_built_engine,
    describe_engine,
    description_path,
    format_description,
    parse_description,
    read_description,
)
from tests.support.onnx_helpers import REWRITE_MISSING, needs_export
from tests.support.onnx_models import F, zoo_feeds, zoo_path
from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_cli_onnx_any import npz

ROOT = Path(__file__).resolve().parents[2]

# Two states (one overwritten, one added into), an output of its own; the base of the refusals below.
GOOD = """format aliased_io_engine 1
# a comment line
plugin aot
input S float32 [N,4]
input T float16 [M,2]
input idx int64 [B]
input rows float32 [B,4]
input idx2 int32 [C]
input vals float16 [C,2]
output S_out float32 [N,4]
output T_out float16 [M,2]
output total float32 []
alias S_out S
alias T_out T
index idx S 0
index idx2 10
profile S [8,4] [8,4] [8,4]
"""


def edited(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


# (text, a part of the one line both readers print): each rule of docs/own_model_cpp.md broken once
BAD_DESCRIPTIONS = [
    ("", "not an engine description (its first line must be 'format aliased_io_engine 1')"),
    (edited("format aliased_io_engine 1", "format aliased_io_engine 2"),
     "format aliased_io_engine 2, this program reads 'aliased_io_engine 1' only"),
    (edited("format aliased_io_engine 1", "format onnx 1"), "not an engine description"),
    (edited("plugin aot\n", "plugin aot\nweights W\n"), "line 4: unknown record 'weights'"),
    (edited("input S float32 [N,4]", "input S float32"), "line 4: input takes 3 field(s), got 2"),
    (edited("plugin aot\n", ""), "0 plugin records, expected one"),
    (edited("plugin aot\n", "plugin aot\nplugin aot\n"), "2 plugin records, expected one"),
    (edited("plugin aot", "plugin trt"), "plugin 'trt', expected one of python, aot"),
    (edited("input T float16", "input S float16"), "tensor 'S' is described twice"),
    (edited("input S float32", "input S float64"), "input S has dtype 'float64', expected one of"),
    (edited("[N,4]", "[-1,4]"), "dimension '-1' of [-1,4] is"),
    (edited("[N,4]", "N,4"), "shape 'N,4' is not [D0,D1,...]"),
    (edited("alias S_out S", "alias S_out Q"), "'S_out' must be an output and 'Q' an input"),
    (edited("alias T_out T", "alias T_out S"), "so it cannot share its memory"),
    (edited("alias T_out T", "alias total S"), "so it cannot share its memory"),
    (edited("output T_out float16 [M,2]", "output T_out float32 [M,2]"), "so it cannot share its memory"),  # dtype only
    (edited("output total float32 []", "output S2 float32 [N,4]") + "alias S2 S\n",
     "two outputs are written into input S's memory"),
    (GOOD + "alias S_out S\n", "output S_out has two aliases"),
    (edited("index idx2 10", "index rows 10"), "index rows: not an int64 or int32 input"),
    (edited("index idx S 0", "index idx S 2"), "index idx S 2: no such input dimension"),
    (edited("index idx2 10", "index idx2 x"), "'x' is not a number"),
    (edited("index idx2 10", "index idx2 10 row=x"), "row 'x' is not a number"),
    (edited("index idx2 10", "index idx2 row=0 wraps"), "index takes ROWS, INPUT AXIS or own_max, then row=R"),
    (edited("index idx2 10", "index idx2 10 1 2 3 4"), "index takes 2 to 5 field(s), got 6"),
    (edited("index idx2 10", "index idx2 own_max\nindex idx2 10"), "index idx2 own_max: its only record"),
    (edited("index idx2 10", "index idx2 own_max wraps"), "index idx2 own_max: its only record"),
    (edited("index idx2 10", "index idx2 10 row=1\nindex idx2 10 row=1"), "index idx2: the same record twice"),
    (GOOD + "profile Q [1] [1] [1]\n", "profile Q: not an input"),
    (edited("profile S [8,4] [8,4] [8,4]", "profile S [8,5] [8,5] [8,5]"),
     "profile S: dimension 1 is 4 in the input, not in the profile"),
    (edited("profile S [8,4] [8,4] [8,4]", "profile S [9,4] [8,4] [8,4]"), "profile S: dimension 0 must satisfy"),
    (edited("profile S [8,4] [8,4] [8,4]", "profile S [8] [8] [8]"), "profile S: shapes of another rank than"),
    (edited("profile S [8,4] [8,4] [8,4]", "profile S [N,4] [8,4] [8,4]"), "dimension 'N' of [N,4] is not a size"),
    (edited("input vals float16 [C,2]", "input a/b float16 [C,2]"), "input 'a/b':"),
]
BAD_IDS = [message[:40] for _, message in BAD_DESCRIPTIONS]


def test_a_description_round_trips_through_its_text():
    description = parse_description(GOOD, "GOOD")
    assert description.plugin == "aot"
    assert description.aliases == {"S_out": "S", "T_out": "T"}
    assert description.inputs[0] == TensorDescription("S", "float32", ("N", 4))
    assert description.output("total") == TensorDescription("total", "float32", ())
    assert description.index_rows == {"idx": (IndexRows(input="S", axis=0),), "idx2": (IndexRows(rows=10),)}
    assert description.profile == {"S": ((8, 4), (8, 4), (8, 4))}
    text = format_description(description)
    assert text.startswith("format aliased_io_engine 1\n")
    assert parse_description(text, "again") == description
    own = parse_description(edited("index idx2 10", "index idx2 own_max"), "PyG's batch vector")
    assert own.index_rows["idx2"] == (IndexRows(own_max=True),)
    assert "index idx2 own_max\n" in format_description(own)


def test_each_row_of_an_index_keeps_its_own_bound_and_the_wrap_through_the_text():
    """to_hetero's edge_index [2, E]: row 0 indexes the users' rows, row 1 the items'; a model that wraps negative
    indices itself takes [-rows, rows). Every record is read back, in order."""
    text = edited("index idx2 10", "index idx2 S 0 row=0\nindex idx2 T 0 row=1 wraps\nindex idx2 10")
    description = parse_description(text, "hetero")
    assert description.index_rows["idx2"] == (IndexRows(input="S", row=0), IndexRows(input="T", row=1, wraps=True),
                                              IndexRows(rows=10))
    assert "index idx2 S 0 row=0\nindex idx2 T 0 row=1 wraps\nindex idx2 10\n" in format_description(description)
    assert parse_description(format_description(description), "again") == description


@pytest.mark.parametrize("text, message", BAD_DESCRIPTIONS, ids=BAD_IDS)
def test_each_broken_rule_is_one_line_naming_the_file(text, message):
    with pytest.raises(InputError) as raised:
        parse_description(text, "the engine description E.desc")
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert str(raised.value).startswith("the engine description E.desc")


def test_reading_a_file_refuses_what_is_missing_and_what_is_not_text(tmp_path):
    with pytest.raises(InputError, match=r"--load_engine: no engine description .*missing.desc beside the engine"):
        read_description(str(tmp_path / "missing.desc"))
    (tmp_path / "binary.desc").write_bytes(b"format aliased_io_engine 1\n\xff\xfe")
    with pytest.raises(InputError, match="not an engine description \\(not ASCII text\\)"):
        read_description(str(tmp_path / "binary.desc"))
    (tmp_path / "good.desc").write_text(GOOD)
    assert read_description(str(tmp_path / "good.desc")).aliases["T_out"] == "T"
    assert description_path("a/state.engine") == "a/state.engine.desc"


def test_a_built_engine_is_described_with_the_models_dimension_names():
    tensors = [("state", True, "float32", (-1, 3)), ("idx", True, "int64", (-1,)), ("src", True, "float32", (-1, 3)),
               ("X_out", False, "float32", (-1, 3)), ("y", False, "float32", (-1, 7))]
    model = {"state": ("N", 3), "idx": ("E",), "src": ("E", 3), "X_out": ("N", 3), "y": ("?", 7)}
    description = describe_built_engine("python", tensors, model, {"X_out": "state"}, {"idx": (IndexRows(input="state"),)},
                                        {"state": ((6, 3), (6, 3), (6, 3))})
    assert [t.shape for t in description.inputs] == [("N", 3), ("E",), ("E", 3)]
    assert description.output("y") == TensorDescription("y", "float32", ("?", 7))
    assert "alias X_out state\nindex idx state 0\nprofile state [6,3] [6,3] [6,3]\n" in format_description(description)
    check_engine_tensors(description, tensors, "it")  # it describes the engine it was made from


ENGINE = [("S", True, "float32", (-1, 4)), ("T", True, "float16", (-1, 2)), ("idx", True, "int64", (-1,)),
          ("rows", True, "float32", (-1, 4)), ("idx2", True, "int32", (-1,)), ("vals", True, "float16", (-1, 2)),
          ("S_out", False, "float32", (-1, 4)), ("T_out", False, "float16", (-1, 2)), ("total", False, "float32", ())]


@pytest.mark.parametrize("index, tensor, message", [
    (0, ("S", True, "float16", (-1, 4)), "S is float16 [-1,4] in the engine, float32 [N,4] in the description"),
    (0, ("S", True, "float32", (-1, 5)), "S is float32 [-1,5] in the engine"),
    (0, ("S", True, "float32", (-1,)), "S is float32 [-1] in the engine"),
    (6, ("S_out", True, "float32", (-1, 4)), "'S_out' is an engine input, described as an output"),
    (8, ("extra", False, "float32", ()), "the engine has no tensor 'total'"),
])
def test_an_engine_that_is_not_its_descriptions_is_refused(index, tensor, message):
    description = parse_description(GOOD, "GOOD")
    check_engine_tensors(description, ENGINE, "E.desc")
    changed = list(ENGINE)
    changed[index] = tensor
    with pytest.raises(InputError, match="E.desc does not match its engine") as raised:
        check_engine_tensors(description, changed, "E.desc")
    assert message in str(raised.value)
    with pytest.raises(InputError, match="engine tensor 'more' is not described"):
        check_engine_tensors(description, ENGINE + [("more", False, "float32", ())], "E.desc")


def test_describe_engine_checks_what_it_makes():
    with pytest.raises(InputError, match="cannot share its memory"):
        describe_engine("aot", [TensorDescription("x", "float32", (3,))], [TensorDescription("y", "int64", (3,))],
                        {"y": "x"})


# --- the CLI without TensorRT ------------------------------------------------------------------------------------

needs_rewrite = pytest.mark.skipif(REWRITE_MISSING is not None, reason=REWRITE_MISSING or "")


def own_model(tmp_path) -> str:
    from tests.cli.test_cli_onnx_any import own_state_model

    return own_state_model(tmp_path)


def saved_run(tmp_path, capsys, *extra: str) -> Path:
    """A dry run of the own-state model (state [6, 3], src [4, 3], idx [4]; 3 runs) with --save_outputs."""
    folder = tmp_path / "run"
    status = cli.main(["--dry-run", "--seed", "4", "--onnx", own_model(tmp_path), "--onnx_shapes",
                       "state:6x3,src:4x3", "--steps", "3", "--validate", "--save_outputs", str(folder), *extra])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert captured.out.rstrip().endswith(f"Inputs and outputs (.npy) saved to {folder}")
    return folder


@needs_rewrite
def test_save_outputs_writes_each_runs_inputs_and_the_final_outputs_of_the_dry_run(tmp_path, capsys):
    folder = saved_run(tmp_path, capsys)
    files = sorted(str(path.relative_to(folder)) for path in folder.rglob("*.npy"))
    assert files == ["inputs/step_0/idx.npy", "inputs/step_0/src.npy", "inputs/step_0/state.npy",
                     "inputs/step_1/idx.npy", "inputs/step_1/src.npy", "inputs/step_2/idx.npy",
                     "inputs/step_2/src.npy", "outputs/X_out.npy"]
    state = np.load(folder / "inputs/step_0/state.npy").astype(np.float64)
    for step in range(3):  # the saved inputs replayed in float64 give the saved final state
        np.add.at(state, np.load(folder / f"inputs/step_{step}/idx.npy"), np.load(folder / f"inputs/step_{step}/src.npy"))
    final = np.load(folder / "outputs/X_out.npy")
    assert final.dtype == np.float32 and final.shape == (6, 3)
    np.testing.assert_allclose(final, state, rtol=1e-5, atol=1e-6)
    assert not np.allclose(final, np.load(folder / "inputs/step_0/state.npy"))


@needs_rewrite
@pytest.mark.parametrize("case, message", [
    ("not empty", "the folder is not empty; give a new or an empty folder"),
    ("a file", "not a folder; give a new or an empty folder"),
    ("no --onnx", "--save_outputs writes the inputs and outputs of a model of your own: give --onnx MODEL.onnx"),
    ("the sample's graph", "--save_outputs writes the .npy inputs and outputs of a model of your own; the sample's"),
])
def test_save_outputs_is_refused_in_one_line_before_any_work(tmp_path, capsys, case, message):
    folder = tmp_path / "out"
    args = ["--dry-run", "--seed", "1", "--save_outputs", str(folder)]
    if case == "not empty":
        folder.mkdir()
        (folder / "keep.txt").write_text("mine")
        args += ["--onnx", own_model(tmp_path)]
    elif case == "a file":
        folder.write_text("mine")
        args += ["--onnx", own_model(tmp_path)]
    elif case == "the sample's graph":
        from export.export_onnx import main as export

        sample = tmp_path / "sample.onnx"
        assert export(["--network", "classifier", "--out", str(sample)]) == 0
        capsys.readouterr()
        args += ["--onnx", str(sample)]
    assert_one_line_error(cli.main(args), capsys.readouterr(), message)
    assert case in ("not empty", "a file") or not folder.exists()


@needs_rewrite
def test_a_failed_validation_writes_no_outputs(tmp_path, capsys, monkeypatch):
    from onnx_path.runtime import RewrittenSession

    correct = RewrittenSession.run
    monkeypatch.setattr(RewrittenSession, "run", lambda session, feeds: {
        name: value + 1 for name, value in correct(session, feeds).items()})
    folder = tmp_path / "run"
    status = cli.main(["--dry-run", "--seed", "4", "--onnx", own_model(tmp_path), "--validate", "--save_outputs",
                       str(folder)])
    assert status == 1 and not folder.exists() and not list(tmp_path.glob(".run.tmp-*"))
    assert "(--save_outputs: not written, since the run did not succeed.)" in capsys.readouterr().out


def loaded_engine(tmp_path, text: str = GOOD) -> Path:
    """An 'engine' file with a description beside it (the file's bytes are only read once TensorRT is there)."""
    engine = tmp_path / "own.engine"
    engine.write_bytes(b"engine bytes")
    Path(description_path(str(engine))).write_text(text)
    return engine


STATE_DESCRIPTION = format_description(describe_engine(
    "aot", [TensorDescription("state", "float32", ("N", 3)), TensorDescription("src", "float32", ("E", 3)),
            TensorDescription("idx", "int64", ("E",))], [TensorDescription("X_out", "float32", ("N", 3))],
    {"X_out": "state"}, {"idx": (IndexRows(input="state"),)},
    {"state": ((6, 3),) * 3, "src": ((4, 3),) * 3, "idx": ((4,),) * 3}))


def test_a_loaded_model_engine_dry_run_checks_the_description_and_the_inputs_before_tensorrt(tmp_path, capsys):
    engine = loaded_engine(tmp_path, STATE_DESCRIPTION)
    status = cli.main(["--dry-run", "--seed", "2", "--load_engine", str(engine), "--onnx_shapes", "state:6x3,src:4x3",
                       "--steps", "3"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert (f"Engine {engine}: a model of your own, described by {engine}.desc (aot plugin); its tensors bound so:\n"
            "  input state float32 [N,3]: a buffer of its own\n") in captured.out
    assert "  output X_out float32 [N,3]: bound at input state's address (in place)" in captured.out
    assert "  idx int64 [4]: indices in [0, 6), the rows of state it indexes" in captured.out
    assert "--steps: 3 runs; the states (state) stay in place" in captured.out
    assert f"Dry run: {engine}.desc and the inputs checked against it; no engine was loaded" in captured.out
    status = cli.main(["--dry-run", "--seed", "2", "--load_engine", str(engine)])  # the shapes: the profile's opt
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert ("Inputs made from the seed (dynamic dimensions: N=6 (the engine's profile state:6x3), E=4 (the engine's "
            "profile src:4x3)):\n  state float32 [6, 3]: standard normal\n") in captured.out


@pytest.mark.parametrize("args, description, message", [
    (["--onnx_shapes", "state:7x3,src:4x3"], STATE_DESCRIPTION,
     "input state [7, 3] is outside the engine's profile [6, 3]..[6, 3]"),
    (["--onnx_shapes", "state:6x3"], STATE_DESCRIPTION.replace("profile src [4,3] [4,3] [4,3]\n", ""),
     "input idx [16] is outside the engine's profile [4]..[4]"),
    ([], "format aliased_io_engine 1\nplugin aot\n", "at least one input and one output"),
    (["--validate"], STATE_DESCRIPTION, "--validate compares with ONNX Runtime running the original model"),
    (["--batch_edges", "4", "--steps", "2"], STATE_DESCRIPTION, "--batch_edges serves the sample's networks"),
    (["--plugin", "aot"], STATE_DESCRIPTION, "--plugin aot chooses the scatter-add of a new engine"),
    (["--onnx_shapes", "state:6x3,src:4x3", "--save_outputs", "OUT", "--dry-run"], STATE_DESCRIPTION,
     "a dry run of a loaded engine computes no outputs"),
])
def test_a_loaded_model_engine_is_refused_in_one_line_before_tensorrt(tmp_path, capsys, args, description, message):
    engine = loaded_engine(tmp_path, description)
    args = [str(tmp_path / arg) if arg == "OUT" else arg for arg in args]
    status = cli.main(["--dry-run", "--seed", "2", "--load_engine", str(engine), *args])
    assert_one_line_error(status, capsys.readouterr(), message)


def test_model_options_with_an_engine_that_has_no_description_are_refused(tmp_path, capsys):
    engine = tmp_path / "sample.engine"
    engine.write_bytes(b"engine bytes")
    assert_one_line_error(cli.main(["--load_engine", str(engine), "--onnx_shapes", "X:3x1"]), capsys.readouterr(),
                          f"--onnx_shapes runs a model of your own, but --load_engine {engine} has no engine "
                          f"description {engine}.desc beside it")


def test_a_loaded_model_engine_without_tensorrt_is_exit_3_after_the_checks(tmp_path, capsys):
    from tests.conftest import full_tensorrt_missing_reason

    if full_tensorrt_missing_reason() is None:
        pytest.skip("TensorRT and a GPU are here: the engine would run (the tensorrt tests below)")
    engine = loaded_engine(tmp_path, STATE_DESCRIPTION)
    folder = tmp_path / "out"
    status = cli.main(["--seed", "2", "--load_engine", str(engine), "--onnx_shapes", "state:6x3,src:4x3",
                       "--save_outputs", str(folder)])
    captured = capsys.readouterr()
    assert status == 3, captured.out + captured.err
    assert len(captured.err.splitlines()) == 1 and "--dry-run" in captured.err  # before any input is made
    assert not folder.exists()


@needs_rewrite
def test_save_engine_checks_the_description_beside_it_before_any_work(tmp_path, capsys):
    engine = tmp_path / "own.engine"
    Path(description_path(str(engine))).mkdir()
    assert_one_line_error(cli.main(["--seed", "1", "--onnx", own_model(tmp_path), "--save_engine", str(engine)]),
                          capsys.readouterr(), f"--save_engine's description {engine}.desc: is a folder")


@needs_rewrite
def test_the_description_of_a_models_engine_is_held_and_written_with_it(tmp_path, capsys, monkeypatch):
    """What run_model holds for --save_engine after the engine run (its tensors as TensorRT reports them; here as
    they would be): E.desc with the rewrite's aliases, the model's dimension names, the index rows and the
    run's profile, written by the run's OutputFiles. TensorRT's presence, checked while planning, is stood in for."""
    from cli import own_model as planning
    from cli.own_run import hold_description
    from cli.options import parse_arguments

    monkeypatch.setattr(planning, "require_engine", lambda plugin: None)

    engine = tmp_path / "own.engine"
    plan = cli.read_inputs(parse_arguments(["--seed", "1", "--plugin", "aot", "--onnx", own_model(tmp_path),
                                            "--onnx_shapes", "state:6x3,src:4x3", "--save_engine", str(engine)]))
    capsys.readouterr()
    tensors = [("state", True, "float32", (-1, 3)), ("src", True, "float32", (-1, 3)), ("idx", True, "int64", (-1,)),
               ("X_out", False, "float32", (-1, 3))]
    hold_description(plan, tensors, ["state", "src", "idx"])
    assert plan.engine.outputs.write() == [f"Engine description saved to {engine}.desc"]
    assert read_description(f"{engine}.desc") == describe_engine(
        "aot", [TensorDescription("state", "float32", ("N", 3)), TensorDescription("src", "float32", ("E", 3)),
                TensorDescription("idx", "int64", ("E",))], [TensorDescription("X_out", "float32", ("N", 3))],
        {"X_out": "state"}, {"idx": (IndexRows(input="state"),)},
        {"state": ((6, 3),) * 3, "src": ((4, 3),) * 3, "idx": ((4,),) * 3})
    assert not engine.exists()  # the engine's bytes come from the engine run only


def pool_model(tmp_path) -> str:
    """pooled = zeros [max(batch) + 1, 3].index_add(0, batch, x) (global_add_pool(x, batch) without `size`, as
    the exporter writes it): its index bounds its own rows (own_max)."""
    from onnx import TensorProto, helper, numpy_helper, save

    value = helper.make_tensor_value_info
    nodes = [helper.make_node("ReduceMax", ["batch"], ["largest"], keepdims=1),
             helper.make_node("Add", ["largest", "one"], ["graphs"]),
             helper.make_node("Concat", ["graphs", "width"], ["shape"], axis=0),
             helper.make_node("ConstantOfShape", ["shape"], ["zeros"],
                              value=helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])),
             helper.make_node("Unsqueeze", ["batch", "axes"], ["column"]),
             helper.make_node("ScatterND", ["zeros", "column", "x"], ["pooled"], name="pool", reduction="add")]
    graph = helper.make_graph(nodes, "pool", [value("x", TensorProto.FLOAT, ["N", 3]), value("batch", TensorProto.INT64, ["N"])],
                              [value("pooled", TensorProto.FLOAT, ["B", 3])],
                              [numpy_helper.from_array(np.array([1], np.int64), "one"),
                               numpy_helper.from_array(np.array([3], np.int64), "width"),
                               numpy_helper.from_array(np.array([1], np.int64), "axes")])
    path = tmp_path / "pool.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return str(path)


def held_description(tmp_path, monkeypatch, model: str, shapes: str, tensors: list) -> Path:
    """The engine path of --save_engine of `model` (`tensors`: the engine's I/O as TensorRT would report them):
    the description run_model holds after the engine run, written as the run's OutputFiles write it. TensorRT's
    presence, checked while planning, is stood in for. Returns the engine's path (E.desc lies beside it)."""
    from cli import own_model as planning
    from cli.own_run import hold_description
    from cli.options import parse_arguments

    monkeypatch.setattr(planning, "require_engine", lambda plugin: None)
    engine = tmp_path / "held.engine"
    plan = cli.read_inputs(parse_arguments(["--seed", "1", "--plugin", "aot", "--onnx", model, "--onnx_shapes", shapes,
                                            "--save_engine", str(engine)]))
    hold_description(plan, tensors, [name for name, is_input, _, dims in tensors if is_input and -1 in dims])
    assert plan.engine.outputs.write() == [f"Engine description saved to {engine}.desc"]
    engine.write_bytes(b"engine bytes")  # the engine run writes them; only read once TensorRT is there
    return engine


@needs_rewrite
def test_the_held_description_keeps_an_index_that_bounds_its_own_rows(tmp_path, capsys, monkeypatch):
    """A batch vector (own_max: global_add_pool without `size`) stays in E.desc, so that --load_engine and
    cpp/ check it (a negative entry is refused) instead of taking any value."""
    engine = held_description(tmp_path, monkeypatch, pool_model(tmp_path), "x:6x3",
                              [("x", True, "float32", (-1, 3)), ("batch", True, "int64", (-1,)),
                               ("pooled", False, "float32", (-1, 3))])
    assert read_description(f"{engine}.desc").index_rows == {"batch": (IndexRows(own_max=True),)}


HETERO_ENGINE = [("U", True, "float32", (-1, F)), ("X", True, "float32", (-1, F)), ("edge_index", True, "int64", (2, -1)),
                 ("X_out", False, "float32", (-1, F))]


@needs_export
def test_a_loaded_engine_checks_each_row_of_an_edge_index_against_the_rows_it_indexes(tmp_path_factory, tmp_path,
                                                                                        capsys, monkeypatch):
    """to_hetero's edge_index [2, E] (row 0 gathers the 50 users' rows U, row 1 adds into the 70 items' X): E.desc
    keeps both rows' bounds, so --load_engine refuses a row 0 value of 55 (past U) that the items' 70 rows would
    admit, and takes 69 in row 1."""
    engine = held_description(tmp_path, monkeypatch, str(zoo_path(tmp_path_factory, "two_node_types")),
                              "U:50x3,X:70x3,edge_index:2x400", HETERO_ENGINE)
    capsys.readouterr()
    assert read_description(f"{engine}.desc").index_rows["edge_index"] == (IndexRows(input="X", row=1),
                                                                          IndexRows(input="U", row=0))
    feeds = zoo_feeds("two_node_types", seed=2, sizes={"B": 50, "N": 70, "E": 400})
    feeds["edge_index"][0] %= 50  # drawn in [0, N)
    feeds["edge_index"][1, 3] = 69
    status = cli.main(["--dry-run", "--load_engine", str(engine), "--onnx_inputs", npz(tmp_path, **feeds)])
    assert status == 0, capsys.readouterr()
    capsys.readouterr()
    feeds["edge_index"][0, 7] = 55
    status = cli.main(["--dry-run", "--load_engine", str(engine), "--onnx_inputs", npz(tmp_path, **feeds)])
    assert_one_line_error(status, capsys.readouterr(), "edge_index[0, 7] = 55 is outside [0, 50), the rows of U")


@needs_export
def test_a_loaded_engine_of_a_model_that_wraps_negative_indices_takes_them(tmp_path_factory, tmp_path, capsys,
                                                                          monkeypatch):
    """torch.where(idx < 0, idx + N, idx): E.desc says `wraps`, so --load_engine takes [-N, N) as the run did."""
    engine = held_description(tmp_path, monkeypatch, str(zoo_path(tmp_path_factory, "wrap_negative")),
                              "X:9x3,src:23x3", [("X", True, "float32", (-1, F)), ("src", True, "float32", (-1, F)),
                                                 ("idx", True, "int64", (-1,)), ("X_out", False, "float32", (-1, F))])
    capsys.readouterr()
    assert read_description(f"{engine}.desc").index_rows == {"idx": (IndexRows(input="X", wraps=True),)}
    feeds = zoo_feeds("wrap_negative", seed=2, sizes={"N": 9, "E": 23})
    feeds["idx"][5] = -9
    status = cli.main(["--dry-run", "--load_engine", str(engine), "--onnx_inputs", npz(tmp_path, **feeds)])
    assert status == 0, capsys.readouterr()
    capsys.readouterr()
    feeds["idx"][5] = -10
    status = cli.main(["--dry-run", "--load_engine", str(engine), "--onnx_inputs", npz(tmp_path, **feeds)])
    assert_one_line_error(status, capsys.readouterr(), "idx[5] = -10 is outside [-9, 9)")


# --- the real engine path (TensorRT and a GPU) -------------------------------------------------------------------


@pytest.mark.tensorrt
@needs_rewrite
@pytest.mark.parametrize("plugin", ["python", "aot"])
def test_a_saved_model_engine_is_described_and_runs_again_from_its_description(tmp_path, capsys, plugin):
    from tests.conftest import full_tensorrt_missing_reason

    reason = full_tensorrt_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    engine, built, loaded = tmp_path / "own.engine", tmp_path / "built", tmp_path / "loaded"
    shapes = ["--onnx_shapes", "state:20000x3,src:500x3", "--steps", "4"]
    status = cli.main(["--seed", "5", "--plugin", plugin, "--onnx", own_model(tmp_path), *shapes, "--validate",
                       "--save_engine", str(engine), "--save_outputs", str(built)])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert f"Engine description saved to {engine}.desc" in captured.out
    description = read_description(description_path(str(engine)))
    assert description.plugin == plugin and description.aliases == {"X_out": "state"}
    assert [(t.name, t.dtype) for t in description.inputs] == [("state", "float32"), ("src", "float32"),
                                                                ("idx", "int64")]
    assert description.profile["state"] == ((20000, 3),) * 3
    status = cli.main(["--seed", "5", "--load_engine", str(engine), *shapes, "--save_outputs", str(loaded)])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert "the runner binds X_out at state's address" in captured.out
    np.testing.assert_array_equal(np.load(loaded / "inputs/step_3/idx.npy"), np.load(built / "inputs/step_3/idx.npy"))
    np.testing.assert_allclose(np.load(loaded / "outputs/X_out.npy"), np.load(built / "outputs/X_out.npy"),
                               rtol=1e-4, atol=1e-4)
