"""--onnx in a run of aliased_io_plugin.py: the model read and rewritten for --plugin (onnx_path.read), a bad
one stopping with exit 2 before any engine work; --save_onnx held until the run has succeeded."""

from typing import Any

from cli.options import EngineOptions
from common.errors import InputError
from common.text import shown_path
from onnx_path.check import check_network_kind
from onnx_path.read import OnnxModel, read_model, require_onnx_packages


def read_onnx_model(options: Any, engine: EngineOptions) -> OnnxModel:
    """--onnx: onnx_path.read.read_model for --plugin, its InputError naming the option; InputError where the
    model holds plugin nodes of the other plugin than a given --plugin. The sample's network must suit --steps
    (checked here, before the graph is read)."""
    assert engine.onnx is not None
    require_onnx_packages(with_runtime=bool(options.dry_run or options.validate))
    path = engine.onnx
    try:
        model = read_model(path, engine.plugin, engine.own_inputs)
    except InputError as error:
        raise InputError(f"--onnx {error}") from None
    if model.rewritten.plugin != engine.plugin and getattr(options, "plugin", None) is not None:
        raise InputError(f"--plugin {engine.plugin}: --onnx {shown_path(path)} holds plugin nodes of the "
                         f"{model.rewritten.plugin} plugin already, which run only as that plugin: drop --plugin")
    if model.is_sample:
        check_network_kind(model, engine.steps, engine.batch_edges)
    return model


def hold_rewritten(model: OnnxModel, engine: EngineOptions) -> None:
    """--save_onnx: the rewritten model's bytes held in engine.outputs, written once the run has succeeded;
    InputError now when it does not serialize."""
    from common.paths import serialized_model

    if engine.save_onnx is not None:
        engine.outputs.hold("--save_onnx", "Rewritten model", serialized_model(model.rewritten.model, "--save_onnx"))
