"""How one scatter-add launch is laid out: which path, its kernels, grids and workspace. Plain Python, no CUDA.

The kernel family is the table PATHS: each Path names when "auto" takes it (`pays`), what it needs to run at
all (`fits`), the workspace bytes it needs (`workspace`) and its kernels. What justifies each path is measured:
on some cell of benchmarks/auto_cells_h200.csv where "auto" takes it, it is at least 10% ahead of every other path
timed there (tests/kernels/test_kernel_plans.py checks it). `plan_launch` runs the first path of AUTO that pays
and fits within the workspace given, and `workspace_size` is the most any path that may run at a profile's sizes
needs. Each path's workspace never shrinks as N, E or F grow, so a workspace sized for a profile's largest
shapes serves every launch in it.
docs/kernel.md describes what each path's kernels do; the launcher (launch.py) only issues the driver calls.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from plugin.kernels.compile import kernel_dtype

THREADS_PER_BLOCK = 256  # the kernels' __launch_bounds__ (scatter_add.cu)
WARPS_PER_BLOCK = THREADS_PER_BLOCK // 32
WINDOW_LOADS = 8  # scatter_add.cu: index loads per lane per window of the scatter kernels (the global one: at most)
RESIDENT_BLOCKS_PER_SM = 3  # __launch_bounds__(256, 3) in scatter_add.cu: 3 blocks share an SM
QUEUE_BYTES_PER_BLOCK = 8 * 3 * 4 * 256  # static shared memory of the scatter kernels (RowQueue per warp)
MAX_EDGES = 2**32 - 1  # counts are added to the low 32-bit word of each int64 count
MAX_NODES = 2**31 - 1  # node ids are 32-bit in the kernels and the table
TABLE_ALIGNMENT = 256
SLOT_ALIGNMENT = 8  # the slot tables' 64-bit compare-and-swap: grid_table and split_table need it

# The rules of "auto" (benchmarks/auto_cells_h200.csv holds the measurements that bracket them).
# pairs (F = 1, counts, sm_90+): a float32 count is exact up to 2^24 edges; beyond, the pairs live in the
# workspace and are folded after each chunk of PAIRED_MAX_EDGES. "auto" pairs where each chunk has at least one
# edge per node, and over the shared kernel below SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE edges per node (float32 on
# fewer than SHARED_FEW_NODES nodes: SHARED_OVER_FLOAT32_PAIRS_MIN_EDGES_PER_NODE).
PAIR_BYTES = 8
PAIRED_MAX_EDGES = 2**24
PAIRED_MIN_EDGES_PER_NODE = 1
SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE = 256
SHARED_OVER_FLOAT32_PAIRS_MIN_EDGES_PER_NODE = 96
SHARED_FEW_NODES = 4096
# shared (whole rows of all nodes in a block's shared memory): F = 1 from SHARED_MIN_EDGES_PER_NODE edges per
# node; wider rows only in small blocks with many edges per value (N F values): with counts, whose atomics contend
# on few nodes, up to SHARED_WIDE_MAX_VALUES from SHARED_WIDE_MIN_EDGES_PER_VALUE; without, inside one of
# SHARED_UNCOUNTED_WINDOWS: (most features or None, float16 only, most values, least edges per value).
SHARED_MIN_EDGES_PER_NODE = 16
SHARED_WIDE_MAX_VALUES = 12288
SHARED_WIDE_MIN_EDGES_PER_VALUE = 128
SHARED_UNCOUNTED_WINDOWS = ((2, False, 2048, 128), (3, False, 12288, 320), (4, True, 4096, 200),
                            (None, False, 2048, 160))
# sorted (counts, rows of at least SORT_MIN_FEATURES): on at most CHUNK_MAX_NODES nodes from SORT_FEW_NODES_MIN_VALUES
# values (E x F); float16 with a table of at least SORT_SPARSE_MIN_TABLE values (N x F) from SORT_SPARSE_MIN_VALUES
# values, up to SORT_SPARSE_MAX_EDGES_PER_NODE edges per node; else from SORT_MIN_EDGES edges with rows of
# SORT_WIDE_FEATURES, or SORT_MID_FEATURES below SORT_MID_MAX_EDGES. 32-bit positions; about
# SORT_TARGET_RANGES warp ranges of at least 32 positions; one scan block up to SORT_ONE_TILE_NODES nodes, else
# tiles of SORT_TILE_NODES; tallies in shared memory for at most SORT_PRIVATE_MAX_NODES nodes with at least
# SORT_PRIVATE_MIN_EDGES_PER_NODE edges each, on SORT_PRIVATE_BLOCKS_PER_SM blocks per SM; else at most
# SORT_MAX_PLACE_PASSES placing passes, each writing half of L2.
SORT_MIN_FEATURES = 32
SORT_FEW_NODES_MIN_VALUES = 2**24
SORT_SPARSE_MIN_TABLE = 2**22
SORT_SPARSE_MIN_VALUES = 2**21
SORT_SPARSE_MAX_EDGES_PER_NODE = 8
SORT_MIN_EDGES = 2**19
SORT_MID_FEATURES = 48
SORT_WIDE_FEATURES = 64
SORT_MID_MAX_EDGES = 2**20
SORT_MAX_EDGES = 2**31 - 1
SORT_TARGET_RANGES = 4096
SORT_MAX_TILES = 1024  # scatter_add.cu SORT_MAX_TILES: one block scans the tiles' sums
SORT_TILE_NODES = 2048
SORT_ONE_TILE_NODES = 16384
SORT_PRIVATE_MAX_NODES = 12288
SORT_PRIVATE_MIN_EDGES_PER_NODE = 64
SORT_PRIVATE_BLOCKS_PER_SM = 1
SORT_EDGES_PER_THREAD = 4  # scatter_add.cu: edges a thread of sort_count / sort_place reads per step
SORT_MAX_PLACE_PASSES = 4
# chunked (at most CHUNK_MAX_NODES nodes, rows of at least SORT_MIN_FEATURES): from CHUNK_MIN_EDGES edges (without
# counts from CHUNK_UNCOUNTED_MIN_FEATURES features, float16 CHUNK_HALF_UNCOUNTED_MIN_FEATURES), or inside one of
# CHUNK_WINDOWS: (with counts, most nodes, least features, least edges per node). Each block sorts at most
# CHUNK_EDGES edges at a time (uint16 offsets in shared memory).
CHUNK_MAX_NODES = 2048
CHUNK_MIN_EDGES = 2**22
CHUNK_UNCOUNTED_MIN_FEATURES = 48
CHUNK_HALF_UNCOUNTED_MIN_FEATURES = 64
CHUNK_WINDOWS = ((True, 512, 32, 300), (False, 384, 32, 1000), (False, 2048, 64, 500))
CHUNK_EDGES = 32768
# direct (float32, no counts): at most DIRECT_BLOCKS_PER_SM blocks per SM (grid-stride beyond); the shared kernel
# instead from SHARED_OVER_DIRECT_MIN_EDGES_PER_NODE edges per node, for F = 1 on at most SHARED_OVER_DIRECT_FEW_NODES
# nodes from SHARED_OVER_DIRECT_FEW_MIN_EDGES_PER_NODE and SHARED_OVER_DIRECT_FEW_MIN_EDGES edges.
DIRECT_BLOCKS_PER_SM = 32
SHARED_OVER_DIRECT_MIN_EDGES_PER_NODE = 256
SHARED_OVER_DIRECT_FEW_NODES = 2048
SHARED_OVER_DIRECT_FEW_MIN_EDGES_PER_NODE = 64
SHARED_OVER_DIRECT_FEW_MIN_EDGES = 2**15
# owned (float16, no counts, hashed table): up to OWNED_MAX_EDGES edges and OWNED_MAX_VALUES values (E x F) of at
# most OWNED_MAX_FEATURES features (every block reads all E targets: beyond, the hash table is faster), a block of
# OWNED_THREADS per OWNED_EDGES_PER_BLOCK edges, at most one per SM.
OWNED_THREADS = 1024  # scatter_add.cu OWNED_THREADS
OWNED_MAX_EDGES = 2**13
OWNED_MAX_VALUES = 2**14
OWNED_EDGES_PER_BLOCK = 64
OWNED_MAX_FEATURES = 4
OWNED_MIN_CAPACITY = 64
OWNED_MAX_PROBES = 128  # slots an insertion into an owned table probes before its pass is retried
# block_table (float16, F = 1, no counts, at most BLOCK_TABLE_MAX_EDGES): one block, BLOCK_TABLE_SLOTS_PER_EDGE x E
# shared slots rounded up to a power of two, at least 2^BLOCK_TABLE_MIN_LOG2.
BLOCK_TABLE_THREADS = 1024
BLOCK_TABLE_MAX_EDGES = 1024
BLOCK_TABLE_SLOTS_PER_EDGE = 4
BLOCK_TABLE_MIN_LOG2 = 6
# grid_table (float16, F = 1, no counts, kernels with cooperative groups): up to GRID_TABLE_MAX_EDGES edges and
# below GRID_TABLE_MAX_EDGES_PER_NODE edges per node (beyond, its slots contend: split_table), blocks of
# GRID_TABLE_THREADS, at most GRID_TABLE_RESIDENT_BLOCKS_PER_SM per SM; one slot per node up to
# GRID_TABLE_SLOTS_PER_EDGE x E rounded up to a power of two, else that many hashed slots.
GRID_TABLE_THREADS = 128
GRID_TABLE_MAX_EDGES = 2**15
GRID_TABLE_MAX_EDGES_PER_NODE = 16
GRID_TABLE_RESIDENT_BLOCKS_PER_SM = 8
GRID_TABLE_SLOTS_PER_EDGE = 16
# split_table (float16, F = 1, no counts, a hashed table, or up to GRID_TABLE_MAX_EDGES edges where grid_table does
# not run): SPLIT_TABLE_SLOTS_PER_EDGE x E slots rounded up to a power of two while at most
# SPLIT_TABLE_MAX_SPARSE_SLOTS, else 2 x E; the scan on at most SPLIT_TABLE_APPLY_BLOCKS_PER_SM blocks per SM.
SPLIT_TABLE_SLOTS_PER_EDGE = 4
SPLIT_TABLE_MAX_SPARSE_SLOTS = 2**21
SPLIT_TABLE_APPLY_BLOCKS_PER_SM = 32
SPLIT_TABLE_MAX_EDGES = 2**29  # 2^30 slots: the kernels take the capacity as an int


@dataclass(frozen=True)
class DeviceInfo:
    """What the plan needs to know about the GPU (read once per context by the launcher)."""

    arch: int  # compute capability, major * 10 + minor
    sm_count: int
    max_shared_per_block: int  # bytes of dynamic shared memory a block may opt in to
    shared_per_sm: int
    l2_bytes: int


@dataclass(frozen=True)
class LaunchRequest:
    """Everything a plan depends on (hashable: the launcher caches plans on it). workspace: the bytes given;
    counts_aligned / workspace_aligned: counts at a multiple of PAIR_BYTES, the workspace of SLOT_ALIGNMENT;
    cooperative: cooperative launches are possible. algorithm, node_passes and paired override "auto" (tests,
    benchmarks)."""

    num_nodes: int
    num_edges: int
    num_features: int
    dtype: np.dtype
    vec: int = 1
    with_counts: bool = False
    workspace: int = 0
    counts_aligned: bool = True
    workspace_aligned: bool = True
    cooperative: bool = True
    algorithm: str = "auto"
    node_passes: int | None = None
    paired: bool | None = None

    @property
    def half(self) -> bool:
        return bool(np.dtype(self.dtype) == np.float16)

    @property
    def overridden(self) -> bool:
        """Whether an override other than the algorithm narrows "auto" to the atomics paths."""
        return self.node_passes is not None or self.paired is not None


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
class SlotTable:
    """grid_table's and split_table's table: `capacity` 64-bit (node, float32 sum) slots at the workspace's
    start; hashed False: slot = node (capacity = N). split_table's `apply` scans it."""

    capacity: int
    hashed: bool
    apply: KernelLaunch | None = None


@dataclass(frozen=True)
class OwnedTable:
    """An owned block's shared table (scatter_add.cu owned_passes): `capacity` slots; an insertion probes at most
    `probes` of them (beyond, the block retries on a smaller sub-range of its nodes)."""

    capacity: int
    probes: int


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
    counts_offset: int | None = None  # without counts (float16): the in-degrees in the workspace, at this offset


@dataclass(frozen=True)
class LaunchPlan:
    """One launch: `path` (the PATHS entry that made it), `algorithm` (its kernels: "global", "hashed" (float16
    into a hashed table), "shared" or a path's name), the scatter kernel and what goes with it."""

    path: str
    algorithm: str
    vec: int
    scatter: KernelLaunch
    lanes_log2: int = 0  # "shared" / "global": log2 of the lanes sharing a row
    window_loads: int = WINDOW_LOADS  # "global": a warp's windows hold 32 x window_loads edges
    node_ranges: tuple[tuple[int, int], ...] = ()  # one scatter launch per range of target nodes
    table: TableLayout | None = None  # float16 without pairs, on the atomics and chunked paths
    apply: KernelLaunch | None = None  # apply_table over `table`
    apply_lanes_log2: int = 0  # with `apply`
    paired: bool = False  # (value, count) pairs in the counts buffer (or the workspace: pair_chunks > 1), then `fold`
    fold: KernelLaunch | None = None
    pair_chunks: int = 1  # > 1: pairs in the workspace, a scatter and a fold per chunk of PAIRED_MAX_EDGES edges
    sort: SortPlan | None = None  # "sorted" (scatter = its reduce kernel)
    chunk_edges: int = 0  # "chunked": edges each block sorts at a time
    owned: OwnedTable | None = None  # "owned" (scatter = scatter_owned)
    slots: SlotTable | None = None  # "grid_table" / "split_table"
    block_log2: int = 0  # "block_table": log2 of its shared table's slots

    @property
    def cooperative(self) -> bool:
        """Whether the scatter kernel is a cooperative launch (grid_table's grid-wide barriers)."""
        return self.algorithm == "grid_table"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_two(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def lanes_log2_for(chunks: int) -> int:
    """log2 of the lanes sharing one row: the power of two >= the row's chunks, at most a warp (32)."""
    return min(5, (next_power_of_two(chunks)).bit_length() - 1)


def resident_blocks(device: DeviceInfo, shared_bytes: int = 0) -> int:
    """Blocks of THREADS_PER_BLOCK threads resident on one SM (2048 threads), fewer where each needs
    shared_bytes of shared memory (the driver reserves 1 KiB per block besides); at least 1."""
    return max(1, min(2048 // THREADS_PER_BLOCK, device.shared_per_sm // (shared_bytes + 1024)))


def window_loads_for(num_edges: int, warps: int) -> int:
    """The global kernel's index loads per lane per window: as many as spread the edges over all `warps` of its
    grid, 1 to WINDOW_LOADS. Fewer edges than warps x 256 would leave warps idle and the rest adding long windows
    one after another."""
    return max(1, min(WINDOW_LOADS, _cdiv(num_edges, 32 * warps)))


def warp_row_vec(vec: int, num_features: int) -> int:
    """For kernels that give a row to a warp (sorted, chunked): the narrowest width dividing `vec` (so as
    aligned) whose 32 lanes cover the row, else `vec`."""
    return next((v for v in (1, 2, 4) if v <= vec and 32 * v >= num_features), vec)


def _aligned(nbytes: int) -> int:
    return _cdiv(nbytes, TABLE_ALIGNMENT) * TABLE_ALIGNMENT


def table_layout(num_nodes: int, num_edges: int, num_features: int) -> TableLayout | None:
    """The float16 table for these sizes (None when nothing can be added: N = 0 or E = 0): min(N, P) slots,
    P = 2^ceil(log2(2 min(N, E))), hashed where P < N."""
    distinct = min(num_nodes, num_edges)
    if distinct <= 0:
        return None
    hashed_capacity = next_power_of_two(2 * distinct)
    hashed = num_nodes > hashed_capacity
    capacity = hashed_capacity if hashed else num_nodes
    values_offset = _aligned(4 * capacity)
    return TableLayout(capacity=capacity, hashed=hashed, table_log2=hashed_capacity.bit_length() - 1 if hashed else 0,
                       values_offset=values_offset, nbytes=values_offset + 4 * capacity * num_features)


def sort_layout(num_nodes: int, num_edges: int, num_features: int) -> SortLayout | None:
    """The sorted path's workspace for these sizes (None when it cannot run: E = 0, N = 0 or E > 2^31 - 1); the
    partial sums are sized for min(ceil(E / 32), SORT_TARGET_RANGES) ranges."""
    if num_edges <= 0 or num_nodes <= 0 or num_edges > SORT_MAX_EDGES:
        return None
    span = 32 * _cdiv(_cdiv(num_edges, SORT_TARGET_RANGES), 32)
    room = min(_cdiv(num_edges, 32), SORT_TARGET_RANGES)
    tiles = 1 if num_nodes <= SORT_ONE_TILE_NODES else min(SORT_MAX_TILES, _cdiv(num_nodes, SORT_TILE_NODES))
    tile_nodes = _cdiv(num_nodes, tiles)
    tile_sums_offset = _aligned(4 * (num_nodes + 1))
    sorted_offset = tile_sums_offset + _aligned(4 * SORT_MAX_TILES)
    head_offset = sorted_offset + _aligned(8 * num_edges)
    partial_bytes = _aligned(4 * room * num_features)
    tail_offset = head_offset + partial_bytes
    return SortLayout(span, _cdiv(num_edges, span), tile_nodes, _cdiv(num_nodes, tile_nodes), tile_sums_offset,
                      sorted_offset, head_offset, tail_offset, tail_offset + partial_bytes)


def sorting_may_pay(num_edges: int, num_features: int) -> bool:
    """Whether "auto" may sort at these or smaller sizes for some N: the floor every sorting rule lies above."""
    return num_features >= SORT_MIN_FEATURES and num_edges * num_features >= SORT_SPARSE_MIN_VALUES


def sorting_pays(num_nodes: int, num_edges: int, num_features: int, dtype: object) -> bool:
    """Whether "auto" sorts (given counts and the workspace): see SORT_MIN_FEATURES."""
    if not sorting_may_pay(num_edges, num_features):
        return False
    if num_nodes <= CHUNK_MAX_NODES:
        return num_edges * num_features >= SORT_FEW_NODES_MIN_VALUES
    if (kernel_dtype(dtype) == np.float16 and num_nodes * num_features >= SORT_SPARSE_MIN_TABLE
            and num_edges <= SORT_SPARSE_MAX_EDGES_PER_NODE * num_nodes):
        return True
    return num_edges >= SORT_MIN_EDGES and (
        num_features >= SORT_WIDE_FEATURES or (num_features >= SORT_MID_FEATURES and num_edges < SORT_MID_MAX_EDGES))


def grid_table_layout(num_nodes: int, num_edges: int) -> SlotTable:
    """grid_table's table: one slot per node where N <= next_power_of_two(GRID_TABLE_SLOTS_PER_EDGE * E), else
    that many hashed slots."""
    hashed_capacity = next_power_of_two(GRID_TABLE_SLOTS_PER_EDGE * max(1, num_edges))
    return SlotTable(num_nodes, False) if num_nodes <= hashed_capacity else SlotTable(hashed_capacity, True)


def split_table_capacity(num_edges: int) -> int:
    """Slots of the split_table path's table for E edges (SPLIT_TABLE_SLOTS_PER_EDGE); never decreases as E grows."""
    sparse = next_power_of_two(SPLIT_TABLE_SLOTS_PER_EDGE * max(1, num_edges))
    return sparse if sparse <= SPLIT_TABLE_MAX_SPARSE_SLOTS else next_power_of_two(2 * num_edges)


def pair_chunks(num_edges: int) -> int:
    """Chunks of at most PAIRED_MAX_EDGES edges on the paired path (1: the pairs live in the counts)."""
    return max(1, _cdiv(num_edges, PAIRED_MAX_EDGES))


def chunk_shared_bytes(num_nodes: int) -> int:
    """Dynamic shared memory of chunk_reduce: cursors (uint32 [N + 1]) and the chunk's order (uint16)."""
    return 4 * (num_nodes + 1) + 2 * CHUNK_EDGES


def owned_shared_bytes(capacity: int, num_features: int) -> int:
    """Dynamic shared memory of an owned table (scatter_add.cu owned_passes): keys and float32 sums."""
    return 4 * capacity * (1 + num_features)


def owned_table(entries_per_block: int, num_features: int, device: DeviceInfo) -> OwnedTable:
    """A table for about `entries_per_block` distinct nodes: the power of two >= 1.5x that plus 64, at least
    OWNED_MIN_CAPACITY (filled at most 2/3 on average, so insertions probe few slots), halved while one block's
    shared memory cannot hold it (a block whose nodes do not fit runs several passes). ValueError when not even
    OWNED_MIN_CAPACITY slots fit."""
    capacity = next_power_of_two(max(OWNED_MIN_CAPACITY, entries_per_block + entries_per_block // 2 + 64))
    while capacity > OWNED_MIN_CAPACITY and owned_shared_bytes(capacity, num_features) > device.max_shared_per_block:
        capacity //= 2
    if owned_shared_bytes(capacity, num_features) > device.max_shared_per_block:
        raise ValueError(f"rows of {num_features} features are too wide for the owned path's shared table")
    return OwnedTable(capacity, min(capacity, OWNED_MAX_PROBES))


def block_table_log2(num_edges: int) -> int:
    """log2 of block_table's slots for E edges (BLOCK_TABLE_SLOTS_PER_EDGE; at most 2^12 for
    BLOCK_TABLE_MAX_EDGES: 32 KiB of shared memory)."""
    return max(BLOCK_TABLE_MIN_LOG2, (BLOCK_TABLE_SLOTS_PER_EDGE * max(1, num_edges) - 1).bit_length())


def vector_width(num_features: int, src_address: int, src_itemsize: int, dest_address: int) -> int:
    """The widest VEC in (4, 2, 1) that divides num_features and keeps every row's chunks aligned: src rows
    are read VEC elements at a time, the float32 destination (state or table) gets VEC-wide vector atomics."""
    for vec in (4, 2, 1):
        if num_features % vec == 0 and src_address % (src_itemsize * vec) == 0 and dest_address % (4 * vec) == 0:
            return vec
    return 1


def shared_kernel_bytes(num_nodes: int, num_features: int) -> int:
    """Dynamic shared memory of scatter_shared: whole float32 rows of all nodes and a 32-bit count each."""
    return 4 * num_nodes * (num_features + 1)


def shared_holds(num_nodes: int, num_features: int, device: DeviceInfo) -> bool:
    """Whether one block's shared memory holds shared_kernel_bytes beside the row queues. Rows that do not fit
    take global atomics (feature slices of them measured 2-4x slower)."""
    return (num_nodes > 0
            and shared_kernel_bytes(num_nodes, num_features) + QUEUE_BYTES_PER_BLOCK <= device.max_shared_per_block)


def node_ranges_for(num_nodes: int, num_edges: int, row_bytes: int, l2_bytes: int) -> int:
    """How many node ranges ("passes") the global kernel streams the edges through (1 = one launch): several
    where the destination is much larger than L2, rows are re-used (E >= 4 N) and reading the int64 index once
    per pass costs less than one row (passes * 8 bytes <= row bytes); each pass keeps half of L2 of rows."""
    dest_bytes = num_nodes * row_bytes
    if num_edges < 4 * num_nodes or dest_bytes <= l2_bytes // 2:
        return 1
    passes = _cdiv(dest_bytes, l2_bytes // 2)
    return passes if passes * 8 <= row_bytes else 1


# --- the paths: each one what it needs, when "auto" takes it, its workspace, its plan -----------------------------

def _apply_for(table: TableLayout | None, vec: int, num_features: int,
               device: DeviceInfo) -> tuple[KernelLaunch | None, int]:
    """float16's apply_table launch over the table (None without one) and its lanes per row."""
    apply_lanes_log2 = lanes_log2_for(num_features // vec)
    if table is None:
        return None, apply_lanes_log2
    rows_per_block = WARPS_PER_BLOCK * (32 >> apply_lanes_log2)
    apply_blocks = max(1, min(_cdiv(table.capacity, rows_per_block), device.sm_count * RESIDENT_BLOCKS_PER_SM))
    return KernelLaunch(f"apply_table_v{vec}", (apply_blocks, 1)), apply_lanes_log2


class Path:
    """One path of the kernel family: its kernels (the entry points the launcher loads; "_v*": widths 1, 2 and 4)
    and four rules. fits: None where it can run (sizes, dtype, counts, the workspace given, the device), else why
    not; pays: "auto"'s rule; workspace: the bytes it may need at these or smaller sizes (never shrinking: module
    docstring), all it may need where r.algorithm forces it; plan: the launch."""

    name = ""
    kernels: tuple[str, ...] = ()

    def fits(self, r: LaunchRequest, d: DeviceInfo) -> str | None:
        return None

    def pays(self, r: LaunchRequest, d: DeviceInfo) -> bool:
        return True

    def workspace(self, r: LaunchRequest) -> int:
        return 0

    def plan(self, r: LaunchRequest, d: DeviceInfo) -> LaunchPlan:
        raise NotImplementedError

    def need(self, r: LaunchRequest) -> int:
        """The workspace this launch needs for this path (forced: wherever it can run)."""
        return self.workspace(dataclasses.replace(r, algorithm=self.name))

    def _one_plan(self, r: LaunchRequest, scatter: KernelLaunch, vec: int = 1, **fields: object) -> LaunchPlan:
        return LaunchPlan(self.name, self.name, vec, scatter, node_ranges=((0, r.num_nodes),),
                          **fields)  # type: ignore[arg-type]


def _table(r: LaunchRequest) -> TableLayout | None:
    return table_layout(r.num_nodes, r.num_edges, r.num_features) if r.half else None


def _hashed(r: LaunchRequest) -> bool:
    table = _table(r)
    return table is not None and table.hashed


def _auto_uncounted(r: LaunchRequest) -> bool:
    """The paths without counts are "auto"'s only where no override narrows it to the atomics paths (float16:
    and there are nodes to add into)."""
    return not r.with_counts and not r.overridden and (r.num_nodes > 0 or not r.half)


class Uncounted(Path):
    """A path without counts. float16_rows_of_one: it adds float16 rows of one feature only; beyond max_edges
    (None: no bound of its own) it cannot run; slot_table: it needs an aligned workspace for its slot table."""

    float16_rows_of_one = slot_table = False
    max_edges: int | None = None

    def fits(self, r: LaunchRequest, d: DeviceInfo) -> str | None:
        if r.with_counts:
            return f"the {self.name} path runs without counts; counts were requested"
        if self.float16_rows_of_one and (not r.half or r.num_features != 1):
            return (f"the {self.name} path adds float16 rows of one feature, not {r.num_features} "
                    f"{'float16' if r.half else 'float32'} features")
        if self.max_edges is not None and r.num_edges > self.max_edges:
            return f"the {self.name} path takes at most {self.max_edges} edges, not {r.num_edges}"
        if self.slot_table and (not r.workspace_aligned or r.workspace < self.need(r)):
            return (f"the {self.name} path needs an {SLOT_ALIGNMENT}-byte aligned workspace of {self.need(r)} bytes "
                    f"(got {r.workspace})")
        return None


class Chunked(Path):
    name, kernels = "chunked", ("chunk_reduce_v*", "apply_table_v*")

    def fits(self, r: LaunchRequest, d: DeviceInfo) -> str | None:
        if r.num_nodes > CHUNK_MAX_NODES or _hashed(r):
            return (f"the chunked path sorts in shared memory at most {CHUNK_MAX_NODES} nodes (float16: with one "
                    f"table slot per node); got {r.num_nodes} nodes, {r.num_edges} edges")
        return None

    def pays(self, r: LaunchRequest, d: DeviceInfo) -> bool:
        if r.paired is not None or r.num_nodes > CHUNK_MAX_NODES or r.num_features < SORT_MIN_FEATURES:
            return False
        least = (SORT_MIN_FEATURES if r.with_counts
                 else CHUNK_HALF_UNCOUNTED_MIN_FEATURES if r.half else CHUNK_UNCOUNTED_MIN_FEATURES)
        return (r.num_edges >= CHUNK_MIN_EDGES and r.num_features >= least) or any(
            counts == r.with_counts and r.num_nodes <= most and r.num_features >= features
            and r.num_edges >= per_node * r.num_nodes for counts, most, features, per_node in CHUNK_WINDOWS)

    def plan(self, r: LaunchRequest, d: DeviceInfo) -> LaunchPlan:
        """The chunks fill whole waves of resident blocks: with S resident slots per feature slice and R = ceil(E /
        (S * CHUNK_EDGES)) rounds, each chunk holds ceil(E / (S * R)) edges rounded up to a multiple of 32, and
        the grid has min(S, chunks) blocks: every block runs R rounds, or R - 1, none a last round alone."""
        vec = warp_row_vec(r.vec, r.num_features)
        shared = chunk_shared_bytes(r.num_nodes)
        slices = _cdiv(r.num_features, 32 * vec)
        slots = max(1, resident_blocks(d, shared) * d.sm_count // slices)
        rounds = max(1, _cdiv(r.num_edges, slots * CHUNK_EDGES))
        chunk_edges = 32 * max(1, _cdiv(r.num_edges, 32 * slots * rounds))
        blocks = max(1, min(slots, _cdiv(r.num_edges, chunk_edges)))
        table = _table(r)
        apply, apply_lanes_log2 = _apply_for(table, vec, r.num_features, d)
        return LaunchPlan("chunked", "chunked", vec, KernelLaunch(f"chunk_reduce_v{vec}", (blocks, slices), shared),
                          node_ranges=((0, r.num_nodes),), table=table, apply=apply,
                          apply_lanes_log2=apply_lanes_log2, chunk_edges=chunk_edges)


class BlockTable(Uncounted):
    name, kernels = "block_table", ("scatter_block_table",)
    float16_rows_of_one, max_edges = True, BLOCK_TABLE_MAX_EDGES  # one block's shared table

    def pays(self, r: LaunchRequest, d: DeviceInfo) -> bool:
        return _auto_uncounted(r)

    def plan(self, r: LaunchRequest, d: DeviceInfo) -> LaunchPlan:
        log2 = block_table_log2(r.num_edges)  # an int32 key and a float32 sum per slot
        return self._one_plan(r, KernelLaunch("scatter_block_table", (1, 1), 8 << log2, BLOCK_TABLE_THREADS),
                              block_log2=log2)


class GridTable(Uncounted):
    name, kernels = "grid_table", ("scatter_grid_table",)
    float16_rows_of_one, max_edges = True, GRID_TABLE_MAX_EDGES  # its workspace is sized for at most that many

    def fits(self, r: LaunchRequest, d: DeviceInfo) -> str | None:
        why = super().fits(r, d)
        if why is None and (not r.cooperative or not r.workspace_aligned or r.workspace < self.need(r)):
            why = (f"the grid_table path needs cooperative launches (kernels compiled with cooperative groups) and "
                   f"an {SLOT_ALIGNMENT}-byte aligned workspace of {self.need(r)} bytes (got {r.workspace})")
        return why

    def pays(self, r: LaunchRequest, d: DeviceInfo) -> bool:
        """A grid of at most GRID_TABLE_RESIDENT_BLOCKS_PER_SM blocks per SM (all resident)."""
        blocks = _cdiv(r.num_edges, GRID_TABLE_THREADS)
        return (_auto_uncounted(r) and blocks <= GRID_TABLE_RESIDENT_BLOCKS_PER_SM * d.sm_count
                and r.num_edges < GRID_TABLE_MAX_EDGES_PER_NODE * r.num_nodes)

    def workspace(self, r: LaunchRequest) -> int:
        """8 bytes per slot for min(E, GRID_TABLE_MAX_EDGES) edges, whatever F, float16 without counts."""
        if r.with_counts or not r.half or r.num_edges == 0:
            return 0
        return 8 * grid_table_layout(r.num_nodes, min(r.num_edges, GRID_TABLE_MAX_EDGES)).capacity

    def plan(self, r: LaunchRequest, d: DeviceInfo) -> LaunchPlan:
        scatter = KernelLaunch("scatter_grid_table", (_cdiv(r.num_edges, GRID_TABLE_THREADS), 1), 0, GRID_TABLE_THREADS)
        return self._one_plan(r, scatter, slots=grid_table_layout(r.num_nodes, r.num_edges))


class SplitTable(Uncounted):
    name, kernels = "split_table", ("scatter_split_table", "apply_split_table")
    float16_rows_of_one, max_edges, slot_table = True, SPLIT_TABLE_MAX_EDGES, True

    def pays(self, r: LaunchRequest, d: DeviceInfo) -> bool:
        return _auto_uncounted(r) and (_hashed(r) or r.num_edges <= GRID_TABLE_MAX_EDGES)

    def workspace(self, r: LaunchRequest) -> int:
        """8 bytes per slot, whatever F, float16 without counts: for the largest E it pays for at these N (its float16
        table hashed, E < N / 2, or at most GRID_TABLE_MAX_EDGES), or forced, any E up to SPLIT_TABLE_MAX_EDGES."""
        if r.with_counts or not r.half or r.num_edges == 0:
            return 0
        hashed_edges = (1 << max(0, (r.num_nodes - 1).bit_length() - 1)) // 2  # the most whose table is hashed
        edges = (min(r.num_edges, SPLIT_TABLE_MAX_EDGES) if r.algorithm == self.name
                 else min(r.num_edges, max(hashed_edges, GRID_TABLE_MAX_EDGES)))
        return 8 * split_table_capacity(edges) if edges > 0 else 0

    def plan(self, r: LaunchRequest, d: DeviceInfo) -> LaunchPlan:
        capacity = split_table_capacity(r.num_edges)
        apply_blocks = max(1, min(_cdiv(capacity, THREADS_PER_BLOCK), SPLIT_TABLE_APPLY_BLOCKS_PER_SM * d.sm_count))
        slots = SlotTable(capacity, True, KernelLaunch("apply_split_table", (apply_blocks, 1)))
        return self._one_plan(r, KernelLaunch("scatter_split_table", (_cdiv(r.num_edges, THREADS_PER_BLOCK), 1)),
                              slots=slots)


class Owned(Uncounted):
    name, kernels = "owned", ("scatter_owned",)

    def pays(self, r: LaunchRequest, d: DeviceInfo) -> bool:
        return (_auto_uncounted(r) and r.half and _hashed(r) and r.num_edges <= OWNED_MAX_EDGES
                and r.num_edges * r.num_features <= OWNED_MAX_VALUES and r.num_features <= OWNED_MAX_FEATURES)

    def plan(self, r: LaunchRequest, d: DeviceInfo) -> LaunchPlan:
        """A block per OWNED_EDGES_PER_BLOCK edges, at most one per SM, each with a table for its share."""
        blocks = max(1, min(d.sm_count, _cdiv(r.num_edges, OWNED_EDGES_PER_BLOCK)))
        table = owned_table(_cdiv(r.num_edges, blocks), r.num_features, d)
        return self._one_plan(r, KernelLaunch("scatter_owned", (blocks, 1), owned_shared_bytes(
            table.capacity, r.num_features), OWNED_THREADS), owned=table)


class Direct(Uncounted):
    name, kernels = "direct", ("scatter_direct_v*",)

    def fits(self, r: LaunchRequest, d: DeviceInfo) -> str | None:
        return "the direct path adds float32 rows; float16 takes the table paths" if r.half else super().fits(r, d)

    def pays(self, r: LaunchRequest, d: DeviceInfo) -> bool:
        """Not where the shared kernel (many edges per node) or node passes (a state far beyond L2) do better."""
        few = (r.num_features == 1 and r.num_nodes <= SHARED_OVER_DIRECT_FEW_NODES
               and r.num_edges >= SHARED_OVER_DIRECT_FEW_MIN_EDGES)
        least = SHARED_OVER_DIRECT_FEW_MIN_EDGES_PER_NODE if few else SHARED_OVER_DIRECT_MIN_EDGES_PER_NODE
        if not _auto_uncounted(r) or (shared_holds(r.num_nodes, r.num_features, d) and _shared_rows_pay(r)
                                      and r.num_edges >= least * r.num_nodes):
            return False
        return node_ranges_for(r.num_nodes, r.num_edges, 4 * r.num_features, d.l2_bytes) == 1

    def plan(self, r: LaunchRequest, d: DeviceInfo) -> LaunchPlan:
        elements = r.num_edges * (r.num_features // r.vec)
        blocks = max(1, min(_cdiv(elements, THREADS_PER_BLOCK), DIRECT_BLOCKS_PER_SM * d.sm_count))
        return self._one_plan(r, KernelLaunch(f"scatter_direct_v{r.vec}", (blocks, 1)), r.vec)


class Sorted(Path):
    name = "sorted"
    kernels = ("sort_count", "sort_tile_sums", "sort_scan_tiles", "sort_cursors", "sort_place", "sort_reduce_v*",
               "sort_fixup_v*")

    def fits(self, r: LaunchRequest, d: DeviceInfo) -> str | None:
        """With counts, or float16 without: then the in-degrees live in the workspace (SortPlan.counts_offset)."""
        if (not r.with_counts and not r.half) or sort_layout(r.num_nodes, r.num_edges, r.num_features) is None or (
                r.workspace < self.need(r)):
            return (f"the sorted path needs counts (float32) and a workspace of sort_layout bytes (got "
                    f"counts={r.with_counts}, workspace={r.workspace}, {r.num_nodes} nodes, {r.num_edges} edges)")
        return None

    def pays(self, r: LaunchRequest, d: DeviceInfo) -> bool:
        """sorting_pays, without counts too (float16: instead of a table of N F float32 values) beyond
        CHUNK_MAX_NODES nodes, where the chunked path's rules differ with and without counts (BENCHMARKS.md "The
        AOT chains on the kernel family": the float16 F = 64 cells with and without counts)."""
        if not r.with_counts and r.num_nodes <= CHUNK_MAX_NODES:
            return False
        return r.paired is None and sorting_pays(r.num_nodes, r.num_edges, r.num_features, r.dtype)

    def workspace(self, r: LaunchRequest) -> int:
        """sort_layout's bytes (float16 without counts: and 8 N for the in-degrees) where "auto" may sort at these
        or smaller sizes (sorting_may_pay; without counts beyond CHUNK_MAX_NODES nodes), or forced
        wherever it can run; else 0 (a launch without counts stays free of O(N) work where it has no table)."""
        uncounted_may_pay = r.half and r.num_nodes > CHUNK_MAX_NODES
        may_pay = sorting_may_pay(r.num_edges, r.num_features) and (r.with_counts or uncounted_may_pay)
        if (not r.with_counts and not r.half) or not (r.algorithm == self.name or may_pay):
            return 0
        layout = sort_layout(r.num_nodes, r.num_edges, r.num_features)
        if layout is None:
            return 0
        return layout.nbytes if r.with_counts else layout.nbytes + _aligned(8 * r.num_nodes)

    def plan(self, r: LaunchRequest, d: DeviceInfo) -> LaunchPlan:
        """As many sort_count / sort_place blocks as are resident (their atomics wait on the L2: the more in
        flight, the better), each with at least one step of edges; with tallies in shared memory,
        SORT_PRIVATE_BLOCKS_PER_SM per SM."""
        vec = warp_row_vec(r.vec, r.num_features)
        nodes, edges = r.num_nodes, r.num_edges
        layout = sort_layout(nodes, edges, r.num_features)
        assert layout is not None  # fits
        private = nodes <= SORT_PRIVATE_MAX_NODES and edges >= SORT_PRIVATE_MIN_EDGES_PER_NODE * nodes
        private_nodes = nodes if private else 0
        resident = resident_blocks(d, 4 * private_nodes)
        if private_nodes:
            resident = min(resident, SORT_PRIVATE_BLOCKS_PER_SM)
        blocks = max(1, min(_cdiv(edges, SORT_EDGES_PER_THREAD * THREADS_PER_BLOCK), resident * d.sm_count))
        passes = 1 if private_nodes else max(1, min(SORT_MAX_PLACE_PASSES, _cdiv(8 * edges, d.l2_bytes // 2)))
        place_ranges = tuple((nodes * k // passes, nodes * (k + 1) // passes) for k in range(passes))
        slices = _cdiv(r.num_features, 32 * vec)
        reduce = KernelLaunch(f"sort_reduce_v{vec}", (_cdiv(layout.ranges, WARPS_PER_BLOCK), slices))
        fixup = None
        if layout.ranges > 1:
            fixup = KernelLaunch(f"sort_fixup_v{vec}", (_cdiv(layout.ranges - 1, WARPS_PER_BLOCK), slices))
        sort = SortPlan(layout, KernelLaunch("sort_count", (blocks, 1), 4 * private_nodes), private_nodes,
                        place_ranges, reduce, fixup, None if r.with_counts else layout.nbytes)
        return LaunchPlan("sorted", "sorted", vec, reduce, node_ranges=((0, nodes),), sort=sort)


def _pairs_possible(r: LaunchRequest) -> bool:
    """One feature and an 8-byte-aligned buffer for the pairs (pairs_in_workspace): the counts, or float16 without
    counts up to PAIRED_MAX_EDGES edges the workspace; with counts beyond them, a workspace as well."""
    if r.num_features != 1 or r.num_nodes < 1 or r.workspace < Pairs().workspace(r):
        return False
    return r.counts_aligned if r.with_counts else _uncounted_pairs(r) and r.workspace_aligned


def _uncounted_pairs(r: LaunchRequest) -> bool:
    """Whether a launch without counts may pair: float16 of one feature, up to PAIRED_MAX_EDGES edges."""
    return not r.with_counts and r.half and r.num_features == 1 and r.num_edges <= PAIRED_MAX_EDGES


def pairs_in_workspace(with_counts: bool, num_edges: int) -> bool:
    """Where the paired path keeps its pairs: in the counts up to PAIRED_MAX_EDGES edges, else in the workspace
    (beyond them, a chunk's pairs; float16 without counts, each node's float32 sum beside its count, as a table
    would hold it, so those launches run as the same cells with counts do)."""
    return not with_counts or num_edges > PAIRED_MAX_EDGES


def _pairs_pay(r: LaunchRequest, d: DeviceInfo) -> bool:
    return (_pairs_possible(r) and d.arch >= 90
            and r.num_edges >= PAIRED_MIN_EDGES_PER_NODE * pair_chunks(r.num_edges) * r.num_nodes)


def _paired(r: LaunchRequest, default: bool) -> bool:
    if r.paired and not _pairs_possible(r):
        raise ValueError(f"the paired path needs one feature, counts ({PAIR_BYTES}-byte aligned) or float16 "
                         f"without counts up to {PAIRED_MAX_EDGES} edges, and where the pairs do not live in the "
                         f"counts a workspace for the pairs (got counts={r.with_counts}, aligned={r.counts_aligned}, "
                         f"{r.num_features} features, {r.num_edges} edges, workspace={r.workspace})")
    return r.paired if r.paired is not None else default


def _shared_rows_pay(r: LaunchRequest) -> bool:
    """Whether rows this wide pay for the shared kernel: F = 1, or small blocks with many edges per value."""
    values = r.num_nodes * r.num_features
    if r.num_features == 1:
        return True
    if r.with_counts:
        return values <= SHARED_WIDE_MAX_VALUES and r.num_edges >= SHARED_WIDE_MIN_EDGES_PER_VALUE * values
    return any((features is None or r.num_features <= features) and (r.half or not half_only) and values <= most
               and r.num_edges >= least * values for features, half_only, most, least in SHARED_UNCOUNTED_WINDOWS)


def _fold_and_apply(r: LaunchRequest, d: DeviceInfo, plan: LaunchPlan) -> LaunchPlan:
    """The plan with float16's table and apply (none with pairs), or the pairs' fold."""
    table = None if plan.paired else _table(r)
    apply, apply_lanes_log2 = _apply_for(table, plan.vec, r.num_features, d)
    chunks = pair_chunks(r.num_edges) if plan.paired else 1
    fold = None
    if plan.paired:
        fold = KernelLaunch("fold_pairs" if chunks == 1 else "fold_pair_chunk",
                            (max(1, _cdiv(r.num_nodes, THREADS_PER_BLOCK)), 1))
    return dataclasses.replace(plan, table=table, apply=apply, apply_lanes_log2=apply_lanes_log2, fold=fold,
                               pair_chunks=chunks)


class Shared(Path):
    name, kernels = "shared", ("scatter_shared_v*", "scatter_shared_pairs")

    def fits(self, r: LaunchRequest, d: DeviceInfo) -> str | None:
        """float16: only where the table has one slot per node."""
        if _hashed(r) or not shared_holds(r.num_nodes, r.num_features, d):
            return (f"the shared-memory kernel cannot hold {r.num_nodes} nodes of {r.num_features} features on this "
                    "device")
        return None

    def pays(self, r: LaunchRequest, d: DeviceInfo) -> bool:
        few = not r.half and r.num_nodes < SHARED_FEW_NODES
        most = SHARED_OVER_FLOAT32_PAIRS_MIN_EDGES_PER_NODE if few else SHARED_OVER_PAIRS_MIN_EDGES_PER_NODE
        pairs_beat_shared = _pairs_pay(r, d) and r.num_edges < most * r.num_nodes
        return (r.num_edges >= SHARED_MIN_EDGES_PER_NODE * r.num_nodes and _shared_rows_pay(r)
                and not pairs_beat_shared)

    def plan(self, r: LaunchRequest, d: DeviceInfo) -> LaunchPlan:
        """About 4 edges per node per block, so flushing a block's sums costs less than summing them; at least one
        block per SM, at most the resident blocks."""
        pairs = _paired(r, False)
        shared_bytes = shared_kernel_bytes(r.num_nodes, r.num_features)
        most = max(1, d.sm_count * resident_blocks(d, shared_bytes + QUEUE_BYTES_PER_BLOCK))
        blocks = max(1, min(most, max(d.sm_count, _cdiv(r.num_edges, 4 * r.num_nodes))))
        kernel = "scatter_shared_pairs" if pairs else f"scatter_shared_v{r.vec}"
        plan = LaunchPlan("shared", "shared", r.vec, KernelLaunch(kernel, (blocks, 1), shared_bytes),
                          lanes_log2=lanes_log2_for(r.num_features // r.vec), node_ranges=((0, r.num_nodes),),
                          paired=pairs)
        return _fold_and_apply(r, d, plan)


class Global(Path):
    """Global atomics into the state (node passes for states far beyond L2), float16's table (hashed or one
    slot per node), and, as Pairs, the (value, count) pairs."""

    name, kernels = "global", ("scatter_global_v*", "scatter_hashed_v*", "apply_table_v*")

    def workspace(self, r: LaunchRequest) -> int:
        table = _table(r)
        return 0 if table is None else table.nbytes

    def plan(self, r: LaunchRequest, d: DeviceInfo, pairs: bool | None = None) -> LaunchPlan:
        pairs = _paired(r, _pairs_pay(r, d)) if pairs is None else pairs
        hashed = not pairs and _hashed(r)
        most = d.sm_count * RESIDENT_BLOCKS_PER_SM
        loads = window_loads_for(r.num_edges, most * WARPS_PER_BLOCK)
        blocks = max(1, min(most, _cdiv(r.num_edges, WARPS_PER_BLOCK * 32 * loads)))
        kernel = "scatter_global_pairs" if pairs else f"scatter_hashed_v{r.vec}" if hashed else f"scatter_global_v{r.vec}"
        passes = 1
        if not hashed:
            passes = r.node_passes if r.node_passes is not None else node_ranges_for(
                r.num_nodes, r.num_edges, 4 * r.num_features, d.l2_bytes)
            passes = max(1, min(passes, r.num_nodes))
        ranges = tuple((r.num_nodes * k // passes, r.num_nodes * (k + 1) // passes) for k in range(passes))
        plan = LaunchPlan("pairs" if pairs else "global", "hashed" if hashed else "global", r.vec,
                          KernelLaunch(kernel, (blocks, 1)), lanes_log2=lanes_log2_for(r.num_features // r.vec),
                          window_loads=loads, node_ranges=ranges, paired=pairs)
        return _fold_and_apply(r, d, plan)


class Pairs(Path):
    name, kernels = "pairs", ("scatter_global_pairs", "fold_pairs", "fold_pair_chunk")

    def fits(self, r: LaunchRequest, d: DeviceInfo) -> str | None:
        return None if _pairs_possible(r) else "the paired path cannot run here"

    def pays(self, r: LaunchRequest, d: DeviceInfo) -> bool:
        return r.paired is not False and _pairs_pay(r, d)

    def workspace(self, r: LaunchRequest) -> int:
        """8 N with counts beyond PAIRED_MAX_EDGES edges, whatever F; float16 of one feature without counts, 8
        min(N, E): the pairs of the nodes a launch of at most these sizes may pair (at least one edge each)."""
        if r.with_counts:
            return PAIR_BYTES * r.num_nodes if r.num_edges > PAIRED_MAX_EDGES else 0
        return PAIR_BYTES * min(r.num_nodes, r.num_edges // PAIRED_MIN_EDGES_PER_NODE) if _uncounted_pairs(r) else 0

    def plan(self, r: LaunchRequest, d: DeviceInfo) -> LaunchPlan:
        return Global().plan(r, d, pairs=True)


PATHS: tuple[Path, ...] = (Chunked(), BlockTable(), GridTable(), SplitTable(), Owned(), Direct(), Sorted(), Shared(),
                           Pairs(), Global())
AUTO = tuple(path.name for path in PATHS)
_BY_NAME = {path.name: path for path in PATHS}
# what `algorithm` may force ("pairs" is forced with paired=True)
ALGORITHMS = ("auto", "global", "shared", "sorted", "chunked", "direct", "block_table", "grid_table", "split_table",
              "owned")
UNCOUNTED_ALGORITHMS = ("direct", "block_table", "grid_table", "split_table", "owned")  # without counts only


def plan_launch(request: LaunchRequest, device: DeviceInfo) -> LaunchPlan:
    """The plan of one launch with num_edges > 0: the forced path (ValueError where it cannot run), or the first
    path of AUTO that fits and pays."""
    if request.algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {request.algorithm!r}: expected one of {', '.join(ALGORITHMS)}")
    if request.algorithm != "auto":
        path = _BY_NAME[request.algorithm]
        why = path.fits(request, device)
        if why is not None:
            raise ValueError(why)
        return path.plan(request, device)
    return next(path.plan(request, device) for path in PATHS
                if path.fits(request, device) is None and path.pays(request, device))


def check_sizes(num_nodes: object, num_edges: object, num_features: object) -> None:
    """ValueError naming the first of the sizes that is not a non-negative integer."""
    for name, value in (("num_nodes", num_nodes), ("num_edges", num_edges), ("num_features", num_features)):
        if not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


def workspace_size(num_nodes: int, num_edges: int, num_features: int, dtype: object, *,
                   with_counts: bool = True, algorithm: str = "auto") -> int:
    """Bytes of workspace a launch of at most these sizes needs: the most any path may need (Path.workspace);
    algorithm="sorted" or "split_table" sizes for that path wherever it can run."""
    check_sizes(num_nodes, num_edges, num_features)
    sizes = LaunchRequest(num_nodes, num_edges, num_features, kernel_dtype(dtype), with_counts=with_counts,
                          algorithm=algorithm)
    return max(path.workspace(sizes) for path in PATHS)


def describe(plan: LaunchPlan) -> str:
    """One line for logs and benchmarks, e.g. 'global vec=4 grid=528x1 passes=9'."""
    text = f"{plan.algorithm} vec={plan.vec} grid={plan.scatter.grid[0]}x{plan.scatter.grid[1]}"
    if len(plan.node_ranges) > 1:
        text += f" passes={len(plan.node_ranges)}"
    if plan.scatter.shared_bytes:
        text += f" smem={plan.scatter.shared_bytes}"
    if plan.table is not None:
        text += f" table={plan.table.capacity}{'h' if plan.table.hashed else 'd'}"
    if plan.paired:
        text += " pairs" if plan.pair_chunks == 1 else f" pairs chunks={plan.pair_chunks}"
    if plan.chunk_edges:
        text += f" chunk={plan.chunk_edges}"
    if plan.owned is not None:
        text += f" block={plan.scatter.block} table={plan.owned.capacity}"
    if plan.slots is not None and plan.algorithm == "grid_table":
        text += f" block={plan.scatter.block} table={plan.slots.capacity}{'h' if plan.slots.hashed else 'd'}"
    elif plan.slots is not None:
        text += f" table={plan.slots.capacity}h"
    if plan.sort is not None:
        text += f" span={plan.sort.layout.span}" + (" private" if plan.sort.private_nodes else "")
        if len(plan.sort.place_ranges) > 1:
            text += f" place_passes={len(plan.sort.place_ranges)}"
    return text
