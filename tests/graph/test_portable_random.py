"""graph.portable_random: SplitMix64 against its published outputs, the exact rule for batches and features (which
cpp/aliased_io_state.cpp implements again; tests/cpp/test_cpp_state.py compares the two), and the count checks."""

import numpy as np
import pytest

from common.errors import InputError
from graph import portable_edge_batches, portable_node_features
from graph.portable_random import BATCH_STREAM, FEATURE_STREAM, splitmix64, stream_key, words_below


def test_splitmix64_gives_the_published_sequence():
    # The first outputs of SplitMix64 seeded with 1234567 (Rosetta Code, "Pseudo-random numbers/Splitmix64").
    expected = [6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431,
                16408922859458223821]
    assert splitmix64(1234567, np.arange(5)).tolist() == expected
    assert splitmix64(1234567 + 2**64, np.arange(5)).tolist() == expected  # keys are taken mod 2**64


def words(key, counters):
    """SplitMix64 in Python integers: the rule in the module's docstring, independently of numpy."""
    out = []
    for i in counters:
        z = (key + (i + 1) * 0x9E3779B97F4A7C15) % 2**64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
        out.append(z ^ (z >> 31))
    return out


@pytest.mark.parametrize("seed", [0, 7, 2**63 - 1])
def test_batches_follow_the_documented_rule(seed):
    num_nodes, batch_edges = 1_000_003, 7
    batches = portable_edge_batches(num_nodes, 3, batch_edges, seed)
    key = words(seed, [BATCH_STREAM])[0]
    assert key == stream_key(seed, BATCH_STREAM)
    for k, batch in enumerate(batches):
        first = 2 * k * batch_edges
        expected = [w % num_nodes for w in words(key, range(first, first + 2 * batch_edges))]
        assert batch.dtype == np.int64 and batch.shape == (batch_edges, 2)
        assert batch.ravel().tolist() == expected  # column 0 the sources (even words), column 1 the targets


def test_features_follow_the_documented_rule_and_are_exact_in_float16():
    features = portable_node_features(50, 3, seed=9)
    key = words(9, [FEATURE_STREAM])[0]
    np.testing.assert_array_equal(features.ravel(), [(w % 40) / 4 for w in words(key, range(150))])
    assert features.dtype == np.float64 and features.min() >= 0 and features.max() <= 9.75
    np.testing.assert_array_equal(features.astype(np.float16).astype(np.float64), features)


def test_chunking_does_not_change_the_words():
    whole = words_below(3, BATCH_STREAM, 10, 1000, 97)
    np.testing.assert_array_equal(words_below(3, BATCH_STREAM, 10, 1000, 97, words_per_call=7), whole)


def test_batches_are_spread_and_new_each_step_and_differ_by_seed():
    batches = portable_edge_batches(100, 4, 250, seed=11)
    assert not np.array_equal(batches[0], batches[1])
    assert np.unique(np.concatenate(batches)).size == 100  # 2000 draws over 100 ids reach every id
    counts = np.bincount(np.concatenate(batches).ravel(), minlength=100)
    assert counts.min() > 5 and counts.max() < 45  # about 20 each
    assert not np.array_equal(portable_edge_batches(100, 1, 250, seed=12)[0], batches[0])
    np.testing.assert_array_equal(portable_edge_batches(100, 4, 250, seed=11)[3], batches[3])


def test_features_reach_every_level():
    levels = np.unique(portable_node_features(4000, 1, seed=1))
    np.testing.assert_array_equal(levels, np.arange(40) / 4)


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, 1, 1), "number of nodes must be an integer from 1"),
        ((10, 0, 1), "number of batches (--steps) must be an integer from 1"),
        ((10, 1, 0), "edges per batch (--batch_edges) must be an integer from 1"),
        ((10, 20_000, 10_000), "exceed the limit of 100,000,000 edges"),
        ((10, 2, 2.0), "got 2.0"),
    ],
)
def test_batches_reject_bad_counts(args, message):
    with pytest.raises(InputError) as error:
        portable_edge_batches(*args, seed=0)
    assert message in str(error.value)


@pytest.mark.parametrize("num_batches", [1, 2, 1_000_000])
def test_exactly_the_edge_limit_is_drawn_and_more_is_refused(monkeypatch, num_batches):
    # K * B = MAX_RANDOM_EDGES, which the CLI accepts (cli.options), must be drawn here too: the words are recorded
    # instead of computed (1.6 GB of them), the count check and the batch split are what run.
    import graph.portable_random as module
    from common.limits import MAX_RANDOM_EDGES

    drawn = []

    def record(seed, stream, start, count, bound):
        drawn.append((stream, start, count, bound))
        return np.broadcast_to(np.int64(0), (count,))

    monkeypatch.setattr(module, "words_below", record)
    batch_edges = MAX_RANDOM_EDGES // num_batches
    assert num_batches * batch_edges == MAX_RANDOM_EDGES
    batches = portable_edge_batches(10, num_batches, batch_edges, seed=0)
    assert len(batches) == num_batches and batches[-1].shape == (batch_edges, 2)
    assert drawn == [(BATCH_STREAM, 0, 2 * MAX_RANDOM_EDGES, 10)]
    beyond = [(num_batches + 1, batch_edges)] + ([(num_batches, batch_edges + 1)] if num_batches > 1 else [])
    for more_batches, more_edges in beyond:  # K more edges, or one more batch
        with pytest.raises(InputError, match="exceed the limit of 100,000,000 edges"):
            portable_edge_batches(10, more_batches, more_edges, seed=0)
    assert len(drawn) == 1  # refused before any draw
