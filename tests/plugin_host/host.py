"""The plugin host from Python: ctypes into the stand-in libnvinfer that tests/plugin_host/build.py lays out.

PluginHost drives a creator registered in the host's registry (trt.get_plugin_registry()) through TensorRT's
calls in TensorRT's order (plugin_host.cpp) and returns each phase's Report. The host's work runs inside a call
of the bindings' own C++ entry point (IPluginCreatorV3One.create_plugin on the host's driver creator) with the
GIL released, as TensorRT's calls into a plugin run inside build_serialized_network or execute_async_v3.
"""

import ctypes
import json
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

HOOK = ctypes.CFUNCTYPE(None, ctypes.c_char_p)
# tensorrt.QuickPluginCreationRequest values (NvInferPythonPlugin.h)
STRICT_AOT = 4


def host_library_path() -> str | None:
    """The plugin host's path where `tensorrt_libs` (imported by `import tensorrt`) is its layout, else None."""
    return getattr(sys.modules.get("tensorrt_libs"), "PLUGIN_HOST", None)


def check_source(lib: Any, path: str) -> None:
    """RuntimeError unless the host was built from this tree's plugin_host.cpp (a layout built elsewhere and
    carried keeps the host it was built with; without this check an old host would run under new tests)."""
    from tests.plugin_host.build import source_digest

    digest = getattr(lib, "host_source_digest", None)
    built = b""
    if digest is not None:
        digest.restype, digest.argtypes = ctypes.c_char_p, []
        built = digest()
    if built.decode() != source_digest():
        raise RuntimeError(f"the plugin host {path} was built from another plugin_host.cpp than this tree's: rebuild "
                           "it with tests/plugin_host/build.py where TensorRT's headers are (then carry the layout)")


class Report:
    """One phase's report from the host: ok, the first error, and each TensorRT call made with what it got."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.ok: bool = data.get("ok", False)
        self.error: str | None = data.get("error")
        self.steps: list[dict[str, Any]] = data.get("steps", [])

    @property
    def calls(self) -> list[str]:
        return [step["call"] for step in self.steps]

    def step(self, call: str) -> dict[str, Any]:
        """The first step whose call starts with `call` (KeyError naming the calls made otherwise)."""
        for step in self.steps:
            if step["call"].startswith(call):
                return step
        raise KeyError(f"no call {call!r} in the host's report; calls: {self.calls}")

    def __str__(self) -> str:
        lines = [f"plugin host, {self.data.get('phase')}: {'ok' if self.ok else 'FAILED: ' + str(self.error)}"]
        for step in self.steps:
            details = {key: value for key, value in step.items() if key not in ("call", "ok")}
            lines.append(f"  {'ok ' if step['ok'] else 'BAD'} {step['call']}: {json.dumps(details)[:600]}")
        return "\n".join(lines)

    __repr__ = __str__  # what pytest shows as an assertion's message


class PluginHost:
    """The host's entry points. `trt` is the imported tensorrt (the host's layout)."""

    def __init__(self, trt: Any, path: str | None = None) -> None:
        path = path or host_library_path()
        if path is None:
            raise RuntimeError("tensorrt_libs has no PLUGIN_HOST: lay the bindings out with tests/plugin_host/build.py")
        self.trt = trt
        self.lib = lib = ctypes.CDLL(path)
        void_p, char_p, u64_p = ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)
        signatures: dict[str, tuple[Any, list[Any]]] = {
            "host_report": (char_p, []),
            "host_headers_version": (char_p, []),
            "host_registry_list": (char_p, []),
            "host_set_hook": (None, [HOOK]),
            "host_register_driver": (ctypes.c_bool, []),
            "host_result": (void_p, []),
            "host_status": (ctypes.c_int32, []),
            "host_build": (None, [char_p] * 4),
            "host_runtime_open": (None, [void_p, char_p]),
            "host_enqueue": (None, [void_p, u64_p, ctypes.c_int32, u64_p, ctypes.c_int32, ctypes.c_uint64,
                                    ctypes.c_uint64, ctypes.c_int32, char_p]),
            "host_enqueue_together": (None, [ctypes.POINTER(void_p), u64_p, ctypes.c_int32, u64_p, ctypes.c_int32,
                                             u64_p, u64_p, ctypes.c_int32]),
            "host_enqueue_nanoseconds": (ctypes.c_int64, [void_p]),
            "host_runtime_close": (None, [void_p]),
            "host_engine_free": (None, [void_p]),
            "host_engine_describe": (char_p, [void_p]),
            "host_run_unbound": (None, []),
            "host_set_timing_limit": (None, [ctypes.c_double]),
        }
        self.aot = hasattr(lib, "host_aot_build")  # the 10.16 and 11.x header sets have quick plugins
        if self.aot:
            signatures.update({
                "host_aot_build": (None, [char_p] * 4 + [ctypes.c_int32]),
                "host_aot_evaluate": (char_p, [void_p, char_p]),
                "host_aot_kernel": (ctypes.POINTER(ctypes.c_char), [void_p, ctypes.POINTER(ctypes.c_int32)]),
                "host_aot_kernel_name": (char_p, [void_p]),
                "host_aot_launch": (None, [void_p, char_p, u64_p, ctypes.c_int32, u64_p, ctypes.c_int32,
                                           ctypes.c_uint64]),
            })
        for name, (restype, argtypes) in signatures.items():
            function = getattr(lib, name)
            function.restype, function.argtypes = restype, argtypes
        check_source(lib, path)
        if not lib.host_register_driver():
            raise RuntimeError("the plugin host could not register its driver creator")
        self.driver = trt.get_plugin_registry().get_creator("PluginHostDriver", "1", "plugin_host")
        self.headers = lib.host_headers_version().decode()
        self._no_fields = trt.PluginFieldCollection([])

    def _run(self, bound: bool = True) -> tuple[int | None, Report]:
        """Runs the queued work through the bindings' create_plugin (bound) or straight from ctypes."""
        if bound:
            phase = self.trt.TensorRTPhase.BUILD
            self.trt.IPluginCreatorV3One.create_plugin(self.driver, "run", self._no_fields, phase)
        else:
            self.lib.host_run_unbound()
        return self.lib.host_result(), Report(json.loads(self.lib.host_report()))

    @staticmethod
    def _sizes(sizes: dict[str, int]) -> bytes:
        """Concrete sizes as the host reads them: "N=1000 E=5000"."""
        return " ".join(f"{k}={v}" for k, v in sizes.items()).encode()

    @staticmethod
    def _pointers(pointers: list[int]) -> Any:
        """Device pointers as the host's uint64_t array (one element at least: an empty list passes a valid pointer)."""
        return (ctypes.c_uint64 * max(len(pointers), 1))(*pointers)

    @staticmethod
    def spec(inputs: list[tuple[Any, list[Any]]], profile: dict[str, tuple[int, int, int]],
             fields: dict[str, list[int]] | None = None) -> str:
        """The host's spec text: INT32 fields, inputs as (DataType, dims with ints or size names), the profile."""
        lines = [f"field {name} {' '.join(str(int(v)) for v in values)}" for name, values in (fields or {}).items()]
        lines += [f"input {int(dtype)} {' '.join(str(d) for d in dims)}" for dtype, dims in inputs]
        lines += [f"profile {name} {low} {opt} {high}" for name, (low, opt, high) in profile.items()]
        return "\n".join(lines)

    def build(self, name: str, version: str, namespace: str, spec: str, *, bound: bool = True
              ) -> tuple[int | None, Report]:
        """The build phase; (engine handle or None, report)."""
        self.lib.host_build(name.encode(), version.encode(), namespace.encode(), spec.encode())
        return self._run(bound)

    def open(self, engine: int, sizes: dict[str, int]) -> tuple[int | None, Report]:
        """The runtime phase up to onShapeChange for concrete sizes; (context handle or None, report)."""
        self.lib.host_runtime_open(engine, self._sizes(sizes))
        return self._run()

    def enqueue(self, context: int, inputs: list[int], outputs: list[int], workspace: int, stream: int,
                repeats: int = 1, sizes: dict[str, int] | None = None) -> Report:
        """enqueue `repeats` times (outputs: one pointer per output; an aliased output gets its input's pointer).
        New `sizes` (the shapes, as for open) or pointers since the last onShapeChange: the host calls it first."""
        self.lib.host_enqueue(context, self._pointers(inputs), len(inputs), self._pointers(outputs), len(outputs),
                              workspace, stream, repeats, self._sizes(sizes or {}))
        return self._run()[1]

    def enqueue_together(self, contexts: list[int], inputs: list[list[int]], outputs: list[list[int]],
                         workspaces: list[int], streams: list[int], repeats: int = 1) -> Report:
        """Two contexts enqueueing `repeats` times at once, each from a thread of its own (one list per context)."""
        handles = (ctypes.c_void_p * 2)(*contexts)
        self.lib.host_enqueue_together(handles, self._pointers(inputs[0] + inputs[1]), len(inputs[0]),
                                       self._pointers(outputs[0] + outputs[1]), len(outputs[0]),
                                       self._pointers(workspaces), self._pointers(streams), repeats)
        return self._run()[1]

    def enqueue_captured(self, context: int, inputs: list[int], outputs: list[int], workspace: int, stream: int,
                         replays: int = 1, mode: str = "global") -> Report:
        """enqueue inside a CUDA graph capture of `stream` (`mode`: "global", as torch.cuda.graph captures by
        default, or "thread_local"), as an application captures enqueueV3, then
        the graph launched `replays` times and the stream synchronized; the report of the captured enqueue. With
        addresses other than the last enqueue's, onShapeChange runs inside the capture too (TensorRT calls it at
        the next enqueueV3). Needs a GPU (cuda.bindings). NvInferRuntime.h
        (IExecutionContext::reportToProfiler, 10.4 to 11.1): "if the graph is captured from an IExecutionContext";
        (IExecutionContext::enqueueV3): "If the Engine is streaming weights, enqueueV3 will become synchronous, and
        the graph will not be capturable." """
        from cuda.bindings import driver

        from common.cuda_check import check

        handle = driver.CUstream(stream)
        modes = {"global": driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL,
                 "thread_local": driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL}
        check(driver.cuStreamBeginCapture(handle, modes[mode]))
        try:
            report = self.enqueue(context, inputs, outputs, workspace, stream)
        finally:
            graph = check(driver.cuStreamEndCapture(handle))
        try:
            if report.ok:
                executable = check(driver.cuGraphInstantiate(graph, 0))
                try:
                    for _ in range(replays):
                        check(driver.cuGraphLaunch(executable, handle))
                    check(driver.cuStreamSynchronize(handle))
                finally:
                    check(driver.cuGraphExecDestroy(executable))
        finally:
            check(driver.cuGraphDestroy(graph))
        return report

    def timing_limit(self, seconds: float) -> None:
        """How long the build's timing enqueue on a GPU is waited for (default 60 s) before it is reported."""
        self.lib.host_set_timing_limit(seconds)

    def enqueue_ns(self, context: int) -> int:
        """Nanoseconds of the last enqueue loop after its first call."""
        return self.lib.host_enqueue_nanoseconds(context)

    def close(self, context: int) -> Report:
        """Destroys the context's plugin."""
        self.lib.host_runtime_close(context)
        return self._run()[1]

    def free(self, engine: int | None) -> Report | None:
        """Destroys an engine (its runtime plugin, where a context was made); None for no engine."""
        if engine is None:
            return None
        self.lib.host_engine_free(engine)
        return self._run()[1]

    def registry_list(self) -> list[list[str]]:
        return json.loads(self.lib.host_registry_list())["creators"]

    @contextmanager
    def hook(self, callback: Callable[[str], None]) -> Iterator[None]:
        """Calls callback(point) where TensorRT would go on with other work before it uses what a plugin returned."""
        function = HOOK(lambda point: callback(point.decode()))
        self.lib.host_set_hook(function)
        try:
            yield
        finally:
            self.lib.host_set_hook(HOOK())

    # --- quickly deployable AOT plugins (tensorrt.plugin; 10.16 and 11.x) -----------------------------------------
    def aot_build(self, name: str, namespace: str, spec: str, request: int = STRICT_AOT) -> tuple[int | None, Report]:
        self.lib.host_aot_build(name.encode(), b"1", namespace.encode(), spec.encode(), request)
        return self._run()

    def aot_evaluate(self, engine: int, sizes: dict[str, int]) -> Report:
        return Report(json.loads(self.lib.host_aot_evaluate(engine, self._sizes(sizes))))

    def aot_kernel(self, engine: int) -> tuple[str, bytes]:
        size = ctypes.c_int32()
        data = self.lib.host_aot_kernel(engine, ctypes.byref(size))
        return self.lib.host_aot_kernel_name(engine).decode(), ctypes.string_at(data, size.value)

    def aot_launch(self, engine: int, sizes: dict[str, int], inputs: list[int], outputs: list[int], stream: int
                   ) -> Report:
        self.lib.host_aot_launch(engine, self._sizes(sizes), self._pointers(inputs), len(inputs),
                                 self._pointers(outputs), len(outputs), stream)
        return self._run()[1]
