"""Step 2 of aliased_io_plugin.py for a model of one's own (any --onnx model that is not the sample's network,
or the sample's run with --onnx_inputs/--onnx_shapes) and for --load_engine of such a model's engine with its
description: the options checked against it, then its inputs, read from --onnx_inputs or made from the seed
(onnx_path.inputs) and checked (onnx_path.check), TensorRT's presence checked before they are read; a ModelPlan
that cli.own_run runs. --steps K runs it K times, the states (outputs aliasing an input) kept and every other
input fresh from the seed."""

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cli.console import out
from cli.onnx_model import hold_rewritten
from cli.options import GRAPH_OPTIONS, EngineOptions, Settings, given_options
from common.engine_description import binding_lines, check_name
from common.errors import InputError, MissingDependencyError
from common.plugin_kind import PluginKind
from common.text import shown_path
from onnx_path.check import check_float16_updates, check_later_runs, check_profile
from onnx_path.describe import LoadedEngine, model_lines, read_loaded_engine
from onnx_path.inputs import (
    Shapes,
    check_made_inputs,
    check_onnx_inputs,
    describe,
    input_shapes,
    inputs_lines,
    load_onnx_inputs,
    make_onnx_inputs,
)
from onnx_path.read import OnnxModel

SAVE_OUTPUTS = "--save_outputs"


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
    loaded: LoadedEngine | None = None  # --load_engine's file and description

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
        if self.model is not None:
            return self.model.rewritten.index_bounds
        assert self.loaded is not None
        return self.loaded.index_bounds

    def fresh(self, run: int) -> dict[str, np.ndarray]:
        """Run `run`'s inputs other than the states: --onnx_inputs' for that run where it has them, else drawn
        from the seed (the first run's shapes)."""
        names = drawn_again(self.inputs, self.states)
        if run <= len(self.given):
            return {name: self.given[run - 1][name] for name in names}
        return make_onnx_inputs(self.inputs, self.shapes, self.index_bounds, self.seed, run, only=names)


def state_aliases(model: OnnxModel | None, loaded: LoadedEngine | None) -> dict[str, str]:
    """{output: input} of a model's rewrite (Rewritten.aliases), or of a loaded engine's description."""
    if model is not None:
        return dict(model.rewritten.aliases)
    assert loaded is not None
    return dict(loaded.description.aliases)


def drawn_again(inputs: Iterable[Any], states: Mapping[str, str]) -> list[str]:
    """The inputs a run after the first takes anew: every input but the states (those an output aliases)."""
    kept = set(states.values())
    return [spec.name for spec in inputs if spec.name not in kept]


def check_model_options(options: argparse.Namespace, engine: EngineOptions, shown: str, why: str,
                        aliases: Mapping[str, str]) -> None:
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


def check_sample_options(options: argparse.Namespace, model: OnnxModel, shown: str) -> None:
    """InputError for --precision or --num_classes, where given, that contradict the model: its floats are of
    their own dtype and its classes (if any) of its own count; the sample's network run on inputs of its own is
    held to its precision and C, as on a graph."""
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


def check_tensor_names(engine: EngineOptions, inputs: Iterable[Any], outputs: Iterable[Any]) -> None:
    """With --save_engine or --save_outputs, InputError (before any work) for a tensor name that a description
    or an .npy file name cannot hold."""
    if engine.save_engine is None and engine.save_outputs is None:
        return
    option = "--save_engine" if engine.save_engine is not None else SAVE_OUTPUTS
    for kind, specs in (("input", inputs), ("output", outputs)):
        for spec in specs:
            check_name(spec.name, f"{option}: the model's {kind}")


GIVE_IT = "give it in --onnx_inputs FILE.npz"
STEPS_HINT = ("give every run's inputs in --onnx_inputs FILE.json (a feed dict per run, as polygraphy run "
              "--save-inputs writes; an .npz holds one run)")
DRY_RUN_HINT = " (or run with --dry-run: the inputs and ONNX Runtime need none of this)"


def require_engine(plugin: PluginKind | None) -> None:
    """TensorRT and the rest of what the engine of `plugin` needs (None: a loaded engine's, which carries its
    kernels; network.engine.require_engine_dependencies), checked before the inputs are read or drawn:
    MissingDependencyError (one line, exit 3) with the --dry-run hint."""
    from network.engine import require_engine_dependencies

    try:
        if plugin is None:
            require_engine_dependencies()
        else:
            require_engine_dependencies(plugin, onnx=True)
    except MissingDependencyError as error:
        raise MissingDependencyError(f"{error}{DRY_RUN_HINT}") from None


def plan_model(options: argparse.Namespace, settings: Settings, model: OnnxModel) -> ModelPlan:
    """Step 2 for a model of one's own: what the options, the model and the input names, dtypes and shapes
    decide checked first (an .npz's from its headers), then (without --dry-run) the engine's dependencies, and
    only then the inputs read or made from the seed and their values checked; the lines saying what the
    rewrite did and what the run feeds it, printed."""
    from onnx_path.rewrite import model_io

    shown = f"--onnx {shown_path(model.path)}"
    own = settings.engine.own_inputs
    why = f"{shown} runs with {own}" if model.own_inputs else f"{shown} is not the sample's network"
    check_model_options(options, settings.engine, shown, why, model.rewritten.aliases)
    check_sample_options(options, model, shown)
    inputs, outputs = model_io(model.original)

    def before_work(shapes: Mapping[str, tuple[int, ...]]) -> None:
        from onnx_path.rewrite import check_scatter_rows

        check_scatter_rows(model.rewritten, shapes)
        check_tensor_names(settings.engine, inputs, outputs)
        hold_rewritten(model, settings.engine)

    return plan_inputs(options, settings, inputs, outputs, model.rewritten.index_bounds, model_lines(model, own),
                       before_work, lambda: require_engine(model.rewritten.plugin), model=model)


def plan_loaded_engine(options: argparse.Namespace, settings: Settings) -> ModelPlan:
    """Step 2 for --load_engine E of a model of one's own: the description E.desc read and checked, the inputs
    (--onnx_inputs, or made from the seed by the description's shapes and index rows) checked against it and
    its profile, before TensorRT is touched; a ModelPlan without a model."""
    engine = settings.engine
    assert engine.load_engine is not None and engine.description is not None
    description_file = shown_path(engine.description)
    loaded = read_loaded_engine(engine.load_engine, engine.description)
    description = loaded.description
    shown = f"--load_engine {shown_path(engine.load_engine)}"
    check_model_options(options, engine, shown, f"{shown} holds a model of your own ({shown_path(engine.description)})",
                        description.aliases)

    head = [f"Engine {shown_path(engine.load_engine)}: a model of your own, described by "
            f"{shown_path(engine.description)} ({description.plugin} plugin); its tensors bound so:",
            *binding_lines(description)]
    return plan_inputs(options, settings, loaded.inputs, loaded.outputs, loaded.index_bounds, head,
                       lambda shapes: check_engine_profile(description, shapes, description_file),
                       lambda: require_engine(None), loaded=loaded,
                       default_shapes={name: opt for name, (_, opt, _) in description.profile.items()})


def check_engine_profile(description: Any, shapes: Mapping[str, tuple[int, ...]], source: str) -> None:
    """onnx_path.check.check_profile, its advice naming the options that build an engine for other shapes."""
    try:
        check_profile(description, shapes, source)
    except InputError as error:
        raise InputError(f"{error} (--onnx ... --save_engine)") from None


def plan_inputs(options: argparse.Namespace, settings: Settings, inputs: tuple[Any, ...], outputs: tuple[Any, ...],
                bounds: Mapping[str, Any], head: list[str],
                before_work: Callable[[Mapping[str, tuple[int, ...]]], None],
                require: Callable[[], None], model: OnnxModel | None = None, loaded: LoadedEngine | None = None,
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
        feeds, *given = load_onnx_inputs(engine.onnx_inputs, inputs, ready=None if json else ready, source=source)
        check_onnx_inputs(inputs, feeds, bounds, source)
        shapes = {name: tuple(array.shape) for name, array in feeds.items()}
        if given and len(given) + 1 > runs:
            raise InputError(f"{source} holds the inputs of {len(given) + 1} runs; " + (
                f"--steps {runs} makes {runs}" if engine.steps else f"give --steps {len(given) + 1}"))
        check_later_runs(given, inputs, bounds, source, shapes)
        if json:
            ready(shapes, len(given) + 1)
        if model is not None:
            check_float16_updates(model, [feeds, *given], source)
    else:
        given_by = "--onnx_shapes" if engine.onnx_shapes or not default_shapes else "the engine's profile"
        shapes, notes = input_shapes(inputs, engine.onnx_shapes or default_shapes, given_by)
        check_made_inputs(inputs, shapes, bounds, hint=GIVE_IT)
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
