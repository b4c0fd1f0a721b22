"""What an engine run reports, as the CLI prints it: where the engine came from, the plugin's and the engine's
aliasing as TensorRT reports them, whether the caller's state changed in place, and the device and host times of
--steps, --benchmark and a model of one's own. Plain functions of what network/ observed (numbers, no TensorRT).

TensorRT reports no engine alias for a plugin's aliased output (ICudaEngine.get_aliased_input_tensor answers None,
as NVIDIA's own runs of an aliased plugin show), so the lines say what None means rather than leave it reading as a
failure.
"""

from collections.abc import Mapping

from common.text import shown_path
from network.benchmark import BenchmarkResult
from common.plugin_kind import PluginKind
from network.definition import INPUT_STATE, OUTPUT_STATE, STATE_UPDATE
from network.engine import EngineOrigin, EngineSignature
from network.timing import TimingSummary, summarize
from network.model_engine import ModelEngineRun
from network.run import EngineRunResult
from network.steps import StepsResult, StepsRun


def format_duration(ms: float) -> str:
    """A duration with a unit that keeps it readable: '12.3 us', '4.56 ms', '7.89 s'."""
    if ms < 1.0:
        return f"{ms * 1e3:.1f} us"
    if ms < 1e3:
        return f"{ms:.3g} ms" if ms < 100 else f"{ms:.0f} ms"
    return f"{ms / 1e3:.2f} s"


def describe_summary(summary: TimingSummary, *, p90: bool = True) -> str:
    """'median 12.3 us, p90 13.0 us, min 11.9 us, max 20.1 us over 100 runs' (p90 left out on request)."""
    parts = [f"median {format_duration(summary.median_ms)}"]
    if p90:
        parts.append(f"p90 {format_duration(summary.p90_ms)}")
    parts += [f"min {format_duration(summary.min_ms)}", f"max {format_duration(summary.max_ms)}"]
    runs = "run" if summary.count == 1 else "runs"
    return ", ".join(parts) + f" over {summary.count} {runs}"




def issued_by(cuda_graph: bool, plugin: PluginKind | None = PluginKind.PYTHON) -> str:
    """What the host runs to issue one execution: the captured graph's launch, or TensorRT's enqueue with the
    scatter-add `plugin` (None: an engine file's, whichever it holds)."""
    if cuda_graph:
        return "cuGraphLaunch of the captured execution"
    if plugin is None:
        return "execute_async_v3 with the engine file's plugin"
    if plugin.aot:
        return "execute_async_v3; the AOT plugin runs no Python"
    return "execute_async_v3 with the Python plugin's enqueue"


def timed_call(cuda_graph: bool) -> str:
    """The call the CUDA events are recorded around."""
    if cuda_graph:
        return "cuGraphLaunch of the execution captured once after the warm-up"
    return "execute_async_v3"


def host_time_line(summary: TimingSummary, what: str, how: str) -> str:
    """'Host time to issue one step: median 7.1 us (execute_async_v3 with ...)'."""
    return f"Host time to issue one {what}: median {format_duration(summary.median_ms)} ({how})"




def describe_signature(signature: EngineSignature) -> str:
    network = "state update network (output X_out)" if signature.kind == STATE_UPDATE else f"C={signature.num_classes}"
    return (
        f"precision {signature.precision}, F={signature.num_features}, {network}, "
        f"N in {signature.bounds.nodes}, E in {signature.bounds.edges}"
    )




def origin_line(origin: EngineOrigin) -> str:
    """'Engine built in 1.23 s (...)' or 'Engine loaded from PATH (...)'."""
    if origin.loaded_from is not None:
        return f"Engine loaded from {shown_path(origin.loaded_from)} ({describe_signature(origin.signature)})"
    source = "" if origin.onnx_path is None else f" from the rewritten {origin.onnx_path}"
    return f"Engine built{source} in {origin.build_seconds or 0.0:.2f} s ({describe_signature(origin.signature)})"


PLUGIN_ALIASING_ANSWER = ("what TensorRT answers for a plugin's aliasing, as NVIDIA's own runs show: the method "
                          "reports layer aliasing such as KVCacheUpdate; not a failure")


def aliasing_line(aliases: dict[str, str | None] | None, tensorrt_version: str = "?", output: str = OUTPUT_STATE,
                  state: str = INPUT_STATE) -> str:
    """What TensorRT reported for `output` ("X_out"), and how the runner bound it (at `state`'s address,
    always). None is what NVIDIA's logs of a plugin aliasing its input show (trt-samples-for-hackathon-cn,
    AliasedIOPlugin), so the line says so rather than leave it reading as a failure."""
    if aliases is None:
        reported = f"TensorRT {tensorrt_version} has no ICudaEngine.get_aliased_input_tensor to ask"
    else:
        reported = f"get_aliased_input_tensor -> {aliases.get(output)!r}"
        if aliases.get(output) is None:
            reported += f" ({PLUGIN_ALIASING_ANSWER})"
    return (f"Engine output {output!r}: {reported}; the runner binds {output} at {state}'s address, so every "
            f"execution leaves the state in {state} and nothing is copied back")


def steps_report_lines(run: StepsRun, num_nodes: int, num_features: int, batch_edges: int,
                       tensorrt_version: str = "?", plugin: PluginKind | None = PluginKind.PYTHON) -> list[str]:
    """The lines --steps prints: what ran, aliasing as TensorRT reported it, X after step 1, timings (device and
    host). `plugin`: the scatter-add the engine was built with (None: loaded from a file)."""
    steps = len(run.step_ms)
    lines = [
        f"Steps: {steps} executions on one state buffer X [{num_nodes}, {num_features}], each adding a new batch of "
        f"{batch_edges:,} random edges (after {run.warmup_executions} warm-up execution(s) that add zeros"
        + (", then as many replays of the captured one)" if run.cuda_graph else ")"),
        aliasing_line(run.aliases, tensorrt_version),
    ]
    if run.first_step_changed_state is None:
        lines.append("X's buffer after the first execution: the first batch adds zero everywhere, so the update cannot be seen")
    elif run.first_step_changed_state:
        lines.append("X's buffer after the first execution: changed (the update reached X)")
    else:
        lines.append("X's buffer after the first execution: unchanged (the update did not reach X: see the validation)")
    lines.append(f"Per-step engine time (CUDA events around {timed_call(run.cuda_graph)}): "
                 f"{describe_summary(summarize(run.step_ms))}")
    host = run.host_summary()
    if host is not None:
        lines.append(host_time_line(host, "step", issued_by(run.cuda_graph, plugin)))
    return lines




def plugin_alias_line(compute_counts: bool, plugin: PluginKind = PluginKind.PYTHON, loaded: bool = False) -> str:
    """The plugin's own I/O aliasing, for the plugin as this sample builds it (network.definition.scatter_add_plugin_for:
    counts in the classifier, compute_counts=0 in the state-update network; with PluginKind.AOT,
    network.aot_layers.add_aot_scatter_add: plugin.scatter_add_op's chains). A loaded engine holds whichever plugin it was built with."""
    if loaded:
        return "Plugin: the scatter-add built into the engine file (--plugin only chooses for a new engine)"
    if plugin.aot:
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




COPY_CLAIM = ("as Torch-TensorRT PR #4279 states, unconfirmed by NVIDIA, TensorRT copies the aliased input when a "
              "multi-output plugin's aliased output feeds another layer, which is this classifier's shape")


def state_buffer_line(changed: bool, zero_update: bool, multi_output_plugin: bool = False) -> str:
    """Whether the caller's X buffer changed in place, as read back after inference. `multi_output_plugin`: the
    plugin aliasing X has another output and its aliased one feeds another layer (the classifier's counts and
    mean), where an unconfirmed claim (COPY_CLAIM) predicts "unchanged"."""
    if changed:
        return "Caller's X buffer: changed in place (the plugin's aliased write reached the engine input)"
    if zero_update:
        return "Caller's X buffer: unchanged, but the update is zero everywhere, so in-place writes cannot be seen"
    claim = f"; expected {COPY_CLAIM}" if multi_output_plugin else ""
    return ("Caller's X buffer: unchanged (the plugin's in-place write went to a TensorRT-owned buffer, not the "
            f"caller's{claim})")


def benchmark_lines(result: BenchmarkResult, plugin: PluginKind | None = PluginKind.PYTHON) -> list[str]:
    """The --benchmark report; `plugin`: the engine's scatter-add (None: loaded from a file)."""
    if result.cuda_graph:
        warmup = f"{result.warmup} warm-up executions and {result.warmup} warm-up replays"
        kernel = "scatter_add_launch alone, captured and replayed the same way, same buffers"
    else:
        warmup, kernel = f"{result.warmup} warm-up ones", "scatter_add_launch alone, same buffers"
    lines = [
        f"Benchmark: {result.engine.count} timed executions after {warmup} (CUDA events on one stream around each call)",
        f"  engine ({timed_call(result.cuda_graph)}): {describe_summary(result.engine)}",
        f"  {kernel}: {describe_summary(result.kernel)}",
        f"  kernel share: kernel median / engine median = {100 * result.kernel_share:.0f}%",
    ]
    if result.engine_host is not None:
        lines.append("  " + host_time_line(result.engine_host, "execution", issued_by(result.cuda_graph, plugin)))
    return lines




def model_engine_lines(states: Mapping[str, str], aliases: Mapping[str, str | None] | None, runs: int,
                       run_ms: list[float], tensorrt_version: str = "?") -> list[str]:
    """What TensorRT said about each state output and where the runner bound it; with several runs, the
    engine time of the runs after the first (the first also does the plugin's first-run work)."""
    lines = [aliasing_line(None if aliases is None else dict(aliases), tensorrt_version, output, state)
             for output, state in states.items()]
    if not states:
        lines.append("No engine output aliases an input: every output has a buffer of its own")
    if runs > 1:
        lines.append(f"Runs: {runs:,} executions, the states kept in their input buffers; engine time of runs 2 to "
                     f"{runs:,} (CUDA events around execute_async_v3): {describe_summary(summarize(run_ms[1:]))}")
    return lines


def graph_run_lines(result: EngineRunResult) -> list[str]:
    """Everything a classifier run prints after its output: the engine, the aliasing, X in place, --benchmark."""
    lines = [origin_line(result.origin), plugin_alias_line(True, result.plugin or PluginKind.PYTHON, result.plugin is None),
             *engine_alias_lines(result.aliased_inputs, result.origin.tensorrt_version),
             state_buffer_line(result.state_changed_in_place, result.zero_update, result.multi_output_plugin)]
    if result.benchmark is not None:
        lines += benchmark_lines(result.benchmark, plugin=result.plugin)
    return lines


def steps_lines(result: StepsResult, batch_edges: int) -> list[str]:
    """Everything --steps prints after the final state: the engine, the aliasing, the steps and their times."""
    num_nodes, num_features = result.final_state.shape
    return [origin_line(result.origin), plugin_alias_line(False, result.plugin or PluginKind.PYTHON, result.plugin is None),
            *steps_report_lines(result.run, num_nodes, num_features, batch_edges, result.origin.tensorrt_version,
                                plugin=result.plugin)]


def model_run_lines(result: ModelEngineRun, runs: int) -> list[str]:
    """What a model of one's own prints after its outputs: where the engine came from, then model_engine_lines."""
    if result.loaded is not None:
        path, description_file, plugin = result.loaded
        origin = f"Engine loaded from {path} ({plugin} plugin), its outputs' aliases from {description_file}"
    else:
        origin = (f"Engine built from the rewritten {result.built_from} in {result.build_seconds or 0.0:.2f} s (its "
                  "profile: this run's input shapes)")
    return [origin, *model_engine_lines(result.states, result.aliases, runs, result.run_ms, result.tensorrt_version)]
