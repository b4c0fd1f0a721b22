"""--onnx with the sample's own network in a run of aliased_io_plugin.py: the model checked against the run
(check_against_run) and what the rewrite did printed; with --dry-run the rewritten model run in ONNX Runtime, the
plugin nodes by their CPU reference, instead of an engine (onnx_path.run); --validate against ONNX Runtime running
the original model and against the float64 reference (onnx_path.compare), worded here."""

import argparse
import dataclasses

import numpy as np

from cli.console import out
from cli.inputs import Prepared
from cli.onnx_model import hold_rewritten
from cli.options import Settings
from cli.report import DRY_RUN_LINE, format_matrix, state_label, steps_note, unused_in_dry_run, verdict
from common.errors import InputError
from common.text import shown_path
from onnx_path.compare import classifier_comparisons, state_comparisons
from onnx_path.describe import model_lines
from onnx_path.read import OnnxModel
from onnx_path.run import original_run, rewritten_run, sample_output


def plan_onnx(model: OnnxModel, options: argparse.Namespace, settings: Settings, prepared: Prepared) -> Prepared:
    """The run's Prepared with the model (its `onnx`), after the sample's network is checked against
    the run; holds the rewritten model for --save_onnx (written once the run has succeeded: engine.outputs)
    and prints what the rewrite did."""
    engine = settings.engine
    check_against_run(model, precision=options.precision, num_features=prepared.graph.num_features,
                      num_classes=settings.num_classes)
    hold_rewritten(model, engine)
    out("\n".join(model_lines(model)))
    out(flush=True)
    return dataclasses.replace(prepared, onnx=model)


def check_against_run(model: OnnxModel, *, precision: str, num_features: int, num_classes: int) -> None:
    """InputError naming the first difference between the sample network of the model and this run
    (--precision, the graph's F, --num_classes), as an engine's are checked against a graph."""
    from network.definition import CLASSIFIER

    network, shown = model.network, f"--onnx {shown_path(model.path)}"
    if network.precision != precision:
        raise InputError(f"{shown} is an {network.precision} model (X, src are "
                         f"{'float16' if network.precision == 'fp16' else 'float32'}); got --precision {precision}")
    if network.num_features != num_features:
        raise InputError(f"{shown} takes F={network.num_features} features per node (X [N, {network.num_features}]), "
                         f"the graph has {num_features}")
    if network.kind == CLASSIFIER and network.num_classes != num_classes:
        raise InputError(f"{shown} has {network.num_classes} classes (W [{network.num_classes}, F]), got "
                         f"--num_classes {num_classes}")


def dry_run_sample(options: argparse.Namespace, prepared: Prepared) -> np.ndarray:
    """--dry-run --onnx with the sample's network: the rewritten model in ONNX Runtime (the plugin node by its
    CPU reference) instead of an engine, printed and returned (for --validate, as an engine's output)."""
    model = prepared.onnx
    output = sample_output(rewritten_run(model), prepared.graph, prepared.weights, options.precision,
                           None if prepared.steps is None else prepared.steps.batches)
    if prepared.steps is not None:
        out(steps_note(prepared.graph, prepared.steps.batches))
        out()
        out(f"Final state X after {len(prepared.steps.batches):,} batches (ONNX Runtime, the rewritten {model.path}):")
    else:
        out(f"Classifier output (ONNX Runtime, the rewritten {model.path}):")
    out(format_matrix(output))
    out()
    out(DRY_RUN_LINE, *unused_in_dry_run(prepared.engine), sep="\n")
    return output


def against_onnxruntime(model: OnnxModel) -> str:
    """How the comparison with ONNX Runtime is named in the --validate --onnx report."""
    return f"Against ONNX Runtime ({model.original_name()}, same inputs, twice the reference's tolerance)"


def classifier_validation(model: OnnxModel, actual: np.ndarray, onnxruntime: np.ndarray, reference: np.ndarray,
                          precision: str) -> tuple[list[str], int]:
    """--validate --onnx: the softmax against ONNX Runtime's (twice the tolerance: both lie within it of the
    exact result) and against the float64 reference; the seed's verdict line first, then one line each."""
    versus_onnxruntime, versus_reference = classifier_comparisons(actual, onnxruntime, reference, precision)
    return verdict((against_onnxruntime(model), versus_onnxruntime),
                   ("Against the float64 reference", versus_reference))


def steps_validation(model: OnnxModel, actual: np.ndarray, onnxruntime: np.ndarray, reference: np.ndarray,
                     bound: np.ndarray, steps: int) -> tuple[list[str], int]:
    """--validate --onnx --steps: the final state against ONNX Runtime's (twice the rounding bound) and against
    the float64 reference of all batches (the bound)."""
    versus_onnxruntime, versus_reference = state_comparisons(actual, onnxruntime, reference, bound)
    return verdict((against_onnxruntime(model), versus_onnxruntime), (state_label(steps), versus_reference))


def validate_against_onnxruntime(prepared: Prepared, actual: np.ndarray, precision: str) -> tuple[list[str], int]:
    """--validate --onnx with the sample's network: the softmax (or with --steps the final state) of an engine,
    or in a dry run of the rewritten model, against ONNX Runtime running the original model on the same inputs
    and against the float64 reference."""
    model = prepared.onnx
    onnxruntime = sample_output(original_run(model), prepared.graph, prepared.weights, precision,
                                None if prepared.steps is None else prepared.steps.batches)
    if prepared.steps is not None:
        assert prepared.steps.final_state is not None and prepared.steps.bound is not None
        return steps_validation(model, actual, onnxruntime, prepared.steps.final_state, prepared.steps.bound,
                                len(prepared.steps.batches))
    assert prepared.reference is not None
    return classifier_validation(model, actual, onnxruntime, prepared.reference["softmax"], precision)
