"""The lines the CLI prints about the engine: build or load, aliasing as TensorRT reports it, X in place or not.

Plain functions of numbers and arrays, no TensorRT.
"""

import numpy as np

from network.builder import AOT_PLUGIN, PYTHON_PLUGIN
from network.profile import STATE_UPDATE, EngineSignature


def describe_signature(signature: EngineSignature) -> str:
    network = "state update network (output X_out)" if signature.kind == STATE_UPDATE else f"C={signature.num_classes}"
    return (
        f"precision {signature.precision}, F={signature.num_features}, {network}, "
        f"N in {signature.bounds.nodes}, E in {signature.bounds.edges}"
    )


def build_line(seconds: float, signature: EngineSignature) -> str:
    return f"Engine built in {seconds:.2f} s ({describe_signature(signature)})"


def load_line(path: str, signature: EngineSignature) -> str:
    return f"Engine loaded from {path} ({describe_signature(signature)})"


def plugin_alias_line(compute_counts: bool, plugin: str = PYTHON_PLUGIN, loaded: bool = False) -> str:
    """The plugin's own I/O aliasing, for the plugin as this sample builds it (network.builder.scatter_add_plugin_for:
    counts in the classifier, compute_counts=0 in the state-update network; with plugin="aot",
    network/aot_layers.py). A loaded engine holds whichever plugin it was built with."""
    if loaded:
        return "Plugin: the scatter-add built into the engine file (--plugin only chooses for a new engine)"
    if plugin == AOT_PLUGIN:
        counts = "; counts alias a zero tensor made by a fill layer" if compute_counts else "; no counts are computed"
        return ("AOT plugin (tensorrt.plugin, PTX in the engine, no Python at run time): aggregated aliases X "
                f"(TensorDesc.aliased()){counts}")
    if compute_counts:
        return "Plugin: output 0 (aggregated) aliases input 0 (X) -- get_aliased_input(0) == 0, -1 for output 1 (counts)"
    return ("Plugin (compute_counts=0): output 0 (aggregated), its only output, aliases input 0 (X) -- "
            "get_aliased_input(0) == 0; no counts are computed")


def engine_alias_lines(aliased_inputs: dict[str, str | None] | None, tensorrt_version: str = "?") -> list[str]:
    """One line per engine output with what ICudaEngine.get_aliased_input_tensor returned."""
    if aliased_inputs is None:
        return [f"Engine outputs: TensorRT {tensorrt_version} has no ICudaEngine.get_aliased_input_tensor to report engine I/O aliasing"]
    return [
        f"Engine output {name!r}: get_aliased_input_tensor -> {alias!r}"
        + ("" if alias else " (no engine input shares its memory)")
        for name, alias in aliased_inputs.items()
    ]


def update_is_zero(src: np.ndarray, index: np.ndarray, num_nodes: int) -> bool:
    """True when adding src rows into their index rows changes no value (e.g. all-zero features): then X's
    buffer looks the same whether or not the plugin wrote to it. O(E*F) with np.bincount, in float64."""
    src64 = np.asarray(src, dtype=np.float64)
    src64 = src64[:, None] if src64.ndim == 1 else src64
    return all(
        not np.any(np.bincount(index, weights=src64[:, column], minlength=num_nodes))
        for column in range(src64.shape[1])
    )


def state_buffer_line(before: np.ndarray, after: np.ndarray, zero_update: bool) -> tuple[bool, str]:
    """(changed in place, the line to print) from X's buffer as uploaded and as read back after inference."""
    changed = not np.array_equal(before, after)
    if changed:
        return True, "Caller's X buffer: changed in place (the plugin's aliased write reached the engine input)"
    if zero_update:
        return False, "Caller's X buffer: unchanged, but the update is zero everywhere, so in-place writes cannot be seen"
    return False, "Caller's X buffer: unchanged (the plugin's in-place write went to a TensorRT-owned buffer, not the caller's)"
