"""The in-place scatter-add as a TensorRT Python plugin (IPluginV3 with the V3One core, build and runtime parts).

Inputs: state [N, F], src [E, F] (float32 or float16), index [E] int64. Outputs: aggregated [N, F], which is
input 0's memory (get_aliased_input(0) == 0), and counts [N, 1] int64. enqueue adds src rows into the state
in place on TensorRT's stream; the rules (types, formats, shapes, aliasing) live in plugin.rules.

TensorRT is imported when this module is imported; everything else (CUDA, the kernel) when first used.
Register the creator (register_scatter_add_creator) before deserializing an engine that contains the plugin.
"""

from typing import TYPE_CHECKING, Any

import numpy as np

from common.imports import import_tensorrt
from plugin import rules

if TYPE_CHECKING:  # descriptor types from tensorrt-stubs, for the method signatures below
    from tensorrt import DataType, Dims, DimsExprs, DynamicPluginTensorDesc, IExprBuilder, PluginTensorDesc

# Any, not the stubs' module type: it may be TensorRT-RTX (tests), and the stubs' plugin base classes have
# signatures that do not match TensorRT's calling contract (e.g. get_aliased_input without its argument).
trt: Any = import_tensorrt()

PLUGIN_NAME = "ScatterAddInPlace"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = ""

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


class ScatterAddPlugin(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuildV2, trt.IPluginV3OneRuntime):
    """state[index[e], :] += src[e, :] for every edge e, in place; counts[n] = number of edges into n.

    The plugin has no attributes: every size comes from the tensor shapes, so get_fields_to_serialize is empty
    and a deserialized engine recreates the plugin from the registered creator alone.
    """

    def __init__(self) -> None:
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuildV2.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.plugin_name = PLUGIN_NAME
        self.plugin_version = PLUGIN_VERSION
        self.plugin_namespace = PLUGIN_NAMESPACE
        self.num_outputs = rules.NUM_OUTPUTS

    # --- IPluginV3 ---------------------------------------------------------------------------------------
    def get_capability_interface(self, capability: Any) -> Any:
        """One object implements the core, build and runtime capabilities (PluginCapabilityType)."""
        return self

    def clone(self) -> "ScatterAddPlugin":
        """A new plugin; there is no state to copy besides what __init__ sets."""
        return ScatterAddPlugin()

    # --- IPluginV3OneBuild(V2): called while TensorRT builds the engine ------------------------------------
    def get_output_data_types(self, input_types: "list[DataType]") -> "list[DataType]":
        dtypes = rules.output_dtypes([numpy_dtype(t) for t in input_types])
        return [trt_dtype(dtype) for dtype in dtypes]

    def get_output_shapes(
        self, inputs: "list[DimsExprs]", shape_inputs: "list[DimsExprs]", expr_builder: "IExprBuilder"
    ) -> "list[DimsExprs]":
        """aggregated has the state's (symbolic) shape [N, F]; counts is [N, 1]."""
        state = inputs[rules.STATE]
        return [trt.DimsExprs([state[0], state[1]]), trt.DimsExprs([state[0], expr_builder.constant(1)])]

    def supports_format_combination(self, pos: int, in_out: "list[DynamicPluginTensorDesc]", num_inputs: int) -> bool:
        dtypes = [numpy_dtype(desc.desc.type) for desc in in_out]
        linear = [desc.desc.format == trt.TensorFormat.LINEAR for desc in in_out]
        return num_inputs == rules.NUM_INPUTS and rules.supports_combination(pos, dtypes, linear)

    def configure_plugin(self, inp: "list[DynamicPluginTensorDesc]", out: "list[DynamicPluginTensorDesc]") -> None:
        """Checks ranks and the feature dimension once, at build time (-1 marks a dynamic dimension)."""
        rules.check_input_ranks([dims_tuple(desc.desc.dims) for desc in inp])

    def get_workspace_size(self, inp: "list[DynamicPluginTensorDesc]", out: "list[DynamicPluginTensorDesc]") -> int:
        """The kernel's workspace for the largest shapes of the profile (float32 needs none)."""
        from plugin.kernels import scatter_add_workspace_size

        sizes = rules.launch_sizes([dims_tuple(desc.max) for desc in inp])
        dtype = numpy_dtype(inp[rules.STATE].desc.type)
        return int(scatter_add_workspace_size(sizes.num_nodes, sizes.num_edges, sizes.num_features, dtype))

    def get_aliased_input(self, output_index: int) -> int:
        """Output 0 is written into input 0's memory (needs PreviewFeature.ALIASED_PLUGIN_IO_10_03)."""
        return rules.aliased_input(output_index)

    def get_valid_tactics(self) -> list[int]:
        return []

    # --- IPluginV3OneRuntime: called by the execution context ----------------------------------------------
    def set_tactic(self, tactic: int) -> None:
        pass

    def on_shape_change(self, inp: "list[PluginTensorDesc]", out: "list[PluginTensorDesc]") -> None:
        """Checks the concrete shapes and compiles/loads the kernel for this dtype (cached), outside enqueue."""
        from plugin.kernels import prepare_kernels

        rules.launch_sizes([dims_tuple(desc.dims) for desc in inp])
        prepare_kernels(numpy_dtype(inp[rules.STATE].type))

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

        With aliasing, outputs[0] is inputs[0] and the kernel adds into it. Should TensorRT ever hand the
        output its own buffer, the state is first copied into it (a device-to-device copy on the same stream),
        so the result is right either way; that copy costs O(N*F), which aliasing exists to avoid.
        """
        from plugin.kernels import scatter_add_launch, scatter_add_workspace_size

        sizes = rules.launch_sizes([dims_tuple(desc.dims) for desc in input_desc])
        dtype = numpy_dtype(input_desc[rules.STATE].type)
        if dtype is None:
            raise ValueError(f"unsupported state dtype {input_desc[rules.STATE].type}")
        state = outputs[rules.AGGREGATED]
        if state != inputs[rules.STATE]:
            copy_device_async(state, inputs[rules.STATE], rules.state_nbytes(sizes, dtype), stream)
        workspace_size = scatter_add_workspace_size(sizes.num_nodes, sizes.num_edges, sizes.num_features, dtype)
        scatter_add_launch(
            state=state,
            src=inputs[rules.SOURCE],
            index=inputs[rules.INDEX],
            counts=outputs[rules.COUNTS],
            num_nodes=sizes.num_nodes,
            num_edges=sizes.num_edges,
            num_features=sizes.num_features,
            dtype=dtype,
            stream=stream,
            workspace=workspace,
            workspace_size=workspace_size,
        )

    def attach_to_context(self, resource_context: Any) -> "ScatterAddPlugin":
        """Each execution context gets its own plugin object; no context resources are needed."""
        return self.clone()

    def get_fields_to_serialize(self) -> Any:
        return trt.PluginFieldCollection([])


def copy_device_async(dst: int, src: int, nbytes: int, stream: int) -> None:
    """Device-to-device copy of `nbytes` on `stream` (enqueued, not waited for)."""
    if nbytes == 0:
        return
    from cuda.bindings import driver

    from plugin.cuda_check import check

    check(driver.cuMemcpyDtoDAsync(driver.CUdeviceptr(dst), driver.CUdeviceptr(src), nbytes, driver.CUstream(stream)))


class ScatterAddPluginCreator(trt.IPluginCreatorV3One):
    """Creates ScatterAddPlugin objects, for a network (build phase) and for a deserialized engine (runtime)."""

    def __init__(self) -> None:
        trt.IPluginCreatorV3One.__init__(self)
        self.name = PLUGIN_NAME
        self.plugin_version = PLUGIN_VERSION
        self.plugin_namespace = PLUGIN_NAMESPACE
        self.field_names = trt.PluginFieldCollection([])

    def create_plugin(self, name: str, field_collection: Any, phase: Any) -> ScatterAddPlugin:
        unknown = [field.name for field in field_collection]
        if unknown:
            raise ValueError(f"{PLUGIN_NAME} takes no plugin fields, got {unknown}")
        return ScatterAddPlugin()


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
