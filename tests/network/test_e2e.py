"""End to end on the full TensorRT with a GPU: the CLI with --validate, one engine for graphs of several sizes,
an engine saved by one process and loaded by another. Skipped (with the reason) where either is missing.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.tensorrt

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "aliased_io_plugin.py"


def run(arguments, timeout=900):
    return subprocess.run(arguments, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_cli_validates_the_seed_graph(precision):
    result = run([sys.executable, str(CLI), "--precision", precision, "--validate", "--seed", "7"])
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Validation against reference successful!" in result.stdout
    assert "Engine built in" in result.stdout
    assert "get_aliased_input_tensor" in result.stdout and "Caller's X buffer" in result.stdout


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_cli_validates_several_features_per_node(precision):
    features = "[[1.0,-2.0,0.5],[3.0,0.0,1.0],[5.0,1.5,-1.0],[7.0,2.0,0.25],[0.5,0.5,0.5]]"
    edges = "[[0,1],[1,2],[2,3],[3,0],[0,2],[1,3],[4,4],[2,4],[3,1]]"
    result = run([sys.executable, str(CLI), "--precision", precision, "--node_features", features, "--edges", edges,
                  "--num_classes", "4", "--validate", "--seed", "3"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation against reference successful!" in result.stdout


# Runs in its own process: builds (or loads) an engine with network.run.run_graph for a random graph of the
# given size and checks it against the float64 reference; prints one JSON line.
RUN_GRAPH = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from common.paths import write_output
    from graph import validate_graph
    from reference import compare, gnn_reference, make_weights
    from network.engine import ProfileBounds, SizeRange
    from cli.engine_report import graph_run_lines
    from network.run import run_graph

    args = json.loads(sys.argv[1])
    rng = np.random.default_rng(args["seed"])
    n, e, f, c = args["nodes"], args["edges"], args["features"], args["classes"]
    targets = np.concatenate([np.arange(n), rng.integers(0, n, e - n)])
    edges = np.stack([rng.integers(0, n, e), targets], axis=1)
    graph = validate_graph(rng.standard_normal((n, f)), edges)
    weights = make_weights(args["seed"], c, f)
    profile = None
    if args.get("max_nodes"):
        profile = ProfileBounds(SizeRange(1, n, args["max_nodes"]), SizeRange(1, e, args["max_edges"]))
    result = run_graph(graph, weights, args["precision"], load_engine=args.get("load"), profile=profile)
    if args.get("save"):  # as the CLI's --save_engine, once the run has succeeded
        write_output(args["save"], result.engine_data, "--save_engine")
    expected = gnn_reference(graph.node_features, graph.edges, weights)["softmax"]
    comparison = compare(result.softmax, expected, args["precision"])
    print(json.dumps({"ok": bool(comparison.ok), "max_abs_error": float(comparison.max_abs_error),
                      "build_seconds": result.origin.build_seconds, "lines": graph_run_lines(result)}))
    """
)


def run_graph_in_new_process(**arguments):
    result = run([sys.executable, "-c", RUN_GRAPH, json.dumps(arguments)])
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_engine_saved_in_one_process_serves_other_sizes_in_another(tmp_path, precision):
    engine = tmp_path / f"scatter_add_{precision}.engine"
    common = dict(precision=precision, features=3, classes=4)
    built = run_graph_in_new_process(seed=1, nodes=50, edges=400, max_nodes=4096, max_edges=65536, save=str(engine), **common)
    assert built["ok"], built
    assert built["build_seconds"] > 0 and engine.stat().st_size > 0
    for seed, (nodes, edges) in enumerate([(3000, 60000), (7, 9)], start=2):  # bigger and smaller than the first
        loaded = run_graph_in_new_process(seed=seed, nodes=nodes, edges=edges, load=str(engine), **common)
        assert loaded["ok"], loaded
        assert loaded["build_seconds"] is None
        assert any(line.startswith("Engine loaded from") for line in loaded["lines"])


def test_graph_beyond_the_engine_profile_is_an_input_error(tmp_path):
    engine = tmp_path / "small.engine"
    common = dict(precision="fp32", features=2, classes=3)
    assert run_graph_in_new_process(seed=1, nodes=10, edges=20, max_nodes=16, max_edges=32, save=str(engine), **common)["ok"]
    result = run([sys.executable, "-c", RUN_GRAPH, json.dumps(dict(seed=2, nodes=17, edges=40, load=str(engine), **common))])
    assert result.returncode != 0
    assert "InputError" in result.stderr and "17 nodes, outside the engine's profile [1, 16]" in result.stderr


def test_one_engine_runs_graphs_of_different_sizes_in_one_process():
    """The same deserialized engine and run_engine path, fed two graphs whose N and E differ."""
    import numpy as np

    from common.imports import import_tensorrt
    from network.definition import populate_network
    from network.engine import build_engine_bytes, default_profile_bounds, deserialize_engine, sample_profile_shapes
    from network.run import engine_inputs, run_engine
    from reference import compare, gnn_reference, make_weights

    trt = import_tensorrt()
    weights = make_weights(5, 3, 2)
    bounds = default_profile_bounds(100, 1000)
    data, _ = build_engine_bytes(
        lambda module, network: populate_network(module, network, trt.float32, 2, 3), sample_profile_shapes(bounds, 2)
    )
    engine = deserialize_engine(data, "the test engine")
    rng = np.random.default_rng()
    for nodes, edges in [(100, 1000), (37, 333)]:
        targets = np.concatenate([np.arange(nodes), rng.integers(0, nodes, edges - nodes)])
        edge_array = np.stack([rng.integers(0, nodes, edges), targets], axis=1)
        features = rng.standard_normal((nodes, 2))
        outputs = run_engine(trt, engine, engine_inputs(features, edge_array, weights, "fp32"))
        expected = gnn_reference(features, edge_array, weights)
        assert outputs.softmax.shape == (3, nodes)
        assert compare(outputs.softmax, expected["softmax"], "fp32").ok
