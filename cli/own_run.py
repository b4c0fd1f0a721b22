"""Steps 3 to 5 of aliased_io_plugin.py for a model of one's own (a cli.own_model.ModelPlan): an engine
(network.model_engine: TensorRT's ONNX parser, each output that aliases an input bound at that input's address)
or, with --dry-run, the rewritten model in ONNX Runtime with the plugin nodes by their CPU reference
(onnx_path.run), run once or --steps K times; its outputs printed; --validate comparing each output with ONNX
Runtime running the ORIGINAL model on the same inputs (polygraphy's convention, K times with the states fed
back: onnx_path.compare), so that a wrong rewrite fails on any machine. --save_onnx, --save_engine with its
description and --save_outputs are held (engine.outputs) and written only after the run passed, by the entry
script."""

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from cli.console import out
from cli.options import DESCRIPTION_OUTPUT, EXIT_OK
from cli.own_model import SAVE_OUTPUTS, ModelPlan
from cli.report import DRY_RUN_LINE, format_matrix, unused_in_dry_run, verdict
from common.progress import shows_progress
from common.text import shown_path
from onnx_path.compare import compare_output
from onnx_path.describe import model_engine_description, run_files
from onnx_path.inputs import describe, run_in_steps
from onnx_path.overwrite import compared, overwrite_oracle
from onnx_path.run import as_output_dtype, original_run, rewritten_run


def run_model(options: argparse.Namespace, plan: ModelPlan) -> int:
    """Steps 3 to 5 for a model of one's own: the engine (or in a dry run the rewritten model in ONNX Runtime)
    run once or --steps K times, its outputs, --validate against ONNX Runtime on the original."""
    if options.dry_run and plan.model is None:
        return dry_run_loaded(plan)
    if options.dry_run:
        assert plan.model is not None
        outputs = as_output_dtype(run_in_steps(rewritten_run(plan.model), plan.feeds, plan.fresh, plan.states,
                                               plan.runs), plan.outputs, "the dry run")
        report = [DRY_RUN_LINE, *unused_in_dry_run(plan.engine)]
    else:
        from cli.engine_report import model_run_lines
        from network.model_engine import run_model_engine

        dynamic = [spec.name for spec in plan.inputs if any(isinstance(dim, str) for dim in spec.shape)]
        result = run_model_engine(None if plan.model is None else plan.model.engine_source(), plan.feeds,
                                  plan.states, plan.runs, plan.fresh, dynamic,
                                  loaded=None if plan.loaded is None else plan.loaded.run_arguments(),
                                  verbose=options.verbose, show_progress=shows_progress(options.verbose))
        outputs, report = result.outputs, model_run_lines(result, plan.runs)
        plan.engine.outputs.hold("--save_engine", "Engine", result.engine_data)
        hold_description(plan, result.tensors, dynamic)
    hold_run_files(plan, outputs)
    after = f" after {plan.runs:,} runs" if plan.runs > 1 else ""
    for spec in plan.outputs:
        value = np.asarray(outputs[spec.name])
        out(f"Output {describe(spec.name, value.dtype, value.shape)}{after}:")
        out(format_matrix(value))
        out()
    out("\n".join(report))
    status = EXIT_OK
    if options.validate:
        assert plan.model is not None  # a loaded engine has no model to compare with (cli.options refuses it)
        oracle = overwrite_oracle(plan.model, plan.states)  # None where no scatter overwrites rows
        expected = as_output_dtype(run_in_steps(oracle.run if oracle else original_run(plan.model), plan.feeds,
                                                plan.fresh, plan.states, plan.runs), plan.outputs,
                                   "ONNX Runtime's run of the original")
        lines, status = verdict(*(compared(f"Output {spec.name} against ONNX Runtime ({plan.model.original_name()}, "
                                           "same inputs)", spec.name, outputs[spec.name], expected[spec.name],
                                           spec.dtype, oracle, compare_output) for spec in plan.outputs))
        out()
        out("\n".join(lines))
    return status


def dry_run_loaded(plan: ModelPlan) -> int:
    """--dry-run --load_engine of a model's engine: the description and the inputs are checked (step 2); no
    engine is loaded and nothing computed."""
    assert plan.loaded is not None
    out(f"Dry run: {shown_path(plan.loaded.description_file)} and the inputs checked against it; no engine was "
        "loaded and no output computed.")
    for line in unused_in_dry_run(plan.engine):
        out(line)
    return EXIT_OK


def hold_description(plan: ModelPlan, tensors: list[Any], dynamic: Iterable[str]) -> None:
    """--save_engine of a model of one's own: the description of the engine just built held beside it (written
    with the engine, once the run has succeeded)."""
    if plan.model is None or plan.engine.save_engine is None:
        return
    from network.model_engine import profile_shapes

    shapes = {spec.name: spec.shape for spec in (*plan.inputs, *plan.outputs)}
    description = model_engine_description(plan.model.rewritten, tensors, shapes, profile_shapes(plan.feeds, dynamic))
    plan.engine.outputs.hold(DESCRIPTION_OUTPUT, "Engine description", description.encode("ascii"))


def hold_run_files(plan: ModelPlan, outputs: Mapping[str, np.ndarray]) -> None:
    """--save_outputs DIR: the inputs this run used (each --steps run's) and its outputs, held for DIR."""
    if plan.engine.save_outputs is None:
        return
    runs = [plan.feeds, *(plan.fresh(run) for run in range(1, plan.runs))]
    plan.engine.outputs.hold(SAVE_OUTPUTS, "Inputs and outputs (.npy)",
                             run_files(runs, {spec.name: outputs[spec.name] for spec in plan.outputs}))
