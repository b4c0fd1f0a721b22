"""How one scatter-add launch is laid out: kernel, vector width, grid, workspace table. Plain Python, no CUDA.

The launcher (launch.py) asks `plan_launch` and then only issues the driver calls, so every choice below is
testable without a GPU. Summary of the choices (BENCHMARKS.md has the measurements behind them):

- float32 adds straight into the state: no workspace (except the paired and sorted paths' below).
  * "shared": few nodes and many edges (heavy contention): each block sums its edges into shared memory,
    float32 sums plus 32-bit counts for all nodes, then adds each touched node once into the state. (Forced
    with algorithm="shared", rows too wide for shared memory are cut into feature slices, one per block row
    of the grid; "auto" never does that: measured slower than global atomics.)
  * "global": otherwise, atomics straight into the state (float4/float2 vector atomics on sm_90+). When the
    state is much larger than L2 and rows are re-used (E >= 4 N) with wide rows, the edges are streamed once
    per node range ("node passes") so that each range's rows stay in L2.
  * With counts (or the skipped word), one global launch and at most ZEROING_MAX_EDGES edges, the scatter
    kernel zeroes them itself before a grid-wide barrier (scatter_global_zeroing_v*, launched cooperatively:
    all blocks resident) where the kernels were compiled with cooperative groups (CCCL headers present):
    one driver call instead of a memset and a launch, which is what a small update's execution costs on the
    host; for larger launches the device time decides, and there the memset is faster.
- float16 accumulates in float32 in a workspace table, one entry per touched node, then adds each entry into
  the half state once (apply_table). The table has min(N, 2^ceil(log2(2 min(N, E)))) entries: one slot per
  node when that is no larger (direct), else a hash table keyed by node whose capacity follows E. Clearing
  and applying it costs O(min(N, E) F), never O(N F) for a small update of a large state. One slot per
  node needs no keys: apply_table skips entries that are still +0.0.
- Paired path (F = 1 with counts requested, on sm_90+, N <= E <= PAIRED_MAX_EDGES = 2^24): node n's float32
  (value, count) pair is summed in the 8 bytes of counts[n] itself (int64, zeroed by the launcher anyway;
  8-byte aligned, else no pairs), with one 8-byte vector atomic per edge instead of a value atomic and a
  count atomic (the L2's atomic rate bounds F = 1; measured 1.7x faster at N = 1e6, E = 1e7); then
  fold_pairs turns each pair into the int64 count and adds the value into the state (one rounding, float16
  too). No workspace. float32 counts are exact up to 2^24, so with E > 2^24 the pairs live in the workspace
  instead (8 N bytes, only with counts, whose zeroing is O(N) anyway) and the edges go in chunks of at most
  2^24: after each chunk fold_pair_chunk adds the pairs' counts into the int64 counts and zeroes them, and
  after the last it adds the values, summed in float32 over all chunks, into the state once. Each fold is
  O(N), so pairs need E >= N per chunk (with E < N the fold costs more than the atomics it saves). Paired global atomics also beat the shared kernel where its per-block arrays are large
  (N >= PAIRS_OVER_SHARED_MIN_NODES) and nodes get fewer than SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE edges
  (measured, 100 edges per node: N = 1e4 pairs 0.028 against shared 0.035 ms, N = 1e3 shared 0.011 against
  pairs 0.014; 1000 per node, N = 1e3: shared 0.021 against pairs 0.105). The shared kernel itself gains
  nothing from pairs (its flush is not what bounds it), so "auto" pairs only global atomics.
- Sorted path (counts requested, rows of at least SORT_MIN_FEATURES features, enough edges: sorting_pays):
  wide rows make atomics the bound (every edge costs F / VEC vector atomics, and the L2 executes about 1e11
  per second), so the edges are counting-sorted by target node in the workspace (8 E bytes plus O(N)
  cursors, allowed where counts make the launch O(N) anyway) and each warp sums a range of sorted rows in
  registers and writes every node it owns once: no atomic on the state, each touched row read and written
  once. Nodes that straddle warp ranges are summed from per-range partial sums by sort_fixup (float16: one
  rounding, as with the table).
- Chunked path (few nodes, many edges, wide rows; counts optional): each block counting-sorts CHUNK_EDGES
  edges at a time by target node in shared memory and adds each node's sum of the chunk with one vector
  atomic per lane per warp, into the float32 state or the float16 path's table: about N * 8 atomics per
  chunk instead of one per edge, no global sort and no workspace beyond the table.
- Without counts (a small update of a large state; scatter_add.cu "Launches without counts"):
  * float32 "direct": a thread per (edge, VEC chunk), a warp's equal targets summed before one vector atomic:
    one load round trip, then the atomic. Rows of many edges per node (SHARED_OVER_DIRECT_MIN_EDGES_PER_NODE)
    keep the shared kernel, states far larger than L2 with wide reused rows the node passes.
  * float16, F = 1, at most BLOCK_TABLE_MAX_EDGES edges: "block_table", one block that sums the batch in a
    shared hash table and rounds each node once; one launch, no workspace (NOTES.md "Issue 26, fifth session").
  * float16, F = 1, up to GRID_TABLE_MAX_EDGES edges, where the kernels have cooperative groups: "grid_table",
    one cooperative launch and no memset. The grid clears the table in the workspace, meets at a grid-wide
    barrier, inserts a thread per edge (a node's first edge claims its 64-bit (node, float32 sum) slot with one
    compare-and-swap; the claiming thread loads the node's state), meets again, and each claiming thread
    rounds its node's sum into the state once (E = 1e4: 6.5-7.6 us against 9.6-15.7 before; NOTES.md).
  * float16, F = 1, otherwise where the table would be a hash table (N > 2^ceil(log2(2 E))): "split_table", the
    same 64-bit slots in three operations, up to 2^29 edges: a memset clears split_table_capacity(E) slots (4 per
    edge up to 2^21 slots, then 2), scatter_split_table claims or adds a thread per edge, apply_split_table
    scans the slots and rounds each node once (E = 1e5, N = 1e7 / 1e8: 14.2 / 17.9 us against partitioned's
    43.4 / 47.3; E = 1e6: 68.8 / 104.3 against 101.0 / 131.5; NOTES.md "Issue 26, third session"). It needs
    its workspace, 8-byte aligned; without it "owned" up to OWNED_MAX_EDGES edges (block b of G owns the nodes
    that hash to b, reads all E targets and sums its nodes in shared memory: one launch, no workspace,
    issue-bound) and "partitioned" beyond (F = 1, up to PARTITION_MAX_EDGES edges: chunks of edges summed per
    node in shared memory, written grouped by owner bucket, then a block per bucket sums and rounds them;
    workspace O(E F)). "clustered" (sm_90+, forced, or "auto" with AUTO_CLUSTERED) is owned with one read of
    the targets per cluster through distributed shared memory. Where the table has one slot per node it is
    faster than all of these (E = 1e4, N <= 1e4: 10 us against 16; E = 1e6, N = 1e6: 27 against split_table's
    64 and partitioned's 98).
  The float16 table path stays for the rest (one slot per node, wide rows, counts).
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from plugin.kernels.compile import kernel_dtype

THREADS_PER_BLOCK = 256  # the kernels' __launch_bounds__ (scatter_add.cu)
ROWS_PER_LANE = 4  # rows each lane loads before its atomics (scatter_add.cu)
RESIDENT_BLOCKS_PER_SM = 3  # __launch_bounds__(256, 3) in scatter_add.cu: 3 blocks share an SM
QUEUE_BYTES_PER_BLOCK = 8 * 3 * 4 * 256  # static shared memory of the scatter kernels (RowQueue per warp)
MAX_EDGES = 2**32 - 1  # counts are added to the low 32-bit word of each int64 count
MAX_NODES = 2**31 - 1  # node ids are 32-bit in the kernels and the table
TABLE_ALIGNMENT = 256
PAIR_BYTES = 8  # one (value, count) float32 pair per node, in its int64 count, on the paired path
PAIRED_MAX_EDGES = 2**24  # float32 counts are exact up to 2^24: pairs in the counts only up to 2^24 edges,
# beyond that pairs in the workspace, folded after every chunk of PAIRED_MAX_EDGES edges
PAIRED_MIN_EDGES_PER_NODE = 1  # "auto" pairs only when E >= N per chunk (each fold is O(N))
# Where pairs pay, "auto" takes them over shared memory for N >= PAIRS_OVER_SHARED_MIN_NODES unless nodes get
# at least SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE edges (each bracketed by measurements: module docstring).
PAIRS_OVER_SHARED_MIN_NODES = 4096
SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE = 256
# without counts only (uncounted_plan)
UNCOUNTED_ALGORITHMS = ("direct", "block_table", "grid_table", "split_table", "owned", "clustered", "partitioned")
ALGORITHMS = ("auto", "global", "shared", "sorted", "chunked", *UNCOUNTED_ALGORITHMS)
# The scatter kernel zeroes the counts itself (one driver call instead of two: ~4.5 us of host time) only for
# small launches: measured on the H200, the cooperative kernel takes as long on the device as memset + kernel
# at 1e4 edges, but 5 us longer at 1e5 edges (N = 1e6, F = 1) and 10-26 us longer at F = 64, 1e5-1e6 edges.
ZEROING_MAX_EDGES = 2**15

# Sorted path (module docstring): "auto" takes it for rows of at least SORT_MIN_FEATURES features and enough
# edges (sorting_pays). Positions are 32-bit (SORT_MAX_EDGES); warp ranges are sized so that about
# SORT_TARGET_RANGES warps share the edges (31 on each of 132 SMs: sort_reduce uses 64 registers, so 32 warps are resident per SM) and are at least 32 positions long;
# few nodes (at most SORT_PRIVATE_MAX_NODES: 48 KiB of 32-bit tallies) with many edges each (at least
# SORT_PRIVATE_MIN_EDGES_PER_NODE) are counted and placed in shared memory by SORT_PRIVATE_BLOCKS_PER_SM blocks
# per SM, so that each block's edges revisit its tallies and its flushes cost fewer atomics than the edges
# (measured, F = 64, sort_count + sort_place: N = 1e4, E = 1e6 13.6 + 33.0 us against 21.4 + 38.7 with
# global tallies; N = 1e3, E = 1e6 8.7 + 23.2 against 14.8 + 31.8 with as many blocks as are resident; with
# resident blocks at N = 1e4 each block's ~1500 edges touched ~1400 of its tallies).
SORT_MIN_FEATURES = 32
SORT_MIN_EDGES = 2**19
SORT_MIN_EDGES_HALF = 2**16
SORT_MAX_EDGES = 2**31 - 1
SORT_TARGET_RANGES = 4096
SORT_MAX_TILES = 1024  # scatter_add.cu SORT_MAX_TILES: one block scans the tiles' sums
SORT_TILE_NODES = 2048  # nodes per scan tile, until there would be more than SORT_MAX_TILES tiles
# Up to this many nodes one block scans them all: one launch instead of three (measured with each warp scanning
# an eighth of the nodes, coalesced: N = 1e4 8.2 us against 11.4 us in three; N = 1e3 4.4 us).
SORT_ONE_TILE_NODES = 16384
SORT_PRIVATE_MAX_NODES = 12288
SORT_PRIVATE_MIN_EDGES_PER_NODE = 64  # tallies in shared memory pay when a block's edges revisit its nodes
SORT_PRIVATE_BLOCKS_PER_SM = 1  # blocks of sort_count / sort_place per SM with tallies (0: as many as are resident)
SORT_EDGES_PER_THREAD = 4  # scatter_add.cu: edges a thread of sort_count / sort_place reads per step
# Without tallies in shared memory, sort_place runs once per node range, so that the (edge, node) pairs one
# launch writes (8 bytes per edge of the range) fit in half of L2, at most SORT_MAX_PLACE_PASSES launches (each
# reads the whole index again). Measured, F = 64: N = 1e6, E = 1e7: 3 x 0.134 ms against 0.537 ms in one;
# E = 1e8: 4 x 1.17 ms, 8 x 0.61 and 2 x 2.64 (whole launch 12.7, 12.9 and 13.3 ms), 5.9 ms in one; with tallies
# (N = 1e3) no gain at E = 1e7 (3 x 0.13 against 0.43 ms) and a loss at E = 1e8 (whole launch 12.4 ms with 8 x
# 0.71 ms of placing, 11.3 ms with one placing launch; NOTES.md "Version 6").
SORT_MAX_PLACE_PASSES = 4

# Chunked path (module docstring): "auto" takes it for rows of at least SORT_MIN_FEATURES features, at most
# CHUNK_MAX_NODES nodes and at least CHUNK_MIN_EDGES edges (with or without counts); each block sorts
# CHUNK_EDGES edges at a time (uint16 offsets in shared memory: at most 65536).
CHUNK_MAX_NODES = 2048
CHUNK_MIN_EDGES = 2**22
CHUNK_EDGES = 32768

# "auto" uses the shared-memory kernel when whole rows of all nodes fit in a block's shared memory and each
# node gets at least this many edges on average (measured: BENCHMARKS.md).
SHARED_MIN_EDGES_PER_NODE = 16

# Launches without counts (module docstring). direct: grids of at most DIRECT_BLOCKS_PER_SM blocks per SM (a
# grid-stride loop beyond); the shared kernel instead from SHARED_OVER_DIRECT_MIN_EDGES_PER_NODE edges per node.
DIRECT_BLOCKS_PER_SM = 32
SHARED_OVER_DIRECT_MIN_EDGES_PER_NODE = 256
OWNED_THREADS = 1024  # scatter_add.cu OWNED_THREADS: blocks of scatter_owned, partition_chunks, reduce_buckets
# owned: up to OWNED_MAX_EDGES edges of rows of at most OWNED_MAX_FEATURES features; a block per
# OWNED_EDGES_PER_BLOCK edges, at most one per SM (each block reads all E targets; measured at E = 1e4,
# N = 1e5-1e8: 64 edges per block 16.6-16.9 us, 128: 18.7-20.2, 256: 20.1-20.8).
OWNED_MAX_EDGES = 2**15
OWNED_EDGES_PER_BLOCK = 64
OWNED_MAX_FEATURES = 4
OWNED_MIN_CAPACITY = 64
OWNED_MAX_PROBES = 128  # slots an insertion into an owned table probes before its pass is retried
# clustered (sm_90+): owned blocks in clusters of CLUSTER_BLOCKS that share one read of the targets through
# distributed shared memory; CLUSTER_GRID_BLOCKS blocks of CLUSTER_THREADS (scatter_add.cu's constants).
CLUSTER_MIN_ARCH = 90
# "auto" takes the clustered kernel over owned only when this is on: in one H200 run (2026-12-01 16:11 UTC,
# benchmarks/probe_float16_small.py --kernels, B = 1e4, F = 1, N = 1e5 to 1e8) the shipped clustered kernel took
# 16.7-16.9 us per step and owned 15.4-15.7 us. algorithm="clustered" still forces it.
AUTO_CLUSTERED = False
# float16 with the one-slot table: the direct kernel into the table (a thread per element; memset, direct,
# apply_table) instead of the windowed scatter_global (10 blocks at 1e4 edges: 6.3 us in Nsight Compute). Built
# and tested on the CPU (recorded driver calls); not yet measured or tested on a GPU (NOTES.md "Issue 26"),
# so "auto" does not take it until a run does: algorithm="direct" forces it.
HALF_DIRECT_INTO_TABLE = False
# grid_table (float16, F = 1, kernels with cooperative groups): a cooperative launch of a thread per edge in
# blocks of GRID_TABLE_THREADS, "auto" up to GRID_TABLE_MAX_EDGES edges where the grid fits
# GRID_TABLE_RESIDENT_BLOCKS_PER_SM blocks per SM (a launch the driver refuses as too large falls back:
# launch.py). Its table (grid_table_layout): one slot per node up to GRID_TABLE_SLOTS_PER_EDGE x E rounded up
# to a power of two, else that many hashed slots: a thread's first compare-and-swap rarely collides, and the
# longest probe decides when the barrier opens (measured, NOTES.md "Issue 26, second session").
GRID_TABLE_THREADS = 128
GRID_TABLE_MAX_EDGES = 2**15
GRID_TABLE_RESIDENT_BLOCKS_PER_SM = 8
GRID_TABLE_SLOTS_PER_EDGE = 16
# split_table (float16, F = 1, no counts, any E): the grid_table's slots in three operations (a memset, a thread
# per edge, a scan of the table). SPLIT_TABLE_SLOTS_PER_EDGE x E slots rounded up to a power of two while that
# is at most SPLIT_TABLE_MAX_SPARSE_SLOTS, else 2 x E rounded up (measured, NOTES.md "Issue 26, third session":
# 4 per edge 9.4-16.0 us against 2 per edge's 10.8-21.2 at E = 1e4 to 2^16; at E = 1e6, N = 1e6 to 1e8, 2 per edge 64-106 against
# 4 per edge's 70-105). The scan runs at most SPLIT_TABLE_APPLY_BLOCKS_PER_SM blocks per SM.
SPLIT_TABLE_SLOTS_PER_EDGE = 4
SPLIT_TABLE_MAX_SPARSE_SLOTS = 2**21
SPLIT_TABLE_APPLY_BLOCKS_PER_SM = 32
SPLIT_TABLE_MAX_EDGES = 2**29  # 2^30 slots: the kernels take the capacity as an int
# block_table (float16, F = 1, no counts): one block of BLOCK_TABLE_THREADS sums a batch of at most
# BLOCK_TABLE_MAX_EDGES edges in a shared table of BLOCK_TABLE_SLOTS_PER_EDGE x E slots rounded up to a power of
# two (at least 2^BLOCK_TABLE_MIN_LOG2), 8 bytes each (H200, NOTES.md "Issue 26, fifth session": 4.1-4.4 us at
# 100 edges against owned's 5.8-6.1, 5.2-6.6 at 1000-1024 edges against the 6.0-7.4 of the paths "auto" took
# before, torch 3.9-4.1; the fourth session measured one block slower than them from 2048 edges).
BLOCK_TABLE_THREADS = 1024
BLOCK_TABLE_MAX_EDGES = 1024
BLOCK_TABLE_SLOTS_PER_EDGE = 4
BLOCK_TABLE_MIN_LOG2 = 6
CLUSTER_BLOCKS = 8
CLUSTER_THREADS = 1024
CLUSTER_GRID_BLOCKS = 128
CLUSTER_MAX_SHARED = 48 * 1024 - 1024  # bytes of a table (the static shared memory beside it: under 1 KiB)
# partitioned: chunks of PARTITION_CHUNK_EDGES edges, buckets of about PARTITION_BUCKET_EDGES entries, "auto" up to
# PARTITION_MAX_EDGES edges (the chunks' bucket offsets grow with E^2 / (chunk * bucket)) of rows of at most
# PARTITION_MAX_FEATURES features.
PARTITION_CHUNK_EDGES = 4096
PARTITION_BUCKET_EDGES = 2048
PARTITION_MAX_EDGES = 2**22
PARTITION_MAX_FEATURES = 1


@dataclass(frozen=True)
class DeviceInfo:
    """What the plan needs to know about the GPU (read once per context by the launcher)."""

    arch: int  # compute capability, major * 10 + minor
    sm_count: int
    max_shared_per_block: int  # bytes of dynamic shared memory a block may opt in to
    shared_per_sm: int
    l2_bytes: int


@dataclass(frozen=True)
class TableLayout:
    """The float16 path's float32 table in the workspace: int32 keys (node per slot, -1 empty; used only when
    hashed), then capacity x num_features float32 values."""

    capacity: int
    hashed: bool  # False: slot = node (capacity = num_nodes); True: capacity = 2**table_log2 hash slots
    table_log2: int
    values_offset: int  # bytes from the workspace start; keys start at 0
    nbytes: int


@dataclass(frozen=True)
class KernelLaunch:
    name: str
    grid: tuple[int, int]
    shared_bytes: int = 0
    block: int = THREADS_PER_BLOCK


@dataclass(frozen=True)
class GridTable:
    """The grid_table path's table: `capacity` 64-bit (node, float32 sum) slots at the workspace's start;
    hashed False: slot = node (capacity = N)."""

    capacity: int
    hashed: bool


@dataclass(frozen=True)
class SplitTable:
    """The split_table path's table: `capacity` hashed 64-bit (node, float32 sum) slots at the workspace's
    start, cleared by a memset; then scatter (a thread per edge) and apply (a scan of the slots)."""

    capacity: int
    apply: KernelLaunch


@dataclass(frozen=True)
class OwnedTable:
    """An owned block's shared table (scatter_add.cu owned_passes): `capacity` slots; an insertion probes at most
    `probes` of them (beyond, the block retries on a smaller sub-range of its nodes)."""

    capacity: int
    probes: int


@dataclass(frozen=True)
class PartitionLayout:
    """The partitioned path's workspace: entry nodes (int32 [E]) at 0, entry sums (float32 [E, F]) at
    sums_offset, the chunks' bucket offsets (uint32 [chunks, buckets + 1]) at offsets_offset; and its tables."""

    chunk_edges: int
    chunks: int
    buckets: int
    chunk_capacity: int  # partition_chunks' table: at least chunk_edges slots, so never full
    bucket: OwnedTable  # reduce_buckets' table
    sums_offset: int
    offsets_offset: int
    nbytes: int


@dataclass(frozen=True)
class SortLayout:
    """The sorted path's workspace: cursors (uint32 [N + 1]), the scan tiles' sums (uint32 [SORT_MAX_TILES]),
    the sorted (edge, node) pairs (int32 x 2 [E]), then head and tail partial sums (float32 [ranges x F] each,
    room for the most ranges any launch of at most these sizes uses). Offsets in bytes from the workspace."""

    span: int  # sorted positions per warp range
    ranges: int  # warp ranges of this launch (ceil(E / span))
    tile_nodes: int
    tiles: int
    tile_sums_offset: int
    sorted_offset: int
    head_offset: int
    tail_offset: int
    nbytes: int


@dataclass(frozen=True)
class SortPlan:
    """The kernels of the sorted path after the counts' memset (scatter_add.cu, "Sorted path")."""

    layout: SortLayout
    count: KernelLaunch  # sort_count and sort_place (same grid and shared memory)
    private_nodes: int  # > 0: tallies in shared memory (N of them)
    place_ranges: tuple[tuple[int, int], ...]  # one sort_place launch per range of nodes
    reduce: KernelLaunch
    fixup: KernelLaunch | None  # None when one warp range holds every edge


@dataclass(frozen=True)
class LaunchPlan:
    algorithm: str  # "global", "shared", "hashed" (float16 with a hash table), "sorted" or "chunked"
    vec: int
    lanes_log2: int
    scatter: KernelLaunch
    slice_width: int  # "shared": features per block; else num_features
    node_ranges: tuple[tuple[int, int], ...]  # one scatter launch per range of target nodes
    table: TableLayout | None  # float16 without pairs only
    apply: KernelLaunch | None  # float16 without pairs only
    apply_lanes_log2: int
    paired: bool = False  # (value, count) pairs in the counts buffer (or the workspace: pair_chunks > 1), then `fold`
    fold: KernelLaunch | None = None  # paired only
    pair_chunks: int = 1  # > 1: pairs in the workspace, a scatter and a fold per chunk of PAIRED_MAX_EDGES edges
    zeroing: bool = False  # the scatter kernel zeroes counts and skipped itself (a cooperative launch, no memset)
    sort: SortPlan | None = None  # the sorted path (algorithm "sorted"; scatter = its reduce kernel)
    chunk_edges: int = 0  # the chunked path: edges each block sorts at a time (chunk_plan)
    owned: OwnedTable | None = None  # "owned": the table of each block (scatter = scatter_owned)
    partition: PartitionLayout | None = None  # "partitioned" (scatter = partition_chunks, then reduce)
    reduce: KernelLaunch | None = None  # "partitioned": reduce_buckets
    grid: GridTable | None = None  # "grid_table": its table (scatter = scatter_grid_table)
    split: SplitTable | None = None  # "split_table": its table and apply launch (scatter = scatter_split_table)
    block_log2: int = 0  # "block_table": log2 of its shared table's slots (scatter = scatter_block_table)

    @property
    def cooperative(self) -> bool:
        """Whether the scatter kernel is a cooperative launch (every block resident): it zeroes the counts
        before a grid-wide barrier, or meets at grid-wide barriers around its table (grid_table)."""
        return self.zeroing or self.grid is not None


def next_power_of_two(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def lanes_log2_for(chunks: int) -> int:
    """log2 of the lanes sharing one row: the power of two >= the row's chunks, at most a warp (32)."""
    return min(5, (next_power_of_two(chunks)).bit_length() - 1)


def resident_blocks(device: DeviceInfo, shared_bytes: int = 0) -> int:
    """Blocks of THREADS_PER_BLOCK threads resident on one SM (2048 threads), fewer where each needs
    shared_bytes of shared memory (the driver reserves 1 KiB per block besides); at least 1."""
    return max(1, min(2048 // THREADS_PER_BLOCK, device.shared_per_sm // (shared_bytes + 1024)))


def warp_row_vec(vec: int, num_features: int) -> int:
    """For kernels that give a row to a warp (sorted, chunked): the narrowest width dividing `vec` (so as
    aligned) whose 32 lanes cover the row, else `vec`."""
    return next((v for v in (1, 2, 4) if v <= vec and 32 * v >= num_features), vec)


def warp_row_slices(num_features: int, vec: int) -> int:
    """Slices of 32 * vec features a row is cut into (the grid's y) by the kernels that give a row to a warp."""
    return -(-num_features // (32 * vec))


def table_layout(num_nodes: int, num_edges: int, num_features: int) -> TableLayout | None:
    """The float16 table for these sizes (None when nothing can be added: N = 0 or E = 0).

    The capacity min(N, P) with P = 2^ceil(log2(2 min(N, E))) never decreases when N or E grows, so a
    workspace sized for the largest shapes serves every smaller launch.
    """
    distinct = min(num_nodes, num_edges)
    if distinct <= 0:
        return None
    hashed_capacity = next_power_of_two(2 * distinct)
    hashed = num_nodes > hashed_capacity
    capacity = hashed_capacity if hashed else num_nodes
    values_offset = -(-4 * capacity // TABLE_ALIGNMENT) * TABLE_ALIGNMENT
    return TableLayout(
        capacity=capacity,
        hashed=hashed,
        table_log2=hashed_capacity.bit_length() - 1 if hashed else 0,
        values_offset=values_offset,
        nbytes=values_offset + 4 * capacity * num_features,
    )


def _aligned(nbytes: int) -> int:
    return -(-nbytes // TABLE_ALIGNMENT) * TABLE_ALIGNMENT


def sort_layout(num_nodes: int, num_edges: int, num_features: int) -> SortLayout | None:
    """The sorted path's workspace for these sizes (None when it cannot run: E = 0, N = 0 or E > 2^31 - 1).

    Every section grows with N, E and F (the partial sums are sized for min(ceil(E / 32), SORT_TARGET_RANGES)
    ranges, at least what any smaller launch uses), so a workspace sized for the largest shapes serves every
    smaller launch."""
    if num_edges <= 0 or num_nodes <= 0 or num_edges > SORT_MAX_EDGES:
        return None
    span = 32 * -(-(-(-num_edges // SORT_TARGET_RANGES)) // 32)
    ranges = -(-num_edges // span)
    room = min(-(-num_edges // 32), SORT_TARGET_RANGES)
    tiles = 1 if num_nodes <= SORT_ONE_TILE_NODES else min(SORT_MAX_TILES, -(-num_nodes // SORT_TILE_NODES))
    tile_nodes = -(-num_nodes // tiles)
    tiles = -(-num_nodes // tile_nodes)
    tile_sums_offset = _aligned(4 * (num_nodes + 1))
    sorted_offset = tile_sums_offset + _aligned(4 * SORT_MAX_TILES)
    head_offset = sorted_offset + _aligned(8 * num_edges)
    partial_bytes = _aligned(4 * room * num_features)
    tail_offset = head_offset + partial_bytes
    return SortLayout(span, ranges, tile_nodes, tiles, tile_sums_offset, sorted_offset, head_offset, tail_offset,
                      tail_offset + partial_bytes)


def sorting_pays(num_nodes: int, num_edges: int, num_features: int, dtype: object) -> bool:
    """Whether "auto" sorts (given counts and the workspace): rows of at least SORT_MIN_FEATURES features and
    float32: E >= max(N, SORT_MIN_EDGES); float16: E >= max(N / 16, SORT_MIN_EDGES_HALF) (its alternative, the
    float32 table, costs more: measured, N = 1e6, E = 1e5, F = 64: sorted 0.063 ms, hashed table 0.130 ms)."""
    if num_features < SORT_MIN_FEATURES:
        return False
    if kernel_dtype(dtype) == np.float16:
        return num_edges >= max(num_nodes // 16, SORT_MIN_EDGES_HALF)
    return num_edges >= max(num_nodes, SORT_MIN_EDGES)


def sort_workspace_bytes(num_nodes: int, num_edges: int, num_features: int, dtype: object, *,
                         with_counts: bool) -> int:
    """Bytes of the sorted path's workspace where "auto" may sort at these or smaller sizes (counts requested,
    sorting_pays for some N' <= N: rows wide and E large enough), else 0: a launch without counts stays free
    of O(N) work. Not conditioned on N, so that a workspace sized for the largest shapes serves every smaller
    launch (with fewer nodes the same edges may sort)."""
    if not (with_counts and sorting_pays(0, num_edges, num_features, dtype)):
        return 0
    layout = sort_layout(num_nodes, num_edges, num_features)
    return 0 if layout is None else layout.nbytes


def sort_plan(num_nodes: int, num_edges: int, num_features: int, vec: int, device: DeviceInfo) -> SortPlan:
    layout = sort_layout(num_nodes, num_edges, num_features)
    if layout is None:
        raise ValueError(f"the sorted path sorts 1 to {SORT_MAX_EDGES} edges into at least one node; got "
                         f"{num_edges} edges, {num_nodes} nodes")
    private = num_nodes <= SORT_PRIVATE_MAX_NODES and num_edges >= SORT_PRIVATE_MIN_EDGES_PER_NODE * num_nodes
    private_nodes = num_nodes if private else 0
    # As many blocks as are resident (their atomics wait on the L2: the more in flight, the better), each with at
    # least one step of edges; with tallies, SORT_PRIVATE_BLOCKS_PER_SM per SM (fewer, fuller blocks revisit their
    # tallies), at most as many as their shared memory allows.
    resident = resident_blocks(device, 4 * private_nodes)
    if private_nodes and SORT_PRIVATE_BLOCKS_PER_SM:
        resident = min(resident, SORT_PRIVATE_BLOCKS_PER_SM)
    blocks = max(1, min(-(-num_edges // (SORT_EDGES_PER_THREAD * THREADS_PER_BLOCK)), resident * device.sm_count))
    passes = 1 if private_nodes else max(1, min(SORT_MAX_PLACE_PASSES, -(-8 * num_edges // (device.l2_bytes // 2))))
    place_ranges = tuple((num_nodes * k // passes, num_nodes * (k + 1) // passes) for k in range(passes))
    warps_per_block = THREADS_PER_BLOCK // 32
    slices = warp_row_slices(num_features, vec)
    reduce = KernelLaunch(f"sort_reduce_v{vec}", (-(-layout.ranges // warps_per_block), slices))
    fixup = None
    if layout.ranges > 1:
        fixup = KernelLaunch(f"sort_fixup_v{vec}", (-(-(layout.ranges - 1) // warps_per_block), slices))
    return SortPlan(layout, KernelLaunch("sort_count", (blocks, 1), 4 * private_nodes), private_nodes, place_ranges,
                    reduce, fixup)


def grid_table_layout(num_nodes: int, num_edges: int) -> GridTable:
    """The grid_table path's table for N nodes and E edges (module constants): one slot per node where N is at
    most next_power_of_two(GRID_TABLE_SLOTS_PER_EDGE * E), else that many hashed slots."""
    hashed_capacity = next_power_of_two(GRID_TABLE_SLOTS_PER_EDGE * max(1, num_edges))
    return GridTable(num_nodes, False) if num_nodes <= hashed_capacity else GridTable(hashed_capacity, True)


def grid_table_workspace_bytes(num_nodes: int, num_edges: int, num_features: int, dtype: object, *,
                               with_counts: bool) -> int:
    """Bytes of the grid_table path's table (8 per slot) for float16 without counts, else 0: sized for
    min(E, GRID_TABLE_MAX_EDGES) edges and whatever F (the path runs F = 1 only), so that it never shrinks as
    N, E or F grow: a workspace sized for a profile's largest shapes (TensorRT's) serves each smaller launch."""
    del num_features  # the size must not fall when F grows past 1
    if with_counts or kernel_dtype(dtype) != np.float16 or num_edges == 0:
        return 0
    return 8 * grid_table_layout(num_nodes, min(num_edges, GRID_TABLE_MAX_EDGES)).capacity


def split_table_capacity(num_edges: int) -> int:
    """Slots of the split_table path's table for E edges (module constants); never decreases as E grows."""
    sparse = next_power_of_two(SPLIT_TABLE_SLOTS_PER_EDGE * max(1, num_edges))
    return sparse if sparse <= SPLIT_TABLE_MAX_SPARSE_SLOTS else next_power_of_two(2 * num_edges)


def split_table_workspace_bytes(num_nodes: int, num_edges: int, num_features: int, dtype: object, *,
                                with_counts: bool, forced: bool = False) -> int:
    """Bytes of the split_table path's table (8 per slot) where "auto" may take it at these or smaller sizes
    (float16 without counts where the float16 table would be hashed: E < N / 2), or where it is forced (float16
    without counts, any sizes); else 0. Sized whatever F is (the path runs F = 1 only), so that it never shrinks
    as N, E or F grow: a workspace sized for a profile's largest shapes serves each smaller launch."""
    del num_features  # the size must not fall when F grows past 1
    if with_counts or kernel_dtype(dtype) != np.float16 or num_edges == 0:
        return 0
    # the table is hashed where N > 2^ceil(log2(2 E)): E is at most half the largest power of two below N;
    # forced, at most SPLIT_TABLE_MAX_EDGES (the plan refuses more)
    edges = (min(num_edges, SPLIT_TABLE_MAX_EDGES) if forced
             else min(num_edges, (1 << max(0, (num_nodes - 1).bit_length() - 1)) // 2))
    return 8 * split_table_capacity(edges) if edges > 0 else 0


def pair_chunks(num_edges: int) -> int:
    """Chunks of at most PAIRED_MAX_EDGES edges on the paired path (1: the pairs live in the counts)."""
    return max(1, -(-num_edges // PAIRED_MAX_EDGES))


def pairs_workspace_bytes(num_nodes: int, num_edges: int, num_features: int, *, with_counts: bool) -> int:
    """Bytes of the paired path's workspace pairs: 8 N with counts and E > 2^24, else 0. Sized whatever F is
    (the path runs F = 1 only), so that it never shrinks as F grows: a profile's largest F may be 2 while a
    launch in it has F = 1."""
    del num_features  # the size must not fall when F grows past 1
    if with_counts and num_edges > PAIRED_MAX_EDGES:
        return PAIR_BYTES * num_nodes
    return 0


def workspace_size(num_nodes: int, num_edges: int, num_features: int, dtype: object, *,
                   with_counts: bool = True, algorithm: str = "auto", table_only: bool = False) -> int:
    """Bytes of workspace a launch of at most these sizes needs: float32 none, except 8 N with counts and more
    than 2^24 edges (the pairs of F = 1, sized whatever F; O(N) like the counts' zeroing) and the sorted path's (with counts,
    wide rows, many edges: sort_workspace_bytes); float16 its table (or one of those, or the grid_table or
    split_table path's table, or the partitioned path's entries, whichever is larger).
    Without counts, nothing O(N) for a small update of a large state. algorithm="sorted" (forcing the sorted
    path, as scatter_add_launch's `algorithm` does) sizes for it wherever it can run; so do "partitioned" and
    "split_table".

    A size for the largest shapes serves every smaller launch. table_only: the float16 table alone (float32:
    0), which every release has sized this way: the budget of an engine built before the plugin recorded its
    workspace_layout (plugin/rules.py), so that its launches stay inside what TensorRT allocated then.
    """
    for name, value in (("num_nodes", num_nodes), ("num_edges", num_edges), ("num_features", num_features)):
        if not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if table_only:
        table = table_layout(num_nodes, num_edges, num_features) if kernel_dtype(dtype) == np.float16 else None
        return 0 if table is None else table.nbytes
    pairs = pairs_workspace_bytes(num_nodes, num_edges, num_features, with_counts=with_counts)
    sort = sort_workspace_bytes(num_nodes, num_edges, num_features, dtype, with_counts=with_counts)
    forced = sort_layout(num_nodes, num_edges, num_features) if algorithm == "sorted" and with_counts else None
    sort = max(sort, 0 if forced is None else forced.nbytes)
    partition = partition_workspace_bytes(num_nodes, num_edges, num_features, dtype, with_counts=with_counts,
                                          forced=algorithm == "partitioned")
    if kernel_dtype(dtype) == np.float32:
        return max(pairs, sort, partition)
    table = table_layout(num_nodes, num_edges, num_features)
    grid = grid_table_workspace_bytes(num_nodes, num_edges, num_features, dtype, with_counts=with_counts)
    split = split_table_workspace_bytes(num_nodes, num_edges, num_features, dtype, with_counts=with_counts,
                                        forced=algorithm == "split_table")
    return max(pairs, sort, partition, grid, split, 0 if table is None else table.nbytes)


def owned_shared_bytes(capacity: int, num_features: int) -> int:
    """Dynamic shared memory of an owned table (scatter_add.cu owned_passes): keys and float32 sums."""
    return 4 * capacity * (1 + num_features)


def owned_capacity(entries: int) -> int:
    """Slots of an owned table for about `entries` distinct nodes: the power of two >= 1.5x that plus 64 (at
    least OWNED_MIN_CAPACITY; filled at most 2/3 on average, so insertions probe few slots)."""
    return next_power_of_two(max(OWNED_MIN_CAPACITY, entries + entries // 2 + 64))


def owned_table(entries_per_block: int, num_features: int, device: DeviceInfo) -> OwnedTable:
    """A table of owned_capacity(entries_per_block) slots (a block whose nodes do not fit runs several passes),
    at most what one block's shared memory holds. ValueError when not even OWNED_MIN_CAPACITY slots fit."""
    capacity = owned_capacity(entries_per_block)
    while capacity > OWNED_MIN_CAPACITY and owned_shared_bytes(capacity, num_features) > device.max_shared_per_block:
        capacity //= 2
    if owned_shared_bytes(capacity, num_features) > device.max_shared_per_block:
        raise ValueError(f"rows of {num_features} features are too wide for the owned path's shared table")
    return OwnedTable(capacity, min(capacity, OWNED_MAX_PROBES))


def owned_plan(num_edges: int, num_features: int, device: DeviceInfo) -> tuple[KernelLaunch, OwnedTable]:
    """scatter_owned's launch: a block per OWNED_EDGES_PER_BLOCK edges, at most one per SM, each with a table for
    its share of the edges."""
    blocks = max(1, min(device.sm_count, -(-num_edges // OWNED_EDGES_PER_BLOCK)))
    table = owned_table(-(-num_edges // blocks), num_features, device)
    launch = KernelLaunch("scatter_owned", (blocks, 1), owned_shared_bytes(table.capacity, num_features), OWNED_THREADS)
    return launch, table


def clustered_plan(num_edges: int, num_features: int, device: DeviceInfo) -> tuple[KernelLaunch, OwnedTable]:
    """scatter_clustered's launch: CLUSTER_GRID_BLOCKS blocks (a multiple of CLUSTER_BLOCKS), each with a table
    for its share of the edges' nodes. ValueError before sm_90 (no clusters)."""
    if device.arch < CLUSTER_MIN_ARCH:
        raise ValueError(f"the clustered path needs thread-block clusters (sm_90 or newer), not sm_{device.arch}")
    blocks = CLUSTER_GRID_BLOCKS
    # at most the 48 KiB a launch gets without raising the kernel's limit (larger tables run more passes)
    small = dataclasses.replace(device, max_shared_per_block=min(device.max_shared_per_block, CLUSTER_MAX_SHARED))
    table = owned_table(-(-num_edges // blocks), num_features, small)
    launch = KernelLaunch("scatter_clustered", (blocks, 1), owned_shared_bytes(table.capacity, num_features),
                          CLUSTER_THREADS)
    return launch, table


def partition_layout(num_edges: int, num_features: int) -> PartitionLayout | None:
    """The partitioned path's chunks, buckets, tables and workspace for E edges (None for E = 0): chunks of
    PARTITION_CHUNK_EDGES edges, ceil(E / PARTITION_BUCKET_EDGES) buckets. Grows with E and F, so the
    layout of the largest shapes covers every smaller launch."""
    if num_edges <= 0:
        return None
    chunk_edges = min(PARTITION_CHUNK_EDGES, 32 * -(-num_edges // 32))
    chunks = -(-num_edges // chunk_edges)
    buckets = -(-num_edges // PARTITION_BUCKET_EDGES)
    entries = -(-num_edges // buckets)
    capacity = owned_capacity(entries)
    sums_offset = _aligned(4 * num_edges)
    offsets_offset = sums_offset + _aligned(4 * num_edges * num_features)
    return PartitionLayout(chunk_edges, chunks, buckets, 2 * chunk_edges, OwnedTable(capacity, min(capacity, OWNED_MAX_PROBES)),
                           sums_offset, offsets_offset, offsets_offset + _aligned(4 * chunks * (buckets + 1)))


def partition_workspace_bytes(num_nodes: int, num_edges: int, num_features: int, dtype: object, *,
                              with_counts: bool, forced: bool = False) -> int:
    """Bytes of the partitioned path's workspace where "auto" may take it at these or smaller sizes (float16
    without counts, rows of at most PARTITION_MAX_FEATURES, E beyond the owned path's, at most
    PARTITION_MAX_EDGES and below N / 2, where the table would be hashed), or where it is forced (any dtype and
    size); else 0. Grows with N, E and F, so a workspace sized for the largest shapes serves every smaller
    launch."""
    if forced:
        layout = partition_layout(num_edges, num_features)
        return 0 if layout is None else layout.nbytes
    if with_counts or kernel_dtype(dtype) != np.float16 or num_features > PARTITION_MAX_FEATURES:
        return 0
    edges = min(num_edges, PARTITION_MAX_EDGES, (num_nodes - 1) // 2)  # hashed table: N > 2^ceil(log2(2 E)) > 2 E
    if edges <= OWNED_MAX_EDGES and num_features <= OWNED_MAX_FEATURES:
        return 0
    layout = partition_layout(edges, num_features)
    return 0 if layout is None else layout.nbytes


def partition_plan(num_edges: int, num_features: int, device: DeviceInfo) -> tuple[KernelLaunch, KernelLaunch,
                                                                                   PartitionLayout]:
    """partition_chunks' and reduce_buckets' launches (a block per chunk, a block per bucket) and the layout."""
    layout = partition_layout(num_edges, num_features)
    if layout is None:
        raise ValueError("the partitioned path needs at least one edge")
    chunk_shared = owned_shared_bytes(layout.chunk_capacity, num_features) + 4 * (layout.buckets + 1)  # + cursors
    bucket_shared = owned_shared_bytes(layout.bucket.capacity, num_features)
    if max(chunk_shared, bucket_shared) > device.max_shared_per_block:
        raise ValueError(f"rows of {num_features} features and {num_edges} edges do not fit the partitioned "
                         "path's shared tables")
    return (KernelLaunch("partition_chunks", (layout.chunks, 1), chunk_shared, OWNED_THREADS),
            KernelLaunch("reduce_buckets", (layout.buckets, 1), bucket_shared, OWNED_THREADS), layout)


def block_table_log2(num_edges: int) -> int:
    """log2 of block_table's slots for E edges: BLOCK_TABLE_SLOTS_PER_EDGE x E rounded up to a power of two, at
    least 2^BLOCK_TABLE_MIN_LOG2 (at most 2^12 for BLOCK_TABLE_MAX_EDGES: 32 KiB of shared memory)."""
    return max(BLOCK_TABLE_MIN_LOG2, (BLOCK_TABLE_SLOTS_PER_EDGE * max(1, num_edges) - 1).bit_length())


def block_table_shared_bytes(log2: int) -> int:
    """scatter_block_table's dynamic shared memory: an int32 key and a float32 sum per slot."""
    return 8 << log2


def grid_table_fits(num_edges: int, num_features: int, device: DeviceInfo) -> bool:
    """Whether "auto" may take the grid_table path: rows of one feature, at most GRID_TABLE_MAX_EDGES edges,
    a grid of at most GRID_TABLE_RESIDENT_BLOCKS_PER_SM blocks per SM (all resident: a cooperative launch)."""
    blocks = -(-num_edges // GRID_TABLE_THREADS)
    return (num_features == 1 and 0 < num_edges <= GRID_TABLE_MAX_EDGES
            and blocks <= GRID_TABLE_RESIDENT_BLOCKS_PER_SM * device.sm_count)


def uncounted_algorithm(num_nodes: int, num_edges: int, num_features: int, half: bool, vec: int,
                        device: DeviceInfo, *, partition_workspace: bool, grid_table: bool = False,
                        split_table: bool = False) -> str | None:
    """What "auto" runs without counts (module docstring), or None for the rules below it (the shared kernel,
    node passes, the float16 table). grid_table: cooperative launches are allowed and the workspace holds the
    grid_table path's table, 8-byte aligned; split_table: the workspace holds the split_table path's table,
    8-byte aligned."""
    if half:
        table = table_layout(num_nodes, num_edges, num_features)
        if table is None:
            return None
        if num_features == 1 and num_edges <= BLOCK_TABLE_MAX_EDGES:
            return "block_table"
        if grid_table and grid_table_fits(num_edges, num_features, device):
            return "grid_table"
        if table.hashed:
            if split_table and num_features == 1:
                return "split_table"
            if num_edges <= OWNED_MAX_EDGES and num_features <= OWNED_MAX_FEATURES:
                return "clustered" if AUTO_CLUSTERED and device.arch >= CLUSTER_MIN_ARCH else "owned"
            if partition_workspace and num_features <= PARTITION_MAX_FEATURES and num_edges <= PARTITION_MAX_EDGES:
                return "partitioned"
            return None
        # one slot per node: the table is faster than owned or partitioned (module docstring); the table path
        # (scatter_global into it) unless HALF_DIRECT_INTO_TABLE, then float32's rule below, into the table
        if not HALF_DIRECT_INTO_TABLE:
            return None
    if (shared_slice_width(num_nodes, num_features, vec, device) == num_features
            and num_edges >= SHARED_OVER_DIRECT_MIN_EDGES_PER_NODE * num_nodes):
        return None
    if node_ranges_for(num_nodes, num_edges, 4 * num_features, 8, device.l2_bytes) > 1:
        return None
    return "direct"


def _require_one_float16_feature(algorithm: str, half: bool, num_features: int) -> None:
    """ValueError unless a forced slot-table path (block_table, grid_table, split_table) gets what its kernels add:
    float16 rows of one feature."""
    if not half or num_features != 1:
        raise ValueError(f"the {algorithm} path adds float16 rows of one feature, not {num_features} "
                         f"{'float16' if half else 'float32'} features")


def uncounted_plan(algorithm: str, num_nodes: int, num_edges: int, num_features: int, half: bool, vec: int,
                   device: DeviceInfo) -> LaunchPlan:
    """The plan of a "direct", "block_table", "grid_table", "split_table", "owned", "clustered" or "partitioned"
    launch (without counts)."""
    ranges = ((0, num_nodes),)
    if algorithm == "grid_table":
        _require_one_float16_feature(algorithm, half, num_features)
        if num_edges > GRID_TABLE_MAX_EDGES:  # its workspace is sized for at most that many
            raise ValueError(f"the grid_table path takes at most {GRID_TABLE_MAX_EDGES} edges, not {num_edges}")
        blocks = -(-num_edges // GRID_TABLE_THREADS)
        return LaunchPlan("grid_table", 1, 0, KernelLaunch("scatter_grid_table", (blocks, 1), 0, GRID_TABLE_THREADS),
                          num_features, ranges, None, None, 0, grid=grid_table_layout(num_nodes, num_edges))
    if algorithm == "block_table":
        _require_one_float16_feature(algorithm, half, num_features)
        if num_edges > BLOCK_TABLE_MAX_EDGES:  # one block's shared table
            raise ValueError(f"the block_table path takes at most {BLOCK_TABLE_MAX_EDGES} edges, not {num_edges}")
        log2 = block_table_log2(num_edges)
        scatter = KernelLaunch("scatter_block_table", (1, 1), block_table_shared_bytes(log2), BLOCK_TABLE_THREADS)
        return LaunchPlan("block_table", 1, 0, scatter, num_features, ranges, None, None, 0, block_log2=log2)
    if algorithm == "split_table":
        _require_one_float16_feature(algorithm, half, num_features)
        if num_edges > SPLIT_TABLE_MAX_EDGES:
            raise ValueError(f"the split_table path takes at most {SPLIT_TABLE_MAX_EDGES} edges, not {num_edges}")
        capacity = split_table_capacity(num_edges)
        apply_blocks = max(1, min(-(-capacity // THREADS_PER_BLOCK), SPLIT_TABLE_APPLY_BLOCKS_PER_SM * device.sm_count))
        split = SplitTable(capacity, KernelLaunch("apply_split_table", (apply_blocks, 1)))
        scatter = KernelLaunch("scatter_split_table", (-(-num_edges // THREADS_PER_BLOCK), 1))
        return LaunchPlan("split_table", 1, 0, scatter, num_features, ranges, None, None, 0, split=split)
    if algorithm == "direct":
        table = table_layout(num_nodes, num_edges, num_features) if half else None
        if half and (table is None or table.hashed):
            raise ValueError("the direct path adds float32 atomics into the state, or for float16 into the table "
                             "with one slot per node: this float16 table would be hashed (owned, clustered, "
                             "partitioned or the table path sum it)")
        elements = num_edges * (num_features // vec)
        blocks = max(1, min(-(-elements // THREADS_PER_BLOCK), DIRECT_BLOCKS_PER_SM * device.sm_count))
        apply, apply_lanes_log2 = _apply_for(table, vec, num_features, device)
        return LaunchPlan("direct", vec, 0, KernelLaunch(f"scatter_direct_v{vec}", (blocks, 1)), num_features, ranges,
                          table, apply, apply_lanes_log2)
    if algorithm in ("owned", "clustered"):
        make = owned_plan if algorithm == "owned" else clustered_plan
        launch, owned = make(num_edges, num_features, device)
        return LaunchPlan(algorithm, 1, 0, launch, num_features, ranges, None, None, 0, owned=owned)
    chunks, reduce, layout = partition_plan(num_edges, num_features, device)
    return LaunchPlan("partitioned", 1, 0, chunks, num_features, ranges, None, None, 0, partition=layout,
                      reduce=reduce)


def vector_width(num_features: int, src_address: int, src_itemsize: int, dest_address: int) -> int:
    """The widest VEC in (4, 2, 1) that divides num_features and keeps every row's chunks aligned.

    src rows are read VEC elements at a time (src_itemsize * VEC bytes); the float32 destination (state or
    table) gets VEC-wide vector atomics (4 * VEC bytes).
    """
    for vec in (4, 2, 1):
        if num_features % vec == 0 and src_address % (src_itemsize * vec) == 0 and dest_address % (4 * vec) == 0:
            return vec
    return 1


def shared_slice_width(num_nodes: int, num_features: int, vec: int, device: DeviceInfo,
                       max_slice_width: int | None = None) -> int:
    """Features per block that fit in shared memory with all nodes (sums + counts), at most max_slice_width;
    0 if not even VEC fit."""
    if num_nodes <= 0:
        return 0
    budget = device.max_shared_per_block - QUEUE_BYTES_PER_BLOCK
    floats_per_node = budget // (4 * num_nodes) - 1  # one word per node for counts
    if max_slice_width is not None:
        floats_per_node = min(floats_per_node, max_slice_width)
    widest = min(num_features, floats_per_node - floats_per_node % vec)
    if widest < vec:
        return 0
    slices = -(-num_features // widest)
    even = -(-num_features // slices)  # the same work for every slice
    return -(-even // vec) * vec


def node_ranges_for(num_nodes: int, num_edges: int, row_bytes: int, index_itemsize: int, l2_bytes: int) -> int:
    """How many node ranges ("passes") the global kernel should stream the edges through (1 = one launch).

    Several passes pay when the destination is much larger than L2 (each atomic then reads and writes its row
    in DRAM), rows are re-used (E >= 4 N: a row gets several atomics) and rows are wide enough that reading
    the index once per pass costs less than one src row (passes * 8 bytes <= row bytes).
    Each pass keeps about half of L2 worth of destination rows.
    """
    dest_bytes = num_nodes * row_bytes
    if num_edges < 4 * num_nodes or dest_bytes <= l2_bytes // 2:
        return 1
    passes = -(-dest_bytes // (l2_bytes // 2))
    return passes if passes * index_itemsize <= row_bytes else 1


def pairs_possible(num_nodes: int, num_edges: int, num_features: int, *, with_counts: bool,
                   counts_aligned: bool, pairs_workspace: bool = True) -> bool:
    """Whether the paired path can run: one feature, counts requested in an 8-byte-aligned buffer (the pairs
    live in it), and beyond PAIRED_MAX_EDGES edges a workspace for the pairs (pairs_workspace)."""
    return (with_counts and counts_aligned and num_features == 1 and num_nodes > 0
            and (num_edges <= PAIRED_MAX_EDGES or pairs_workspace))


def chunk_shared_bytes(num_nodes: int) -> int:
    """Dynamic shared memory of chunk_reduce: cursors (uint32 [N + 1]) and the chunk's order (uint16)."""
    return 4 * (num_nodes + 1) + 2 * CHUNK_EDGES


def chunk_plan(num_nodes: int, num_edges: int, num_features: int, vec: int, device: DeviceInfo,
               table: TableLayout | None) -> tuple[KernelLaunch, int, int]:
    """The chunked path's launch, its vector width and its chunk length (edges a block sorts at a time).

    The chunks fill whole waves of resident blocks: with S resident slots per feature slice and R = ceil(E /
    (S * CHUNK_EDGES)) rounds, each chunk holds ceil(E / (S * R)) edges rounded up to a multiple of 32 (so each
    chunk's index starts 256 bytes after the previous one's; at most CHUNK_EDGES, a multiple of 32, which the
    shared memory is sized for), and the grid has min(S, chunks) blocks: every block runs R rounds, or R - 1,
    none a last round alone (measured, N = 1e3, E = 1e7: 306 chunks of 32768 edges on 396 slots, 1.012 ms;
    NOTES.md "Version 7")."""
    if num_nodes > CHUNK_MAX_NODES or (table is not None and table.hashed):
        raise ValueError(f"the chunked path sorts in shared memory at most {CHUNK_MAX_NODES} nodes (float16: with "
                         f"one table slot per node); got {num_nodes} nodes, {num_edges} edges")
    vec = warp_row_vec(vec, num_features)
    shared = chunk_shared_bytes(num_nodes)
    slices = warp_row_slices(num_features, vec)
    slots = max(1, resident_blocks(device, shared) * device.sm_count // slices)
    rounds = max(1, -(-num_edges // (slots * CHUNK_EDGES)))
    chunk_edges = 32 * max(1, -(-num_edges // (32 * slots * rounds)))
    blocks = max(1, min(slots, -(-num_edges // chunk_edges)))
    return KernelLaunch(f"chunk_reduce_v{vec}", (blocks, slices), shared), vec, chunk_edges


def plan_launch(
    num_nodes: int,
    num_edges: int,
    num_features: int,
    dtype: np.dtype,
    device: DeviceInfo,
    vec: int,
    algorithm: str = "auto",
    node_passes: int | None = None,
    *,
    with_counts: bool = False,
    counts_aligned: bool = True,
    pairs_workspace: bool = True,
    paired: bool | None = None,
    max_slice_width: int | None = None,
    zero_in_kernel: bool | None = False,
    with_skipped: bool = False,
    sort_workspace: bool = False,
    partition_workspace: bool = False,
    grid_table_workspace: bool = False,
    split_table_workspace: bool = False,
) -> LaunchPlan:
    """The kernels, grids and table of one launch with num_edges > 0 (see the module docstring).

    with_counts: counts are requested; counts_aligned: their address is a multiple of PAIR_BYTES (needed by
    the paired path); pairs_workspace: the workspace holds pairs_workspace_bytes (needed by the paired path
    beyond PAIRED_MAX_EDGES edges); paired overrides the paired path's choice and max_slice_width caps the shared kernel's
    feature slices (tests, benchmarks). zero_in_kernel: whether the scatter launch zeroes counts and skipped
    (with_skipped: that word is given) itself, before a grid-wide barrier (scatter_global_zeroing_v*, a
    cooperative launch of resident blocks only), where the plan is one global launch without pairs or table:
    None = where it pays (at most ZEROING_MAX_EDGES edges), True = wherever possible, False = never (the
    kernels lack it). sort_workspace: the workspace holds sort_layout(...).nbytes (needed by the sorted path,
    which also needs counts). The chunked and sorted paths run a warp per row: they take the narrowest width
    dividing `vec` whose 32 lanes cover the row. partition_workspace: the workspace holds
    partition_layout(...).nbytes (needed by the partitioned path). grid_table_workspace: the workspace holds
    grid_table_workspace_bytes, 8-byte aligned (needed by the grid_table path, which also needs zero_in_kernel
    not False: a cooperative launch). split_table_workspace: the workspace holds 8 split_table_capacity(E)
    bytes, 8-byte aligned (needed by the split_table path).
    The paths of UNCOUNTED_ALGORITHMS run without counts only.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}")
    half = np.dtype(dtype) == np.float16
    chunk_pays = (num_features >= SORT_MIN_FEATURES and num_nodes <= CHUNK_MAX_NODES
                  and num_edges >= CHUNK_MIN_EDGES)
    if algorithm == "chunked" or (algorithm == "auto" and paired is None and chunk_pays):
        table = table_layout(num_nodes, num_edges, num_features) if half else None
        scatter, vec, chunk_edges = chunk_plan(num_nodes, num_edges, num_features, vec, device, table)
        apply, apply_lanes_log2 = _apply_for(table, vec, num_features, device)
        return LaunchPlan("chunked", vec, 5, scatter, num_features, ((0, num_nodes),), table, apply, apply_lanes_log2,
                          chunk_edges=chunk_edges)
    uncounted = algorithm if algorithm in UNCOUNTED_ALGORITHMS else None
    if uncounted is not None and with_counts:
        raise ValueError(f"the {algorithm} path runs without counts; counts were requested")
    if uncounted == "partitioned" and not partition_workspace:
        raise ValueError("the partitioned path needs a workspace of partition_layout bytes")
    if uncounted == "grid_table" and (zero_in_kernel is False or not grid_table_workspace):
        raise ValueError("the grid_table path needs cooperative launches (zero_in_kernel not False: kernels "
                         "compiled with cooperative groups) and an 8-byte aligned workspace of "
                         "grid_table_workspace_bytes")
    if uncounted == "split_table" and not split_table_workspace:
        raise ValueError("the split_table path needs an 8-byte aligned workspace of 8 split_table_capacity(E) bytes")
    if algorithm == "auto" and not with_counts and paired is None and max_slice_width is None and node_passes is None:
        uncounted = uncounted_algorithm(num_nodes, num_edges, num_features, half, vec, device,
                                        partition_workspace=partition_workspace,
                                        grid_table=zero_in_kernel is not False and grid_table_workspace,
                                        split_table=split_table_workspace)
    if uncounted is not None:
        return uncounted_plan(uncounted, num_nodes, num_edges, num_features, half, vec, device)
    sortable = with_counts and sort_workspace and sort_layout(num_nodes, num_edges, num_features) is not None
    if algorithm == "sorted" and not sortable:
        raise ValueError(f"the sorted path needs counts and a workspace of sort_layout bytes (got counts={with_counts}, "
                         f"workspace={sort_workspace}, {num_nodes} nodes, {num_edges} edges)")
    if algorithm == "sorted" or (algorithm == "auto" and paired is None and sortable
                                 and sorting_pays(num_nodes, num_edges, num_features, dtype)):
        vec = warp_row_vec(vec, num_features)
        sort = sort_plan(num_nodes, num_edges, num_features, vec, device)
        return LaunchPlan("sorted", vec, 5, sort.reduce, num_features, ((0, num_nodes),), None, None, 5, sort=sort)
    possible = pairs_possible(num_nodes, num_edges, num_features, with_counts=with_counts,
                              counts_aligned=counts_aligned, pairs_workspace=pairs_workspace)
    if paired and not possible:
        raise ValueError(f"the paired path needs counts ({PAIR_BYTES}-byte aligned), one feature and, beyond "
                         f"{PAIRED_MAX_EDGES} edges, a workspace for the pairs (got counts={with_counts}, "
                         f"aligned={counts_aligned}, {num_features} features, {num_edges} edges, "
                         f"workspace={pairs_workspace})")
    chunks_if_paired = pair_chunks(num_edges)
    pairs_pay = (possible and device.arch >= 90
                 and num_edges >= PAIRED_MIN_EDGES_PER_NODE * chunks_if_paired * num_nodes)
    full_table = table_layout(num_nodes, num_edges, num_features) if half else None
    chunks = num_features // vec

    slice_width = shared_slice_width(num_nodes, num_features, vec, device, max_slice_width)
    shared_fits = slice_width > 0 and (full_table is None or not full_table.hashed)
    if algorithm == "shared" and not shared_fits:
        raise ValueError(f"the shared-memory kernel cannot hold {num_nodes} nodes on this device")
    pairs_beat_shared = (pairs_pay and num_nodes >= PAIRS_OVER_SHARED_MIN_NODES
                         and num_edges < SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE * num_nodes)
    zeroing = False
    use_shared = algorithm == "shared" or (
        algorithm == "auto"
        and shared_fits
        and num_edges >= SHARED_MIN_EDGES_PER_NODE * num_nodes
        and slice_width == num_features
        and not pairs_beat_shared
    )
    pairs = paired if paired is not None else pairs_pay and not use_shared
    table = None if pairs else full_table

    if use_shared:
        slices = -(-num_features // slice_width)
        shared_bytes = 4 * num_nodes * (slice_width + 1)
        blocks_per_sm = resident_blocks(device, shared_bytes + QUEUE_BYTES_PER_BLOCK)
        # About 4 edges per node per block, so flushing a block's sums costs less than summing them; at least
        # one block per SM, at most the resident blocks.
        most = max(1, device.sm_count * blocks_per_sm // slices)
        blocks = max(1, min(most, max(device.sm_count, -(-num_edges // (4 * num_nodes)))))
        lanes_log2 = lanes_log2_for(slice_width // vec)
        kernel = "scatter_shared_pairs" if pairs else f"scatter_shared_v{vec}"
        scatter = KernelLaunch(kernel, (blocks, slices), shared_bytes)
        ranges: tuple[tuple[int, int], ...] = ((0, num_nodes),)
        name = "shared"
    else:
        lanes_log2 = lanes_log2_for(chunks)
        rows_per_block = (THREADS_PER_BLOCK // 32) * (32 >> lanes_log2) * ROWS_PER_LANE
        blocks = max(1, min(-(-num_edges // rows_per_block), device.sm_count * RESIDENT_BLOCKS_PER_SM))
        hashed = table is not None and table.hashed
        kernel = "scatter_global_pairs" if pairs else f"scatter_hashed_v{vec}" if hashed else f"scatter_global_v{vec}"
        if node_passes is None:
            node_passes = 1 if hashed else node_ranges_for(num_nodes, num_edges, 4 * num_features, 8, device.l2_bytes)
        passes = max(1, min(node_passes, num_nodes)) if not hashed else 1
        ranges = tuple((num_nodes * k // passes, num_nodes * (k + 1) // passes) for k in range(passes))
        zeroing = (zero_in_kernel is not False and (with_counts or with_skipped) and not pairs and table is None
                   and passes == 1 and (zero_in_kernel or num_edges <= ZEROING_MAX_EDGES))
        if zeroing:  # enough resident blocks to zero the counts at bandwidth (8 per thread), no more
            kernel = f"scatter_global_zeroing_v{vec}"
            zeroing_blocks = -(-num_nodes // (THREADS_PER_BLOCK * 8))
            blocks = max(blocks, min(zeroing_blocks, device.sm_count * RESIDENT_BLOCKS_PER_SM))
        scatter = KernelLaunch(kernel, (blocks, 1))
        slice_width = num_features
        name = "hashed" if hashed else "global"

    apply, apply_lanes_log2 = _apply_for(table, vec, num_features, device)
    chunks = chunks_if_paired if pairs else 1
    fold = None
    if pairs:
        fold = KernelLaunch("fold_pairs" if chunks == 1 else "fold_pair_chunk",
                            (max(1, -(-num_nodes // THREADS_PER_BLOCK)), 1))
    return LaunchPlan(name, vec, lanes_log2, scatter, slice_width, ranges, table, apply, apply_lanes_log2,
                      paired=pairs, fold=fold, pair_chunks=chunks, zeroing=zeroing)


def _apply_for(table: TableLayout | None, vec: int, num_features: int,
               device: DeviceInfo) -> tuple[KernelLaunch | None, int]:
    """float16's apply_table launch over the table (None without one) and its lanes per row."""
    apply_lanes_log2 = lanes_log2_for(num_features // vec)
    if table is None:
        return None, apply_lanes_log2
    rows_per_block = (THREADS_PER_BLOCK // 32) * (32 >> apply_lanes_log2)
    apply_blocks = max(1, min(-(-table.capacity // rows_per_block), device.sm_count * RESIDENT_BLOCKS_PER_SM))
    return KernelLaunch(f"apply_table_v{vec}", (apply_blocks, 1)), apply_lanes_log2


def describe(plan: LaunchPlan) -> str:
    """One line for logs and benchmarks, e.g. 'global vec=4 passes=9 grid=528'."""
    text = f"{plan.algorithm} vec={plan.vec} grid={plan.scatter.grid[0]}x{plan.scatter.grid[1]}"
    if len(plan.node_ranges) > 1:
        text += f" passes={len(plan.node_ranges)}"
    if plan.scatter.shared_bytes:
        text += f" smem={plan.scatter.shared_bytes}"
    if plan.table is not None:
        text += f" table={plan.table.capacity}{'h' if plan.table.hashed else 'd'}"
    if plan.paired:
        text += " pairs" if plan.pair_chunks == 1 else f" pairs chunks={plan.pair_chunks}"
    if plan.zeroing:
        text += " zeroing"
    if plan.chunk_edges:
        text += f" chunk={plan.chunk_edges}"
    if plan.owned is not None:
        text += f" block={plan.scatter.block} table={plan.owned.capacity}"
    if plan.grid is not None:
        text += f" block={plan.scatter.block} table={plan.grid.capacity}{'h' if plan.grid.hashed else 'd'}"
    if plan.split is not None:
        text += f" table={plan.split.capacity}h"
    if plan.partition is not None:
        text += f" chunks={plan.partition.chunks} buckets={plan.partition.buckets}"
    if plan.sort is not None:
        text += f" span={plan.sort.layout.span}" + (" private" if plan.sort.private_nodes else "")
        if len(plan.sort.place_ranges) > 1:
            text += f" place_passes={len(plan.sort.place_ranges)}"
    return text
