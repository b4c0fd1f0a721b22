"""PyTorch Geometric's layers as users write them, for the ONNX tests: each exported by torch.onnx.export(dynamo=True)
with N (nodes) and E (edges) dynamic, all in ONE background process per test session (started when the session
collects a test that uses them: tests/conftest.py), so that on a 2-core machine the exports overlap the tests before.

    python3 -m tests.support.onnx_pyg OUT_DIR         exports every model of PYG to OUT_DIR/<name>.onnx
    pyg_path(name) -> Path                    the session's export (waits for the background process)
    pyg_feeds(name, seed) -> {input: array}   seeded inputs of other sizes than the export's, indices in range,
                                              some nodes with no in-edges (a mean over none is 0 in PyG)
PYG: name -> Expected (what the rewrite does: scatters replaced, of which counts, and the reductions left).
"""

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.support.background import lower_process
from tests.support.onnx_helpers import ROOT, missing_reason

F, OUT, HEADS = 3, 4, 2
PYG_MISSING = missing_reason("torch", "torch_geometric", "onnx", "onnxscript", "onnx_graphsurgeon", "onnxruntime")


@dataclass(frozen=True)
class Expected:
    """How the rewrite takes a model: plugin nodes (Python plugin), the counts scatters their counts output
    replaces, and the reductions of the scatters left to TensorRT (in graph order); refused: no scatter-add."""

    plugins: int
    counts: int = 0
    left: tuple[str, ...] = ()
    refused: bool = False


PYG = {
    "gcn": Expected(2),  # the degree (1-D, ones into zeros [N]) weighs the messages it counts: its own plugin node
    "gcn_plain": Expected(1),  # normalize=False
    "sage_sum": Expected(1),
    "sage_mean": Expected(1, counts=1),  # the 1-D counts of the same index: the plugin's counts output
    "gin": Expected(1),
    "graph": Expected(1),
    "edge_add": Expected(1),
    "edge_mean": Expected(1, counts=1),
    "edge_max": Expected(0, left=("min", "max"), refused=True),  # no scatter-add: exit 2, one line
    "gat": Expected(2, left=("min", "max")),  # the softmax's max stays, its sum and the aggregation go in place
    "two_layer_pool": Expected(4, counts=2),  # GCNConv, SAGEConv (mean), global_mean_pool over `batch`
}
EXAMPLE = {"N": 5, "E": 7}  # the export's example graph
SIZES = {"N": 11, "E": 29, "B": 3}  # the seeded inputs' graph (B graphs in the batch)


def _modules() -> dict[str, Any]:
    import torch
    from torch_geometric.nn import EdgeConv, GATConv, GCNConv, GINConv, GraphConv, SAGEConv, global_mean_pool

    def mlp(inputs: int) -> Any:
        return torch.nn.Sequential(torch.nn.Linear(inputs, OUT), torch.nn.ReLU(), torch.nn.Linear(OUT, OUT))

    class Layer(torch.nn.Module):
        def __init__(self, conv: Any) -> None:
            super().__init__()
            self.conv = conv

        def forward(self, x, edge_index):
            return self.conv(x, edge_index)

    class TwoLayerPool(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = GCNConv(F, OUT), SAGEConv(OUT, OUT)

        def forward(self, x, edge_index, batch):
            hidden = self.first(x, edge_index).relu()
            return global_mean_pool(self.second(hidden, edge_index), batch)

    return {
        "gcn": lambda: Layer(GCNConv(F, OUT)), "gcn_plain": lambda: Layer(GCNConv(F, OUT, normalize=False)),
        "sage_sum": lambda: Layer(SAGEConv(F, OUT, aggr="sum")), "sage_mean": lambda: Layer(SAGEConv(F, OUT)),
        "gin": lambda: Layer(GINConv(mlp(F))), "graph": lambda: Layer(GraphConv(F, OUT)),
        "edge_add": lambda: Layer(EdgeConv(mlp(2 * F), aggr="add")),
        "edge_mean": lambda: Layer(EdgeConv(mlp(2 * F), aggr="mean")),
        "edge_max": lambda: Layer(EdgeConv(mlp(2 * F), aggr="max")),
        # add_self_loops=False: with it, torch.export stops at GATConv's `index.numel() == 0` (data-dependent)
        "gat": lambda: Layer(GATConv(F, OUT, heads=HEADS, add_self_loops=False)),
        "two_layer_pool": TwoLayerPool,
    }


def input_names(name: str) -> list[str]:
    return ["x", "edge_index", "batch"] if name == "two_layer_pool" else ["x", "edge_index"]


def pyg_feeds(name: str, seed: int = 0, sizes: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """x [N, F] standard normal; edge_index [2, E]: sources at random, targets among all but the last two nodes
    (which have no in-edges); batch [N] sorted, every graph of B present."""
    sizes = sizes or SIZES
    rng = np.random.default_rng(seed)
    nodes, edges = sizes["N"], sizes["E"]
    feeds = {"x": rng.standard_normal((nodes, F)).astype(np.float32),
             "edge_index": np.stack([rng.integers(0, nodes, edges), rng.integers(0, nodes - 2, edges)]).astype(np.int64)}
    if name == "two_layer_pool":
        graphs = sizes.get("B", 2)
        feeds["batch"] = np.sort(np.concatenate([np.arange(graphs), rng.integers(0, graphs, nodes - graphs)]))
    return feeds


def export_all(out: Path) -> None:
    """Every model of PYG exported to out/<name>.onnx (seeded weights), N and E dynamic."""
    import onnxscript._framework_apis.torch_2_5  # noqa: F401  (loaded by the first export anyway)
    import torch

    from export.export_onnx import quiet_exporter
    from tests.support.onnx_helpers import share_torchlib_ops

    share_torchlib_ops()  # 11 exports, one table of torchlib functions
    torch.manual_seed(0)
    modules = _modules()
    for name in PYG:
        args = tuple(torch.from_numpy(array) for array in pyg_feeds(name, seed=1, sizes={**EXAMPLE, "B": 2}).values())
        nodes, edges = torch.export.Dim("N"), torch.export.Dim("E")
        shapes: dict[str, Any] = {"x": {0: nodes}, "edge_index": {1: edges}}
        if name == "two_layer_pool":
            shapes["batch"] = {0: nodes}
        with quiet_exporter():
            program = torch.onnx.export(modules[name]().eval(), args, dynamo=True, dynamic_shapes=shapes,
                                        input_names=input_names(name), output_names=["out"], verbose=False)
        assert program is not None
        program.save(str(out / f"{name}.onnx"))


_RUN: dict[str, Any] = {}


def start_pyg_export() -> None:
    """Starts `python3 -m tests.support.onnx_pyg DIR` in the background, once per session."""
    if "process" in _RUN or PYG_MISSING is not None:
        return
    out = Path(tempfile.mkdtemp(prefix="pyg_models_"))
    argv = [sys.executable, "-m", "tests.support.onnx_pyg", str(out)]
    with open(out / "export.log", "w") as log:  # a file, not a pipe: nothing blocks the export while no one reads
        _RUN.update(out=out, process=subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
    lower_process(_RUN["process"].pid)  # beside the tests, below them (tests/support/background.py)


def pyg_path(name: str) -> Path:
    """The session's export of model `name` (the background export awaited; its failure fails the caller)."""
    start_pyg_export()
    if "result" not in _RUN:
        process = _RUN["process"]
        try:
            process.wait(timeout=600)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        _RUN["result"] = process.returncode
    if _RUN["result"] != 0:
        log = (Path(_RUN["out"]) / "export.log").read_text(errors="replace")
        raise AssertionError(f"python3 -m tests.support.onnx_pyg failed ({_RUN['result']}): {log[-3000:]}")
    return Path(_RUN["out"]) / f"{name}.onnx"


def stop_pyg_export() -> None:
    """Ends the background export if no test waited for it, and removes its folder (pytest_sessionfinish)."""
    import shutil

    process = _RUN.get("process")
    if process is not None and "result" not in _RUN:
        process.kill()
        process.wait()
    if "out" in _RUN:
        shutil.rmtree(_RUN["out"], ignore_errors=True)


if __name__ == "__main__":
    export_all(Path(sys.argv[1]))
