#!/usr/bin/env python3
"""In-place (aliased I/O) TensorRT plugin sample: classify the nodes of a graph by the mean of their
neighbours' features, where the first layer, a scatter-add plugin, adds those features into its input in place.

The story of a run, one function each:
1. options:    cli.options parses and checks every option (standard library only).
2. graph:      cli.inputs reads and validates the graph, draws the seeded weights and computes the float64
               reference (numpy only); bad input stops here with exit status 2 and one line.
3. network:    network.definition puts the scatter-add plugin first, then Cast, mean, MatrixMultiply, ReLU, SoftMax.
4. engine:     network.engine builds (or loads) the engine; network.run runs it once (network.steps: --steps,
               network.benchmark: --benchmark); TensorRT, polygraphy and cuda-python are imported only there,
               so --dry-run needs none of them.
5. validation: the engine's output against the float64 reference (--validate).
6. outputs:    --save_onnx and --save_engine, checked in step 1, are written last and only when the run
               succeeded (common.paths), so a failed run leaves nothing behind.
--onnx MODEL.onnx: the model's scatter-adds are rewritten into the plugin (cli.onnx_model, the library onnx_path) and
the engine is built from it (cli.onnx_sample; --dry-run: ONNX Runtime runs it); any model but the sample's network
runs on inputs of its own (cli.own_model, cli.own_run).
"""

import argparse
import functools
import signal
import sys
from typing import TYPE_CHECKING

from cli.console import NUMPY_HINT, drop_stdout, error_line, flush_stdout
from cli.console import out as _print
from cli.options import (
    EXIT_BAD_INPUT,
    EXIT_ENGINE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_MISSING_DEPENDENCY,
    EXIT_OK,
    EXIT_OUTPUT_FAILED,
    PROG,
    check_options,
    parse_arguments,
)
from common.errors import CudaError, EngineError, InputError, MissingDependencyError, ModelError, OutputError
from common.progress import shows_progress

if TYPE_CHECKING:
    from cli.own_model import ModelPlan

try:  # numpy is the one package every run needs, --dry-run included: without it, one line and exit 3 (main)
    import numpy as np

    from cli.inputs import Prepared, prepare, read_graph
    from cli.report import format_matrix, state_label, steps_note, unused_in_dry_run, validation_report, verdict
    from graph import describe_graph

    NUMPY_MISSING = None
except ModuleNotFoundError as missing:
    if missing.name != "numpy":
        raise
    NUMPY_MISSING = NUMPY_HINT


_error = functools.partial(error_line, PROG)  # one line on stderr; returns the exit status


def dry_run(options: argparse.Namespace, prepared: "Prepared") -> int:
    """--dry-run: prints the float64 reference instead of building and running an engine (with --onnx, what
    ONNX Runtime gives for the rewritten model: cli.onnx_sample)."""
    if prepared.onnx is not None:
        from cli.onnx_sample import dry_run_sample

        return validate(options, prepared, dry_run_sample(options, prepared))
    if prepared.steps is not None:
        assert prepared.steps.final_state is not None
        _print(steps_note(prepared.graph, prepared.steps.batches), "", f"Final state X after "
               f"{len(prepared.steps.batches):,} batches:", format_matrix(prepared.steps.final_state), sep="\n")
    else:
        assert prepared.reference is not None
        _print("Classifier output:", format_matrix(prepared.reference["softmax"]), sep="\n")
    _print("", "Dry run: this is the float64 numpy reference; no engine was built.", sep="\n")
    if options.validate:
        _print("(--validate has nothing to compare against in a dry run.)")
    for line in unused_in_dry_run(prepared.engine):
        _print(line)
    return EXIT_OK


def run_once(options: argparse.Namespace, prepared: "Prepared") -> int:
    """Steps 3 to 5 for the classifier: network, engine (and --benchmark), report, --validate."""
    from cli.engine_report import graph_run_lines
    from network.run import run_graph  # TensorRT, polygraphy and cuda-python load inside run_graph

    engine = prepared.engine
    result = run_graph(
        prepared.graph, prepared.weights, options.precision, verbose=options.verbose, load_engine=engine.load_engine,
        profile=prepared.profile, show_progress=shows_progress(options.verbose), benchmark_iterations=engine.benchmark,
        plugin=engine.plugin if prepared.onnx is None else prepared.onnx.rewritten.plugin, cuda_graph=engine.cuda_graph,
        onnx=None if prepared.onnx is None else prepared.onnx.engine_source(),
    )
    engine.outputs.hold("--save_engine", "Engine", result.engine_data)
    _print("Classifier output:", format_matrix(result.softmax), "", *graph_run_lines(result), sep="\n")
    return validate(options, prepared, result.softmax)


def run_steps(options: argparse.Namespace, prepared: "Prepared") -> int:
    """Steps 3 to 5 for --steps: K executions on one state buffer, the report, --validate of the final state."""
    from cli.engine_report import steps_lines
    from network.steps import run_steps as run_engine_steps  # TensorRT, polygraphy, cuda-python load inside

    assert prepared.steps is not None
    engine = prepared.engine
    result = run_engine_steps(
        prepared.graph, options.precision, prepared.steps.batches, verbose=options.verbose,
        load_engine=engine.load_engine, profile=prepared.profile, show_progress=shows_progress(options.verbose),
        plugin=engine.plugin if prepared.onnx is None else prepared.onnx.rewritten.plugin, cuda_graph=engine.cuda_graph,
        onnx=None if prepared.onnx is None else prepared.onnx.engine_source(),
    )
    engine.outputs.hold("--save_engine", "Engine", result.engine_data)
    steps, batch_edges = len(prepared.steps.batches), len(prepared.steps.batches[0])
    _print(steps_note(prepared.graph, prepared.steps.batches), "", f"Final state X after {steps:,} steps:",
           format_matrix(result.final_state), "", *steps_lines(result, batch_edges), sep="\n")
    return validate(options, prepared, result.final_state)


def validate(options: argparse.Namespace, prepared: "Prepared", actual: "np.ndarray") -> int:
    """Step 5, --validate: the engine's softmax or final state against the float64 reference (with --onnx, and
    against ONNX Runtime running the original model); the verdict lines and the exit status."""
    if not options.validate:
        return EXIT_OK
    if prepared.onnx is not None:
        from cli.onnx_sample import validate_against_onnxruntime

        lines, status = validate_against_onnxruntime(prepared, actual, options.precision)
    elif prepared.steps is not None:
        from reference.state import compare_state

        assert prepared.steps.final_state is not None and prepared.steps.bound is not None
        check = compare_state(actual, prepared.steps.final_state, prepared.steps.bound)
        lines, status = verdict((state_label(len(prepared.steps.batches)), check))
    else:
        assert prepared.reference is not None
        lines, status = validation_report(actual, prepared.reference["softmax"], options.precision)
    _print("", *lines, sep="\n")
    return status


def write_outputs(prepared: "Prepared | ModelPlan", status: int) -> int:
    """Step 6: --save_onnx and --save_engine, written last and only when the run succeeded: a failed run leaves
    nothing."""
    outputs = prepared.engine.outputs
    for line in outputs.write() if status == EXIT_OK else outputs.not_written():
        _print(line)
    return status


def read_inputs(options: argparse.Namespace) -> "Prepared | ModelPlan":
    """Step 2: the seed and the graph, each printed as soon as it is known, then the weights and the reference;
    for a model of the user's own (--onnx), its inputs instead of a graph (cli.own_model.ModelPlan)."""
    settings = check_options(options)
    _print(f"Setting seed to: {settings.seed}")
    _print(flush=True)
    if settings.engine.description is not None:  # --load_engine of a model's engine: its description, its inputs
        from cli.own_model import plan_loaded_engine

        return plan_loaded_engine(options, settings)
    onnx_model = None
    if settings.engine.onnx is not None:  # the model read and rewritten before the graph, so a bad one stops first
        from cli.onnx_model import read_onnx_model

        onnx_model = read_onnx_model(options, settings.engine)
    if onnx_model is not None and not onnx_model.is_sample:  # a model of the user's own: its inputs, no graph
        from cli.own_model import plan_model

        return plan_model(options, settings, onnx_model)
    if settings.engine.save_outputs is not None:
        raise InputError("--save_outputs writes the .npy inputs and outputs of a model of your own; the sample's "
                         "network runs on its graph (give --onnx_shapes or --onnx_inputs to run it as your own)")
    show_progress = shows_progress(options.verbose)
    graph_input = read_graph(options, settings, show_progress)
    _print("\n".join(describe_graph(graph_input.graph)))
    if graph_input.features_note:
        _print(graph_input.features_note)
    _print(flush=True)
    prepared = prepare(options, settings, graph_input, show_progress)
    if onnx_model is None:
        return prepared
    from cli.onnx_sample import plan_onnx

    return plan_onnx(onnx_model, options, settings, prepared)


def main(argv: list[str] | None = None) -> int:
    """The command line: the exit status of the run, with Ctrl-C and an unwritable stdout each one line."""
    try:
        try:
            status = _run(argv)
        except SystemExit as done:  # --help, after printing it
            status = done.code if isinstance(done.code, int) else EXIT_OK
        flush_stdout()
        return status
    except KeyboardInterrupt:
        return _error("interrupted", EXIT_INTERRUPTED)
    except OutputError as error:
        drop_stdout()
        return _error(f"cannot write the output to stdout: {error}", EXIT_OUTPUT_FAILED)


def _run(argv: list[str] | None) -> int:
    options = None  # set once the options are read; an engine stage's missing dependency then offers --dry-run
    try:
        parsed = parse_arguments(argv)  # 1. options
        if NUMPY_MISSING is not None:
            return _error(NUMPY_MISSING, EXIT_MISSING_DEPENDENCY)
        prepared = read_inputs(parsed)  # 2. graph, weights, reference (or a model's own inputs)
        options = parsed
        if not isinstance(prepared, Prepared):  # 3-5 for a model of the user's own (cli.own_run)
            from cli.own_run import run_model

            status = run_model(options, prepared)
        elif options.dry_run:
            status = dry_run(options, prepared)
        else:  # 3-5. network, engine, validation
            status = run_steps(options, prepared) if prepared.steps is not None else run_once(options, prepared)
        return write_outputs(prepared, status)  # 6
    except ModelError as error:  # ONNX Runtime refusing the --onnx model or its feeds: the library names the file
        return _error(f"--onnx {error}", EXIT_BAD_INPUT)
    except InputError as error:
        return _error(error, EXIT_BAD_INPUT)
    except MemoryError:
        return _error("not enough memory for this input; try a smaller one", EXIT_BAD_INPUT)
    except MissingDependencyError as error:  # the hints name no option: --dry-run is this script's own
        hint = "" if options is None or options.dry_run else \
            " (or run with --dry-run: the inputs and the reference need none of this)"
        return _error(f"{error}{hint}", EXIT_MISSING_DEPENDENCY)
    except EngineError as error:
        return _error(error, EXIT_ENGINE_FAILED)
    except CudaError as error:  # a CUDA call on the way failed (out of device memory, a launch): one line too
        return _error(f"CUDA: {error}", EXIT_ENGINE_FAILED)


if __name__ == "__main__":
    if hasattr(signal, "SIGPIPE"):  # output into a closed pipe (| head) ends the run quietly, as other tools do
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
