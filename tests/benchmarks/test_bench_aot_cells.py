"""bench_aot_cells.py's captured columns without a GPU: the cells table and aot_cells.csv carry AOT captured and
torch captured (the CSV's two new columns after tma_ms, so readers of the older columns keep working), their
ratios and their counts under the table."""

import csv

from benchmarks.bench_aot_cells import CSV_COLUMNS, cells_table, csv_row, write_csv

OLD_COLUMNS = ("device", "dtype", "N", "E", "F", "counts", "aot_ms", "python_ms", "torch_ms", "tma_ms")


def cell(**values):
    row = dict(dtype="float16", N=10**3, E=10**6, F=1, counts=True, aot_plan="scatter_table+apply_table", aot_ms=0.02,
               python_plan="table", python_ms=0.01, torch_ms=0.1, tma_ms=None, tma_check="", check="1.0e-04",
               aot_graph_ms=0.012, torch_graph_ms=0.05)
    row.update(values)
    return row


def table_cells(lines):
    header = next(line for line in lines if line.startswith("| dtype"))
    columns = [name.strip() for name in header.strip("|").split("|")]
    rows = [dict(zip(columns, (value.strip() for value in line.strip("|").split("|")), strict=True))
            for line in lines if line.startswith("| float")]
    return columns, rows


def test_the_csv_appends_the_captured_columns_after_tma_ms():
    assert CSV_COLUMNS == OLD_COLUMNS + ("aot_graph_ms", "torch_graph_ms")


def test_the_cells_table_has_the_captured_columns_and_their_ratios():
    lines = cells_table([cell(), cell(dtype="float32", F=64, tma_ms=0.03, tma_check="2.0e-07", aot_graph_ms=0.0125)],
                        "GPU")
    columns, rows = table_cells(lines)
    header_at = next(k for k, line in enumerate(lines) if line.startswith("| dtype"))
    assert len(columns) == len(set(columns)) == 19 and lines[header_at + 1] == "|" + " --- |" * 19
    assert columns.index("AOT captured") == columns.index("TMA rows") + 1
    assert columns.index("torch captured") == columns.index("AOT captured") + 1
    assert columns[columns.index("AOT / torch") + 1:columns.index("AOT check")] == [
        "AOT captured / Python", "AOT captured / torch captured"]
    assert [r["AOT captured"] for r in rows] == ["0.0120", "0.0125"]
    assert [r["torch captured"] for r in rows] == ["0.0500", "0.0500"]
    assert [r["AOT captured / Python"] for r in rows] == ["1.20", "1.25"]
    assert [r["AOT captured / torch captured"] for r in rows] == ["0.24", "0.25"]
    assert [r["AOT / Python"] for r in rows] == ["2.00", "2.00"]  # the plain columns unchanged
    assert "captured once into a CUDA graph" in lines[0] and "cannot be captured" in lines[0]


def test_the_summary_counts_the_captured_chain_against_python_and_captured_torch():
    rows = [cell(),  # plain: 2x Python, below torch; captured: 1.2x Python, below captured torch
            cell(aot_ms=0.0125, aot_graph_ms=0.013, torch_graph_ms=0.012),  # captured: 1.3x, above captured torch
            cell(aot_ms=0.2, aot_graph_ms=0.0125, torch_graph_ms=0.0125)]  # captured: 1.25x, at captured torch
    summary = cells_table(rows, "GPU")[-1]
    assert summary == ("AOT within 1.25x of the Python plugin's plan: 1 of 3; at or below torch: 2 of 3; captured: "
                       "within 1.25x of the Python plugin's plan: 2 of 3; at or below captured torch: 2 of 3")


def test_the_csv_rows_carry_both_captured_times_and_a_blank_tma_where_it_does_not_apply(tmp_path):
    rows = [cell(), cell(dtype="float32", F=64, counts=False, tma_ms=0.03)]
    assert csv_row(rows[0], "GPU") == ["GPU", "float16", 1000, 1000000, 1, 1, "0.02000", "0.01000", "0.10000", "",
                                       "0.01200", "0.05000"]
    path = tmp_path / "aot_cells.csv"
    write_csv(path, rows, "NVIDIA H100")
    with open(path, newline="") as handle:
        read = list(csv.DictReader(handle))
    assert tuple(read[0]) == CSV_COLUMNS
    assert [(r["tma_ms"], r["aot_graph_ms"], r["torch_graph_ms"]) for r in read] == [
        ("", "0.01200", "0.05000"), ("0.03000", "0.01200", "0.05000")]
    assert [r["counts"] for r in read] == ["1", "0"] and read[1]["device"] == "NVIDIA H100"


def test_the_launch_floor_table_gives_microseconds_per_count_of_empty_launches():
    from benchmarks.bench_aot_cells import floor_table

    lines = floor_table([{"launches": 1, "plain_ms": 0.0021, "graph_ms": 0.0019},
                         {"launches": 3, "plain_ms": 0.0063, "graph_ms": 0.00425}], "GPU")
    assert lines[0].startswith("GPU: the launch floor")
    assert lines[-2:] == ["| 1 | 2.10 | 1.90 |", "| 3 | 6.30 | 4.25 |"]


def test_the_tactics_table_shows_every_tactic_and_the_one_the_build_keeps():
    from benchmarks.bench_aot_cells import tactics_table

    rows = [cell(tactic_ms=[0.03, 0.02, 0.05], tactic=1, aot_plan="scatter_table_counts+apply_table, tactic 1"),
            cell(tactic_ms=[0.04], tactic=0)]  # a chain without tactics: not in the table
    lines = tactics_table(rows, "GPU")
    cells = [[value.strip() for value in line.strip("|").split("|")] for line in lines if line.startswith("| float")]
    assert cells == [["float16", "1e3", "1e6", "1", "yes", "scatter_table_counts+apply_table, tactic 1",
                      "0.0300", "0.0200", "0.0500", "1"]]


def test_a_cell_is_timed_and_checked_at_every_tactic_its_scatter_step_offers():
    from benchmarks.bench_aot_cells import tactics_of
    from plugin.scatter_add_op import sorted_chain, split_chain, state_chain, table_chain

    assert tactics_of(state_chain(True)) == tactics_of(table_chain(False)) == range(3)
    assert tactics_of(split_chain()) == tactics_of(sorted_chain(True)) == range(1)


def test_the_build_keeps_the_first_fastest_tactic_each_prepared_once(monkeypatch):
    """built_cell as TensorRT's autotuning: every tactic timed once, the first of the fastest kept, no tactic's
    launches prepared twice (the AotCell and the timer stand in for the GPU)."""
    from benchmarks import bench_aot_cells
    from plugin.scatter_add_op import state_chain

    made = []

    class Cell:
        def __init__(self, state, inputs, with_counts, tactic=0):
            made.append(tactic)
            self.tactic = tactic

    times = {0: 0.03, 1: 0.02, 2: 0.02}
    monkeypatch.setattr(bench_aot_cells, "AotCell", Cell)
    monkeypatch.setattr(bench_aot_cells, "cell_chain", lambda state, num_edges, with_counts: state_chain(True))
    monkeypatch.setattr(bench_aot_cells, "time_gpu_ms", lambda cell, **timing: times[cell.tactic])

    class Index:
        shape = (1000,)

    kept, timed = bench_aot_cells.built_cell(None, [(None, Index())], True, sets=1)
    assert kept.tactic == 1 and timed == [0.03, 0.02, 0.02] and made == [0, 1, 2]
