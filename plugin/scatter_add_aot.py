"""The in-place scatter-add as TensorRT ahead-of-time (AOT) plugins, with `tensorrt.plugin` (TensorRT >= 10.16).

An engine built with these holds the PTX of plugin/kernels/scatter_add_aot.cu and symbolic launch parameters,
and runs with no Python: deserialize it from C++, trtexec or a process that imports only tensorrt. TensorRT
launches ONE kernel per AOT plugin, so whatever must exist before the atomics comes from the network as an
input that the plugin aliases to an output (network/aot_layers.py makes them with fill layers):

    scatter_add         (state, src, index)                 -> state.aliased()                     float32
    scatter_add_counts  (state, src, index, counts)         -> state.aliased(), counts.aliased()   float32
    scatter_table       (src, index, keys, values)          -> keys.aliased(), values.aliased()    float16
    scatter_table_counts(src, index, keys, values, counts)  -> ... and counts.aliased()            float16
    apply_table         (state, keys, values)               -> state.aliased()                     float16
    scatter_add_block   (state, src, index)                 -> state.aliased()                     float16, F = 1
    overwrite_rows      (state, src, index)                 -> state.aliased()                     float32/16

counts [N, 1] int64 arrive zeroed; keys [C] int32 arrive as -1 and values [C, F] float32 as 0, with
C = 2 E + 1 (plugin.kernels.aot.table_capacity): the float16 path sums in float32 in a table whose size follows
E, not N, then apply_table rounds each touched node once. Where the network's profile allows at most
BLOCK_MAX_EDGES edges of one feature, scatter_add_block does both in one block's shared memory instead, with no
table and no fills (plugin.kernels.aot.aot_takes_one_block). docs/aot_plugin.md gives the reasons.

overwrite_rows writes rows instead (state[index[e]] = src[e]; where an index repeats, one of its edges wins),
with no table and no fills. Its PTX is plugin/kernels/overwrite.cu's (the Python plugin's overwrite runs the
same kernel); docs/overwrite.md.

Importing this module registers the plugins' creators in TensorRT's plugin registry, so that TensorRT's ONNX
parser finds them (--onnx; require_aot_creators checks). Where TensorRT has no registry (its real Python
bindings over stand-in libraries, in tests) they are registered lazily instead, when a network first uses one.
"""

from typing import Any

from common.errors import EngineError, MissingDependencyError
from common.imports import import_tensorrt
from common.versions import AOT_TENSORRT_FLOOR, check_aot_tensorrt_version
from plugin.kernels.aot import AOT_KERNELS, AotKernel, aot_extra_args, aot_launch_params, compile_aot_ptx
from plugin.kernels.overwrite import compile_overwrite_ptx, overwrite_kernel

trt: Any = import_tensorrt()
check_aot_tensorrt_version(getattr(trt, "__version__", None))  # a version, not hasattr(aot_impl): 10.9-10.15 have one
try:
    import tensorrt.plugin as trtp
except ImportError as error:
    raise MissingDependencyError(
        f"--plugin aot needs tensorrt.plugin (TensorRT >= {AOT_TENSORRT_FLOOR}); this TensorRT "
        f"{getattr(trt, '__version__', '?')} has none ({error})"
    ) from None

NAMESPACE = "aliased_io"
SCATTER_ADD = f"{NAMESPACE}::scatter_add"
SCATTER_ADD_COUNTS = f"{NAMESPACE}::scatter_add_counts"
SCATTER_TABLE = f"{NAMESPACE}::scatter_table"
SCATTER_TABLE_COUNTS = f"{NAMESPACE}::scatter_table_counts"
APPLY_TABLE = f"{NAMESPACE}::apply_table"
SCATTER_ADD_BLOCK = f"{NAMESPACE}::scatter_add_block"
OVERWRITE_ROWS = f"{NAMESPACE}::overwrite_rows"

# The kernel each plugin launches (plugin/kernels/aot.py AOT_KERNELS).
PLUGIN_KERNELS = {
    SCATTER_ADD: "scatter_add_f32",
    SCATTER_ADD_COUNTS: "scatter_add_f32_counts",
    SCATTER_TABLE: "scatter_table_f16",
    SCATTER_TABLE_COUNTS: "scatter_table_f16_counts",
    APPLY_TABLE: "apply_table_f16",
    SCATTER_ADD_BLOCK: "scatter_block_f16",
}

AotResult = tuple[str | bytes, str | bytes, trtp.KernelLaunchParams, trtp.SymIntExprs]
# Eager registration needs a plugin registry; without one (stand-in libraries) tensorrt.plugin registers a
# creator when a network first calls the plugin (lazy_register=True).
REGISTER_LAZILY = trt.get_plugin_registry() is None


def _require(desc: trtp.TensorDesc, name: str, dtype: Any, ndim: int) -> None:
    """ValueError (TensorRT then fails the build, naming the plugin) unless `desc` has this type and rank."""
    if desc.dtype != dtype or desc.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D {dtype} tensor, got a {desc.ndim}-D {desc.dtype} tensor")


def _check_edges(src: trtp.TensorDesc, src_dtype: Any, index: trtp.TensorDesc, counts: trtp.TensorDesc | None) -> None:
    _require(src, "src", src_dtype, 2)
    _require(index, "index", trt.int64, 1)
    if counts is not None:
        _require(counts, "counts", trt.int64, 2)


def sizes_from_descs(descs: dict[str, trtp.TensorDesc]) -> dict[str, Any]:
    """N, E, F and C as TensorRT's symbolic sizes, from whichever of the plugin's tensors carry them:
    N from state (else counts), E from index, F from src (else state), C from keys."""
    sizes: dict[str, Any] = {}
    if "src" in descs or "state" in descs:
        sizes["num_features"] = (descs["src"] if "src" in descs else descs["state"]).shape_expr[1]
    if "state" in descs:
        sizes["num_nodes"] = descs["state"].shape_expr[0]
    elif "counts" in descs:
        sizes["num_nodes"] = descs["counts"].shape_expr[0]
    if "index" in descs:
        sizes["num_edges"] = descs["index"].shape_expr[0]
    if "keys" in descs:
        sizes["capacity"] = descs["keys"].shape_expr[0]
    return sizes


def aot_kernel_for(plugin_id: str, descs: dict[str, trtp.TensorDesc], kernel: AotKernel | None = None,
                   ptx: bytes | None = None) -> AotResult:
    """What every aot_impl below returns: the kernel's name, the PTX, launch parameters and extra arguments,
    symbolic in the sizes of `descs` (the plugin's input descriptors by the kernel's tensor names). `kernel` and
    `ptx` default to the plugin's scatter-add kernel (PLUGIN_KERNELS) and scatter_add_aot.cu's PTX."""
    kernel = AOT_KERNELS[PLUGIN_KERNELS[plugin_id]] if kernel is None else kernel
    sizes = sizes_from_descs(descs)
    grid, block, shared = aot_launch_params(kernel, sizes)
    launch = trtp.KernelLaunchParams()
    launch.grid_x = grid
    launch.block_x = block
    launch.shared_mem = shared
    extra = trtp.SymIntExprs.from_tuple([trtp.SymInt32(value) for value in aot_extra_args(kernel, sizes)])
    return kernel.name, compile_aot_ptx() if ptx is None else ptx, launch, extra


# --- float32: one plugin, atomics straight into the state ------------------------------------------------
@trtp.register(SCATTER_ADD, lazy_register=REGISTER_LAZILY)
def scatter_add_desc(state: trtp.TensorDesc, src: trtp.TensorDesc, index: trtp.TensorDesc) -> trtp.TensorDesc:
    _require(state, "state", trt.float32, 2)
    _check_edges(src, trt.float32, index, None)
    return state.aliased()


@trtp.aot_impl(SCATTER_ADD)
def scatter_add_aot(state: trtp.TensorDesc, src: trtp.TensorDesc, index: trtp.TensorDesc,
                    outputs: tuple[trtp.TensorDesc], tactic: int) -> AotResult:
    return aot_kernel_for(SCATTER_ADD, {"state": state, "src": src, "index": index})


@trtp.register(SCATTER_ADD_COUNTS, lazy_register=REGISTER_LAZILY)
def scatter_add_counts_desc(state: trtp.TensorDesc, src: trtp.TensorDesc, index: trtp.TensorDesc,
                            counts: trtp.TensorDesc) -> tuple[trtp.TensorDesc, trtp.TensorDesc]:
    _require(state, "state", trt.float32, 2)
    _check_edges(src, trt.float32, index, counts)
    return state.aliased(), counts.aliased()


@trtp.aot_impl(SCATTER_ADD_COUNTS)
def scatter_add_counts_aot(state: trtp.TensorDesc, src: trtp.TensorDesc, index: trtp.TensorDesc,
                           counts: trtp.TensorDesc, outputs: tuple[trtp.TensorDesc], tactic: int) -> AotResult:
    return aot_kernel_for(SCATTER_ADD_COUNTS, {"state": state, "src": src, "index": index, "counts": counts})


# --- float16: sum in a float32 table (size from E), then apply it to the state -------------------------------
def _check_table(src: trtp.TensorDesc, index: trtp.TensorDesc, keys: trtp.TensorDesc, values: trtp.TensorDesc,
                 counts: trtp.TensorDesc | None) -> None:
    _check_edges(src, trt.float16, index, counts)
    _require(keys, "keys", trt.int32, 1)
    _require(values, "values", trt.float32, 2)


@trtp.register(SCATTER_TABLE, lazy_register=REGISTER_LAZILY)
def scatter_table_desc(src: trtp.TensorDesc, index: trtp.TensorDesc, keys: trtp.TensorDesc,
                       values: trtp.TensorDesc) -> tuple[trtp.TensorDesc, trtp.TensorDesc]:
    _check_table(src, index, keys, values, None)
    return keys.aliased(), values.aliased()


@trtp.aot_impl(SCATTER_TABLE)
def scatter_table_aot(src: trtp.TensorDesc, index: trtp.TensorDesc, keys: trtp.TensorDesc, values: trtp.TensorDesc,
                      outputs: tuple[trtp.TensorDesc], tactic: int) -> AotResult:
    return aot_kernel_for(SCATTER_TABLE, {"src": src, "index": index, "keys": keys, "values": values})


@trtp.register(SCATTER_TABLE_COUNTS, lazy_register=REGISTER_LAZILY)
def scatter_table_counts_desc(src: trtp.TensorDesc, index: trtp.TensorDesc, keys: trtp.TensorDesc,
                              values: trtp.TensorDesc, counts: trtp.TensorDesc
                              ) -> tuple[trtp.TensorDesc, trtp.TensorDesc, trtp.TensorDesc]:
    _check_table(src, index, keys, values, counts)
    return keys.aliased(), values.aliased(), counts.aliased()


@trtp.aot_impl(SCATTER_TABLE_COUNTS)
def scatter_table_counts_aot(src: trtp.TensorDesc, index: trtp.TensorDesc, keys: trtp.TensorDesc,
                             values: trtp.TensorDesc, counts: trtp.TensorDesc, outputs: tuple[trtp.TensorDesc],
                             tactic: int) -> AotResult:
    return aot_kernel_for(SCATTER_TABLE_COUNTS,
                          {"src": src, "index": index, "keys": keys, "values": values, "counts": counts})


@trtp.register(APPLY_TABLE, lazy_register=REGISTER_LAZILY)
def apply_table_desc(state: trtp.TensorDesc, keys: trtp.TensorDesc, values: trtp.TensorDesc) -> trtp.TensorDesc:
    _require(state, "state", trt.float16, 2)
    _require(keys, "keys", trt.int32, 1)
    _require(values, "values", trt.float32, 2)
    return state.aliased()


@trtp.aot_impl(APPLY_TABLE)
def apply_table_aot(state: trtp.TensorDesc, keys: trtp.TensorDesc, values: trtp.TensorDesc,
                    outputs: tuple[trtp.TensorDesc], tactic: int) -> AotResult:
    return aot_kernel_for(APPLY_TABLE, {"state": state, "keys": keys, "values": values})


# --- float16, one feature, a profile of at most BLOCK_MAX_EDGES edges: one block, no table --------------------
def _require_one_feature(desc: trtp.TensorDesc, name: str) -> None:
    """ValueError unless `desc`'s second dimension is the build-time constant 1 (scatter_block_f16 adds rows of
    one feature); shapes TensorRT hands over as fake (where it asks for types only) pass."""
    features = desc.shape_expr[1]
    if features.is_fake:
        return
    if not features.is_constant:
        raise ValueError(f"{name} must have one feature per row for {SCATTER_ADD_BLOCK}, known when the engine is "
                         "built; its second dimension is dynamic")
    if features.constant_value() != 1:
        raise ValueError(f"{name} must have one feature per row for {SCATTER_ADD_BLOCK}, got {features.constant_value()}")


@trtp.register(SCATTER_ADD_BLOCK, lazy_register=REGISTER_LAZILY)
def scatter_add_block_desc(state: trtp.TensorDesc, src: trtp.TensorDesc, index: trtp.TensorDesc) -> trtp.TensorDesc:
    _require(state, "state", trt.float16, 2)
    _check_edges(src, trt.float16, index, None)
    _require_one_feature(state, "state")
    _require_one_feature(src, "src")
    return state.aliased()


@trtp.aot_impl(SCATTER_ADD_BLOCK)
def scatter_add_block_aot(state: trtp.TensorDesc, src: trtp.TensorDesc, index: trtp.TensorDesc,
                          outputs: tuple[trtp.TensorDesc], tactic: int) -> AotResult:
    return aot_kernel_for(SCATTER_ADD_BLOCK, {"state": state, "src": src, "index": index})


# --- overwrite rows: one kernel writes each edge's row into the state ------------------------------------------
_STATE_DTYPES = {trt.float32: "float32", trt.float16: "float16"}


@trtp.register(OVERWRITE_ROWS, lazy_register=REGISTER_LAZILY)
def overwrite_rows_desc(state: trtp.TensorDesc, src: trtp.TensorDesc, index: trtp.TensorDesc) -> trtp.TensorDesc:
    if state.dtype not in _STATE_DTYPES or state.ndim != 2:
        raise ValueError(f"state must be a 2-D float32 or float16 tensor, got a {state.ndim}-D {state.dtype} tensor")
    _check_edges(src, state.dtype, index, None)
    return state.aliased()


@trtp.aot_impl(OVERWRITE_ROWS)
def overwrite_rows_aot(state: trtp.TensorDesc, src: trtp.TensorDesc, index: trtp.TensorDesc,
                       outputs: tuple[trtp.TensorDesc], tactic: int) -> AotResult:
    return aot_kernel_for(OVERWRITE_ROWS, {"state": state, "src": src, "index": index},
                          overwrite_kernel(_STATE_DTYPES[state.dtype]), compile_overwrite_ptx())


def plugin_op(plugin_id: str) -> Any:
    """The `tensorrt.plugin.op` entry of a plugin: calling it with ITensors gives what add_plugin takes."""
    namespace, name = plugin_id.split("::")
    return getattr(getattr(trtp.op, namespace), name)


PLUGIN_IDS = (*PLUGIN_KERNELS, OVERWRITE_ROWS)


def require_aot_creators() -> None:
    """Checks that every AOT plugin's creator is in TensorRT's plugin registry (importing this module put them
    there), as the ONNX parser needs before it parses the plugin nodes; EngineError naming the first missing one."""
    registry = trt.get_plugin_registry()
    creators = registry.all_creators if registry is not None else []
    registered = {(getattr(c, "plugin_namespace", ""), getattr(c, "name", "")) for c in creators}
    for plugin_id in PLUGIN_IDS:
        if tuple(plugin_id.split("::")) not in registered:
            raise EngineError(f"the AOT plugin {plugin_id} is not in TensorRT's plugin registry, so TensorRT's ONNX "
                              "parser cannot find it")
