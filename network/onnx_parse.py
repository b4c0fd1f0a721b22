"""The network parsed by TensorRT's ONNX parser from a model onnx_path.rewrite rewrote (--onnx): the plugin's
creator(s) registered first, the parser's first error as one line (populate_from_onnx).
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from common.errors import InputError
from common.plugin_kind import PluginKind

if TYPE_CHECKING:
    from tensorrt import INetworkDefinition


@dataclass(frozen=True)
class OnnxSource:
    """A rewritten ONNX model (onnx_path.rewrite) to build the engine from instead of the network API: its
    serialized bytes, the file it came from (for messages) and the plugin its nodes use."""

    model_bytes: bytes
    path: str
    plugin: PluginKind


def register_plugin_creators(plugin: PluginKind) -> None:
    """Registers the creator(s) TensorRT's ONNX parser looks the plugin nodes up by: for the AOT plugins
    tensorrt.plugin's, the steps of every registered op's chains (the project's, plugin/inplace_ops.py, and
    one's own; inplace.registry.register_aot_plugins); else ScatterAddPluginCreator."""
    if plugin.aot:
        from inplace.aot import require_aot_api
        from inplace.registry import register_aot_plugins
        from plugin.inplace_ops import PROJECT_OPS  # noqa: F401 (importing it registers the project's ops)

        require_aot_api()  # MissingDependencyError before TensorRT 10.16 or without tensorrt.plugin
        register_aot_plugins()
    else:
        from plugin.scatter_add_plugin import register_scatter_add_creator

        register_scatter_add_creator()


def parser_error_line(path: str, error: Any) -> str:
    """One line for the ONNX parser's first error (a trt.ParserError, or None): the node's name and operator and
    the first line of TensorRT's description."""
    if error is None:
        return f"{path}: TensorRT's ONNX parser could not parse the model (-v shows TensorRT's log)"
    description = next((line.strip() for line in str(error.desc()).splitlines() if line.strip()), "no description")
    name = error.node_name() or f"#{error.node()}"
    operator = error.node_operator()
    return f"{path}: TensorRT's ONNX parser refused node {name}" + (f" ({operator})" if operator else "") + \
        f": {description}"


def populate_from_onnx(trt: Any, network: "INetworkDefinition", source: OnnxSource, verbose: bool = False) -> Any:
    """Parses the rewritten model into an empty strongly typed network, the plugin's creator(s) registered first;
    returns the parser, which holds the model's weights until the engine is built. InputError (one line naming
    the node) when TensorRT's ONNX parser refuses the model; the parser's own error lines are logged only with
    verbose. Needs the full TensorRT (the plugin nodes)."""
    from polygraphy.backend.trt import get_trt_logger
    from polygraphy.logger import G_LOGGER

    register_plugin_creators(source.plugin)
    if hasattr(trt, "init_libnvinfer_plugins"):  # TensorRT's own plugins, for other nodes of the model
        trt.init_libnvinfer_plugins(get_trt_logger(), "")
    parser = trt.OnnxParser(network, get_trt_logger())
    with G_LOGGER.verbosity(G_LOGGER.EXTRA_VERBOSE if verbose else G_LOGGER.CRITICAL):
        parsed = parser.parse(source.model_bytes)
    if not parsed:
        raise InputError(parser_error_line(source.path, parser.get_error(0) if parser.num_errors else None))
    return parser
