"""The description saved beside the engine of a model of one's own (`--save_engine E` writes E.desc): what a
runtime needs that TensorRT does not tell, above all which outputs are written into which inputs' memory.

TensorRT reports no engine alias for a plugin's output (ICudaEngine.get_aliased_input_tensor answers null), so
without this a runtime cannot know that an output must be bound at its input's address. The description also
lists the engine's inputs and outputs (name, dtype, shape with dynamic dimensions named), the plugin kind, the
rows each index input indexes (each row of a [2, E] edge index its own) and the optimization profile, so that a loaded engine's inputs are checked before
TensorRT is touched. The format (docs/own_model_cpp.md) is one record a line, read by
cpp/aliased_io_bindings.h as well; `format aliased_io_engine 1` comes first. Standard library only (the command line
checks a description before numpy is imported): no TensorRT, no numpy.
"""

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from common.errors import InputError
from common.plugin_kind import PLUGIN_NAMES
from common.text import shown_path

FORMAT_NAME = "aliased_io_engine"
FORMAT_VERSION = 1
SUFFIX = ".desc"
DTYPES = ("float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool")
"""The dtypes a description may name: TensorRT's I/O types, by numpy's names (bfloat16 has no numpy type)."""
UNNAMED_DIM = "?"
OWN_MAX = "own_max"  # `index NAME own_max`: the rows are the index's own largest value + 1
ROW = "row="  # `index NAME ... row=R`: the record bounds row R (axis 0) of the index, not all of it
WRAPS = "wraps"  # `index NAME ... wraps`: the model maps a negative value v to v + rows itself
MAX_LINES = 100_000
_NAME = re.compile(r"[A-Za-z0-9_.:+\-]+")  # a tensor name that is also a file name (NAME.npy) and one token
_DIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:+\-]*|\?")

Shape = tuple[int | str, ...]
ShapeRange = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class TensorDescription:
    """An engine input or output: its name, dtype (one of DTYPES) and shape (an int per static dimension, a
    name per dynamic one: the ONNX model's dim_param, or "?")."""

    name: str
    dtype: str
    shape: Shape


@dataclass(frozen=True)
class IndexRows:
    """One bound of an index input's values: [0, rows), [0, dimension `axis` of input `input`), or (own_max)
    [0, its own largest value] (PyG's batch vector: the rows are its largest value + 1); of row `row` (axis 0)
    of the index only (edge_index[0] indexes the sources' rows, edge_index[1] the targets'), and [-rows, rows)
    where the model `wraps` a negative value into the rows itself. An index has one or more: its values lie
    within each that bounds them (onnx_path.rewrite.IndexBound's parts)."""

    rows: int | None = None
    input: str | None = None
    axis: int = 0
    own_max: bool = False
    row: int | None = None
    wraps: bool = False


@dataclass(frozen=True)
class EngineDescription:
    """What the engine of a model of one's own needs at run time: plugin kind, inputs, outputs, aliases
    {output: input} (the output is written into the input's memory: bind it at the input's address), the bounds
    of each index input (IndexRows, one or more) and the optimization profile {input: (min, opt, max)} of the inputs with a dynamic dimension."""

    plugin: str
    inputs: tuple[TensorDescription, ...]
    outputs: tuple[TensorDescription, ...]
    aliases: dict[str, str] = field(default_factory=dict)
    index_rows: dict[str, tuple[IndexRows, ...]] = field(default_factory=dict)
    profile: dict[str, ShapeRange] = field(default_factory=dict)

    def input(self, name: str) -> TensorDescription | None:
        return next((tensor for tensor in self.inputs if tensor.name == name), None)

    def output(self, name: str) -> TensorDescription | None:
        return next((tensor for tensor in self.outputs if tensor.name == name), None)


def description_path(engine_path: str) -> str:
    """Where the description of the engine saved at `engine_path` lies: beside it, `engine_path` + ".desc"."""
    return str(engine_path) + SUFFIX


def _shape_text(shape: Iterable[int | str]) -> str:
    return "[" + ",".join(str(dim) for dim in shape) + "]"


def check_name(name: str, what: str) -> str:
    """`name` unless it cannot be a description token and a file name (NAME.npy): InputError."""
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise InputError(f"{what} {name!r}: an engine description and the .npy files of a run name tensors by "
                         "names of letters, digits and _ . : + - only; rename it in the model")
    return name


def describe_engine(plugin: str, inputs: Iterable[TensorDescription], outputs: Iterable[TensorDescription],
                    aliases: Mapping[str, str], index_rows: Mapping[str, Sequence[IndexRows]] | None = None,
                    profile: Mapping[str, ShapeRange] | None = None) -> EngineDescription:
    """The description of an engine, checked as parse_description checks a file (InputError, one line)."""
    description = EngineDescription(plugin, tuple(inputs), tuple(outputs), dict(aliases),
                                    {name: tuple(parts) for name, parts in (index_rows or {}).items()},
                                    {name: tuple(tuple(int(d) for d in s) for s in shapes)  # type: ignore[misc]
                                     for name, shapes in (profile or {}).items()})
    check_description(description, "the engine description")
    return description


def check_description(description: EngineDescription, source: str) -> None:
    """InputError naming `source` and the first rule `description` breaks (docs/own_model_cpp.md)."""
    def fail(problem: str) -> NoReturn:
        raise InputError(f"{source}: {problem}")

    if description.plugin not in PLUGIN_NAMES:
        fail(f"plugin {description.plugin!r}, expected one of {', '.join(PLUGIN_NAMES)}")
    if not description.inputs or not description.outputs:
        fail("an engine has at least one input and one output")
    seen: set[str] = set()
    for kind, tensors in (("input", description.inputs), ("output", description.outputs)):
        for tensor in tensors:
            check_name(tensor.name, f"{source}: {kind}")
            if tensor.name in seen:
                fail(f"tensor {tensor.name!r} is described twice")
            seen.add(tensor.name)
            if tensor.dtype not in DTYPES:
                fail(f"{kind} {tensor.name} has dtype {tensor.dtype!r}, expected one of {', '.join(DTYPES)}")
            for dim in tensor.shape:
                if isinstance(dim, int) and dim < 0 or isinstance(dim, str) and not _DIM_NAME.fullmatch(dim):
                    fail(f"{kind} {tensor.name} has dimension {dim!r}: a size >= 0 or the name of a dynamic one")
    targets: set[str] = set()
    for output, source_input in description.aliases.items():
        written, read = description.output(output), description.input(source_input)
        if written is None or read is None:
            fail(f"alias {output} {source_input}: {output!r} must be an output and {source_input!r} an input")
        if written.dtype != read.dtype or len(written.shape) != len(read.shape) or any(
                isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(written.shape, read.shape)):
            fail(f"alias {output} {source_input}: output {written.dtype} {_shape_text(written.shape)} is not input "
                 f"{read.dtype} {_shape_text(read.shape)}, so it cannot share its memory")
        if source_input in targets:
            fail(f"two outputs are written into input {source_input}'s memory")
        targets.add(source_input)
    for name, parts in description.index_rows.items():
        index = description.input(name)
        if index is None or index.dtype not in ("int64", "int32"):
            fail(f"index {name}: not an int64 or int32 input")
        if any(rows.own_max for rows in parts) and (len(parts) != 1 or parts[0].row is not None or parts[0].wraps):
            fail(f"index {name} {OWN_MAX}: its only record, without {ROW}R or {WRAPS}")
        for rows in parts:
            if rows.input is not None:
                indexed = description.input(rows.input)
                if indexed is None or not 0 <= rows.axis < len(indexed.shape):
                    fail(f"index {name} {rows.input} {rows.axis}: no such input dimension")
            elif not rows.own_max and (rows.rows is None or rows.rows < 0):
                fail(f"index {name}: rows must be a number >= 0 or an input and its dimension")
            if rows.row is not None and rows.row < 0:
                fail(f"index {name}: {ROW}{rows.row} is not a row")
    for name, shapes in description.profile.items():
        profiled = description.input(name)
        if profiled is None:
            fail(f"profile {name}: not an input")
        low, opt, high = shapes
        if any(len(shape) != len(profiled.shape) for shape in shapes):
            fail(f"profile {name}: shapes of another rank than {_shape_text(profiled.shape)}")
        for axis, dim in enumerate(profiled.shape):
            if isinstance(dim, int) and any(shape[axis] != dim for shape in shapes):
                fail(f"profile {name}: dimension {axis} is {dim} in the input, not in the profile")
            if not 0 <= low[axis] <= opt[axis] <= high[axis]:
                fail(f"profile {name}: dimension {axis} must satisfy 0 <= min <= opt <= max")


def format_description(description: EngineDescription) -> str:
    """The description's text (docs/own_model_cpp.md), ending with a newline."""
    lines = [f"format {FORMAT_NAME} {FORMAT_VERSION}",
             "# written by aliased_io_plugin.py --save_engine; the format: docs/own_model_cpp.md",
             f"plugin {description.plugin}"]
    lines += [f"input {t.name} {t.dtype} {_shape_text(t.shape)}" for t in description.inputs]
    lines += [f"output {t.name} {t.dtype} {_shape_text(t.shape)}" for t in description.outputs]
    lines += [f"alias {output} {source}" for output, source in description.aliases.items()]
    lines += [f"index {name} {_bound_text(rows)}" for name, parts in description.index_rows.items() for rows in parts]
    lines += [f"profile {name} " + " ".join(_shape_text(shape) for shape in shapes)
              for name, shapes in description.profile.items()]
    return "\n".join(lines) + "\n"


def _bound_text(rows: IndexRows) -> str:
    """An index record's fields after NAME: ROWS, INPUT AXIS or own_max, then row=R and wraps where they hold."""
    bound = f"{rows.input} {rows.axis}" if rows.input is not None else OWN_MAX if rows.own_max else f"{rows.rows}"
    return bound + (f" {ROW}{rows.row}" if rows.row is not None else "") + (f" {WRAPS}" if rows.wraps else "")


def _parse_index(words: list[str]) -> IndexRows:
    """The bound of an index record's fields after NAME (ValueError)."""
    wraps = bool(words) and words[-1] == WRAPS
    words = words[:-1] if wraps else words
    row = None
    if words and words[-1].startswith(ROW):
        number = words[-1][len(ROW):]
        if not (number.isdigit() and number.isascii()):
            raise ValueError(f"row {number!r} is not a number")
        row, words = int(number), words[:-1]
    if len(words) == 1 and words[0] == OWN_MAX:
        return IndexRows(own_max=True, row=row, wraps=wraps)
    if len(words) not in (1, 2):
        raise ValueError(f"index takes ROWS, INPUT AXIS or {OWN_MAX}, then {ROW}R and {WRAPS} where they hold")
    if not (words[-1].isdigit() and words[-1].isascii()):
        raise ValueError(f"{'rows' if len(words) == 1 else 'axis'} {words[-1]!r} is not a number")
    if len(words) == 1:
        return IndexRows(rows=int(words[0]), row=row, wraps=wraps)
    return IndexRows(input=words[0], axis=int(words[1]), row=row, wraps=wraps)


def _parse_shape(text: str, static_only: bool) -> tuple[int | str, ...]:
    if not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"shape {text!r} is not [D0,D1,...]")
    parts = text[1:-1].split(",") if text != "[]" else []
    dims: list[int | str] = []
    for part in parts:
        if part.isdigit() and part.isascii():
            dims.append(int(part))
        elif not static_only and _DIM_NAME.fullmatch(part):
            dims.append(part)
        else:
            raise ValueError(f"dimension {part!r} of {text} is " + ("not a size" if static_only else
                                                                    "neither a size nor a name"))
    return tuple(dims)


def parse_description(text: str, source: str) -> EngineDescription:
    """The description in `text` (`source`: how to name it), every rule checked: InputError naming `source`,
    the line and the problem."""
    lines = text.split("\n")
    if len(lines) > MAX_LINES:
        raise InputError(f"{source}: {len(lines):,} lines, more than an engine description has ({MAX_LINES:,})")
    records = [(number, line.split()) for number, line in enumerate(lines, start=1)
               if line.strip() and not line.lstrip().startswith("#")]
    expected = ["format", FORMAT_NAME, str(FORMAT_VERSION)]
    if not records or records[0][1][:2] != expected[:2]:
        raise InputError(f"{source}: not an engine description (its first line must be "
                         f"'{' '.join(expected)}')")
    if records[0][1] != expected:
        raise InputError(f"{source}: format {' '.join(records[0][1][1:])}, this program reads "
                         f"'{' '.join(expected[1:])}' only")
    plugin: list[str] = []
    inputs: list[TensorDescription] = []
    outputs: list[TensorDescription] = []
    aliases: dict[str, str] = {}
    index_rows: dict[str, tuple[IndexRows, ...]] = {}
    profile: dict[str, ShapeRange] = {}
    arity = {"plugin": (2,), "input": (4,), "output": (4,), "alias": (3,), "index": (3, 4, 5, 6), "profile": (5,)}
    for number, words in records[1:]:
        where = f"{source} line {number}"
        record = words[0]
        if record not in arity:
            raise InputError(f"{where}: unknown record {record!r} (expected {', '.join(arity)})")
        if len(words) not in arity[record]:
            low, high = arity[record][0] - 1, arity[record][-1] - 1
            raise InputError(f"{where}: {record} takes {low if low == high else f'{low} to {high}'} field(s), "
                             f"got {len(words) - 1}")
        try:
            if record == "plugin":
                plugin.append(words[1])
            elif record in ("input", "output"):
                (inputs if record == "input" else outputs).append(
                    TensorDescription(words[1], words[2], _parse_shape(words[3], static_only=False)))
            elif record == "alias":
                if words[1] in aliases:
                    raise ValueError(f"output {words[1]} has two aliases")
                aliases[words[1]] = words[2]
            elif record == "index":  # one record per bound; an index may have several
                rows = _parse_index(words[2:])
                if rows in index_rows.get(words[1], ()):
                    raise ValueError(f"index {words[1]}: the same record twice")
                index_rows[words[1]] = (*index_rows.get(words[1], ()), rows)
            else:
                if words[1] in profile:
                    raise ValueError(f"profile {words[1]} is given twice")
                shapes = tuple(_parse_shape(word, static_only=True) for word in words[2:])
                profile[words[1]] = shapes  # type: ignore[assignment]  # static_only: ints
        except ValueError as error:
            raise InputError(f"{where}: {error}") from None
    if len(plugin) != 1:
        raise InputError(f"{source}: {len(plugin)} plugin records, expected one")
    description = EngineDescription(plugin[0], tuple(inputs), tuple(outputs), aliases, index_rows, profile)
    check_description(description, source)
    return description


def read_description(path: str, option: str = "--load_engine") -> EngineDescription:
    """The description file at `path`, read and checked; InputError (one line) when it is missing, unreadable,
    not text or breaks a rule."""
    source = f"the engine description {shown_path(path)}"
    try:
        if os.path.getsize(path) > 64 * MAX_LINES * 10:
            raise InputError(f"{source}: too large for an engine description")
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        raise InputError(f"{option}: no engine description {shown_path(path)} beside the engine (--save_engine of "
                         "an --onnx model writes one)") from None
    except OSError as error:
        raise InputError(f"{source}: cannot read it ({error.strerror or error})") from None
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise InputError(f"{source}: not an engine description (not ASCII text)") from None
    return parse_description(text, source)


EngineTensor = tuple[str, bool, str, tuple[int, ...]]
"""What TensorRT says of one engine I/O tensor: name, is it an input, dtype (DTYPES' name), shape (-1: dynamic)."""


def check_engine_tensors(description: EngineDescription, tensors: Sequence[EngineTensor], source: str) -> None:
    """InputError unless the engine's I/O tensors are the description's: the same names as inputs and as
    outputs, dtypes and ranks, each static dimension the same size, each dynamic one (-1) named."""
    described = {t.name: (True, t) for t in description.inputs} | {t.name: (False, t) for t in description.outputs}
    names = [name for name, *_ in tensors]
    missing = [name for name in described if name not in names]
    if missing:
        raise InputError(f"{source} does not match its engine: the engine has no tensor {missing[0]!r} (its "
                         f"tensors: {', '.join(names)})")
    for name, is_input, dtype, shape in tensors:
        if name not in described:
            raise InputError(f"{source} does not match its engine: engine tensor {name!r} is not described")
        expected_input, tensor = described[name]
        if is_input != expected_input:
            raise InputError(f"{source} does not match its engine: {name!r} is an engine "
                             f"{'input' if is_input else 'output'}, described as an {'input' if expected_input else 'output'}")
        dims_match = len(shape) == len(tensor.shape) and all(isinstance(dim, str) or size == dim
                                                             for size, dim in zip(shape, tensor.shape))
        if dtype != tensor.dtype or not dims_match:
            raise InputError(f"{source} does not match its engine: {name} is {dtype} {_shape_text(shape)} in the "
                             f"engine, {tensor.dtype} {_shape_text(tensor.shape)} in the description")


def binding_lines(description: EngineDescription) -> list[str]:
    """Which buffer each engine tensor is bound to: the inputs their own, each aliased output its input's, every
    other output one of its own (as cpp/aliased_io_bindings.h binds them)."""
    lines = [f"  input {t.name} {t.dtype} {_shape_text(t.shape)}: a buffer of its own" for t in description.inputs]
    for tensor in description.outputs:
        source = description.aliases.get(tensor.name)
        where = f"bound at input {source}'s address (in place)" if source else "a buffer of its own"
        lines.append(f"  output {tensor.name} {tensor.dtype} {_shape_text(tensor.shape)}: {where}")
    return lines


def describe_built_engine(plugin: str, tensors: Sequence[EngineTensor], model_shapes: Mapping[str, Shape],
                          aliases: Mapping[str, str], index_rows: Mapping[str, Sequence[IndexRows]],
                          profile: Mapping[str, ShapeRange]) -> EngineDescription:
    """The description of an engine just built from a model: its I/O tensors as TensorRT reports them, each
    dynamic dimension (-1) named as the model names it (`model_shapes`, by tensor; "?" where it has no name),
    and the model's aliases, index rows and the build's profile. InputError for what a description cannot hold."""
    def shape(name: str, dims: tuple[int, ...]) -> Shape:
        named = model_shapes.get(name, ())
        return tuple(size if size >= 0 else named[axis] if axis < len(named) and isinstance(named[axis], str)
                     else UNNAMED_DIM for axis, size in enumerate(dims))

    inputs = [TensorDescription(name, dtype, shape(name, dims)) for name, is_input, dtype, dims in tensors if is_input]
    outputs = [TensorDescription(name, dtype, shape(name, dims)) for name, is_input, dtype, dims in tensors
               if not is_input]
    return describe_engine(plugin, inputs, outputs, aliases, index_rows, profile)
