"""Describe: what a run says about a model and leaves for a runtime. The lines that say what the model is and
what the rewrite did; the engine description E.desc that --save_engine writes beside an engine built from the
model (common.engine_description: the aliases a runtime must bind, the I/O, the plugin kind) and the one
--load_engine reads back (LoadedEngine); the .npy files of --save_outputs, each run's inputs and the last run's
outputs, which cpp/aliased_io_state reads (--inputs, --expected). numpy only."""

import dataclasses
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from common.engine_description import (
    EngineDescription,
    IndexRows,
    describe_built_engine,
    format_description,
    read_description,
)
from common.text import shown_path
from onnx_path.read import OnnxModel


def model_lines(model: OnnxModel, own_inputs_from: str | None = None) -> list[str]:
    """What the model is and what the rewrite did (Rewritten.summary: each scatter, each output aliasing an
    input); `own_inputs_from` says where the inputs of the sample's network run as a model of one's own come
    from."""
    network = model.network
    if network is None:
        what = "a model of your own (not the sample's network)"
    else:
        classes = f", C={network.num_classes}" if network.num_classes is not None else ""
        what = f"the sample's {network.kind} network ({network.precision}, F={network.num_features}{classes})"
        what += ", run as a model of your own" if model.own_inputs else ""
        what += f" ({own_inputs_from})" if model.own_inputs and own_inputs_from else ""
    lines = [f"ONNX model {model.path}: {what}, rewritten for the {model.rewritten.plugin} plugin:"]
    return lines + [f"  {line}" for line in model.rewritten.summary()]


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

    @property
    def inputs(self) -> tuple[Any, ...]:
        """The engine's inputs as onnx_path.rewrite.TensorSpec (bfloat16, which numpy lacks, as dtype None)."""
        return tuple(tensor_spec(tensor) for tensor in self.description.inputs)

    @property
    def outputs(self) -> tuple[Any, ...]:
        return tuple(tensor_spec(tensor) for tensor in self.description.outputs)

    def run_arguments(self) -> tuple[str, str, EngineDescription]:
        """network.model_engine.run_model_engine's `loaded`."""
        return self.path, shown_path(self.description_file), self.description


def tensor_spec(tensor: Any) -> Any:
    """A description's tensor as onnx_path.rewrite.TensorSpec."""
    from onnx_path.rewrite import TensorSpec

    return TensorSpec(tensor.name, None if tensor.dtype == "bfloat16" else np.dtype(tensor.dtype), tensor.shape)


def read_loaded_engine(path: str, description_file: str) -> LoadedEngine:
    """--load_engine's engine `path` with its description read from `description_file` and checked (InputError
    naming the file and the line), its index rows as onnx_path.rewrite.IndexBound."""
    from onnx_path.rewrite import IndexBound

    description = read_description(description_file)
    bounds = {}
    for name, records in description.index_rows.items():
        first, *also = (IndexBound(rows=rows.rows, input=rows.input, axis=rows.axis, own_max=rows.own_max, row=rows.row,
                                   wraps=rows.wraps) for rows in records)
        bounds[name] = dataclasses.replace(first, also=tuple(also))
    return LoadedEngine(path, description_file, description, bounds)


def model_engine_description(rewritten: Any, tensors: list[Any], shapes: Mapping[str, tuple[Any, ...]],
                             profile: Any) -> str:
    """The text of E.desc for an engine built from a rewritten model (onnx_path.rewrite.Rewritten): its plugin,
    its tensors as TensorRT reports them, the model's shapes (dimension names), the aliases, the index rows and
    the engine's `profile` (network.model_engine.profile_shapes)."""
    rows = {name: parts for name, parts in ((name, description_bounds(bound))
                                            for name, bound in rewritten.index_bounds.items()) if parts}
    description = describe_built_engine(rewritten.plugin, tensors, shapes, rewritten.aliases, rows, profile)
    return format_description(description)


def description_bounds(bound: Any) -> tuple[IndexRows, ...]:
    """Every part of an onnx_path.rewrite.IndexBound that the model tells (each state's or row's rows, whether it
    wraps negative values) as the description's IndexRows: a runtime checks each, as the run checked them."""
    return tuple(IndexRows(part.rows, part.input, part.axis, part.own_max, part.row, part.wraps)
                 for part in bound.parts() if part.rows is not None or part.input is not None or part.own_max)


def npy_bytes(array: np.ndarray) -> bytes:
    """`array` as an .npy file (C order, little-endian, as cpp/aliased_io_state reads it)."""
    buffer = io.BytesIO()
    array = np.ascontiguousarray(array)
    np.save(buffer, array.astype(array.dtype.newbyteorder("<")), allow_pickle=False)
    return buffer.getvalue()


def run_files(runs: Sequence[Mapping[str, np.ndarray]], outputs: Mapping[str, np.ndarray]) -> dict[str, bytes]:
    """--save_outputs' files: inputs/step_K/NAME.npy for each run's inputs (run 0: all of them; later runs: the
    inputs other than the states, which stay in place) and outputs/NAME.npy for the last run's outputs."""
    files = {f"{INPUTS_FOLDER}/{step_folder(run)}/{name}.npy": npy_bytes(np.asarray(array))
             for run, feeds in enumerate(runs) for name, array in feeds.items()}
    files.update({f"{OUTPUTS_FOLDER}/{name}.npy": npy_bytes(np.asarray(array)) for name, array in outputs.items()})
    return files
