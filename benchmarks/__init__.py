"""Benchmark scripts: each prints a table (run them directly, e.g. python3 benchmarks/bench_parse.py)."""
