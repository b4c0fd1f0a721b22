"""Seeded random batches and node features that a C++ program reproduces bit for bit (cpp/aliased_io_state.cpp).

numpy's generators have no portable specification, so `--steps` draws from SplitMix64 (Steele, Lea and Flood,
2014) used as a counter-based generator: value i of stream s under a seed is

    key(seed, s) = splitmix64(seed, s)
    word(i)      = splitmix64(key(seed, s), i)
    splitmix64(x, i) = mix(x + (i + 1) * 0x9E3779B97F4A7C15 mod 2**64)        (the i-th output of SplitMix64(x))
    mix(z): z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9; z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^ z >> 31

all in uint64 arithmetic, so every value is an exact function of (seed, stream, i), in any language and any
chunking. Then:

    batch k, edge j of B:  source = word(2 (k B + j)) mod N,  target = word(2 (k B + j) + 1) mod N   (stream 2)
    node feature (n, f):   (word(n F + f) mod 40) / 4: a multiple of 0.25 in [0, 10)                  (stream 3)

The features are exact in float16 and float32, so the engine, the C++ reference and numpy all start from the
same values. `mod N` has a bias below N / 2**64 (at most 6e-12 for the largest N).
"""

import numpy as np

from common.errors import InputError
from common.limits import MAX_RANDOM_EDGES
from graph.generate import _count

GAMMA = 0x9E3779B97F4A7C15
MIX_1 = 0xBF58476D1CE4E5B9
MIX_2 = 0x94D049BB133111EB
BATCH_STREAM = 2
FEATURE_STREAM = 3
FEATURE_LEVELS = 40  # features take the values 0, 0.25, ..., 9.75
FEATURE_STEP = 0.25
WORDS_PER_CALL = 1 << 20  # words computed per numpy call, so that temporaries stay at a few MB


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX_1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX_2)
    return z ^ (z >> np.uint64(31))


def splitmix64(key: int, counters: np.ndarray) -> np.ndarray:
    """uint64 outputs number `counters` (0-based) of SplitMix64 seeded with `key` (an int taken mod 2**64)."""
    counters = np.asarray(counters, dtype=np.uint64)
    with np.errstate(over="ignore"):  # uint64 arithmetic is meant to wrap
        return _mix(np.uint64(key % 2**64) + (counters + np.uint64(1)) * np.uint64(GAMMA))


def stream_key(seed: int, stream: int) -> int:
    """The key of `stream` under `seed`: SplitMix64(seed)'s output number `stream`."""
    return int(splitmix64(seed, np.array([stream]))[0])


def words_below(seed: int, stream: int, start: int, count: int, bound: int, *,
                words_per_call: int = WORDS_PER_CALL) -> np.ndarray:
    """int64 [count]: word(i) mod bound for i in [start, start + count) of `stream` under `seed`, computed
    words_per_call at a time (the same words whatever it is)."""
    key = stream_key(seed, stream)
    out = np.empty(count, dtype=np.int64)
    for first in range(0, count, words_per_call):
        last = min(first + words_per_call, count)
        counters = np.arange(start + first, start + last, dtype=np.uint64)
        out[first:last] = splitmix64(key, counters) % np.uint64(bound)
    return out


def portable_edge_batches(num_nodes: int, num_batches: int, batch_edges: int, seed: int) -> list[np.ndarray]:
    """num_batches int64 [batch_edges, 2] arrays of (source, target) pairs in [0, num_nodes), drawn from the seed
    by the rule in this module's docstring (stream 2). InputError for counts out of range or more than
    MAX_RANDOM_EDGES edges in all."""
    num_nodes = _count(num_nodes, "number of nodes", 1, MAX_RANDOM_EDGES)
    num_batches = _count(num_batches, "number of batches (--steps)", 1, MAX_RANDOM_EDGES)
    batch_edges = _count(batch_edges, "edges per batch (--batch_edges)", 1, MAX_RANDOM_EDGES)
    if num_batches * batch_edges > MAX_RANDOM_EDGES:
        raise InputError(
            f"{num_batches:,} batches of {batch_edges:,} edges exceed the limit of {MAX_RANDOM_EDGES:,} edges"
        )
    # batch k is words 2 k B to 2 (k + 1) B: drawn in one pass (in chunks), not one stream key and pass per batch
    words = words_below(seed, BATCH_STREAM, 0, 2 * num_batches * batch_edges, num_nodes)
    return list(words.reshape(num_batches, batch_edges, 2))


def portable_node_features(num_nodes: int, num_features: int, seed: int) -> np.ndarray:
    """float64 [num_nodes, num_features]: multiples of 0.25 in [0, 10) drawn from the seed (stream 3)."""
    levels = words_below(seed, FEATURE_STREAM, 0, num_nodes * num_features, FEATURE_LEVELS)
    return (levels * FEATURE_STEP).reshape(num_nodes, num_features)
