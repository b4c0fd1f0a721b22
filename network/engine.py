"""How an engine is built or loaded: the optimization profile, the checks before any engine work, the build
through polygraphy, save and load, and what an engine is fixed to; prepare_engine is the stage's one entry.

One engine serves every graph whose N and E lie within its profile and whose F, C and precision match. The
build uses polygraphy's CreateNetwork(strongly_typed=True), the builder config of network/definition.py (the
optimization profile and PreviewFeature.ALIASED_PLUGIN_IO_10_03, without which TensorRT ignores
get_aliased_input) and engine_bytes_from_network. Deserializing needs the plugin creator registered first, in
every process. TensorRT, polygraphy and CUDA are imported inside the functions that need them: the profile, the
signature checks are plain Python (a dry run uses requested_profile_bounds).
"""

import contextlib
import functools
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import EngineError, InputError, MissingDependencyError
from common.imports import import_module, import_tensorrt, is_full_tensorrt
from common.plugin_kind import PluginKind
from common.progress import file_load_progress, progress
from common.text import first_line, shown_path
from common.versions import (
    TENSORRT_FLOOR,
    check_driver_version,
    check_polygraphy_version,
    check_tensorrt_version,
    installed_cuda_needs,
)
from network.definition import (
    CLASSIFIER,
    INPUT_INDEX,
    INPUT_NAMES,
    INPUT_SOURCE,
    INPUT_STATE,
    INPUT_WEIGHTS,
    OUTPUT_SOFTMAX,
    OUTPUT_STATE,
    STATE_INPUT_NAMES,
    STATE_UPDATE,
    builder_config,
    populate_network,
    populate_state_network,
)
from network.onnx_parse import OnnxSource, populate_from_onnx

if TYPE_CHECKING:
    from tensorrt import ICudaEngine

DEFAULT_MAX_NODES = 1 << 16
DEFAULT_MAX_EDGES = 1 << 20

ShapeRange = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class SizeRange:
    """min <= opt <= max for one dynamic dimension; TensorRT tunes kernels for opt."""

    min: int
    opt: int
    max: int

    def __post_init__(self) -> None:
        if not 1 <= self.min <= self.opt <= self.max:
            raise InputError(f"profile bounds must satisfy 1 <= min <= opt <= max, got {self.min}, {self.opt}, {self.max}")

    def contains(self, size: int) -> bool:
        return self.min <= int(size) <= self.max

    def __str__(self) -> str:
        return f"[{self.min}, {self.max}] (opt {self.opt})"


@dataclass(frozen=True)
class ProfileBounds:
    """The engine's optimization profile: ranges for N (rows of X) and E (rows of src, entries of idx)."""

    nodes: SizeRange
    edges: SizeRange


def requested_profile_bounds(
    num_nodes: int,
    num_edges: int,
    max_nodes: int | None = None,
    max_edges: int | None = None,
    edges_source: str = "the graph",
) -> ProfileBounds:
    """The profile for a new engine: min 1, opt the given sizes, max from --max_nodes/--max_edges (when given)
    or the defaults. InputError when the given sizes exceed a requested maximum, naming both."""
    defaults = default_profile_bounds(num_nodes, num_edges)
    if max_nodes is not None and num_nodes > max_nodes:
        raise InputError(f"the graph has {num_nodes:,} nodes, more than --max_nodes {max_nodes:,}")
    if max_edges is not None and num_edges > max_edges:
        raise InputError(f"{edges_source} has {num_edges:,} edges, more than --max_edges {max_edges:,}")
    return ProfileBounds(
        nodes=defaults.nodes if max_nodes is None else SizeRange(1, max(num_nodes, 1), max_nodes),
        edges=defaults.edges if max_edges is None else SizeRange(1, max(num_edges, 1), max_edges),
    )


def default_profile_bounds(num_nodes: int, num_edges: int) -> ProfileBounds:
    """Min 1, opt the given graph, max at least 65536 nodes and 1048576 edges (more when the graph is larger)."""
    return ProfileBounds(
        nodes=SizeRange(1, max(num_nodes, 1), max(num_nodes, DEFAULT_MAX_NODES)),
        edges=SizeRange(1, max(num_edges, 1), max(num_edges, DEFAULT_MAX_EDGES)),
    )


@dataclass(frozen=True)
class EngineSignature:
    """What an engine is fixed to: precision, features F, classes C (0 for a state-update engine), the profile
    for N and E, and which network it holds (CLASSIFIER or STATE_UPDATE)."""

    precision: str
    num_features: int
    num_classes: int
    bounds: ProfileBounds
    kind: str = CLASSIFIER


def check_graph_fits(signature: EngineSignature, precision: str, num_nodes: int, num_edges: int,
                     num_features: int, num_classes: int, kind: str = CLASSIFIER, edges_source: str = "the graph") -> None:
    """InputError naming the first mismatch between a graph and an engine (built or loaded).

    For a STATE_UPDATE engine num_classes is not checked and num_edges is the edges per execution (a batch).
    """
    if kind != signature.kind:
        needs = "--steps" if signature.kind == STATE_UPDATE else "a run without --steps"
        raise InputError(f"the engine holds the {signature.kind} network, which {needs} uses; this run needs the {kind} network")
    if precision != signature.precision:
        raise InputError(f"the engine was built for --precision {signature.precision}, got --precision {precision}")
    if num_features != signature.num_features:
        raise InputError(f"the engine was built for {signature.num_features} features per node, the graph has {num_features}")
    if kind == CLASSIFIER and num_classes != signature.num_classes:
        raise InputError(f"the engine was built for --num_classes {signature.num_classes}, got {num_classes}")
    if not signature.bounds.nodes.contains(num_nodes):
        raise InputError(
            f"the graph has {num_nodes} nodes, outside the engine's profile {signature.bounds.nodes}; "
            "build a new engine (without --load_engine)"
        )
    if not signature.bounds.edges.contains(num_edges):
        raise InputError(
            f"{edges_source} has {num_edges} edges, outside the engine's profile {signature.bounds.edges}; "
            "build a new engine (without --load_engine)"
        )


def require_cuda_device(tensorrt_version: str | None = None) -> None:
    """MissingDependencyError with a one-line hint unless cuda-python is installed, the driver runs the CUDA that
    the installed TensorRT (`tensorrt_version`) and cuda-python were built for, and a CUDA GPU answers."""
    bindings = import_module("cuda.bindings")  # MissingDependencyError with the install hint
    from cuda.bindings import runtime

    driver_version = read_driver_version()
    if driver_version is not None:  # before the runtime's first call, which a too old driver fails unexplained
        import importlib.metadata

        check_driver_version(driver_version, installed_cuda_needs(
            importlib.metadata.packages_distributions(), tensorrt_version or "?", getattr(bindings, "__version__", None)))

    try:
        status, count = runtime.cudaGetDeviceCount()
    except Exception as error:  # cuda-python 13 raises when the driver library itself is missing
        raise MissingDependencyError(f"no CUDA driver here ({type(error).__name__}); run on a machine with an NVIDIA GPU and driver") from None
    if status != runtime.cudaError_t.cudaSuccess or count == 0:
        reason = "no CUDA GPU" if status == runtime.cudaError_t.cudaSuccess else status.name
        raise MissingDependencyError(f"a CUDA GPU is needed to build and run the engine ({reason}); run on a machine with an NVIDIA GPU and driver")


def read_driver_version() -> int | None:
    """cuDriverGetVersion's number (12080 for CUDA 12.8), or None where there is no driver library to ask."""
    from cuda.bindings import driver

    try:
        status, version = driver.cuDriverGetVersion()
    except Exception:  # cuda-python 13 raises when the driver library itself is missing: the device check says so
        return None
    return int(version) if status == driver.CUresult.CUDA_SUCCESS else None


def require_engine_dependencies(plugin: PluginKind = PluginKind.PYTHON, onnx: bool = False) -> Any:
    """The full TensorRT module, after checking its version (>= 10.4), polygraphy (>= 0.53.6), cuda-python, the
    driver's CUDA version and a GPU, in that order and before any CUDA work (to build with PluginKind.AOT, also
    TensorRT >= 10.16 with tensorrt.plugin; with onnx, TensorRT's ONNX parser); MissingDependencyError (one
    line, exit 3) if not."""
    trt = import_tensorrt()
    if not is_full_tensorrt(trt):
        raise MissingDependencyError(
            f"this tensorrt ({getattr(trt, '__version__', '?')}) cannot add Python plugins to a network "
            f"(no INetworkDefinition.add_plugin_v3; TensorRT-RTX is not enough): pip install 'tensorrt>={TENSORRT_FLOOR}'"
        )
    check_tensorrt_version(getattr(trt, "__version__", None))
    if onnx and not hasattr(trt, "OnnxParser"):
        raise MissingDependencyError(f"this tensorrt ({trt.__version__}) has no OnnxParser (libnvonnxparser), which "
                                     f"--onnx needs: pip install 'tensorrt>={TENSORRT_FLOOR}'")
    if plugin.aot:
        from inplace.aot import require_aot_api

        require_aot_api()  # MissingDependencyError before TensorRT 10.16 or without tensorrt.plugin
    check_polygraphy_version(getattr(import_module("polygraphy"), "__version__", None))
    require_cuda_device(getattr(trt, "__version__", None))
    return trt


def trt_feature_dtype(trt: Any, precision: str) -> Any:
    """trt.float32 for "fp32", trt.float16 for "fp16"."""
    dtypes = {"fp32": trt.float32, "fp16": trt.float16}
    if precision not in dtypes:
        raise InputError(f"precision must be one of {sorted(dtypes)}, got {precision!r}")
    return dtypes[precision]


def sample_profile_shapes(bounds: ProfileBounds, num_features: int) -> dict[str, ShapeRange]:
    """min/opt/max shapes of the dynamic inputs X [N, F], src [E, F], idx [E]; W [C, F] is static."""
    nodes, edges = bounds.nodes, bounds.edges
    return {
        INPUT_STATE: ((nodes.min, num_features), (nodes.opt, num_features), (nodes.max, num_features)),
        INPUT_SOURCE: ((edges.min, num_features), (edges.opt, num_features), (edges.max, num_features)),
        INPUT_INDEX: ((edges.min,), (edges.opt,), (edges.max,)),
    }


@contextlib.contextmanager
def tensorrt_log_level(verbose: bool) -> Iterator[None]:
    """TensorRT's messages reach polygraphy's logger: verbose shows TensorRT's VERBOSE ones, else warnings up."""
    from polygraphy.logger import G_LOGGER

    with G_LOGGER.verbosity(G_LOGGER.EXTRA_VERBOSE if verbose else G_LOGGER.WARNING):
        yield


def build_engine_bytes(
    populate: Callable[[Any, Any], Any],
    profile_shapes: Mapping[str, ShapeRange],
    *,
    verbose: bool = False,
) -> tuple[bytes, float]:
    """Builds a serialized engine from a strongly typed network; returns (engine bytes, build seconds).

    `populate(trt, network)` adds the layers and returns whatever must stay alive during the build (the
    plugin object). The config is definition.builder_config's: the optimization profile of `profile_shapes` and
    the aliasing preview feature.
    """
    trt = import_tensorrt()
    import_module("polygraphy")
    from polygraphy.backend.trt import CreateNetwork, engine_bytes_from_network
    from polygraphy.exception import PolygraphyException

    with tensorrt_log_level(verbose):
        builder, network = CreateNetwork(strongly_typed=True)()
        keep_alive = populate(trt, network)
        config = builder_config(trt, profile_shapes)
        start = time.perf_counter()
        try:
            serialized = engine_bytes_from_network((builder, network), config=config)
        except PolygraphyException as error:
            raise EngineError(f"TensorRT could not build the engine ({first_line(error)}); -v shows TensorRT's log") from None
        seconds = time.perf_counter() - start
        del network, builder  # before keep_alive (the plugin) goes at return
    return bytes(serialized), seconds


def read_engine_file(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise InputError(f"--load_engine {shown_path(str(path))}: cannot read the engine ({error.strerror})") from None


def deserialize_engine(data: bytes, source: str, *, verbose: bool = False, just_built: bool = False) -> "ICudaEngine":
    """An ICudaEngine from serialized bytes; the plugin creator is registered first (idempotent).

    A file (`source` its path) that TensorRT cannot load is bad input (InputError, exit 2); an engine this run
    `just_built` that it cannot load is TensorRT's failure (EngineError, exit 4), whatever the input."""
    import_module("polygraphy")
    from polygraphy.backend.trt import engine_from_bytes
    from polygraphy.exception import PolygraphyException

    from plugin.scatter_add_plugin import register_scatter_add_creator

    register_scatter_add_creator()
    reason = "deserialize_cuda_engine returned None"
    try:
        with tensorrt_log_level(verbose):
            engine = engine_from_bytes(data)
    except PolygraphyException as error:
        engine, reason = None, first_line(error)
    if engine is None and just_built:
        raise EngineError(f"TensorRT could not load the engine it just built: {reason}; -v shows TensorRT's log")
    if engine is None:
        raise InputError(f"{shown_path(source)} is not an engine this TensorRT can load (built by another TensorRT "
                         "version or for another GPU?)")
    return engine


def engine_signature(trt: Any, engine: "ICudaEngine", source: str) -> EngineSignature:
    """Precision, F, C, the profile bounds for N and E, and the network kind, read from an engine of this sample."""
    names = {engine.get_tensor_name(i) for i in range(engine.num_io_tensors)}
    kinds = {
        CLASSIFIER: set(INPUT_NAMES) | {OUTPUT_SOFTMAX},
        STATE_UPDATE: set(STATE_INPUT_NAMES) | {OUTPUT_STATE},
    }
    kind = next((kind for kind, expected in kinds.items() if names == expected), None)
    if kind is None:
        expected_text = " or ".join(str(sorted(expected)) for expected in kinds.values())
        raise InputError(f"{source} is not an engine of this sample: tensors {sorted(names)}, expected {expected_text}")
    precisions = {trt.float32: "fp32", trt.float16: "fp16"}
    state_dtype = engine.get_tensor_dtype(INPUT_STATE)
    if state_dtype not in precisions:
        raise InputError(f"{source} has an X of type {state_dtype}, expected float32 or float16")
    num_features = int(engine.get_tensor_shape(INPUT_STATE)[1])
    num_classes = int(engine.get_tensor_shape(INPUT_WEIGHTS)[0]) if kind == CLASSIFIER else 0
    state_range = engine.get_tensor_profile_shape(INPUT_STATE, 0)
    edge_range = engine.get_tensor_profile_shape(INPUT_INDEX, 0)
    return EngineSignature(
        precision=precisions[state_dtype],
        num_features=num_features,
        num_classes=num_classes,
        bounds=ProfileBounds(
            nodes=SizeRange(int(state_range[0][0]), int(state_range[1][0]), int(state_range[2][0])),
            edges=SizeRange(int(edge_range[0][0]), int(edge_range[1][0]), int(edge_range[2][0])),
        ),
        kind=kind,
    )


@dataclass(frozen=True)
class EngineOrigin:
    """Where a run's engine came from, for its report (cli/engine_report.py): what it is fixed to, its build
    seconds and the rewritten model it was built from (None when loaded), the file it was loaded from (None when
    built), and the TensorRT release."""

    signature: EngineSignature
    build_seconds: float | None
    loaded_from: str | None = None
    onnx_path: str | None = None
    tensorrt_version: str = "?"


@dataclass(frozen=True)
class PreparedEngine:
    """A deserialized engine, where it came from, and its serialized bytes (None when loaded)."""

    engine: Any
    origin: EngineOrigin
    data: bytes | None = None  # for --save_engine, written by the caller once the run has succeeded


def prepare_engine(
    trt: Any,
    *,
    kind: str,
    precision: str,
    num_nodes: int,
    num_edges: int,
    num_features: int,
    num_classes: int,
    verbose: bool = False,
    load_engine: str | Path | None = None,
    profile: ProfileBounds | None = None,
    show_progress: bool = False,
    edges_source: str = "the graph",
    plugin: PluginKind = PluginKind.PYTHON,
    onnx: OnnxSource | None = None,
) -> PreparedEngine:
    """Loads the engine from `load_engine` or builds one for `kind` (CLASSIFIER or STATE_UPDATE) with the
    scatter-add `plugin`, from TensorRT's network API or, given `onnx`, from that rewritten
    model (its bytes in .data, for the caller to save). InputError when the sizes do not fit the engine (loaded or
    requested)."""
    build_seconds: float | None = None
    version = getattr(trt, "__version__", "?")

    def check_fits(signature: EngineSignature) -> None:
        check_graph_fits(signature, precision, num_nodes, num_edges, num_features, num_classes, kind, edges_source)

    if load_engine is not None:
        with file_load_progress(str(load_engine), "--load_engine", enabled=show_progress):
            data = read_engine_file(load_engine)
        engine = deserialize_engine(data, str(load_engine), verbose=verbose)
        signature = engine_signature(trt, engine, str(load_engine))
        check_fits(signature)
        return PreparedEngine(engine, EngineOrigin(signature, None, loaded_from=str(load_engine), tensorrt_version=version))
    else:
        bounds = profile or default_profile_bounds(num_nodes, num_edges)
        signature = EngineSignature(precision, num_features, num_classes if kind == CLASSIFIER else 0, bounds, kind)
        check_fits(signature)
        dtype = trt_feature_dtype(trt, precision)
        if onnx is not None:
            populate: Callable[[Any, Any], Any] = functools.partial(populate_from_onnx, source=onnx, verbose=verbose)
        elif kind == CLASSIFIER:
            populate = functools.partial(populate_network, dtype=dtype, num_features=num_features,
                                         num_classes=num_classes, plugin=plugin)
        else:
            populate = functools.partial(populate_state_network, dtype=dtype, num_features=num_features, plugin=plugin,
                                         max_edges=bounds.edges.max)
        with progress(f"Building the {kind} engine", enabled=show_progress):
            data, build_seconds = build_engine_bytes(populate, sample_profile_shapes(bounds, num_features), verbose=verbose)
        engine = deserialize_engine(data, "the engine just built", verbose=verbose, just_built=True)
        if onnx is not None:  # the model decides the engine's tensors: check them as a loaded engine's
            signature = engine_signature(trt, engine, f"the engine built from {onnx.path}")
            check_fits(signature)
    origin = EngineOrigin(signature, build_seconds, onnx_path=None if onnx is None else onnx.path, tensorrt_version=version)
    return PreparedEngine(engine, origin, data)
