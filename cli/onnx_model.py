"""--onnx in a run of aliased_io_plugin.py: the model read and rewritten for --plugin (onnx_path.read), a bad
one stopping with exit 2 before any engine work; --save_onnx held until the run has succeeded."""

from typing import Any

from cli.options import EngineOptions
from common.errors import InputError
from common.text import shown_path
from onnx_path.read import OnnxModel, read_model, require_onnx_packages


def read_onnx_model(options: Any, engine: EngineOptions) -> OnnxModel:
    """--onnx: onnx_path.read.read_model for --plugin, its InputError naming the option; InputError where the
    model holds plugin nodes of the other plugin than a given --plugin. The sample's network must suit --steps
    (checked here, before the graph is read)."""
    assert engine.onnx is not None
    with_runtime = bool(options.dry_run or options.validate)
    require_onnx_packages(with_runtime, "--onnx with --validate or --dry-run" if with_runtime else "--onnx")
    path = engine.onnx
    try:
        model = read_model(path, engine.plugin, engine.own_inputs is not None)
    except InputError as error:
        raise InputError(f"--onnx {error}") from None
    if model.rewritten.plugin != engine.plugin and getattr(options, "plugin", None) is not None:
        raise InputError(f"--plugin {engine.plugin}: --onnx {shown_path(path)} holds plugin nodes of the "
                         f"{model.rewritten.plugin} plugin already, which run only as that plugin: drop --plugin")
    if model.is_sample:
        check_network_kind(model, engine.steps, engine.batch_edges)
    return model


def check_network_kind(model: OnnxModel, steps: int | None, batch_edges: int | None) -> None:
    """InputError unless the sample's network suits the run: the classifier without `steps` (--steps), the
    state update with --steps K --batch_edges B."""
    from network.definition import CLASSIFIER, STATE_UPDATE

    shown, kind, given = f"--onnx {shown_path(model.path)}", model.network.kind, steps is not None
    if kind == CLASSIFIER and given:
        raise InputError(f"{shown} holds the {CLASSIFIER} network; --steps needs the {STATE_UPDATE} network "
                         "(python3 -m export.export_onnx --network state)")
    if kind == STATE_UPDATE and not given:
        raise InputError(f"{shown} holds the {STATE_UPDATE} network; a run without --steps needs the {CLASSIFIER} "
                         "network (python3 -m export.export_onnx --network classifier), or add --steps K "
                         "--batch_edges B to run this one")
    if given and batch_edges is None:
        raise InputError(f"{shown} holds the {STATE_UPDATE} network: --steps {steps} needs --batch_edges B, "
                         "the number of edges each step adds")


def hold_rewritten(model: OnnxModel, engine: EngineOptions) -> None:
    """--save_onnx: the rewritten model's bytes held in engine.outputs, written once the run has succeeded;
    InputError now when it does not serialize."""
    from common.paths import serialized_model

    if engine.save_onnx is not None:
        engine.outputs.hold("--save_onnx", "Rewritten model", serialized_model(model.rewritten.model, "--save_onnx"))
