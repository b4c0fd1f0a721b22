"""--validate of a model of one's own whose scatters overwrite rows (ScatterND / ScatterElements without a
reduction: index_copy, index_put, X[idx] = rows, scatter). ONNX leaves a row written at a repeated index
undefined, and ONNX Runtime's CPU ScatterND writes the updates from several threads, so its winner there varies
with the run; the plugin keeps one of the row's edges too, which one undefined. So where an index repeats, ONNX
Runtime's output is compared only where it is defined, and the plugin's rule is checked against the original's
own tensors:

- an output that is an overwrite's output: the rows written once and the untouched rows against ONNX Runtime's,
  each element of a row written at a repeated index in the last run against the nearest of that element in
  the rows of the edges writing it (the original's updates, as ONNX Runtime computed them), and a row left from
  a repeated index in an earlier run (--steps, a state fed back) not compared;
- an output computed from an overwrite that wrote a repeated index in any run: not compared;
- every other output, and every output of a run without repeated indices: compared whole, as for add.
Each such line says which rows were not compared with ONNX Runtime and why.

The original's indices and updates are read by a probe: the original model with an Identity of each
overwrite's indices and updates added as graph outputs, run instead of the original (its outputs are the
original's).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from common.imports import import_module

OVERWRITE_OPS = ("ScatterND", "ScatterElements")
PROBE_SUFFIX = "__overwrite_probe"
SHOWN_ROWS = 6  # rows named in a line; more are counted


@dataclass(frozen=True)
class Overwrite:
    """A scatter without reduction in the original model: its node, op, the tensors it reads (indices,
    updates), the tensor it writes, and the graph input its data is (None for a fill or a computed tensor)."""

    node: str
    op: str
    indices: str
    updates: str
    output: str
    data_input: str | None


def overwrites(model: Any) -> list[Overwrite]:
    """The model's ScatterND and ScatterElements nodes without a reduction (the rewrite's overwrites)."""
    onnx = import_module("onnx")
    inputs = {value.name for value in model.graph.input}
    found = []
    for position, node in enumerate(model.graph.node):
        attributes = {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in node.attribute}
        reduction = attributes.get("reduction", b"none")
        if node.op_type in OVERWRITE_OPS and (reduction.decode() if isinstance(reduction, bytes) else reduction) == "none":
            data = node.input[0]
            found.append(Overwrite(node.name or f"{node.op_type}_{position}", node.op_type, node.input[1], node.input[2],
                                   node.output[0], data if data in inputs else None))
    return found


def probe_model(model: Any, found: list[Overwrite]) -> Any:
    """A copy of `model` that also outputs each overwrite's indices and updates (Identity nodes, untyped
    outputs named NAME + PROBE_SUFFIX)."""
    onnx = import_module("onnx")
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for name in dict.fromkeys(name for overwrite in found for name in (overwrite.indices, overwrite.updates)):
        probe.graph.node.append(onnx.helper.make_node("Identity", [name], [name + PROBE_SUFFIX],
                                                      name=name + PROBE_SUFFIX))
        probe.graph.output.append(onnx.ValueInfoProto(name=name + PROBE_SUFFIX))
    return probe


def written_rows(op: str, indices: np.ndarray) -> np.ndarray:
    """The row each update of an overwrite writes: ScatterND's [E, 1] indices, or column 0 of ScatterElements'
    expanded [E, ...] indices (the inputs' check keeps them within the rows: onnx_path.inputs). An empty batch
    (E = 0, or no columns) writes no row."""
    if indices.size == 0:
        return np.zeros(0, dtype=np.int64)
    return indices.reshape(indices.shape[0], -1)[:, 0].astype(np.int64)


@dataclass
class RowRecord:
    """Where an overwrite's output is not defined by ONNX after a run, and what the plugin's rule makes of it."""

    undefined: set[int] = field(default_factory=set)  # rows whose value ONNX leaves undefined
    rule: dict[int, np.ndarray] = field(default_factory=dict)  # row written at a repeated index in the last run ->
    # the updates of its edges [k, ...]
    ever: bool = False  # a repeated index in any run


class OverwriteOracle:
    """The original model's run for --validate (run(feeds) -> the original's outputs), recording for each
    overwrite which rows ONNX leaves undefined (RowRecord). `states` ({output: input}) are fed back between
    runs, as run_in_steps does, so a row left undefined in a state stays so until a run writes it once."""

    def __init__(self, model: Any, run_probe: Callable[[Any], Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]],
                 states: Mapping[str, str]) -> None:
        self.found = overwrites(model)
        self.outputs = [value.name for value in model.graph.output]
        self._run = run_probe(probe_model(model, self.found))
        self._states = dict(states)
        self._carried: dict[str, set[int]] = {}  # state input -> its rows undefined
        self.records: dict[str, RowRecord] = {}
        self._downstream = _downstream(model, [overwrite.output for overwrite in self.found])

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        values = self._run(feeds)
        for overwrite in self.found:
            updates = np.asarray(values[overwrite.updates + PROBE_SUFFIX])
            idx = written_rows(overwrite.op, np.asarray(values[overwrite.indices + PROBE_SUFFIX]))
            distinct, counts = np.unique(idx, return_counts=True)
            repeated = distinct[counts > 1]
            carried = self._carried.get(overwrite.data_input or "", set())
            record = self.records.setdefault(overwrite.output, RowRecord())
            record.undefined = (carried - set(distinct.tolist())) | set(repeated.tolist())
            order = np.argsort(idx, kind="stable")
            bounds = np.searchsorted(idx[order], repeated), np.searchsorted(idx[order], repeated, side="right")
            record.rule = {int(row): updates[order[start:end]] for row, start, end in zip(repeated, *bounds)}
            record.ever = record.ever or bool(record.undefined)
        for output, state in self._states.items():
            fed_back = self.records.get(output)
            self._carried[state] = set(fed_back.undefined) if fed_back is not None else set()
        return {name: values[name] for name in self.outputs}

    def unsettled(self, output: str) -> list[str]:
        """The overwrites `output` is computed from (not one's own output) that wrote a repeated index in some run."""
        return [overwrite.node for overwrite in self.found
                if overwrite.output != output and output in self._downstream[overwrite.output]
                and self.records.get(overwrite.output, RowRecord()).ever]


def overwrite_oracle(model: Any, states: Mapping[str, str]) -> OverwriteOracle | None:
    """The OverwriteOracle of a onnx_path.read.OnnxModel's original, or None where no scatter overwrites rows."""
    from onnx_path.run import original_run

    if not overwrites(model.original):
        return None
    return OverwriteOracle(model.original, lambda probe: original_run(model, probe), states)


def _downstream(model: Any, tensors: list[str]) -> dict[str, set[str]]:
    """For each tensor, every tensor computed from it (node by node, the graph in topological order)."""
    reached = {tensor: {tensor} for tensor in tensors}
    for node in model.graph.node:
        for seen in reached.values():
            if any(name in seen for name in node.input):
                seen.update(name for name in node.output if name)
    return reached


def _rows(rows: list[int]) -> str:
    shown = ", ".join(str(row) for row in rows[:SHOWN_ROWS])
    return f"row {shown}" if len(rows) == 1 else f"{len(rows)} rows ({shown}{', ...' if len(rows) > SHOWN_ROWS else ''})"


@dataclass(frozen=True)
class NotCompared:
    """An output --validate cannot compare with ONNX Runtime (computed from rows ONNX leaves undefined)."""

    why: str
    ok: bool = True

    def summary(self) -> str:
        return f"not compared ({self.why})"


def compared(label: str, name: str, actual: np.ndarray, expected: np.ndarray, dtype: Any,
             oracle: OverwriteOracle | None, compare: Callable[[np.ndarray, np.ndarray, Any], Any]) -> tuple[str, Any]:
    """(label, comparison) of one output against ONNX Runtime's, `compare` (onnx_path.compare.compare_output) over the
    rows ONNX defines where an overwrite wrote a repeated index (the module docstring), the label saying so."""
    record: RowRecord | None = oracle.records.get(name) if oracle is not None else None
    if oracle is not None and record is None:
        unsettled = oracle.unsettled(name)
        if unsettled:
            return label, NotCompared(f"computed from {', '.join(unsettled)}, which wrote rows at a repeated index: "
                                      "ONNX and the plugin leave which edge wins undefined")
    if record is None or not record.undefined or np.shape(actual) != np.shape(expected):
        return label, compare(actual, expected, dtype)  # a shape that differs fails there
    actual, expected = np.asarray(actual), np.array(expected, copy=True)
    by_rule = sorted(record.rule)
    for row in by_rule:  # each element: the nearest of its edges' (so that a wrong value fails the comparison)
        candidates = record.rule[row].reshape((-1,) + expected.shape[1:]).astype(expected.dtype)
        distance = np.abs(candidates.astype(np.float64) - np.asarray(actual[row], dtype=np.float64))
        nearest = np.nan_to_num(distance, nan=np.inf).argmin(axis=0)
        expected[row] = np.take_along_axis(candidates, nearest[None], axis=0)[0]
    skipped = sorted(record.undefined - set(by_rule))
    keep = np.setdiff1d(np.arange(expected.shape[0]), np.array(skipped, dtype=np.int64))
    note = f"; {_rows(by_rule)} written at a repeated index: against the nearest of its edges' rows (ONNX and the " \
           "plugin leave which edge wins undefined)" if by_rule else ""
    if skipped:
        note += f"; {_rows(skipped)} written at a repeated index in an earlier run: not compared"
    return label + note, compare(actual[keep], expected[keep], dtype)
