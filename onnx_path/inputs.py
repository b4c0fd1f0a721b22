"""The inputs of a model of the user's own (--onnx, not the sample's network), checked before any engine work:
read from --onnx_inputs (polygraphy's --load-inputs convention: arrays by input name; an .npz for one run, or
the JSON list of feed dicts `polygraphy run --save-inputs` writes, one per run) or made from the seed, with the
dynamic dimensions from --onnx_shapes or DEFAULT_DYNAMIC_DIM; and the fresh inputs of each later --steps run.
numpy only (polygraphy to read its JSON).

Made from the seed: floats standard normal; an integer input that indexes a scatter (Rewritten.index_bounds)
uniform over the rows it indexes. Any other input has no value that could be made up, so it must come from
--onnx_inputs. Every index, given or made, lies in [0, rows) of what it indexes (each row of a [2, E] edge index
in its own rows; given, [-rows, rows) where the model wraps negative values itself): the plugin adds row idx[e]
and checks nothing.
"""

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from common.errors import InputError, MissingDependencyError
from common.limits import DEFAULT_DYNAMIC_DIM
from common.text import shown_path

INPUTS_STREAM = 2
"""Made inputs draw from default_rng((seed, 2, run)), apart from the weights' default_rng(seed) and the random
graph's (seed, 1); run 0 is the first execution, run k the k-th --steps run after it."""
MAX_INPUT_ELEMENTS = 2**28
"""Largest input made from the seed (1 GiB of float32); larger inputs come from --onnx_inputs."""

Shapes = dict[str, tuple[int, ...]]


def _dims(shape: Iterable[Any]) -> str:
    return f"[{', '.join(str(dim) for dim in shape)}]"


def describe(name: str, dtype: Any, shape: Iterable[Any]) -> str:
    return f"{name} {np.dtype(dtype) if dtype is not None else '(a type numpy lacks)'} {_dims(shape)}"


def input_shapes(specs: Iterable[Any], given: Mapping[str, tuple[int, ...]] | None,
                 given_by: str = "shape") -> tuple[Shapes, list[str]]:
    """Each input's shape: --onnx_shapes' where given, else the model's static dimensions with each dynamic one
    from a given input of the same dimension name, or DEFAULT_DYNAMIC_DIM. Returns the shapes and one note per
    dimension name ("N=16 (default)"). InputError for a name that is not an input, a rank or a static dimension
    that differs, or one dimension name given two sizes. `given_by` names where `given` comes from."""
    specs = list(specs)
    given = dict(given or {})
    names = [spec.name for spec in specs]
    unknown = [name for name in given if name not in names]
    if unknown:
        raise InputError(f"{given_by} {unknown[0]}: not an input of the model (its inputs: {', '.join(names)})")
    sizes: dict[str, tuple[int, str]] = {}  # dimension name -> (size, the input that gave it)
    for spec in specs:
        if spec.name in given:
            _bind(spec, given[spec.name], sizes, f"{given_by} {spec.name}:{'x'.join(map(str, given[spec.name]))}")
    notes = [f"{dim}={size} ({source})" for dim, (size, source) in sizes.items()]
    shapes: Shapes = {}
    for spec in specs:
        if spec.name in given:
            shapes[spec.name] = tuple(given[spec.name])
            continue
        shape = []
        for dim in spec.shape:
            if isinstance(dim, int):
                shape.append(dim)
            elif dim == "?":
                shape.append(DEFAULT_DYNAMIC_DIM)
            else:
                if dim not in sizes:
                    sizes[dim] = (DEFAULT_DYNAMIC_DIM, "")
                    notes.append(f"{dim}={DEFAULT_DYNAMIC_DIM} (default)")
                shape.append(sizes[dim][0])
        shapes[spec.name] = tuple(shape)
    return shapes, notes


def _bind(spec: Any, shape: tuple[int, ...], sizes: dict[str, tuple[int, str]], source: str) -> None:
    """Checks `shape` against the model's input `spec` (rank, static dimensions) and records the sizes of its
    named dynamic dimensions; InputError naming `source` for a mismatch, or a size that differs from the one
    another input gave the same dimension name."""
    if len(shape) != len(spec.shape):
        raise InputError(f"{source}: rank {len(shape)}, the model's input is "
                         f"{describe(spec.name, spec.dtype, spec.shape)}")
    for axis, (dim, size) in enumerate(zip(spec.shape, shape)):
        if isinstance(dim, int) and dim != size:
            raise InputError(f"{source}: dimension {axis} is {size}, the model's input is "
                             f"{describe(spec.name, spec.dtype, spec.shape)}")
        if isinstance(dim, str) and dim != "?":
            known = sizes.setdefault(dim, (size, source))
            if known[0] != size:
                raise InputError(f"{source}: dimension {axis} ({dim}) is {size}, but {known[1]} makes {dim} "
                                 f"{known[0]}")


def index_rows(name: str, bound: Any, shapes: Mapping[str, tuple[int, ...]],
               values: np.ndarray | None = None) -> tuple[int, str]:
    """(rows, what they are) of index input `name` from its IndexBound: a constant row count, or dimension
    `axis` of input `input` (the fewest rows where it indexes several states), or (own_max) its own largest value
    + 1 (made up: its length). InputError where the model does not tell: such an index can be neither checked nor
    made up, and the plugin adds row idx[e] unchecked."""
    if getattr(bound, "own_max", False):
        own = int(values.max()) + 1 if values is not None and values.size else max(int(np.prod(shapes[name][:1])), 1)
        return own, "as many rows as its largest value + 1 (the model sizes them so)"
    part = bound.smallest(dict(shapes))
    rows = None if part is None else part.size(dict(shapes))
    if part is None or rows is None:
        raise InputError(f"input {name} indexes a scatter's rows, and the model does not tell how many there are "
                         "(its data is computed), so its values can be neither checked nor made up")
    what = f"the rows of {part.input}" if part.input is not None else f"the {int(rows)} rows"
    return int(rows), what + (" it indexes" if not bound.also else
                              f" (the fewest of the {len(bound.also) + 1} states it indexes)")


def load_onnx_inputs(path: str, specs: Iterable[Any] | None = None,
                     ready: Callable[[Shapes], None] | None = None,
                     source: str | None = None) -> list[dict[str, np.ndarray]]:
    """The feed dicts of --onnx_inputs, one per run: an .npz's arrays by name (no pickled objects; one run), or
    the list polygraphy's JSON holds (`polygraphy run --save-inputs`; a .json file). With the model's input
    `specs`, an .npz's names, dtypes and shapes are checked from its headers (check_input_headers) before any
    array is decompressed, and then `ready(shapes)` is called (the caller's last checks before data is read).
    InputError (one line) naming `source` (default: the inputs file and its path)."""
    from graph.files import npz_members, read_npz_member

    source = source or f"the inputs file {shown_path(path)}"
    if path.lower().endswith(".json"):
        return _polygraphy_inputs(path, source)
    members = npz_members(path, source)
    if specs is not None:
        check_input_headers(specs, {member.name: (member.dtype, member.shape) for member in members}, source)
    if ready is not None:
        ready({member.name: member.shape for member in members})
    return [{member.name: read_npz_member(path, member, source) for member in members}]


def _polygraphy_inputs(path: str, source: str) -> list[dict[str, np.ndarray]]:
    """polygraphy's JSON of inputs (its arrays stored as .npy bytes, read without pickle): a list of feed dicts
    (input name -> array), or one feed dict."""
    from common.imports import import_module

    import contextlib
    import io

    logged = io.StringIO()  # polygraphy's logger prints ("[!] Could not decode ..."): folded into the one line
    try:
        with contextlib.redirect_stdout(logged), contextlib.redirect_stderr(logged):
            json = import_module("polygraphy.json")  # MissingDependencyError with the pip line
            loaded = json.load_json(path)
    except MissingDependencyError:
        raise
    except Exception as error:  # json's, polygraphy's and numpy's decoding errors
        reason = next(iter(str(error).strip().splitlines()), "") or next(
            (line for line in logged.getvalue().splitlines() if line.startswith("[!]")), type(error).__name__)
        raise InputError(f"{source}: not polygraphy's JSON of inputs ({reason[:200]})") from None
    feeds = [loaded] if isinstance(loaded, dict) else loaded
    if not isinstance(feeds, list) or not feeds or not all(
            isinstance(feed, dict) and all(isinstance(value, np.ndarray) for value in feed.values()) for feed in feeds):
        raise InputError(f"{source}: expected a list of feed dicts (input name -> array), as polygraphy run "
                         "--save-inputs writes")
    return [dict(feed) for feed in feeds]


def check_input_headers(specs: Iterable[Any], headers: Mapping[str, tuple[Any, tuple[int, ...]]],
                        source: str) -> None:
    """What the names, dtypes and shapes alone decide ({name: (dtype, shape)}, from the arrays or an .npz's
    headers): every input of the model given, nothing else, each of the model's dtype, rank and static
    dimensions, each dimension name one size; InputError (`source`, the input and the value)."""
    specs = list(specs)
    names = [spec.name for spec in specs]
    missing = [name for name in names if name not in headers]
    if missing:
        raise InputError(f"{source}: no array {missing[0]!r} (the model's inputs: {', '.join(names)})")
    extra = [name for name in headers if name not in names]
    if extra:
        raise InputError(f"{source}: array {extra[0]!r} is not an input of the model (its inputs: {', '.join(names)})")
    sizes: dict[str, tuple[int, str]] = {}
    for spec in specs:
        dtype, shape = headers[spec.name]
        if spec.dtype is None or np.dtype(dtype) != spec.dtype:
            raise InputError(f"{source}: {describe(spec.name, dtype, shape)}, the model's input is "
                             f"{describe(spec.name, spec.dtype, spec.shape)}")
        _bind(spec, tuple(shape), sizes, f"{source}: {spec.name} {_dims(shape)}")


def check_onnx_inputs(specs: Iterable[Any], feeds: Mapping[str, np.ndarray], index_bounds: Mapping[str, Any],
                      source: str) -> None:
    """Every input of the model given, nothing else, each of the model's dtype, rank and static dimensions,
    each dimension name one size, floats finite, every index in [0, rows) of what it indexes; InputError
    (`source`, the input and the value) at the first problem."""
    specs = list(specs)
    check_input_headers(specs, {name: (array.dtype, tuple(array.shape)) for name, array in feeds.items()}, source)
    for spec in specs:
        array = feeds[spec.name]
        if array.dtype.kind == "f" and array.size and not np.all(np.isfinite(array)):
            position = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
            raise InputError(f"{source}: {spec.name}{list(position)} = {float(array[position])} is not finite")
    shapes = {name: tuple(array.shape) for name, array in feeds.items()}
    for name, bound in index_bounds.items():
        for row, part in index_slices(bound, shapes[name]):
            values = feeds[name] if row is None else feeds[name][row]
            rows, what = index_rows(name, part, shapes, values)
            _check_index(name, values, rows, what, source, row, part)


def index_slices(bound: Any, shape: tuple[int, ...]) -> list[tuple[int | None, Any]]:
    """(row, its IndexBound) for each row of an index input whose rows index different tensors (edge_index [2, E]
    of a heterogeneous graph: row 0 the sources' rows, row 1 the targets'), else [(None, bound)] for all of it."""
    if not getattr(bound, "rows_bounded", lambda: [])() or not shape:
        return [(None, bound)]
    return [(row, bound.of_row(row)) for row in range(shape[0])]


def _lowest(bound: Any, rows: int) -> int:
    """The least value in range: -rows where the model wraps negative values into the rows itself, else 0."""
    return -rows if getattr(bound, "wrapped", lambda: False)() else 0


def _check_index(name: str, index: np.ndarray, rows: int, what: str, source: str, row: int | None = None,
                 bound: Any = None) -> None:
    low = _lowest(bound, rows)
    outside = (index < low) | (index >= rows)
    if outside.any():
        position = ([] if row is None else [row]) + [int(i) for i in np.argwhere(outside)[0]]
        value = int(index[tuple(position[0 if row is None else 1:])])
        wraps = " (the model wraps a negative value into them)" if low else ""
        raise InputError(f"{source}: {name}{position} = {value} is outside [{low}, {rows}), {what}{wraps}")


def check_made_inputs(specs: Iterable[Any], shapes: Mapping[str, tuple[int, ...]], index_bounds: Mapping[str, Any],
                      only: Iterable[str] | None = None,
                      hint: str = "give its values in an inputs file") -> None:
    """What make_onnx_inputs would refuse, decided from the specs and shapes alone before anything is drawn:
    InputError for an input of another kind than a float or a scatter's index (no value can be made up for it:
    `hint` says where to give it), one larger than MAX_INPUT_ELEMENTS, or an index into zero rows."""
    wanted = None if only is None else set(only)
    for spec in specs:
        if wanted is not None and spec.name not in wanted:
            continue
        shape = tuple(shapes[spec.name])
        elements = int(np.prod(shape, dtype=np.int64))
        if elements > MAX_INPUT_ELEMENTS:
            raise InputError(f"input {describe(spec.name, spec.dtype, shape)} would hold {elements:,} values, more "
                             f"than the {MAX_INPUT_ELEMENTS:,} made from the seed: {hint}")
        kind = None if spec.dtype is None else np.dtype(spec.dtype).kind
        if kind in ("i", "u") and spec.name in index_bounds:
            for _, bound in index_slices(index_bounds[spec.name], shape):
                rows, _ = index_rows(spec.name, bound, shapes)
                if rows < 1 and elements:
                    part = bound.smallest(dict(shapes))
                    state = f"{part.input} [{', '.join(map(str, shapes[part.input]))}]" if part.input else "its state"
                    raise InputError(f"input {spec.name} [{', '.join(map(str, shape))}] indexes the rows of {state}, "
                                     "which has none, so no index can be made up for it")
        elif kind != "f" or np.dtype(spec.dtype).name not in DRAWN_FLOATS:
            why = ("an integer input that is no scatter's index as it is (one computed into an index, e.g. at + 1, "
                   "has no range the model tells)" if kind in ("i", "u") else
                   f"{describe_type(spec.dtype)}: values are made up only for {', '.join(DRAWN_FLOATS)} and scatter "
                   "indices")
            raise InputError(f"input {describe(spec.name, spec.dtype, spec.shape)}: no value can be made up for "
                             f"{why}; {hint}")


DRAWN_FLOATS = ("float16", "float32", "float64")
"""The float types made from the seed (numpy draws them; bfloat16 and the float8 types it does not)."""


def describe_type(dtype: Any) -> str:
    return "an input of a type numpy lacks" if dtype is None else f"a {np.dtype(dtype)} input"


def make_onnx_inputs(specs: Iterable[Any], shapes: Mapping[str, tuple[int, ...]], index_bounds: Mapping[str, Any],
                     seed: int, run: int = 0, only: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """The inputs (those named in `only`, else all) of run `run` from the seed: floats standard normal in their
    dtype, indices uniform in [0, rows), without repeats for a row overwrite's index where it has at most `rows`
    values (the row of a repeated index is undefined: the engine may keep any of its edges); InputError for what
    check_made_inputs refuses (checked first, before anything is drawn)."""
    specs = list(specs)
    check_made_inputs(specs, shapes, index_bounds, only)
    rng = np.random.default_rng((seed, INPUTS_STREAM, run))
    wanted = None if only is None else set(only)
    feeds: dict[str, np.ndarray] = {}
    for spec in specs:
        if wanted is not None and spec.name not in wanted:
            continue
        shape = tuple(shapes[spec.name])
        if np.dtype(spec.dtype).kind == "f":
            feeds[spec.name] = rng.standard_normal(shape).astype(spec.dtype)
        elif index_slices(index_bounds[spec.name], shape)[0][0] is not None:  # each row in its own range
            bounds = index_slices(index_bounds[spec.name], shape)
            feeds[spec.name] = np.stack([rng.integers(0, max(index_rows(spec.name, bound, shapes)[0], 1), shape[1:])
                                         for _, bound in bounds]).astype(spec.dtype)
        else:
            rows, _ = index_rows(spec.name, index_bounds[spec.name], shapes)
            if distinct_values(index_bounds[spec.name], shape, rows):
                feeds[spec.name] = rng.choice(rows, shape[0], replace=False).astype(spec.dtype)
            else:
                feeds[spec.name] = rng.integers(0, max(rows, 1), shape).astype(spec.dtype)
    return feeds


def distinct_values(bound: Any, shape: tuple[int, ...], rows: int) -> bool:
    """Whether the values made up for an index input are drawn without repeats: a row overwrite's 1-D index of at
    most `rows` values."""
    return bool(getattr(bound, "distinct", False)) and len(shape) == 1 and shape[0] <= rows


def inputs_lines(specs: Iterable[Any], feeds: Mapping[str, np.ndarray], index_bounds: Mapping[str, Any],
                 source: str | None, notes: list[str]) -> list[str]:
    """What the run feeds the model: where the inputs come from, then one line per input."""
    shapes = {name: tuple(array.shape) for name, array in feeds.items()}
    head = f"Inputs from {source}:" if source is not None else (
        "Inputs made from the seed" + (f" (dynamic dimensions: {', '.join(notes)})" if notes else "") + ":")
    lines = [head]
    for spec in specs:
        array = feeds[spec.name]
        how = ""
        if spec.name in index_bounds:
            ranges = []
            for row, bound in index_slices(index_bounds[spec.name], array.shape):
                rows, what = index_rows(spec.name, bound, shapes, array if row is None else array[row])
                low = _lowest(bound, rows) if source is not None else 0
                wraps = " (the model wraps a negative value into them)" if low else ""
                ranges.append(f"{'indices' if row is None else f'row {row}'} in [{low}, {rows}), {what}{wraps}")
            how = ": " + "; ".join(ranges)
            if source is None and distinct_values(index_bounds[spec.name], array.shape, rows):
                how += ", without repeats (a row overwrite's index)"
        elif source is None:
            how = ": standard normal"
        lines.append(f"  {describe(spec.name, array.dtype, array.shape)}{how}")
    return lines


def run_in_steps(run: Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]], feeds: Mapping[str, np.ndarray],
                 fresh: Callable[[int], Mapping[str, np.ndarray]], states: Mapping[str, str],
                 steps: int) -> Mapping[str, np.ndarray]:
    """run(feeds) `steps` times, as --steps runs an engine whose outputs `states` ({output: input}) are their
    inputs' buffers: run 0 on `feeds`, run k on fresh(k) for the other inputs, each state fed back as its
    input. The outputs of the last run."""
    current = dict(feeds)
    outputs: Mapping[str, np.ndarray] = {}
    for step in range(steps):
        if step:
            current.update(fresh(step))
        outputs = run(current)
        current.update({state: outputs[output] for output, state in states.items()})
    return outputs
