"""docs/own_model_cpp.md's walk, run as the page writes it, as far as it goes without TensorRT: its Python block
exports the model (a state overwritten, another added into), its dry-run command rewrites it, proves it against
ONNX Runtime for ten runs and saves the .npy files, and cpp/aliased_io_state --plan reads those files with the
description the engine would get (the rewrite's aliases and the model's I/O, as --save_engine describes a built
engine), printing the bindings the page shows. The engine steps are tensorrt-marked in tests/cpp/test_cpp_model.py.
"""

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tests.support.background import BackgroundJob
from tests.support.onnx_helpers import EXPORT_MISSING, needs_export
from tests.cpp.test_cpp_state import recent_program, run_program

__all__ = ["recent_program"]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "own_model_cpp.md"
pytestmark = needs_export


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), flags=re.S)


def command(prefix: str) -> list[str]:
    """The page's first command line starting with `prefix` (continued lines joined), split into words."""
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith(prefix):
                return line.split("#", 1)[0].split()
    raise AssertionError(f"no command {prefix!r} on the page")


# The walk (the page's export, then its dry run, each in a fresh process as the page runs them) starts in the
# background when collection ends (tests/conftest.py: start_background); the `walked` fixture waits for it.
_WALK: dict[str, BackgroundJob] = {}


def _walk(job: BackgroundJob) -> None:
    (job.folder / "export_memory.py").write_text(blocks("python")[0])
    exported = job.results["exported"] = job.run([sys.executable, "export_memory.py"], cwd=job.folder)
    if exported is None or exported.returncode != 0:
        return
    words = job.results["words"] = command("python3 aliased_io_plugin.py --onnx memory.onnx --plugin aot")
    if "--dry-run" in words and "--save_outputs" in words:
        job.results["dry"] = job.run([sys.executable, str(ROOT / "aliased_io_plugin.py"), *words[2:]], cwd=job.folder)


def start_background(config: pytest.Config | None) -> None:
    """Starts the walk in a folder of its own, once per session (where the export can run)."""
    if "job" not in _WALK and EXPORT_MISSING is None:
        _WALK["job"] = BackgroundJob("own-model-walk", _walk, Path(tempfile.mkdtemp(prefix="own-model-walk-")))


def stop_background() -> None:
    """Ends a walk no test waited for, and removes its folder (pytest_sessionfinish)."""
    if "job" in _WALK:
        _WALK["job"].stop()


@pytest.fixture(scope="module")
def walked() -> tuple[Path, subprocess.CompletedProcess]:
    """The folder where the page's export and dry run ran, and the dry run's result."""
    start_background(None)  # started at the end of collection already, unless run otherwise
    job = _WALK["job"]
    job.wait(timeout=1200)
    exported = job.results["exported"]
    assert exported.returncode == 0, exported.stdout + exported.stderr
    words = job.results["words"]
    assert "--dry-run" in words and "--save_outputs" in words
    return job.folder, job.results["dry"]


def test_the_pages_dry_run_rewrites_the_model_and_proves_it_against_onnx_runtime(walked):
    folder, dry = walked
    assert dry.returncode == 0, dry.stdout + dry.stderr
    for line in ("output S_out is input S's memory", "output T_out is input T's memory",
                 "Validation against reference successful!", "Inputs and outputs (.npy) saved to run"):
        assert line in dry.stdout, dry.stdout
    saved = folder / "run"
    assert sorted(path.name for path in (saved / "inputs" / "step_9").iterdir()) == ["idx.npy", "idx2.npy",
                                                                                     "rows.npy", "vals.npy"]
    assert np.load(saved / "outputs" / "S_out.npy").shape == (1_000_000, 4)
    assert np.load(saved / "outputs" / "T_out.npy").shape == (200_000, 2)


def test_the_cpp_plan_reads_the_walks_files_and_binds_each_state_output_at_its_input(walked, recent_program):
    from common.engine_description import parse_description
    from onnx_path.describe import model_engine_description
    from onnx_path.rewrite import load_model, model_io, rewrite_model

    folder, dry = walked
    assert dry.returncode == 0, dry.stdout + dry.stderr
    rewritten = rewrite_model(load_model(str(folder / "memory.onnx")), "aot")
    inputs, outputs = model_io(rewritten.model)
    tensors = [(spec.name, is_input, np.dtype(spec.dtype).name, tuple(-1 if isinstance(d, str) else d
                                                                      for d in spec.shape))
               for specs, is_input in ((inputs, True), (outputs, False)) for spec in specs]
    text = model_engine_description(rewritten, tensors, {spec.name: spec.shape for spec in (*inputs, *outputs)}, {})
    assert parse_description(text, "the walk's description").aliases == {"S_out": "S", "T_out": "T"}
    (folder / "memory.engine.desc").write_text(text)
    words = command("build/aliased_io_state --plan")
    result = run_program(recent_program, *words[1:], cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    page = PAGE.read_text()
    for line in result.stdout.splitlines():
        if line.startswith(("Engine description:", "Inputs:", "  input ", "  output ")):
            assert line in page, line  # the page shows what the program prints
    assert "  output S_out float32 [" in result.stdout and "bound at input S's address" in result.stdout
