"""Every kernel on made-up inputs (issue 25): it must end and stay inside its buffers whatever they hold.

TensorRT may time a plugin on inputs it made up while it builds, and an engine runs on whatever its inputs hold.
Each AOT entry point of scatter_add.cu is launched as TensorRT launches it, step by step of its chain in
plugin/scatter_add_op.py, and so is overwrite.cu's kernel by plugin/overwrite_op.py OVERWRITE_ROWS's chain
(inplace.launch.PreparedChain of the one step, every tactic; the scratch tensors made up too, not filled); each
other kernel of scatter_add.cu as
the launcher does (PreparedScatterAdd's own driver calls for one case of sizes and options, the memsets left out),
on buffers refilled before every launch with:
  random    random bytes in every buffer;
  extreme   indices that are negative, huge or wrap to a node in 32 bits, NaN / Inf / -0 features, and 32-bit
            table and workspace words without an empty key (-1): full tables, cursors and offsets far out;
  in_range  indices all valid, tables full of valid but foreign keys, workspace words just around N and E.
Garbage in may give garbage out; the kernel must end and must not touch memory outside its buffers. Each case
runs in a child process with a time limit (a hang fails naming the kernel), once plainly and once under
compute-sanitizer memcheck where that is found (FUZZ_SANITIZER=path, or 0 to leave it out). FUZZ_TIMEOUT_S and
FUZZ_JOBS set the children's time limit and how many run at once.

Without a GPU the rest still runs: the kernels are read from the .cu sources (macros expanded), each must have a
fuzz case (a kernel added without one fails here), and every case is dry-run through the launcher on an
H200-like device, so each case is known to launch the kernels it names.
"""

import dataclasses
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a child: python3 tests/kernels/test_kernel_fuzz_gpu.py CASE ARTIFACTS
    sys.path.insert(0, str(ROOT))

from plugin.kernels import plan  # noqa: E402
from plugin.kernels.compile import SOURCE_PATH  # noqa: E402
from plugin.kernels.overwrite import OVERWRITE_SOURCE_PATH  # noqa: E402
from plugin.kernels.plan import OwnedTable, workspace_size  # noqa: E402

PATTERNS = ("random", "extreme", "in_range")
FILL_CHUNK = 1 << 20  # bytes generated per buffer; larger buffers repeat them (device-to-device copies)


# --- the kernels the sources define -------------------------------------------------------------------------
_ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)*([\w#]+)\s*\(')
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)(.*)$", re.MULTILINE)


def entry_points(path: Path) -> set[str]:
    """The extern "C" kernels of a .cu file, those stamped out by macros (#define M(VEC) ... M(1) M(2), nested
    ones too) expanded and both sides of every #if: what NVRTC may export, read without compiling."""
    text = re.sub(r"//[^\n]*", "", path.read_text()).replace("\\\n", " ")
    text = text.replace("PLUGIN_KERNEL", 'extern "C" __global__ void')  # scatter_add.cu: the Python plugin's kernels
    macros = {name: ([p.strip() for p in params.split(",")], body) for name, params, body in _DEFINE.findall(text)}
    plain = _DEFINE.sub("", text)

    def expand(invocation: re.Match) -> str:
        params, body = macros[invocation.group(1)]
        values = dict(zip(params, (a.strip() for a in invocation.group(2).split(","))))
        return re.sub(r"\w+", lambda m: values.get(m.group(), m.group()), body).replace("##", "")

    while macros and (expanded := re.sub(rf"\b({'|'.join(macros)})\(([^()]*)\)", expand, plain)) != plain:
        plain = expanded
    return set(_ENTRY.findall(plain))


# --- the cases ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PluginLaunch:
    """One scatter-add of the Python plugin's launcher (scatter_add_launch's sizes and options) and the kernels
    of its launch sequence to fuzz. owned_table forces scatter_owned's table (capacity, probes)."""

    dtype: str
    nodes: int
    edges: int
    features: int
    kernels: tuple[str, ...]
    counts: bool = True
    algorithm: str = "auto"
    paired: bool | None = None
    owned_table: tuple[int, int] | None = None


@dataclass(frozen=True)
class FamilyLaunch:
    """One chain of plugin/scatter_add_op.py (its aot_* kernels of scatter_add.cu) or OVERWRITE_ROWS's, each step
    launched as TensorRT launches its AOT plugin (inplace.launch.PreparedChain of that step) for these sizes, the
    scratch tensors made-up like every other buffer."""

    dtype: str
    chain: str  # a name of FAMILY_CHAINS
    nodes: int
    edges: int
    features: int


def family_chains() -> dict[str, Any]:
    """{name: (op, chain)}: every chain of the project's ops (plugin/inplace_ops.py PROJECT_OPS)."""
    from plugin import scatter_add_op as op
    from plugin.overwrite_op import OVERWRITE_ROWS

    plain, counts = op.SCATTER_ADD, op.SCATTER_ADD_COUNTS
    return {"state": (plain, op.state_chain(False)), "state_counts": (counts, op.state_chain(True)),
            "table": (plain, op.table_chain(False)), "table_counts": (counts, op.table_chain(True)),
            "split": (plain, op.split_chain()), "block": (plain, op.block_chain()),
            "pairs": (counts, op.pairs_chain()), "pair_chunks": (counts, op.pair_chunks_chain(2)),
            "sorted": (plain, op.sorted_chain(False)), "sorted_counts": (counts, op.sorted_chain(True)),
            "sorted_4": (counts, op.sorted_chain(True, 4)), "sorted_wide": (counts, op.sorted_chain(True, 1, wide=True)),
            "overwrite": (OVERWRITE_ROWS, OVERWRITE_ROWS.chains[0])}


def family_dtypes(launch: FamilyLaunch) -> dict[str, str]:
    return {"state": launch.dtype, "src": launch.dtype}


def family_kernels(launch: FamilyLaunch) -> tuple[str, ...]:
    """The kernel of every step and tactic of the launch's chain, for its dtype."""
    dtypes = family_dtypes(launch)
    return tuple(kernel.name for step in family_chains()[launch.chain][1].steps
                 for kernel in (step.kernel(dtypes), *step.tactics(dtypes)))


def _family(dtype: str, chains: tuple[str, ...], shapes: tuple[tuple[int, int, int], ...]) -> tuple[FamilyLaunch, ...]:
    return tuple(FamilyLaunch(dtype, chain, *shape) for chain in chains for shape in shapes)


def _widths(dtype: str, nodes: int, edges: int, kinds: tuple[str, ...], **options: Any) -> tuple[PluginLaunch, ...]:
    """kind_v1, _v2 and _v4 of each kind, from F = 1, 2 and 4 (every buffer is 256-byte aligned)."""
    return tuple(PluginLaunch(dtype, nodes, edges, vec, tuple(f"{kind}_v{vec}" for kind in kinds), **options)
                 for vec in (1, 2, 4))


def _sorted(dtype: str) -> tuple[PluginLaunch, ...]:
    # 20000 nodes: ten scan tiles; 10000 edges in 313 warp ranges of 32: fixups; 100 nodes: tallies in shared memory;
    # F = 8, 64, 128: a warp per row at widths 1, 2, 4
    sort = ("sort_count", "sort_tile_sums", "sort_scan_tiles", "sort_cursors", "sort_place")
    return (PluginLaunch(dtype, 20000, 10000, 8, (*sort, "sort_reduce_v1", "sort_fixup_v1"), algorithm="sorted"),
            PluginLaunch(dtype, 20000, 10000, 64, ("sort_reduce_v2", "sort_fixup_v2"), algorithm="sorted"),
            PluginLaunch(dtype, 100, 10000, 128, ("sort_count", "sort_place", "sort_reduce_v4", "sort_fixup_v4"),
                         algorithm="sorted"))


def _chunked(dtype: str) -> tuple[PluginLaunch, ...]:
    # float16 sums into its table (one slot per node), then applies it
    kinds = ("chunk_reduce", "apply_table") if dtype == "float16" else ("chunk_reduce",)
    return tuple(PluginLaunch(dtype, 1000, 20000, features, tuple(f"{kind}_v{vec}" for kind in kinds),
                              algorithm="chunked") for features, vec in ((8, 1), (64, 2), (128, 4)))


def _pairs(dtype: str) -> tuple[PluginLaunch, ...]:
    # beyond 2^24 edges the pairs live in the workspace, folded after each chunk (only the folds are fuzzed there)
    pairs = dict(algorithm="global", paired=True)
    return (PluginLaunch(dtype, 1000, 20000, 1, ("scatter_global_pairs", "fold_pairs"), **pairs),
            PluginLaunch(dtype, 1000, plan.PAIRED_MAX_EDGES + 1000, 1, ("fold_pair_chunk",), **pairs))


def _shared(dtype: str) -> tuple[PluginLaunch, ...]:
    kinds = ("scatter_shared", "apply_table") if dtype == "float16" else ("scatter_shared",)
    return _widths(dtype, 64, 20000, kinds, algorithm="shared", paired=False) + (
        PluginLaunch(dtype, 64, 20000, 1, ("scatter_shared_pairs", "fold_pairs"), algorithm="shared", paired=True),)


def _small_updates(dtype: str) -> tuple[PluginLaunch, ...]:
    owned: dict[str, Any] = dict(counts=False, algorithm="owned")
    cases = (PluginLaunch(dtype, 10**6, 2000, 1, ("scatter_owned",), **owned),
            PluginLaunch(dtype, 10**6, 2000, 3, ("scatter_owned",), **owned),
            # tables of 64 slots probed to the last one: blocks overflow and retry on sub-ranges (issue 27)
            PluginLaunch(dtype, 10**6, 4096, 1, ("scatter_owned",), owned_table=(64, 64), **owned))
    if dtype == "float16":  # one cooperative launch (hashed slots, then one slot per node); the split table; one block
        cases += (PluginLaunch(dtype, 10**6, 1000, 1, ("scatter_block_table",), counts=False, algorithm="block_table"),
                  PluginLaunch(dtype, 10**6, 2000, 1, ("scatter_grid_table",), counts=False, algorithm="grid_table"),
                  PluginLaunch(dtype, 10**6, 10000, 1, ("scatter_split_table", "apply_split_table"), counts=False,
                               algorithm="split_table"),
                  PluginLaunch(dtype, 1000, 2000, 1, ("scatter_grid_table",), counts=False, algorithm="grid_table"))
    return cases


GLOBAL: dict[str, Any] = dict(algorithm="global", paired=False)
# the AOT family's shapes: shared memory (few nodes, many edges each), global atomics or the direct kernel at
# widths 1, 2 and 4 (F = 3, 2, 64), a hashed table (N > 4 E), chunk_reduce (100 nodes, 1000 edges each), E = 0
FAMILY_SHAPES = ((8, 4096, 1), (1000, 5000, 3), (100, 2000, 64), (10**5, 1000, 2), (100, 10**5, 64), (5, 0, 2))
CASES: dict[str, tuple[PluginLaunch | FamilyLaunch, ...]] = {
    "float32-global": _widths("float32", 1000, 5000, ("scatter_global",), **GLOBAL),
    "float32-shared": _shared("float32"),
    "float32-pairs": _pairs("float32"),
    "float32-sorted": _sorted("float32"),
    "float32-chunked": _chunked("float32"),
    "float32-small-updates": _widths("float32", 10**5, 5000, ("scatter_direct",), counts=False, algorithm="direct")
    + _small_updates("float32"),
    "float16-table": _widths("float16", 10**5, 1000, ("scatter_hashed", "apply_table"), **GLOBAL)  # hashed
    + (PluginLaunch("float16", 1000, 5000, 4, ("scatter_global_v4", "apply_table_v4"), **GLOBAL),),  # a slot per node
    "float16-shared": _shared("float16"),
    "float16-pairs": _pairs("float16"),
    "float16-sorted": _sorted("float16"),
    "float16-chunked": _chunked("float16"),
    "float16-small-updates": _small_updates("float16"),
    # the kernel family's AOT entry points (plugin/scatter_add_op.py), launched as TensorRT launches them
    "family-float32": _family("float32", ("state", "state_counts"), FAMILY_SHAPES),
    "family-float16-table": _family("float16", ("table", "table_counts"), FAMILY_SHAPES),
    # one feature: split_table's slots; one block within its 1024 edges and beyond (a full table drops rows)
    "family-float16-small": _family("float16", ("split",), ((10**6, 10000, 1), (1000, 2000, 1), (5, 0, 1)))
    + _family("float16", ("block",), ((10**6, 1024, 1), (1000, 5000, 1), (5, 0, 1))),
    # (value, count) pairs in the counts: global atomics and shared memory (100 nodes), E = 0
    "family-pairs": _family("float32", ("pairs", "pair_chunks"), ((1000, 5000, 1), (100, 10**5, 1), (5, 0, 1)))
    + _family("float16", ("pairs", "pair_chunks"), ((1000, 5000, 1), (100, 10**5, 1), (5, 0, 1))),
    # the sorted chain: ten scan tiles, tallies in shared memory (100 nodes), rows of 33 and 128, four placing passes
    "family-sorted": _family("float32", ("sorted_counts", "sorted_wide"), ((20000, 10000, 8), (100, 10000, 128),
                                                                           (5, 0, 33)))
    + _family("float16", ("sorted", "sorted_4"), ((20000, 10000, 64), (1000, 50000, 33))),
    # OVERWRITE_ROWS's one step: widths 1 to 4 words a thread (F = 3, 64), E = 0, more edges than nodes
    "family-overwrite": _family("float32", ("overwrite",), ((1000, 5000, 3), (10**5, 1000, 64), (5, 0, 2)))
    + _family("float16", ("overwrite",), ((1000, 5000, 3), (10**5, 1000, 64), (5, 0, 2))),
}


def case_kernels(case: str) -> set[str]:
    return {kernel for launch in CASES[case] for kernel in (
        launch.kernels if isinstance(launch, PluginLaunch) else family_kernels(launch))}


# --- made-up buffer contents ------------------------------------------------------------------------------------
def _extreme_floats(dtype: np.dtype) -> np.ndarray:
    info = np.finfo(dtype)
    return np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, info.max, -info.max, info.tiny, info.smallest_subnormal, 1.0],
                    dtype)


def _extreme_ids(nodes: int) -> np.ndarray:
    return np.array([-1, -2, -(2**31), -(2**31) - 1, 2**31 - 1, 2**31, 2**32, 2**32 + 1, 2**63 - 1, -(2**63),
                     nodes, nodes + 1, max(nodes - 1, 0), 0], np.int64)


def _extreme_words(nodes: int, edges: int) -> np.ndarray:
    """32-bit words that are no empty key (-1): tables full, cursors, offsets and counts far out or just out."""
    words = [0xFFFFFFFE, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFF0000, nodes, nodes + 1, edges, edges + 1,
             2 * edges + 1, 0, 1]
    return np.array(words, np.int64).astype(np.uint32)


def pattern_bytes(pattern: str, kind: str, nbytes: int, nodes: int, edges: int, rng: np.random.Generator) -> np.ndarray:
    """The first min(nbytes, FILL_CHUNK) bytes of a buffer of `kind` ("float32", "float16": features; "index":
    int64 targets; "words": counts, tables, workspaces) filled with `pattern`."""
    n = min(nbytes, FILL_CHUNK)
    if pattern == "random":
        return rng.integers(0, 256, n, dtype=np.uint8)
    extreme = pattern == "extreme"
    if kind in ("float32", "float16"):
        dtype = np.dtype(kind)
        count = -(-n // dtype.itemsize)
        values = rng.choice(_extreme_floats(dtype), count) if extreme else rng.standard_normal(count).astype(dtype)
    elif kind == "index":
        count = -(-n // 8)
        values = rng.choice(_extreme_ids(nodes), count) if extreme else rng.integers(0, max(nodes, 1), count, np.int64)
    else:
        count = -(-n // 4)
        values = (rng.choice(_extreme_words(nodes, edges), count) if extreme
                  else rng.integers(0, max(nodes, edges) + 2, count).astype(np.uint32))
    return values.view(np.uint8)[:n]


# --- running a case: on the GPU (CudaDevice) or dry, on the CPU (DryDevice) ----------------------------------------
class CudaDevice:
    """Allocations, fills and launches through cuda.bindings in the current context, each call checked."""

    def __init__(self, artifacts: Path) -> None:
        from cuda.bindings import driver

        self.driver, self.artifacts = driver, artifacts
        self.buffers: list[Any] = []

    def alloc(self, nbytes: int) -> int:
        from plugin.device_array import DeviceArray

        self.buffers.append(DeviceArray((max(nbytes, 1),), np.uint8))
        return self.buffers[-1].ptr

    def fill(self, pointer: int, nbytes: int, first: np.ndarray) -> None:
        """`first` at the start of the buffer, then repeated to its end by doubling device-to-device copies."""
        from common.cuda_check import check

        check(self.driver.cuMemcpyHtoD(pointer, first.ctypes.data, len(first)))
        done = len(first)
        while done < nbytes:
            step = min(done, nbytes - done)
            check(self.driver.cuMemcpyDtoD(pointer + done, pointer, step))
            done += step

    def launch(self, operation: tuple[Any, ...], pointers: tuple[int, ...]) -> None:
        """One kernel operation of a PreparedScatterAdd, issued as its launch issues it."""
        from common.cuda_check import check
        from plugin.kernels.launch import bind_driver_calls

        for call, arguments, what in bind_driver_calls(self.driver, [operation], pointers):
            check(call(*arguments), call=what)

    def launch_family(self, op: Any, step: Any, tactic: int, dtypes: dict[str, str], pointers: dict[str, int],
                      sizes: dict[str, int]) -> None:
        """The step alone as a chain (no scratch: no fills, the made-up contents stay), at this tactic."""
        from inplace.launch import PreparedChain
        from inplace.spec import Chain

        PreparedChain(op, Chain((step,)), dtypes, pointers, sizes, 0, {step.plugin: tactic})()

    def finish(self, name: str) -> None:
        from common.cuda_check import check

        check(self.driver.cuCtxSynchronize(), call=f"cuCtxSynchronize after {name}")

    def release(self, raising: bool = True) -> None:
        try:
            for buffer in self.buffers:
                buffer.free()
        except Exception:
            if raising:
                raise
        finally:
            self.buffers.clear()


class DryDevice:
    """Stands in for CudaDevice without a GPU: addresses 256-byte aligned, launches recorded (name, pattern)."""

    def __init__(self) -> None:
        self.next_address, self.launches = 0x7F0000000000, []

    def alloc(self, nbytes: int) -> int:
        address = self.next_address
        self.next_address += -(-max(nbytes, 1) // 256) * 256
        return address

    def fill(self, pointer: int, nbytes: int, first: np.ndarray) -> None:
        assert 0 < len(first) <= nbytes and (len(first) == nbytes or len(first) % 8 == 0)

    def launch(self, operation: tuple[Any, ...], pointers: tuple[int, ...]) -> None:
        self.launches.append(operation[6])

    def launch_family(self, op: Any, step: Any, tactic: int, dtypes: dict[str, str], pointers: dict[str, int],
                      sizes: dict[str, int]) -> None:
        from inplace.launch import evaluate_launch, step_arguments, step_kernel

        kernel = step_kernel(step, dtypes, tactic)
        evaluate_launch(kernel, sizes, dtypes)
        values, _ = step_arguments(step, kernel, pointers, sizes)
        assert all(values[:len(step.inputs)]) and all(values[len(values) - len(step.outputs):])
        self.launches.append(kernel.name)

    def finish(self, name: str) -> None:
        pass

    def release(self, raising: bool = True) -> None:
        pass


def _plugin_launch(launch: PluginLaunch, device: Any, say: Callable[[str], None], rng: np.random.Generator) -> None:
    from plugin.kernels import launch as launcher

    dtype = np.dtype(launch.dtype)
    nodes, edges, features = launch.nodes, launch.edges, launch.features
    if launch.algorithm == "grid_table" and not launcher.prepare_kernels(dtype).cooperative:
        say(f"SKIP {launch.kernels}: the kernels were compiled without cooperative groups (no CCCL headers)")
        return
    work = workspace_size(nodes, edges, features, dtype, with_counts=launch.counts, algorithm=launch.algorithm)
    sizes = {"state": nodes * features * dtype.itemsize, "src": edges * features * dtype.itemsize, "index": 8 * edges,
             "counts": 8 * nodes, "workspace": work, "skipped": 8}
    kinds = {"state": dtype.name, "src": dtype.name, "index": "index"}
    address = {name: device.alloc(nbytes) for name, nbytes in sizes.items()}
    prepared = launcher.PreparedScatterAdd(
        num_nodes=nodes, num_edges=edges, num_features=features, dtype=dtype, with_counts=launch.counts,
        with_skipped=True, workspace_size=work, algorithm=launch.algorithm, paired=launch.paired)
    prepared.graph_replay = False
    pointers = (address["state"], address["src"], address["index"], address["counts"] if launch.counts else 0,
                address["workspace"] if work else 0, address["skipped"], 0)
    state, src, index, counts, workspace, skipped, stream = pointers
    operations = [op for op in prepared.bind(state, src, index, counts, workspace, stream, skipped)
                  if op[0] != launcher.MEMSET]
    names = [op[6] for op in operations]
    missing = [name for name in launch.kernels if name not in names]
    assert not missing, f"{launch}: the launcher runs {names}, not {missing}"
    for operation in operations:
        if operation[6] not in launch.kernels:
            continue
        for pattern in PATTERNS:
            for name, nbytes in sizes.items():
                if nbytes:
                    first = pattern_bytes(pattern, kinds.get(name, "words"), nbytes, nodes, edges, rng)
                    device.fill(address[name], nbytes, first)
            say(f"LAUNCH {operation[6]} {pattern} {launch}")
            device.launch(operation, pointers)
            device.finish(operation[6])
            say(f"ENDED {operation[6]} {pattern}")


def _family_launch(launch: FamilyLaunch, device: Any, say: Callable[[str], None], rng: np.random.Generator) -> None:
    from inplace.launch import scratch_bytes

    op, chain = family_chains()[launch.chain]
    dtype = np.dtype(launch.dtype)
    nodes, edges, features = launch.nodes, launch.edges, launch.features
    sizes = {"N": nodes, "E": edges, "F": features}
    nbytes = {"state": nodes * features * dtype.itemsize, "src": edges * features * dtype.itemsize,
              "index": 8 * edges, **scratch_bytes(chain, sizes)}
    kinds = {"state": dtype.name, "src": dtype.name, "index": "index", "values": "float32"}
    dtypes = family_dtypes(launch)
    address = {name: device.alloc(size) for name, size in nbytes.items()}
    for step in chain.steps:
        kernels = (step.kernel(dtypes), *step.tactics(dtypes))
        for tactic, kernel in enumerate(kernels):  # every tactic TensorRT may pick
            for pattern in PATTERNS:
                for name in dict.fromkeys(step.inputs + step.outputs):
                    if nbytes[name]:
                        device.fill(address[name], nbytes[name],
                                    pattern_bytes(pattern, kinds.get(name, "words"), nbytes[name], nodes, edges, rng))
                say(f"LAUNCH {kernel.name} {pattern} {launch}")
                device.launch_family(op, step, tactic, dtypes, address, sizes)
                device.finish(kernel.name)
                say(f"ENDED {kernel.name} {pattern}")


def run_case(case: str, device: Any, say: Callable[[str], None]) -> None:
    """Launches every kernel a case names on each pattern (the buffers refilled before each launch)."""
    from plugin.kernels import launch as launcher

    rng = np.random.default_rng()
    original = plan.owned_table
    for launch in CASES[case]:
        forced = launch.owned_table if isinstance(launch, PluginLaunch) else None
        if forced is not None:
            plan.owned_table = lambda entries, features, info: OwnedTable(*forced)
        launcher.backend.forget()
        try:
            if isinstance(launch, FamilyLaunch):
                _family_launch(launch, device, say, rng)
            else:
                _plugin_launch(launch, device, say, rng)
        except BaseException:
            device.release(raising=False)  # the launch's own error, not cuMemFree's echo of it
            raise
        finally:
            plan.owned_table = original
            launcher.backend.forget()
        device.release()


def child_main(case: str, artifacts: Path) -> int:
    """A child process: one case on the GPU, the kernels loaded from the parent's compiled artifacts."""
    from plugin.kernels import launch as launcher

    def cubin(arch: int, dtype: object) -> bytes:
        return (artifacts / f"scatter_add_{np.dtype(dtype).name}.cubin").read_bytes()  # type: ignore[call-overload]

    launcher.compile_scatter_add = cubin
    from plugin.kernels import aot

    def family_ptx(kernel: str, dtype: str, arch: int) -> bytes:
        return (artifacts / f"family_{kernel}_{dtype}.ptx").read_bytes()

    aot.compile_family_ptx = family_ptx  # type: ignore[assignment]
    def overwrite_ptx(arch: int) -> bytes:
        return (artifacts / "overwrite.ptx").read_bytes()

    aot.compile_overwrite_ptx = overwrite_ptx  # type: ignore[assignment]
    device = CudaDevice(artifacts)
    try:
        run_case(case, device, lambda line: print(line, flush=True))
    except Exception as error:
        print(f"FAIL {type(error).__name__}: {error}", flush=True)
        return 1
    print("DONE", flush=True)
    return 0


# --- CPU tests ------------------------------------------------------------------------------------------------
def test_the_launcher_names_every_kernel_of_scatter_add_cu():
    from plugin.kernels.launch import COOPERATIVE_KERNEL_NAMES, KERNEL_NAMES

    found = {name for name in entry_points(SOURCE_PATH) if not name.startswith("aot_")}  # the AOT plugins' own
    assert {"scatter_global_v4", "scatter_grid_table", "fold_pairs", "scatter_direct_v4"} <= found
    assert found == set(KERNEL_NAMES + COOPERATIVE_KERNEL_NAMES)
    from plugin.overwrite_op import KERNEL_NAMES

    assert entry_points(OVERWRITE_SOURCE_PATH) == set(KERNEL_NAMES.values())  # OVERWRITE_ROWS's, one per dtype


def test_every_kernel_has_a_fuzz_case():
    covered = set().union(*(case_kernels(case) for case in CASES))
    for source in (SOURCE_PATH, OVERWRITE_SOURCE_PATH):
        missing = sorted(entry_points(source) - covered)
        assert not missing, f"kernels of {source.name} without a case in tests/kernels/test_kernel_fuzz_gpu.py CASES: {missing}"


@pytest.fixture
def dry_launcher(monkeypatch):
    """The launcher with 'loaded' kernels (fake handles, an H200-like device, cooperative groups), no GPU."""
    from plugin.kernels import launch
    from tests.support.kernel_fakes import RecordingDriver, fake_backend

    monkeypatch.setattr(launch, "backend", fake_backend(RecordingDriver()))


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_case_launches_the_kernels_it_names_on_every_pattern(case, dry_launcher):
    device, lines = DryDevice(), []
    run_case(case, device, lines.append)
    assert set(device.launches) == case_kernels(case)
    assert all(device.launches.count(name) % len(PATTERNS) == 0 for name in device.launches)
    assert sum(line.startswith("LAUNCH ") for line in lines) == len(device.launches)


def test_patterns_make_full_tables_and_out_of_range_ids():
    rng = np.random.default_rng(1)
    words = pattern_bytes("extreme", "words", 4096, 1000, 5000, rng).view(np.uint32)
    assert 0xFFFFFFFF not in words and {1000, 1001, 0x80000000} <= set(words.tolist())  # no empty key: a full table
    ids = pattern_bytes("extreme", "index", 8192, 1000, 5000, rng).view(np.int64)
    assert ids.min() < 0 and ids.max() >= 2**31 and 2**32 + 1 in ids  # negative, beyond int32, wrapping to node 1
    valid = pattern_bytes("in_range", "index", 8192, 1000, 5000, rng).view(np.int64)
    assert valid.min() >= 0 and valid.max() < 1000
    halves = pattern_bytes("extreme", "float16", 4096, 1000, 5000, rng).view(np.float16)
    assert np.isnan(halves).any() and np.isinf(halves).any()
    assert len(pattern_bytes("random", "words", 3 * FILL_CHUNK, 1, 1, rng)) == FILL_CHUNK


def test_owned_tables_never_probe_more_slots_than_they_have(monkeypatch):
    """Issue 27's survivor: an insertion into an owned table probes at most the table's capacity
    (scatter_add.cu owned_insert; beyond, its pass is retried on a smaller sub-range). With the probe cap lifted
    only the capacity bounds the probes, so a plan probing capacity + 1 slots, or without that bound, fails."""
    from tests.support.kernel_fakes import H200_LIKE

    small = dataclasses.replace(H200_LIKE, max_shared_per_block=48 * 1024)  # rows of 100 features: 64 slots
    for cap in (plan.OWNED_MAX_PROBES, 2**31 - 1):
        monkeypatch.setattr(plan, "OWNED_MAX_PROBES", cap)
        tables = []
        for device in (H200_LIKE, small):
            for features in (1, 3, 64, 100, 1000):
                for entries in (0, 1, 40, 100, 1000, 4096, 10**5):
                    try:
                        tables.append(plan.owned_table(entries, features, device))
                    except ValueError:  # rows too wide for any table: no launch
                        continue
        assert any(table.capacity < plan.OWNED_MAX_PROBES for table in tables)
        for table in tables:
            assert 1 <= table.probes <= table.capacity and table.probes == min(table.capacity, cap), table


# --- GPU: every case in a child process, plainly and under compute-sanitizer memcheck ----------------------------
MODES = ("plain", "memcheck")


def sanitizer() -> str | None:
    """compute-sanitizer's path (FUZZ_SANITIZER, else the PATH, else a CUDA toolkit's bin), or None."""
    setting = os.environ.get("FUZZ_SANITIZER")
    if setting is not None:
        return None if setting.lower() in ("", "0", "no", "off") else setting
    found = shutil.which("compute-sanitizer")
    candidates = sorted(glob.glob("/usr/local/cuda*/bin/compute-sanitizer"), reverse=True)
    return found or next((path for path in candidates if os.access(path, os.X_OK)), None)


@dataclass
class ChildRun:
    returncode: int | None  # None: killed at the time limit
    output: str
    seconds: float
    limit: float


def run_child(case: str, mode: str, artifacts: Path, limit: float) -> ChildRun:
    command = [sys.executable, str(Path(__file__).resolve()), case, str(artifacts)]
    if mode == "memcheck":
        # API errors are not reported: cuda-python probes entry points the driver may lack, and every call of the
        # child's is checked anyway; no launch timeout: the children start together and our own limit applies
        command = [str(sanitizer()), "--tool", "memcheck", "--error-exitcode", "1", "--report-api-errors", "no",
                   "--launch-timeout", "0", "--print-limit", "20", *command]
    start = time.monotonic()
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        output, _ = child.communicate(timeout=limit)
        return ChildRun(child.returncode, output, time.monotonic() - start, limit)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
        return ChildRun(None, output, time.monotonic() - start, limit)


class FuzzRuns:
    """Runs the selected cases of a mode at once on first use (FUZZ_JOBS children at a time), then answers per
    case."""

    def __init__(self, artifacts: Path, selected: set[tuple[str, str]]) -> None:
        self.artifacts, self.selected, self.runs = artifacts, selected, {}

    def get(self, mode: str, case: str) -> ChildRun:
        if mode not in self.runs:
            default = 120 if mode == "plain" else 900
            limit = float(os.environ.get("FUZZ_TIMEOUT_S", default))
            jobs = int(os.environ.get("FUZZ_JOBS", max(1, min(8, (os.cpu_count() or 2) // 2))))
            cases = [name for name in CASES if (mode, name) in self.selected]
            with ThreadPoolExecutor(jobs) as pool:
                futures = {name: pool.submit(run_child, name, mode, self.artifacts, limit) for name in cases}
            self.runs[mode] = {name: future.result() for name, future in futures.items()}
        return self.runs[mode][case]


@pytest.fixture(scope="module")
def fuzz_runs(request, tmp_path_factory):
    """The kernels compiled once for this GPU (both dtypes' CUBINs, the chains' AOT PTX) for the children to load,
    and the (mode, case) pairs this session runs."""
    from common.nvrtc import nvrtc_supported_archs
    from plugin.kernels.compile import compile_scatter_add, pick_arch
    from plugin.kernels.launch import current_context, read_device_info

    current_context()
    arch = pick_arch(read_device_info().arch, nvrtc_supported_archs())
    folder = tmp_path_factory.mktemp("kernel_fuzz")
    for dtype in ("float32", "float16"):
        (folder / f"scatter_add_{dtype}.cubin").write_bytes(compile_scatter_add(arch, dtype))
    from plugin.kernels.aot import aot_target_arch, compile_family_ptx, compile_overwrite_ptx

    (folder / "overwrite.ptx").write_bytes(compile_overwrite_ptx(aot_target_arch()))
    for launch in {launch for launches in CASES.values() for launch in launches if isinstance(launch, FamilyLaunch)}:
        if launch.chain == "overwrite":
            continue
        for kernel in family_kernels(launch):
            (folder / f"family_{kernel}_{launch.dtype}.ptx").write_bytes(
                compile_family_ptx(kernel, launch.dtype, aot_target_arch()))
    selected = {(item.callspec.params["mode"], item.callspec.params["case"]) for item in request.session.items
                if getattr(item, "originalname", "") == "test_kernels_end_inside_their_buffers_on_made_up_inputs"}
    return FuzzRuns(folder, selected)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_kernels_end_inside_their_buffers_on_made_up_inputs(case, mode, fuzz_runs):
    if mode == "memcheck" and sanitizer() is None:
        pytest.skip("compute-sanitizer not found (PATH, /usr/local/cuda*/bin, or FUZZ_SANITIZER=path)")
    run = fuzz_runs.get(mode, case)
    lines = run.output.splitlines()
    launched = [tuple(line.split()[1:3]) for line in lines if line.startswith("LAUNCH ")]
    markers = [line.split(maxsplit=3) for line in lines if line.startswith(("LAUNCH ", "ENDED "))]
    running = "after its launches" if markers and markers[-1][0] == "ENDED" else "before any launch"
    if markers and markers[-1][0] == "LAUNCH":  # LAUNCH kernel pattern launch: the one that did not end
        running = f"{markers[-1][1]} on {markers[-1][2]} inputs ({markers[-1][3] if len(markers[-1]) > 3 else ''})"
    where = f"case {case}{' under compute-sanitizer memcheck' if mode == 'memcheck' else ''}"
    report = "\n".join([line for line in lines if line.startswith(("=========", "FAIL"))][:40] or lines[-20:])
    assert run.returncode is not None, f"{running}: never ended, {where} killed after {run.limit:.0f} s\n{report}"
    skips = [line[5:] for line in lines if line.startswith("SKIP ")]
    if skips and not launched:
        pytest.skip(skips[0])
    assert run.returncode == 0 and "DONE" in lines, f"{running}: {where} exit status {run.returncode}\n{report}"
    if mode == "memcheck":  # the sanitizer's own last word: it did wrap the child
        assert any("ERROR SUMMARY: 0 errors" in line for line in lines), f"{where}: no memcheck summary\n{report}"
    assert {kernel for kernel, _ in launched} == case_kernels(case), f"{where}: launched {sorted(launched)}"


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1], Path(sys.argv[2])))
