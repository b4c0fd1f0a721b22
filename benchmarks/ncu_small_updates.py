"""A target for Nsight Compute (issue 26): each float16 small-update kernel launched once, on fresh random data.

    ncu --clock-control none --set full -k regex:'scatter_|apply_|index' \\
        -o OUT/small python3 benchmarks/ncu_small_updates.py

F = 1, no counts: B = 1e4 into N = 1e6 with the owned kernel, grid_table and torch index_add_; B = 1e4 into
N = 1e4 with the one-slot table (scatter_global_v1 + apply_table_v1); B = 1e6 into N = 1e7 with split_table.
Plain launches (no graph replay), so every kernel is its own launch in the report. The one-slot table and
split_table only with --all.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    from benchmarks.gpu_timing import require_torch_gpu

    require_torch_gpu("ncu_small_updates.py")
    import torch

    from plugin.kernels import PreparedScatterAdd, scatter_add_workspace_size

    stream = torch.cuda.current_stream().cuda_stream

    def run(batch: int, num_nodes: int, algorithm: str) -> None:
        state = torch.randn(num_nodes, 1, device="cuda", dtype=torch.float16)
        src = torch.randn(batch, 1, device="cuda", dtype=torch.float16)
        index = torch.randint(0, num_nodes, (batch,), device="cuda", dtype=torch.int64)
        size = scatter_add_workspace_size(num_nodes, batch, 1, "float16", with_counts=False, algorithm=algorithm)
        workspace = torch.empty(max(size, 1), device="cuda", dtype=torch.uint8)
        launch = PreparedScatterAdd(num_nodes=num_nodes, num_edges=batch, num_features=1, dtype="float16",
                                    with_counts=False, workspace_size=size, algorithm=algorithm)
        launch.graph_replay = False
        plan = launch(state.data_ptr(), src.data_ptr(), index.data_ptr(), 0, workspace.data_ptr(), stream)
        torch.cuda.synchronize()
        print(f"B={batch} N={num_nodes} {algorithm}: {plan.algorithm} {plan.scatter}", flush=True)
        if algorithm == "owned":
            state.index_add_(0, index, src)
            torch.cuda.synchronize()

    run(10**4, 10**6, "owned")
    run(10**4, 10**6, "grid_table")
    if "--all" in sys.argv:
        run(10**4, 10**4, "global")
        run(10**6, 10**7, "split_table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
