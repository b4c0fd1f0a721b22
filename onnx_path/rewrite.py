"""The ONNX side of the sample: load a model the user exported, put the in-place plugin where it has
scatter-adds, and say what the caller needs to run it (which outputs share an input's memory, how many rows
each integer input indexes). Plain functions over onnx and onnx-graphsurgeon (imported when first
used); no TensorRT here, so all of it runs and is tested on a machine without TensorRT or a GPU.

The ONNX code, one module per stage:
    onnx_rewrite   (this module) the orchestration: load_model, rewrite_model -> Rewritten, model_io,
                   sample_network
    onnx_patterns  the patterns matched in the exported graph, and every refusal (one line naming the node)
    onnx_nodes     the plugin nodes written: their format as TensorRT's parser reads them, their checks, the
                   builder; export/ops.py writes the same node from its constants
    onnx_runtime   ONNX Runtime: the original model (run_onnxruntime, OnnxRuntimeSession, float32_copy) and the
                   rewritten one with a CPU reference of the plugin nodes (run_rewritten, RewrittenSession)

API (the CLI's --onnx, --validate and --dry-run --onnx are built on it; --save_onnx's checks and writing are
common.paths'):
    load_model(path) -> onnx.ModelProto            InputError (one line): missing, unreadable, not ONNX, invalid
    rewrite_model(model, plugin="python") -> Rewritten
                                                   every scatter-add the plugin can do in place replaced by the
                                                   plugin node(s) ("python" or "aot"); plugin nodes already in
                                                   the model checked and kept; InputError naming the node and
                                                   the value for anything it cannot rewrite safely
    Rewritten.model, .plugin, .scatters (ScatterRewrite each), .aliases {output: input}, .index_bounds
                   {integer input: IndexBound}, .left (LeftScatter each), .summary() -> lines to print
    model_io(model) -> (inputs, outputs)           TensorSpec(name, dtype, shape): a str is a dynamic dimension
    sample_network(model) -> SampleNetwork | None  the sample's own network (network/definition.py), recognised
                                                   by its graph, whose outputs the float64 reference also gives

What is rewritten (onnx_patterns has the node patterns; docs/onnx.md the exporter's nodes): each index_add /
scatter_add (ScatterND / ScatterElements with reduction add, rows on axis 0) and each row overwrite (the same
without reduction: index_copy, index_put, X[idx] = rows, scatter; the plugin's overwrite mode) into a graph input, into a fill
(zeros_like, torch.zeros: ConstantOfShape or Expand of a constant; cloned when something else reads it) or
into a tensor another node makes for it alone; data of rank > 2 ([N, H, F]) viewed as rows [N, H*F] for the
plugin and back; several scatters, each its own plugin node; a counts scatter (ones into zeros [N, 1] with the
same index and rows, or [N] for a 1-D one) becomes the plugin's counts output (compute_counts=1); a 1-D
scatter-add ([N] data, [E] updates) as rows [N, 1]. Every Scatter* node is rewritten, left to TensorRT
(ScatterElements min/max/mul: Rewritten.left) or refused; a Scatter* inside a subgraph or a local function is
refused; anything unexpected while reading the graph is an InputError of one line, never a traceback.
"""

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from common.errors import InputError
from common.imports import import_module
from common.plugin_kind import PluginKind, plugin_kind
from common.text import shown_path
from network.definition import (
    CLASSIFIER,
    INPUT_INDEX,
    INPUT_SOURCE,
    INPUT_STATE,
    INPUT_WEIGHTS,
    OUTPUT_SOFTMAX,
    OUTPUT_STATE,
    STATE_UPDATE,
)
from onnx_path.nodes import (
    COUNTS_ATTRIBUTE,
    OVERWRITE_ATTRIBUTE,
    PLUGIN_DOMAIN,
    PLUGIN_OP,
    Builder,
    NameSource,
    check_plugin_nodes,
    declare_domain,
    overwrite_nodes,
    plugin_nodes,
    step_of,
)
from onnx_path.patterns import (
    FILL,
    SCATTER_OPS,
    Match,
    check_dtypes,
    left_reason,
    data_kind,
    dtype,
    fill_is_shared,
    constant,
    dims,
    fill_value,
    gathered_rows,
    index_paths,
    index_sources,
    is_counts,
    is_plugin,
    match_scatter,
    pair_counts,
    plugin_aliases,
    plugin_state_and_index,
    rank,
    refuse_lone_counts,
    refuse_other_readers,
    rows_from_max_of,
    rows_source,
    two_updates,
    wraps_to_rows,
)
from onnx_path.own_ops import CallRewrite, call_aliases, mutated_pairs, rewrite_calls
from inplace.registry import MODULES_KEY, import_model_ops
from onnx_path.runtime import short_line as _first_line
from plugin.inplace_ops import is_overwrite
from plugin.rules import FEATURE_DTYPES, INDEX_DTYPE

if TYPE_CHECKING:
    import onnx


# --- loading and saving --------------------------------------------------------------------------------------
def load_model(path: str | Path) -> "onnx.ModelProto":
    """The ONNX model at `path` (external data next to it loaded too), checked by onnx.checker; InputError
    (one line) for a missing or unreadable file, one that is not ONNX, or a model onnx.checker rejects."""
    onnx = import_module("onnx")
    shown = shown_path(str(path))
    file = Path(path)
    if not str(path) or not file.exists():
        raise InputError(f"{shown}: file not found")
    if not file.is_file():
        raise InputError(f"{shown}: not a regular file")
    if not os.access(file, os.R_OK):
        raise InputError(f"{shown}: not readable")
    try:
        model = onnx.load(str(file))
    except Exception as error:  # protobuf's DecodeError, OSError, a missing external-data file
        raise InputError(f"{shown}: not an ONNX model ({_first_line(error)})") from None
    if not model.opset_import or not model.graph.node:
        raise InputError(f"{shown}: not an ONNX model (no operator set or no nodes)")
    try:
        onnx.checker.check_model(model)
    except Exception as error:  # onnx.checker.ValidationError, or a model over 2 GiB
        raise InputError(f"{shown}: onnx.checker rejects the model: {_first_line(error)}") from None
    return model


# --- the rewrite ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScatterRewrite:
    """One scatter-add replaced (or a plugin node found in the model): the node, its form, the tensors the
    plugin reads and writes, and the plugin node(s)."""

    node: str  # the ScatterND / ScatterElements node replaced, or the plugin node found
    form: str  # "index_add" (ScatterND), "scatter_add" (ScatterElements) or "plugin node" (already in the model)
    state: str  # the tensor added into in place
    kind: str  # how: "graph input", "fill" (zeros made in the graph) or "computed" (made for this scatter alone)
    source: str
    index: str
    output: str  # the aggregated state (the plugin's output 0: the state's memory)
    counts_node: str | None  # the counts scatter the plugin's counts output replaces, if any
    counts: str | None
    plugin_nodes: tuple[str, ...]  # the plugin node(s), in order
    overwrite: bool = False  # rows written (reduction none: one edge wins at a repeated index), not added
    edge_rows: tuple[str, int, str, int] | None = None  # (input, axis) of the source's rows and (input, axis) of
    # the index's length, where graph inputs' dimensions give them: equal in every run (check_scatter_rows)
    reach: tuple[int, str, int] | None = None  # a constant index's largest value + 1 and the (input, axis) of the
    # rows it indexes, where only the inputs tell them (check_scatter_rows)


@dataclass(frozen=True)
class LeftScatter:
    """A scatter left in the model for TensorRT (its ScatterElements plugin, out of place), and why."""

    node: str
    op: str
    reduction: str
    why: str


@dataclass(frozen=True)
class IndexBound:
    """How many rows an integer graph input indexes (it reaches a scatter's index): a constant `rows`, or the
    size of dimension `axis` of graph input `input`; neither where the model does not tell."""

    rows: int | None = None
    input: str | None = None
    axis: int = 0
    also: tuple["IndexBound", ...] = ()  # the rows of the other states (or rows of an input) the same input indexes
    own_max: bool = False  # the rows are the index's own largest value + 1 (PyG's batch vector): in range if >= 0
    distinct: bool = False  # it indexes a row overwrite: values made up for it do not repeat (onnx_path.inputs)
    row: int | None = None  # the row of the input (axis 0) this bounds, as edge_index[0] indexes the sources'
    # rows and edge_index[1] the targets' (a heterogeneous graph's node types differ); None: all of it
    wraps: bool = False  # the model maps a negative value v to v + rows itself (torch.where(i < 0, i + n, i))

    def parts(self) -> list["IndexBound"]:
        """Each state's (or row's) bound, `also` empty."""
        return [dataclasses.replace(self, also=()), *self.also]

    def rows_bounded(self) -> list[int]:
        """The rows of the input that have bounds of their own (`row`), in order; [] where every bound is the
        whole input's."""
        return sorted({part.row for part in self.parts() if part.row is not None})

    def of_row(self, row: int | None) -> "IndexBound":
        """The bound of row `row` of the input: the parts of that row and of the whole input (all parts where
        none is the row's own, or for row None)."""
        parts = self.parts()
        chosen = [part for part in parts if part.row in (row, None)] if row is not None else parts
        if not any(part.row == row for part in chosen):
            chosen = parts
        return dataclasses.replace(chosen[0], also=tuple(chosen[1:]))

    def wrapped(self) -> bool:
        """Whether every part wraps negative values itself: then values in [-rows, rows) are in range."""
        return all(part.wraps for part in self.parts())

    def size(self, shapes: dict[str, tuple[int, ...]]) -> int | None:
        """The number of rows for these input shapes (by name): the fewest of every state it indexes; None
        where one is unknown."""
        part = self.smallest(shapes)
        return None if part is None else part._own_size(shapes)

    def smallest(self, shapes: dict[str, tuple[int, ...]]) -> "IndexBound | None":
        """The bound of the state with the fewest rows (its `also` empty); None where one is unknown."""
        parts = self.parts()
        sizes = [part._own_size(shapes) for part in parts]
        if any(size is None for size in sizes):
            return None
        return parts[min(range(len(parts)), key=lambda position: sizes[position])]  # type: ignore[arg-type,return-value]

    def _own_size(self, shapes: dict[str, tuple[int, ...]]) -> int | None:
        if self.input is not None:
            shape = shapes.get(self.input)
            return int(shape[self.axis]) if shape is not None and len(shape) > self.axis else None
        return self.rows


@dataclass(frozen=True)
class Rewritten:
    """The rewritten model (no scatter-add left; .left names the scatters left to TensorRT), the plugin, what was
    replaced, which graph outputs share a graph input's memory (bind them at that input's address: TensorRT
    reports no alias for a plugin) and how many rows each integer input that reaches a scatter's index indexes."""

    model: "onnx.ModelProto"
    plugin: PluginKind
    scatters: tuple[ScatterRewrite, ...]
    aliases: dict[str, str]
    index_bounds: dict[str, IndexBound]
    left: tuple[LeftScatter, ...] = ()
    calls: tuple[CallRewrite, ...] = ()  # the in-place ops of one's own rewritten (onnx_path.own_ops)

    def summary(self) -> list[str]:
        """One line per replaced scatter-add (or plugin node found), for the CLI's report."""
        lines = []
        for scatter in self.scatters:
            if scatter.form == "plugin node":
                lines.append(f"{scatter.node} (a plugin node in the model, into {scatter.state}) -> "
                             f"{' + '.join(scatter.plugin_nodes)} ({self.plugin} plugin, in place)")
                continue
            counts = f", counts {scatter.counts} from {scatter.counts_node}" if scatter.counts_node else ""
            into = scatter.state if scatter.kind != FILL else f"zeros {scatter.state}"
            into = f", rows of {into} overwritten" if scatter.overwrite else f" into {into}"
            rule = "; one edge of a repeated index wins, undefined which" if scatter.overwrite else ""
            lines.append(f"{scatter.node} ({scatter.form}{into}{counts}) -> "
                         f"{' + '.join(scatter.plugin_nodes)} ({self.plugin} plugin, in place{rule})")
        lines += [call.line() for call in self.calls]
        for output, source in self.aliases.items():
            lines.append(f"output {output} is input {source}'s memory (bind it at {source}'s address)")
        for left in self.left:
            lines.append(f"{left.node} ({left.op}) left to TensorRT: {left.why}")
        return lines


def rewrite_model(model: "onnx.ModelProto", plugin: PluginKind | str = PluginKind.PYTHON) -> Rewritten:
    """`model` with every scatter-add the plugin can do in place replaced by the `plugin` ("python" or "aot")
    node(s), the matching counts scatter by the plugin's counts output; plugin nodes already in the model
    (export/ops.py's) checked and kept (a Python plugin node becomes the AOT nodes for "aot"). The input model
    is not changed.

    InputError (one line naming the node and the value) when the model has neither a scatter-add nor a plugin
    node (docs/onnx.md: such a model is refused, not run as it is), a scatter it cannot rewrite safely
    (onnx_path/patterns.py), or a graph it cannot read."""
    kind = plugin_kind(plugin)
    gs, onnx = import_module("onnx_graphsurgeon"), import_module("onnx")
    source = onnx.ModelProto()
    source.CopyFrom(model)  # graphsurgeon's graph shares parts of the proto (its opset list) with the model
    _refuse_nested_scatters(onnx, source)
    import_model_ops(source)  # the modules that register the model's in-place ops of one's own, if it names any
    try:  # the dtypes and shapes the model does not record (value_info), where ONNX's inference finds them
        source = onnx.shape_inference.infer_shapes(source)
    except Exception:  # a model inference cannot take (e.g. over 2 GiB): the records alone
        pass
    try:
        return _rewrite(gs, onnx, source, model.ir_version, kind)
    except InputError:
        raise
    except Exception as error:  # an unexpected graph: one line (the CLI's exit 2), never a traceback
        raise InputError(f"the rewrite cannot read this graph ({type(error).__name__}: {_first_line(error)}); "
                         "nothing was rewritten") from None


def _rewrite(gs: Any, onnx: Any, source: "onnx.ModelProto", ir_version: int, plugin: PluginKind) -> Rewritten:
    graph = gs.import_onnx(source)
    for position, node in enumerate(graph.nodes):
        node.name = node.name or f"{node.op}_{position}"  # every message names a node
    scatters = [node for node in graph.nodes if node.op in SCATTER_OPS]
    found = [node for node in graph.nodes if is_plugin(node) or (node.op == PLUGIN_OP and node.domain in ("", None))]
    own = mutated_pairs(graph)  # in-place ops of the user's own (inplace.registry), each its custom node
    left = tuple(LeftScatter(node.name, node.op, str(node.attrs.get("reduction")), why)
                 for node in scatters for why in [left_reason(node)] if why is not None)
    scatters = [node for node in scatters if left_reason(node) is None]
    if not scatters and not found and not own:
        if left:
            scatter = left[0]
            raise InputError("the model has no scatter-add (ScatterND or ScatterElements with reduction add), so "
                             f"nothing to rewrite in place; node {scatter.node} ({scatter.op}, reduction "
                             f"{scatter.reduction!r}) stays with TensorRT (build the model as it is, e.g. with trtexec)")
        replaced = _replaced_by_updates(graph)
        if replaced is not None:
            output, updates, unread = replaced
            raise InputError(f"the model has no ScatterND or ScatterElements node, so nothing to rewrite in place: its "
                             f"output {output} is Identity({updates}) and its input {unread} is read by nothing, as "
                             "the exporter's optimizer writes a scatter whose constant index covers every row of a "
                             "state of fixed size (onnxscript issue #3049; an index_add then loses the state's "
                             f"values): give the index as an input of the model, or export {unread}'s rows as dynamic")
        raise InputError("the model has no scatter-add (ScatterND or ScatterElements with reduction add): it has no "
                         "ScatterND or ScatterElements node, so nothing to rewrite in place: "
                         "torch.onnx.export keeps only what forward returns, so an update of a tensor it does not "
                         "return is dropped (return the updated state); X.index_add_(0, idx, src) exports as a "
                         "scatter with torch.onnx.export(..., dynamo=True)")
    plugin = PluginKind.AOT if own else plugin_of_found(found, plugin)  # an op of one's own runs as AOT plugins
    states = _scatter_adds(graph, [_match(node) for node in scatters])
    kinds = [data_kind(state, graph) for state, _ in states]
    for state, _ in states:
        check_dtypes(state)
    names = NameSource(graph)
    calls = tuple(rewrite_calls(gs, graph, names, Builder))
    results = [_replace(gs, graph, names, state, counts, kind, plugin)
               for (state, counts), kind in zip(states, kinds)]
    for node in found:  # a plugin node written by export/ops.py adds into its input 0 in place, as a rewrite does
        if node.inputs:
            refuse_other_readers(node, node.inputs[0], graph)
    results += [_keep(gs, graph, names, node, plugin) for node in found]
    graph.cleanup(remove_unused_graph_inputs=False).toposort()
    rewritten = gs.export_onnx(graph)
    rewritten.ir_version = ir_version
    declare_domain(rewritten)
    stays = {scatter.node for scatter in left}
    stray = [node.name for node in rewritten.graph.node if node.op_type in SCATTER_OPS and node.name not in stays]
    assert not stray, f"Scatter nodes left after the rewrite: {stray}"
    check_plugin_nodes(rewritten)
    if not any(entry.key == MODULES_KEY for entry in rewritten.metadata_props):
        rewritten.metadata_props.extend(entry for entry in source.metadata_props if entry.key == MODULES_KEY)
    aliases = plugin_aliases(graph) | call_aliases(graph, own)
    return Rewritten(rewritten, plugin, tuple(results), aliases, _index_bounds(graph), left, calls)


def _replaced_by_updates(graph: Any) -> tuple[str, str, str] | None:
    """(output, input U, input S) where a graph output is Identity(U) of float input U and float input S of the
    same type and shape is read by nothing but Shape nodes: what the exporter's optimizer leaves of a scatter of
    U's rows into S at a constant index that covers every row (onnxscript issue #3049)."""
    unread = [tensor for tensor in graph.inputs if dtype(tensor) in FEATURE_DTYPES
              and all(reader.op == "Shape" for reader in tensor.outputs)]
    for output in graph.outputs:
        node = output.inputs[0] if output.inputs else None
        if node is None or node.op != "Identity" or node.inputs[0] not in graph.inputs:
            continue
        updates = node.inputs[0]
        for state in unread:
            if state is not updates and dtype(state) == dtype(updates) and state.shape == updates.shape:
                return output.name, updates.name, state.name
    return None


def _match(node: Any) -> Match:
    """match_scatter(node), with anything unexpected about the node's neighbourhood one line naming it."""
    try:
        return match_scatter(node)
    except InputError:
        raise
    except Exception as error:
        raise InputError(f"node {node.name} ({node.op}): the rewrite cannot read the graph around it "
                         f"({type(error).__name__}: {_first_line(error)}); not rewritten") from None


def plugin_of_found(found: list[Any], plugin: PluginKind) -> PluginKind:
    """The plugin of a model that already holds plugin nodes: "aot" where one is an AOT step node (a step of a
    project op's chain: they run only as the AOT plugin, and the model's other scatters then get AOT nodes too,
    so that one plugin serves the engine), else `plugin`."""
    return PluginKind.AOT if any(step_of(node.domain or "", node.op) is not None for node in found) else plugin


def _scatter_adds(graph: Any, matches: list[Match]) -> list[tuple[Match, Match | None]]:
    """The scatter-adds to replace, in graph order, each with the counts scatter its plugin node computes; a
    counts scatter with no owner is a scatter-add of its own where the plugin can add its rows (float32 or
    float16 zeros), else refused. Two scatter-adds into one tensor (a fill excepted: each gets its own) are
    refused."""
    states = [match for match in matches if not is_counts(match)]
    counts = [match for match in matches if is_counts(match)]
    paired, alone = pair_counts(states, counts, list(graph.inputs))
    for match in alone:
        if dtype(match.data) not in FEATURE_DTYPES:
            refuse_lone_counts(match)
        states.append(match)
    order = {id(node): position for position, node in enumerate(graph.nodes)}
    states.sort(key=lambda match: order[id(match.node)])
    into: dict[int, Match] = {}
    for match in states:
        first = into.setdefault(id(match.data), match)
        if first is not match and fill_value(match.data) is None:
            raise InputError(f"node {match.node.name} ({match.node.op}): {first.node.name} "
                             f"{'writes rows of' if first.overwrites else 'adds into'} its data {match.data.name} too: "
                             f"{two_updates(first.node, match.node, chained=False)}")
    return [(match, paired.get(id(match.node))) for match in states]


def _onnx_type(dtype: Any) -> int:
    return int(import_module("onnx").helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def _replace(gs: Any, graph: Any, names: NameSource, state: Match, counts: Match | None, kind: str,
             plugin: PluginKind) -> ScatterRewrite:
    """The plugin node(s) for one scatter-add (and its counts), wired to the scatters' own output tensors, which
    are detached from the scatter nodes (graph.cleanup removes those and their plumbing). A shared fill is
    cloned (ConstantOfShape of its shape and value); data of rank other than 2 is viewed as rows [R, -1]."""
    build = Builder(gs, names, state.node.name)
    data, src, idx = state.data, state.updates, state.index
    source_rows, index_length = rows_source(src, list(graph.inputs)), rows_source(idx, list(graph.inputs))
    edge_rows = None
    if source_rows is not None and index_length is not None and source_rows[0] == index_length[0] == "input" \
            and source_rows != index_length:
        edge_rows = (str(source_rows[1]), int(source_rows[2]), str(index_length[1]), int(index_length[2]))
    reach = None
    values = constant(idx)
    if values is not None and values.size and not isinstance((dims(data) or [None])[0], int):
        rows = rows_source(data, list(graph.inputs))
        if rows is None or rows[0] != "input":
            raise InputError(f"node {state.node.name} ({state.node.op}): its constant index reaches row "
                             f"{int(values.max())} of its data {data.name}, whose rows the model does not tell, so "
                             "it cannot be checked; give the index as an input")
        reach = (int(values.max()) + 1, str(rows[1]), int(rows[2]))
    if kind == FILL and fill_is_shared(state, graph):
        value = np.array([fill_value(data)], dtype=np.dtype(data.dtype))
        data = build.filled(build.shape(data), value, "fill", list(data.shape) if data.shape else None)
    aggregated = state.node.outputs[0]
    state.node.outputs.clear()
    counts_out = None
    if counts is not None:
        counts_out = counts.node.outputs[0]
        counts.node.outputs.clear()
    plugin_counts = counts_out
    counts_rank = rank(counts.data) if counts is not None else None
    if counts_out is not None and (dtype(counts_out) not in (None, INDEX_DTYPE) or counts_rank == 1):
        rows_dim = counts_out.shape[0] if counts_out.shape else None
        plugin_counts = gs.Variable(names(f"{counts_out.name}_int64"), dtype=np.int64, shape=[rows_dim, 1])
    rows, out = data, aggregated
    if rank(data) != 2:  # [N, H, F] (or a rank the model does not record): rows [N, H*F] for the plugin, and back
        rows, src = build.rows(data, "state"), build.rows(src, "src")
        out = gs.Variable(names(f"{aggregated.name}_rows"), dtype=aggregated.dtype, shape=rows.shape)
    if state.overwrites:
        overwrite_nodes(build, plugin, rows, src, idx, out)
    else:
        plugin_nodes(build, plugin, rows, src, idx, out, plugin_counts)
    if out is not aggregated:
        build.node("Reshape", [out, build.shape(data)], None, name="unrows", outputs=[aggregated])
    if plugin_counts is not counts_out:  # counts of another dtype or 1-D in the model: the plugin's, cast, reshaped
        assert counts_out is not None and counts is not None
        last = [counts_out] if counts_rank != 1 else None
        cast = plugin_counts
        if dtype(counts_out) not in (None, INDEX_DTYPE):
            cast = build.node("Cast", [plugin_counts], counts_out.dtype, {"to": _onnx_type(counts_out.dtype)},
                              shape=[counts_out.shape[0] if counts_out.shape else None, 1], name="counts_cast",
                              outputs=last).outputs[0]
        if counts_rank == 1:
            build.node("Reshape", [cast, build.shape(counts.data)], None, name="counts_unrows", outputs=[counts_out])
    graph.nodes.extend(build.nodes)
    return ScatterRewrite(
        node=state.node.name, form=state.form, state=state.data.name, kind=kind, source=state.updates.name,
        index=idx.name, output=aggregated.name, counts_node=counts.node.name if counts else None,
        counts=counts_out.name if counts_out is not None else None,
        plugin_nodes=tuple(node.name for node in build.nodes if node.domain == PLUGIN_DOMAIN), overwrite=state.overwrites,
        edge_rows=edge_rows, reach=reach)


def check_scatter_rows(rewritten: Rewritten, shapes: Mapping[str, tuple[int, ...]]) -> None:
    """InputError, from the input shapes alone, where a scatter's source rows and index values differ in number
    (ScatterRewrite.edge_rows): ONNX's scatters, and the plugin, take one row per index value (ONNX Runtime and
    TensorRT refuse others), where torch's scatter_add takes the first rows of a longer source; or where a constant
    index reaches beyond the rows of its data (ScatterRewrite.reach)."""
    for scatter in rewritten.scatters:
        if scatter.reach is not None and len(shapes.get(scatter.reach[1], ())) > scatter.reach[2]:
            needed, name, axis = scatter.reach
            if shapes[name][axis] < needed:
                raise InputError(f"node {scatter.node}: its constant index reaches row {needed - 1}, "
                                 f"beyond the {shapes[name][axis]} rows of {scatter.state} (input {name} "
                                 f"[{', '.join(map(str, shapes[name]))}])")
        if scatter.edge_rows is None:
            continue
        src, src_axis, idx, idx_axis = scatter.edge_rows
        if len(shapes.get(src, ())) <= src_axis or len(shapes.get(idx, ())) <= idx_axis:
            continue
        rows, values = shapes[src][src_axis], shapes[idx][idx_axis]
        if rows == values:
            continue
        op = "ScatterElements" if scatter.form in ("scatter_add", "scatter") else "ScatterND"
        torch = (f"; torch's {scatter.form} takes the first {values} rows of a longer source: slice it in the model "
                 f"({scatter.source}[:{scatter.index}.shape[0]])") if rows > values and op == "ScatterElements" else ""
        def shown(tensor: str, name: str) -> str:
            dims = f"{name} [{', '.join(map(str, shapes[name]))}]"
            return dims if tensor == name else f"{tensor} (of input {dims})"

        raise InputError(f"node {scatter.node} ({op}): its source {shown(scatter.source, src)} has {rows} rows and its "
                         f"index {shown(scatter.index, idx)} {values} values; ONNX's {op}, as the plugin, takes one "
                         f"row per index value (ONNX Runtime and TensorRT refuse others){torch}")


def _keep(gs: Any, graph: Any, names: NameSource, node: Any, plugin: PluginKind) -> ScatterRewrite:
    """A plugin node already in the model (export/ops.py's translation table writes the Python plugin's): kept,
    in the plugins' domain; a Python plugin node becomes the AOT nodes for plugin "aot"."""
    outputs = list(node.outputs)
    nodes: tuple[str, ...] = (node.name,)
    if node.op == PLUGIN_OP:
        node.domain = PLUGIN_DOMAIN
        if plugin.aot and len(node.inputs) == 3:
            build = Builder(gs, names, node.name)
            node.outputs.clear()
            state, src, idx = node.inputs
            if node.attrs.get(OVERWRITE_ATTRIBUTE, 0) == 1:
                overwrite_nodes(build, plugin, state, src, idx, outputs[0])
            else:
                plugin_nodes(build, plugin, state, src, idx, outputs[0], outputs[1] if len(outputs) > 1 else None)
            graph.nodes.extend(build.nodes)
            nodes = tuple(built.name for built in build.nodes if built.domain == PLUGIN_DOMAIN)
    state = node.inputs[0].name if node.inputs else "?"
    return ScatterRewrite(node=node.name, form="plugin node", state=state, kind="plugin node",
                          source=node.inputs[1].name if len(node.inputs) > 1 else "?",
                          index=node.inputs[2].name if len(node.inputs) > 2 else "?",
                          output=outputs[0].name if outputs else "?", counts_node=None,
                          counts=outputs[1].name if node.op == PLUGIN_OP and len(outputs) > 1 else None,
                          plugin_nodes=nodes)


def _index_bounds(graph: Any) -> dict[str, "IndexBound"]:
    """For each integer graph input that reaches a plugin node's index: the rows of the state it indexes."""
    bounds: dict[str, IndexBound] = {}
    overwritten: set[str] = set()
    inputs = list(graph.inputs)
    for node in (node for node in graph.nodes if is_plugin(node)):
        pair = plugin_state_and_index(graph, node)
        if pair is None:
            continue
        state, idx = pair
        source = index_sources(idx, inputs)
        if source is None:
            continue
        step = step_of(node.domain or "", node.op)
        if (step is not None and is_overwrite(step[0])) or node.attrs.get(OVERWRITE_ATTRIBUTE, 0) == 1:
            overwritten.add(source.name)
        if rows_from_max_of(state, inputs) is source:
            bounds[source.name] = IndexBound(own_max=True)
            continue
        _add_bound(bounds, source, idx, state, inputs)
    for node in graph.nodes:  # the rows a scatter's index input also gathers (edge_index[0]: the sources' rows)
        if gathered_rows(node):
            source = index_sources(node.inputs[1], inputs)
            rows = rows_source(node.inputs[0], inputs)
            if source is not None and source.name in bounds and rows is not None and rows[0] in ("rows", "input"):
                _add_bound(bounds, source, node.inputs[1], node.inputs[0], inputs)
    for name, bound in bounds.items():  # rows of one input that all index the same rows: one bound for all of it
        parts = bound.parts()
        if len({dataclasses.replace(part, row=None) for part in parts}) == 1:
            bounds[name] = dataclasses.replace(parts[0], row=None)
    return {name: dataclasses.replace(bound, distinct=name in overwritten) for name, bound in bounds.items()}


def _add_bound(bounds: dict[str, IndexBound], source: Any, idx: Any, state: Any, inputs: list[Any]) -> None:
    """Records that the values of integer input `source` reach `idx`, an index into the rows of `state`: the
    rows of the row of `source` taken on the way (index_paths), wrapped where the model wraps negative values
    into the state's rows itself."""
    rows = rows_source(state, inputs)
    paths = index_paths(idx, source)
    taken = {row for row, _ in paths}
    wraps = bool(paths) and all(wrap is not None and wraps_to_rows(wrap, state, inputs) for _, wrap in paths)
    bound = (IndexBound(rows=int(rows[1])) if rows is not None and rows[0] == "rows"
             else IndexBound(input=str(rows[1]), axis=int(rows[2]))
             if rows is not None and rows[0] == "input" else IndexBound())
    bound = dataclasses.replace(bound, row=taken.pop() if len(taken) == 1 else None, wraps=wraps)
    known = bounds.get(source.name)
    if known is None:
        bounds[source.name] = bound
    elif known.own_max:
        return
    elif bound not in known.parts():  # one index, several states (or rows)
        bounds[source.name] = dataclasses.replace(known, also=(*known.also, bound))


def _refuse_nested_scatters(onnx: Any, model: "onnx.ModelProto") -> None:
    """InputError for a Scatter* inside a subgraph (If, Loop, Scan) or a model-local function: only the main
    graph's scatters are rewritten, and none may be left behind."""
    def nested(graph: Any) -> list[str]:
        found = []
        for node in graph.node:
            for attribute in node.attribute:
                subgraphs = [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else list(attribute.graphs)
                for subgraph in subgraphs:
                    found += [f"{inner.name or inner.op_type} in {node.name or node.op_type}"
                              for inner in subgraph.node if inner.op_type in SCATTER_OPS] + nested(subgraph)
        return found

    found = nested(model.graph) + [f"{node.name or node.op_type} in function {function.name}"
                                   for function in model.functions for node in function.node
                                   if node.op_type in SCATTER_OPS]
    if found:
        raise InputError(f"node {found[0]}: a scatter inside a subgraph or a local function is not rewritten; "
                         "only the main graph's scatter-adds become the in-place plugin")


# --- the model's inputs and outputs, the sample's own network ---------------------------------------------
@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output: name, numpy dtype (None for a type numpy lacks) and shape (an int, or a str for
    a dynamic dimension: its symbolic name, or "?" for none)."""

    name: str
    dtype: np.dtype | None
    shape: tuple[int | str, ...]


def _spec(value_info: Any) -> TensorSpec:
    onnx = import_module("onnx")
    tensor_type = value_info.type.tensor_type
    try:
        dtype: np.dtype | None = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
    except (KeyError, TypeError, ValueError):
        dtype = None
    dims: list[int | str] = []
    for dim in tensor_type.shape.dim:
        dims.append(int(dim.dim_value) if dim.HasField("dim_value") else (dim.dim_param or "?"))
    return TensorSpec(value_info.name, dtype, tuple(dims))


def model_io(model: "onnx.ModelProto") -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """(inputs, outputs) of the graph; inputs that are initializers (constant defaults) left out."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    inputs = tuple(_spec(value) for value in model.graph.input if value.name not in initializers)
    return inputs, tuple(_spec(value) for value in model.graph.output)


@dataclass(frozen=True)
class SampleNetwork:
    """The sample's own network recognised by its graph: kind (network.definition CLASSIFIER or STATE_UPDATE),
    precision ("fp32" or "fp16"), F and C (None for the state update)."""

    kind: str
    precision: str
    num_features: int
    num_classes: int | None


_PRECISIONS = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16"}
# The sample's classifier after the rewrite, node by node: each op once, each reading what the list says
# (export/sample_modules.py SampleClassifier as the exporter writes it; "plugin:1" is the counts output).
_CLASSIFIER_GRAPH = (("Cast", ("plugin:1",)), ("Div", ("plugin:0", "Cast")), ("Transpose", ("Div",)),
                     ("MatMul", (INPUT_WEIGHTS, "Transpose")), ("Relu", ("MatMul",)), ("Softmax", ("Relu",)))


def sample_network(model: "onnx.ModelProto", python_rewrite: "onnx.ModelProto | None" = None
                   ) -> SampleNetwork | None:
    """The SampleNetwork when the model is the sample's (network/definition.py): its inputs and outputs X [N, F],
    src [E, F], idx [E] int64 and W [C, F] -> softmax [C, N], or X, src, idx -> X_out [N, F] (F and C fixed, one
    float dtype), AND its graph, rewritten for the Python plugin, the sample's node for node: the plugin on
    (X, src, idx), then nothing (the state update) or Cast(counts), Div, Transpose [1, 0], MatMul(W, .), Relu,
    Softmax over axis 0. None otherwise (e.g. index_add(..., alpha=0.5) under the sample's names): the CLI then
    compares with ONNX Runtime only. `python_rewrite`: rewrite_model(model, "python").model where the caller
    has it already (the rewrite is not done again)."""
    found = _sample_io(model)
    if found is None:
        return None
    if python_rewrite is None:
        try:
            python_rewrite = rewrite_model(model, PluginKind.PYTHON).model
        except InputError:
            return None
    return found if _sample_graph(python_rewrite, found) else None


def _sample_graph(model: "onnx.ModelProto", found: SampleNetwork) -> bool:
    onnx = import_module("onnx")
    nodes = list(model.graph.node)
    plugins = [node for node in nodes if node.op_type == PLUGIN_OP]
    if len(plugins) != 1 or list(plugins[0].input) != [INPUT_STATE, INPUT_SOURCE, INPUT_INDEX]:
        return False
    plugin = plugins[0]
    attributes = {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in plugin.attribute}
    state = found.kind == STATE_UPDATE
    if attributes.get(OVERWRITE_ATTRIBUTE, 0) != 0:  # the sample's network adds rows
        return False
    if attributes.get(COUNTS_ATTRIBUTE) != int(not state) or len(plugin.output) != 1 + int(not state):
        return False
    if state:
        return len(nodes) == 1 and list(plugin.output) == [OUTPUT_STATE]
    by_op = {node.op_type: node for node in nodes}
    if len(by_op) != len(nodes) or sorted(by_op) != sorted([PLUGIN_OP, *(op for op, _ in _CLASSIFIER_GRAPH)]):
        return False
    outputs = {f"plugin:{index}": name for index, name in enumerate(plugin.output)}
    outputs.update({op: node.output[0] for op, node in by_op.items() if op != PLUGIN_OP})
    for op, reads in _CLASSIFIER_GRAPH:
        if list(by_op[op].input) != [outputs.get(read, read) for read in reads]:
            return False
    attrs = {op: {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in by_op[op].attribute}
             for op in ("Cast", "Transpose", "Softmax")}
    half = found.precision == "fp16"
    wanted_cast = onnx.TensorProto.FLOAT16 if half else onnx.TensorProto.FLOAT
    return (attrs["Cast"].get("to") == wanted_cast and list(attrs["Transpose"].get("perm", [])) == [1, 0]
            and attrs["Softmax"].get("axis") == 0 and by_op["Softmax"].output[0] == OUTPUT_SOFTMAX)


def _sample_io(model: "onnx.ModelProto") -> SampleNetwork | None:
    """The SampleNetwork the model's inputs and outputs alone describe, or None."""
    inputs, outputs = model_io(model)
    by_name = {spec.name: spec for spec in inputs}
    names = tuple(spec.name for spec in inputs)
    output_names = tuple(spec.name for spec in outputs)
    classifier = names == (INPUT_STATE, INPUT_SOURCE, INPUT_INDEX, INPUT_WEIGHTS) and output_names == (OUTPUT_SOFTMAX,)
    state = names == (INPUT_STATE, INPUT_SOURCE, INPUT_INDEX) and output_names == (OUTPUT_STATE,)
    if not (classifier or state):
        return None
    x, src, idx = by_name[INPUT_STATE], by_name[INPUT_SOURCE], by_name[INPUT_INDEX]
    precision = _PRECISIONS.get(x.dtype) if x.dtype is not None else None
    if precision is None or src.dtype != x.dtype or idx.dtype != INDEX_DTYPE or outputs[0].dtype != x.dtype:
        return None
    if len(x.shape) != 2 or len(src.shape) != 2 or len(idx.shape) != 1 or not isinstance(x.shape[1], int):
        return None
    num_features = x.shape[1]
    if src.shape[1] != num_features or not _dims_agree(src.shape[0], idx.shape[0]):
        return None
    if state:
        out = outputs[0].shape
        ok = len(out) == 2 and _dims_agree(out[0], x.shape[0]) and out[1] == num_features
        return SampleNetwork(STATE_UPDATE, precision, num_features, None) if ok else None
    weights, out = by_name[INPUT_WEIGHTS], outputs[0].shape
    if weights.dtype != x.dtype or len(weights.shape) != 2 or not isinstance(weights.shape[0], int) \
            or weights.shape[1] != num_features or len(out) != 2 or out[0] != weights.shape[0] \
            or not _dims_agree(out[1], x.shape[0]):
        return None
    return SampleNetwork(CLASSIFIER, precision, num_features, weights.shape[0])


def _dims_agree(a: int | str, b: int | str) -> bool:
    """Two recorded dimensions that may be the same size: equal, or either one unnamed/dynamic of another name."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return a == b or "?" in (a, b) or isinstance(a, int) != isinstance(b, int)


__all__ = [
    "IndexBound", "Rewritten", "SampleNetwork", "ScatterRewrite", "TensorSpec", "load_model", "model_io",
    "rewrite_model", "sample_network",
]
