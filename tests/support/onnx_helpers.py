"""Shared by the ONNX tests: why they skip, models exported by the real exporter (once per session), inputs.

Every model here is written by torch.onnx.export in the test session itself (torch==2.13.0 and onnxscript from
requirements-test.txt), never stored: the tests check what the exporter of the installed torch writes.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
NUM_FEATURES, NUM_CLASSES = 3, 4
NETWORKS = ("classifier", "state")
PRECISIONS = ("fp32", "fp16")


def missing_reason(*names: str) -> str | None:
    """Why the ONNX tests cannot run here (a package of requirements-onnx.txt is absent), else None."""
    absent = [name for name in names if importlib.util.find_spec(name) is None]
    return f"{', '.join(absent)} not installed (pip install -r requirements-onnx.txt)" if absent else None


REWRITE_MISSING = missing_reason("onnx", "onnx_graphsurgeon", "onnxruntime")
EXPORT_MISSING = missing_reason("torch", "onnx", "onnxscript", "onnx_graphsurgeon", "onnxruntime")
needs_export = pytest.mark.skipif(EXPORT_MISSING is not None, reason=EXPORT_MISSING or "")

_SESSION_FILES: dict[str, Path] = {}

# torch.onnx.export(dynamo=True) builds its registry of torchlib functions on every call, from onnxscript's
# get_torchlib_ops(), which re-parses the source of each of the ~500 functions (inspect.getsource, ast) to read
# one field: 0.3 s of CPU per export, 13.8 s for the 45 exports of the ONNX tests. Its answer depends only on the
# installed onnxscript (nothing here registers torchlib functions), so a session asks once.
_TORCHLIB_APIS = "onnxscript._framework_apis.torch_"
_SHARED = False


def share_torchlib_ops() -> None:
    """Once onnxscript's torch APIs are imported (by the first export): every later get_torchlib_ops() of the
    process returns a new list of the first call's entries, so each export still builds its own registry."""
    if _SHARED or _TORCHLIB_APIS + "2_5" not in sys.modules:  # the function's home; torch_2_6.. import it
        return
    globals()["_SHARED"] = True
    modules = [module for name, module in list(sys.modules.items()) if name.startswith(_TORCHLIB_APIS)]
    functions = {getattr(module, "get_torchlib_ops", None) for module in modules} - {None}
    if len(functions) != 1:  # not the one function re-exported: another onnxscript, left as it is
        return
    (original,) = functions
    table: list[Any] = []

    def get_torchlib_ops() -> list[Any]:
        if not table:
            table.append(original())
        return list(table[0])

    for module in modules:
        if getattr(module, "get_torchlib_ops", None) is original:
            module.get_torchlib_ops = get_torchlib_ops


# The exports of one test command, shared by its pytest processes: the session started first owns a folder
# (named in its environment by EXPORTS_ENV, which the pytest it starts for the trt_bindings run inherits:
# tests/plugin/test_real_bindings.py) and removes it at its end. Each file there is linked in whole once written and
# never replaced, so a session that found it and one that wrote it read the same bytes. The models are still
# written by torch.onnx.export in this test command, never stored between runs.
EXPORTS_ENV = "ALIASED_IO_TEST_EXPORTS"
_EXPORTS: dict[str, Any] = {}


def open_exports() -> None:
    """Takes the folder of EXPORTS_ENV, or makes one and names it there (pytest_configure in tests/conftest.py)."""
    folder = os.environ.get(EXPORTS_ENV)
    if folder and Path(folder).is_dir():
        _EXPORTS.update(folder=Path(folder), owner=False)
    elif not folder:
        _EXPORTS.update(folder=Path(tempfile.mkdtemp(prefix="onnx-exports-")), owner=True)
        os.environ[EXPORTS_ENV] = str(_EXPORTS["folder"])


def close_exports() -> None:
    """Removes the folder this session made (pytest_unconfigure)."""
    if _EXPORTS.get("owner"):
        os.environ.pop(EXPORTS_ENV, None)
        shutil.rmtree(_EXPORTS["folder"], ignore_errors=True)
    _EXPORTS.clear()


def _shared(key: str) -> Path | None:
    """The command's export of `key` where another of its sessions wrote it, else None."""
    path = _EXPORTS["folder"] / f"{key}.onnx" if "folder" in _EXPORTS else None
    return path if path is not None and path.is_file() else None


def _publish(key: str, path: Path) -> None:
    """Links this session's export of `key` into the command's folder, unless one is there already."""
    if "folder" not in _EXPORTS:
        return
    target = _EXPORTS["folder"] / f"{key}.onnx"
    try:
        os.link(path, target)
    except FileExistsError:
        pass
    except OSError:  # another file system: a copy, linked into place whole
        partial = target.with_name(f".{key}.{os.getpid()}")
        shutil.copyfile(path, partial)
        try:
            os.link(partial, target)
        except FileExistsError:
            pass
        finally:
            partial.unlink()


def session_file(tmp_path_factory: pytest.TempPathFactory, key: str, write: Callable[[Path], Any]) -> Path:
    """The file `write(path)` writes, once per test session for `key` (once per test command where another of
    its sessions wrote it already): later calls get the same path."""
    if key not in _SESSION_FILES:
        shared = _shared(key)
        if shared is None:
            shared = tmp_path_factory.mktemp(key) / "model.onnx"
            write(shared)
            _publish(key, shared)
        _SESSION_FILES[key] = shared
    return _SESSION_FILES[key]


# The sample model `python3 -m export.export_onnx` writes in a fresh process (tests/onnx/test_onnx_export.py checks
# that run): started in the background when collection ends (tests/conftest.py), where a test module to run uses
# sample_model or script_export, else by the session's first sample_model call, so that on a 2-core machine it
# overlaps the tests before, and awaited where it is needed.
SCRIPT_SAMPLE = ("state", "fp16")
_SCRIPT_RUN: dict[str, Any] = {}


def start_script_export(tmp_path_factory: pytest.TempPathFactory | None) -> None:
    """Starts `python3 -m export.export_onnx --network state --precision fp16 --num_features 3 --out M.onnx` in
    a fresh process (from the repository root), once per session, M.onnx alone in a folder (of tmp_path_factory,
    or without one a temporary folder stop_script_export removes); script_export waits for it."""
    if "process" in _SCRIPT_RUN:
        return
    if tmp_path_factory is None:
        folder = _SCRIPT_RUN["folder"] = Path(tempfile.mkdtemp(prefix="script_state_fp16-"))
    else:
        folder = tmp_path_factory.mktemp("script_state_fp16")
    out = folder / "model.onnx"
    network, precision = SCRIPT_SAMPLE
    argv = [sys.executable, "-m", "export.export_onnx", "--network", network, "--precision", precision,
            "--num_features", str(NUM_FEATURES), "--out", str(out)]
    _SCRIPT_RUN.update(out=out, argv=argv, process=subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))


def script_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    """(the finished run of start_script_export, the path it was told to write)."""
    start_script_export(tmp_path_factory)
    if "result" not in _SCRIPT_RUN:
        process = _SCRIPT_RUN["process"]
        try:
            stdout, stderr = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        _SCRIPT_RUN["result"] = subprocess.CompletedProcess(_SCRIPT_RUN["argv"], process.returncode, stdout, stderr)
    return _SCRIPT_RUN["result"], _SCRIPT_RUN["out"]


def stop_script_export() -> None:
    """Ends the background export if no test waited for it, and removes a temporary folder of its
    (pytest_sessionfinish in tests/conftest.py)."""
    process = _SCRIPT_RUN.get("process")
    if process is not None and "result" not in _SCRIPT_RUN:
        process.kill()
        process.communicate()
    if "folder" in _SCRIPT_RUN:
        shutil.rmtree(_SCRIPT_RUN["folder"], ignore_errors=True)


def start_background_exports(modules: list[Any]) -> None:
    """The script export started now where one of the test modules to run uses sample_model or script_export
    (pytest_collection_finish), in the session that owns the command's exports (the first)."""
    if EXPORT_MISSING is None and _EXPORTS.get("owner", True) and any(
            getattr(module, name, None) in (sample_model, script_export)
            for module in modules for name in ("sample_model", "script_export")):
        start_script_export(None)


def sample_model(tmp_path_factory: pytest.TempPathFactory, network: str, precision: str) -> Path:
    """The sample network exported by `python3 -m export.export_onnx`, F = 3, C = 4; each (network, precision)
    once per session: SCRIPT_SAMPLE by the script in a fresh process, the others by its main in this one. A
    session started by another (the trt_bindings run) takes them from the command's folder where they are, and
    exports SCRIPT_SAMPLE by main too (tests/onnx/test_onnx_export.py checks the script's run in the first)."""
    key = f"{network}_{precision}"
    first_session = _EXPORTS.get("owner", True)
    if first_session:
        start_script_export(tmp_path_factory)
    if (network, precision) == SCRIPT_SAMPLE and first_session:
        result, out = script_export(tmp_path_factory)
        assert result.returncode == 0, result.stderr
        _publish(key, out)
        return out

    def write(path: Path) -> None:
        from export.export_onnx import main

        argv = ["--network", network, "--precision", precision, "--num_features", str(NUM_FEATURES), "--out", str(path)]
        if network == "classifier":
            argv += ["--num_classes", str(NUM_CLASSES)]
        assert main(argv) == 0

    return session_file(tmp_path_factory, key, write)


def export_module(path: Path, module: Any, args: tuple[Any, ...], input_names: list[str],
                  output_names: list[str], dynamic: dict[str, dict[int, str] | None] | None = None,
                  dynamo: bool = True, **options: Any) -> Path:
    """Exports `module` with torch.onnx.export to `path`; `dynamic` names each input's dynamic axes (the names
    become torch.export.Dim objects for dynamo, dynamic_axes for the legacy exporter); `options` go to
    torch.onnx.export as they are (custom_translation_table, ...). Call it through a once-per-session cache
    (session_file, tests/onnx_models.zoo_path): on a 2-core machine the session's first export takes 2.6 s of
    CPU, each later one 0.5 to 0.7 s (5 to 13 s and 1 to 2.5 s of wall time with other work running)."""
    import torch

    from export.export_onnx import quiet_exporter

    with quiet_exporter():
        if dynamo:
            dims: dict[str, Any] = {}
            shapes = None if dynamic is None else {
                name: None if axes is None else {axis: dims.setdefault(dim, torch.export.Dim(dim))
                                                 for axis, dim in axes.items()}
                for name, axes in dynamic.items()}
            program = torch.onnx.export(module.eval(), args, dynamo=True, dynamic_shapes=shapes,
                                        input_names=input_names, output_names=output_names, verbose=False,
                                        **options)
            assert program is not None
            program.save(str(path))
        else:
            torch.onnx.export(module.eval(), args, str(path), dynamo=False, input_names=input_names,
                              output_names=output_names, dynamic_axes=dynamic, **options)
    return path


# Models that call torch.ops.aliased_io.scatter_add_ (export/ops.py), as a user writes them: name -> (inputs,
# outputs). "state" returns the updated state; "layers" returns it and a softmax computed from it.
OPS_MODELS = {"state": (("X", "src", "idx"), ("X_out",)), "layers": (("X", "src", "idx", "W"), ("X_out", "softmax"))}
OPS_DYNAMIC = {"X": {0: "N"}, "src": {0: "E"}, "idx": {0: "E"}, "W": None}


def ops_module(name: str) -> Any:
    """A torch module of OPS_MODELS that updates its X in place with torch.ops.aliased_io.scatter_add_."""
    import torch

    import export.ops  # noqa: F401  (registers torch.ops.aliased_io)

    class StateUpdate(torch.nn.Module):
        def forward(self, X, src, idx):
            torch.ops.aliased_io.scatter_add_(X, src, idx)
            return X

    class UpdateThenLayers(torch.nn.Module):
        def forward(self, X, src, idx, W):
            torch.ops.aliased_io.scatter_add_(X, src, idx)
            return X, torch.softmax(torch.relu(W @ X.T), dim=0)

    return {"state": StateUpdate, "layers": UpdateThenLayers}[name]()


def ops_inputs(name: str, precision: str, num_nodes: int, num_edges: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs of an OPS_MODELS model: X, src and W standard normal in `precision`, idx in range with
    repeats (E > N)."""
    rng = np.random.default_rng(seed)
    dtype = np.float16 if precision == "fp16" else np.float32
    arrays = {"X": rng.standard_normal((num_nodes, NUM_FEATURES)).astype(dtype),
              "src": rng.standard_normal((num_edges, NUM_FEATURES)).astype(dtype),
              "idx": rng.integers(0, num_nodes, num_edges).astype(np.int64),
              "W": rng.standard_normal((NUM_CLASSES, NUM_FEATURES)).astype(dtype)}
    return {input_name: arrays[input_name] for input_name in OPS_MODELS[name][0]}


_OPS_PROGRAMS: dict[str, Any] = {}


def ops_program(name: str, precision: str = "fp32") -> Any:
    """The ONNXProgram of torch.onnx.export(dynamo=True) for the OPS_MODELS model `name`, exported with
    export.ops.custom_translation_table (N and E dynamic), once per session."""
    key = f"ops_{name}_{precision}"
    if key not in _OPS_PROGRAMS:
        import torch

        from export.export_onnx import quiet_exporter
        from export.ops import custom_translation_table

        inputs, outputs = OPS_MODELS[name]
        args = tuple(torch.from_numpy(array) for array in ops_inputs(name, precision, 5, 7, seed=0).values())
        dims = {"N": torch.export.Dim("N"), "E": torch.export.Dim("E")}
        shapes = {input_name: None if OPS_DYNAMIC[input_name] is None else
                  {axis: dims[dim] for axis, dim in OPS_DYNAMIC[input_name].items()} for input_name in inputs}
        with quiet_exporter():
            _OPS_PROGRAMS[key] = torch.onnx.export(ops_module(name).eval(), args, dynamo=True, dynamic_shapes=shapes,
                                                   input_names=list(inputs), output_names=list(outputs), verbose=False,
                                                   custom_translation_table=custom_translation_table)
    return _OPS_PROGRAMS[key]


def ops_model(tmp_path_factory: pytest.TempPathFactory, name: str, precision: str = "fp32") -> Path:
    """ops_program's model saved to a file, once per session."""
    return session_file(tmp_path_factory, f"ops_{name}_{precision}",
                        lambda path: ops_program(name, precision).save(str(path)))


def with_standard_scatter(model: Any) -> Any:
    """A copy of `model` with each ScatterAddInPlace node (domain aliased_io) replaced by what it computes in
    standard ONNX, writing the node's output: Unsqueeze(idx, [1]) + ScatterND(state, ., src, reduction="add"),
    in float32 between Casts for a float16 state (ONNX Runtime's CPU provider has no float16 ScatterND add).
    ONNX Runtime then runs the exported model (test-only: the plugin's semantics, out of place)."""
    import onnx
    from onnx import TensorProto, helper

    types = {value.name: value.type.tensor_type.elem_type
             for value in [*model.graph.input, *model.graph.value_info, *model.graph.output]}
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    nodes = []
    for position, node in enumerate(copy.graph.node):
        if (node.domain, node.op_type) != ("aliased_io", "ScatterAddInPlace"):
            nodes.append(node)
            continue
        state, src, idx = node.input
        names = {part: f"standard_{part}_{position}" for part in ("axes", "column", "state", "src", "sum")}
        nodes += [helper.make_node("Constant", [], [names["axes"]],
                                   value=helper.make_tensor(names["axes"], TensorProto.INT64, [1], [1])),
                  helper.make_node("Unsqueeze", [idx, names["axes"]], [names["column"]])]
        if types[state] == TensorProto.FLOAT16:
            nodes += [helper.make_node("Cast", [state], [names["state"]], to=TensorProto.FLOAT),
                      helper.make_node("Cast", [src], [names["src"]], to=TensorProto.FLOAT),
                      helper.make_node("ScatterND", [names["state"], names["column"], names["src"]], [names["sum"]],
                                       reduction="add"),
                      helper.make_node("Cast", [names["sum"]], [node.output[0]], to=TensorProto.FLOAT16)]
        else:
            nodes.append(helper.make_node("ScatterND", [state, names["column"], src], [node.output[0]],
                                          reduction="add"))
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    kept = [opset for opset in copy.opset_import if opset.domain != "aliased_io"]
    del copy.opset_import[:]
    copy.opset_import.extend(kept)
    return copy


def graph_inputs(num_nodes: int = 6, num_edges: int = 15, seed: int = 0, precision: str = "fp32",
                 state: bool = True) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(feeds X, src, idx, W in `precision`, the float64 reference) for a random graph where every node has an
    incoming edge and an index repeats; X is a random state (zeros when state is False)."""
    from network.run import engine_inputs
    from reference.gnn import gnn_reference

    rng = np.random.default_rng(seed)
    targets = np.concatenate([np.arange(num_nodes), rng.integers(0, num_nodes, num_edges - num_nodes)])
    edges = np.stack([rng.integers(0, num_nodes, num_edges), targets], axis=1)
    features = rng.uniform(0.0, 4.0, (num_nodes, NUM_FEATURES))
    weights = rng.standard_normal((NUM_CLASSES, NUM_FEATURES))
    initial = rng.uniform(-1.0, 1.0, (num_nodes, NUM_FEATURES)) if state else None
    feeds = engine_inputs(features, edges, weights, precision, state=initial)
    dtype = feeds["X"].dtype  # the reference of the inputs as the model gets them, rounded to `precision` first
    expected = gnn_reference(features.astype(dtype).astype(np.float64), edges, feeds["W"].astype(np.float64),
                             state=feeds["X"].astype(np.float64))
    return feeds, expected
