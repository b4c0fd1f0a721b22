"""gpu_timing.captured, which bench_aot.py captures with, without a GPU: it runs each call once outside its
capture, captures on the current stream (the driver API's way or torch's), replays by index and frees the graphs."""

from contextlib import contextmanager

import pytest


class Recorder:
    """What the fakes saw, in order; `capturing` names the capture under way (None outside one)."""

    def __init__(self):
        self.events = []
        self.capturing = None
        self.stream = None

    def call(self, name):
        def run():
            self.events.append(("run", name, self.capturing))
        return run


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda's current stream, CUDAGraph and graph, and plugin.cuda_graph.CapturedGraph replaced by fakes that
    record what captured() does with them."""
    torch = pytest.importorskip("torch")
    import plugin.cuda_graph

    recorder = Recorder()

    class Stream:
        cuda_stream = 0x51

    class FakeCapturedGraph:  # the driver-API way
        def __init__(self, stream, enqueue):
            recorder.events.append(("begin driver capture", stream))
            recorder.capturing = "driver"
            enqueue()
            recorder.capturing = None

        def launch(self):
            recorder.events.append(("launch", self))

        def close(self):
            recorder.events.append(("close", self))

    class FakeTorchGraph:
        def replay(self):
            recorder.events.append(("replay", self))

        def reset(self):
            recorder.events.append(("reset", self))

    @contextmanager
    def graph(torch_graph, stream=None):
        recorder.events.append(("begin torch capture", stream.cuda_stream))
        recorder.capturing = "torch"
        yield
        recorder.capturing = None

    recorder.stream = Stream()
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: recorder.stream)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeTorchGraph)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    monkeypatch.setattr(plugin.cuda_graph, "CapturedGraph", FakeCapturedGraph)
    return recorder


@pytest.mark.parametrize("torch_ops", [False, True])
def test_captured_runs_each_call_once_outside_its_capture_replays_by_index_and_frees_the_graphs(fake_cuda,
                                                                                               torch_ops):
    from benchmarks.gpu_timing import captured

    kind = "torch" if torch_ops else "driver"
    with captured([fake_cuda.call(0), fake_cuda.call(1)], torch_ops=torch_ops) as replay:
        begin = ("begin torch capture" if torch_ops else "begin driver capture", 0x51)
        assert fake_cuda.events == [("run", 0, None), begin, ("run", 0, kind), ("run", 1, None), begin,
                                    ("run", 1, kind)]
        del fake_cuda.events[:]
        replay(1)
        replay(0)
        graphs = [event[1] for event in fake_cuda.events]
        assert [event[0] for event in fake_cuda.events] == ["replay" if torch_ops else "launch"] * 2
        assert graphs[0] is not graphs[1]
        del fake_cuda.events[:]
    assert fake_cuda.events == [("reset" if torch_ops else "close", graph) for graph in reversed(graphs)]


def test_captured_refuses_the_legacy_default_stream(fake_cuda):
    from benchmarks.gpu_timing import captured

    fake_cuda.stream.cuda_stream = 0
    with pytest.raises(ValueError, match="created stream"), captured([fake_cuda.call(0)]):
        pass
    assert fake_cuda.events == []
