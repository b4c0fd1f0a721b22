"""Optimization-profile bounds for the dynamic sizes N (nodes) and E (edges), and the checks a graph must pass.

One engine serves every graph whose N and E lie within its profile and whose F, C and precision match.
"""

from dataclasses import dataclass

from common.errors import InputError
from common.limits import MAX_PROFILE_SIZE

DEFAULT_MAX_NODES = 1 << 16
DEFAULT_MAX_EDGES = 1 << 20

CLASSIFIER = "classifier"  # inputs X, src, idx, W; output softmax (the sample's network)
STATE_UPDATE = "state update"  # inputs X, src, idx; output X_out (the plugin's aggregated state; --steps)


@dataclass(frozen=True)
class SizeRange:
    """min <= opt <= max for one dynamic dimension; TensorRT tunes kernels for opt."""

    min: int
    opt: int
    max: int

    def __post_init__(self) -> None:
        if not 1 <= self.min <= self.opt <= self.max:
            raise InputError(f"profile bounds must satisfy 1 <= min <= opt <= max, got {self.min}, {self.opt}, {self.max}")

    def contains(self, size: int) -> bool:
        return self.min <= int(size) <= self.max

    def __str__(self) -> str:
        return f"[{self.min}, {self.max}] (opt {self.opt})"


@dataclass(frozen=True)
class ProfileBounds:
    """The engine's optimization profile: ranges for N (rows of X) and E (rows of src, entries of idx)."""

    nodes: SizeRange
    edges: SizeRange


def requested_profile_bounds(
    num_nodes: int,
    num_edges: int,
    max_nodes: int | None = None,
    max_edges: int | None = None,
    edges_source: str = "the graph",
) -> ProfileBounds:
    """The profile for a new engine: min 1, opt the given sizes, max from --max_nodes/--max_edges (when given)
    or the defaults. InputError when the given sizes exceed a requested maximum, naming both."""
    defaults = default_profile_bounds(num_nodes, num_edges)
    if max_nodes is not None and num_nodes > max_nodes:
        raise InputError(f"the graph has {num_nodes:,} nodes, more than --max_nodes {max_nodes:,}")
    if max_edges is not None and num_edges > max_edges:
        raise InputError(f"{edges_source} has {num_edges:,} edges, more than --max_edges {max_edges:,}")
    return ProfileBounds(
        nodes=defaults.nodes if max_nodes is None else SizeRange(1, max(num_nodes, 1), max_nodes),
        edges=defaults.edges if max_edges is None else SizeRange(1, max(num_edges, 1), max_edges),
    )


def default_profile_bounds(num_nodes: int, num_edges: int) -> ProfileBounds:
    """Min 1, opt the given graph, max at least 65536 nodes and 1048576 edges (more when the graph is larger)."""
    return ProfileBounds(
        nodes=SizeRange(1, max(num_nodes, 1), max(num_nodes, DEFAULT_MAX_NODES)),
        edges=SizeRange(1, max(num_edges, 1), max(num_edges, DEFAULT_MAX_EDGES)),
    )


@dataclass(frozen=True)
class EngineSignature:
    """What an engine is fixed to: precision, features F, classes C (0 for a state-update engine), the profile
    for N and E, and which network it holds (CLASSIFIER or STATE_UPDATE)."""

    precision: str
    num_features: int
    num_classes: int
    bounds: ProfileBounds
    kind: str = CLASSIFIER


def check_graph_fits(signature: EngineSignature, precision: str, num_nodes: int, num_edges: int,
                     num_features: int, num_classes: int, kind: str = CLASSIFIER, edges_source: str = "the graph") -> None:
    """InputError naming the first mismatch between a graph and an engine (built or loaded).

    For a STATE_UPDATE engine num_classes is not checked and num_edges is the edges per execution (a batch).
    """
    if kind != signature.kind:
        needs = "--steps" if signature.kind == STATE_UPDATE else "a run without --steps"
        raise InputError(f"the engine holds the {signature.kind} network, which {needs} uses; this run needs the {kind} network")
    if precision != signature.precision:
        raise InputError(f"the engine was built for --precision {signature.precision}, got --precision {precision}")
    if num_features != signature.num_features:
        raise InputError(f"the engine was built for {signature.num_features} features per node, the graph has {num_features}")
    if kind == CLASSIFIER and num_classes != signature.num_classes:
        raise InputError(f"the engine was built for --num_classes {signature.num_classes}, got {num_classes}")
    if not signature.bounds.nodes.contains(num_nodes):
        raise InputError(
            f"the graph has {num_nodes} nodes, outside the engine's profile {signature.bounds.nodes}; "
            "build a new engine (without --load_engine)"
        )
    if not signature.bounds.edges.contains(num_edges):
        raise InputError(
            f"{edges_source} has {num_edges} edges, outside the engine's profile {signature.bounds.edges}; "
            "build a new engine (without --load_engine)"
        )
