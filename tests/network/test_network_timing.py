"""network.timing's statistics and their report (cli.engine_report, --benchmark's): plain Python, no GPU."""

import random
import statistics

import pytest

from cli.engine_report import benchmark_lines, describe_summary, format_duration
from network.benchmark import BenchmarkResult
from network.timing import percentile, summarize


def test_percentile_is_nearest_rank():
    values = [10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0]  # 1..10, shuffled
    assert percentile(values, 0.9) == 9.0  # 9 of the 10 values are <= 9
    assert percentile(values, 0.5) == 5.0
    assert percentile(values, 1.0) == 10.0
    assert percentile(values, 0.01) == 1.0
    assert percentile([3.5], 0.9) == 3.5
    assert percentile(list(range(1, 101)), 0.9) == 90
    assert percentile(list(range(1, 21)), 0.9) == 18
    assert percentile([1.0, 2.0, 3.0], 0.9) == 3.0  # ceil(2.7) = 3rd


@pytest.mark.parametrize("size", [1, 2, 7, 10, 99, 1000])
def test_percentile_agrees_with_its_definition(size):
    rng = random.Random(size)
    values = [rng.uniform(0, 5) for _ in range(size)]
    p90 = percentile(values, 0.9)
    at_or_below = sum(value <= p90 for value in values)
    assert at_or_below >= 0.9 * size  # at least 90% at or below it ...
    assert sum(value < p90 for value in values) < 0.9 * size  # ... and it is the smallest such value


@pytest.mark.parametrize("values, fraction", [([], 0.5), ([1.0], 0.0), ([1.0], 1.5)])
def test_percentile_rejects_bad_arguments(values, fraction):
    with pytest.raises(ValueError):
        percentile(values, fraction)


def test_summarize():
    values = [0.5, 0.2, 0.9, 0.3, 0.4, 0.35]
    summary = summarize(values)
    assert summary.count == 6
    assert summary.median_ms == statistics.median(values) == 0.375
    assert summary.p90_ms == 0.9  # ceil(5.4) = 6th of 6
    assert (summary.min_ms, summary.max_ms) == (0.2, 0.9)
    with pytest.raises(ValueError):
        summarize([])


@pytest.mark.parametrize("ms, text", [
    (0.0123, "12.3 us"), (0.5, "500.0 us"), (1.0, "1 ms"), (4.567, "4.57 ms"), (123.4, "123 ms"), (7890.0, "7.89 s"),
])
def test_format_duration(ms, text):
    assert format_duration(ms) == text


def test_describe_summary():
    summary = summarize([0.010, 0.012, 0.011, 0.050])
    assert describe_summary(summary) == "median 11.5 us, p90 50.0 us, min 10.0 us, max 50.0 us over 4 runs"
    assert describe_summary(summarize([2.0]), p90=False) == "median 2 ms, min 2 ms, max 2 ms over 1 run"


def test_benchmark_lines_give_the_kernel_share():
    result = BenchmarkResult(warmup=10, engine=summarize([0.040, 0.050, 0.045]), kernel=summarize([0.010, 0.012, 0.011]))
    assert result.kernel_share == pytest.approx(0.011 / 0.045)
    lines = benchmark_lines(result)
    assert lines[0].startswith("Benchmark: 3 timed executions after 10 warm-up ones")
    assert "median 45.0 us, p90 50.0 us, min 40.0 us" in lines[1]
    assert "scatter_add_launch alone" in lines[2] and "median 11.0 us" in lines[2]
    assert lines[3].endswith("= 24%")
    assert len(lines) == 4  # no host times taken, no host line


def test_benchmark_lines_say_how_the_calls_were_issued_and_their_host_time():
    engine, kernel, host = summarize([0.040, 0.050, 0.045]), summarize([0.010, 0.012, 0.011]), summarize([0.0055, 0.0061])
    direct = benchmark_lines(BenchmarkResult(warmup=10, engine=engine, kernel=kernel, engine_host=host))
    assert direct[0] == ("Benchmark: 3 timed executions after 10 warm-up ones (CUDA events on one stream around "
                         "each call)")
    assert direct[1].startswith("  engine (execute_async_v3): median 45.0 us")
    assert direct[2].startswith("  scatter_add_launch alone, same buffers: median 11.0 us")
    assert direct[4] == "  Host time to issue one execution: median 5.8 us (execute_async_v3 with the Python plugin's enqueue)"
    replayed = benchmark_lines(BenchmarkResult(warmup=10, engine=engine, kernel=kernel, engine_host=summarize([0.0019]),
                                               cuda_graph=True))
    assert replayed[0].startswith("Benchmark: 3 timed executions after 10 warm-up executions and 10 warm-up replays")
    assert replayed[1].startswith("  engine (cuGraphLaunch of the execution captured once after the warm-up): median 45.0 us")
    assert replayed[2].startswith("  scatter_add_launch alone, captured and replayed the same way, same buffers: median 11.0 us")
    assert replayed[3].endswith("= 24%")
    assert replayed[4] == "  Host time to issue one execution: median 1.9 us (cuGraphLaunch of the captured execution)"
