"""Bad input and signals as a new user meets them: paths the system refuses, control characters in names,
Ctrl-C, a full disk, --save_engine over an input, abbreviated options, the checks that the arguments alone
decide (made before any work), and the wording of the edge messages. Each ends with one line on stderr and its
exit status, nothing written. The permission cases run the CLI as a user other than root (created with
useradd where the tests run as root), since root may enter every folder."""

import functools
import os
import pwd
import signal
import stat
import subprocess
import sys
import tempfile
import unittest.mock
from pathlib import Path

import numpy as np
import pytest

import aliased_io_plugin as cli
from common.errors import InputError
from tests.cli.test_cli import (
    ROOT,
    SCRIPT,
    assert_no_results,
    assert_one_line_error,
    assert_one_line_error_from_subprocess,
    run_cli,
    run_main,
)
from tests.support.onnx_helpers import NUM_CLASSES, NUM_FEATURES, needs_export, sample_model

PATH_OPTIONS = ["--graph", "--node_features_file", "--load_engine", "--save_engine", "--onnx", "--save_onnx"]
TEST_USER = "aliasedio-test"


def path_args(option: str, path: str) -> list[str]:
    """A command line that reaches `option`'s check ("--graph PATH" needs no other input)."""
    return [option, path, "--dry-run", "--seed", "1"]


# --- paths the operating system refuses ----------------------------------------------------------------------
# Every option in this process (run_main), one of them also through a subprocess (run_cli): the refusal is
# the same code for all six, the process adds only the exit status and stderr as a user gets them.
@pytest.mark.parametrize("option, run", [*((option, run_main) for option in PATH_OPTIONS), ("--graph", run_cli)],
                         ids=[*PATH_OPTIONS, "--graph-subprocess"])
def test_a_name_longer_than_the_system_allows_is_one_line_for_every_path_option(option, run):
    name = "a" * (os.pathconf("/", "PC_NAME_MAX") + 1)
    result = run(*path_args(option, name))
    assert_one_line_error_from_subprocess(result, f"{option} {'a' * 60}...")
    assert "the name is longer than this system allows" in result.stderr and f"({len(name)} characters)" in result.stderr


@pytest.mark.parametrize("option", PATH_OPTIONS)
@pytest.mark.parametrize("name", ["graph\nfile", "\x1b[31mred", "tab\there", " padded "])
def test_control_characters_in_a_name_are_quoted_one_way_for_every_path_option(option, name):
    result = run_main(*path_args(option, f"missing_folder/{name}" if option.startswith("--save") else name))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert repr(name)[1:-1] in result.stderr  # escaped as Python writes it, inside the quoted name
    assert "\x1b" not in result.stderr and "\t" not in result.stderr


@pytest.mark.parametrize("option", ["--graph", "--save_engine"])
def test_control_characters_in_a_name_reach_the_terminal_escaped_from_the_script(option):
    """The same refusal through a subprocess, as the user's terminal gets it (one name of each kind at once)."""
    name = "\x1b[31mred\ttab\nline"
    result = run_cli(*path_args(option, f"missing_folder/{name}" if option.startswith("--save") else name))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert repr(name)[1:-1] in result.stderr and "Traceback" not in result.stderr
    assert "\x1b" not in result.stderr and "\t" not in result.stderr


@functools.lru_cache(maxsize=None)
def unprivileged_user() -> tuple[int, int] | str:
    """(uid, gid) of a user that is not root (this process's own when it is not root; as root, TEST_USER,
    created with useradd if missing), or the reason there is none."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    try:
        entry = pwd.getpwnam(TEST_USER)
    except KeyError:
        created = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", TEST_USER],
                                 capture_output=True, text=True)
        if created.returncode != 0:
            return f"useradd {TEST_USER} failed: {created.stderr.strip()}"
        entry = pwd.getpwnam(TEST_USER)
    return entry.pw_uid, entry.pw_gid


def run_as_unprivileged(args: list[str], cwd: str) -> subprocess.CompletedProcess:
    """The CLI run as a user who is not root. As root: through runuser where that user may execute this
    interpreter, else in a child that imports the CLI (its modules may live where only root can read) and then
    gives up root (setgid/setuid) before main() runs, so that every check of the run is the user's."""
    user = unprivileged_user()
    if isinstance(user, str):
        pytest.skip(user)
    uid, gid = user
    if os.geteuid() != 0:
        return subprocess.run([sys.executable, SCRIPT, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    probe = subprocess.run(["runuser", "-u", TEST_USER, "--", sys.executable, "-c", "import numpy"],
                           capture_output=True, timeout=60)
    if probe.returncode == 0:
        return subprocess.run(["runuser", "-u", TEST_USER, "--", sys.executable, SCRIPT, *args], cwd=cwd,
                              capture_output=True, text=True, timeout=120)
    code = (f"import os, sys; sys.path.insert(0, {str(ROOT)!r}); import aliased_io_plugin as cli; "
            f"cli.parse_arguments({args!r}); "  # loads what argparse imports lazily (gettext, locale)
            f"os.setgroups([]); os.setgid({gid}); os.setuid({uid}); assert os.geteuid() != 0; "
            f"sys.exit(cli.main({args!r}))")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def guarded_folders():
    """A folder every user may enter, holding `locked/` (no one but its owner, root or this user, may enter it),
    `secret.npy` (readable by no one else), `read_only/` (not writable) and `open.npz` (a graph anyone may read)."""
    base = Path(tempfile.mkdtemp(prefix="aliasedio-perm-"))
    base.chmod(0o755)
    (base / "locked").mkdir()
    np.savez(base / "locked" / "graph.npz", edges=np.array([[0, 1], [1, 0]]))
    np.save(base / "secret.npy", np.ones(2))
    np.savez(base / "open.npz", edges=np.array([[0, 1], [1, 0]]))
    (base / "read_only").mkdir()
    (base / "open.npz").chmod(0o644)
    (base / "locked").chmod(0o000)
    (base / "secret.npy").chmod(0o000)
    (base / "read_only").chmod(0o555)
    yield base
    for path in (base / "locked", base / "secret.npy", base / "read_only"):
        path.chmod(stat.S_IRWXU)
    subprocess.run(["rm", "-rf", str(base)], check=True)


@pytest.mark.parametrize("option", PATH_OPTIONS)
def test_a_folder_on_the_way_that_the_user_may_not_enter_is_one_line_for_every_path_option(guarded_folders, option):
    path = str(guarded_folders / "locked" / ("new.engine" if option.startswith("--save") else "graph.npz"))
    result = run_as_unprivileged(path_args(option, path), str(guarded_folders))
    assert_one_line_error_from_subprocess(result, f"{option} {path}: permission denied (a folder on the way may not be entered)")


@pytest.mark.parametrize("args, message", [
    (["--node_features_file", "{base}/secret.npy", "--graph", "{base}/open.npz"],
     "--node_features_file {base}/secret.npy: not readable (permission denied)"),
    (["--graph", "{base}/open.npz", "--save_engine", "{base}/read_only/new.engine"],
     "--save_engine {base}/read_only/new.engine: not writable (the folder {base}/read_only is not)"),
])
def test_files_and_folders_the_user_may_not_read_or_write_are_one_line(guarded_folders, args, message):
    base = str(guarded_folders)
    result = run_as_unprivileged([arg.format(base=base) for arg in args] + ["--seed", "1"], base)
    assert_one_line_error_from_subprocess(result, message.format(base=base))
    assert not (guarded_folders / "read_only" / "new.engine").exists()


# --- Ctrl-C and a full disk ------------------------------------------------------------------------------------
def test_ctrl_c_during_a_long_step_is_one_line_interrupted_and_exit_130():
    # A session started with SIGINT ignored (a background job of a non-interactive shell: `pytest &`) passes
    # that on through exec, and the script would then run to the end: the child gets the default, as from a
    # terminal (a handled signal is reset to the default at exec).
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = subprocess.Popen([sys.executable, SCRIPT, "--random_graph", "20000000", "20000000", "--num_classes",
                                    "1", "--dry-run", "-v", "--seed", "1"], cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    seen = b""
    while b"Drawing a random graph" not in seen:  # the progress line, written (without its end) when the step starts
        chunk = os.read(process.stderr.fileno(), 4096)
        assert chunk, f"the run ended before drawing: {seen!r}"
        seen += chunk
    process.send_signal(signal.SIGINT)
    stdout, rest = process.communicate(timeout=60)
    stderr = (seen + rest).decode()
    assert process.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "aliased_io_plugin.py: error: interrupted"
    assert stderr.endswith(" ...\naliased_io_plugin.py: error: interrupted\n")  # the step's line ended first
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert_no_results(stdout.decode())


def test_an_interrupt_anywhere_in_the_run_is_exit_130(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "read_graph", interrupted)
    assert cli.main(["--seed", "1"]) == 130
    assert capsys.readouterr().err == "aliased_io_plugin.py: error: interrupted\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("args", [["--dry-run", "--seed", "1"], ["--help"],
                                  ["--dry-run", "--random_graph", "3000", "30000", "--seed", "1"]])
def test_output_to_a_full_disk_is_one_line_and_exit_74_not_1(args):
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT, stdout=full, stderr=subprocess.PIPE,
                                text=True, timeout=120)
    assert result.returncode == cli.EXIT_OUTPUT_FAILED == 74
    assert result.stderr == "aliased_io_plugin.py: error: cannot write the output to stdout: No space left on device\n"


# --- --save_engine over an input, the script, or what is not a regular file -------------------------------------
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "g.npz"
    np.savez(path, edges=np.array([[0, 1], [1, 2], [2, 0]]))
    return path


@pytest.mark.parametrize("target, message", [
    ("{graph}", "--save_engine {graph} is the --graph file; writing there would overwrite it"),
    ("{link}", "--save_engine {link} is the --graph file"),
    ("{features}", "--save_engine {features} is the --node_features_file file"),
    ("{script}", "--save_engine {script} is this script"),
    ("{fifo}", "--save_engine {fifo}: not a regular file (a FIFO, socket or device)"),
    ("/dev/null", "--save_engine /dev/null: not a regular file"),
    ("{tmp}", "is a folder, expected a file name"),
    ("{tmp}/new.py", "--save_engine {tmp}/new.py: a Python file's name (.py); give the output a name of its own"),
])
def test_save_engine_never_overwrites_an_input_the_script_or_a_non_regular_file(tmp_path, target, message):
    graph = graph_file(tmp_path)
    features = tmp_path / "f.npy"
    np.save(features, np.ones(3))
    (tmp_path / "link.npz").symlink_to(graph)
    os.mkfifo(tmp_path / "fifo")
    names = {"graph": graph, "link": tmp_path / "link.npz", "features": features, "script": SCRIPT,
             "fifo": tmp_path / "fifo", "tmp": tmp_path}
    before = graph.read_bytes(), features.read_bytes()
    run = run_cli if target == "{graph}" else run_main  # one through the script, the others in this process
    result = run("--graph", str(graph), "--node_features_file", str(features), "--save_engine",
                 target.format(**names), "--seed", "1")  # no --dry-run: refused before any work all the same
    assert_one_line_error_from_subprocess(result, message.format(**names))
    assert result.stdout == "" and (graph.read_bytes(), features.read_bytes()) == before


# --- option names --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--val"], "unrecognized arguments: --val"),
    (["--preci", "fp16"], "unrecognized arguments: --preci fp16"),
    (["--dry"], "unrecognized arguments: --dry"),
    (["--random", "10", "20"], "unrecognized arguments: --random 10 20"),
])
def test_abbreviated_options_are_refused(capsys, args, message):
    assert_one_line_error(cli.main([*args, "--seed", "1"]), capsys.readouterr(), message)


@pytest.mark.parametrize("spelling", ["--dry-run", "--dry_run"])
def test_both_spellings_of_an_option_still_work(capsys, spelling):
    assert cli.main([spelling, "--seed", "1"]) == 0
    assert "no engine was built" in capsys.readouterr().out


# --- what the arguments alone decide, before any work -----------------------------------------------------------
@pytest.fixture
def no_drawing(monkeypatch):
    """Fails the test if a random graph is drawn: the check must come before that work."""
    import cli.inputs

    def drawn(*args, **kwargs):
        raise AssertionError("the graph was drawn before the arguments were checked")

    monkeypatch.setattr(cli.inputs, "random_graph", drawn)


@pytest.mark.parametrize("args, message", [
    (["--random_graph", "100000000", "100000000"],
     "--num_classes 3 with 100,000,000 nodes gives a [3, 100000000] output, more than the limit of 134,217,728 values"),
    (["--random_graph", "100000000", "100000000", "--num_classes", "1", "--node_features_file", "{features}"],
     "the node features describe 5 nodes but --random_graph asks for 100,000,000"),
    (["--random_graph", "1000", "100000", "--max_edges", "5000"], "the graph has 100,000 edges, more than --max_edges 5,000"),
    (["--random_graph", "1000", "100000", "--max_nodes", "999"], "the graph has 1,000 nodes, more than --max_nodes 999"),
    (["--random_graph", "1000", "10", "--steps", "2", "--batch_edges", "3"], "EDGES (10) must be at least NODES (1,000)"),
    (["--random_graph", "1000", "1000", "--steps", "2", "--batch_edges", "300", "--max_edges", "200"],
     "each --steps batch has 300 edges, more than --max_edges 200"),
])
def test_checks_the_arguments_decide_come_before_the_graph_is_drawn(no_drawing, tmp_path, capsys, args, message):
    features = tmp_path / "five.npy"
    np.save(features, np.arange(5.0))
    status = cli.main([arg.format(features=features) for arg in args] + ["--seed", "1"])
    assert_one_line_error(status, capsys.readouterr(), message)


# --- messages about edges ----------------------------------------------------------------------------------------
def test_an_edge_past_the_default_nodes_says_the_features_are_the_default(capsys):
    status = cli.main(["--edges", "[[0,1],[1,2],[2,3],[3,0],[0,4]]", "--dry-run"])
    assert_one_line_error(status, capsys.readouterr(), "edge 4 (0 -> 4) refers to a node that does not exist; there are "
                          "4 nodes (ids 0..3), from the default --node_features [1.0,3.0,5.0,7.0], as none were given")
    status = cli.main(["--edges", "[[0,1],[1,0]]", "--dry-run"])
    assert_one_line_error(status, capsys.readouterr(), "(4 nodes, from the default --node_features")
    status = cli.main(["--edges", "[[0,1],[1,0]]", "--node_features", "[1,2,3]", "--dry-run"])
    assert "default" not in capsys.readouterr().err  # features given: nothing to explain


def test_edges_count_from_0_and_lines_from_1_and_an_edge_list_names_both(tmp_path, capsys):
    edges = tmp_path / "edges.txt"
    edges.write_text("# source target\n0 1\n\n1 2\n2 0\n0 7\n")  # edge 3 is on line 6
    status = cli.main(["--graph", str(edges), "--node_features", "[1,2,3]", "--dry-run"])
    assert_one_line_error(status, capsys.readouterr(), "edges: edge 3 (0 -> 7) refers to a node that does not exist; "
                          f"there are 3 nodes (ids 0..2) (line 6 of --graph {edges})")
    edges.write_text("0 1\n# c\n1 2\n2 x\n")
    status = cli.main(["--graph", str(edges), "--dry-run"])
    assert_one_line_error(status, capsys.readouterr(), f"--graph {edges}: line 4 (edge 2): 'x' is not a node id")
    edges.write_text("0 1\n1\n")
    status = cli.main(["--graph", str(edges), "--dry-run"])
    assert_one_line_error(status, capsys.readouterr(), f"--graph {edges}: line 2 has 1 value; each line holds")
    archive = tmp_path / "edges.npz"
    np.savez(archive, edges=np.array([[0, 1], [1, 2], [2, 0], [0, 7]]), node_features=np.ones(3))
    status = cli.main(["--graph", str(archive), "--dry-run"])
    captured = capsys.readouterr()
    assert_one_line_error(status, captured, "edges: edge 3 (0 -> 7) refers to a node that does not exist")
    assert "line" not in captured.err  # an .npz has rows, not lines



# --- output files: checked before any work, written last and only by a run that succeeded ------------------------
MODEL_ARGS = ["--seed", "1"]
STEPS = ["--steps", "2", "--batch_edges", "3"]


@pytest.mark.parametrize("extra", [["--dry-run"], [], ["--dry-run", *STEPS], STEPS],
                         ids=["dry-run", "run", "dry-run steps", "run steps"])
@pytest.mark.parametrize("option", ["--save_onnx", "--save_engine"])
@pytest.mark.parametrize("target", ["/proc/x.out", "/sys/x.out", "/proc/version"])
def test_an_output_in_proc_or_sys_is_one_line_before_any_work(tmp_path, capsys, target, option, extra):
    """/proc and /sys take no new file (the check creates and removes one beside the target, as the writing
    does): exit 2 and one line before the seed is drawn, with or without --dry-run, not a traceback at the end."""
    model = tmp_path / "gnn.onnx"
    model.write_bytes(b"never read: the output is refused first")
    status = cli.main(["--onnx", str(model), option, target, *MODEL_ARGS, *extra])
    captured = capsys.readouterr()
    assert_one_line_error(status, captured, f"{option} {target}: cannot write there: the folder /")
    assert captured.out == ""
    assert sorted(path.name for path in tmp_path.iterdir()) == ["gnn.onnx"]


@pytest.mark.parametrize("second", ["{out}", "./{out}", "{link}", "{sub}/../{out}"])
def test_one_file_for_both_outputs_is_refused(tmp_path, monkeypatch, capsys, second):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gnn.onnx").write_bytes(b"never read")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.out").symlink_to(tmp_path / "both.out")  # a link to a file not yet written
    names = {"out": "both.out", "link": "link.out", "sub": "sub"}
    status = cli.main(["--onnx", "gnn.onnx", "--save_engine", "both.out", "--save_onnx", second.format(**names),
                       "--dry-run", *MODEL_ARGS])
    captured = capsys.readouterr()
    assert_one_line_error(status, captured, f"--save_onnx {second.format(**names)} is also --save_engine's file")
    assert captured.out == ""
    assert sorted(path.name for path in tmp_path.iterdir()) == ["gnn.onnx", "link.out", "sub"]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_an_output_gets_the_mode_a_new_file_gets_under_the_users_umask(tmp_path, umask, mode):
    from common.paths import write_output

    previous = os.umask(umask)
    try:
        write_output(str(tmp_path / "m.onnx"), b"model", "--save_onnx")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "m.onnx").stat().st_mode) == mode
    assert sorted(path.name for path in tmp_path.iterdir()) == ["m.onnx"]  # the temporary file renamed


def test_an_output_over_a_file_keeps_its_mode_and_goes_through_a_link(tmp_path):
    from common.paths import write_output

    target = tmp_path / "kept.engine"
    target.write_bytes(b"old")
    target.chmod(0o640)
    (tmp_path / "link.engine").symlink_to(target)
    write_output(str(tmp_path / "link.engine"), b"new", "--save_engine")
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert (tmp_path / "link.engine").is_symlink()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kept.engine", "link.engine"]


def test_a_failed_write_leaves_neither_the_output_nor_a_temporary_file(tmp_path, monkeypatch):
    from common.paths import write_output

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(InputError, match=r"^--save_onnx \S*new.onnx: No space left on device$"):
        write_output(str(tmp_path / "new.onnx"), b"model", "--save_onnx")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("outcome", ["succeeded", "validation failed", "engine failed"])
def test_save_engine_is_written_last_and_only_when_the_run_succeeded(tmp_path, monkeypatch, capsys, outcome):
    """The CLI's plumbing, with network.steps.run_steps standing in for TensorRT (its StepsResult carries the
    serialized engine): the engine file appears after every other line of a run that succeeded, with the
    mode of a new file; a failed validation (exit 1) or an engine error (exit 4) leaves nothing behind."""
    import network.steps
    import reference.state
    from tests.support.engine_stand_ins import steps_result
    from common.errors import EngineError

    def engine_steps(graph, precision, batches, **kwargs):
        if outcome == "engine failed":
            raise EngineError("TensorRT could not execute the engine")
        final_state = reference.state.expected_final_state(graph.node_features, batches, graph.state)
        if outcome == "validation failed":
            final_state[0, 0] += 1.0
        return steps_result(final_state, engine_data=b"serialized engine")

    monkeypatch.setattr(network.steps, "run_steps", engine_steps)
    engine = tmp_path / "state.engine"
    previous = os.umask(0o022)
    try:
        status = cli.main([*MODEL_ARGS, *STEPS, "--validate", "--save_engine", str(engine)])
    finally:
        os.umask(previous)
    out = capsys.readouterr().out
    assert status == {"succeeded": 0, "validation failed": 1, "engine failed": 4}[outcome]
    if outcome == "succeeded":
        assert engine.read_bytes() == b"serialized engine" and stat.S_IMODE(engine.stat().st_mode) == 0o644
        assert out.splitlines()[-1] == f"Engine saved to {engine}"
    else:
        assert list(tmp_path.iterdir()) == []
        assert ("(--save_engine: not written, since the run did not succeed.)" in out) == (outcome == "validation failed")


@needs_export
def test_save_onnx_of_a_dry_run_gets_the_umask_mode_and_is_written_after_the_output(tmp_path_factory, tmp_path, capsys):
    """The rewritten model of a dry run that succeeded, in a real run of the CLI: mode 0644 under umask 022 (it
    was 0600), its line last, no temporary file beside it."""
    import onnx

    model = sample_model(tmp_path_factory, "classifier", "fp32")
    out = tmp_path / "rewritten.onnx"
    previous = os.umask(0o022)
    try:
        status = cli.main(["--dry-run", "--seed", "1", "--random_graph", "5", "9", "--num_classes", str(NUM_CLASSES),
                           "--node_features", str([[1.0] * NUM_FEATURES] * 5), "--onnx", str(model),
                           "--save_onnx", str(out)])
    finally:
        os.umask(previous)
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert captured.out.splitlines()[-1] == f"Rewritten model saved to {out}"
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert "ScatterAddInPlace" in [node.op_type for node in onnx.load(str(out)).graph.node]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["rewritten.onnx"]


def test_a_model_that_does_not_serialize_is_one_line():
    from common.paths import serialized_model

    class TooLarge:
        def SerializeToString(self) -> bytes:
            raise ValueError("Message onnx.ModelProto exceeds maximum protobuf size of 2GB: 2147483650\nmore")

    with pytest.raises(InputError, match=r"^--save_onnx: the model does not serialize \(Message onnx.ModelProto "
                                         r"exceeds maximum protobuf size of 2GB: 2147483650\)$"):
        serialized_model(TooLarge(), "--save_onnx")


# --- --help ------------------------------------------------------------------------------------------------------
def help_text(columns: int) -> str:
    """--help for a terminal of `columns` (COLUMNS, which argparse reads in this process as in a child; the
    script's own --help runs through a subprocess in tests/cli/test_cli.py)."""
    with unittest.mock.patch.dict(os.environ, COLUMNS=str(columns)):
        result = run_main("--help")
    assert result.returncode == 0 and result.stderr == ""
    return result.stdout


@pytest.mark.parametrize("columns", [40, 80, 100, 300])
def test_help_fits_100_columns_and_names_each_heading_and_option_once(columns, monkeypatch):
    """Properties, not text: every line within 100 columns, and within the terminal's from 80 columns up; each
    heading (a line at column 0 ending in ':') once; each option of the parser listed once, under its first
    spelling, with a description; the usage names only options the parser has."""
    import argparse

    from cli.options import build_parser

    text = help_text(columns)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= (min(columns, 100) if columns >= 80 else 100)
    headings = [line for line in lines if line.endswith(":") and not line.startswith(" ")]
    assert len(headings) == len(set(headings)) >= 4, headings
    actions, init = [], argparse.Action.__init__  # the parser's options, as build_parser makes them
    monkeypatch.setattr(argparse.Action, "__init__", lambda self, *a, **k: (init(self, *a, **k), actions.append(self)))
    build_parser()
    monkeypatch.undo()
    assert len(actions) >= 20
    def lists(line: str, action: argparse.Action) -> bool:  # "  --graph FILE  ...", "  -v, --verbose", "  --x {a,b}"
        first = action.option_strings[0]
        rest = line[2 + len(first):] if line.startswith(f"  {first}") else None
        if rest is None or rest[:1] not in ("", " ", ","):
            return False
        word = rest.split()[0] if rest.strip() else ""
        metavars = action.metavar if isinstance(action.metavar, tuple) else (action.metavar, action.dest.upper())
        return rest == "" or rest.startswith(("  ", ", ")) or word[:1] == "{" or word in metavars

    for action in actions:
        first = action.option_strings[0]  # "--graph" of "--graph FILE", "-v" of "-v, --verbose"
        listed = [line for line in lines if lists(line, action)]
        assert len(listed) == 1, (first, listed)
        assert action.help and action.help.strip(), first
    known = {name for action in actions for name in action.option_strings}
    usage = text.split("\n\n", 1)[0]
    assert {word.strip("[]|") for word in usage.split() if word.strip("[]|").startswith("-")} <= known


def test_help_is_shorter_than_100_lines():
    """141 lines before issue 27; the details live in docs/options.md."""
    assert len(help_text(100).splitlines()) < 100
