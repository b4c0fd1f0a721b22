"""Read: an --onnx model loaded (onnx.checker), its dimensions checked, rewritten with the in-place plugin
(onnx_path.rewrite) and recognised as the sample's network or not: an OnnxModel. onnx and onnx-graphsurgeon
only, no TensorRT; a bad model is an InputError naming the file and the problem, raised before any engine work.
"""

from dataclasses import dataclass
from typing import Any

from common.errors import InputError, MissingDependencyError
from common.plugin_kind import PluginKind
from common.text import shown_path

ONNX_PACKAGES = ("onnx", "onnx_graphsurgeon")
RUNTIME_PACKAGE = "onnxruntime"
INSTALL_LINE = "pip install -r requirements-onnx.txt"


def require_onnx_packages(with_runtime: bool, needed_by: str | None = None) -> None:
    """MissingDependencyError (one line, exit 3) unless onnx and onnx-graphsurgeon (and, to run the model in
    ONNX Runtime, onnxruntime) can be imported; checked before the model or the graph is read. `needed_by` names
    what needs them (default: reading, or reading and running, an ONNX model)."""
    import importlib.util

    wanted = ONNX_PACKAGES + ((RUNTIME_PACKAGE,) if with_runtime else ())
    absent = [name.replace("_", "-") for name in wanted if importlib.util.find_spec(name) is None]
    if absent:
        needs = needed_by or ("reading and running an ONNX model" if with_runtime else "reading an ONNX model")
        raise MissingDependencyError(f"{', '.join(absent)} not installed; {needs} needs onnx, onnx-graphsurgeon"
                                     + (" and onnxruntime" if with_runtime else "") + f": {INSTALL_LINE}")


@dataclass(frozen=True)
class OnnxModel:
    """The model as read (the original, for ONNX Runtime), its rewrite, and the sample network it is (None for
    a model of the user's own). `own_inputs`: even the sample's network runs as a model of one's own, on inputs
    of its own (given, or made from the seed for given shapes) instead of a graph."""

    path: str
    original: Any  # onnx.ModelProto
    rewritten: Any  # onnx_path.rewrite.Rewritten
    network: Any  # onnx_path.rewrite.SampleNetwork or None
    own_inputs: bool = False

    @property
    def is_sample(self) -> bool:
        return self.network is not None and not self.own_inputs

    @property
    def holds_plugin_nodes(self) -> bool:
        """Whether the original model already holds plugin nodes (torch.ops.aliased_io.scatter_add_ exported
        through export.ops), which ONNX Runtime has no kernel for."""
        from inplace.registry import computed_here
        from onnx_path.nodes import is_plugin_node

        return any(is_plugin_node(node.domain, node.op_type) or computed_here(node.domain, node.op_type)
                   for node in self.original.graph.node)

    def original_name(self) -> str:
        """How the original model is named where ONNX Runtime's run of it is compared."""
        from inplace.registry import computed_by

        own = computed_by(self.original)  # in-place ops of one's own: by torch eager where torch is installed
        if own:
            return f"the original {self.path}, {own}"
        return f"the original {self.path}" + (", its plugin nodes by their CPU reference" if self.holds_plugin_nodes
                                              else "")

    def engine_source(self) -> Any:
        """The rewritten model as network.onnx_parse.OnnxSource, for the engine build."""
        from network.onnx_parse import OnnxSource

        return OnnxSource(self.rewritten.model.SerializeToString(), self.path, self.rewritten.plugin)


def read_model(path: str, plugin: PluginKind, own_inputs: bool = False) -> OnnxModel:
    """The model at `path` loaded, its dimensions checked, rewritten for `plugin` (a model that holds plugin nodes
    already keeps theirs: Rewritten.plugin) and recognised as the sample's network or not; InputError naming the
    file and the problem (the node, for the rewrite). `own_inputs`: OnnxModel's."""
    from onnx_path.rewrite import load_model, rewrite_model, sample_network

    model = load_model(path)
    check_dimensions(model, shown_path(path))
    try:
        rewritten = rewrite_model(model, plugin)
    except InputError as error:
        raise InputError(f"{shown_path(path)}: {error}") from None
    python_rewrite = rewritten.model if rewritten.plugin is PluginKind.PYTHON else None  # the sample's check reads it
    return OnnxModel(path, model, rewritten, sample_network(model, python_rewrite), own_inputs)


def check_dimensions(model: Any, shown: str) -> None:
    """InputError for a static dimension below 0 of a graph input or output (onnx.checker accepts -3, which
    no tensor can have)."""
    from onnx_path.rewrite import model_io

    inputs, outputs = model_io(model)
    for what, specs in (("input", inputs), ("output", outputs)):
        for spec in specs:
            for axis, dim in enumerate(spec.shape):
                if isinstance(dim, int) and dim < 0:
                    raise InputError(f"{shown}: {what} {spec.name} has dimension {dim} at axis {axis}; a dimension "
                                     "is a size of 0 or more, or a name (dynamic)")
