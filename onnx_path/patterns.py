"""The patterns the rewrite matches in an exported model, and its refusals: which Scatter* node is a scatter-add
the plugin can do in place, into what, with which index; which stays with TensorRT; and, in the rewritten graph,
which outputs share an input's memory and how many rows each integer input indexes. Plain functions over
onnx-graphsurgeon's graph (gs.Node, gs.Variable, gs.Constant); each refusal is an InputError of one line naming
the node and the value (or what could not be proved).

A scatter-add (torch.onnx.export(dynamo=True) of torch 2.13 writes these; docs/onnx.md lists the nodes):
    index_add     ScatterND(data, Unsqueeze(idx, [1] or [-1]) or Reshape(idx, [-1, 1]), src, reduction=add)
    scatter_add   ScatterElements(data, Expand(Unsqueeze(idx, [1, ...]) or Reshape(idx, [-1, 1, ...]), shape),
                  src, axis=0 or -rank, reduction=add), the Expand's output proved [E, data's trailing dims] by
                  the shapes the model records or computes (dims, shape_value: Concat of Shape slices of any
                  tensor, symbolic dimensions); without the Expand only where src has one column
    1-D           data [N], updates [E] (counts, degrees): ScatterElements with any index, ScatterND as above
A constant index (torch.tensor([...]): the exporter folds the Unsqueeze into the constant) is a constant idx.
A row overwrite is the same without a reduction (index_copy, index_put without accumulate, X[idx] = rows: the
ScatterND; scatter(0, idx[:, None].expand_as(src), src): the ScatterElements), Match.reduction OVERWRITE: the
plugin's overwrite mode (where an index repeats, one of its edges wins, undefined which: as in ONNX).
data [R, ...] float32/float16 (R rows on axis 0), src [E, ...] of data's dtype and trailing shape, idx [E] int64.
The data the plugin adds into (data_kind: INPUT, FILL, COMPUTED): a graph input (read by nothing else but Shape
nodes); a fill (ConstantOfShape, Expand of a constant, a uniform constant: zeros_like and torch.zeros), which
is cloned when something else reads it; or a tensor another node makes for this scatter alone. A view
(Reshape...) of a tensor is judged as that tensor. Left to TensorRT (left_reason): ScatterElements with min, max
or mul. Refused: ScatterND with another reduction, another axis, include_self=False, a narrow index
(fewer columns than src: torch adds only those), an Expand not proved to cover every column, data read by another
node or that is also a graph output, two updates of one tensor, a non-uniform constant, a dtype the
plugin lacks, the legacy exporter's pattern, an index not built as above.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from common.errors import InputError
from onnx_path.nodes import PLUGIN_OP, is_plugin_node, node_aliases, step_of
from plugin.rules import FEATURE_DTYPES, INDEX_DTYPE

SCATTER_OPS = ("ScatterND", "ScatterElements", "Scatter")
FORMS = {"ScatterND": "index_add", "ScatterElements": "scatter_add"}
OVERWRITE_FORMS = {"ScatterND": "index_copy", "ScatterElements": "scatter"}  # reduction none: rows overwritten
ADD, OVERWRITE = "add", "none"  # the reductions the plugin does in place (Match.reduction)
SHAPE_ONLY_OPS = ("Shape",)  # consumers that read a tensor's shape, not its values: safe beside an in-place update
PASS_THROUGH_OPS = ("Cast", "CastLike", "Identity", "Unsqueeze", "Reshape", "Squeeze")  # keep a fill a fill
VIEW_OPS = ("Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten")  # the same values in another shape

# How a scatter's data is added into in place.
INPUT, FILL, COMPUTED = "graph input", "fill", "computed"


@dataclass
class Match:
    """A scatter recognised: its node, form, data, index (the 1-D idx), updates (src) and reduction (ADD: the
    plugin adds src's rows into data's; OVERWRITE: it writes them, one of its edges winning where an index repeats).
    data and updates of rank 1 are rows of one column (is_one_dimensional)."""

    node: Any
    form: str
    data: Any
    index: Any
    updates: Any
    reduction: str = ADD

    @property
    def overwrites(self) -> bool:
        return self.reduction == OVERWRITE


# --- reading the graph ----------------------------------------------------------------------------------------
def made_by(tensor: Any) -> str:
    """How a tensor comes about, for a message: a graph input, a constant, or made by node NAME (OP)."""
    if not tensor.inputs:
        return "a constant" if tensor.__class__.__name__ == "Constant" else "a graph input"
    producer = tensor.inputs[0]
    return f"made by node {producer.name} ({producer.op})"


def producer(tensor: Any, *ops: str) -> Any:
    """The node that makes `tensor` when it is one of `ops`, else None."""
    if tensor is None or not tensor.inputs:
        return None
    node = tensor.inputs[0]
    return node if node.op in ops else None


def constant(tensor: Any) -> np.ndarray | None:
    """The values of an initializer or of a Constant node's output, else None."""
    values = getattr(tensor, "values", None)
    if values is not None and not tensor.inputs:
        return np.asarray(values)
    node = producer(tensor, "Constant")
    if node is None:
        return None
    if "value" in node.attrs:
        return np.asarray(node.attrs["value"].values)
    for name in ("value_int", "value_ints", "value_float", "value_floats"):
        if name in node.attrs:
            return np.asarray(node.attrs[name])
    return None


def fill_value(tensor: Any) -> float | None:
    """The one value of a tensor filled with a constant (Expand of a one-element constant, ConstantOfShape,
    a uniform constant, through Cast/Unsqueeze/Reshape/...); None otherwise. ConstantOfShape without a value
    attribute fills with zeros (the ONNX default)."""
    values = constant(tensor)
    if values is not None:
        return float(values.flat[0]) if values.size and np.all(values == values.flat[0]) else None
    node = producer(tensor, "Expand", "ConstantOfShape", *PASS_THROUGH_OPS)
    if node is None:
        return None
    if node.op == "ConstantOfShape":
        value = node.attrs.get("value")
        return 0.0 if value is None else float(np.asarray(value.values).flat[0])
    if node.op == "Expand":
        values = constant(node.inputs[0])
        return float(values.flat[0]) if values is not None and values.size == 1 else None
    return fill_value(node.inputs[0])


def rank(tensor: Any) -> int | None:
    return None if getattr(tensor, "shape", None) is None else len(tensor.shape)


def dtype(tensor: Any) -> np.dtype | None:
    value = getattr(tensor, "dtype", None)
    if value is None:
        return None
    try:
        return np.dtype(value)
    except TypeError:  # an onnx type numpy lacks (bfloat16, float8)
        return None


def describe(tensor: Any) -> str:
    shape = getattr(tensor, "shape", None)
    dims = "?" if shape is None else ", ".join(str(dim) for dim in shape)
    return f"{type_name(tensor)} [{dims}]"


def type_name(tensor: Any) -> str:
    """A tensor's element type as a message names it: numpy's name, ONNX's for a type numpy lacks (an int
    TensorProto code, e.g. 16: bfloat16), "untyped" where the model records none (0, UNDEFINED)."""
    known, value = dtype(tensor), getattr(tensor, "dtype", None)
    if known is not None:
        return str(known)
    if value is None or value == 0:
        return "untyped"
    if isinstance(value, int):
        from onnx import TensorProto

        try:
            return TensorProto.DataType.Name(value).lower()
        except ValueError:
            return f"ONNX type {value}"
    return str(value)


def known(dim: Any) -> bool:
    return isinstance(dim, int) and dim >= 0


# --- symbolic shapes: what the model proves about a tensor's dimensions ------------------------------------------
# A dimension is an int, a symbol (a name the model records: the exporter's "N", "E", "N + u0", or ONNX shape
# inference's "unk__3", one name for one size within the model) or an opaque ("?", tensor, axis) where nothing is
# recorded; two dimensions are the same only where they are equal ints, equal symbols or the same opaque one.
Dim = Any


def same(a: Dim, b: Dim) -> bool:
    return a is not None and b is not None and a == b


def _recorded(tensor: Any) -> list[Dim] | None:
    shape = getattr(tensor, "shape", None)
    if shape is None:
        return None
    return [int(dim) if known(dim) else dim if isinstance(dim, str) and dim else ("?", tensor.name, axis)
            for axis, dim in enumerate(shape)]


def _vague(dim: Dim) -> bool:
    """A dimension that tells nothing beyond itself: opaque, or a symbol ONNX's inference made up."""
    return isinstance(dim, tuple) or (isinstance(dim, str) and dim.startswith("unk__"))


def _better(recorded: Dim, derived: Dim) -> Dim:
    """Of two names for one dimension, the one that tells more: a number or the model's symbol, then a source
    tensor's axis (derived from the graph), then a symbol of ONNX's inference."""
    def vagueness(dim: Dim) -> int:
        return 2 if isinstance(dim, str) and dim.startswith("unk__") else 1 if isinstance(dim, tuple) else 0
    return derived if vagueness(derived) < vagueness(recorded) else recorded


def dims(tensor: Any, depth: int = 0) -> list[Dim] | None:
    """The dimensions of `tensor`: as recorded (the exporter's value_info, ONNX shape inference), where a recorded
    one is vague or missing as the node that makes it says (a fill's shape tensor, an Expand's broadcast, a
    Reshape to constants, Cast/Identity); None where not even the rank is known."""
    recorded = _recorded(tensor)
    if depth > 32 or (recorded is not None and not any(_vague(dim) for dim in recorded)):
        return recorded
    derived = _derived_dims(tensor, depth + 1)
    if derived is None or (recorded is not None and len(derived) != len(recorded)):
        return recorded
    if recorded is None:
        return derived
    return [_better(dim, new) for dim, new in zip(recorded, derived)]


def _derived_dims(tensor: Any, depth: int) -> list[Dim] | None:
    node = producer(tensor, "ConstantOfShape", "Expand", "Reshape", "Cast", "CastLike", "Identity", "Gather",
                    "Squeeze", "Slice", "Split")
    if node is None:
        values = constant(tensor)
        return None if values is None else [int(dim) for dim in values.shape]
    if node.op in ("Gather", "Squeeze", "Slice", "Split"):
        return _selected_dims(node, tensor, dims(node.inputs[0], depth))
    if node.op == "ConstantOfShape":
        return shape_value(node.inputs[0], depth)
    if node.op == "Expand":
        return broadcast(dims(node.inputs[0], depth), shape_value(node.inputs[1], depth))
    if node.op == "Reshape":
        return _reshaped(dims(node.inputs[0], depth), constant(node.inputs[1]), int(node.attrs.get("allowzero", 0)))
    return dims(node.inputs[0], depth)


def _selected_dims(node: Any, tensor: Any, source: list[Dim] | None) -> list[Dim] | None:
    """The dimensions of a row (or rows) taken out of `source`: Gather of a constant index (the axis dropped for a
    scalar, its length for a 1-D index), Squeeze of constant axes, Slice/Split (the other axes kept, the one cut
    vague: ("?", tensor, axis)) -- how an edge_index [2, E]'s row becomes an index [E]."""
    if source is None:
        return None
    size = len(source)
    if node.op == "Gather":
        index, axis = constant(node.inputs[1]), int(node.attrs.get("axis", 0)) % max(size, 1)
        if index is None or index.ndim > 1:
            return None
        return source[:axis] + [int(dim) for dim in index.shape] + source[axis + 1:]
    if node.op == "Squeeze":
        axes = node.attrs.get("axes")
        values = constant(node.inputs[1]) if axes is None and len(node.inputs) > 1 else None
        chosen = [int(axis) % max(size, 1) for axis in (axes if axes is not None else
                                                          values.reshape(-1) if values is not None else [])]
        if not chosen:
            return None
        return [dim for axis, dim in enumerate(source) if axis not in chosen]
    if node.op == "Split":
        axis = int(node.attrs.get("axis", 0)) % max(size, 1)
    else:
        axes = constant(node.inputs[3]) if len(node.inputs) > 3 else np.array([0])
        if axes is None or axes.size != 1:
            return None
        axis = int(axes.flat[0]) % max(size, 1)
    return [("?", tensor.name, position) if position == axis else dim for position, dim in enumerate(source)]


def _reshaped(source: list[Dim] | None, target: np.ndarray | None, allowzero: int) -> list[Dim] | None:
    """Reshape's output for a constant target: 0 copies the input's dimension (allowzero=0); one -1 is proved
    where every other new entry is 1 and the input has at most one dimension other than 1 left."""
    if target is None or target.ndim != 1:
        return None
    out: list[Dim] = []
    copied = set()
    for position, value in enumerate(int(value) for value in target):
        if value == 0 and not allowzero:
            if source is None or position >= len(source):
                return None
            out.append(source[position])
            copied.add(position)
        elif value >= 0:
            out.append(value)
        elif value == -1 and None not in out:
            out.append(None)
        else:
            return None
    if None not in out:
        return out
    if source is None:
        return None
    rest = [dim for position, dim in enumerate(source) if position not in copied and dim != 1]
    others = [dim for position, dim in enumerate(out) if dim is not None and position not in copied and dim != 1]
    if others or len(rest) > 1:
        return None
    out[out.index(None)] = rest[0] if rest else 1
    return out


def broadcast(a: list[Dim] | None, b: list[Dim] | None) -> list[Dim] | None:
    """Expand's (numpy's) broadcast of two shapes, where it is proved; None otherwise."""
    if a is None or b is None:
        return None
    width = max(len(a), len(b))
    a, b = [1] * (width - len(a)) + list(a), [1] * (width - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1 or same(x, y):
            out.append(x)
        else:
            return None
    return out


def shape_value(tensor: Any, depth: int = 0) -> list[Dim] | None:
    """The values of a 1-D int64 shape tensor, as dimensions: a constant, Shape(T[, start, end]) (T's dims),
    Concat of such, Gather/Slice of one by constants, through Cast/Identity/Reshape/Squeeze/Unsqueeze of one value;
    None where not proved."""
    values = constant(tensor)
    if values is not None:
        return [int(value) for value in values.reshape(-1)] if values.ndim <= 1 else None
    node = producer(tensor, "Shape", "Concat", "Gather", "Slice", "Cast", "Identity", "Reshape", "Squeeze",
                    "Unsqueeze")
    if node is None or depth > 32:
        return None
    depth += 1
    if node.op == "Shape":
        found = dims(node.inputs[0], depth)
        if found is None:
            return None
        start, end = int(node.attrs.get("start", 0)), node.attrs.get("end")
        return found[start:None if end is None else int(end)]
    if node.op == "Concat":
        parts = [shape_value(part, depth) for part in node.inputs]
        if any(part is None for part in parts):
            return None
        return [dim for part in parts for dim in part]  # type: ignore[union-attr]
    inner = shape_value(node.inputs[0], depth)
    if inner is None:
        return None
    if node.op in ("Cast", "Identity", "Reshape", "Squeeze", "Unsqueeze"):
        return inner if len(inner) == 1 or node.op in ("Cast", "Identity") else None
    if node.op == "Gather":
        index = constant(node.inputs[1])
        if index is None or int(node.attrs.get("axis", 0)) != 0:
            return None
        try:
            return [inner[int(position)] for position in index.reshape(-1)]
        except IndexError:
            return None
    slice_parts = [constant(part) for part in node.inputs[1:]]  # Slice: starts, ends[, axes[, steps]]
    if any(part is None or part.size != 1 for part in slice_parts) or len(slice_parts) < 2:
        return None
    start, stop = int(slice_parts[0].flat[0]), int(slice_parts[1].flat[0])  # type: ignore[union-attr]
    axis = int(slice_parts[2].flat[0]) if len(slice_parts) > 2 else 0  # type: ignore[union-attr]
    step = int(slice_parts[3].flat[0]) if len(slice_parts) > 3 else 1  # type: ignore[union-attr]
    return inner[start:stop:step] if axis in (0, -1) and step != 0 else None


def shown_dims(found: list[Dim] | None) -> str:
    return "?" if found is None else "[" + ", ".join("?" if isinstance(dim, tuple) else str(dim) for dim in found) + "]"


# --- the scatter and its index ----------------------------------------------------------------------------------
def leading_dim_of(tensor: Any) -> Any:
    """T where `tensor` is T's first dimension as an int64 [1] (Shape(T, start=0, end=1), Slice(Shape(T), 0, 1),
    Gather(Shape(T), [0]) or Unsqueeze(Gather(Shape(T), 0))); else None."""
    node = producer(tensor, "Shape", "Slice", "Gather", "Unsqueeze")
    if node is None:
        return None
    if node.op == "Shape":
        return node.inputs[0] if node.attrs.get("start", 0) == 0 and node.attrs.get("end") == 1 else None
    if node.op == "Unsqueeze":
        inner = producer(node.inputs[0], "Gather")
        return leading_dim_of(inner.outputs[0]) if inner is not None and unsqueeze_axes(node) == [0] else None
    shape = producer(node.inputs[0], "Shape")
    if shape is None or shape.attrs.get("start", 0) != 0 or "end" in shape.attrs:
        return None
    if node.op == "Gather":
        index = constant(node.inputs[1])
        return shape.inputs[0] if index is not None and index.size == 1 and int(index.flat[0]) == 0 else None
    parts = [constant(tensor) for tensor in node.inputs[1:]]  # Slice: starts, ends[, axes[, steps]]
    values = [int(part.reshape(-1)[0]) for part in parts if part is not None and part.size == 1]
    if len(values) != len(parts) or values[:2] != [0, 1] or any(value not in (0, 1) for value in values[2:]):
        return None
    return shape.inputs[0]


def unsqueeze_axes(node: Any) -> list[int] | None:
    """The axes of an Unsqueeze node (an input from opset 13, an attribute before)."""
    if "axes" in node.attrs:
        return [int(axis) for axis in node.attrs["axes"]]
    axes = constant(node.inputs[1]) if len(node.inputs) > 1 else None
    return None if axes is None else [int(axis) for axis in axes.reshape(-1)]


def _column_of(tensor: Any, width_rank: int) -> Any:
    """idx where `tensor` is idx [E] with `width_rank - 1` axes of size 1 added after it: Unsqueeze(idx, [1, ...])
    (or the negative axes), or Reshape(idx, [-1, 1, ...])."""
    node = producer(tensor, "Unsqueeze", "Reshape")
    if node is None or rank(node.inputs[0]) not in (1, None):
        return None
    if node.op == "Unsqueeze":
        axes = unsqueeze_axes(node)
        if axes is None:
            return None
        wanted = list(range(1, width_rank))
        return node.inputs[0] if sorted(axis % width_rank for axis in axes) == wanted else None
    shape = constant(node.inputs[1])
    return node.inputs[0] if shape is not None and shape.reshape(-1).tolist() == [-1] + [1] * (width_rank - 1) else None


def index_base(tensor: Any) -> Any:
    """The 1-D tensor whose values a 1-D index is, through what keeps them: Identity, Reshape to [-1], Squeeze,
    Flatten, and an Expand proved to keep the shape (how the exporter writes a 1-D scatter's index)."""
    for _ in range(64):
        node = producer(tensor, "Identity", "Reshape", "Squeeze", "Flatten", "Expand")
        if node is None or rank(node.inputs[0]) != 1 or rank(tensor) != 1:
            return tensor
        target = constant(node.inputs[1]) if node.op == "Reshape" else None
        if node.op == "Reshape" and (target is None or target.reshape(-1).tolist() != [-1]):
            return tensor
        if node.op == "Expand":
            into, out = dims(node.inputs[0]), dims(tensor)
            if into is None or out is None or not same(into[0], out[0]):
                return tensor
        tensor = node.inputs[0]
    return tensor


def _width(updates: Any) -> list[Any] | None:
    """The updates' trailing dimensions as recorded (ints or symbolic names), or None."""
    return None if getattr(updates, "shape", None) is None else list(updates.shape[1:])


def _expanded_covers_rows(node: Any, expand: Any, index: Any, data: Any, updates: Any) -> bool:
    """Whether Expand(column of `index`, shape) repeats the 1-D index over every column of the scatter's rows:
    its output proved [E, ...] with E the index's length and the rest the data's trailing dimensions. False where
    it provably covers fewer columns (a narrow index); InputError naming what could not be proved otherwise."""
    out = dims(expand.outputs[0])
    derived = broadcast(dims(expand.inputs[0]), shape_value(expand.inputs[1]))
    if derived is not None and (out is None or len(out) == len(derived)):
        out = derived if out is None else [_better(dim, new) for dim, new in zip(out, derived)]
    length, rows, width = dims(index), dims(data), dims(updates)
    if out is not None:
        for cols in (rows, width):
            if cols is not None and len(cols) == len(out):
                if any(isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(out[1:], cols[1:])):
                    return False
    proved = (out is not None and rows is not None and length is not None and len(out) == len(rows)
              and same(out[0], length[0]) and all(same(a, b) for a, b in zip(out[1:], rows[1:])))
    if not proved:
        raise InputError(
            f"node {node.name} (ScatterElements): could not prove that its indices {expand.outputs[0].name} "
            f"(Expand, {shown_dims(out)}) repeat the index {index.name} ({shown_dims(length)}) over every column of "
            f"its data {data.name} ({shown_dims(rows)}): the shapes the model records or computes do not tell; "
            "record them (onnx.shape_inference) or use index_add")
    return True


def scatter_index(node: Any) -> Any:
    """The 1-D idx of an exported index_add / scatter_add (see the module docstring); InputError otherwise, and
    for a narrow index (a scatter_add whose index covers fewer columns than its updates). A 1-D scatter's index
    is its indices themselves (through index_base). Constant indices of those shapes are a constant idx
    (constant_index)."""
    data, indices, updates = node.inputs[0], node.inputs[1], node.inputs[2]
    width_rank = rank(updates) or 2
    values = constant(indices)
    if values is not None:
        found = constant_index(node, values)
        if found is not None:
            return found
    if is_one_dimensional(node):
        index = index_base(indices) if node.op == "ScatterElements" else _column_of(indices, 2)
    elif node.op == "ScatterND":
        index = _column_of(indices, 2)
    else:
        index = _column_of(indices, width_rank)
        if index is not None:  # no Expand: one column of the updates, unless they have just one
            width = _width(updates)
            if width is None or any(dim != 1 for dim in width):
                raise InputError(
                    f"node {node.name} (ScatterElements): its indices {indices.name} [{_dims(indices)}] cover one "
                    f"column of its updates {updates.name} [{_dims(updates)}] (a narrow index: torch {_verb(node)} "
                    f"only those columns, the plugin {_verb(node)} whole rows); expand the index over every column "
                    f"(idx[:, None].expand_as(src)) or use {'index_copy' if _verb(node) == 'writes' else 'index_add'}")
        expand = producer(indices, "Expand")
        if expand is not None:
            column = _column_of(expand.inputs[0], width_rank)
            if column is not None:
                if not _expanded_covers_rows(node, expand, column, data, updates):
                    raise InputError(
                        f"node {node.name} (ScatterElements): its indices {indices.name} [{_dims(indices)}] cover fewer "
                        f"columns than its updates {updates.name} [{_dims(updates)}] (a narrow index: torch "
                        f"{_verb(node)} only those columns, the plugin {_verb(node)} whole rows)")
                index = column
    if index is None:
        wanted = ("Unsqueeze(idx, [1]) (index_add)" if node.op == "ScatterND"
                  else "Expand(Unsqueeze(idx, [1]), shape of the updates) (scatter_add)")
        raise InputError(f"node {node.name} ({node.op}): its indices {indices.name} ({made_by(indices)}) are not "
                         f"{wanted} of a 1-D index; that index shape is not rewritten")
    return index


def constant_index(node: Any, values: np.ndarray) -> Any:
    """The 1-D idx (a graphsurgeon Constant) of a scatter whose indices are constants of the exported shapes
    (torch.tensor([...]) as the index, the Unsqueeze folded by the exporter): ScatterND's [E, 1], ScatterElements'
    [E] of a 1-D scatter or [E, ...] repeating each row's value over every column of its updates; None for other
    shapes. Negative values count from the end where the data's rows are a number; InputError for a value outside
    them, or a negative one into rows only the inputs tell."""
    from common.imports import import_module

    data, indices, updates = node.inputs[0], node.inputs[1], node.inputs[2]
    if not np.issubdtype(values.dtype, np.integer) or values.ndim < 1:
        return None
    if node.op == "ScatterND":
        if values.ndim != 2 or values.shape[1] != 1:
            return None
    elif not is_one_dimensional(node):
        width = dims(updates)
        if width is None or values.ndim != len(width) or any(
                not (isinstance(dim, int) and dim == size) for dim, size in zip(width[1:], values.shape[1:])):
            return None
        if values.size and not np.all(values == values.reshape(values.shape[0], -1)[:, :1].reshape(
                (values.shape[0],) + (1,) * (values.ndim - 1))):
            return None
    elif values.ndim != 1:
        return None
    index = values.reshape(values.shape[0], -1)[:, 0].astype(np.int64) if values.size else \
        np.zeros(values.shape[0], np.int64)
    rows = (dims(data) or [None])[0]
    negative = index < 0
    if negative.any() and not known(rows):
        raise InputError(f"node {node.name} ({node.op}): its constant indices {indices.name} hold "
                         f"{int(index[negative][0])}, a row from the end of its data {data.name}, whose rows only the "
                         "inputs tell; the plugin takes rows from 0: write the index non-negative")
    if known(rows):
        index = np.where(negative, index + rows, index)
        outside = (index < 0) | (index >= rows)
        if outside.any():
            position = int(np.flatnonzero(outside)[0])
            raise InputError(f"node {node.name} ({node.op}): its constant index {indices.name}[{position}] = "
                             f"{int(values.reshape(values.shape[0], -1)[position, 0])} is outside the {rows} rows of "
                             f"its data {data.name}")
    return import_module("onnx_graphsurgeon").Constant(f"{indices.name}_index", index)


def is_one_dimensional(node: Any) -> bool:
    """A scatter over a 1-D tensor: data [N] and updates [E] (counts, degrees, summed edge weights); the plugin
    adds them as rows [N, 1]."""
    return rank(node.inputs[0]) == 1 and rank(node.inputs[2]) == 1


def _dims(tensor: Any) -> str:
    shape = getattr(tensor, "shape", None)
    return "?" if shape is None else ", ".join(str(dim) for dim in shape)


def reduction(node: Any) -> str:
    return "none" if node.op == "Scatter" else str(node.attrs.get("reduction", "none"))


# ScatterElements reductions TensorRT's parser takes (its ScatterElements plugin, out of place): left in the model.
LEFT_REDUCTIONS = ("min", "max", "mul")


def left_reason(node: Any) -> str | None:
    """Why a scatter stays in the model for TensorRT (a ScatterElements with min, max or mul), else None."""
    kind = reduction(node)
    if node.op == "ScatterElements" and kind in LEFT_REDUCTIONS:
        return (f"reduction {kind!r}: TensorRT's ScatterElements plugin takes it (out of place); the in-place "
                "plugin adds")
    return None


def match_scatter(node: Any) -> Match:
    """The scatter-add of `node`, or InputError: the legacy exporter's pattern, include_self=False, another
    reduction, another axis, a narrow index or an index shape not recognised."""
    data, indices, updates = node.inputs[0], node.inputs[1], node.inputs[2]
    kind = reduction(node)
    if kind == "none" and node.op == "ScatterElements" and fill_value(data) == 0.0:  # dynamo's index_copy is ScatterND
        adds = [consumer.name for consumer in node.outputs[0].outputs if consumer.op == "Add"]
        if adds:
            raise InputError(
                f"node {node.name} ({node.op} without reduction into zeros, then Add {adds[0]}) is the legacy "
                "exporter's index_add (torch.onnx.export(..., dynamo=False)), which keeps one row where an index "
                "repeats; export with torch.onnx.export(..., dynamo=True)")
    if kind == "none" and fill_value(updates) == 0.0:
        then = [consumer for consumer in node.outputs[0].outputs
                if consumer.op in SCATTER_OPS and consumer.inputs[0] is node.outputs[0] and consumer.inputs[1] is indices]
        if then:
            raise InputError(
                f"node {node.name} ({node.op}): zeros written at the index before {then[0].name} adds into them: "
                "scatter_reduce(..., include_self=False), which drops the state's own rows; only include_self=True "
                "(index_add, scatter_add) becomes the in-place plugin")
    if node.op not in FORMS:
        raise InputError(f"node {node.name} ({node.op}): the Scatter op of opsets before 11 is not rewritten; export "
                         "with torch.onnx.export(..., dynamo=True), which writes ScatterND or ScatterElements")
    if kind not in (ADD, OVERWRITE):
        parser = " (TensorRT's ONNX parser refuses ScatterND with a reduction other than add)" \
            if node.op == "ScatterND" else ""
        raise InputError(f"node {node.name} ({node.op}): reduction {kind!r}{parser}; only reduction 'add' "
                         "(index_add, scatter_add) and none (index_copy, index_put, X[idx] = rows, scatter) become "
                         "the in-place plugin")
    if node.op == "ScatterElements":
        axis, data_rank = int(node.attrs.get("axis", 0)), rank(data)
        normal = axis + data_rank if axis < 0 and data_rank is not None else axis
        if normal != 0:
            of = f" of a {data_rank}-D tensor" if data_rank is not None else ""
            verb = "writes" if kind == OVERWRITE else "adds"
            raise InputError(f"node {node.name} (ScatterElements): axis {axis}{of}; the plugin {verb} rows (axis 0) only")
    forms = OVERWRITE_FORMS if kind == OVERWRITE else FORMS
    return Match(node, forms[node.op], data, scatter_index(node), updates, kind)


# --- counts -------------------------------------------------------------------------------------------------------
def is_counts(match: Match) -> bool:
    """The counts form: ones added into zeros of one column, [N, 1] or [N] (see pair_counts for the state they
    belong to)."""
    if match.overwrites or fill_value(match.data) != 0.0 or fill_value(match.updates) != 1.0:
        return False
    if is_one_dimensional(match.node):
        return True
    width = _width(match.data)
    return rank(match.data) in (2, None) and (width is None or width[0] in (1, None) or not known(width[0]))


def rows_source(tensor: Any, graph_inputs: list[Any]) -> tuple[str, Any, int] | None:
    """Where a tensor's row count (dimension 0) comes from: ("input", name, axis) for a graph input's dimension,
    ("rows", n, 0) for a constant; through fills (their shape tensor), Reshape to [0, ...], Cast and Identity,
    then the recorded dimension (a number, or a symbolic name a graph input also has). None if unknown."""
    seen = 0
    while seen < 64:
        seen += 1
        if tensor in graph_inputs:
            return ("input", tensor.name, 0)
        node = producer(tensor, "Reshape", "Cast", "CastLike", "Identity", "ConstantOfShape", "Expand")
        if node is None:
            break
        if node.op == "Reshape":
            shape = constant(node.inputs[1])
            if shape is None or not shape.size or int(shape.reshape(-1)[0]) != 0:
                break
            tensor = node.inputs[0]
        elif node.op in ("Cast", "CastLike", "Identity"):
            tensor = node.inputs[0]
        else:
            if node.op == "Expand" and fill_value(node.outputs[0]) is None:
                break
            found = _shape_rows(node.inputs[0] if node.op == "ConstantOfShape" else node.inputs[1], graph_inputs)
            if found is not None:
                return found
            break
    return _recorded_rows(tensor, graph_inputs)


def _shape_rows(shape: Any, graph_inputs: list[Any]) -> tuple[str, Any, int] | None:
    """The first entry of a shape tensor: a constant, Shape(T) (T's rows), Shape(T, start=k) (T's dimension k,
    never its rows) or Concat(first dim of T, ...)."""
    values = constant(shape)
    if values is not None and values.size:
        return ("rows", int(values.reshape(-1)[0]), 0)
    node = producer(shape, "Shape", "Concat")
    if node is None:
        return None
    if node.op == "Shape":
        start = int(node.attrs.get("start", 0))
        if start == 0:
            return rows_source(node.inputs[0], graph_inputs)
        found = shape_value(shape)
        if found and known(found[0]):
            return ("rows", int(found[0]), 0)
        owner, size = node.inputs[0], rank(node.inputs[0])
        return ("input", owner.name, start % size) if owner in graph_inputs and size and -size <= start < size else None
    first = node.inputs[0] if node.inputs else None
    values = constant(first)
    if values is not None and values.size:
        return ("rows", int(values.reshape(-1)[0]), 0)
    owner = leading_dim_of(first)
    return rows_source(owner, graph_inputs) if owner is not None else None


def _recorded_rows(tensor: Any, graph_inputs: list[Any]) -> tuple[str, Any, int] | None:
    shape = getattr(tensor, "shape", None)
    if not shape:
        return None
    first = shape[0]
    if known(first):
        return ("rows", int(first), 0)
    if isinstance(first, str) and first:
        floats_first = sorted(graph_inputs, key=lambda candidate: dtype(candidate) not in FEATURE_DTYPES)
        for candidate in floats_first:  # a state's dimension before an index's of the same size
            for axis, dim in enumerate(candidate.shape or ()):
                if dim == first:
                    return ("input", candidate.name, axis)
        if not _vague(first):  # the exporter's symbol of a size no input has (e.g. "u1 + 1", a max of an index + 1)
            return ("symbol", first, 0)
    return None


def depends_on(tensor: Any, node: Any) -> bool:
    """Whether `tensor` is computed from an output of `node` (a path through the graph's producers)."""
    seen: set[int] = set()
    pending = [tensor]
    while pending:
        current = pending.pop()
        if id(current) in seen or not current.inputs:
            continue
        seen.add(id(current))
        maker = current.inputs[0]
        if maker is node:
            return True
        pending.extend(maker.inputs)
    return False


def pair_counts(states: list[Match], counts: list[Match], graph_inputs: list[Any]) -> tuple[dict[int, Match], list[Match]]:
    """Each counts scatter paired with the scatter-add that has the same idx (index_base: one tensor) and the same
    rows and does not read the counts (GCN's degree weighs the messages it counts): the plugin's counts output
    replaces it. Returns (owner node id -> counts match, the counts scatters with no owner). InputError for a
    second counts scatter of one owner."""
    paired: dict[int, Match] = {}
    alone: list[Match] = []
    for match in counts:
        rows = rows_source(match.data, graph_inputs)
        owner = next((state for state in states if index_base(state.index) is index_base(match.index)
                      and not state.overwrites
                      and rows is not None and rows_source(state.data, graph_inputs) == rows
                      and not any(depends_on(tensor, match.node) for tensor in state.node.inputs)), None)
        if owner is None:
            alone.append(match)
            continue
        if id(owner.node) in paired:
            raise InputError(f"node {match.node.name} ({match.node.op}): a second counts scatter for {owner.data.name} "
                             f"(the first is {paired[id(owner.node)].node.name}); compute the counts once")
        paired[id(owner.node)] = match
    return paired, alone


def refuse_lone_counts(match: Match) -> None:
    """A counts scatter with no owner that the plugin cannot do alone (its zeros are not float32/float16)."""
    raise InputError(
        f"node {match.node.name} ({match.node.op}): counts (ones into zeros {match.data.name}, {describe(match.data)}) "
        f"with no scatter-add of the same index {match.index.name} into a tensor of the same rows, and the plugin "
        "adds only float32 or float16 rows")


# --- the data added into in place ---------------------------------------------------------------------------------
def view_base(tensor: Any) -> tuple[Any, list[Any]]:
    """The tensor whose values `tensor` views (through Reshape, Identity, Squeeze, Unsqueeze, Flatten: TensorRT
    may give both one buffer), and the view nodes on the way."""
    views: list[Any] = []
    node = producer(tensor, *VIEW_OPS)
    while node is not None and len(views) < 64:
        views.append(node)
        tensor = node.inputs[0]
        node = producer(tensor, *VIEW_OPS)
    return tensor, views


def refuse_other_readers(node: Any, data: Any, graph: Any) -> None:
    """InputError where the tensor `node` adds into in place (`data`, or a tensor it is a view of) is also a graph
    output or is read by another node (Shape nodes excepted): the in-place add would change what they see."""
    _, views = view_base(data)
    chain = [node, *views]
    verb = _in_place_verb(node)
    for tensor in [data, *(view.inputs[0] for view in views)]:
        if tensor in graph.outputs:
            raise InputError(f"node {node.name} ({node.op}): its data {tensor.name} is also a graph output; {verb} "
                             "into it in place would change an output the caller expects unchanged")
        others = list(dict.fromkeys(consumer.name for consumer in tensor.outputs  # a node reading it twice, once
                                    if all(consumer is not link for link in chain) and consumer.op not in SHAPE_ONLY_OPS))
        if others:
            raise InputError(f"node {node.name} ({node.op}): its data {tensor.name} ({made_by(tensor)}) has other "
                             f"consumers ({', '.join(others)}); {verb} into it in place would change what they read")


def _verb(node: Any) -> str:
    """What a scatter does to its data's rows, for a message: "writes" without a reduction, else "adds"."""
    return "writes" if reduction(node) == OVERWRITE else "adds"


def _in_place_verb(node: Any) -> str:
    """How a node changes its data, for a message: "writing" rows for an overwrite, else "adding"."""
    overwrite = (node.op in FORMS and reduction(node) == OVERWRITE) or node.attrs.get("overwrite", 0) == 1
    return "writing" if overwrite else "adding"


def data_kind(match: Match, graph: Any) -> str:
    """How the scatter's data can be added into in place (INPUT, FILL or COMPUTED); InputError for data that is
    also a graph output, read by other nodes (Shape nodes excepted; a fill is cloned instead), written by another
    scatter, or a non-uniform constant. A view of a tensor (Reshape...) is judged as that tensor."""
    node, data = match.node, match.data
    if fill_value(data) is not None:
        return FILL
    base, views = view_base(data)
    refuse_other_readers(node, data, graph)
    writer = producer(base, *SCATTER_OPS)
    if writer is not None:
        raise InputError(f"node {node.name} ({node.op}): its data {data.name} is the output of {writer.name} ({writer.op}): "
                         f"{two_updates(writer, node)}")
    if base in graph.inputs:
        return INPUT
    if constant(base) is not None:
        raise InputError(f"node {node.name} ({node.op}): its data {data.name} is a constant of different values; adding "
                         "into it in place would change the model's weights")
    return COMPUTED


def two_updates(first: Any, second: Any, chained: bool = True) -> str:
    """What two scatters that update one tensor are (`chained`: the second updates the first's output; else both
    read the tensor), and what can be done instead: the plugin updates a tensor in place once. Two adds become one
    (torch.cat of their src and idx); two overwrites become one only where no row is in both (the plugin keeps an
    undefined one of a row's edges, not the later); an overwrite and an add cannot be one scatter."""
    kinds = [reduction(first), reduction(second)]
    once = "the plugin updates a tensor in place once"
    if not chained:
        return (f"two scatters update one tensor, each into a result of its own; {once}, and in place one would "
                "change what the other reads")
    if kinds == [ADD, ADD]:
        return "two scatter-adds into one tensor; concatenate their src and idx (torch.cat) into one"
    if kinds == [OVERWRITE, OVERWRITE]:
        return (f"two row overwrites of one tensor; {once}: one index_copy_ of both indices and rows (torch.cat) "
                "does the same only where no row is in both (of a row written twice the plugin keeps either, "
                "undefined which)")
    if set(kinds) == {ADD, OVERWRITE}:
        order = "an overwrite then an add" if kinds[0] == OVERWRITE else "an add then an overwrite"
        return (f"{order} of one tensor; {once}, adding or overwriting, and no one scatter does both: split the "
                "model in two, each updating the state in place, run one after the other")
    return f"two scatters update one tensor ({first.name} with reduction {kinds[0]!r}); {once}"


def fill_is_shared(match: Match, graph: Any) -> bool:
    """Whether a fill the scatter adds into is read by anything else (or is a constant, which has no buffer of
    its own to write): then the plugin adds into a fresh copy of the fill."""
    data = match.data
    return constant(data) is not None or data in graph.outputs or any(consumer is not match.node for consumer in data.outputs)


def check_dtypes(match: Match) -> None:
    """InputError unless data, src and idx have the plugin's dtypes and matching shapes: data [R, ...] float32 or
    float16, src [E, ...] of data's dtype and trailing dimensions, idx int64."""
    node, data, updates = match.node, match.data, match.updates
    kind = dtype(data)
    data_rank = rank(data)
    if kind not in FEATURE_DTYPES or (data_rank is not None and data_rank < 2 and not is_one_dimensional(node)):
        raise InputError(f"node {node.name} ({node.op}): its data {data.name} is {describe(data)}; the plugin adds into "
                         "a float32 or float16 tensor of rows (2-D or more, or 1-D with 1-D updates)")
    if dtype(updates) != kind or (rank(updates) is not None and data_rank is not None and rank(updates) != data_rank):
        raise InputError(f"node {node.name} ({node.op}): its updates {updates.name} are {describe(updates)}; the plugin "
                         f"wants [E, ...] rows of {data.name}'s {kind}")
    width, columns = _width(updates), _width(data)
    if width is not None and columns is not None and any(known(a) and known(b) and a != b for a, b in zip(width, columns)):
        raise InputError(f"node {node.name} ({node.op}): its updates {updates.name} [{_dims(updates)}] are not rows of "
                         f"{data.name} [{_dims(data)}]")
    if dtype(match.index) != INDEX_DTYPE:
        raise InputError(f"node {node.name} ({node.op}): its index {match.index.name} is {describe(match.index)}; the "
                         "plugin wants int64 (torch's index_add exports int64 indices)")


# --- the plugin nodes of a rewritten graph: aliases and index bounds ----------------------------------------------
def is_plugin(node: Any) -> bool:
    """A graphsurgeon node that is one of the plugin nodes (onnx_path/nodes.py)."""
    return is_plugin_node(node.domain or "", node.op)


def plugin_aliases(graph: Any) -> dict[str, str]:
    """Graph output -> the graph input whose memory it is: a plugin output aliased to an input that is a graph
    input, through views either side (the rows view of a state of rank > 2: Reshape in, Reshape back) and
    through the later steps of a chain that write it in place again."""
    aliases: dict[str, str] = {}
    outputs = {tensor.name for tensor in graph.outputs}
    for node in (node for node in graph.nodes if is_plugin(node)):
        for out, into in node_aliases(node.domain or "", node.op).items():
            if out >= len(node.outputs) or into >= len(node.inputs):
                continue
            source, _ = view_base(node.inputs[into])
            if source not in graph.inputs:
                continue
            target = node.outputs[out]
            for _ in range(len(graph.nodes)):
                if target.name in outputs:
                    break
                following = _written_again(target)
                if following is None and len(target.outputs) == 1 and target.outputs[0].op in VIEW_OPS:
                    following = target.outputs[0].outputs[0]
                if following is None:
                    break
                target = following
            if target.name in outputs:
                aliases[target.name] = source.name
    return aliases


def _written_again(tensor: Any) -> Any:
    """The output of the plugin node that writes `tensor` in place again (a later step of its chain), if one does."""
    for reader in tensor.outputs:
        if not is_plugin(reader):
            continue
        for out, into in node_aliases(reader.domain or "", reader.op).items():
            if into < len(reader.inputs) and reader.inputs[into] is tensor and out < len(reader.outputs):
                return reader.outputs[out]
    return None


def plugin_state_and_index(graph: Any, node: Any) -> tuple[Any, Any] | None:
    """(the state a plugin node adds into, its idx): the Python plugin's inputs 0 and 2; of a chain, for the first
    of its step nodes that reads the index, the index and the state that a step of the chain downstream of it
    (or itself) reads. None for the chain's other step nodes."""
    if node.op == PLUGIN_OP:
        return node.inputs[0], node.inputs[2]
    found = step_of(node.domain or "", node.op)
    if found is None:
        return None
    _, chain, step = found
    if "index" not in step.inputs or len(node.inputs) != len(step.inputs):
        return None
    first = next(candidate for candidate in chain.steps if "index" in candidate.inputs)
    if first is not step:
        return None
    index = node.inputs[step.inputs.index("index")]
    seen, queue = set(), [node]
    while queue:
        here = queue.pop(0)
        if id(here) in seen:
            continue
        seen.add(id(here))
        here_step = step_of(here.domain or "", here.op)
        if here_step is None:
            continue
        if "state" in here_step[2].inputs:
            return here.inputs[here_step[2].inputs.index("state")], index
        queue += [reader for tensor in here.outputs for reader in tensor.outputs if is_plugin(reader)]
    return None


def _one_value(tensor: Any) -> Any:
    """The tensor a one-value tensor holds the value of, through Reshape, Squeeze, Unsqueeze, Cast, Identity and
    Gather (of its one element)."""
    for _ in range(16):
        step = producer(tensor, "Reshape", "Squeeze", "Unsqueeze", "Cast", "Identity", "Gather")
        if step is None:
            break
        tensor = step.inputs[0]
    return tensor


def _is_one(values: np.ndarray | None) -> bool:
    return values is not None and values.size == 1 and int(values.flat[0]) == 1


def rows_from_max_of(state: Any, graph_inputs: list[Any]) -> Any:
    """The integer graph input T where a fill's rows are max(T) + 1 (PyG's global_mean_pool(x, batch) without
    `size`: as many rows as graphs in the batch): then every non-negative index from T is in range."""
    node = producer(state, "ConstantOfShape")
    if node is None:
        return None
    first = node.inputs[0]
    concat = producer(first, "Concat")
    if concat is not None:
        first = concat.inputs[0]
    add = producer(_one_value(first), "Add")
    if add is None or len(add.inputs) != 2:
        return None
    ones = [part for part in add.inputs if _is_one(constant(part))]
    others = [part for part in add.inputs if all(part is not one for one in ones)]
    if len(ones) != 1 or len(others) != 1:
        return None
    reduce = producer(_one_value(others[0]), "ReduceMax")
    if reduce is None or (len(reduce.inputs) > 1 and constant(reduce.inputs[1]) is None) or "axes" in reduce.attrs:
        return None
    return index_sources(reduce.inputs[0], graph_inputs)


# Ops whose output values are some of their value inputs' values (selected, repeated, reshaped, joined): an index
# made by them from an integer input holds that input's values. op -> the positions of its value inputs.
SELECTING_OPS = {"Cast": (0,), "Identity": (0,), "Reshape": (0,), "Squeeze": (0,), "Unsqueeze": (0,), "Flatten": (0,),
                 "Expand": (0,), "Gather": (0,), "GatherND": (0,), "GatherElements": (0,), "Slice": (0,),
                 "Split": (0,), "Transpose": (0,), "Tile": (0,), "Concat": None, "Where": (1, 2)}


def index_sources(idx: Any, graph_inputs: list[Any]) -> Any:
    """The integer graph input an index's values come from (through Cast, Reshape, Gather, Slice, Concat, Where...:
    SELECTING_OPS), the first one found; None if none."""
    pending, seen = [idx], set[int]()
    while pending and len(seen) < 256:
        tensor = pending.pop(0)
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        if tensor in graph_inputs:
            kind = dtype(tensor)
            if kind is not None and np.issubdtype(kind, np.integer):
                return tensor
            continue
        node = producer(tensor, *SELECTING_OPS)
        if node is None:
            continue
        positions = SELECTING_OPS[node.op]
        pending.extend(part for position, part in enumerate(node.inputs)
                       if (positions is None or position in positions) and part is not None)
    return None


def _row_taken(node: Any, tensor: Any) -> int | None:
    """The row (along axis 0) of its input that `node` takes into `tensor`: Gather by a constant scalar or
    one-element index on axis 0, Slice of one row on axis 0 (step 1), or an output of Split on axis 0 into rows of
    one; None otherwise (edge_index[0] and edge_index[1] as the exporter writes them)."""
    size = (getattr(node.inputs[0], "shape", None) or [None])[0]
    rows = int(size) if known(size) else None

    def normal(row: int) -> int | None:
        return row if row >= 0 else None if rows is None else row + rows

    if node.op == "Gather":
        index = constant(node.inputs[1])
        axis, source_rank = int(node.attrs.get("axis", 0)), rank(node.inputs[0])
        if index is None or index.size != 1 or not (axis == 0 or (source_rank and axis == -source_rank)):
            return None
        return normal(int(index.flat[0]))
    if node.op == "Slice":
        parts = [constant(part) for part in node.inputs[1:5]]
        if any(part is None or part.size != 1 for part in parts) or len(parts) < 2:
            return None
        start, end = (int(part.flat[0]) for part in parts[:2])  # type: ignore[union-attr]
        axis = int(parts[2].flat[0]) if len(parts) > 2 else 0  # type: ignore[union-attr]
        step = int(parts[3].flat[0]) if len(parts) > 3 else 1  # type: ignore[union-attr]
        first = normal(start)
        return first if axis == 0 and step == 1 and first is not None and normal(end) == first + 1 else None
    if node.op == "Split" and int(node.attrs.get("axis", 0)) == 0:
        sizes = constant(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
        pieces = len(node.outputs)
        if (sizes is not None and np.all(sizes == 1)) or (sizes is None and rows is not None and rows == pieces):
            return next(position for position, output in enumerate(node.outputs) if output is tensor)
    return None


def _wrap_of(node: Any) -> tuple[Any, Any] | None:
    """(x, R) where a Where node is the model's own wrap of negative indices, Where(Less(x, 0), Add(x, R), x) or
    Where(GreaterOrEqual(x, 0), x, Add(x, R)) (torch.where(i < 0, i + n, i)); else None."""
    if node.op != "Where" or len(node.inputs) != 3:
        return None
    condition, kept = producer(node.inputs[0], "Less", "GreaterOrEqual"), None
    if condition is None or len(condition.inputs) != 2:
        return None
    zero = constant(condition.inputs[1])
    if zero is None or zero.size != 1 or int(zero.flat[0]) != 0:
        return None
    x = condition.inputs[0]
    kept, added = (node.inputs[2], node.inputs[1]) if condition.op == "Less" else (node.inputs[1], node.inputs[2])
    add = producer(added, "Add")
    if kept is not x or add is None or len(add.inputs) != 2 or not any(part is x for part in add.inputs):
        return None
    return x, next(part for part in add.inputs if part is not x)


def index_paths(idx: Any, source: Any) -> list[tuple[int | None, Any]]:
    """Each way the values of integer graph input `source` reach the index `idx` (what index_sources follows):
    (the row of `source` taken on the way, _row_taken, or None for all of it; the R of the model's own wrap of
    negative values on the way, _wrap_of, or None)."""
    found: list[tuple[int | None, Any]] = []
    pending: list[tuple[Any, Any, int]] = [(idx, None, 0)]
    while pending and len(found) < 64:
        tensor, wrap, depth = pending.pop()
        node = producer(tensor, "Where", *SELECTING_OPS)
        if node is None or depth > 64:
            continue
        wrapped = _wrap_of(node)
        if wrapped is not None:
            if wrapped[0] is source:
                found.append((None, wrapped[1]))
            else:
                pending.append((wrapped[0], wrapped[1], depth + 1))
            continue
        positions = SELECTING_OPS[node.op]
        for position, part in enumerate(node.inputs):
            if part is None or (positions is not None and position not in positions):
                continue
            if part is source:
                found.append((_row_taken(node, tensor), wrap))
            else:
                pending.append((part, wrap, depth + 1))
    return found


def wraps_to_rows(wrap: Any, state: Any, graph_inputs: list[Any]) -> bool:
    """Whether the R of a wrap (index_paths) is the row count of `state` (a constant of as many, or T's first
    dimension where T has the state's rows): then every value in [-rows, rows) reaches the scatter in range."""
    for _ in range(16):
        step = producer(wrap, "Squeeze", "Reshape", "Cast", "Identity")
        if step is None:
            break
        wrap = step.inputs[0]
    rows = rows_source(state, graph_inputs)
    values = constant(wrap)
    if values is not None:
        return values.size == 1 and rows == ("rows", int(values.flat[0]), 0)
    owner = leading_dim_of(wrap)
    return owner is not None and rows is not None and rows_source(owner, graph_inputs) == rows


def gathered_rows(node: Any) -> bool:
    """Whether `node` reads rows of its input 0 at the values of its input 1: Gather on axis 0 (index_select), or
    GatherND of [..., 1] indices without batch dimensions (X[idx])."""
    if len(node.inputs) != 2:
        return False
    if node.op == "Gather":
        axis, data_rank = int(node.attrs.get("axis", 0)), rank(node.inputs[0])
        return axis == 0 or (data_rank is not None and axis == -data_rank)
    if node.op == "GatherND" and int(node.attrs.get("batch_dims", 0)) == 0:
        found = dims(node.inputs[1])
        return found is not None and len(found) > 0 and found[-1] == 1
    return False
