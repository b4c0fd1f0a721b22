"""Models users bring, for the ONNX tests: torch modules written as a user would, each exported by the real
exporter (torch.onnx.export, dynamo=True unless said) once per test session and shared, with seeded inputs
of other sizes than the export's example (so dynamic dimensions are exercised).

    zoo_path(tmp_path_factory, name) -> Path      the exported file (exported at the first call of the session)
    zoo_model(tmp_path_factory, name)             a fresh onnx.ModelProto of it (onnx_path.rewrite.load_model)
    zoo_feeds(name, seed=0) -> {input: array}     inputs for ONNX Runtime, indices in range
ACCEPTED: the models the rewrite takes (each validated by the round trip); REFUSED: name -> the message's parts.
"""

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.onnx_helpers import export_module, session_file

F, C, H = 3, 4, 2  # features per row, classes, heads of an [N, H, F] state


@dataclass(frozen=True)
class ZooModel:
    """A torch module to export: what forward takes (names, example shapes and dtypes), what it returns, which
    dimensions are dynamic, and the sizes of the seeded inputs (a dimension name -> its size)."""

    module: Callable[[], Any]
    inputs: dict[str, tuple[tuple[str | int, ...], str]]  # name -> (shape, dtype); str dimensions are dynamic
    outputs: tuple[str, ...]
    indices: dict[str, str] = field(default_factory=dict)  # integer input -> the dimension its values index
    dynamo: bool = True
    unique: tuple[str, ...] = ()  # index inputs whose seeded values never repeat (an overwrite's defined rows)


EXAMPLE = {"N": 5, "E": 7, "M": 6, "B": 8, "K": 4}  # the export's example sizes (neither 0 nor 1: they stay dynamic)
SIZES = {"N": 9, "E": 23, "M": 4, "B": 13, "K": 6}  # the seeded inputs' sizes; K <= N: edges of distinct rows


def _modules() -> dict[str, Callable[[], Any]]:
    import torch

    class GnnZeros(torch.nn.Module):  # message passing: X's rows gathered along edge_index [2, E], aggregated into
        def forward(self, X, edge_index, W):  # zeros_like(X), the mean over in-edges, a linear layer
            source, target = edge_index[0], edge_index[1]
            aggregated = torch.zeros_like(X).index_add(0, target, X[source])
            ones = torch.ones((target.shape[0], 1))
            counts = torch.zeros((X.shape[0], 1), dtype=X.dtype).index_add(0, target, ones)
            return torch.relu((X + aggregated / counts.clamp(min=1.0)) @ W)

    class TwoStates(torch.nn.Module):  # two states, each updated in place and returned
        def forward(self, X, Y, src_x, idx_x, src_y, idx_y):
            X.index_add_(0, idx_x, src_x)
            Y.index_add_(0, idx_y, src_y)
            return X, Y

    class HeadsState(torch.nn.Module):  # an [N, H, F] state: rows on axis 0
        def forward(self, X, src, idx):
            return X.index_add(0, idx, src)

    class UpdateThenLayers(torch.nn.Module):  # the state updated, returned, and read by more layers
        def forward(self, X, src, idx, W):
            X = X.index_add(0, idx, src)
            return X, torch.softmax(torch.relu(X @ W), dim=1)

    class Alpha(torch.nn.Module):  # the sample's input and output names, but src scaled by alpha
        def forward(self, X, src, idx):
            return X.index_add(0, idx, src, alpha=0.5)

    class ScatterAddState(torch.nn.Module):  # ScatterElements(axis=0, add) over Expand(Unsqueeze(idx))
        def forward(self, X, src, idx):
            return X.scatter_add(0, idx[:, None].expand_as(src), src)

    class ScatterAddClassifier(torch.nn.Module):  # both scatters as scatter_add; ones from idx's shape
        def forward(self, X, src, idx, W):
            X.scatter_add_(0, idx[:, None].expand_as(src), src)
            ones = torch.ones_like(idx).unsqueeze(1)
            counts = torch.zeros((X.shape[0], 1), dtype=torch.int64).scatter_add(0, idx.unsqueeze(1), ones)
            return torch.softmax(torch.relu(W @ (X / counts).T), dim=0)

    class FloatCounts(torch.nn.Module):  # counts in X's dtype: the plugin's int64 counts, then a Cast
        def forward(self, X, src, idx, W):
            X.index_add_(0, idx, src)
            counts = torch.zeros((X.shape[0], 1), dtype=X.dtype).index_add_(0, idx, torch.ones((idx.shape[0], 1)))
            return torch.softmax(torch.relu(W @ (X / counts).T), dim=0)

    class IndexPut(torch.nn.Module):  # index_put_(accumulate=True): the same ScatterND as index_add
        def forward(self, X, src, idx):
            return X.index_put((idx,), src, accumulate=True)

    class Computed(torch.nn.Module):  # into a tensor made for the scatter alone
        def forward(self, X, src, idx):
            return (X * 2).index_add(0, idx, src)

    class Narrow(torch.nn.Module):  # torch adds only column 0 of src: refused
        def forward(self, X, src, idx):
            return X.scatter_add(0, idx[:, None], src)

    class ExcludeSelf(torch.nn.Module):
        def forward(self, X, src, idx):
            return X.scatter_reduce(0, idx[:, None].expand_as(src), src, "sum", include_self=False)

    class Prod(torch.nn.Module):
        def forward(self, X, src, idx):
            return X.scatter_reduce(0, idx[:, None].expand_as(src), src, reduce="prod")

    class Copy(torch.nn.Module):  # a scatter without reduction: X's rows replaced, not added to
        def forward(self, X, src, idx):
            return X.index_put((idx,), src)

    class SecondConsumer(torch.nn.Module):
        def forward(self, X, src, idx):
            return X.index_add(0, idx, src) + X

    class Axis1(torch.nn.Module):
        def forward(self, X, src, idx):
            return X.scatter_add(1, idx[None, :].expand(X.shape[0], -1), src)

    class FullIndex(torch.nn.Module):
        def forward(self, X, src, idx):
            return X.scatter_add(0, idx, src)

    class Int32Index(torch.nn.Module):
        def forward(self, X, src, idx):
            return X.index_add(0, idx.to(torch.int32), src)

    class CountsOnly(torch.nn.Module):
        def forward(self, X, src, idx):
            zeros = torch.zeros((X.shape[0], 1), dtype=torch.int64)
            return X / zeros.index_add_(0, idx, torch.ones((idx.shape[0], 1), dtype=torch.int64))

    class IndexCopy(torch.nn.Module):  # the row overwrites (ScatterND without reduction, or the ScatterElements
        def forward(self, X, src, idx):  # of an expanded index): the plugin's overwrite mode
            return X.index_copy(0, idx, src)

    class IndexCopyInPlace(torch.nn.Module):
        def forward(self, X, src, idx):
            X.index_copy_(0, idx, src)
            return X

    class IndexPutInPlace(torch.nn.Module):
        def forward(self, X, src, idx):
            X.index_put_((idx,), src)
            return X

    class SetRows(torch.nn.Module):
        def forward(self, X, src, idx):
            X[idx] = src
            return X

    class ScatterRows(torch.nn.Module):
        def forward(self, X, src, idx):
            return X.scatter(0, idx[:, None].expand_as(src), src)

    class CopyAndAdd(torch.nn.Module):  # one state overwritten, another added into
        def forward(self, X, Y, src_x, idx_x, src_y, idx_y):
            X.index_copy_(0, idx_x, src_x)
            Y.index_add_(0, idx_y, src_y)
            return X, Y

    class CopyThenLayers(torch.nn.Module):  # the overwritten state returned and read by more layers
        def forward(self, X, src, idx, W):
            X = X.index_copy(0, idx, src)
            return X, torch.softmax(torch.relu(X @ W), dim=1)

    class CopyIntoZeros(torch.nn.Module):  # rows written into a fill, then added to X (not the legacy pattern)
        def forward(self, X, src, idx):
            return X + torch.zeros_like(X).index_copy(0, idx, src)

    class CopySecondConsumer(torch.nn.Module):
        def forward(self, X, src, idx):
            return X.index_copy(0, idx, src) + X

    class CopyIntoOutput(torch.nn.Module):  # the data overwritten is a graph output too
        def forward(self, X, src, idx):
            Y = X * 2
            return Y.index_copy(0, idx, src), Y

    class CopyAxis1(torch.nn.Module):
        def forward(self, X, src, idx):
            return X.scatter(1, idx[None, :].expand(X.shape[0], -1), src)

    class CopyNarrow(torch.nn.Module):  # torch writes only column 0 of each row: refused
        def forward(self, X, src, idx):
            return X.scatter(0, idx[:, None], src)

    class TwoUpdates(torch.nn.Module):  # two in-place updates of one state, each an add or an overwrite
        def __init__(self, first: str, second: str) -> None:
            super().__init__()
            self.first, self.second = first, second

        def forward(self, X, src, idx, src_2, idx_2):
            getattr(X, self.first)(0, idx, src)
            getattr(X, self.second)(0, idx_2, src_2)
            return X

    class LongerSource(torch.nn.Module):  # src may have more rows than idx values: torch adds the first ones
        def forward(self, X, src, idx):
            return X.scatter_add(0, idx[:, None].expand(-1, X.shape[1]), src)

    class ConstantIndex(torch.nn.Module):  # the index a constant of the model (the exporter folds its Unsqueeze)
        def forward(self, X, src):
            return X.index_add(0, torch.tensor([0, 2, 0]), src)

    class ConstantScatterIndex(torch.nn.Module):
        def forward(self, X, src):
            return X.scatter_add(0, torch.tensor([0, 2, 0])[:, None].expand(-1, X.shape[1]), src)

    class EveryRowConstant(torch.nn.Module):  # a constant index over every row of a fixed-size state: the
        def forward(self, X, src):  # exporter's optimizer writes Identity(src) (onnxscript issue #3049)
            X.index_add_(0, torch.arange(X.shape[0]), src)
            return X

    class WrapNegative(torch.nn.Module):  # the model maps a negative index to a row from the end itself
        def forward(self, X, src, idx):
            return X.index_add(0, torch.where(idx < 0, idx + X.shape[0], idx), src)

    class TwoNodeTypes(torch.nn.Module):  # a heterogeneous graph's messages (PyG's to_hetero): edge_index [2, E]
        def forward(self, U, X, edge_index):  # row 0 gathers U's rows (users), row 1 adds into X's (items)
            return X.index_add(0, edge_index[1], U[edge_index[0]])

    class NoScatter(torch.nn.Module):
        def forward(self, X, src, idx):
            return X + 1

    return {"gnn_zeros": GnnZeros, "two_states": TwoStates, "heads_state": HeadsState,
            "update_then_layers": UpdateThenLayers, "alpha": Alpha, "scatter_add_state": ScatterAddState,
            "scatter_add_classifier": ScatterAddClassifier, "float_counts": FloatCounts, "index_put": IndexPut,
            "computed": Computed, "narrow": Narrow, "exclude_self": ExcludeSelf, "prod": Prod, "index_put_copy": Copy,
            "second": SecondConsumer, "axis1": Axis1, "full_index": FullIndex, "int32": Int32Index,
            "counts_only": CountsOnly, "no_scatter": NoScatter, "float64": HeadsState, "legacy": HeadsState,
            "index_copy": IndexCopy, "index_copy_": IndexCopyInPlace, "index_put_": IndexPutInPlace,
            "set_rows": SetRows, "scatter_rows": ScatterRows, "copy_and_add": CopyAndAdd,
            "copy_then_layers": CopyThenLayers, "copy_into_zeros": CopyIntoZeros, "copy_second": CopySecondConsumer, "copy_into_output": CopyIntoOutput,
            "copy_axis1": CopyAxis1, "copy_narrow": CopyNarrow, "wrap_negative": WrapNegative,
            "two_node_types": TwoNodeTypes, "constant_index": ConstantIndex,
            "constant_scatter_index": ConstantScatterIndex, "every_row_constant": EveryRowConstant, "longer_source": LongerSource, "copy_copy": lambda: TwoUpdates("index_copy_", "index_copy_"),
            "copy_then_add": lambda: TwoUpdates("index_copy_", "index_add_"),
            "add_then_copy": lambda: TwoUpdates("index_add_", "index_copy_")}


STATE = {"X": (("N", F), "float32"), "src": (("E", F), "float32"), "idx": (("E",), "int64")}
CLASSIFIER = {**STATE, "W": ((C, F), "float32")}


def _zoo() -> dict[str, ZooModel]:
    modules = _modules()
    state = {name: ZooModel(modules[name], STATE, ("X_out",), {"idx": "N"}) for name in modules}
    state.update({
        "gnn_zeros": ZooModel(modules["gnn_zeros"], {"X": (("N", F), "float32"), "edge_index": ((2, "E"), "int64"),
                                                     "W": ((F, C), "float32")}, ("out",), {"edge_index": "N"}),
        "two_states": ZooModel(modules["two_states"], {
            "X": (("N", F), "float32"), "Y": (("M", 2), "float32"), "src_x": (("E", F), "float32"),
            "idx_x": (("E",), "int64"), "src_y": (("B", 2), "float32"), "idx_y": (("B",), "int64")},
            ("X_out", "Y_out"), {"idx_x": "N", "idx_y": "M"}),
        "heads_state": ZooModel(modules["heads_state"], {"X": (("N", H, F), "float32"), "src": (("E", H, F), "float32"),
                                                         "idx": (("E",), "int64")}, ("X_out",), {"idx": "N"}),
        "update_then_layers": ZooModel(modules["update_then_layers"], {**STATE, "W": ((F, C), "float32")},
                                       ("X_out", "y"), {"idx": "N"}),
        "scatter_add_classifier": ZooModel(modules["scatter_add_classifier"], CLASSIFIER, ("softmax",), {"idx": "N"}),
        "float_counts": ZooModel(modules["float_counts"], CLASSIFIER, ("softmax",), {"idx": "N"}),
        "narrow": ZooModel(modules["narrow"], {**STATE, "src": (("E", 4), "float32"), "X": (("N", 4), "float32")},
                           ("X_out",), {"idx": "N"}),
        "axis1": ZooModel(modules["axis1"], {"X": (("N", 7), "float32"), "src": (("N", 7), "float32"),
                                             "idx": ((7,), "int64")}, ("X_out",), {"idx": "N"}),
        "full_index": ZooModel(modules["full_index"], {**STATE, "idx": (("E", F), "int64")}, ("X_out",), {"idx": "N"}),
        "float64": ZooModel(modules["float64"], {"X": (("N", F), "float64"), "src": (("E", F), "float64"),
                                                 "idx": (("E",), "int64")}, ("X_out",), {"idx": "N"}),
        "legacy": ZooModel(modules["legacy"], STATE, ("X_out",), {"idx": "N"}, dynamo=False),
        "longer_source": ZooModel(modules["longer_source"], {**STATE, "src": (("B", F), "float32")}, ("X_out",),
                                  {"idx": "N"}),  # B > E in the export's example
        **{name: ZooModel(modules[name], {"X": (("N", F), "float32"), "src": ((3, F), "float32")}, ("X_out",))
           for name in ("constant_index", "constant_scatter_index")},
        "every_row_constant": ZooModel(modules["every_row_constant"], {"X": ((4, F), "float32"),
                                                                       "src": ((4, F), "float32")}, ("X_out",)),
        "two_node_types": ZooModel(modules["two_node_types"], {
            "U": (("B", F), "float32"), "X": (("N", F), "float32"), "edge_index": ((2, "E"), "int64")}, ("X_out",),
            {"edge_index": "N"}),  # the seeded rows of both in [0, N): N < B
    })
    rows = {"X": (("N", F), "float32"), "src": (("K", F), "float32"), "idx": (("K",), "int64")}
    state.update({name: ZooModel(modules[name], {**rows, "src_2": (("K", F), "float32"), "idx_2": (("K",), "int64")},
                                 ("X_out",), {"idx": "N", "idx_2": "N"}, unique=("idx", "idx_2"))
                  for name in ("copy_copy", "copy_then_add", "add_then_copy")})
    state.update({name: ZooModel(modules[name], rows, ("X_out",), {"idx": "N"}, unique=("idx",))
                  for name in ("index_copy", "index_copy_", "index_put_copy", "index_put_", "set_rows", "scatter_rows",
                               "copy_into_zeros", "copy_second")})
    state.update({
        "copy_and_add": ZooModel(modules["copy_and_add"], {
            "X": (("N", F), "float32"), "Y": (("M", 2), "float32"), "src_x": (("K", F), "float32"),
            "idx_x": (("K",), "int64"), "src_y": (("B", 2), "float32"), "idx_y": (("B",), "int64")},
            ("X_out", "Y_out"), {"idx_x": "N", "idx_y": "M"}, unique=("idx_x",)),
        "index_copy_1d": ZooModel(modules["index_copy"], {"X": (("N",), "float32"), "src": (("K",), "float32"),
                                                          "idx": (("K",), "int64")}, ("X_out",), {"idx": "N"},
                                  unique=("idx",)),
        "copy_then_layers": ZooModel(modules["copy_then_layers"], {**rows, "W": ((F, C), "float32")}, ("X_out", "y"),
                                     {"idx": "N"}, unique=("idx",)),
        "copy_into_output": ZooModel(modules["copy_into_output"], rows, ("X_out", "Y"), {"idx": "N"}, unique=("idx",)),
        "copy_axis1": ZooModel(modules["copy_axis1"], {"X": (("N", 7), "float32"), "src": (("N", 7), "float32"),
                                                       "idx": ((7,), "int64")}, ("X_out",), {"idx": "N"}),
        "copy_narrow": ZooModel(modules["copy_narrow"], {"X": (("N", 4), "float32"), "src": (("K", 4), "float32"),
                                                         "idx": (("K",), "int64")}, ("X_out",), {"idx": "N"},
                                unique=("idx",)),
    })
    return state


ACCEPTED = ("gnn_zeros", "two_states", "heads_state", "update_then_layers", "alpha", "scatter_add_state",
            "scatter_add_classifier", "float_counts", "index_put", "computed")
# The row overwrites the rewrite takes (the plugin's overwrite mode; index_copy_1d: X [N] as rows [N, 1]), seeded
# with distinct indices (every row defined); tests/onnx/test_onnx_overwrite.py gives them repeated indices too.
OVERWRITES = ("index_copy", "index_copy_", "index_put_copy", "index_put_", "set_rows", "scatter_rows", "index_copy_1d",
              "copy_into_zeros", "copy_and_add", "copy_then_layers")
REFUSED = {  # name -> the message's parts; the node and the value are named in each
    "narrow": ["(ScatterElements): its indices", "cover one column of its updates src [E, 4]", "a narrow index"],
    "exclude_self": ["(ScatterElements): zeros written at the index before", "include_self=False"],
    "prod": ["the model has no scatter-add", "node node_scatter_reduce (ScatterElements, reduction 'mul') stays with "
             "TensorRT"],
    "copy_second": ["(ScatterND): its data X (a graph input) has other consumers (node_add", "writing into it in place"],
    "copy_into_output": ["(ScatterND): its data Y is also a graph output; writing into it in place"],
    "copy_axis1": ["node node_scatter (ScatterElements): axis 1 of a 2-D tensor; the plugin", "(axis 0) only"],
    "copy_narrow": ["(ScatterElements): its indices", "cover one column of its updates src [K, 4]", "a narrow index: "
                    "torch writes only those columns, the plugin writes whole rows", "or use index_copy"],
    "second": ["(ScatterND): its data X (a graph input) has other consumers (node_add", "in place"],
    "axis1": ["node node_scatter_add (ScatterElements): axis 1 of a 2-D tensor; the plugin adds rows (axis 0) only"],
    "full_index": ["node node_scatter_add (ScatterElements): its indices idx (a graph input) are not "
                   "Expand(Unsqueeze(idx, [1]), shape of the updates)", "not rewritten"],
    "int32": ["(ScatterND): its index _to_copy is int32 [E]", "wants int64"],
    "counts_only": ["counts (ones into zeros zeros, int64 [N, 1]) with no scatter-add of the same index idx",
                    "float32 or float16"],
    "no_scatter": ["the model has no scatter-add (ScatterND or ScatterElements with reduction add)", "dynamo=True"],
    "float64": ["(ScatterND): its data X is float64 [N, 3]", "float32 or float16"],
    "legacy": ["(ScatterElements without reduction into zeros, then Add /Add) is the legacy exporter's index_add "
               "(torch.onnx.export(..., dynamo=False))", "export with torch.onnx.export(..., dynamo=True)"],
}


@functools.lru_cache(maxsize=None)
def zoo() -> dict[str, ZooModel]:
    """Every model by name (built at the first call: the modules import torch)."""
    return _zoo()


def _example(shape: tuple[str | int, ...], kind: str, seed: int, sizes: dict[str, int], rows: int | None,
             unique: bool = False) -> Any:
    dims = tuple(sizes[dim] if isinstance(dim, str) else dim for dim in shape)
    rng = np.random.default_rng(seed)
    if kind == "int64" and unique:  # distinct rows at random
        return rng.permutation(rows if rows is not None else 1)[:int(np.prod(dims))].reshape(dims).astype(np.int64)
    if kind == "int64":  # every row reached first (so a mean over the edges is finite), then at random
        count, top = int(np.prod(dims)), rows if rows is not None else 1
        values = np.concatenate([np.arange(min(count, top)), rng.integers(0, top, max(count - top, 0))])
        return rng.permutation(values).reshape(dims).astype(np.int64)
    return rng.standard_normal(dims).astype(kind)


def zoo_feeds(name: str, seed: int = 0, sizes: dict[str, int] | None = None,
              repeats: bool = False) -> dict[str, np.ndarray]:
    """Seeded inputs of model `name` (floats standard normal, indices in range of the rows they index; distinct
    for the model's `unique` inputs unless `repeats`)."""
    spec, sizes = zoo()[name], sizes or SIZES
    feeds = {}
    for position, (input_name, (shape, kind)) in enumerate(spec.inputs.items()):
        rows = spec.indices.get(input_name)
        feeds[input_name] = _example(shape, kind, seed * 100 + position, sizes,
                                     sizes[rows] if rows is not None else None,
                                     input_name in spec.unique and not repeats)
    return feeds


def zoo_path(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """Model `name` exported by the real exporter, once per test session."""

    def export(path: Path) -> None:
        import torch

        spec = zoo()[name]
        args = tuple(torch.from_numpy(array) for array in zoo_feeds(name, seed=1, sizes=EXAMPLE).values())
        dynamic = {input_name: {axis: dim for axis, dim in enumerate(shape) if isinstance(dim, str)} or None
                   for input_name, (shape, _) in spec.inputs.items()}
        export_module(path, spec.module(), args, list(spec.inputs), list(spec.outputs), dynamic, dynamo=spec.dynamo)

    return session_file(tmp_path_factory, f"zoo_{name}", export)


def zoo_model(tmp_path_factory: pytest.TempPathFactory, name: str) -> Any:
    """A fresh onnx.ModelProto of model `name` (loaded and checked by onnx_path.rewrite.load_model)."""
    from onnx_path.rewrite import load_model

    return load_model(zoo_path(tmp_path_factory, name))
