"""The --onnx runs the entry script hands over: a model of the user's own (any model whose scatters
network.onnx_rewrite rewrites), and the sample network's dry run.

A model of one's own runs on inputs of its own (cli.onnx_inputs: --onnx_inputs FILE.npz, or made from the seed)
instead of a graph: by an engine (network.model_engine: TensorRT's ONNX parser, each output that aliases an input
bound at that input's address) or, with --dry-run, the rewritten model in ONNX Runtime with the plugin node's CPU
reference (network.onnx_runtime.run_rewritten). --steps K runs it K times, the states (outputs aliasing an input)
kept and every other input fresh from the seed. --validate compares each output with ONNX Runtime running the
ORIGINAL model on the same inputs (polygraphy's convention, K times with the states fed back): a wrong rewrite
fails there on any machine. --save_onnx and --save_engine are held (engine.outputs) and written only after
the run passed, by the entry script.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cli.console import out
from cli.onnx_inputs import (
    check_onnx_inputs,
    describe,
    input_shapes,
    inputs_lines,
    load_onnx_inputs,
    make_onnx_inputs,
    run_in_steps,
)
from cli.onnx_model import (
    OnnxModel,
    hold_rewritten,
    original_run,
    rewritten_run,
    sample_output,
)
from cli.onnx_overwrite import compared, overwrite_oracle
from cli.options import EXIT_OK, GRAPH_OPTIONS, EngineOptions, Settings
from cli.report import format_matrix, steps_note, unused_in_dry_run, verdict
from common.errors import InputError
from common.progress import shows_progress
from common.text import shown_path

RELATIVE_TOLERANCE = {"float32": 1e-4, "float16": 1e-2}
"""An output element passes when |actual - ONNX Runtime's| <= this times the output's largest magnitude (other
float types: float16's). Summation order (atomics, the plugin's float32 table) moves a sum by far less."""
DRY_RUN_LINE = ("Dry run: ONNX Runtime ran the rewritten model, the plugin node by its CPU reference; no engine was "
                "built.")


@dataclass(frozen=True)
class OutputCheck:
    """One output against ONNX Runtime's: ok, the largest absolute error, the tolerance and how it was set."""

    ok: bool
    max_abs_error: float
    tolerance: float
    how: str

    def summary(self) -> str:
        return f"largest absolute error {self.max_abs_error:.3g}, tolerance {self.tolerance:.3g} ({self.how})"


def compare_output(actual: np.ndarray, expected: np.ndarray, dtype: Any) -> OutputCheck:
    """`actual` against ONNX Runtime's `expected` for an output of the model's `dtype`: integers and booleans
    exactly, floats within RELATIVE_TOLERANCE of the expected output's largest magnitude; NaN fails."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return OutputCheck(False, float("inf"), 0.0, f"shape {list(actual.shape)}, ONNX Runtime's "
                                                     f"{list(expected.shape)}")
    if actual.size == 0:
        return OutputCheck(True, 0.0, 0.0, "no elements")
    error = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    largest = float(np.max(np.where(np.isnan(error), np.inf, error)))
    kind = np.dtype(dtype).kind if dtype is not None else "f"
    if kind != "f" and dtype is not None:
        return OutputCheck(bool(np.all(actual == expected)), largest, 0.0, "exact: integers")
    relative = RELATIVE_TOLERANCE.get(np.dtype(dtype).name if dtype is not None else "", RELATIVE_TOLERANCE["float16"])
    magnitude = float(np.max(np.abs(expected.astype(np.float64))))
    tolerance = relative * magnitude
    return OutputCheck(bool(np.all(error <= tolerance)), largest, tolerance,
                       f"{relative:g} of its largest magnitude {magnitude:.3g}")


@dataclass(frozen=True)
class ModelPlan:
    """A model of one's own, ready to run: the model (None for an engine loaded with its description: `loaded`),
    its inputs' and outputs' specs (network.onnx_rewrite.TensorSpec), the first run's inputs and their shapes,
    the seed (later --steps runs draw from it) and the engine options."""

    model: OnnxModel | None
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]
    feeds: dict[str, np.ndarray]
    shapes: dict[str, tuple[int, ...]]
    seed: int
    engine: EngineOptions
    given: tuple[dict[str, np.ndarray], ...] = ()  # --onnx_inputs' feeds of the runs after the first
    loaded: Any = None  # cli.onnx_engine_file.LoadedEngine: --load_engine's file and description

    @property
    def runs(self) -> int:
        return self.engine.steps or 1

    @property
    def states(self) -> dict[str, str]:
        """{output: input} of the outputs that are their input's buffer (Rewritten.aliases, or the description's)."""
        return dict(self.model.rewritten.aliases if self.model is not None else self.loaded.description.aliases)

    @property
    def index_bounds(self) -> dict[str, Any]:
        """How many rows each index input indexes (network.onnx_rewrite.IndexBound by input name)."""
        return self.model.rewritten.index_bounds if self.model is not None else self.loaded.index_bounds

    def fresh(self, run: int) -> dict[str, np.ndarray]:
        """Run `run`'s inputs other than the states: --onnx_inputs' for that run where it has them, else drawn
        from the seed (the first run's shapes)."""
        states = set(self.states.values())
        names = [spec.name for spec in self.inputs if spec.name not in states]
        if run <= len(self.given):
            return {name: self.given[run - 1][name] for name in names}
        return make_onnx_inputs(self.inputs, self.shapes, self.index_bounds, self.seed, run, only=names)


def check_model_options(options: Any, engine: EngineOptions, shown: str, why: str, aliases: Mapping[str, str]) -> None:
    """InputError for an option that serves only the sample's network: the graph options, --batch_edges, the
    profile (the engine's is the run's shapes), --benchmark and --cuda_graph; and for --steps on a model with no
    state (no output of `shown` aliases an input); `why` says why the sample's options do not apply."""
    for name in GRAPH_OPTIONS:
        if getattr(options, name, None) is not None:
            raise InputError(f"--{name} gives the sample network's graph; {why}: its inputs come from --onnx_inputs "
                             "FILE.npz or the seed")
    for option, value in (("--batch_edges", engine.batch_edges), ("--max_nodes", engine.max_nodes),
                          ("--max_edges", engine.max_edges), ("--benchmark", engine.benchmark),
                          ("--cuda_graph", engine.cuda_graph or None)):
        if value is not None:
            raise InputError(f"{option} serves the sample's networks; {why} (its engine's profile is the run's input "
                             "shapes: --onnx_shapes)")
    if engine.steps is not None and not aliases:
        raise InputError(f"--steps {engine.steps} keeps the states (outputs that alias an input) between runs; no "
                         f"output of {shown} aliases an input")


def check_later_runs(given: list[dict[str, np.ndarray]], inputs: tuple[Any, ...], bounds: Any, source: str,
                     shapes: dict[str, tuple[int, ...]], steps: int | None) -> None:
    """--onnx_inputs with the feeds of several runs (polygraphy's JSON): no more runs than --steps K, each
    checked as the first and of its shapes (the engine's buffers keep theirs). InputError."""
    if given and len(given) + 1 > (steps or 1):
        raise InputError(f"{source} holds the inputs of {len(given) + 1} runs; "
                         + (f"--steps {steps} makes {steps}" if steps else f"give --steps {len(given) + 1}"))
    for run, feeds in enumerate(given, start=1):
        check_onnx_inputs(inputs, feeds, bounds, f"{source} (run {run})")
        changed = [name for name, array in feeds.items() if tuple(array.shape) != shapes[name]]
        if changed:
            raise InputError(f"{source} (run {run}): {changed[0]} {list(feeds[changed[0]].shape)}, but "
                             f"{list(shapes[changed[0]])} in run 0; every run keeps the first run's shapes")


def plan_model(options: Any, settings: Settings, model: OnnxModel) -> ModelPlan:
    """Step 2 for a model of one's own: its inputs read and checked, or made from the seed, before any engine
    work; the lines saying what the rewrite did and what the run feeds it, printed."""
    from network.onnx_rewrite import model_io

    shown = f"--onnx {shown_path(model.path)}"
    why = f"{shown} runs with {model.own_inputs}" if model.own_inputs else f"{shown} is not the sample's network"
    check_model_options(options, settings.engine, shown, why, model.rewritten.aliases)
    inputs, outputs = model_io(model.original)

    def before_work(shapes: Mapping[str, tuple[int, ...]]) -> None:
        from cli.onnx_engine_file import check_tensor_names

        check_tensor_names(settings.engine, inputs, outputs)
        hold_rewritten(model, settings.engine)

    return plan_inputs(settings, inputs, outputs, model.rewritten.index_bounds, model.lines(), before_work,
                       model=model)


def plan_inputs(settings: Settings, inputs: tuple[Any, ...], outputs: tuple[Any, ...], bounds: Mapping[str, Any],
                head: list[str], before_work: Callable[[Mapping[str, tuple[int, ...]]], None],
                model: OnnxModel | None = None, loaded: Any = None,
                default_shapes: Mapping[str, tuple[int, ...]] | None = None) -> ModelPlan:
    """The plan's inputs, from --onnx_inputs (checked) or the seed, for the model or the loaded engine
    (`inputs`, `outputs`: their TensorSpecs; a loaded engine's `default_shapes`, its profile's opt, where
    --onnx_shapes gives none); before_work(the input shapes) checks what they decide and holds the files to
    write; then the lines `head` and the inputs' are printed."""
    engine = settings.engine
    source: str | None = None
    notes: list[str] = []
    given: list[dict[str, np.ndarray]] = []
    if engine.onnx_inputs is not None:
        source = f"--onnx_inputs {shown_path(engine.onnx_inputs)}"
        feeds, *given = load_onnx_inputs(engine.onnx_inputs)
        check_onnx_inputs(inputs, feeds, bounds, source)
        shapes = {name: tuple(array.shape) for name, array in feeds.items()}
        check_later_runs(given, inputs, bounds, source, shapes, engine.steps)
    else:
        given_by = "--onnx_shapes" if engine.onnx_shapes or not default_shapes else "the engine's profile"
        shapes, notes = input_shapes(inputs, engine.onnx_shapes or default_shapes, given_by)
        feeds = make_onnx_inputs(inputs, shapes, bounds, settings.seed)
    before_work(shapes)
    plan = ModelPlan(model, inputs, outputs, feeds, shapes, settings.seed, engine, tuple(given), loaded)
    # An input no value can be made up for stops here, before any work: the first run that draws from the seed
    # after --onnx_inputs' runs (inputs made from the seed were all made above, with the same rules).
    first_drawn = len(plan.given) + 1
    if engine.onnx_inputs is not None and first_drawn < plan.runs:
        try:
            plan.fresh(first_drawn)
        except InputError as error:
            raise InputError(f"--steps {plan.runs}: the runs after the first draw their inputs other than the states "
                             f"from the seed, but {error}") from None
    out("\n".join(head + inputs_lines(inputs, feeds, bounds, source, notes)))
    if plan.runs > 1:
        runs_given = "run 1 takes its" if len(plan.given) == 1 else f"runs 1 to {len(plan.given)} take their"
        later = (f"{runs_given} other inputs from {source}, later runs draw them from the seed" if plan.given
                 else "every other input is drawn again from the seed for each run after the first")
        out(f"--steps: {plan.runs:,} runs; the states ({', '.join(sorted(set(plan.states.values())))}) stay in place, "
            f"{later}")
    out(flush=True)
    return plan


def run_model(options: Any, plan: ModelPlan) -> int:
    """Steps 3 to 5 for a model of one's own: the engine (or in a dry run the rewritten model in ONNX Runtime)
    run once or --steps K times, its outputs, --validate against ONNX Runtime on the original."""
    from cli.onnx_engine_file import dry_run_loaded, hold_description, hold_run_files

    if options.dry_run and plan.model is None:
        return dry_run_loaded(plan)
    if options.dry_run:
        assert plan.model is not None
        outputs = run_in_steps(rewritten_run(plan.model), plan.feeds, plan.fresh, plan.states, plan.runs)
        report = [DRY_RUN_LINE, *unused_in_dry_run(plan.engine)]
    else:
        from network.model_engine import run_model_engine

        dynamic = [spec.name for spec in plan.inputs if any(isinstance(dim, str) for dim in spec.shape)]
        result = run_model_engine(None if plan.model is None else plan.model.engine_source(), plan.feeds,
                                  plan.states, plan.runs, plan.fresh, dynamic,
                                  loaded=None if plan.loaded is None else plan.loaded.run_arguments(),
                                  verbose=options.verbose, show_progress=shows_progress(options.verbose))
        outputs, report = result.outputs, result.report_lines
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
        expected = run_in_steps(oracle.run if oracle else original_run(plan.model), plan.feeds, plan.fresh,
                                plan.states, plan.runs)
        lines, status = verdict(*(compared(f"Output {spec.name} against ONNX Runtime ({plan.model.original_name()}, "
                                           "same inputs)", spec.name, outputs[spec.name], expected[spec.name],
                                           spec.dtype, oracle, compare_output) for spec in plan.outputs))
        out()
        out("\n".join(lines))
    return status


def dry_run_sample(options: Any, prepared: Any) -> np.ndarray:
    """--dry-run --onnx with the sample's network: the rewritten model in ONNX Runtime (the plugin node by its
    CPU reference) instead of an engine, printed and returned (for --validate, as an engine's output)."""
    model = prepared.onnx
    output = sample_output(prepared, options.precision, rewritten_run(model))
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
