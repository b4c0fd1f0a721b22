"""The in-place scatter-add as a TensorRT Python plugin (IPluginV3 with the V3One core, build and runtime parts).

Inputs: state [N, F], src [E, F] (float32 or float16), index [E] int64. Outputs: aggregated [N, F], which is
input 0's memory (get_aliased_input(0) == 0), and, when the plugin field compute_counts is 1 (the default),
counts [N, 1] int64. enqueue adds src rows into the state in place on TensorRT's stream, or with the plugin
field overwrite = 1 writes them (state[index[e]] = src[e]; where an index repeats, one of its edges wins:
plugin/kernels/overwrite.py);
the rules (types, formats, shapes, aliasing, fields) live in plugin.rules.

TensorRT is imported when this module is imported; everything else (CUDA, the kernel) when first used.
Register the creator (register_scatter_add_creator) before deserializing an engine that contains the plugin.
"""

from typing import TYPE_CHECKING, Any

import numpy as np

from common.imports import import_tensorrt
from plugin import rules
from plugin.rules import PLUGIN_NAME, PLUGIN_NAMESPACE, PLUGIN_VERSION

if TYPE_CHECKING:  # descriptor types from tensorrt-stubs, for the method signatures below
    from tensorrt import DataType, Dims, DimsExprs, DynamicPluginTensorDesc, IExprBuilder, PluginTensorDesc

# Any, not the stubs' module type: it may be TensorRT-RTX (tests), and the stubs' plugin base classes have
# signatures that do not match TensorRT's calling contract (e.g. get_aliased_input without its argument).
trt: Any = import_tensorrt()


_NUMPY_DTYPES: dict[Any, np.dtype] = {
    trt.float32: np.dtype(np.float32),
    trt.float16: np.dtype(np.float16),
    trt.int64: np.dtype(np.int64),
}
_TRT_DTYPES: dict[np.dtype, Any] = {dtype: tensorrt_type for tensorrt_type, dtype in _NUMPY_DTYPES.items()}


def numpy_dtype(trt_dtype: Any) -> np.dtype | None:
    """The numpy dtype of a TensorRT DataType this plugin knows, else None."""
    return _NUMPY_DTYPES.get(trt_dtype)


def dims_tuple(dims: "Dims") -> tuple[int, ...]:
    """A TensorRT Dims as a tuple of ints (-1 marks a dimension unknown at build time)."""
    return tuple(int(dims[i]) for i in range(len(dims)))


def trt_dtype(dtype: np.dtype) -> Any:
    """The TensorRT DataType of a numpy dtype this plugin knows (KeyError otherwise)."""
    return _TRT_DTYPES[np.dtype(dtype)]


def profile_workspace_size(inp: "list[DynamicPluginTensorDesc]", *, with_counts: bool, overwrite: bool = False) -> int:
    """Workspace bytes for the profile's largest shapes of (state, src, index) (an overwrite needs none);
    ValueError (rules.profile_maximum_sizes, overwrite_sizes) for a dynamic maximum, shapes that do not fit
    together or the kernels' int32 sizes, or an unsupported state type."""
    from plugin.kernels import scatter_add_workspace_size

    dtype = numpy_dtype(inp[rules.STATE].desc.type)
    sizes = rules.profile_maximum_sizes([dims_tuple(desc.max) for desc in inp], dtype)
    if overwrite:
        from plugin.kernels.overwrite import overwrite_sizes

        overwrite_sizes(sizes.num_nodes, sizes.num_edges, sizes.num_features, dtype)  # int32 sizes
        return 0
    return int(scatter_add_workspace_size(sizes.num_nodes, sizes.num_edges, sizes.num_features, dtype,
                                          with_counts=with_counts))


def plugin_field_collection(fields: dict[str, np.ndarray]) -> Any:
    """A trt.PluginFieldCollection of INT32 fields from {name: int32 array}.

    A PluginField points at its array's memory without owning it, and the collection copies the fields, so
    the caller must keep `fields` (the arrays) alive for as long as TensorRT may read the collection.
    """
    for name, values in fields.items():
        if values.dtype != rules.FIELD_DTYPE:  # TensorRT reads the bytes as int32 whatever numpy holds
            raise ValueError(f"plugin field {name!r} must be an int32 array, got {values.dtype}")
    return trt.PluginFieldCollection(
        [trt.PluginField(name, values, trt.PluginFieldType.INT32) for name, values in fields.items()]
    )


# The fields of each plugin variant, built once and kept for the life of the process. TensorRT reads the
# collection get_fields_to_serialize returns after the call, through pointers into the collection and into
# the int32 arrays; module-level constants stay valid however long the plugin or the returned object lives.
_FIELD_ARRAYS = {(counts, overwrite): rules.fields_to_serialize(compute_counts=counts, overwrite=overwrite)
                 for counts in (True, False) for overwrite in (False, True) if not (counts and overwrite)}
_FIELD_COLLECTIONS = {key: plugin_field_collection(arrays) for key, arrays in _FIELD_ARRAYS.items()}
# What the creator advertises (field_names): compute_counts and overwrite with their defaults, so that TensorRT's
# ONNX parser passes those attributes of a node.
_ADVERTISED = {rules.COMPUTE_COUNTS_FIELD: np.array([int(rules.DEFAULT_COMPUTE_COUNTS)], dtype=rules.FIELD_DTYPE),
               rules.OVERWRITE_FIELD: np.array([int(rules.DEFAULT_OVERWRITE)], dtype=rules.FIELD_DTYPE)}
_ADVERTISED_COLLECTION = plugin_field_collection(_ADVERTISED)


def read_plugin_fields(field_collection: Any) -> tuple[bool, bool]:
    """(compute_counts, overwrite) from the PluginFieldCollection TensorRT hands the creator (a network's or a
    deserialized engine's); ValueError names an unknown or repeated field, a type other than INT32, a bad value,
    or overwrite with counts."""
    fields = list(field_collection)
    rules.check_field_names([field.name for field in fields])
    values: dict[str, np.ndarray] = {}
    for field in fields:
        if field.type != trt.PluginFieldType.INT32:
            raise ValueError(f"plugin field {field.name!r} must have type INT32, got {field.type.name}")
        values[field.name] = np.array(field.data, dtype=rules.FIELD_DTYPE)  # a copy: data is TensorRT's memory
    compute_counts, overwrite = rules.compute_counts_from_fields(values), rules.overwrite_from_fields(values)
    rules.check_overwrite(overwrite=overwrite, compute_counts=compute_counts)
    return compute_counts, overwrite


class ScatterAddPlugin(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuildV2, trt.IPluginV3OneRuntime):
    """state[index[e], :] += src[e, :] for every edge e, in place; counts[n] = number of edges into n.

    One attribute, compute_counts (plugin field "compute_counts", int32 0/1, default 1): with 1 the plugin
    has two outputs (aggregated, counts); with 0 only aggregated, and enqueue does not touch counts, so an
    execution costs O(E*F) instead of O(E*F + N). Every size comes from the tensor shapes.
    get_fields_to_serialize writes compute_counts (and overwrite), so a deserialized engine's creator recreates the
    same plugin.
    overwrite (plugin field, int32 0/1, default 0): 1 writes rows instead, state[index[e]] = src[e], one kernel
    and no workspace (plugin.kernels.overwrite); it needs compute_counts 0.
    """

    def __init__(self, compute_counts: bool = rules.DEFAULT_COMPUTE_COUNTS,
                 overwrite: bool = rules.DEFAULT_OVERWRITE) -> None:
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuildV2.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.plugin_name = PLUGIN_NAME
        self.plugin_version = PLUGIN_VERSION
        self.plugin_namespace = PLUGIN_NAMESPACE
        self.compute_counts = rules.as_compute_counts(compute_counts)
        self.overwrite = rules.as_overwrite(overwrite)
        rules.check_overwrite(overwrite=self.overwrite, compute_counts=self.compute_counts)
        self.num_outputs = rules.num_outputs(compute_counts=self.compute_counts)
        self._launch: Any = None  # a PreparedScatterAdd for the current shapes (on_shape_change)
        self._prepared_for: Any = None  # the (LaunchSizes, dtype) it was prepared for
        self._state_nbytes = 0

    # --- IPluginV3 ---------------------------------------------------------------------------------------
    def get_capability_interface(self, capability: Any) -> Any:
        """One object implements the core, build and runtime capabilities (PluginCapabilityType)."""
        return self

    def clone(self) -> "ScatterAddPlugin":
        """A new plugin with the same fields. The prepared launch is not copied: each execution context's
        plugin (attach_to_context) prepares its own in on_shape_change, since a call patches its argument buffer."""
        return ScatterAddPlugin(compute_counts=self.compute_counts, overwrite=self.overwrite)

    # --- IPluginV3OneBuild(V2): called while TensorRT builds the engine ------------------------------------
    def get_output_data_types(self, input_types: "list[DataType]") -> "list[DataType]":
        dtypes = rules.output_dtypes([numpy_dtype(t) for t in input_types], compute_counts=self.compute_counts)
        return [trt_dtype(dtype) for dtype in dtypes]

    def get_output_shapes(
        self, inputs: "list[DimsExprs]", shape_inputs: "list[DimsExprs]", expr_builder: "IExprBuilder"
    ) -> "list[DimsExprs]":
        """aggregated has the state's (symbolic) shape [N, F]; counts, if computed, is [N, 1]."""
        state = inputs[rules.STATE]
        shapes = rules.output_shapes(state[0], state[1], expr_builder.constant(1), compute_counts=self.compute_counts)
        return [trt.DimsExprs(shape) for shape in shapes]

    def supports_format_combination(self, pos: int, in_out: "list[DynamicPluginTensorDesc]", num_inputs: int) -> bool:
        """Reads the descriptors at positions 0..pos only: TensorRT leaves the later ones undefined."""
        if num_inputs != rules.NUM_INPUTS or not 0 <= pos < len(in_out):
            return False
        chosen = [in_out[i].desc for i in range(pos + 1)]
        dtypes = [numpy_dtype(desc.type) for desc in chosen]
        linear = [desc.format == trt.TensorFormat.LINEAR for desc in chosen]
        return rules.supports_combination(pos, dtypes, linear, num_io=len(in_out), compute_counts=self.compute_counts)

    def configure_plugin(self, inp: "list[DynamicPluginTensorDesc]", out: "list[DynamicPluginTensorDesc]") -> None:
        """Checks ranks and the feature dimension once, at build time (-1 marks a dynamic dimension), and
        everything get_workspace_size needs: TensorRT turns an exception here into a build error, but swallows
        one raised in get_workspace_size and uses 0 bytes."""
        rules.check_input_ranks([dims_tuple(desc.desc.dims) for desc in inp])
        profile_workspace_size(inp, with_counts=self.compute_counts, overwrite=self.overwrite)

    def get_workspace_size(self, inp: "list[DynamicPluginTensorDesc]", out: "list[DynamicPluginTensorDesc]") -> int:
        """The kernel's workspace for the largest shapes of the profile (float32 none, except with counts: 8 N
        bytes for more than 2^24 edges, the sorted path's for wide rows and many edges). TensorRT calls
        configure_plugin first with the same descriptors, which checked this computation, so it cannot raise."""
        return profile_workspace_size(inp, with_counts=self.compute_counts, overwrite=self.overwrite)

    def get_aliased_input(self, output_index: int) -> int:
        """Output 0 (aggregated) is input 0's (the state's) memory; -1: counts, output 1, has a buffer of its own.
        TensorRT asks only when the builder config enables PreviewFeature.ALIASED_PLUGIN_IO_10_03."""
        return rules.STATE if output_index == rules.AGGREGATED else -1

    def get_valid_tactics(self) -> list[int]:
        return []

    # --- IPluginV3OneRuntime: called by the execution context ----------------------------------------------
    def set_tactic(self, tactic: int) -> None:
        pass

    def on_shape_change(self, inp: "list[PluginTensorDesc]", out: "list[PluginTensorDesc]") -> None:
        """Checks the concrete shapes, loads the kernel (compiled once per dtype) and prepares the launch for
        these shapes: every descriptor is read here, once, so that enqueue only passes pointers.

        TensorRT also calls it when only tensor addresses changed, possibly while the caller's stream is being
        captured into a CUDA graph: the launch prepared for the same shapes is kept (it re-binds new pointers
        itself), so that nothing is allocated or compiled then."""
        from plugin.kernels import PreparedScatterAdd, scatter_add_workspace_size

        sizes = rules.launch_sizes([dims_tuple(desc.dims) for desc in inp])
        dtype = numpy_dtype(inp[rules.STATE].type)
        if dtype is None:
            raise ValueError(f"unsupported state dtype {inp[rules.STATE].type}")
        if self._launch is not None and self._prepared_for == (sizes, dtype):
            return
        if self.overwrite:
            from plugin.kernels.overwrite import PreparedOverwrite

            self._launch = PreparedOverwrite(num_nodes=sizes.num_nodes, num_edges=sizes.num_edges,
                                             num_features=sizes.num_features, dtype=dtype)
            self._prepared_for = (sizes, dtype)
            self._state_nbytes = rules.state_nbytes(sizes, dtype)
            return
        # what get_workspace_size asked TensorRT for
        workspace_size = scatter_add_workspace_size(sizes.num_nodes, sizes.num_edges, sizes.num_features, dtype,
                                                    with_counts=self.compute_counts)
        self._launch = PreparedScatterAdd(
            num_nodes=sizes.num_nodes, num_edges=sizes.num_edges, num_features=sizes.num_features, dtype=dtype,
            with_counts=self.compute_counts, workspace_size=workspace_size)
        self._prepared_for = (sizes, dtype)
        self._state_nbytes = rules.state_nbytes(sizes, dtype)

    def enqueue(
        self,
        input_desc: "list[PluginTensorDesc]",
        output_desc: "list[PluginTensorDesc]",
        inputs: list[int],
        outputs: list[int],
        workspace: int,
        stream: int,
    ) -> None:
        """Launches the kernel on TensorRT's stream with TensorRT's workspace: no synchronisation, no allocation.

        The launch was prepared for the current shapes in on_shape_change (which TensorRT calls before the
        first enqueue and whenever the shapes change), so the descriptors are not read again here.
        With aliasing, outputs[0] is inputs[0] and the kernel adds into it. Without compute_counts there is no
        outputs[1] and the kernel gets counts=0: no O(N) zeroing, only the E rows are touched. Should TensorRT
        ever hand the output its own buffer, the state is first copied into it (a device-to-device copy on the
        same stream), so the result is right either way; that copy costs O(N*F), which aliasing exists to avoid.
        With overwrite, the prepared PreparedOverwrite writes the rows instead (no workspace).
        """
        if self._launch is None:  # not TensorRT's order, but the shapes are all here
            self.on_shape_change(input_desc, output_desc)
        state = outputs[rules.AGGREGATED]
        if state != inputs[rules.STATE]:
            copy_device_async(state, inputs[rules.STATE], self._state_nbytes, stream)
        if self.overwrite:
            self._launch(state, inputs[rules.SOURCE], inputs[rules.INDEX], stream)
            return
        counts = outputs[rules.COUNTS] if self.compute_counts else 0
        self._launch(state, inputs[rules.SOURCE], inputs[rules.INDEX], counts, workspace, stream)

    def attach_to_context(self, resource_context: Any) -> "ScatterAddPlugin":
        """Each execution context gets its own plugin object; no context resources are needed."""
        return self.clone()

    def get_fields_to_serialize(self) -> Any:
        """compute_counts and (for an overwrite) overwrite as INT32 fields; the creator reads them back when an
        engine is deserialized.

        Returns a module-level collection (see _FIELD_COLLECTIONS): TensorRT reads it after this call returns.
        """
        return _FIELD_COLLECTIONS[(self.compute_counts, self.overwrite)]


def copy_device_async(dst: int, src: int, nbytes: int, stream: int) -> None:
    """Device-to-device copy of `nbytes` on `stream` (enqueued, not waited for)."""
    if nbytes == 0:
        return
    from cuda.bindings import driver

    from common.cuda_check import check

    check(driver.cuMemcpyDtoDAsync(driver.CUdeviceptr(dst), driver.CUdeviceptr(src), nbytes, driver.CUstream(stream)))


class ScatterAddPluginCreator(trt.IPluginCreatorV3One):
    """Creates ScatterAddPlugin objects, for a network (build phase) and for a deserialized engine (runtime)."""

    def __init__(self) -> None:
        trt.IPluginCreatorV3One.__init__(self)
        self.name = PLUGIN_NAME
        self.plugin_version = PLUGIN_VERSION
        self.plugin_namespace = PLUGIN_NAMESPACE
        # The fields a network or ONNX node may give create_plugin, with their type and default (compute_counts:
        # INT32, 1; overwrite: INT32, 0).
        self.field_names = _ADVERTISED_COLLECTION

    def create_plugin(self, name: str, field_collection: Any, phase: Any) -> ScatterAddPlugin:
        """A plugin from the fields of a network or of a deserialized engine (compute_counts, default 1; overwrite,
        default 0).

        ValueError (a null plugin, reported by TensorRT, when called through TensorRT) for bad fields.
        """
        try:
            compute_counts, overwrite = read_plugin_fields(field_collection)
        except ValueError as error:
            raise ValueError(f"{PLUGIN_NAME}: {error}") from None
        return ScatterAddPlugin(compute_counts=compute_counts, overwrite=overwrite)


_registered_creators: list[ScatterAddPluginCreator] = []


def register_scatter_add_creator() -> Any:
    """Registers the creator in TensorRT's plugin registry once per process and returns the registered creator.

    Call it before building a network with the plugin and before deserializing an engine that contains it.
    """
    registry = trt.get_plugin_registry()
    key = (PLUGIN_NAME, PLUGIN_VERSION, PLUGIN_NAMESPACE)
    for existing in registry.all_creators:  # a scan, not get_creator: a lookup miss may log an error
        if (getattr(existing, "name", None), getattr(existing, "plugin_version", None),
                getattr(existing, "plugin_namespace", None)) == key:
            return existing
    creator = ScatterAddPluginCreator()
    if not registry.register_creator(creator, PLUGIN_NAMESPACE):
        raise RuntimeError(f"TensorRT refused to register the {PLUGIN_NAME} plugin creator")
    _registered_creators.append(creator)  # the registry holds a pointer; keep the Python object alive
    return creator
