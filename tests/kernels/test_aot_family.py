"""plugin/scatter_add_op.py without a GPU: every step's kernel is an aot_* entry point of scatter_add.cu whose
parameters are (input pointers..., int32 extra arguments..., output pointers...) in the step's order, every launch
is one TensorRT can make at any size (grid >= 1, int32 extras, at most 48 KiB of shared memory), the size rules
agree with plan.py's, and each build picks the chain BENCHMARKS.md's rows justify. Reads the source; no NVRTC."""

import itertools
import re

import pytest

from inplace.launch import evaluate_launch, scratch_bytes
from inplace.spec import BuildFacts, cdiv, maximum, size
from plugin.kernels.aot import family_entry
from plugin.kernels.compile import SOURCE_PATH
from plugin.kernels.plan import DeviceInfo, LaunchRequest, plan_launch
from plugin.scatter_add_op import (
    SCATTER_ADD,
    SCATTER_ADD_COUNTS,
    PAIR_MAX_CHUNKS,
    SCATTER_TACTICS,
    SHARED_MAX_WORDS,
    _modes,
    at_least,
    at_most,
    block_chain,
    choose_chain,
    chunked_blocks,
    pair_chunks_chain,
    pairs_chain,
    sort_span,
    sort_tiles,
    sorted_chain,
    split_capacity,
    split_chain,
    state_chain,
    table_capacity,
    table_chain,
)
from tests.plugin.test_aot_plugin import aot  # noqa: F401 (a fixture: the real bindings' tensorrt.plugin, or skip)

_KERNEL = re.compile(r'extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s*)?(aot_\w+)\(([^)]*)\)', re.DOTALL)
# the extra arguments' parameter names by the expression they are given
EXTRA_NAMES = {size("N"): "num_nodes", size("E"): "num_edges", size("F"): "num_features",
               table_capacity(): "capacity", split_capacity(): "capacity", sort_tiles(): "num_tiles",
               cdiv(size("N"), sort_tiles()): "tile_nodes", sort_span(): "span",
               cdiv(size("E"), maximum(sort_span(), 32)): "num_ranges"}
CHAINS = {"state": state_chain(False), "state_counts": state_chain(True), "table": table_chain(False),
          "table_counts": table_chain(True), "split": split_chain(), "block": block_chain(), "pairs": pairs_chain(),
          "pair_chunks_2": pair_chunks_chain(2), "pair_chunks_8": pair_chunks_chain(PAIR_MAX_CHUNKS),
          "sorted": sorted_chain(False), "sorted_counts": sorted_chain(True), "sorted_4": sorted_chain(True, 4),
          "sorted_wide": sorted_chain(True, 2, wide=True)}
DTYPES = {"state": "float32", "state_counts": "float32"}
STEPS = [(name, step) for name, chain in CHAINS.items() for step in chain.steps]


def aot_parameters() -> dict[str, list[tuple[str, str]]]:
    """{aot_* kernel: [(type, name), ...]} of scatter_add.cu."""
    source = re.sub(r"//[^\n]*", "", SOURCE_PATH.read_text())
    return {name: [re.fullmatch(r"(.+?)\s*(\w+)", p.strip()).groups() for p in params.split(",")]  # type: ignore[union-attr]
            for name, params in _KERNEL.findall(source)}


def test_every_aot_entry_point_is_a_step_or_tactic_of_some_chain():
    used = {family_entry(kernel.name)[0] for _, step in STEPS for kernel in (step.kernel({}), *step.tactics({}))}
    assert used == set(aot_parameters())


def test_a_tactic_is_its_scatter_kernel_compiled_at_that_tactic():
    assert family_entry("aot_scatter_table_counts_atomics") == ("aot_scatter_table_counts", 1)
    assert family_entry("aot_scatter_state_chunked") == ("aot_scatter_state", 2)
    assert family_entry("aot_scatter_state") == ("aot_scatter_state", 0)
    assert family_entry("aot_sort_count") == ("aot_sort_count", 0)


@pytest.mark.parametrize("chain,step", STEPS, ids=[f"{name}:{step.plugin}" for name, step in STEPS])
def test_parameters_are_inputs_then_int32_extras_then_outputs_in_the_steps_order(chain, step):
    kernel = step.kernel({})
    parameters = aot_parameters()[kernel.name]
    for tactic in step.tactics({}):  # the step's kernel compiled at another tactic: the same parameters
        assert family_entry(tactic.name) == (kernel.name, SCATTER_TACTICS.index(tactic.name[len(kernel.name) + 1:]) + 1)
    inputs, extras = len(step.inputs), len(kernel.launch.extra_args)
    tensors_in, extra, tensors_out = parameters[:inputs], parameters[inputs:inputs + extras], parameters[inputs + extras:]
    assert [re.sub(r"_in$", "", p) for _, p in tensors_in] == list(step.inputs)
    assert [re.sub(r"_out$", "", p) for _, p in tensors_out] == list(step.outputs)
    assert all(kind.endswith("*") for kind, _ in tensors_in + tensors_out)
    assert all(kind == "int" for kind, _ in extra)
    names = [p for _, p in extra]
    # sizes by name; a scatter kernel's mode last; a pair chunk's first edge (a constant); the sort's own
    # (private_nodes, node_lo, node_hi) by position
    expected = [EXTRA_NAMES.get(arg, name if kernel.name.startswith("aot_sort") else "first_edge"
                                if arg.op == "const" and "pair_chunk" in kernel.name else "mode")
                for arg, name in zip(kernel.launch.extra_args, names)]
    assert names == expected
    assert [p[:-3] for _, p in tensors_in if p.endswith("_in")] == [o for o in step.outputs if o in step.inputs]


SIZES = [(n, e, f) for n in (0, 1, 10, 1000, 3071, 10**4, 10**6, 10**8) for e in (0, 1, 100, 10**4, 10**6, 10**8)
         for f in (1, 2, 3, 64, 256)]


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_every_launch_is_one_tensorrt_can_make_at_any_size(name):
    chain = CHAINS[name]
    for n, e, f in SIZES:
        if (name in ("split", "block") or name.startswith("pair")) and f != 1 or name == "block" and e > 1024:
            continue
        sizes = {"N": n, "E": e, "F": f}
        for step in chain.steps:
            for dtype in ("float32", "float16"):
                dtypes = {"state": dtype, "src": dtype}
                for kernel in (step.kernel(dtypes), *step.tactics(dtypes)):
                    grid, block, _, _ = evaluate_launch(kernel, sizes)  # raises where TensorRT could not launch it
                    assert grid[0] <= 2**31 - 1 and block[0] in (256, 1024)
        scratch_bytes(chain, sizes)


def test_conditions_are_comparisons():
    for a, b in itertools.product(range(0, 40, 3), range(0, 40, 7)):
        assert at_least(a, b).yes.evaluate({}) == int(a >= b) and at_least(a, b).no.evaluate({}) == int(a < b)
        both, either = at_least(a, 9) & at_most(b, 20), at_least(a, 9) | at_most(b, 20)
        assert (both.yes.evaluate({}), both.no.evaluate({})) == (int(a >= 9 and b <= 20), int(not (a >= 9 and b <= 20)))
        assert (either.yes.evaluate({}), either.no.evaluate({})) == (int(a >= 9 or b <= 20), int(a < 9 and b > 20))


H100 = DeviceInfo(arch=90, sm_count=132, max_shared_per_block=227 * 1024, shared_per_sm=228 * 1024, l2_bytes=50 << 20)


@pytest.mark.parametrize("dtype,counts", [("float32", False), ("float32", True), ("float16", False), ("float16", True)])
def test_the_modes_run_where_plan_py_takes_their_paths(dtype, counts):
    """Where plan.py takes chunked, the AOT launch runs chunk_reduce; where N (F + 1) <= 5888 and plan.py takes the
    shared kernel, the shared mode; elsewhere neither. plan.py without pairs and the sorted path (no AOT chain has
    them) and, for the float16 table chain, without the paths of their own chains (split_table, block_table)."""
    import numpy as np

    shared, chunked = _modes(dtype, counts)
    for n, e, f in [(n, e, f) for n in (10, 100, 384, 1000, 2048, 3000) for e in (10**3, 10**4, 10**5, 10**6, 10**7)
                    for f in (1, 2, 32, 48, 64)]:
        request = LaunchRequest(n, e, f, np.dtype(dtype), 1, counts, workspace=0, counts_aligned=False,
                                node_passes=1 if dtype == "float16" and not counts else None)
        path = plan_launch(request, H100).algorithm
        sizes = {"N": n, "E": e, "F": f}
        assert chunked.yes.evaluate(sizes) == (path == "chunked"), (n, e, f, path)
        if n * (f + 1) <= SHARED_MAX_WORDS and (f == 1 or counts):
            assert shared.yes.evaluate(sizes) == (path == "shared"), (n, e, f, path)
        elif shared.yes.evaluate(sizes):
            assert path == "shared", (n, e, f, path)


def test_the_table_has_one_slot_per_node_up_to_4_slots_per_edge_and_keys_only_where_hashed():
    chain = table_chain(False)
    assert scratch_bytes(chain, {"N": 1000, "E": 10**6, "F": 2}) == {"keys": 0, "values": 1000 * 2 * 4}
    assert scratch_bytes(chain, {"N": 10**8, "E": 10**4, "F": 1}) == {"keys": 4 * 4 * 10**4, "values": 4 * 4 * 10**4}
    assert scratch_bytes(split_chain(), {"N": 10**8, "E": 10**6, "F": 1}) == {"slots": 8 * 2**21}


@pytest.mark.parametrize("facts,chain", [
    (BuildFacts({"state": "float32"}), "state"),
    (BuildFacts({"state": "float16"}, {"F": 64}, {"E": 10**6}), "table"),
    (BuildFacts({"state": "float16"}, {"F": 1, "N": 10**6}, {"E": 1000}), "block"),
    (BuildFacts({"state": "float16"}, {"F": 1, "N": 10**3}, {"E": 10**4}), "split"),
    (BuildFacts({"state": "float16"}, {"F": 1, "N": 10**7}, {"E": 10**6}), "split"),
    (BuildFacts({"state": "float16"}, {"F": 1, "N": 10**6}, {"E": 10**6}), "pairs"),
    (BuildFacts({"state": "float16"}, {"F": 1, "N": 10**4}, {"E": 10**6}), "pairs"),
    (BuildFacts({"state": "float16"}, {"F": 1, "N": 10**6}, {"E": 2**24 + 1}), "table"),
    (BuildFacts({"state": "float16"}, {"F": 2, "N": 10**4}, {"E": 10**6}), "table"),
    (BuildFacts({"state": "float16"}, {"F": 1}), "table"),
    (BuildFacts({"state": "float16"}, {"F": 64, "N": 10**6}, {"E": 10**6}), "sorted"),
    (BuildFacts({"state": "float32"}, {"F": 64, "N": 10**6}, {"E": 10**6}), "state"),
])
def test_each_build_takes_the_chain_its_sizes_pay_for(facts, chain):
    assert choose_chain(facts, False) == CHAINS[chain]
    assert SCATTER_ADD.chain_for(facts) == CHAINS[chain]


def test_with_counts_rows_of_one_feature_take_the_pairs_from_one_edge_per_node_chunked_beyond_2_to_the_24():
    def chain(dtype, nodes, edges, features=1):
        return choose_chain(BuildFacts({"state": dtype}, {"F": features, "N": nodes}, {"E": edges}), True)

    facts = BuildFacts({"state": "float16"}, {"F": 1, "N": 10**6}, {"E": 100})
    assert SCATTER_ADD_COUNTS.chain_for(facts) == CHAINS["table_counts"]
    assert chain("float16", 10**4, 10**6) == CHAINS["pairs"]
    assert chain("float32", 10**6, 2**24) == CHAINS["pairs"]
    assert chain("float32", 10**6, 2**24 + 1) == CHAINS["pair_chunks_2"]
    assert chain("float16", 10**6, 10**8) == pair_chunks_chain(6)  # plan.py: 6 chunks at E = 1e8
    assert chain("float32", 10**6, 2**27 + 1) == CHAINS["state_counts"]  # beyond PAIR_MAX_CHUNKS chunks
    assert chain("float32", 10**7, 2**24 + 1) == CHAINS["state_counts"]  # fewer edges per node than chunks
    assert chain("float32", 10**3, 10**8) == CHAINS["state_counts"]  # the shared-memory kernel
    assert chain("float32", 10**3, 10**6, 2) == CHAINS["state_counts"]
    # float32 keeps the state chain where its shared-memory kernel runs, up to STATE_OVER_PAIRS_MAX_EDGES
    assert chain("float32", 10**3, 10**5) == chain("float32", 10**3, 10**6) == CHAINS["state_counts"]
    assert chain("float32", 10**3, 10**6 + 1) == chain("float32", 10**4, 10**6) == CHAINS["pairs"]
    assert chain("float16", 10**3, 10**5) == CHAINS["pairs"]
    # float16 pairs up to PAIRS_MAX_NODES_PER_EDGE nodes per edge (the counts are zeroed O(N) anyway); float32 not
    assert chain("float16", 10**6, 10**5) == CHAINS["pairs"]
    assert chain("float16", 10**6 + 1, 10**5) == CHAINS["table_counts"]
    assert chain("float32", 10**6, 10**5) == CHAINS["state_counts"]
    assert SCATTER_ADD_COUNTS.output_names() == ("state", "counts")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_pairs_take_shared_memory_where_plan_py_does(dtype):
    import numpy as np

    mode = pairs_chain().steps[0].kernel({"src": dtype}).launch.extra_args[-1]
    for n, e in [(n, e) for n in (10, 100, 1000, 3000, 5000) for e in (10**4, 10**5, 10**6, 10**7) if e >= n]:
        path = plan_launch(LaunchRequest(n, e, 1, np.dtype(dtype), 1, True, workspace=1 << 40), H100)
        if 2 * n <= SHARED_MAX_WORDS:
            assert mode.evaluate({"N": n, "E": e}) == (path.algorithm == "shared"), (n, e, path.algorithm)
        else:  # more than 48 KiB holds: global atomics (plan.py's shared kernel opts in to more)
            assert mode.evaluate({"N": n, "E": e}) == 0


def test_pair_chunks_cover_the_edges_of_plan_py_chunks_and_fold_after_each():
    """Chunk k adds edges [k 2^24, (k + 1) 2^24) and folds them (the kernel skips a chunk beyond E); the pairs are
    8 bytes per node, zeroed by the network, the counts are the op's."""
    import numpy as np

    chain = pair_chunks_chain(3)
    firsts = [step.kernel({}).launch.extra_args[2].evaluate({}) for step in chain.steps]
    assert firsts == [k * 2**24 for k in range(3) for _ in range(2)]
    assert [step.kernel({}).name for step in chain.steps] == ["aot_scatter_pair_chunk", "aot_fold_pair_chunk"] * 3
    assert scratch_bytes(chain, {"N": 1000, "E": 2**25, "F": 1}) == {"pairs": 8000, "counts": 8000}
    plan = plan_launch(LaunchRequest(10**6, 3 * 2**24, 1, np.dtype("float32"), 1, True, workspace=1 << 40), H100)
    assert plan.pair_chunks == 3 and plan.paired


def test_every_plugin_id_is_one_step_and_no_chain_holds_a_plugin_twice():
    """inplace/aot.py registers a plugin id once, for one Step: every chain of both ops shares it."""
    steps: dict[str, object] = {}
    for op in (SCATTER_ADD, SCATTER_ADD_COUNTS):
        for chain in op.chains:
            names = [step.plugin for step in chain.steps]
            assert len(set(names)) == len(names), names
            for step in chain.steps:
                assert steps.setdefault(step.plugin, step) is step, step.plugin


SCATTER_STEPS = [(name, step) for name, step in STEPS if step.kernel({}).name.startswith(("aot_scatter_state",
                                                                                           "aot_scatter_table"))]


@pytest.mark.parametrize("chain,step", SCATTER_STEPS, ids=[f"{name}:{step.plugin}" for name, step in SCATTER_STEPS])
def test_scatter_steps_offer_global_atomics_and_chunked_as_tactics(chain, step):
    """Tactic 0 is the plan's mode at every size; tactic 1 global atomics and tactic 2 chunk_reduce, forced (the
    kernel adds by global atomics where chunk_reduce cannot run), each an entry point holding that mode alone."""
    tactics = step.tactics({})
    assert len(tactics) == len(SCATTER_TACTICS) == 2
    assert [kernel.name for kernel in tactics] == [step.kernel({}).name + "_atomics", step.kernel({}).name + "_chunked"]
    for n, e, f in SIZES:
        sizes = {"N": n, "E": e, "F": f}
        atomics, chunked = (evaluate_launch(kernel, sizes) for kernel in tactics)
        assert atomics[3][-1] == 0 and chunked[3][-1] == 2
        assert chunked[0][1] == max(-(-f // 128), 1) and chunked[2] == 47 * 1024
        assert atomics[0][1] == 1 and evaluate_launch(step.kernel({}), sizes)[3][-1] in (0, 1, 2)


@pytest.mark.parametrize("counts", [False, True])
def test_the_chunked_grid_fills_the_resident_slots_as_plan_py_does(counts):
    """plan.py Chunked: min(resident slots / feature slices, chunks) blocks; here min(3 x 132 / slices, E / 32)."""
    import numpy as np

    checked = 0
    for n, e, f in [(1000, 10**6, 64), (1000, 10**7, 64), (1000, 10**8, 64), (2048, 10**7, 256), (384, 10**6, 32)]:
        path = plan_launch(LaunchRequest(n, e, f, np.dtype("float32"), 4, counts, workspace=1 << 40), H100)
        if path.algorithm != "chunked":  # with counts at 1e6 edges: sorted
            continue
        checked += 1
        blocks = chunked_blocks().evaluate({"N": n, "E": e, "F": f})
        assert (blocks, -(-f // 128)) == path.scatter.grid, (n, e, f)
    assert checked >= 4
    assert chunked_blocks().evaluate({"N": 10, "E": 3200, "F": 64}) == 100


def test_wide_rows_sort_where_plan_py_does_and_chunked_keeps_few_nodes():
    def chain(dtype, nodes, edges, counts):
        return choose_chain(BuildFacts({"state": dtype}, {"F": 64, "N": nodes}, {"E": edges}), counts)

    assert chain("float32", 10**6, 10**7, True) == sorted_chain(True, 4)  # 80 MB of pairs: 4 placing passes
    assert chain("float32", 10**6, 10**6, True) == sorted_chain(True, 1)
    assert chain("float32", 10**6, 10**7, False) == sorted_chain(False, 4)  # node passes in plan.py
    assert chain("float32", 10**6, 10**6, False) == state_chain(False)  # the direct kernel in plan.py
    assert chain("float16", 10**6, 10**5, False) == sorted_chain(False, 1)
    assert chain("float16", 10**3, 10**6, True) == sorted_chain(True, 1)  # tallies in shared memory
    assert chain("float16", 10**3, 10**7, True) == table_chain(True)  # chunked
    assert chain("float32", 10**4, 10**5, True) == state_chain(True)
    wide = choose_chain(BuildFacts({"state": "float16"}, {"F": 128, "N": 10**6}, {"E": 10**6}), True)
    assert wide == sorted_chain(True, 1, wide=True) and wide.steps[-2].kernel({}).name == "aot_sort_reduce_wide"
    assert chain("float16", 10**6, 10**6, True).steps[-2].kernel({}).name == "aot_sort_reduce"


@pytest.mark.trt_bindings
def test_both_ops_register_every_plugin_of_every_chain_once(aot):
    """inplace/aot.py registers SCATTER_ADD and SCATTER_ADD_COUNTS side by side (shared plugins are one step)."""
    from inplace.aot import register_aot_op
    from inplace.checks import plugin_id

    ids = register_aot_op(SCATTER_ADD) + register_aot_op(SCATTER_ADD_COUNTS)
    assert set(ids) == {plugin_id(op, step) for op in (SCATTER_ADD, SCATTER_ADD_COUNTS) for chain in op.chains
                        for step in chain.steps}


@pytest.mark.parametrize("name", [name for name in CHAINS if name.startswith("sorted")])
def test_the_sorted_chain_fills_only_its_counts_and_its_count_step_creates_the_rest(name):
    """The tile sums, cursors, sorted pairs and partial sums are written before they are read: no fill for them
    (one launch and one pass over their memory less per run); sort_count creates them, read by later steps."""
    chain = CHAINS[name]
    assert [(scratch.name, scratch.fill) for scratch in chain.scratch] == [
        ("counts", 0), ("tile_sums", None), ("cursor", None), ("sorted", None), ("head", None), ("tail", None)]
    assert [scratch.name for scratch in chain.filled()] == ["counts"]
    first = chain.steps[0]
    assert first.plugin == "aliased_io::sort_count" and first.inputs == ("state", "index", "counts")
    assert first.outputs == ("counts", "tile_sums", "cursor", "sorted", "head", "tail")
    for step in chain.steps[1:]:
        assert all(step.outputs.count(name) == step.inputs.count(name) for name in step.outputs)


def test_the_sort_counts_reference_gives_the_created_tensors_their_shapes_and_dtypes():
    import numpy as np

    state, index = np.zeros((10, 64), np.float16), np.array([3, 3, 9, -1] * 25, np.int64)
    counts, tile_sums, cursor, pairs, head, tail = sorted_chain(True).steps[0].reference(
        state, index, np.zeros((10, 1), np.int64))
    assert counts[:, 0].tolist() == [0, 0, 0, 50, 0, 0, 0, 0, 0, 25]
    assert [(array.shape, array.dtype.name) for array in (tile_sums, cursor, pairs, head, tail)] == [
        ((1024,), "int32"), ((11,), "int32"), ((100, 2), "int32"), ((4, 64), "float32"), ((4, 64), "float32")]
