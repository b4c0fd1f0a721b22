"""End to end with --plugin aot on the full TensorRT (>= 10.16) with a GPU: --validate in both precisions, --steps
(also with --cuda_graph; float16 also within 1024 edges, where the engine holds one block), an AOT engine saved by
the CLI then run by a fresh process that imports tensorrt, numpy and cuda-python but no project code and registers
no plugin, and an engine of every chain of the scatter-adds and of every scatter tactic (pinned: tests/support/
tactics.py). Skipped (with the reason) where TensorRT or a GPU is missing.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.network.test_e2e_state import assert_state_report_is_consistent

pytestmark = pytest.mark.tensorrt

ROOT = Path(__file__).resolve().parents[2]
CLI = str(ROOT / "aliased_io_plugin.py")
PROJECT_PACKAGES = ("plugin", "network", "common", "graph", "cli", "reference", "tests", "benchmarks")


def run(*args: str, cwd: Path = ROOT, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_cli_aot_validates_the_classifier(precision):
    features = "[[1.0,-2.0,0.5],[3.0,0.0,1.0],[5.0,1.5,-1.0],[7.0,2.0,0.25],[0.5,0.5,0.5]]"
    edges = "[[0,1],[1,2],[2,3],[3,0],[0,2],[1,3],[4,4],[2,4],[3,1]]"
    result = run(CLI, "--plugin", "aot", "--precision", precision, "--node_features", features, "--edges", edges,
                 "--num_classes", "4", "--validate", "--seed", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation against reference successful!" in result.stdout
    assert "AOT plugin (tensorrt.plugin, PTX in the engine" in result.stdout


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_cli_aot_validates_a_random_graph_saved_and_loaded(tmp_path, precision):
    engine = tmp_path / f"aot_{precision}.engine"
    built = run(CLI, "--plugin", "aot", "--precision", precision, "--random_graph", "2000", "20000", "--validate",
                "--seed", "5", "--save_engine", str(engine))
    assert built.returncode == 0, built.stdout + built.stderr
    loaded = run(CLI, "--precision", precision, "--random_graph", "3000", "30000", "--validate", "--seed", "6",
                 "--load_engine", str(engine))
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert "Validation against reference successful!" in loaded.stdout


@pytest.mark.parametrize("cuda_graph", [False, True], ids=["execute", "cuda_graph"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_cli_aot_steps_validate_the_final_state(precision, cuda_graph):
    result = run(CLI, "--plugin", "aot", "--random_graph", "500", "1000", "--steps", "6", "--batch_edges", "300",
                 "--precision", precision, "--validate", "--seed", "3", *(["--cuda_graph"] if cuda_graph else []))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation against reference successful!" in result.stdout
    assert_state_report_is_consistent(result.stdout, 6, cuda_graph=cuda_graph)
    if not cuda_graph:
        assert "Host time to issue one step: median" in result.stdout and "the AOT plugin runs no Python" in result.stdout


@pytest.mark.parametrize("cuda_graph", [False, True], ids=["execute", "cuda_graph"])
def test_cli_aot_float16_steps_within_1024_edges_validate_the_final_state(cuda_graph):
    # --max_edges 1024: the float16 state-update engine holds add_block alone (one block, no fills)
    result = run(CLI, "--plugin", "aot", "--random_graph", "100000", "100000", "--steps", "6", "--batch_edges",
                 "1000", "--max_edges", "1024", "--precision", "fp16", "--validate", "--seed", "3",
                 *(["--cuda_graph"] if cuda_graph else []))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation against reference successful!" in result.stdout
    assert_state_report_is_consistent(result.stdout, 6, cuda_graph=cuda_graph)


# Runs in a fresh process from an empty folder: only tensorrt, numpy and cuda-python are imported, no plugin is
# registered. Deserializes a --steps AOT engine, runs one execution with X_out bound at X's address (out-of-range
# indices included) and prints the error against float64 and what was imported or registered.
FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorrt as trt
    from cuda.bindings import driver

    def check(result):
        status, *values = result if isinstance(result, tuple) else (result,)
        assert int(status) == 0, status
        return values[0] if len(values) == 1 else values

    args = json.loads(sys.argv[1])
    check(driver.cuInit(0))
    check(driver.cuCtxSetCurrent(check(driver.cuDevicePrimaryCtxRetain(check(driver.cuDeviceGet(0))))))
    creators_before = [[getattr(c, "name", ""), getattr(c, "plugin_namespace", "")]
                       for c in trt.get_plugin_registry().all_creators]
    engine = trt.Runtime(trt.Logger(trt.Logger.WARNING)).deserialize_cuda_engine(open(args["engine"], "rb").read())
    assert engine is not None, "the engine did not deserialize"
    context = engine.create_execution_context()
    rng = np.random.default_rng(args["seed"])
    n, e, f = args["nodes"], args["edges"], args["features"]
    dtype = np.float16 if args["precision"] == "fp16" else np.float32
    x = rng.standard_normal((n, f)).astype(dtype)
    src = rng.standard_normal((e, f)).astype(dtype)
    idx = rng.integers(-3, n + 3, e).astype(np.int64)
    pointers = {}
    for name, array in (("X", x), ("src", src), ("idx", idx)):
        pointers[name] = check(driver.cuMemAlloc(max(array.nbytes, 1)))
        check(driver.cuMemcpyHtoD(pointers[name], array.ctypes.data, array.nbytes))
        context.set_input_shape(name, array.shape)
        context.set_tensor_address(name, int(pointers[name]))
    context.set_tensor_address("X_out", int(pointers["X"]))
    stream = check(driver.cuStreamCreate(0))
    assert context.execute_async_v3(int(stream))
    check(driver.cuStreamSynchronize(stream))
    out = np.empty_like(x)
    check(driver.cuMemcpyDtoH(out.ctypes.data, pointers["X"], out.nbytes))
    ok = (idx >= 0) & (idx < n)
    expected = x.astype(np.float64)
    np.add.at(expected, idx[ok], src[ok].astype(np.float64))
    magnitude = np.abs(x.astype(np.float64))
    np.add.at(magnitude, idx[ok], np.abs(src[ok].astype(np.float64)))
    unit = 2.0**-11 if dtype == np.float16 else 2.0**-24
    bound = unit * np.abs(expected) + 64 * 2.0**-24 * magnitude + 2.0**-24
    print(json.dumps({
        "within_bound": bool(np.all(np.abs(out - expected) <= bound)),
        "max_error": float(np.max(np.abs(out - expected))),
        "project_modules": sorted(m for m in sys.modules if m.split(".")[0] in args["project"]),
        "creators_before": creators_before,
    }))
    """
)


def engine_layers(path: Path) -> str:
    """The engine's layers as TensorRT's engine inspector lists them (one line each; names at the default
    profiling verbosity): an AOT engine deserializes without any plugin registered."""
    import tensorrt as trt

    engine = trt.Runtime(trt.Logger(trt.Logger.WARNING)).deserialize_cuda_engine(path.read_bytes())
    assert engine is not None, f"{path} did not deserialize"
    return engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.ONELINE)


@pytest.mark.parametrize("precision, max_edges, edges", [("fp32", 100000, 70000), ("fp16", 100000, 70000),
                                                         ("fp16", 1024, 1000)])  # the last: one block, no fills
def test_aot_engine_runs_in_a_fresh_process_without_project_code(tmp_path, precision, max_edges, edges):
    engine = tmp_path / f"aot_steps_{precision}.engine"
    built = run(CLI, "--plugin", "aot", "--precision", precision, "--random_graph", "100", "200", "--steps", "2",
                "--batch_edges", "50", "--max_nodes", "100000", "--max_edges", str(max_edges), "--save_engine",
                str(engine), "--seed", "1")
    assert built.returncode == 0, built.stdout + built.stderr
    # the network's choice, read back from the engine's layer names: one block only for float16 within 1024 edges
    assert ("add_block" in engine_layers(engine)) == (precision == "fp16" and max_edges <= 1024)
    empty = tmp_path / "empty"
    empty.mkdir()
    arguments = dict(engine=str(engine), precision=precision, nodes=50000, edges=edges, features=1, seed=2,
                     project=list(PROJECT_PACKAGES))
    result = run("-c", FRESH_PROCESS, json.dumps(arguments), cwd=empty)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["project_modules"] == []
    assert not any(namespace == "aliased_io" or name == "ScatterAddInPlace"
                   for name, namespace in report["creators_before"])  # neither the AOT nor the Python plugin
    assert report["within_bound"], report


def _chain_cases() -> list[Any]:
    """(op, chain, dtype, N, E, F) for every chain of the project's scatter-adds (plugin/scatter_add_op.py), so
    every AOT plugin the two ops register, at sizes each chain's steps hold; float32 and float16 where a chain
    takes both (the pairs, alternately the pair chunks and the sorted chain's placing passes)."""
    from benchmarks.bench_aot_cells import chain_name
    from plugin.scatter_add_op import SCATTER_ADD, SCATTER_ADD_COUNTS

    cases = []
    for op in (SCATTER_ADD, SCATTER_ADD_COUNTS):
        counted = "counts" in op.output_names()
        for chain in op.chains:
            name = chain_name(chain)
            parity = ("float32", "float16")[int(name.split(", ")[1].split()[0]) % 2] if ", " in name else None
            if name.startswith("scatter_state"):
                cases.append((op, chain, "float32", 1000, 5000, 4))
            elif name.startswith("scatter_table"):
                cases.append((op, chain, "float16", 1000, 5000, 4))
            elif name.startswith("split_table"):
                cases.append((op, chain, "float16", 10**5, 5000, 1))
            elif name.startswith("block_table"):
                cases.append((op, chain, "float16", 1000, 700, 1))
            elif name.startswith("scatter_pairs"):
                cases += [(op, chain, dtype, 1000, 5000, 1) for dtype in (("float32",) if counted else ()) + ("float16",)]
            elif name.startswith("pair chunks"):
                cases.append((op, chain, parity, 1000, 5000, 1))
            else:  # sorted, P place[, wide]
                features = 96 if name.endswith("wide") else 64
                cases.append((op, chain, parity, 1000, 5000, features) if counted
                             else (op, chain, "float16", 10**5, 20000, features))
    return cases


def _tactic_cases() -> list[Any]:
    """(op, chain, dtype, N, E, F) of each chain whose scatter step offers tactics, pinned to each tactic
    (tests/support/tactics.py), at sizes where chunk_reduce runs (N = 1000, rows of 64)."""
    from plugin.scatter_add_op import SCATTER_TACTICS, state_chain, table_chain
    from tests.support.tactics import OPS, pinned_tactic

    cases = []
    for name, op in OPS.items():
        counted = "counts" in op.output_names()
        for chain, dtype in ((state_chain(counted), "float32"), (table_chain(counted), "float16")):
            for tactic in range(1, len(SCATTER_TACTICS) + 1):
                cases.append((*pinned_tactic(op, chain, tactic), dtype, 1000, 20000, 64))
    return cases


def _case_id(case: Any) -> str:
    from benchmarks.bench_aot_cells import chain_name

    op, chain, dtype, nodes, edges, features = case
    pinned = op.namespace.removeprefix("aliased_io").lstrip("_")  # tests/support/tactics.py's <op's>_tactic<k>
    name = f"{pinned}-{op.name}" if pinned else op.name
    return f"{name}-{chain_name(chain)}-{dtype}-{nodes}x{edges}x{features}".replace(" ", "").replace(",", "_")


@pytest.mark.parametrize("case", _chain_cases() + _tactic_cases(), ids=_case_id)
def test_every_chain_of_the_scatter_adds_builds_runs_and_matches_the_reference(case):
    """Each chain an engine may hold, built into an engine of its own (state X [N, F] with X_out bound at X,
    src and idx of E edges, some out of range), run once and compared with the op's float64 reference (counts
    exactly): every AOT plugin of the two ops in an engine. TensorRT times each scatter step's tactics and keeps
    the fastest, so each chain with tactics is also built pinned to each tactic (tests/support/tactics.py): every
    tactic's kernel runs in an engine."""
    pytest.importorskip("tensorrt.plugin", reason="the AOT plugins need TensorRT >= 10.16 (tensorrt.plugin)")
    from common.imports import import_tensorrt
    from network.aot_layers import add_inplace_chain
    from network.engine import build_engine_bytes, deserialize_engine
    from network.execution import ExecutionSession
    from plugin.device_array import DeviceArray

    op, chain, dtype, nodes, edges, features = case
    trt = import_tensorrt()
    rng = np.random.default_rng(7)
    state = rng.standard_normal((nodes, features)).astype(dtype)
    src = rng.standard_normal((edges, features)).astype(dtype)
    index = rng.integers(-3, nodes + 3, edges).astype(np.int64)

    def populate(trt: Any, network: Any) -> Any:
        kind = trt.float16 if dtype == "float16" else trt.float32
        tensors = {"state": network.add_input("X", kind, (nodes, features)),
                   "src": network.add_input("src", kind, (-1, features)),
                   "index": network.add_input("idx", trt.int64, (-1,))}
        outputs, arrays = add_inplace_chain(trt, network, op, chain, tensors)
        for tensor, name in zip(outputs, ("X_out", "counts")):
            tensor.name = name
            network.mark_output(tensor)
        return arrays

    data, _ = build_engine_bytes(populate, {"src": ((edges, features),) * 3, "idx": ((edges,),) * 3})
    engine = deserialize_engine(data, _case_id(case), just_built=True)
    inputs = {"X": DeviceArray.from_array(state), "src": DeviceArray.from_array(src),
              "idx": DeviceArray.from_array(index)}
    session = ExecutionSession(trt, engine, inputs, outputs_at_inputs={"X_out": "X"})
    try:
        session.execute()
        session.synchronize()
        out = inputs["X"].download()
        counts = session.outputs["counts"].download() if "counts" in op.output_names() else None
    finally:
        session.close()
        for buffer in inputs.values():
            buffer.free()
    expected = op.reference(state, src, index)
    tolerance = 2e-3 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(out.astype(np.float64), expected[0], rtol=tolerance, atol=tolerance)
    if counts is not None:
        assert np.array_equal(counts, expected[1])
