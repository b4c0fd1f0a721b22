"""What the kernel tests without a GPU share: an H200-shaped device, plans made from plain sizes, and a launcher
whose CUDA is a recorder, put in through the launcher's one seam (plugin/kernels/launch.py `backend`)."""

import ctypes

import numpy as np
import pytest

from plugin.kernels.plan import PAIR_BYTES, DeviceInfo, LaunchRequest, plan_launch

# A device description shaped like an H200 (sm_90, 132 SMs, 227 KiB opt-in shared memory per block, 50 MiB L2).
H200_LIKE = DeviceInfo(arch=90, sm_count=132, max_shared_per_block=232448, shared_per_sm=233472, l2_bytes=50 * 2**20)
ENOUGH = 2**40  # a workspace larger than any launch needs
STATE_PTR, SRC_PTR, INDEX_PTR, COUNTS_PTR = 0x7F0000000000, 0x7F1000000000, 0x7F2000000000, 0x7F3000000000
WORKSPACE_PTR = 0x7F4000000000


def plan_for(nodes, edges, features, dtype=np.float32, device=H200_LIKE, vec=1, **fields):
    """plan_launch for these sizes; fields are LaunchRequest's (workspace, with_counts, algorithm, ...)."""
    return plan_launch(LaunchRequest(nodes, edges, features, np.dtype(dtype), vec, **fields), device)


def paired_plan(nodes, edges, dtype=np.float32, device=H200_LIKE, **fields):
    """One feature with counts, and the workspace the pairs need beyond 2^24 edges."""
    return plan_for(nodes, edges, 1, dtype, device, **({"with_counts": True, "workspace": PAIR_BYTES * nodes} | fields))


class RecordingDriver:
    """cuda.bindings.driver with its launch, memset, context-id, stream-capture and graph calls replaced by
    recorders (its types stay real): each call appends (name, arguments) and returns the status queued for that
    name (`statuses`), else success. Streams in `capturing` report an active capture."""

    RECORDED = ("cuLaunchKernel", "cuLaunchCooperativeKernel", "cuMemsetD32Async", "cuCtxGetId", "cuStreamIsCapturing",
                "cuStreamCreate", "cuStreamBeginCapture", "cuStreamEndCapture", "cuGraphInstantiate", "cuGraphDestroy",
                "cuGraphExecDestroy", "cuGraphLaunch")

    def __init__(self, context_id=1):
        from cuda.bindings import driver

        self._real = driver
        self.calls, self.statuses, self.context_id = [], {}, context_id
        self.capturing, self.graphs = set(), 0
        self.graph_types = {"cuStreamCreate": driver.CUstream, "cuStreamEndCapture": driver.CUgraph,
                            "cuGraphInstantiate": driver.CUgraphExec}
        for name in self.RECORDED:
            setattr(self, name, self._recorder(name))

    def __getattr__(self, name):  # types, enums and anything not recorded: the real module's
        return getattr(self._real, name)

    def _recorder(self, name):
        def call(*arguments):
            self.calls.append((name, arguments))
            status = self.statuses.get(name, [self.CUresult.CUDA_SUCCESS])
            result = status.pop(0) if len(status) > 1 else status[0]
            if name == "cuCtxGetId":
                return (result, self.context_id)
            if name == "cuStreamIsCapturing":
                state = "ACTIVE" if int(arguments[0]) in self.capturing else "NONE"
                return (result, getattr(self.CUstreamCaptureStatus, "CU_STREAM_CAPTURE_STATUS_" + state))
            if name == "cuStreamBeginCapture":
                self.capturing.add(int(arguments[0]))
            if name == "cuStreamEndCapture":
                self.capturing.discard(int(arguments[0]))
            if name in self.graph_types:  # a new handle: streams 0xCA0.., graphs and executable graphs 0x6A0..
                self.graphs += 1
                return (result, self.graph_types[name]((0xCA0 if name == "cuStreamCreate" else 0x6A0) + self.graphs))
            return (result,)

        return call

    def names(self):
        return [name for name, _ in self.calls]


def fake_backend(driver, device=H200_LIKE, cooperative=True):
    """A launch.Backend over `driver` whose kernels are 'loaded' (fake function handles) in its context."""
    from plugin.kernels import launch

    names = launch.KERNEL_NAMES + launch.COOPERATIVE_KERNEL_NAMES
    functions = {name: driver.CUfunction(0x1000 + i) for i, name in enumerate(names)}
    kernels = launch.LoadedKernels(None, functions, device, cooperative)

    class FakeBackend(launch.Backend):
        def context_id(self):
            self.fast_id = driver.cuCtxGetId
            return driver.context_id

        def kernels(self, dtype):
            return kernels

    return FakeBackend(driver)


@pytest.fixture
def recorded(monkeypatch):
    """A launcher whose kernels are 'loaded' (H200_LIKE, cooperative groups) in context 1 and whose driver
    calls are recorded, graph replay off (the graph tests turn it on): (RecordingDriver, launch module)."""
    from plugin.kernels import launch

    driver = RecordingDriver()
    monkeypatch.setattr(launch, "backend", fake_backend(driver))
    monkeypatch.setattr(launch.PreparedScatterAdd, "graph_replay", False)
    return driver, launch


def argument_slots(parameters, count):
    """The first `count` arguments a recorded kernelParams address points at, each read as its 8-byte slot."""
    return [ctypes.c_uint64.from_address(ctypes.c_void_p.from_address(parameters + 8 * i).value).value
            for i in range(count)]


def kernel_name(launch, call):
    """The kernel name of a recorded cuLaunchKernel / cuLaunchCooperativeKernel call."""
    functions = launch.prepare_kernels(np.float32).functions
    return next(name for name, function in functions.items() if int(function) == int(call[1][0]))
