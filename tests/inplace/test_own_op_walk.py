"""docs/own_inplace_op.md's walk as the page writes it, as far as it goes without TensorRT: its export block
(run here, in a folder of its own) and its dry-run command, which proves the rewritten model over three runs,
saves it and the .npy files cpp/aliased_io_state reads. The engine and C++ steps: test_own_op_e2e.py."""

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "own_inplace_op.md"


def blocks(language):
    """The page's fenced blocks of `language` ("" for plain ones), in order."""
    return [body for kind, body in re.findall(r"```(\w*)\n(.*?)```", PAGE.read_text(), flags=re.S) if kind == language]


def test_the_pages_export_and_dry_run_work_as_written(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch", reason="torch is needed for the export (requirements-onnx.txt)")
    pytest.importorskip("onnxruntime", reason="onnxruntime is needed for the dry run (requirements-onnx.txt)")
    import onnx

    import aliased_io_plugin

    export = next(block for block in blocks("python") if "export_onnx(" in block)
    monkeypatch.chdir(tmp_path)
    from export.export_onnx import quiet_exporter

    with quiet_exporter():
        exec(compile(export, "export_ema.py", "exec"), {"__name__": "export_ema"})
    command = next(line for block in blocks("bash") for line in block.replace("\\\n", " ").splitlines()
                   if line.startswith("python3 aliased_io_plugin.py --dry-run"))
    arguments = shlex.split(command.split("#", 1)[0])[2:]
    assert aliased_io_plugin.main(arguments) == 0
    out = capsys.readouterr().out
    shown = next(block for block in blocks("") if "Validation against reference successful!" in block)
    for line in shown.splitlines()[:3]:
        assert line in out
    assert "Validation against reference successful!" in out
    onnx.checker.check_model(onnx.load("ema_aot.onnx"), full_check=True)
    assert sorted(path.name for path in Path("run/inputs").iterdir()) == ["step_0", "step_1", "step_2"]
