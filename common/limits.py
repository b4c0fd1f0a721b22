"""Limits and defaults shared by the command line (checked before any engine work) and network/ (which enforces them).

Plain constants, so that a dry run can check options without importing network/, TensorRT or CUDA.
"""

MAX_PROFILE_SIZE = 2**31 - 1  # largest --max_nodes / --max_edges: TensorRT dimensions are int32
MAX_STEPS = 1_000_000  # largest --steps
MAX_BENCHMARK_ITERATIONS = 1_000_000  # largest --benchmark
LARGE_FILE_BYTES = 64 << 20  # loading a file at least this large shows progress on stderr
MAX_RANDOM_EDGES = 100_000_000  # largest --random_graph EDGES and --steps K * --batch_edges B (1.6 GB of int64 ids)
MAX_INPUT_CHARS = 32 * 2**20
"""Longest accepted --node_features / --edges string: 32 Mi characters, about two million edges written as
[[s,t],...]. Larger graphs belong in a file (--graph); a command-line argument is limited to 128 KiB on Linux
anyway, so the limit matters to callers of graph.parse_edges and graph.parse_node_features from Python."""
DEFAULT_DYNAMIC_DIM = 16
"""The size of a dynamic dimension of an --onnx model's input that --onnx_shapes does not fix (one size per
dimension name): the command line's help names it, onnx_path.inputs applies it."""
