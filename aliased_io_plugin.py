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
With --onnx MODEL.onnx, cli.onnx_model reads the model and rewrites its scatter-adds into the plugin between steps
2 and 3 (network.onnx_rewrite, no TensorRT), the engine is built from it, and --validate also compares with ONNX
Runtime running the original model; --dry-run runs that instead of an engine.
"""

import argparse
import dataclasses
import os
import signal
import sys

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
from common.errors import CudaError, EngineError, InputError, MissingDependencyError, OutputError
from common.progress import shows_progress

try:  # numpy is the one package every run needs, --dry-run included: without it, one line and exit 3 (main)
    from cli.inputs import Prepared, prepare, read_graph
    from cli.report import format_matrix, state_label, steps_note, validation_report, verdict
    from graph import describe_graph

    NUMPY_MISSING = None
except ModuleNotFoundError as missing:
    if missing.name != "numpy":
        raise
    NUMPY_MISSING = (
        "numpy is not installed; every run needs it, --dry-run included: pip install numpy "
        "(or pip install -r requirements.txt for the engine, -r requirements-test.txt for the tests)"
    )


def _print(*parts: object, flush: bool = False) -> None:
    """print() to stdout, with a failed write raised as OutputError (stdout to a file flushes in blocks,
    so the error may surface at any later print or at the final flush)."""
    try:
        print(*parts, flush=flush)
    except OSError as error:
        raise OutputError(error.strerror or str(error)) from None


def _error(message: object, status: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return status


def dry_run(options: argparse.Namespace, prepared: "Prepared") -> int:
    """--dry-run: prints the float64 reference instead of building and running an engine."""
    if prepared.onnx is not None:
        return dry_run_onnx(options, prepared)
    if prepared.steps is not None:
        assert prepared.steps.final_state is not None
        _print(steps_note(prepared.graph, prepared.steps.batches))
        _print()
        _print(f"Final state X after {len(prepared.steps.batches):,} batches:")
        _print(format_matrix(prepared.steps.final_state))
    else:
        assert prepared.reference is not None
        _print("Classifier output:")
        _print(format_matrix(prepared.reference["softmax"]))
    _print()
    _print("Dry run: this is the float64 numpy reference; no engine was built.")
    if options.validate:
        _print("(--validate has nothing to compare against in a dry run.)")
    print_unused_in_dry_run(prepared)
    return EXIT_OK


def print_unused_in_dry_run(prepared: "Prepared") -> None:
    unused = [name for name, value in (("--save_engine", prepared.engine.save_engine),
                                       ("--load_engine", prepared.engine.load_engine),
                                       ("--benchmark", prepared.engine.benchmark),
                                       ("--cuda_graph", prepared.engine.cuda_graph or None)) if value is not None]
    if unused:
        _print(f"({', '.join(unused)}: no engine to act on in a dry run.)")


def dry_run_onnx(options: argparse.Namespace, prepared: "Prepared") -> int:
    """--dry-run --onnx: the original model in ONNX Runtime instead of an engine; --validate compares its output
    with the float64 reference."""
    from cli.onnx_model import dry_run_output, dry_run_validation

    heading, output = dry_run_output(prepared, options.precision)
    if prepared.steps is not None:
        _print(steps_note(prepared.graph, prepared.steps.batches))
        _print()
    _print(heading)
    _print(format_matrix(output))
    _print()
    _print("Dry run: ONNX Runtime ran the original model on the CPU; no engine was built.")
    print_unused_in_dry_run(prepared)
    if not options.validate:
        return EXIT_OK
    if prepared.steps is not None:
        reference, bound = prepared.steps.final_state, prepared.steps.bound
    else:
        assert prepared.reference is not None
        reference, bound = prepared.reference["softmax"], None
    assert reference is not None
    lines, status = dry_run_validation(output, reference, options.precision, bound)
    _print()
    _print("\n".join(lines))
    return status


def run_once(options: argparse.Namespace, prepared: "Prepared") -> int:
    """Steps 3 to 5 for the classifier: network, engine (and --benchmark), report, --validate."""
    from network.run import run_graph  # TensorRT, polygraphy and cuda-python load inside run_graph

    result = run_graph(
        prepared.graph,
        prepared.weights,
        options.precision,
        verbose=options.verbose,
        load_engine=prepared.engine.load_engine,
        profile=prepared.profile,
        show_progress=shows_progress(options.verbose),
        benchmark_iterations=prepared.engine.benchmark,
        plugin=prepared.engine.plugin,
        cuda_graph=prepared.engine.cuda_graph,
        onnx=None if prepared.onnx is None else prepared.onnx.engine_source(),
    )
    prepared.engine.outputs.hold("--save_engine", "Engine", result.engine_data)
    _print("Classifier output:")
    _print(format_matrix(result.softmax))
    _print()
    for line in result.report_lines:
        _print(line)

    if not options.validate:
        return EXIT_OK
    assert prepared.reference is not None
    if prepared.onnx is not None:
        from cli.onnx_model import validate_against_onnxruntime

        lines, status = validate_against_onnxruntime(prepared, result.softmax, options.precision)
    else:
        lines, status = validation_report(result.softmax, prepared.reference["softmax"], options.precision)
    _print()
    _print("\n".join(lines))
    return status


def run_steps(options: argparse.Namespace, prepared: "Prepared") -> int:
    """Steps 3 to 5 for --steps: K executions on one state buffer, the report, --validate of the final state."""
    from network.steps import run_steps as run_engine_steps  # TensorRT, polygraphy, cuda-python load inside
    from network.steps import compare_state

    assert prepared.steps is not None
    result = run_engine_steps(
        prepared.graph,
        options.precision,
        prepared.steps.batches,
        verbose=options.verbose,
        load_engine=prepared.engine.load_engine,
        profile=prepared.profile,
        show_progress=shows_progress(options.verbose),
        plugin=prepared.engine.plugin,
        cuda_graph=prepared.engine.cuda_graph,
        onnx=None if prepared.onnx is None else prepared.onnx.engine_source(),
    )
    prepared.engine.outputs.hold("--save_engine", "Engine", result.engine_data)
    _print(steps_note(prepared.graph, prepared.steps.batches))
    _print()
    _print(f"Final state X after {len(prepared.steps.batches):,} steps:")
    _print(format_matrix(result.final_state))
    _print()
    for line in result.report_lines:
        _print(line)
    if not options.validate:
        return EXIT_OK
    assert prepared.steps.final_state is not None and prepared.steps.bound is not None
    if prepared.onnx is not None:
        from cli.onnx_model import validate_against_onnxruntime

        lines, status = validate_against_onnxruntime(prepared, result.final_state, options.precision)
    else:
        check = compare_state(result.final_state, prepared.steps.final_state, prepared.steps.bound)
        lines, status = verdict((state_label(len(prepared.steps.batches)), check))
    _print()
    _print("\n".join(lines))
    return status


def write_outputs(prepared: "Prepared", status: int) -> int:
    """--save_onnx and --save_engine, written last and only when the run succeeded: a failed run leaves nothing."""
    outputs = prepared.engine.outputs
    for line in outputs.write() if status == EXIT_OK else outputs.not_written():
        _print(line)
    return status


def read_inputs(options: argparse.Namespace) -> "Prepared":
    """Step 2: the seed and the graph, each printed as soon as it is known, then the weights and the reference."""
    settings = check_options(options)
    _print(f"Setting seed to: {settings.seed}")
    _print(flush=True)
    onnx_model = None
    if settings.engine.onnx is not None:  # the model read and rewritten before the graph: a bad one stops first
        from cli.onnx_model import read_onnx_model

        onnx_model = read_onnx_model(settings.engine, with_runtime=options.dry_run or options.validate)
    show_progress = shows_progress(options.verbose)
    graph_input = read_graph(options, settings, show_progress)
    _print("\n".join(describe_graph(graph_input.graph)))
    if graph_input.features_note:
        _print(graph_input.features_note)
    _print(flush=True)
    prepared = prepare(options, settings, graph_input, show_progress)
    if onnx_model is None:
        return prepared
    from cli.onnx_model import plan_onnx

    plan = plan_onnx(onnx_model, settings.engine, steps=prepared.steps is not None, precision=options.precision,
                     num_features=prepared.graph.num_features, num_classes=settings.num_classes)
    _print("\n".join(plan.lines()))
    _print(flush=True)
    return dataclasses.replace(prepared, onnx=plan)


def main(argv: list[str] | None = None) -> int:
    """The command line: the exit status of the run, with Ctrl-C and an unwritable stdout each one line."""
    try:
        try:
            status = _run(argv)
        except SystemExit as done:  # --help, after printing it
            status = done.code if isinstance(done.code, int) else EXIT_OK
        _flush_stdout()
        return status
    except KeyboardInterrupt:
        return _error("interrupted", EXIT_INTERRUPTED)
    except OutputError as error:
        _drop_stdout()
        return _error(f"cannot write the output to stdout: {error}", EXIT_OUTPUT_FAILED)


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except OSError as error:
        raise OutputError(error.strerror or str(error)) from None


def _drop_stdout() -> None:
    """Points stdout at /dev/null, so that the interpreter's flush at exit does not fail a second time."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # a stdout without a file descriptor (a test's capture)
        pass


def _run(argv: list[str] | None) -> int:
    try:
        options = parse_arguments(argv)  # 1. options
        if NUMPY_MISSING is not None:
            return _error(NUMPY_MISSING, EXIT_MISSING_DEPENDENCY)
        prepared = read_inputs(options)  # 2. graph, weights, reference
    except InputError as error:
        return _error(error, EXIT_BAD_INPUT)
    except MemoryError:
        return _error("not enough memory for this graph; try a smaller one", EXIT_BAD_INPUT)
    except MissingDependencyError as error:  # --onnx without onnx or onnxruntime
        return _error(error, EXIT_MISSING_DEPENDENCY)

    if options.dry_run:
        try:
            return write_outputs(prepared, dry_run(options, prepared))
        except InputError as error:  # ONNX Runtime refused the --onnx model
            return _error(error, EXIT_BAD_INPUT)
    try:  # 3-5. network, engine, validation
        status = run_steps(options, prepared) if prepared.steps is not None else run_once(options, prepared)
        return write_outputs(prepared, status)
    except InputError as error:
        return _error(error, EXIT_BAD_INPUT)
    except MissingDependencyError as error:  # the hints name no option: --dry-run is this script's own
        return _error(f"{error} (or run with --dry-run: the graph and the reference need none of this)",
                      EXIT_MISSING_DEPENDENCY)
    except EngineError as error:
        return _error(error, EXIT_ENGINE_FAILED)
    except CudaError as error:  # a CUDA call on the way failed (out of device memory, a launch): one line too
        return _error(f"CUDA: {error}", EXIT_ENGINE_FAILED)


if __name__ == "__main__":
    if hasattr(signal, "SIGPIPE"):  # output into a closed pipe (| head) ends the run quietly, as other tools do
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
