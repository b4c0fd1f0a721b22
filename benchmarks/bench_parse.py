"""CPU side of the sample at scale: validation, parsing, the float64 reference, random graphs.

    python3 benchmarks/bench_parse.py [--repeat 3]

Issue 2 asks for under 2 s each on a 2-core machine: validating 10 million edges held in arrays, parsing a
1-million-edge string, and the reference at 10 million edges with F = 1. Issue 4 asks for a quick,
memory-lean random graph generator up to 10 million edges. Each row gives the first call (a cold process
pays for fresh memory pages) and the best of --repeat calls, and the peak of memory allocated during the
call (tracemalloc, in a separate untimed call) next to the size of the result.
"""

import platform
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser, positive_int  # noqa: E402
from graph import parse_edge_list, parse_edges, parse_node_features, random_graph, validate_graph  # noqa: E402
from reference import gnn_reference, make_weights  # noqa: E402


def timed(function, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times[0], min(times)


def peak_mib(function) -> tuple[float, float]:
    """Peak MiB allocated while `function` runs, and the MiB its result holds."""
    tracemalloc.start()
    result = function()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    arrays = result if isinstance(result, (tuple, list)) else [result]
    if isinstance(result, dict):
        arrays = list(result.values())
    if hasattr(result, "edges"):
        arrays = [result.edges, result.node_features]
    held = sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))
    return peak / 2**20, held / 2**20


def main() -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=positive_int, default=3)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    num_nodes = 1_000_000
    edges_10m = random_graph(num_nodes, 10_000_000, rng)
    features_1m = rng.uniform(0.0, 10.0, num_nodes)
    edges_1m = rng.integers(0, num_nodes, (1_000_000, 2))
    edge_string = "[" + ",".join(f"[{s},{t}]" for s, t in edges_1m.tolist()) + "]"
    feature_string = "[" + ",".join(repr(v) for v in features_1m.tolist()) + "]"
    edge_text = "\n".join(f"{s} {t}" for s, t in edges_1m.tolist()).encode()
    weights = make_weights(0, 3, 1)

    rows = [
        ("validate_graph, edges in arrays", "10M edges, 1M nodes", 2.0,
         lambda: validate_graph(features_1m, edges_10m)),
        ("parse_edges, '[[s,t],...]' string", f"1M edges, {len(edge_string) / 1e6:.1f}M chars", 2.0,
         lambda: parse_edges(edge_string)),
        ("parse_node_features, '[x,...]' string", f"1M numbers, {len(feature_string) / 1e6:.1f}M chars", None,
         lambda: parse_node_features(feature_string)),
        ("parse_edge_list, 's t' lines", f"1M lines, {len(edge_text) / 1e6:.1f} MB", None,
         lambda: parse_edge_list(edge_text)),
        ("gnn_reference, F = 1", "10M edges, 1M nodes", 2.0,
         lambda: gnn_reference(features_1m, edges_10m, weights)),
        ("random_graph", "10M edges, 1M nodes", None,
         lambda: random_graph(1_000_000, 10_000_000, np.random.default_rng(1))),
        ("random_graph", "10M edges, 10M nodes", None,
         lambda: random_graph(10_000_000, 10_000_000, np.random.default_rng(1))),
    ]

    print(f"# CPU benchmarks ({platform.processor() or platform.machine()}, numpy {np.__version__}, "
          f"repeat {args.repeat})")
    print()
    print("| operation | size | first call s | best s | limit s | peak alloc MiB | result MiB |")
    print("|---|---|---|---|---|---|---|")
    for name, size, limit, function in rows:
        first, best = timed(function, args.repeat)
        peak, held = peak_mib(function)
        verdict = "-" if limit is None else f"{limit:g} ({'ok' if first < limit else 'OVER'})"
        print(f"| {name} | {size} | {first:.3f} | {best:.3f} | {verdict} | {peak:.0f} | {held:.0f} |", flush=True)


if __name__ == "__main__":
    main()
