"""docs/own_model_cpp.md's walk, run as the page writes it, as far as it goes without TensorRT: its Python block
exports the model (a state overwritten, another added into), its dry-run command rewrites it, proves it against
ONNX Runtime for ten runs and saves the .npy files, and cpp/aliased_io_state --plan reads those files with the
description the engine would get (the rewrite's aliases and the model's I/O, as --save_engine describes a built
engine), printing the bindings the page shows. The engine steps are tensorrt-marked in tests/test_cpp_model.py.
"""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.onnx_helpers import needs_export
from tests.test_cpp_state import recent_program, run_program

__all__ = ["recent_program"]

ROOT = Path(__file__).resolve().parent.parent
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


@pytest.fixture(scope="module")
def walked(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The folder where the page's export and dry run ran, and the dry run's result."""
    folder = tmp_path_factory.mktemp("walk")
    (folder / "export_memory.py").write_text(blocks("python")[0])
    exported = subprocess.run([sys.executable, "export_memory.py"], cwd=folder, capture_output=True, text=True)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    words = command("python3 aliased_io_plugin.py --onnx memory.onnx --plugin aot")
    assert "--dry-run" in words and "--save_outputs" in words
    dry = subprocess.run([sys.executable, str(ROOT / "aliased_io_plugin.py"), *words[2:]], cwd=folder,
                         capture_output=True, text=True, timeout=600)
    return folder, dry


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
    from common.engine_description import IndexRows, describe_built_engine, format_description
    from onnx_path.rewrite import load_model, model_io, rewrite_model

    folder, dry = walked
    assert dry.returncode == 0, dry.stdout + dry.stderr
    rewritten = rewrite_model(load_model(str(folder / "memory.onnx")), "aot")
    inputs, outputs = model_io(rewritten.model)
    tensors = [(spec.name, is_input, np.dtype(spec.dtype).name, tuple(-1 if isinstance(d, str) else d
                                                                      for d in spec.shape))
               for specs, is_input in ((inputs, True), (outputs, False)) for spec in specs]
    rows = {name: IndexRows(bound.rows, bound.input, bound.axis) for name, bound in rewritten.index_bounds.items()
            if bound.rows is not None or bound.input is not None}
    description = describe_built_engine("aot", tensors, {spec.name: spec.shape for spec in (*inputs, *outputs)},
                                        rewritten.aliases, rows, {})
    assert description.aliases == {"S_out": "S", "T_out": "T"}
    (folder / "memory.engine.desc").write_text(format_description(description))
    words = command("build/aliased_io_state --plan")
    result = run_program(recent_program, *words[1:], cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    page = PAGE.read_text()
    for line in result.stdout.splitlines():
        if line.startswith(("Engine description:", "Inputs:", "  input ", "  output ")):
            assert line in page, line  # the page shows what the program prints
    assert "  output S_out float32 [" in result.stdout and "bound at input S's address" in result.stdout
