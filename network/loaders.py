"""Engine loaders in polygraphy's style: build serialized engine bytes from the network, save, read, deserialize.

The build uses polygraphy's CreateNetwork(strongly_typed=True), CreateConfig with the optimization profile and
PreviewFeature.ALIASED_PLUGIN_IO_10_03 (without it TensorRT ignores get_aliased_input), and
engine_bytes_from_network. Deserializing needs the plugin creator registered first, in every process.
"""

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import EngineError, InputError
from common.imports import import_module, import_tensorrt
from network.builder import (
    INPUT_INDEX,
    INPUT_NAMES,
    INPUT_SOURCE,
    INPUT_STATE,
    INPUT_WEIGHTS,
    OUTPUT_SOFTMAX,
    OUTPUT_STATE,
    STATE_INPUT_NAMES,
)
from network.profile import CLASSIFIER, STATE_UPDATE, EngineSignature, ProfileBounds, SizeRange

if TYPE_CHECKING:
    from tensorrt import ICudaEngine

ShapeRange = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


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
    plugin object). The config enables PreviewFeature.ALIASED_PLUGIN_IO_10_03 and one optimization profile.
    """
    trt = import_tensorrt()
    import_module("polygraphy")
    from polygraphy.backend.trt import CreateConfig, CreateNetwork, Profile, engine_bytes_from_network
    from polygraphy.exception import PolygraphyException

    with tensorrt_log_level(verbose):
        builder, network = CreateNetwork(strongly_typed=True)()
        keep_alive = populate(trt, network)
        profile = Profile()
        for name, (low, opt, high) in profile_shapes.items():
            profile.add(name, min=low, opt=opt, max=high)
        config = CreateConfig(profiles=[profile], preview_features=[trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03])
        start = time.perf_counter()
        try:
            serialized = engine_bytes_from_network((builder, network), config=config)
        except PolygraphyException as error:
            raise EngineError(f"TensorRT could not build the engine ({first_line(error)}); -v shows TensorRT's log") from None
        seconds = time.perf_counter() - start
        del network, builder  # before keep_alive (the plugin) goes at return
    return bytes(serialized), seconds


def first_line(error: BaseException) -> str:
    """The first non-empty line of an exception's message (polygraphy's can span many lines)."""
    return next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)


def save_engine_file(data: bytes, path: str | Path) -> None:
    try:
        Path(path).write_bytes(data)
    except OSError as error:
        raise InputError(f"cannot write the engine to {str(path)!r}: {error.strerror}") from None


def read_engine_file(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise InputError(f"cannot read the engine file {str(path)!r}: {error.strerror}") from None


def deserialize_engine(data: bytes, source: str, *, verbose: bool = False) -> "ICudaEngine":
    """An ICudaEngine from serialized bytes; the plugin creator is registered first (idempotent)."""
    import_module("polygraphy")
    from polygraphy.backend.trt import engine_from_bytes
    from polygraphy.exception import PolygraphyException

    from plugin.scatter_add_plugin import register_scatter_add_creator

    register_scatter_add_creator()
    try:
        with tensorrt_log_level(verbose):
            engine = engine_from_bytes(data)
    except PolygraphyException:
        engine = None
    if engine is None:
        raise InputError(f"{source} is not an engine this TensorRT can load (built by another TensorRT version or for another GPU?)")
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
