"""The in-place scatter-add described once as TensorRT's AOT plugins run it (inplace/spec.py InplaceOp), on the
Python plugin's kernel family: every step launches an AOT entry point of plugin/kernels/scatter_add.cu (aot_*),
a thin wrapper of the same device code the Python plugin's plan (plan.py) launches, so both plugins run one
implementation of each path.

    scatter_add_op(with_counts)   state[index[e]] += src[e] in place (and counts = in-degrees, a new tensor)

Chains (one is chosen per engine from what the build knows, `choose`; each made once, so a choice is the same
object as its entry of `chains`; a plugin is one Step object in every chain that holds it, `_step`):
    float32          one step: aot_scatter_state[_counts] (chunked or shared-memory kernel, else the direct
                     kernel, or with counts global atomics)
    float16 table    keys -1 [K] and values 0 [C, F] made by the network, C = min(N, 4E) slots (one per node where
                     C = N, else hashed: K = C), then aot_scatter_table[_counts] (chunked, shared memory or global
                     atomics into the table) and aot_apply_table (one rounding per node)
    float16 split    F = 1, no counts, a hashed table at every E of the profile or at most 2^15 edges: slots -1
                     [S] (64-bit), aot_split_table, aot_apply_split_table
    float16 block    F = 1, no counts, at most 1024 edges in the profile: aot_block_table alone (one block)
    pairs            F = 1 with counts, E <= 2^24 in the profile and float32 E >= N (unless the state chain's
                     shared kernel runs), float16 E >= N / 10; float16 without counts too (the counts a
                     scratch tensor): (value, count) pairs summed in the counts (aot_scatter_pairs:
                     shared memory or global atomics), aot_fold_pairs
    pair chunks      the same beyond 2^24 edges (up to PAIR_MAX_CHUNKS chunks): pairs 0 [N, 2] made by the
                     network, per chunk of 2^24 edges aot_scatter_pair_chunk and aot_fold_pair_chunk
    sorted           wide rows where sorting pays (plan.py Sorted), either dtype, with or without counts: the
                     edges counting-sorted by node in scratch tensors, then summed per node in registers
                     (aot_sort_count, _tile_sums, _scan_tiles, _cursors, _place per node range, _reduce (rows of
                     more than 64 features: _reduce_wide), _fixup)

What each run's sizes decide is decided by the launch: a scatter kernel's `mode` (global atomics or the direct
kernel, the shared-memory kernel, or chunk_reduce: an extra argument), its grid and its dynamic shared memory are
expressions of N, E and F that hold plan.py's rules (_shared_rule, _chunked_rule), and the kernel itself takes the
vector width from F and the pointers' alignment and a hashed table where C < N. What only a measurement can
decide is a tactic: each scatter step offers global atomics and chunk_reduce forced (SCATTER_TACTICS), which
TensorRT times at the profile's sizes when it builds; tactic 0 is the rule's choice. Each tactic launches an entry
point of its own (aot_scatter_*_atomics, aot_scatter_*_chunked) that holds its mode alone and so runs without the
spilled registers of the entry point that holds every mode and width.
A step's launch reads only the sizes its own inputs carry (inplace/checks.py): where a kernel needs N or E that
its tensors do not give, the step reads the state or the index as well (a pointer the kernel leaves alone).
Grids are sized for SM_COUNT SMs (an H100 or H200); on another GPU the kernels still cover every element
(grid-stride loops), the grids fit it less well.
Every step of a chain of several steps has a numpy reference (Step.reference: the ONNX Runtime proof runs the
chain on the CPU with them; a chain of one step is proved with the op's `reference`).
A step's reference need only agree with its chain's others (the scratch layouts are theirs); the GPU tests prove the
kernels.
"""

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from inplace.spec import (
    BuildFacts,
    Chain,
    Expr,
    InplaceOp,
    Kernel,
    Launch,
    Scratch,
    Step,
    TensorInput,
    TensorOutput,
    cdiv,
    expr,
    maximum,
    minimum,
    size,
)
from plugin.kernels import plan
from plugin.kernels.aot import SCATTER_TACTICS
from reference.gnn import scatter_add_rows

NAMESPACE = "aliased_io"
SM_COUNT = 132  # H100 SXM and H200: the grids' caps below are resident blocks of this many SMs
THREADS = plan.THREADS_PER_BLOCK
# Dynamic shared memory a launch may ask for: the 48 KiB of a launch without an opt-in (TensorRT's AOT launch makes
# none) less what the kernels hold statically (a block scan's sums: under 1 KiB), which the same 48 KiB must hold.
DYNAMIC_SHARED_BYTES = 48 * 1024 - 1024
QUEUE_BYTES = plan.QUEUE_BYTES_PER_BLOCK  # the scatter kernels' row queues, in dynamic shared memory here
SHARED_MAX_WORDS = (DYNAMIC_SHARED_BYTES - QUEUE_BYTES) // 4
L2_BYTES = 50 << 20  # an H100's L2 (an H200's: 60 MB): the sorted chain's placing passes
CHUNK_MIN_EDGES_PER_BLOCK = 32  # chunk_reduce's chunks are whole warps of edges (plan.py Chunked: chunk_edges)
CHUNK_SLICE_FEATURES = 128  # a warp's row at width 4: feature slices in the grid's y (wider rows, or a narrower
                            # width than the kernel finds, fall back to global atomics)
TABLE_SLOTS_PER_EDGE = 4  # the float16 table: min(N, 4 E) slots (plan.table_layout: min(N, 2-4 E))
PAIR_MAX_CHUNKS = 8  # pair_chunks_chain: up to 2^27 edges (beyond: global atomics into the state or the table)
BLOCK_TABLE_BYTES = 8 << 12  # aot_block_table's table for plan.BLOCK_TABLE_MAX_EDGES edges (4096 slots)
# With counts and rows of one feature (BENCHMARKS.md "The AOT chains' choices with counts", H100, ms plain): float32
# keeps the state chain over the pairs where its shared-memory kernel runs, up to STATE_OVER_PAIRS_MAX_EDGES (N = 1e3,
# E = 1e5: 0.0116 against 0.0129; E = 1e6: 0.0206 against 0.0217); float16 takes the pairs beyond one edge per node
# up to PAIRS_MAX_NODES_PER_EDGE nodes per edge, the counts' zeroing being O(N) anyway (N = 1e6, E = 1e5: 0.0165
# against the table's 0.0284).
STATE_OVER_PAIRS_MAX_EDGES = 10**6
PAIRS_MAX_NODES_PER_EDGE = 10

N, E, F = size("N"), size("E"), size("F")


@dataclass(frozen=True)
class Cond:
    """A condition on the sizes as two expressions, `yes` (1 where it holds, else 0) and `no` (its negation):
    Expr has no subtraction, so a negation is built alongside rather than as 1 - yes."""

    yes: Expr
    no: Expr

    def __and__(self, other: "Cond") -> "Cond":
        return Cond(self.yes * other.yes, minimum(self.no + other.no, 1))

    def __or__(self, other: "Cond") -> "Cond":
        return Cond(minimum(self.yes + other.yes, 1), self.no * other.no)

    def __invert__(self) -> "Cond":
        return Cond(self.no, self.yes)


def at_least(a: Expr | int, b: Expr | int) -> Cond:
    """a >= b for non-negative sizes: (a + 1) // (b + 1) is at least 1 exactly then (never a division by zero)."""
    return Cond(minimum((expr(a) + 1) // (expr(b) + 1), 1), minimum((expr(b) + 1) // (expr(a) + 2), 1))


def at_most(a: Expr | int, b: Expr | int) -> Cond:
    return at_least(b, a)


def _shared_rule(dtype: str, with_counts: bool) -> Cond:
    """Where the shared-memory kernel runs (plan.py Shared and Direct, restricted to what 48 KiB holds): its
    rows fit (N (F + 1) <= SHARED_MAX_WORDS) and
      float32 without counts, F = 1: from SHARED_OVER_DIRECT_MIN_EDGES_PER_NODE edges per node, or on at most
        SHARED_OVER_DIRECT_FEW_NODES nodes from SHARED_OVER_DIRECT_FEW_MIN_EDGES edges and
        SHARED_OVER_DIRECT_FEW_MIN_EDGES_PER_NODE per node (BENCHMARKS.md "Small updates re-timed against the
        windows", direct against shared);
      with counts: from SHARED_MIN_EDGES_PER_NODE edges per node, F = 1 or SHARED_WIDE_MIN_EDGES_PER_VALUE edges
        per value (the kernel table's N = 1e3, F = 1 rows, "Auto's rules over F");
      float16 without counts, F = 1: from SHARED_MIN_EDGES_PER_NODE edges per node (the kernel table, N = 1e3).
    Wider rows without counts keep global atomics or the direct kernel (plan.py's windows need more than 48 KiB
    at the sizes where they pay)."""
    fits = at_most(N * (F + 1), SHARED_MAX_WORDS)
    one_feature = at_most(F, 1)
    if dtype == "float32" and not with_counts:
        many = at_least(E, N * plan.SHARED_OVER_DIRECT_MIN_EDGES_PER_NODE)
        few = (at_most(N, plan.SHARED_OVER_DIRECT_FEW_NODES) & at_least(E, plan.SHARED_OVER_DIRECT_FEW_MIN_EDGES)
               & at_least(E, N * plan.SHARED_OVER_DIRECT_FEW_MIN_EDGES_PER_NODE))
        return fits & one_feature & (many | few)
    dense = at_least(E, N * plan.SHARED_MIN_EDGES_PER_NODE)
    if with_counts:
        return fits & dense & (one_feature | at_least(E, N * F * plan.SHARED_WIDE_MIN_EDGES_PER_VALUE))
    return fits & dense & one_feature


def _chunked_rule(dtype: str, with_counts: bool) -> Cond:
    """Where chunk_reduce runs (plan.py Chunked: its rows sorted per chunk in shared memory): at most
    CHUNK_MAX_NODES nodes, rows of at least SORT_MIN_FEATURES, from CHUNK_MIN_EDGES edges with rows of at least
    the least features (SORT_MIN_FEATURES with counts, else CHUNK_HALF_UNCOUNTED_MIN_FEATURES float16 and
    CHUNK_UNCOUNTED_MIN_FEATURES float32), or inside one of CHUNK_WINDOWS (BENCHMARKS.md kernel table N = 1e3,
    F = 64; "Narrow rows and few nodes")."""
    least = (plan.SORT_MIN_FEATURES if with_counts else plan.CHUNK_HALF_UNCOUNTED_MIN_FEATURES if dtype == "float16"
             else plan.CHUNK_UNCOUNTED_MIN_FEATURES)
    rule = at_least(E, plan.CHUNK_MIN_EDGES) & at_least(F, least)
    for counts, most, features, per_node in plan.CHUNK_WINDOWS:
        if counts == with_counts:
            rule = rule | (at_most(N, most) & at_least(F, features) & at_least(E, N * per_node))
    return at_most(N, plan.CHUNK_MAX_NODES) & at_least(F, plan.SORT_MIN_FEATURES) & rule


def _modes(dtype: str, with_counts: bool) -> tuple[Cond, Cond]:
    """(shared, chunked) of a scatter kernel: chunked where it pays, else shared where it pays (never both)."""
    chunked = _chunked_rule(dtype, with_counts)
    return _shared_rule(dtype, with_counts) & ~chunked, chunked


def chunked_blocks() -> Expr:
    """plan.py Chunked: a grid that fills every resident slot (RESIDENT_BLOCKS_PER_SM per SM, shared among the
    feature slices of the grid's y), each block with at least CHUNK_MIN_EDGES_PER_BLOCK edges; the kernel splits
    the edges into equal rounds of chunks as large as its 47 KiB hold (scatter_add.cu aot_chunked)."""
    slots = maximum(expr(plan.RESIDENT_BLOCKS_PER_SM * SM_COUNT) // maximum(cdiv(F, CHUNK_SLICE_FEATURES), 1), 1)
    return minimum(cdiv(E, CHUNK_MIN_EDGES_PER_BLOCK), slots)


def _scatter_launch(dtype: str, with_counts: bool, direct: bool, extra: tuple[Expr, ...],
                    mode: str = "plan") -> Launch:
    """A scatter kernel's launch: its mode (AOT_ATOMICS 0, AOT_SHARED 1, AOT_CHUNKED 2 in scatter_add.cu) the last
    extra argument, grid, block and dynamic shared memory (the row queues and the mode's own) by the mode: the
    plan's choice for the sizes (`mode` "plan"), or one forced ("atomics", "chunked": a tactic; the kernel runs
    global atomics where chunk_reduce cannot run)."""
    shared, chunked = _modes(dtype, with_counts)
    if mode == "atomics":
        shared, chunked = Cond(expr(0), expr(1)), Cond(expr(0), expr(1))
    elif mode == "chunked":
        shared, chunked = Cond(expr(0), expr(1)), Cond(expr(1), expr(0))
    atomics = ~shared & ~chunked
    x = (shared.yes * maximum(shared_blocks(), 1) + chunked.yes * maximum(chunked_blocks(), 1)
         + atomics.yes * maximum(direct_blocks() if direct else global_blocks(), 1))
    grid = (x, chunked.yes * maximum(cdiv(F, CHUNK_SLICE_FEATURES), 1) + chunked.no, expr(1))
    queues = 0 if direct else QUEUE_BYTES
    smem = (shared.yes * (N * (F + 1) * 4 + QUEUE_BYTES) + chunked.yes * DYNAMIC_SHARED_BYTES
            + atomics.yes * queues)
    return Launch(grid, (THREADS, 1, 1), (*extra, shared.yes + chunked.yes * 2), smem)


def _scatter_kernels(name: str, dtype: str, with_counts: bool, direct: bool,
                     extra: tuple[Expr, ...]) -> tuple[Kernel, tuple[Kernel, ...]]:
    """(the plan's kernel, its tactics): each mode of SCATTER_TACTICS forced, which TensorRT times at the
    profile's sizes where a measurement must choose; tactic 0 follows plan.py's rules at every run's sizes. Tactic
    k runs entry point NAME_<mode>, which holds that mode alone (chunked: global atomics apart, where chunk_reduce
    cannot run) and so needs no spilled registers, where NAME, holding every mode, spills (scatter_add.cu)."""
    plan_kernel = Kernel(name, PTX, _scatter_launch(dtype, with_counts, direct, extra))
    return plan_kernel, tuple(Kernel(f"{name}_{mode}", PTX, _scatter_launch(dtype, with_counts, direct, extra, mode))
                              for mode in SCATTER_TACTICS)


def _grid(x: Expr) -> tuple[Expr, Expr, Expr]:
    return maximum(x, 1), expr(1), expr(1)


def global_blocks() -> Expr:
    """plan.py Global: a block per 256 edges up to RESIDENT_BLOCKS_PER_SM per SM (the kernel sizes its windows)."""
    return minimum(cdiv(E, THREADS), plan.RESIDENT_BLOCKS_PER_SM * SM_COUNT)


def direct_blocks() -> Expr:
    """plan.py Direct: a thread per (edge, chunk of at most 4 features) up to DIRECT_BLOCKS_PER_SM per SM (E F
    itself could pass int32; F is capped at 32, where the cap on blocks is reached from 2^15 edges anyway)."""
    return minimum(cdiv(E, THREADS) * minimum(F, 32), plan.DIRECT_BLOCKS_PER_SM * SM_COUNT)


def shared_blocks() -> Expr:
    """plan.py Shared: about 4 edges per node per block, at least one block per SM, at most 4 per SM (each holds at
    most 47 KiB of queues and rows)."""
    return minimum(maximum(cdiv(E, maximum(N, 1) * 4), SM_COUNT), 4 * SM_COUNT)


def table_capacity() -> Expr:
    """C: the float16 table's slots, one per node where N <= 4 E, else 4 E hashed."""
    return minimum(N, E * TABLE_SLOTS_PER_EDGE)


def table_keys() -> Expr:
    """K: the table's keys, C where it is hashed (C < N), else none."""
    return table_capacity() * at_least(N, table_capacity() + 1).yes


def split_capacity() -> Expr:
    """S: split_table's slots, 4 E up to 2^21, then 2^21 up to 2^20 edges, then 2 E (plan.split_table_capacity's
    sizes without its rounding to a power of two)."""
    return maximum(minimum(E * plan.SPLIT_TABLE_SLOTS_PER_EDGE, plan.SPLIT_TABLE_MAX_SPARSE_SLOTS), E * 2)


class FamilyPtx:
    """The PTX of one aot_* entry point of scatter_add.cu for the step's dtype (its state's, else its src's; a
    step reading neither, e.g. the sort's tile sums, has no floating-point data: float32's), compiled by NVRTC
    for the build's target (plugin.kernels.aot compile_family_ptx, aot_target_arch)."""

    def ptx(self, kernel: str, dtypes: Mapping[str, str]) -> bytes:
        from plugin.kernels.aot import aot_target_arch, compile_family_ptx

        return compile_family_ptx(kernel, _dtype(dtypes), aot_target_arch())


PTX = FamilyPtx()


def _dtype(dtypes: Mapping[str, str]) -> str:
    return dtypes.get("state") or dtypes.get("src") or "float32"


def _kernel(name: str, grid: Expr, extra: tuple[Expr, ...], shared: Expr | int = 0,
            threads: int = THREADS) -> Kernel:
    return Kernel(name, PTX, Launch(_grid(grid), (threads, 1, 1), extra, expr(shared)))


_STEPS: dict[str, tuple[Step, tuple[Any, ...]]] = {}


def _step(name: str, inputs: tuple[str, ...], outputs: tuple[str, ...], kernel: Kernel,
          float32: Kernel | None = None, tactics: tuple[Kernel, ...] = (),
          reference: Callable[..., tuple[Any, ...]] | None = None) -> Step:
    """The one Step of plugin `name` (a plugin id is registered for one step: every chain that holds it holds the
    same object, whichever op or chain asks first). `float32`: its kernel for float32 tensors where that differs;
    `tactics`: the kernels TensorRT may time against it (tactic k = tactics[k - 1]); `reference`: its numpy
    reference (Step.reference; every step of a chain of several steps has one). AssertionError where the same
    name is defined twice differently."""
    definition = (inputs, outputs, kernel, float32, tactics, reference)
    made = _STEPS.get(name)
    if made is not None:
        assert made[1] == definition, f"plugin {name} defined twice differently"
        return made[0]
    step = Step(f"{NAMESPACE}::{name}", inputs, outputs,
                lambda dtypes: float32 if float32 is not None and _dtype(dtypes) == "float32" else kernel,
                lambda dtypes: tactics, reference)
    _STEPS[name] = (step, definition)
    return step


@functools.cache
def state_chain(with_counts: bool) -> Chain:
    """float32: one kernel adds the rows into the state."""
    name = "aot_scatter_state_counts" if with_counts else "aot_scatter_state"
    kernel, tactics = _scatter_kernels(name, "float32", with_counts, not with_counts, (N, E, F))
    counts = ("counts",) if with_counts else ()
    step = _step("add_rows_counts" if with_counts else "add_rows", ("state", "src", "index", *counts),
                 ("state", *counts), kernel, tactics=tactics)
    return Chain((step,), _counts_scratch(with_counts))


@functools.cache
def table_chain(with_counts: bool) -> Chain:
    """float16: sums in a float32 table of C slots (scratch), then one rounding per node into the state. The
    scatter step reads the state (for N) and the rounding the index (for E) without touching them: a step's
    launch reads only the sizes of its own inputs."""
    capacity = table_capacity()
    name = "aot_scatter_table_counts" if with_counts else "aot_scatter_table"
    scatter, tactics = _scatter_kernels(name, "float16", with_counts, False, (N, E, F, capacity))
    apply = _kernel("aot_apply_table", minimum(cdiv(capacity * minimum(F, 32), THREADS),
                                               plan.RESIDENT_BLOCKS_PER_SM * SM_COUNT), (N, F, capacity))
    counts = ("counts",) if with_counts else ()
    steps = (_step("add_into_table_counts" if with_counts else "add_into_table",
                   ("state", "src", "index", "keys", "values", *counts), ("keys", "values", *counts), scatter,
                   tactics=tactics, reference=_into_table),
             _step("round_table", ("state", "index", "keys", "values"), ("state",), apply, reference=_round_table))
    scratch = (Scratch("keys", "int32", (table_keys(),), -1), Scratch("values", "float32", (capacity, F), 0))
    return Chain(steps, scratch + _counts_scratch(with_counts))


def _pairs_shared(dtype: str) -> Cond:
    """Where the pairs take the shared-memory kernel: plan.py Shared and Pairs, from
    SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE edges per node (float32 on fewer than SHARED_FEW_NODES nodes:
    SHARED_OVER_FLOAT32_PAIRS_MIN_EDGES_PER_NODE), where 48 KiB hold the pairs."""
    fits = at_most(N * 2, SHARED_MAX_WORDS)
    many = at_least(E, N * plan.SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE)
    if dtype == "float16":
        return fits & many
    few = at_most(N, plan.SHARED_FEW_NODES - 1)
    return fits & ((few & at_least(E, N * plan.SHARED_OVER_FLOAT32_PAIRS_MIN_EDGES_PER_NODE)) | (~few & many))


def _pairs_kernel(dtype: str) -> Kernel:
    shared = _pairs_shared(dtype)
    x = shared.yes * maximum(shared_blocks(), 1) + shared.no * maximum(global_blocks(), 1)
    return Kernel("aot_scatter_pairs", PTX, Launch((x, expr(1), expr(1)), (THREADS, 1, 1), (N, E, shared.yes),
                                                   shared.yes * N * 8 + QUEUE_BYTES))


@functools.cache
def pairs_chain() -> Chain:
    """F = 1, at most PAIRED_MAX_EDGES edges, with counts either dtype (float16 without counts too: the counts are
    then a scratch tensor of the chain alone): (value, count) float32 pairs summed in the counts (shared memory or
    global atomics, _pairs_shared by the dtype), then each node folded: its count made an int64, its value
    rounded into the state once."""
    fold = _kernel("aot_fold_pairs", cdiv(N, THREADS), (N,))
    steps = (_step("add_pairs", ("src", "index", "counts"), ("counts",), _pairs_kernel("float16"),
                   float32=_pairs_kernel("float32"), reference=_into_pairs),
             _step("fold_pairs", ("state", "counts"), ("state", "counts"), fold, reference=_fold_pairs))
    return Chain(steps, _counts_scratch(True))


@functools.cache
def pair_chunks_chain(chunks: int) -> Chain:
    """F = 1 with counts beyond PAIRED_MAX_EDGES edges (plan.py Pairs' chunks): the pairs in a scratch tensor
    [N, 2], and per chunk of PAIRED_MAX_EDGES edges (`chunks` for the profile's most edges) global atomics of
    its pairs, then a fold of each node's count into its int64 count (exact: a float32 count is exact up to
    2^24); each value keeps summing in float32 and is rounded into the state once, by the fold of the last chunk
    that holds edges (a chunk beyond a run's E does nothing). Each chunk's steps are plugins of their own (their
    first edge is a constant of the launch)."""
    steps = []
    for k in range(chunks):
        first = expr(k * plan.PAIRED_MAX_EDGES)
        scatter = Kernel("aot_scatter_pair_chunk", PTX, Launch(_grid(global_blocks()), (THREADS, 1, 1),
                                                               (N, E, first), expr(QUEUE_BYTES)))
        fold = _kernel("aot_fold_pair_chunk", cdiv(N, THREADS), (N, E, first))
        add, fold_reference = _pair_chunk_references(k * plan.PAIRED_MAX_EDGES)
        steps += [_step(f"add_pair_chunk_{k}", ("src", "index", "pairs"), ("pairs",), scatter, reference=add),
                  _step(f"fold_pair_chunk_{k}", ("state", "index", "pairs", "counts"), ("state", "pairs", "counts"),
                        fold, reference=fold_reference)]
    return Chain(tuple(steps), (Scratch("pairs", "float32", (N, expr(2)), 0),) + _counts_scratch(True))


def sort_tiles() -> Expr:
    """plan.sort_layout's scan tiles: one up to SORT_ONE_TILE_NODES nodes, else min(SORT_MAX_TILES, N / SORT_TILE_NODES)."""
    many = at_least(N, plan.SORT_ONE_TILE_NODES + 1)
    return many.no + many.yes * minimum(cdiv(N, plan.SORT_TILE_NODES), plan.SORT_MAX_TILES)


def sort_span() -> Expr:
    """plan.sort_layout's warp range: SORT_TARGET_RANGES ranges of whole warps of positions."""
    return cdiv(cdiv(E, plan.SORT_TARGET_RANGES), 32) * 32


def sort_partials() -> Expr:
    """Rows of the head and tail partial sums: one per warp range, at most min(E / 32, SORT_TARGET_RANGES)."""
    return maximum(minimum(cdiv(E, 32), plan.SORT_TARGET_RANGES), 1)


# The sorted chain's scratch tensors besides the in-degrees (counts, zeroed): each element a kernel reads is one a
# kernel of the chain wrote first (the tile sums by sort_tile_sums, the cursors by the scan and sort_cursors, the
# sorted pairs by the placing, the partial sums by the reduce), and every kernel stays in bounds whatever they hold,
# so none is filled: sort_count creates them (Scratch fill None) and TensorRT allocates them.
SORT_UNFILLED = (Scratch("tile_sums", "int32", (expr(plan.SORT_MAX_TILES),), None),
                 Scratch("cursor", "int32", (N + 1,), None), Scratch("sorted", "int32", (E, expr(2)), None),
                 Scratch("head", "float32", (sort_partials(), F), None),
                 Scratch("tail", "float32", (sort_partials(), F), None))
SORT_NARROW_MAX_FEATURES = 64  # rows up to 64 features: widths 1 and 2 (plan.py warp_row_vec), aot_sort_reduce


def sorted_chain(with_counts: bool, place_passes: int = 1, wide: bool = False) -> Chain:
    """_sorted_chain, made once per (with_counts, place_passes, wide): `wide` for rows of more than
    SORT_NARROW_MAX_FEATURES features (the reduce kernel that holds width 4 too: 78-80 registers against 64,
    scatter_add.cu aot_sort_reduce_body)."""
    return _sorted_chain(bool(with_counts), int(place_passes), bool(wide))


@functools.cache
def _sorted_chain(with_counts: bool, place_passes: int, wide: bool) -> Chain:
    """Wide rows with many edges (plan.py Sorted): the edges counting-sorted by node in scratch tensors, then each
    warp sums its range of sorted rows in registers and writes each node once (no atomics on the state; float16
    rounds each node once). Steps: count (in-degrees, in shared memory where N <= SORT_PRIVATE_MAX_NODES (and 47
    KiB hold them) with at least SORT_PRIVATE_MIN_EDGES_PER_NODE edges each), the scan tiles' sums and their scan,
    the cursors, `place_passes` placing passes over node ranges (each keeps its part of the sorted pairs in L2; a
    plugin each, sort_place_K_of_P), the reduce and the fixup of nodes that straddle warp ranges. The in-degrees
    are the op's counts with counts, else scratch; the scan and the placing read them only for N. Only the counts
    are filled (zeros); the other scratch tensors are SORT_UNFILLED, created by the count step (it reads the state for
    F, which the partial sums' shape reads)."""
    private = (at_most(N, min(plan.SORT_PRIVATE_MAX_NODES, DYNAMIC_SHARED_BYTES // 4))
               & at_least(E, N * plan.SORT_PRIVATE_MIN_EDGES_PER_NODE))
    private_nodes = N * private.yes
    steps_blocks = cdiv(E, plan.SORT_EDGES_PER_THREAD * THREADS)
    blocks = (private.yes * minimum(steps_blocks, plan.SORT_PRIVATE_BLOCKS_PER_SM * SM_COUNT)
              + private.no * minimum(steps_blocks, (2048 // THREADS) * SM_COUNT))
    smem = private_nodes * 4
    tiles, tile_nodes = sort_tiles(), cdiv(N, sort_tiles())
    span, ranges = sort_span(), cdiv(E, maximum(sort_span(), 32))
    slices = maximum(cdiv(F, 32), 1)
    count = Kernel("aot_sort_count", PTX, Launch(_grid(blocks), (THREADS, 1, 1), (N, E, private_nodes), smem))
    created = tuple(scratch.name for scratch in SORT_UNFILLED)
    steps = [_step("sort_count", ("state", "index", "counts"), ("counts", *created), count, reference=_sort_count),
             _step("sort_tile_sums", ("counts", "tile_sums"), ("tile_sums",),
                   _kernel("aot_sort_tile_sums", tiles, (N, tile_nodes)), reference=_sort_tile_sums),
             _step("sort_scan_tiles", ("counts", "tile_sums", "cursor"), ("tile_sums", "cursor"),
                   _kernel("aot_sort_scan_tiles", expr(1), (N, tiles)), reference=_sort_scan_tiles),
             _step("sort_cursors", ("counts", "tile_sums", "cursor"), ("cursor",),
                   _kernel("aot_sort_cursors", tiles, (N, tile_nodes)), reference=_sort_cursors)]
    for k in range(place_passes):
        place = Kernel("aot_sort_place", PTX, Launch(_grid(blocks), (THREADS, 1, 1),
                                                     (N, E, private_nodes, N * k // place_passes,
                                                      N * (k + 1) // place_passes), smem))
        name = "sort_place" if place_passes == 1 else f"sort_place_{k + 1}_of_{place_passes}"
        steps.append(_step(name, ("index", "counts", "cursor", "sorted"), ("cursor", "sorted"), place,
                           reference=_place_reference(k, place_passes)))
    reduce = Kernel("aot_sort_reduce_wide" if wide else "aot_sort_reduce", PTX,
                    Launch((maximum(cdiv(ranges, plan.WARPS_PER_BLOCK), 1), slices, expr(1)), (THREADS, 1, 1),
                           (N, E, F, span)))
    fixup = Kernel("aot_sort_fixup", PTX, Launch((maximum(cdiv(ranges, plan.WARPS_PER_BLOCK), 1), slices, expr(1)),
                                                 (THREADS, 1, 1), (N, F, span, ranges)))
    steps += [_step("sort_reduce_wide" if wide else "sort_reduce", ("src", "sorted", "cursor", "state", "head", "tail"), ("state", "head", "tail"),
                    reduce, reference=_sort_reduce),
              _step("sort_fixup", ("sorted", "cursor", "state", "head", "tail"), ("state",), fixup,
                    reference=_sort_fixup)]
    return Chain(tuple(steps), (Scratch("counts", "int64", (N, expr(1)), 0), *SORT_UNFILLED))


def sort_place_passes(edges: int, nodes: int) -> int:
    """plan.py Sorted's placing passes for the profile's most edges: one where tallies may live in shared memory,
    else enough that each writes at most half of an H100's or H200's L2 (50 MB) of pairs, at most
    SORT_MAX_PLACE_PASSES."""
    if nodes <= plan.SORT_PRIVATE_MAX_NODES:
        return 1
    return max(1, min(plan.SORT_MAX_PLACE_PASSES, -(-8 * edges // (L2_BYTES // 2))))


@functools.cache
def split_chain() -> Chain:
    """float16, F = 1, no counts: (node, sum) slots claimed per edge, then each node rounded once (the scatter reads
    the state for N, the rounding the index for E, as table_chain)."""
    slots = split_capacity()
    scatter = _kernel("aot_split_table", cdiv(E, THREADS), (N, E, slots))
    apply = _kernel("aot_apply_split_table", minimum(cdiv(slots, THREADS),
                                                     plan.SPLIT_TABLE_APPLY_BLOCKS_PER_SM * SM_COUNT), (N, slots))
    steps = (_step("add_into_slots", ("state", "src", "index", "slots"), ("slots",), scatter, reference=_into_slots),
             _step("round_slots", ("state", "index", "slots"), ("state",), apply, reference=_round_slots))
    return Chain(steps, (Scratch("slots", "int64", (slots,), -1),))


@functools.cache
def block_chain() -> Chain:
    """float16, F = 1, no counts, at most BLOCK_TABLE_MAX_EDGES edges: one block, its table in shared memory."""
    block = _kernel("aot_block_table", expr(1), (N, E),
                    minimum(maximum(E * 64, 512), BLOCK_TABLE_BYTES), plan.BLOCK_TABLE_THREADS)
    return Chain((_step("add_block", ("state", "src", "index"), ("state",), block),))


def _counts_scratch(with_counts: bool) -> tuple[Scratch, ...]:
    return (Scratch("counts", "int64", (N, expr(1)), 0),) if with_counts else ()


def _known(facts: BuildFacts, name: str) -> int | None:
    """A size's build-time bound: its constant, else the profile's maximum, else None."""
    return facts.constants.get(name, facts.maxima.get(name))


def _sorts(facts: BuildFacts, with_counts: bool) -> bool:
    """Whether the build takes the sorted chain (N, F constant, E_max known): where plan.py sorts at E_max and
    its chunked path (the state and table chains' chunked mode) does not pay; without counts float16 where the
    table it skips holds at least SORT_SPARSE_MIN_TABLE values, and float32 where plan.py would stream the edges
    through node passes (its state far beyond L2, node_ranges_for)."""
    import numpy as np

    nodes, features, edges = facts.constants["N"], facts.constants["F"], _known(facts, "E")
    assert edges is not None
    dtype = facts.dtypes["state"]
    sizes = {"N": nodes, "E": edges, "F": features}
    if not plan.sorting_pays(nodes, edges, features, np.dtype(dtype)) or _chunked_rule(dtype, with_counts).yes.evaluate(
            sizes):
        return False
    if with_counts:
        return True
    if dtype == "float16":
        return nodes * features >= plan.SORT_SPARSE_MIN_TABLE
    return plan.node_ranges_for(nodes, edges, 4 * features, L2_BYTES) > 1


def choose_chain(facts: BuildFacts, with_counts: bool) -> Chain:
    """With counts and rows of one feature (F and N build-time constants) where E_max lies from N to
    PAIRED_MAX_EDGES: the pairs (BENCHMARKS.md kernel table, F = 1 with counts: pairs against unpaired), except
    float32 where the state chain's shared-memory kernel runs at E_max <= STATE_OVER_PAIRS_MAX_EDGES, and float16
    from N / PAIRS_MAX_NODES_PER_EDGE edges (the constants' comment); beyond,
    up to PAIR_MAX_CHUNKS chunks of pairs where each has an edge per node and the scatter would not take shared
    memory at E_max (plan.py Pairs' chunks; the same cells, N = 1e6, E = 1e8). Else float32: the state chain.
    float16 with counts: the table. float16 without counts, rows of one feature: at most BLOCK_TABLE_MAX_EDGES
    edges in the profile, one block (BENCHMARKS.md "Small updates re-timed against the windows": block_table
    3.9-4.2 us against grid_table's 6.0-6.4); split_table where its table is hashed at every E of the profile
    (N > 4 E_max) or at most GRID_TABLE_MAX_EDGES edges (the per-step tables, float16 B = 1e6, N >= 1e7, and the
    small-update rows); else the pairs where they would run with counts (their counts a scratch tensor: the
    kernel table's float16 F = 1 cells, pairs with counts against the table without), else the table."""
    edges, nodes, features = _known(facts, "E"), facts.constants.get("N"), facts.constants.get("F")
    float32 = facts.dtypes["state"] == "float32"
    pairs = False
    if features == 1 and edges is not None and nodes is not None:
        chunks = plan.pair_chunks(edges)
        pairs = chunks == 1 and nodes * plan.PAIRED_MIN_EDGES_PER_NODE <= edges
        if with_counts:
            shared = _shared_rule(facts.dtypes["state"], True).yes.evaluate({"N": nodes, "E": edges, "F": 1})
            counted_pairs = (pairs and not (shared and edges <= STATE_OVER_PAIRS_MAX_EDGES) if float32
                             else chunks == 1 and nodes <= PAIRS_MAX_NODES_PER_EDGE * edges)
            if counted_pairs:
                return pairs_chain()
            if (1 < chunks <= PAIR_MAX_CHUNKS and nodes * chunks * plan.PAIRED_MIN_EDGES_PER_NODE <= edges
                    and not shared):
                return pair_chunks_chain(chunks)
    if edges is not None and nodes is not None and features is not None and _sorts(facts, with_counts):
        return sorted_chain(with_counts, sort_place_passes(edges, nodes), features > SORT_NARROW_MAX_FEATURES)
    if float32:
        return state_chain(with_counts)
    if with_counts or features != 1:
        return table_chain(with_counts)
    if edges is not None and edges <= plan.BLOCK_TABLE_MAX_EDGES:
        return block_chain()
    if edges is not None and (edges <= plan.GRID_TABLE_MAX_EDGES
                              or (nodes is not None and nodes > TABLE_SLOTS_PER_EDGE * edges)):
        return split_chain()
    return pairs_chain() if pairs else table_chain(with_counts)


def reference(state: Any, src: Any, index: Any, with_counts: bool = False) -> tuple[Any, ...]:
    """float64 numpy: the state with every in-range edge's row added (out-of-range indices skipped), and the
    in-degrees [N, 1] int64 with counts."""
    state = np.asarray(state)
    index = np.asarray(index, dtype=np.int64)
    keep = _in_range(index, state.shape[0])
    state = scatter_add_rows(np.asarray(src)[keep], None, index[keep], state.shape[0], start=state)
    if not with_counts:
        return (state,)
    return state, _in_degrees(index, state.shape[0])


# --- the steps' references (Step.reference) --------------------------------------------------------------------
# Each maps the step's inputs (in step.inputs order) to its outputs (in step.outputs order, each in its tensor's
# dtype) and reads nothing else. The scratch tensors' layouts are the references' own, one helper pair per layout:
# where the step that sums reads the state (the table, the slots, the sorted chain's reduce) it stores each touched
# node's new row, summed in float64 and rounded once, so that the chain gives op.reference exactly; the pairs keep
# the kernels' (value, count) float32 pairs (their scatter does not read the state): one more rounding of each
# sum, in float32. Counts are exact everywhere.


def _in_range(index: Any, num_nodes: int) -> Any:
    """The edges whose index lies in [0, num_nodes): every kernel and reference skips the others."""
    index = np.asarray(index)
    return (index >= 0) & (index < num_nodes)


def _in_degrees(index: Any, num_nodes: int) -> Any:
    """int64 [N, 1]: the in-range edges into each node."""
    index = np.asarray(index, dtype=np.int64)
    return np.bincount(index[_in_range(index, num_nodes)], minlength=num_nodes).astype(np.int64).reshape(-1, 1)


def _touched(index: Any, num_nodes: int) -> Any:
    """The nodes in-range edges point to, ascending, once each."""
    index = np.asarray(index, dtype=np.int64)
    return np.unique(index[_in_range(index, num_nodes)])


def _new_rows(state: Any, src: Any, index: Any) -> Any:
    """The state after every in-range edge: op.reference's float64 sums rounded once to the state's dtype."""
    return reference(state, src, index)[0].astype(np.asarray(state).dtype)


def _added_degrees(counts: tuple[Any, ...], index: Any) -> tuple[Any, ...]:
    """(counts + the in-degrees,) of a step that adds into the counts, or () where it has none."""
    return tuple(np.asarray(c, dtype=np.int64) + _in_degrees(index, np.shape(c)[0]) for c in counts)


def _to_table(keys: Any, values: Any, rows: Any, index: Any) -> tuple[Any, Any]:
    """The float16 table's layout here: where it has a slot per node (C = N, no keys) row n in slot n, else the rows
    of the touched nodes in the first slots, their nodes as keys. Rows are the state's dtype, exact in float32."""
    keys, values = np.array(keys, dtype=np.int32), np.array(values, dtype=np.float32)
    if keys.size == 0 and values.shape[0] == rows.shape[0]:
        values[:] = rows
    else:
        nodes = _touched(index, rows.shape[0])
        keys[:nodes.size], values[:nodes.size] = nodes, rows[nodes]
    return keys, values


def _from_table(state: Any, keys: Any, values: Any) -> Any:
    """The state with the rows of _to_table's layout written into it."""
    state = np.array(state)
    keys = np.asarray(keys, dtype=np.int64)
    if keys.size == 0 and np.shape(values)[0] == state.shape[0]:
        state[:] = values
    else:
        used = _in_range(keys, state.shape[0])
        state[keys[used]] = np.asarray(values)[used]
    return state


def _into_table(state: Any, src: Any, index: Any, keys: Any, values: Any, *counts: Any) -> tuple[Any, ...]:
    """add_into_table[_counts]: the new rows into the table, the in-degrees into the counts."""
    return (*_to_table(keys, values, _new_rows(state, src, index), index), *_added_degrees(counts, index))


def _round_table(state: Any, index: Any, keys: Any, values: Any) -> tuple[Any, ...]:
    """round_table: the table's rows into the state."""
    return (_from_table(state, keys, values),)


def _into_slots(state: Any, src: Any, index: Any, slots: Any) -> tuple[Any, ...]:
    """add_into_slots (rows of one feature): a slot per touched node, (node << 32) | its new value's float32 bits;
    -1 empty."""
    rows = _new_rows(state, src, index)
    assert rows.shape[1] == 1, "the slots hold rows of one feature"
    nodes = _touched(index, rows.shape[0])
    slots = np.array(slots, dtype=np.int64)
    slots[:nodes.size] = (nodes << 32) | rows[nodes, 0].astype(np.float32).view(np.uint32).astype(np.int64)
    return (slots,)


def _round_slots(state: Any, index: Any, slots: Any) -> tuple[Any, ...]:
    """round_slots: each used slot's value into its node."""
    state = np.array(state)
    used = np.asarray(slots, dtype=np.int64)
    used = used[used >= 0]
    state[used >> 32, 0] = (used & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return (state,)


def _add_pairs(pairs: Any, src: Any, index: Any) -> Any:
    """(value, count) float32 pairs [N, 2] (the kernels' layout) with the in-range edges' rows of one feature
    added: each value summed in float64 from its old value and rounded once to float32, each count exact (up to
    2^24, the most edges a chunk has)."""
    pairs = np.array(pairs, dtype=np.float32)
    index = np.asarray(index, dtype=np.int64)
    keep = _in_range(index, pairs.shape[0])
    pairs[:, 0] = scatter_add_rows(np.asarray(src)[keep], None, index[keep], pairs.shape[0], start=pairs[:, :1])[:, 0]
    pairs[:, 1] += _in_degrees(index, pairs.shape[0])[:, 0]
    return pairs


def _pairs_in(counts: Any) -> Any:
    """The pairs in the int64 counts' bytes [N, 1] (value in the low word, as the kernels write them)."""
    return np.ascontiguousarray(counts, dtype=np.int64).view(np.float32).reshape(-1, 2)


def _fold(state: Any, pairs: Any, counted: Any) -> Any:
    """The state with each counted node's value added (float64, rounded once to the state's dtype); the other
    nodes keep their value bit for bit."""
    state = np.array(state)
    state[counted, 0] = state[counted, 0].astype(np.float64) + np.asarray(pairs)[counted, 0]
    return state


def _into_pairs(src: Any, index: Any, counts: Any) -> tuple[Any, ...]:
    """add_pairs: the pairs summed in the counts' bytes."""
    return (_add_pairs(_pairs_in(counts), src, index).view(np.int64).reshape(-1, 1),)


def _fold_pairs(state: Any, counts: Any) -> tuple[Any, ...]:
    """fold_pairs: each node's value into the state, its count made the int64 count."""
    pairs = _pairs_in(counts)
    return _fold(state, pairs, pairs[:, 1] != 0), pairs[:, 1:].astype(np.int64)


def _into_pair_chunk(src: Any, index: Any, pairs: Any, *, first: int) -> tuple[Any, ...]:
    """add_pair_chunk_k: the pairs of the edges [first, first + PAIRED_MAX_EDGES) added."""
    edges = slice(first, first + plan.PAIRED_MAX_EDGES)
    return (_add_pairs(pairs, np.asarray(src)[edges], np.asarray(index)[edges]),)


def _fold_pair_chunk(state: Any, index: Any, pairs: Any, counts: Any, *, first: int) -> tuple[Any, ...]:
    """fold_pair_chunk_k: the chunk's counts into the int64 counts; the last chunk that holds edges adds the
    values into the state, the others zero the pairs' counts. A chunk beyond E does nothing."""
    edges = np.shape(index)[0]
    pairs, counts = np.array(pairs, dtype=np.float32), np.array(counts, dtype=np.int64)
    if first > 0 and first >= edges:
        return np.array(state), pairs, counts
    counts += pairs[:, 1:].astype(np.int64)
    if edges - first <= plan.PAIRED_MAX_EDGES:
        return _fold(state, pairs, counts[:, 0] != 0), pairs, counts
    pairs[:, 1] = 0
    return np.array(state), pairs, counts


@functools.cache
def _pair_chunk_references(first: int) -> tuple[Callable[..., tuple[Any, ...]], Callable[..., tuple[Any, ...]]]:
    """(add, fold) references of the chunk that starts at edge `first`: the same objects for every chain that holds
    its steps (_step compares them)."""
    return functools.partial(_into_pair_chunk, first=first), functools.partial(_fold_pair_chunk, first=first)


# The sorted chain's layout here: counts the in-degrees; no tiles (tile_sums passed through); cursor[N] the edges
# placed and, after the cursors, cursor[n] the end of node n's range of `sorted`, each placing pass counting its
# nodes' cursors down to their ranges' starts; sorted[p] = (edge, node), each node's edges in edge order (the order
# op.reference adds them in); the reduce writes the whole sum, head and tail pass through, the fixup nothing more.
def _sort_count(state: Any, index: Any, counts: Any) -> tuple[Any, ...]:
    """The in-degrees added into counts, and the scratch tensors sort_count creates (SORT_UNFILLED: zeros of their
    shapes here; the kernels' later steps write what they read)."""
    sizes = {"N": np.shape(state)[0], "E": np.shape(index)[0], "F": np.shape(state)[1]}
    created = (np.zeros(tuple(int(dim.evaluate(sizes)) for dim in scratch.shape), np.dtype(scratch.dtype))
               for scratch in SORT_UNFILLED)
    return (*_added_degrees((counts,), index), *created)


def _sort_tile_sums(counts: Any, tile_sums: Any) -> tuple[Any, ...]:
    return (np.array(tile_sums),)


def _sort_scan_tiles(counts: Any, tile_sums: Any, cursor: Any) -> tuple[Any, ...]:
    cursor = np.array(cursor, dtype=np.int32)
    cursor[-1] = np.sum(counts)
    return np.array(tile_sums), cursor


def _sort_cursors(counts: Any, tile_sums: Any, cursor: Any) -> tuple[Any, ...]:
    cursor = np.array(cursor, dtype=np.int32)
    cursor[:-1] = np.cumsum(np.asarray(counts).reshape(-1))
    return (cursor,)


def _sort_place(index: Any, counts: Any, cursor: Any, sorted_pairs: Any, *, part: int, parts: int
                ) -> tuple[Any, ...]:
    """sort_place (pass `part` of `parts`): the edges into the nodes [N part / parts, N (part + 1) / parts)."""
    num_nodes = np.shape(counts)[0]
    index = np.asarray(index, dtype=np.int64)
    cursor, sorted_pairs = np.array(cursor, dtype=np.int32), np.array(sorted_pairs, dtype=np.int32)
    edges = np.flatnonzero((index >= num_nodes * part // parts) & (index < num_nodes * (part + 1) // parts))
    edges = edges[np.argsort(index[edges], kind="stable")]
    nodes = index[edges]
    cursor[:-1] -= np.bincount(nodes, minlength=num_nodes).astype(np.int32)
    rank = np.arange(nodes.size) - np.searchsorted(nodes, nodes)
    sorted_pairs[cursor[nodes] + rank] = np.stack([edges, nodes], axis=1)
    return cursor, sorted_pairs


@functools.cache
def _place_reference(part: int, parts: int) -> Callable[..., tuple[Any, ...]]:
    """The reference of placing pass `part` of `parts` (one object per pass, _step compares them)."""
    return functools.partial(_sort_place, part=part, parts=parts)


def _sort_reduce(src: Any, sorted_pairs: Any, cursor: Any, state: Any, head: Any, tail: Any) -> tuple[Any, ...]:
    """sort_reduce[_wide]: every placed edge's row onto its node (float64 from the state, in edge order per node,
    rounded once)."""
    state = np.asarray(state)
    placed = np.asarray(sorted_pairs, dtype=np.int64)[:int(np.asarray(cursor)[-1])]
    rows = scatter_add_rows(np.asarray(src), placed[:, 0], placed[:, 1], state.shape[0], start=state)
    return rows.astype(state.dtype), np.array(head), np.array(tail)


def _sort_fixup(sorted_pairs: Any, cursor: Any, state: Any, head: Any, tail: Any) -> tuple[Any, ...]:
    return (np.array(state),)


def scatter_add_op(with_counts: bool) -> InplaceOp:
    """scatter_add_ (and with counts scatter_add_counts_): every chain an engine may hold, choose_chain."""
    chains: tuple[Chain, ...] = (state_chain(with_counts), table_chain(with_counts))
    chains += ((pairs_chain(), *(pair_chunks_chain(k) for k in range(2, PAIR_MAX_CHUNKS + 1))) if with_counts
               else (split_chain(), block_chain(), pairs_chain()))
    chains += tuple(sorted_chain(with_counts, passes, wide) for wide in (False, True)
                    for passes in range(1, plan.SORT_MAX_PLACE_PASSES + 1))
    returns = (TensorOutput("counts", "int64", (N, expr(1))),) if with_counts else ()
    return InplaceOp(
        namespace=NAMESPACE, name="scatter_add_counts_" if with_counts else "scatter_add_",
        inputs=(TensorInput("state", ("float32", "float16"), 2), TensorInput("src", ("float32", "float16"), 2),
                TensorInput("index", ("int64",), 1)),
        mutates=("state",), sizes={"N": ("state", 0), "F": ("state", 1), "E": ("index", 0)}, chains=chains,
        returns=returns, reference=lambda state, src, index: reference(state, src, index, with_counts),
        choose=lambda facts: choose_chain(facts, with_counts))


SCATTER_ADD = scatter_add_op(False)
SCATTER_ADD_COUNTS = scatter_add_op(True)


def scatter_add_for(with_counts: bool) -> InplaceOp:
    """The op a scatter-add's AOT chain comes from: SCATTER_ADD_COUNTS where counts are wanted, else SCATTER_ADD."""
    return SCATTER_ADD_COUNTS if with_counts else SCATTER_ADD
