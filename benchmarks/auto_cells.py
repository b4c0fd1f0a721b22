"""plan.py's "auto" against recorded measurements: which path it takes on each measured cell, and how much slower
that is than the fastest path timed there.

    python3 benchmarks/auto_cells.py [--add BENCH_CSV ...] [--cells CSV]

A cell is (dtype, N, E, F, counts) on one device; benchmarks/auto_cells_h200.csv holds, per cell, the device time
of every path bench_scatter_add.py timed there (its "auto" plan and the plans it rejected, same run). --add merges
bench_scatter_add.py CSVs into it (a path timed again keeps its latest time). Without --add it prints the cells
where the path plan.py takes now is more than 10% slower than the fastest one timed, or was not timed. No GPU:
the plans are made for the H200 (tests/support/kernel_fakes.py H200_LIKE), with the workspace workspace_size gives.
"""

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.arguments import ArgumentParser  # noqa: E402

CELLS = Path(__file__).with_name("auto_cells_h200.csv")
FIELDS = ("dtype", "N", "E", "F", "counts", "path", "ms")
SLOWER = 1.10  # a path more than 10% slower than the fastest timed one is a miss


def timed_paths(row: dict[str, str]) -> dict[str, float]:
    """{path: ms} of one bench_scatter_add.py row: its auto plan and the alternatives it timed, by plan.py path."""
    counts = row.get("counts", "True") == "True"
    first = row["plan"].split()[0]
    auto = {"hashed": "global"}.get(first, first)
    if auto == "global" and " pairs" in row["plan"]:
        auto = "pairs"
    paths = {auto: float(row["ours_ms"])}
    for key, value in row.items():
        if not (key.startswith("other[") and value):
            continue
        name = key[len("other["):-len("]_ms")]
        if name == "1 pass":  # node passes: a variant of the global path, not a path
            continue
        if name == "global" and int(row["F"]) == 1 and counts:
            name = "pairs"  # forcing global atomics keeps the pairs where they pay
        paths[{"unpaired": "global"}.get(name, name)] = float(value)
    return paths


def cell_of(row: dict[str, str]) -> tuple[str, int, int, int, bool]:
    """(dtype, N, E, F, counts) of a CSV row (bench_scatter_add.py rows without a counts column had counts)."""
    return row["dtype"], int(row["N"]), int(row["E"]), int(row["F"]), row.get("counts", "True") == "True"


def read_cells(path: Path = CELLS) -> dict[tuple[str, int, int, int, bool], dict[str, float]]:
    cells: dict[tuple[str, int, int, int, bool], dict[str, float]] = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            cells.setdefault(cell_of(row), {})[row["path"]] = float(row["ms"])
    return cells


def auto_path(dtype: str, nodes: int, edges: int, features: int, counts: bool) -> str:
    import numpy as np

    from plugin.kernels import scatter_add_workspace_size
    from plugin.kernels.plan import LaunchRequest, plan_launch
    from tests.support.kernel_fakes import H200_LIKE

    workspace = scatter_add_workspace_size(nodes, edges, features, dtype, with_counts=counts)
    vec = next(v for v in (4, 2, 1) if features % v == 0)
    request = LaunchRequest(nodes, edges, features, np.dtype(dtype), vec, counts, workspace)
    return plan_launch(request, H200_LIKE).path


def misses(cells: dict[tuple[str, int, int, int, bool], dict[str, float]]) -> dict[tuple, tuple[str, float]]:
    """{cell: (auto's path, its time over the fastest timed; inf where it was not timed)} for the misses."""
    found = {}
    for cell, paths in cells.items():
        path = auto_path(*cell)
        ratio = paths[path] / min(paths.values()) if path in paths else float("inf")
        if ratio > SLOWER:
            found[cell] = (path, ratio)
    return found


def merge(cells: dict, path: Path) -> None:
    """Adds the rows of one bench_scatter_add.py CSV to cells."""
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            cells.setdefault(cell_of(row), {}).update(timed_paths(row))


def main() -> int:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--add", nargs="+", type=Path, default=[], help="bench_scatter_add.py CSVs to merge in")
    parser.add_argument("--cells", type=Path, default=CELLS, help=f"the cells file (default {CELLS.name})")
    args = parser.parse_args()
    try:
        cells = read_cells(args.cells) if args.cells.exists() or not args.add else {}
        for path in args.add:
            merge(cells, path)
    except (OSError, KeyError, ValueError) as error:
        parser.error(f"cannot read the cells: {type(error).__name__}: {error}")
    if args.add:
        with open(args.cells, "w", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(FIELDS)
            for key in sorted(cells):
                for path, ms in sorted(cells[key].items()):
                    writer.writerow((*key, path, f"{ms:.5f}"))
        print(f"{args.cells}: {len(cells)} cells")
        return 0
    found = misses(cells)
    print(f"{len(cells)} cells, {len(found)} where auto's path is more than {SLOWER - 1:.0%} slower than the fastest:")
    for (dtype, nodes, edges, features, counts), (path, ratio) in sorted(found.items()):
        fastest = min(cells[(dtype, nodes, edges, features, counts)].items(), key=lambda item: item[1])
        print(f"  {dtype} N={nodes} E={edges} F={features} counts={counts}: {path} {ratio:.2f}x {fastest[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
