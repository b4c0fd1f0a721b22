"""Per-step engine time at a fixed batch of B edges vs the state size N = 1e3 ... 1e8 (F = 1), through TensorRT.

    python3 benchmarks/bench_engine_state.py [--batch_edges 10000] [--steps 50] [--precision fp32]
                                             [--nodes 1000 ... 100000000] [--out DIR]

The engine-level companion of benchmarks/bench_state_update.py (which times the kernel alone). One
state-update engine is built (X, src, idx -> scatter-add plugin -> output X_out; profile N in [1, max N],
E = B) and reused for every N: for each N, network.steps.run_state_steps executes it --steps times on one
state buffer X of N zeros, each step adding a new batch of B random edges, after two warm-up executions that
add zeros. X_out is bound at X's address (as NVIDIA's in-place sample binds its output), so the runner
never copies the state back. Per-step time = CUDA events on the session's stream around execute_async_v3
(host enqueue time included when the GPU waits for it). The table also shows what TensorRT reported for
X_out (ICudaEngine.get_aliased_input_tensor, TensorRT >= 10.15), whether X changed after the first step, and
whether the final state matched the float64 reference.

What could grow with N besides the update itself: the state-update engine's plugin is built with
compute_counts=0, so it computes no counts and zeroes nothing of size N; a copy of X inside the engine, if
TensorRT made one, would be O(N) and show as per-step time growing with N. Needs the full TensorRT
(>= 10.4), polygraphy (>= 0.53.6), cuda-python and a GPU; where one is missing or too old the script prints
one line saying so and exits with status 3.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks.arguments import ArgumentParser, positive_int  # noqa: E402
from benchmarks.gpu_timing import EXIT_MISSING_DEPENDENCY, print_and_save  # noqa: E402
from common.errors import MissingDependencyError  # noqa: E402

NODES = [10**3, 10**4, 10**5, 10**6, 10**7, 10**8]


def device_name() -> str:
    from cuda.bindings import runtime

    from common.cuda_check import check

    properties = check(runtime.cudaGetDeviceProperties(0))
    name = properties.name
    return (name.decode() if isinstance(name, bytes) else str(name)).rstrip("\x00")


def build_state_engine(trt, precision: str, max_nodes: int, batch_edges: int):
    """One state-update engine whose profile covers N in [1, max_nodes] and E = batch_edges exactly."""
    from network.definition import STATE_UPDATE
    from network.engine import ProfileBounds, SizeRange, prepare_engine

    bounds = ProfileBounds(SizeRange(1, max_nodes, max_nodes), SizeRange(batch_edges, batch_edges, batch_edges))
    prepared = prepare_engine(trt, kind=STATE_UPDATE, precision=precision, num_nodes=max_nodes, num_edges=batch_edges,
                              num_features=1, num_classes=0, profile=bounds)
    return prepared.engine, prepared.origin.build_seconds


def measure(trt, engine, num_nodes: int, batch_edges: int, steps: int, precision: str, seed: int) -> dict:
    from network.timing import summarize
    from network.run import feature_dtype
    from network.steps import run_state_steps
    from reference.state import compare_state, expected_final_state, state_error_bound
    from graph import portable_edge_batches

    rng = np.random.default_rng(seed)
    dtype = feature_dtype(precision)
    features = rng.standard_normal((num_nodes, 1)).astype(dtype)
    batches = portable_edge_batches(num_nodes, steps, batch_edges, seed)
    run = run_state_steps(trt, engine, np.zeros((num_nodes, 1), dtype), features, batches)
    features64 = features.astype(np.float64)
    check = compare_state(run.final_state, expected_final_state(features64, batches, None),
                          state_error_bound(features64, batches, None, precision))
    step = summarize(run.step_ms)
    alias = "method missing" if run.aliases is None else repr(run.aliases.get("X_out"))
    return dict(
        N=num_nodes, median_us=step.median_ms * 1e3, min_us=step.min_ms * 1e3, max_us=step.max_ms * 1e3,
        alias=alias, changed=run.first_step_changed_state, ok=check.ok,
    )


def table(rows: list[dict], header: str) -> str:
    lines = [header, "",
             "| N | per-step median (us) | min | max | get_aliased_input_tensor('X_out') | X changed by step 1 | "
             "final state ok |",
             "|" + " --- |" * 7]
    for row in rows:
        lines.append(
            f"| {row['N']:.0e} | {row['median_us']:.1f} | {row['min_us']:.1f} | {row['max_us']:.1f} | {row['alias']} | "
            f"{row['changed']} | {row['ok']} |"
        )
    medians = [row["median_us"] for row in rows]
    if medians:
        lines += ["", f"largest / smallest per-step median: {max(medians) / min(medians):.2f}"]
    return "\n".join(lines)


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_edges", type=positive_int, default=10_000, help="edges per step, B (default 10000)")
    parser.add_argument("--steps", type=positive_int, default=50, help="timed steps per N (default 50)")
    parser.add_argument("--precision", choices=["fp32", "fp16"], default="fp32")
    parser.add_argument("--nodes", type=positive_int, nargs="+", default=NODES, help="state sizes N (default 1e3 ... 1e8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="folder for the table (bench_engine_state.md)")
    args = parser.parse_args()

    from network.engine import require_engine_dependencies

    try:
        trt = require_engine_dependencies()
    except MissingDependencyError as error:
        print(f"bench_engine_state.py: cannot run: {error}", file=sys.stderr)
        return EXIT_MISSING_DEPENDENCY

    start = time.perf_counter()
    engine, build_seconds = build_state_engine(trt, args.precision, max(args.nodes), args.batch_edges)
    print(f"Built one state-update engine in {build_seconds:.1f} s (N up to {max(args.nodes):,}, E = {args.batch_edges:,})",
          flush=True)
    rows = []
    for num_nodes in sorted(args.nodes):
        row = measure(trt, engine, num_nodes, args.batch_edges, args.steps, args.precision, args.seed)
        rows.append(row)
        print(f"N={num_nodes:.0e}: {row['median_us']:.1f} us per step (median), X_out alias {row['alias']}, "
              f"final state ok: {row['ok']}", flush=True)
    header = (f"{device_name()}, TensorRT {getattr(trt, '__version__', '?')}, {args.precision}, F = 1, "
              f"B = {args.batch_edges:,} edges per step, {args.steps} steps per N (after 1 warm-up), X_out bound at X; "
              f"total {time.perf_counter() - start:.0f} s")
    text = table(rows, header)
    print()
    print_and_save(text, args.out, "bench_engine_state.md")
    return 0 if all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
