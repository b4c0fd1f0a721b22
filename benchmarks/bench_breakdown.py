"""Device time of each driver call of one scatter-add launch (memsets and kernels), to see where a plan spends.

    python3 benchmarks/bench_breakdown.py [--sizes 1e3:1e7:64,...] [--dtypes float32,float16] [--out DIR]
                                          [--algorithm auto|global|shared|sorted] [--define NAME=VALUE ...]
                                          [--plan NAME=VALUE ...]

For each size: the launch is prepared once (`PreparedScatterAdd`, counts requested, the workspace
`scatter_add_workspace_size` asks for with room for the sorted path), then its driver calls are issued one by one
with a CUDA event between each two (after a sleep kernel, so the host's enqueueing is not timed); median of 20
runs per call, fresh random inputs (standard normal values, uniform targets). --define compiles the kernels with
an extra -D (e.g. SORT_UNROLL=16) to compare a kernel constant without editing the source; --plan sets one of
plan.py's integer constants for the run (e.g. SORT_ONE_TILE_NODES=16384, SORT_MAX_PLACE_PASSES=1).
"""

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser, dtype_names  # noqa: E402
from benchmarks.bench_scatter_add import exp10, fmt, make_inputs, parse_sizes  # noqa: E402
from benchmarks.gpu_timing import (  # noqa: E402
    SLEEP_CYCLES,
    device_name,
    driver_calls,
    print_and_save,
    require_torch_gpu,
)

DEFAULT_SIZES = "1e3:1e6:64,1e3:1e7:64,1e4:1e6:64,1e6:1e6:64,1e6:1e7:64"


def compile_with(defines: list[str]) -> None:
    """Makes the launcher compile its kernels with these extra -D options (this process only)."""
    from plugin.kernels import compile as compile_module
    from plugin.kernels import launch

    options = tuple(f"-D{define}" for define in defines)
    launch.compile_scatter_add = lambda arch, dtype: compile_module.compile_cubin(arch, dtype, options)[0]


def breakdown(num_nodes: int, num_edges: int, num_features: int, dtype_name: str, algorithm: str,
              runs: int = 20) -> list[tuple[str, float]]:
    """(what, median ms) per driver call of one prepared launch."""
    import torch

    from plugin.kernels import PreparedScatterAdd, scatter_add_workspace_size

    state, [(src, index)] = make_inputs(num_nodes, num_edges, num_features, getattr(torch, dtype_name), sets=1)
    counts = torch.empty(num_nodes, 1, device="cuda", dtype=torch.int64)
    size = scatter_add_workspace_size(num_nodes, num_edges, num_features, dtype_name,
                                      algorithm="sorted" if algorithm in ("auto", "sorted") else "auto")
    workspace = torch.empty(max(size, 1), device="cuda", dtype=torch.uint8)
    stream = torch.cuda.current_stream().cuda_stream
    launch = PreparedScatterAdd(num_nodes=num_nodes, num_edges=num_edges, num_features=num_features, dtype=dtype_name,
                                with_counts=True, workspace_size=size, algorithm=algorithm)
    pointers = (state.data_ptr(), src.data_ptr(), index.data_ptr(), counts.data_ptr(), workspace.data_ptr(), stream)
    launch(*pointers)  # loads the kernels
    calls = driver_calls(launch, *pointers)
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(runs + 2):
        events = [torch.cuda.Event(enable_timing=True) for _ in range(len(calls) + 1)]
        torch.cuda._sleep(SLEEP_CYCLES)
        events[0].record()
        for i, (call, arguments, what) in enumerate(calls):
            result = call(*arguments)
            if result[0]:
                raise RuntimeError(f"{what} failed: {result[0]}")
            events[i + 1].record()
        events[-1].synchronize()
        for i in range(len(calls)):
            times[i].append(events[i].elapsed_time(events[i + 1]))
    rows = [(what, statistics.median(t[2:])) for (_, _, what), t in zip(calls, times)]
    del state, src, index, counts, workspace
    torch.cuda.empty_cache()
    return rows


def plan_constant(text: str) -> tuple[str, int]:
    """NAME=VALUE naming one of plan.py's integer constants (argparse reports a ValueError as a usage error)."""
    from plugin.kernels import plan

    name, _, value = text.partition("=")
    if not isinstance(getattr(plan, name, None), int) or not name.isupper():
        raise ValueError(f"{name!r} is not an integer constant of plugin/kernels/plan.py")
    return name, int(value)


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=parse_sizes(DEFAULT_SIZES), help="N:E:F, comma-separated")
    parser.add_argument("--dtypes", type=dtype_names, default="float32", help="comma-separated: float32, float16")
    parser.add_argument("--out", type=Path, help="folder for the table (bench_breakdown.md)")
    parser.add_argument("--algorithm", default="auto", choices=("auto", "global", "shared", "sorted"))
    parser.add_argument("--define", action="append", default=[], help="extra -D for the kernels (NAME=VALUE)")
    parser.add_argument("--plan", action="append", default=[], type=plan_constant,
                        help="a plan.py constant for this run (NAME=VALUE, an integer)")
    args = parser.parse_args()
    require_torch_gpu("bench_breakdown.py")
    if args.define:
        compile_with(args.define)
    from plugin.kernels import plan

    for name, value in args.plan:
        setattr(plan, name, value)
    knobs = " ".join(args.define + [f"{name}={value}" for name, value in args.plan])
    lines = [f"{device_name()}; algorithm {args.algorithm}{', ' + knobs if knobs else ''}; device ms per driver "
             "call, median of 20", "", "| dtype | N | E | F | driver call | ms |", "| --- | --- | --- | --- | --- | --- |"]
    for dtype_name in args.dtypes:
        for n, e, f in args.sizes:
            rows = breakdown(n, e, f, dtype_name, args.algorithm)
            rows.append(("total", sum(ms for _, ms in rows)))
            lines += [f"| {dtype_name} | {exp10(n)} | {exp10(e)} | {f} | {what} | {fmt(ms)} |" for what, ms in rows]
    print_and_save("\n".join(lines), args.out, "bench_breakdown.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
