"""Limits shared by the command line (checked before any engine work) and network/ (which enforces them).

Plain constants, so that a dry run can check options without importing network/, TensorRT or CUDA.
"""

MAX_PROFILE_SIZE = 2**31 - 1  # largest --max_nodes / --max_edges: TensorRT dimensions are int32
MAX_STEPS = 1_000_000  # largest --steps
MAX_BENCHMARK_ITERATIONS = 1_000_000  # largest --benchmark
LARGE_FILE_BYTES = 64 << 20  # loading a file at least this large shows progress on stderr
