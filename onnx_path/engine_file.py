"""What a model of one's own leaves for a runtime, and how its saved engine runs again: --save_engine E writes
the engine's description E.desc beside it (common.engine_description: the aliases a runtime must bind, the I/O,
the plugin kind); --save_outputs DIR writes each run's inputs and the last run's outputs as .npy, the files
cpp/aliased_io_state reads (--inputs, --expected); --load_engine E with E.desc beside it runs that engine on
inputs of its own (--onnx_inputs or the seed), each aliased output bound at its input, with no model. numpy
only; the engine runs in network.model_engine.
"""

import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cli.console import out
from cli.options import DESCRIPTION_OUTPUT, EXIT_OK, EngineOptions, Settings
from cli.report import unused_in_dry_run
from common.errors import InputError
from common.text import shown_path
from common.engine_description import (
    EngineDescription,
    IndexRows,
    binding_lines,
    check_name,
    describe_built_engine,
    format_description,
    read_description,
)

SAVE_OUTPUTS = "--save_outputs"
INPUTS_FOLDER, OUTPUTS_FOLDER = "inputs", "outputs"


def step_folder(run: int) -> str:
    """The folder of run `run`'s inputs under DIR/inputs (cpp/aliased_io_state --inputs reads the same)."""
    return f"step_{run}"


@dataclass(frozen=True)
class LoadedEngine:
    """--load_engine's engine file, its description file and the description, with the description's index
    rows as onnx_path.rewrite.IndexBound (by input name)."""

    path: str
    description_file: str
    description: EngineDescription
    index_bounds: dict[str, Any]

    def run_arguments(self) -> tuple[str, str, EngineDescription]:
        """network.model_engine.run_model_engine's `loaded`."""
        return self.path, shown_path(self.description_file), self.description


def check_tensor_names(engine: EngineOptions, inputs: Iterable[Any], outputs: Iterable[Any]) -> None:
    """With --save_engine or --save_outputs, InputError (before any work) for a tensor name that a description
    or an .npy file name cannot hold."""
    if engine.save_engine is None and engine.save_outputs is None:
        return
    option = "--save_engine" if engine.save_engine is not None else SAVE_OUTPUTS
    for kind, specs in (("input", inputs), ("output", outputs)):
        for spec in specs:
            check_name(spec.name, f"{option}: the model's {kind}")


def plan_loaded_engine(options: Any, settings: Settings) -> Any:
    """Step 2 for --load_engine E of a model of one's own: the description E.desc read and checked, the inputs
    (--onnx_inputs, or made from the seed by the description's shapes and index rows) checked against it and
    its profile, before TensorRT is touched; a onnx_path.run.ModelPlan without a model."""
    from onnx_path.run import check_model_options, plan_inputs, require_engine
    from onnx_path.rewrite import IndexBound, TensorSpec

    engine = settings.engine
    assert engine.load_engine is not None and engine.description is not None
    description_file = shown_path(engine.description)
    description = read_description(engine.description)
    shown = f"--load_engine {shown_path(engine.load_engine)}"
    check_model_options(options, engine, shown, f"{shown} holds a model of your own ({shown_path(engine.description)})",
                        description.aliases)

    def spec(tensor: Any) -> Any:
        return TensorSpec(tensor.name, None if tensor.dtype == "bfloat16" else np.dtype(tensor.dtype), tensor.shape)

    bounds = {name: IndexBound(rows=rows.rows, input=rows.input, axis=rows.axis, own_max=rows.own_max)
              for name, rows in description.index_rows.items()}
    loaded = LoadedEngine(engine.load_engine, engine.description, description, bounds)
    head = [f"Engine {shown_path(engine.load_engine)}: a model of your own, described by "
            f"{shown_path(engine.description)} ({description.plugin} plugin); its tensors bound so:",
            *binding_lines(description)]
    return plan_inputs(options, settings, tuple(spec(t) for t in description.inputs),
                       tuple(spec(t) for t in description.outputs), bounds, head,
                       lambda shapes: check_profile(description, shapes, description_file),
                       lambda: require_engine(None), loaded=loaded, default_shapes={name: opt for name, (_, opt, _) in description.profile.items()})


def check_profile(description: EngineDescription, shapes: Mapping[str, tuple[int, ...]], source: str) -> None:
    """InputError for an input shape outside the engine's optimization profile (the description's)."""
    for name, (low, _, high) in description.profile.items():
        shape = tuple(shapes[name])
        if len(shape) != len(low) or any(not lo <= size <= hi for size, lo, hi in zip(shape, low, high)):
            raise InputError(f"input {name} {list(shape)} is outside the engine's profile {list(low)}..{list(high)} "
                             f"({source}); build the engine for these shapes (--onnx ... --save_engine)")


def dry_run_loaded(plan: Any) -> int:
    """--dry-run --load_engine of a model's engine: the description and the inputs are checked (step 2); no
    engine is loaded and nothing computed."""
    out(f"Dry run: {shown_path(plan.loaded.description_file)} and the inputs checked against it; no engine was "
        "loaded and no output computed.")
    for line in unused_in_dry_run(plan.engine):
        out(line)
    return EXIT_OK


def hold_description(plan: Any, tensors: list[Any], dynamic: Iterable[str]) -> None:
    """--save_engine of a model of one's own: the description of the engine just built held beside it (written
    with the engine, once the run has succeeded)."""
    if plan.model is None or plan.engine.save_engine is None:
        return
    from network.model_engine import profile_shapes

    rewritten = plan.model.rewritten
    rows = {name: IndexRows(bound.rows, bound.input, bound.axis, bound.own_max)
            for name, bound in rewritten.index_bounds.items()
            if bound.rows is not None or bound.input is not None or bound.own_max}
    shapes = {spec.name: spec.shape for spec in (*plan.inputs, *plan.outputs)}
    description = describe_built_engine(rewritten.plugin, tensors, shapes, rewritten.aliases, rows,
                                        profile_shapes(plan.feeds, dynamic))
    plan.engine.outputs.hold(DESCRIPTION_OUTPUT, "Engine description", format_description(description).encode("ascii"))


def npy_bytes(array: np.ndarray) -> bytes:
    """`array` as an .npy file (C order, little-endian, as cpp/aliased_io_state reads it)."""
    buffer = io.BytesIO()
    array = np.ascontiguousarray(array)
    np.save(buffer, array.astype(array.dtype.newbyteorder("<")), allow_pickle=False)
    return buffer.getvalue()


def run_files(runs: list[Mapping[str, np.ndarray]], outputs: Mapping[str, np.ndarray]) -> dict[str, bytes]:
    """--save_outputs' files: inputs/step_K/NAME.npy for each run's inputs (run 0: all of them; later runs: the
    inputs other than the states, which stay in place) and outputs/NAME.npy for the last run's outputs."""
    files = {f"{INPUTS_FOLDER}/{step_folder(run)}/{name}.npy": npy_bytes(np.asarray(array))
             for run, feeds in enumerate(runs) for name, array in feeds.items()}
    files.update({f"{OUTPUTS_FOLDER}/{name}.npy": npy_bytes(np.asarray(array)) for name, array in outputs.items()})
    return files


def hold_run_files(plan: Any, outputs: Mapping[str, np.ndarray]) -> None:
    """--save_outputs DIR: the inputs this run used (each --steps run's) and its outputs, held for DIR."""
    if plan.engine.save_outputs is None:
        return
    runs = [plan.feeds, *(plan.fresh(run) for run in range(1, plan.runs))]
    plan.engine.outputs.hold(SAVE_OUTPUTS, "Inputs and outputs (.npy)",
                             run_files(runs, {spec.name: outputs[spec.name] for spec in plan.outputs}))
