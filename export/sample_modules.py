"""The sample's two networks as torch.nn.Modules, node for node the TensorRT network of network/definition.py.

    SampleClassifier   (X [N, F], src [E, F], idx [E] int64, W [C, F]) -> softmax [C, N]
        X.index_add_(0, idx, src)             the state, added into in place (the plugin's aggregated output)
        counts = in_degree(X, idx)            int64 [N, 1] (the plugin's counts output, compute_counts=1)
        mean = X / counts                     true division: the exporter casts counts to X's dtype
        softmax(relu(W @ mean.T), dim=0)      over the classes of [C, N]
    SampleStateUpdate  (X, src, idx) -> X_out = X.index_add(0, idx, src)   (--steps; compute_counts=0)

torch.onnx.export (dynamo) writes index_add as Unsqueeze(idx) + ScatterND(reduction="add"); the rewrite
(onnx_path/rewrite.py) replaces the one into X by the plugin and the counts' one (ones into int64 zeros
shaped from X, with the same idx) by the plugin's counts output. Imports torch.
"""

from dataclasses import dataclass

import torch

CLASSIFIER = "classifier"
STATE = "state"
NETWORKS = (CLASSIFIER, STATE)
PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16}
# N and E of the example inputs: distinct, and neither 0 nor 1 (torch.export specializes a dimension of size
# 0 or 1 to a constant), so both stay dynamic in the exported model.
EXAMPLE_NODES = 5
EXAMPLE_EDGES = 7


def in_degree(state: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """int64 [N, 1]: the edges into each node, as zeros [N, 1] shaped from the state with ones [E, 1] added at
    `index`. The rewrite recognises exactly this (a scatter-add of ones into zeros shaped from X, with X's index)
    as the plugin's counts output; torch.bincount would export to something else."""
    zeros = torch.zeros((state.shape[0], 1), dtype=torch.int64, device=state.device)
    ones = torch.ones((index.shape[0], 1), dtype=torch.int64, device=index.device)
    return zeros.index_add_(0, index, ones)


class SampleClassifier(torch.nn.Module):
    """The sample's classifier: the state updated in place, the mean over incoming edges, softmax over classes.

    forward mutates X (the state), as the engine does: the plugin's aggregated output is X's memory."""

    def forward(self, X: torch.Tensor, src: torch.Tensor, idx: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        X.index_add_(0, idx, src)
        mean = X / in_degree(X, idx)
        return torch.softmax(torch.relu(W @ mean.T), dim=0)


class SampleStateUpdate(torch.nn.Module):
    """The state-update network of --steps: X_out = X with the src rows added at idx (no counts)."""

    def forward(self, X: torch.Tensor, src: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return X.index_add(0, idx, src)


@dataclass(frozen=True)
class ExportSpec:
    """What torch.onnx.export needs for one network: the module, example inputs, names and dynamic shapes."""

    module: torch.nn.Module
    args: tuple[torch.Tensor, ...]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_shapes: dict[str, dict[int, object] | None]


def export_spec(network: str, precision: str, num_features: int, num_classes: int, seed: int = 0) -> ExportSpec:
    """The module of `network` ("classifier" or "state") in `precision` ("fp32" or "fp16"), random example inputs
    (every row of X reached by an edge, so the example's mean is finite) and N, E dynamic; F, C fixed."""
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {', '.join(NETWORKS)}, got {network!r}")
    dtype = PRECISIONS[precision]
    generator = torch.Generator().manual_seed(seed)
    nodes, edges = torch.export.Dim("N"), torch.export.Dim("E")
    state = torch.zeros((EXAMPLE_NODES, num_features), dtype=dtype)
    source = torch.randn((EXAMPLE_EDGES, num_features), generator=generator).to(dtype)
    index = torch.arange(EXAMPLE_EDGES, dtype=torch.int64) % EXAMPLE_NODES
    dynamic: dict[str, dict[int, object] | None] = {"X": {0: nodes}, "src": {0: edges}, "idx": {0: edges}}
    if network == STATE:
        return ExportSpec(SampleStateUpdate().eval(), (state, source, index), ("X", "src", "idx"), ("X_out",), dynamic)
    weights = torch.randn((num_classes, num_features), generator=generator).to(dtype)
    dynamic["W"] = None
    return ExportSpec(SampleClassifier().eval(), (state, source, index, weights), ("X", "src", "idx", "W"),
                      ("softmax",), dynamic)
