"""The step references of plugin/scatter_add_op.py's chains of several steps, composed on the CPU as the ONNX
Runtime proof composes them (inplace/registry.py node_outputs): each filled scratch tensor made from its fill at the
sizes its Exprs give, then each step's reference on its own inputs, its outputs replacing the tensors they name (an
unfilled scratch tensor is the first step's output, of its Scratch's shape and dtype). The
result must be op.reference's: counts exactly; the state exactly (both round the same float64 sums once), except
in the pairs chains, whose scatter does not read the state and keeps float32 sums as the kernels do: there within
one float32 rounding of each node's sum per chunk, plus one rounding of the state. No GPU."""

import re

import numpy as np
import pytest

from inplace.checks import plugin_name
from plugin.kernels import plan
from plugin.scatter_add_op import SCATTER_ADD, SCATTER_ADD_COUNTS, pair_chunks_chain
from reference.gnn import scatter_add_rows

OPS = {"scatter_add_": SCATTER_ADD, "scatter_add_counts_": SCATTER_ADD_COUNTS}
CHAINS = [(op_name, number) for op_name, op in OPS.items() for number, chain in enumerate(op.chains)
          if len(chain.steps) > 1]
# (N, E, F, hot): no edges, one node, few and many edges per node (the table with a slot per node and hashed), a
# hot node taking every edge
SIZES = [(1, 0, 1, False), (7, 0, 3, False), (1, 5, 1, False), (1, 6, 4, False), (10, 40, 1, False),
         (10, 40, 3, False), (1000, 20, 2, False), (1000, 20, 1, False), (50, 300, 1, True), (50, 300, 5, True)]
RNG = np.random.default_rng(7)


def chain_id(case):
    op_name, number = case
    chain = OPS[op_name].chains[number]
    return f"{op_name}{number}-" + "+".join(plugin_name(step) for step in chain.steps[:2]) + f"-{len(chain.steps)}"


def one_feature_only(chain):
    """The slots and the pairs hold one value per node: rows of one feature (choose_chain takes them for F = 1)."""
    return any(plugin_name(step) in ("add_into_slots", "add_pairs") or plugin_name(step).startswith("add_pair_chunk")
               for step in chain.steps)


def float32_sums(chain):
    """How many float32 roundings each node's sum takes before the state (the pairs: one per chunk), 0 where the
    references give op.reference's state exactly."""
    return sum(plugin_name(step) == "add_pairs" or plugin_name(step).startswith("add_pair_chunk")
               for step in chain.steps)


def inputs(num_nodes, num_edges, num_features, dtype, hot=False):
    """state and src normal, the index in range with some out of range (negative, N, far beyond)."""
    state = RNG.standard_normal((num_nodes, num_features)).astype(dtype)
    src = RNG.standard_normal((num_edges, num_features)).astype(dtype)
    index = (np.full(num_edges, RNG.integers(0, num_nodes)) if hot
             else RNG.integers(0, num_nodes, num_edges)).astype(np.int64)
    if num_edges >= 5:
        index[[1, 3]] = -1, num_nodes
        index[-1] = 2**40
    return state, src, index


def compose(op, chain, state, src, index, references=None):
    """op's outputs as the chain's step references give them (`references`: plugin -> a reference to use instead).
    Every input is read-only (a reference must not write its inputs), every output must have its tensor's shape
    and dtype (an output named like a tensor is that tensor's new value; node_outputs casts to its dtype)."""
    sizes = {"N": state.shape[0], "E": index.shape[0], "F": state.shape[1]}
    values = {"state": state, "src": src, "index": index}
    made = {scratch.name: np.zeros(tuple(int(dim.evaluate(sizes)) for dim in scratch.shape), np.dtype(scratch.dtype))
            for scratch in chain.scratch}  # the shape and dtype of each; an unfilled one the first step creates
    values.update((scratch.name, np.full_like(made[scratch.name], scratch.fill)) for scratch in chain.filled())
    for step in chain.steps:
        reference = (references or {}).get(step.plugin, step.reference)
        assert reference is not None, f"{step.plugin} has no reference"
        arguments = []
        for name in step.inputs:
            value = np.array(values[name])
            value.setflags(write=False)
            arguments.append(value)
        outputs = reference(*arguments)
        assert len(outputs) == len(step.outputs), step.plugin
        for name, value in zip(step.outputs, outputs):
            value = np.asarray(value)
            like = values.get(name, made.get(name))
            assert like is not None and (value.shape, value.dtype) == (like.shape, like.dtype), (step.plugin, name)
            values[name] = value
    return [values[name] for name in op.output_names()]


def check(op, chain, state, src, index, references=None):
    """AssertionError unless the composed chain gives op.reference's outputs (rounded to the outputs' dtypes)."""
    got = compose(op, chain, state, src, index, references)
    want = [np.asarray(value).astype(got[k].dtype) for k, value in enumerate(op.reference(state, src, index))]
    if len(want) > 1:
        np.testing.assert_array_equal(got[1], want[1], err_msg="counts")
    rounds = float32_sums(chain)
    if not rounds:
        np.testing.assert_array_equal(got[0], want[0], err_msg="state")
        return
    # the pairs: each chunk rounds each node's running sum (at most the sum of its rows' magnitudes) to float32
    # once, then the state rounds once more: at most one ulp of the state beyond the sums' error
    keep = (index >= 0) & (index < len(state))
    magnitude = scatter_add_rows(np.abs(src[keep].astype(np.float64)), None, index[keep], len(state))
    larger = np.maximum(np.abs(got[0].astype(np.float64)), np.abs(want[0].astype(np.float64))).astype(state.dtype)
    bound = rounds * 2.0**-24 * magnitude + np.spacing(larger).astype(np.float64)
    error = np.abs(got[0].astype(np.float64) - want[0].astype(np.float64))
    assert np.all(error <= bound), f"state off by {error.max()} (bound {bound[error > bound]})"


@pytest.mark.parametrize("case", CHAINS, ids=chain_id)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_chains_step_references_give_the_ops_reference(case, dtype):
    op = OPS[case[0]]
    chain = op.chains[case[1]]
    for num_nodes, num_edges, num_features, hot in SIZES:
        if num_features > 1 and one_feature_only(chain):
            continue
        state, src, index = inputs(num_nodes, num_edges, num_features, dtype, hot)
        check(op, chain, state, src, index)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_pair_chunks_across_chunks_give_the_ops_reference(dtype):
    """Edges in two chunks of PAIRED_MAX_EDGES (a third chunk beyond E does nothing), one node hot."""
    num_edges = plan.PAIRED_MAX_EDGES + 3
    state = RNG.standard_normal((5, 1)).astype(dtype)
    src = RNG.uniform(-1, 1, (num_edges, 1)).astype(dtype)
    index = RNG.integers(0, 5, num_edges)
    index[:: 7] = 2
    index[[4, -2]] = -3, 5  # out of range in each chunk
    check(SCATTER_ADD_COUNTS, pair_chunks_chain(3), state, src, index)


def test_every_step_of_a_chain_of_several_steps_has_a_reference():
    missing = [f"{op.name}: {step.plugin}" for op in OPS.values() for chain in op.chains if len(chain.steps) > 1
               for step in chain.steps if step.reference is None]
    assert not missing


def test_the_check_fails_a_chain_without_a_reference():
    op = SCATTER_ADD
    chain = next(chain for chain in op.chains if len(chain.steps) > 1)
    state, src, index = inputs(10, 40, 1, np.float16)
    with pytest.raises(AssertionError, match="has no reference"):
        check(op, chain, state, src, index, {chain.steps[-1].plugin: None})


def edge_steps(chain):
    """The steps that take edges from the index at small E (round_table, round_slots and fold_pair_chunk_k read it
    for E; add_pair_chunk_k for k >= 1 takes edges from k 2^24 on)."""
    return [step for step in chain.steps if "index" in step.inputs
            and not plugin_name(step).startswith(("round_", "fold_pair_chunk"))
            and not re.fullmatch(r"add_pair_chunk_[1-9]\d*", plugin_name(step))]


DROPPED = 2  # inputs() puts edges 1 and 3 out of range
MUTATIONS = [(case, plugin_name(step)) for case in CHAINS for step in edge_steps(OPS[case[0]].chains[case[1]])]


def node_taken(plugin, num_nodes):
    """A node whose edges the step takes: a placing pass takes its range's, the others all."""
    match = re.fullmatch(r"sort_place_(\d+)_of_(\d+)", plugin)
    return num_nodes * (int(match[1]) - 1) // int(match[2]) if match else 3


@pytest.mark.parametrize("case,plugin", MUTATIONS, ids=lambda value: chain_id(value) if isinstance(value, tuple)
                         else value)
def test_dropping_one_edge_in_one_step_fails_the_check(case, plugin):
    """The step sees one edge (of row 1.5, into a node it takes) as out of range; the others see it. (Edge 2: the
    sorted pairs' fill is (edge 0, node 0), which a placing pass that drops edge 0 into node 0 leaves in place.)"""
    op = OPS[case[0]]
    chain = op.chains[case[1]]
    state, src, index = inputs(10, 40, 1, np.float32)
    index[DROPPED], src[DROPPED], src[0] = node_taken(plugin, 10), 1.5, 0.25
    step = next(step for step in chain.steps if plugin_name(step) == plugin)
    position = step.inputs.index("index")
    reference = step.reference
    assert reference is not None

    def dropping(*arguments):
        changed = list(arguments)
        changed[position] = np.where(np.arange(len(index)) == DROPPED, -1, arguments[position])
        return reference(*changed)

    check(op, chain, state, src, index)
    with pytest.raises(AssertionError, match="state|counts"):
        check(op, chain, state, src, index, {step.plugin: dropping})
