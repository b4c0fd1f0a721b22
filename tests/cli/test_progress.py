"""common.progress: progress of slow steps on stderr, live bars on a terminal, plain lines elsewhere; and the
command line's use of it (the seed and the graph first, quiet off a terminal without -v). No GPU."""

import io

import pytest

import aliased_io_plugin as cli
from common import progress as progress_module
from common.progress import LARGE_FILE_BYTES, bar, file_load_progress, human_bytes, progress, shows_progress
from tests.cli.test_cli import run_cli


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_progress_writes_start_and_elapsed():
    out = io.StringIO()
    with progress("Building engine", stream=out):
        assert out.getvalue() == "Building engine ..."  # visible while the step runs
    text = out.getvalue()
    assert text.startswith("Building engine ... done in ") and text.endswith(" s\n")
    float(text.removeprefix("Building engine ... done in ").removesuffix(" s\n"))


@pytest.mark.parametrize("raised", [KeyError("boom"), KeyboardInterrupt()])
def test_a_failing_step_ends_its_line_and_reraises(raised):
    # the line ends where the step stopped, so that the error printed next is the one line of the failure
    out = io.StringIO()
    with pytest.raises(type(raised)):
        with progress("Reading x", stream=out):
            raise raised
    assert out.getvalue() == "Reading x ...\n"


def test_progress_disabled_writes_nothing():
    out = io.StringIO()
    with progress("Building engine", enabled=False, stream=out):
        pass
    assert out.getvalue() == ""


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 1023, 1536, 64 << 20, 3 << 30, 5 << 40)] == [
        "0 B", "1023 B", "1.5 KiB", "64.0 MiB", "3.0 GiB", "5120.0 GiB",
    ]


def test_file_load_progress_only_for_large_files(tmp_path, capsys):
    small = tmp_path / "small.npz"
    small.write_bytes(b"x" * 100)
    large = tmp_path / "large.bin"
    with open(large, "wb") as handle:  # sparse: the size counts, not the bytes on disk
        handle.truncate(LARGE_FILE_BYTES)
    for path in (small, tmp_path / "missing.npz"):
        with file_load_progress(str(path), "--graph"):
            pass
        assert capsys.readouterr().err == ""
    with file_load_progress(str(large), "--graph"):
        pass
    err = capsys.readouterr().err
    assert err.startswith(f"Reading --graph {large} (64.0 MiB) ... done in ")


def test_on_a_terminal_a_quick_step_is_erased_and_a_slow_one_stays(monkeypatch):
    out = Terminal()
    with progress("Validating the graph", stream=out):
        pass
    assert out.getvalue() == "Validating the graph ...\r\x1b[K"  # erased: it took less than QUICK_STEP_S
    monkeypatch.setattr(progress_module, "QUICK_STEP_S", 0.0)
    out = Terminal()
    with progress("Validating the graph", stream=out):
        pass
    assert out.getvalue().split("\r\x1b[K")[-1].startswith("Validating the graph ... done in ")
    assert out.getvalue().endswith(" s\n")


def test_on_a_terminal_advance_draws_a_bar_and_a_failure_erases_the_line(monkeypatch):
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)
    out = Terminal()
    with pytest.raises(KeyError):
        with progress("Drawing a random graph", stream=out) as advance:
            advance(0.5)
            assert out.getvalue().endswith("\r\x1b[KDrawing a random graph [###############---------------]  50%")
            raise KeyError("boom")
    assert out.getvalue().endswith("\r\x1b[K")  # the error message that follows starts on a clean line
    assert bar(0.0) == "[------------------------------]   0%" and bar(1.5).endswith("100%")


def test_shows_progress_on_a_terminal_or_with_verbose():
    assert shows_progress(False, Terminal()) and shows_progress(True, io.StringIO())
    assert not shows_progress(False, io.StringIO())


def test_the_seed_prints_before_the_graph_is_read_and_the_graph_before_the_reference(tmp_path):
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"PK\x03\x04 broken archive")
    result = run_cli("--graph", str(corrupt), "--seed", "8", "--dry-run")
    assert result.returncode == 2 and result.stdout == "Setting seed to: 8\n\n"  # the seed came first
    overflow = run_cli("--precision", "fp16", "--node_features", "[40000,40000,5,7]", "--seed", "8", "--dry-run")
    assert overflow.returncode == 2 and "aggregated features" in overflow.stderr  # found by the reference
    assert overflow.stdout.startswith("Setting seed to: 8\n\nAdjacency matrix for graph:\n[0, 1, 1, 0]\n")


def test_a_run_on_a_terminal_reports_its_slow_steps_with_bars(monkeypatch, capsys):
    monkeypatch.setattr(progress_module, "QUICK_STEP_S", 0.0)  # every step counts as slow
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert cli.main(["--dry-run", "--random_graph", "3000", "3000000", "--seed", "2"]) == 0
    assert capsys.readouterr().out.startswith("Setting seed to: 2\n\nGraph: 3,000 nodes")
    shown = terminal.getvalue()
    assert "Drawing a random graph of 3,000,000 edges [" in shown  # a bar: the total is known
    lines = [line.split("\r\x1b[K")[-1] for line in shown.split("\n")]
    for step in ("Drawing a random graph of 3,000,000 edges", "Validating the graph", "Computing the float64 reference"):
        assert any(line.startswith(f"{step} ... done in ") for line in lines), step
