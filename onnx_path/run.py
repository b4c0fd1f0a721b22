"""The --onnx runs the entry script hands over: a model of the user's own (any model whose scatters
onnx_path.rewrite rewrites), and the sample network's dry run.

A model of one's own runs on inputs of its own (onnx_path.inputs: --onnx_inputs FILE.npz, or made from the seed)
instead of a graph: by an engine (network.model_engine: TensorRT's ONNX parser, each output that aliases an input
bound at that input's address) or, with --dry-run, the rewritten model in ONNX Runtime with the plugin node's CPU
reference (onnx_path.runtime.run_rewritten). --steps K runs it K times, the states (outputs aliasing an input)
kept and every other input fresh from the seed. --validate compares each output with ONNX Runtime running the
ORIGINAL model on the same inputs (polygraphy's convention, K times with the states fed back): a wrong rewrite
fails there on any machine. --save_onnx and --save_engine are held (engine.outputs) and written only after
the run passed, by the entry script.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cli.console import out
from common.plugin_kind import PluginKind
from onnx_path.inputs import (
    Shapes,
    check_made_inputs,
    check_onnx_inputs,
    describe,
    input_shapes,
    inputs_lines,
    load_onnx_inputs,
    make_onnx_inputs,
    run_in_steps,
)
from onnx_path.model import (
    OnnxModel,
    hold_rewritten,
    original_run,
    rewritten_run,
    sample_output,
)
from onnx_path.overwrite import compared, overwrite_oracle
from cli.options import EXIT_OK, GRAPH_OPTIONS, EngineOptions, Settings
from cli.report import format_matrix, steps_note, unused_in_dry_run, verdict
from common.errors import InputError
from common.progress import shows_progress
from common.text import shown_path
from reference.gnn import scatter_add_rows

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
    exactly, floats within RELATIVE_TOLERANCE of the EXPECTED output's largest finite magnitude (never the
    actual's: an output blown up must not widen its own tolerance); NaN or an infinity where ONNX Runtime has
    none (or the other way round) fails, naming the element."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return OutputCheck(False, float("inf"), 0.0, f"shape {list(actual.shape)}, ONNX Runtime's "
                                                     f"{list(expected.shape)}")
    if actual.size == 0:
        return OutputCheck(True, 0.0, 0.0, "no elements")
    kind = np.dtype(dtype).kind if dtype is not None else "f"
    if kind != "f" and dtype is not None:
        error = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        return OutputCheck(bool(np.all(actual == expected)), float(np.max(error)), 0.0, "exact: integers")
    actual64, expected64 = actual.astype(np.float64), expected.astype(np.float64)
    finite = np.isfinite(expected64)
    unmatched = (np.isfinite(actual64) != finite) | (~finite & (actual64 != expected64) & ~(
        np.isnan(actual64) & np.isnan(expected64)))
    relative = RELATIVE_TOLERANCE.get(np.dtype(dtype).name if dtype is not None else "", RELATIVE_TOLERANCE["float16"])
    magnitude = float(np.max(np.abs(expected64[finite]))) if finite.any() else 0.0
    tolerance = relative * magnitude
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both are infinite: masked out
        error = np.where(finite & np.isfinite(actual64), np.abs(actual64 - expected64), 0.0)
    largest = float(np.max(error))
    how = f"{relative:g} of ONNX Runtime's largest magnitude {magnitude:.3g}"
    if unmatched.any():
        position = tuple(int(i) for i in np.argwhere(unmatched)[0])
        return OutputCheck(False, largest, tolerance, f"{how}; element {list(position)} is {actual64[position]:g}, "
                                                      f"ONNX Runtime's {expected64[position]:g}")
    if not finite.all():
        how += f"; {int(np.count_nonzero(~finite)):,} non-finite elements equal in both"
    return OutputCheck(bool(np.all(error <= tolerance)), largest, tolerance, how)


@dataclass(frozen=True)
class ModelPlan:
    """A model of one's own, ready to run: the model (None for an engine loaded with its description: `loaded`),
    its inputs' and outputs' specs (onnx_path.rewrite.TensorSpec), the first run's inputs and their shapes,
    the seed (later --steps runs draw from it) and the engine options."""

    model: OnnxModel | None
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]
    feeds: dict[str, np.ndarray]
    shapes: dict[str, tuple[int, ...]]
    seed: int
    engine: EngineOptions
    given: tuple[dict[str, np.ndarray], ...] = ()  # --onnx_inputs' feeds of the runs after the first
    loaded: Any = None  # onnx_path.engine_file.LoadedEngine: --load_engine's file and description

    @property
    def runs(self) -> int:
        return self.engine.steps or 1

    @property
    def states(self) -> dict[str, str]:
        """{output: input} of the outputs that are their input's buffer (Rewritten.aliases, or the description's)."""
        return state_aliases(self.model, self.loaded)

    @property
    def index_bounds(self) -> dict[str, Any]:
        """How many rows each index input indexes (onnx_path.rewrite.IndexBound by input name)."""
        return self.model.rewritten.index_bounds if self.model is not None else self.loaded.index_bounds

    def fresh(self, run: int) -> dict[str, np.ndarray]:
        """Run `run`'s inputs other than the states: --onnx_inputs' for that run where it has them, else drawn
        from the seed (the first run's shapes)."""
        names = drawn_again(self.inputs, self.states)
        if run <= len(self.given):
            return {name: self.given[run - 1][name] for name in names}
        return make_onnx_inputs(self.inputs, self.shapes, self.index_bounds, self.seed, run, only=names)


def state_aliases(model: OnnxModel | None, loaded: Any) -> dict[str, str]:
    """{output: input} of a model's rewrite (Rewritten.aliases), or of a loaded engine's description."""
    return dict(model.rewritten.aliases if model is not None else loaded.description.aliases)


def drawn_again(inputs: Iterable[Any], states: Mapping[str, str]) -> list[str]:
    """The inputs a run after the first takes anew: every input but the states (those an output aliases)."""
    kept = set(states.values())
    return [spec.name for spec in inputs if spec.name not in kept]


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


PRECISION_DTYPES = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16)}


def check_sample_options(options: Any, model: OnnxModel, shown: str) -> None:
    """InputError for --precision or --num_classes, where given, that contradict the model: its floats are of
    their own dtype and its classes (if any) of its own count; the sample's network run on inputs of its own is
    held to its precision and C, as on a graph."""
    from cli.options import given_options
    from network.definition import CLASSIFIER
    from onnx_path.rewrite import model_io

    given, network = given_options(options), model.network
    if "precision" in given:
        wanted = PRECISION_DTYPES[options.precision]
        floats = [spec for spec in model_io(model.original)[0] if spec.dtype is not None and spec.dtype.kind == "f"]
        other = next((spec for spec in floats if spec.dtype != wanted), None)
        if other is not None:
            raise InputError(f"--precision {options.precision} asks for {wanted} features, but {shown}'s input "
                             f"{describe(other.name, other.dtype, other.shape)}: a model runs in its own dtypes "
                             "(drop --precision)")
    if "num_classes" in given:
        if network is None or network.kind != CLASSIFIER:
            raise InputError(f"--num_classes {options.num_classes} sizes the sample classifier's W [C, F]; {shown} "
                             "is not the sample's classifier: its shapes come from its inputs (drop --num_classes)")
        if network.num_classes != int(options.num_classes):
            raise InputError(f"{shown} has {network.num_classes} classes (W [{network.num_classes}, F]), got "
                             f"--num_classes {options.num_classes}")


FLOAT16_LARGEST = float(np.finfo(np.float16).max)


def check_float16_updates(model: OnnxModel, runs: list[Mapping[str, np.ndarray]], source: str) -> None:
    """InputError, before any run, where a float16 state that the model takes as a graph input, together with
    the rows its scatter adds from graph inputs (every run's, --steps), could reach beyond float16's largest
    value: the engine's float16 state would be inf (the sample's network refuses the same range). An overwrite
    adds nothing: its rows are the given float16 values, finite (check_onnx_inputs), so it is not checked."""
    first = runs[0]
    for scatter in model.rewritten.scatters:
        state = first.get(scatter.state)
        if state is None or state.dtype != np.float16 or state.ndim != 2 or scatter.kind != "graph input" or \
                scatter.overwrite or any(
                scatter.source not in feeds or scatter.index not in feeds for feeds in runs):
            continue
        magnitude = np.abs(state.astype(np.float64))
        for feeds in runs:
            src, idx = feeds[scatter.source].astype(np.float64), feeds[scatter.index]
            if src.shape != (idx.shape[0], state.shape[1]):
                break
            magnitude = scatter_add_rows(np.abs(src), None, np.clip(idx, 0, state.shape[0] - 1), state.shape[0],
                                         start=magnitude)
        else:
            if magnitude.size and magnitude.max() > FLOAT16_LARGEST:
                row = int(np.unravel_index(int(np.argmax(magnitude)), magnitude.shape)[0])
                raise InputError(f"{source}: row {row} of the float16 state {scatter.state} could reach "
                                 f"{magnitude.max():.6g} (|{scatter.state}| plus the |{scatter.source}| rows added "
                                 f"into it over {len(runs)} run(s)), beyond the largest float16 value "
                                 f"{FLOAT16_LARGEST:g}: the engine's state would be inf; use smaller values")


def as_output_dtype(outputs: Mapping[str, np.ndarray], specs: tuple[Any, ...], what: str) -> dict[str, np.ndarray]:
    """Each output in the model's dtype (a float16 model runs in ONNX Runtime as its float32 copy); InputError
    for a float16 output whose value lies beyond float16's range, where the engine's output would be inf."""
    result = {name: np.asarray(value) for name, value in outputs.items()}
    for spec in specs:
        value = result.get(spec.name)
        if value is None or spec.dtype != np.float16 or value.dtype == np.float16:
            continue
        with np.errstate(over="ignore"):
            half = value.astype(np.float16)
        beyond = np.isfinite(value) & ~np.isfinite(half)
        if beyond.any():
            position = [int(i) for i in np.argwhere(beyond)[0]]
            raise InputError(f"output {spec.name}{position} = {float(value[tuple(position)]):.6g} in {what} is beyond "
                             f"the largest float16 value {FLOAT16_LARGEST:g}: the engine's float16 output would be "
                             "inf; use smaller inputs")
        result[spec.name] = half
    return result


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


STEPS_HINT = ("give every run's inputs in --onnx_inputs FILE.json (a feed dict per run, as polygraphy run "
              "--save-inputs writes; an .npz holds one run)")
DRY_RUN_HINT = " (or run with --dry-run: the inputs and ONNX Runtime need none of this)"


def require_engine(plugin: PluginKind | None) -> None:
    """TensorRT and the rest of what the engine of `plugin` needs (None: a loaded engine's, which carries its
    kernels; network.engine.require_engine_dependencies), checked before the inputs are read or drawn:
    MissingDependencyError (one line, exit 3) with the --dry-run hint."""
    from common.errors import MissingDependencyError
    from network.engine import require_engine_dependencies

    try:
        if plugin is None:
            require_engine_dependencies()
        else:
            require_engine_dependencies(plugin, onnx=True)
    except MissingDependencyError as error:
        raise MissingDependencyError(f"{error}{DRY_RUN_HINT}") from None


def plan_model(options: Any, settings: Settings, model: OnnxModel) -> ModelPlan:
    """Step 2 for a model of one's own: what the options, the model and the input names, dtypes and shapes
    decide checked first (an .npz's from its headers), then (without --dry-run) the engine's dependencies, and
    only then the inputs read or made from the seed and their values checked; the lines saying what the
    rewrite did and what the run feeds it, printed."""
    from onnx_path.rewrite import model_io

    shown = f"--onnx {shown_path(model.path)}"
    why = f"{shown} runs with {model.own_inputs}" if model.own_inputs else f"{shown} is not the sample's network"
    check_model_options(options, settings.engine, shown, why, model.rewritten.aliases)
    check_sample_options(options, model, shown)
    inputs, outputs = model_io(model.original)

    def before_work(shapes: Mapping[str, tuple[int, ...]]) -> None:
        from onnx_path.engine_file import check_tensor_names
        from onnx_path.rewrite import check_scatter_rows

        check_scatter_rows(model.rewritten, shapes)
        check_tensor_names(settings.engine, inputs, outputs)
        hold_rewritten(model, settings.engine)

    return plan_inputs(options, settings, inputs, outputs, model.rewritten.index_bounds, model.lines(), before_work,
                       lambda: require_engine(model.rewritten.plugin), model=model)


def plan_inputs(options: Any, settings: Settings, inputs: tuple[Any, ...], outputs: tuple[Any, ...],
                bounds: Mapping[str, Any], head: list[str], before_work: Callable[[Mapping[str, tuple[int, ...]]], None],
                require: Callable[[], None], model: OnnxModel | None = None, loaded: Any = None,
                default_shapes: Mapping[str, tuple[int, ...]] | None = None) -> ModelPlan:
    """The plan's inputs for the model or the loaded engine (`inputs`, `outputs`: their TensorSpecs; a loaded
    engine's `default_shapes`, its profile's opt, where --onnx_shapes gives none): what the input names, dtypes
    and shapes decide checked first (an .npz's from its headers), then before_work(the shapes) (what they decide,
    the files to write held) and, without --dry-run, require() (the engine's dependencies); only then the inputs
    read (--onnx_inputs) or made from the seed and their values checked; the lines `head` and the inputs' printed."""
    engine = settings.engine
    runs = engine.steps or 1
    drawn_later = drawn_again(inputs, state_aliases(model, loaded))
    source: str | None = None
    notes: list[str] = []
    given: list[dict[str, np.ndarray]] = []

    def ready(shapes: Shapes, first_drawn: int = 1) -> None:
        """What the shapes decide about the runs that draw from the seed, then the engine's dependencies."""
        if first_drawn < runs:
            try:
                check_made_inputs(inputs, shapes, bounds, only=drawn_later, hint=STEPS_HINT)
            except InputError as error:
                after = "the first" if first_drawn == 1 else f"the {first_drawn} of {source}"
                raise InputError(f"--steps {runs}: the runs after {after} draw their inputs other than the states "
                                 f"from the seed, but {error}") from None
        before_work(shapes)
        if not options.dry_run:
            require()

    if engine.onnx_inputs is not None:
        source = f"--onnx_inputs {shown_path(engine.onnx_inputs)}"
        json = engine.onnx_inputs.lower().endswith(".json")
        feeds, *given = load_onnx_inputs(engine.onnx_inputs, inputs, ready=None if json else ready)
        check_onnx_inputs(inputs, feeds, bounds, source)
        shapes = {name: tuple(array.shape) for name, array in feeds.items()}
        check_later_runs(given, inputs, bounds, source, shapes, engine.steps)
        if json:
            ready(shapes, len(given) + 1)
        if model is not None:
            check_float16_updates(model, [feeds, *given], source)
    else:
        given_by = "--onnx_shapes" if engine.onnx_shapes or not default_shapes else "the engine's profile"
        shapes, notes = input_shapes(inputs, engine.onnx_shapes or default_shapes, given_by)
        check_made_inputs(inputs, shapes, bounds)
        ready(shapes)
        feeds = make_onnx_inputs(inputs, shapes, bounds, settings.seed)
    plan = ModelPlan(model, inputs, outputs, feeds, shapes, settings.seed, engine, tuple(given), loaded)
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
    from onnx_path.engine_file import dry_run_loaded, hold_description, hold_run_files

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
