"""The three in-place ops of inplace/examples as the tests use them: their inputs, their torch modules, their
exported models (each exported once per session) and a step's tensors with concrete dtypes."""

import functools
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

TRITON_MISSING = "triton is not installed (pip install -r requirements-triton.txt): the Triton kernels need it"


@dataclass(frozen=True)
class Example:
    module: str  # registers the op when imported
    outputs: tuple[str, ...]  # the exported model's output names: the state(s), then what the op returns
    triton: bool

    @property
    def op(self) -> Any:
        return importlib.import_module(self.module).OP


EXAMPLES = {
    "ema": Example("inplace.examples.ema", ("state_out",), True),
    "ring": Example("inplace.examples.ring", ("buffer_out", "pos_out"), False),
    "accumulate": Example("inplace.examples.accumulate", ("state_out", "norms"), True),
}


def example_inputs(name: str, seed: int = 0, rows: int = 50, batch: int = 7, features: int = 5,
                   dtype: Any = np.float32) -> dict[str, np.ndarray]:
    """Inputs of an example: distinct indices where it takes them, random rows."""
    rng = np.random.default_rng(seed)
    if name == "ring":
        return {"buffer": rng.standard_normal((rows, features)).astype(dtype),
                "pos": np.array([rng.integers(0, rows)], np.int64),
                "rows": rng.standard_normal((batch, features)).astype(dtype)}
    idx = rng.permutation(rows)[:batch].astype(np.int64)
    state = rng.standard_normal((rows, features)).astype(dtype)
    update = rng.standard_normal((batch, features)).astype(dtype)
    if name == "ema":
        return {"state": state, "idx": idx, "rows": update, "alpha": np.array([0.75], np.float32)}
    return {"state": state, "idx": idx, "delta": update}


def need_triton(example: Example) -> None:
    if example.triton and importlib.util.find_spec("triton") is None:
        pytest.skip(TRITON_MISSING)


def torch_module(name: str) -> Any:
    """A torch.nn.Module calling the example's op in place and returning its state(s) (and what it returns)."""
    import torch

    op = EXAMPLES[name].op
    call = getattr(getattr(torch.ops, op.namespace), op.name)

    class Forward(torch.nn.Module):
        def forward(self, *args: Any) -> Any:
            returned = call(*args)
            values = dict(zip((tensor.name for tensor in op.inputs), args))
            states = tuple(values[name] for name in op.mutates)
            return states + ((returned,) if returned is not None else ())

    return Forward().eval()


def dynamic_shapes(name: str) -> dict[str, Any]:
    import torch

    rows, batch = torch.export.Dim("rows"), torch.export.Dim("batch")
    if name == "ring":
        return {"buffer": {0: rows}, "pos": None, "rows": {0: batch}}
    second = "rows" if name == "ema" else "delta"
    shapes: dict[str, Any] = {"state": {0: rows}, "idx": {0: batch}, second: {0: batch}}
    if name == "ema":
        shapes["alpha"] = None
    return shapes


@functools.cache
def _exported(name: str, folder: str) -> Path:
    import torch

    from export.export_onnx import quiet_exporter
    from inplace.torch_op import export_onnx

    example = EXAMPLES[name]
    inputs = example_inputs(name)
    args = tuple(torch.from_numpy(inputs[tensor.name].copy()) for tensor in example.op.inputs)
    with quiet_exporter():
        return export_onnx(torch_module(name), args, Path(folder) / f"{name}.onnx", [example.op],
                           dynamic_shapes=(tuple(dynamic_shapes(name)[tensor.name] for tensor in example.op.inputs),),
                           input_names=list(inputs),
                           output_names=list(example.outputs))


def exported_model(name: str, tmp_path_factory: Any) -> Path:
    """The example exported with torch.onnx.export(dynamo=True), its batch and row counts dynamic (once a session)."""
    pytest.importorskip("torch", reason="torch is needed for the export (requirements-onnx.txt)")
    pytest.importorskip("onnxscript", reason="onnxscript is needed for the export (requirements-onnx.txt)")
    return _exported(name, str(tmp_path_factory.getbasetemp()))


def export_sum_rows(op: Any, path: Path) -> Path:
    """The tests' own sum_rows_(state, idx, rows) op (torch.ops.<op.namespace>.sum_rows_) exported to `path` with
    the batch dynamic: state [20, 3], idx and rows of the batch. Skips without torch and onnxruntime."""
    torch = pytest.importorskip("torch", reason="torch is needed for the export (requirements-onnx.txt)")
    pytest.importorskip("onnxruntime", reason="onnxruntime is needed for the dry run (requirements-onnx.txt)")
    from export.export_onnx import quiet_exporter
    from inplace.torch_op import export_onnx

    call = getattr(getattr(torch.ops, op.namespace), op.name)

    class Model(torch.nn.Module):
        def forward(self, state: Any, idx: Any, rows: Any) -> Any:
            call(state, idx, rows)
            return state

    args = (torch.zeros(20, 3), torch.tensor([1, 4, 4, 7, 9]), torch.ones(5, 3))
    batch = torch.export.Dim("batch")
    with quiet_exporter():
        return export_onnx(Model().eval(), args, path, [op], dynamic_shapes=(None, {0: batch}, {0: batch}),
                           input_names=["state", "idx", "rows"], output_names=["state_out"])


def dry_run_sum_rows(exported: Path, tmp_path: Path, capsys: Any) -> tuple[str, Any]:
    """--dry-run --validate of an exported sum_rows_ model (export_sum_rows) on 11 random rows into 20 nodes, the
    rewritten model saved: (the printed output, the saved model, checked in full by onnx.checker)."""
    import onnx

    import aliased_io_plugin

    rng = np.random.default_rng(4)
    np.savez(tmp_path / "inputs.npz", state=rng.standard_normal((20, 3)).astype(np.float32),
             idx=rng.integers(0, 20, 11).astype(np.int64), rows=rng.standard_normal((11, 3)).astype(np.float32))
    saved = tmp_path / "rewritten.onnx"
    status = aliased_io_plugin.main(["--dry-run", "--onnx", str(exported), "--onnx_inputs", str(tmp_path / "inputs.npz"),
                                     "--validate", "--save_onnx", str(saved), "--seed", "1"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "Validation against reference successful!" in out
    model = onnx.load(str(saved))
    onnx.checker.check_model(model, full_check=True)
    return out, model


@dataclass(frozen=True)
class TextPtx:
    """A PtxSource of fixed text (empty entry points with the steps' parameters): the registration checks them;
    nothing runs them."""

    text: str

    def ptx(self, kernel: str, dtypes: Any) -> bytes:
        return self.text.encode()
