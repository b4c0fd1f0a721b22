"""network.engine.deserialize_engine's two failures: a file TensorRT cannot load is bad input (exit 2, the file
named), an engine this run just built that it cannot load is TensorRT's failure (exit 4, "could not load the
engine it just built"), however polygraphy reports it. polygraphy's engine_from_bytes and the creator's
registration are stand-ins: this checks the mapping, not a deserialization."""

import pytest

import aliased_io_plugin as cli
from common.errors import EngineError, InputError

pytestmark = pytest.mark.trt_standin


@pytest.fixture
def unloadable(trt, monkeypatch):
    """engine_from_bytes fails as `request.param` says: returns None, or raises polygraphy's exception."""
    pytest.importorskip("polygraphy")
    import polygraphy.backend.trt
    from polygraphy.exception import PolygraphyException

    import plugin.scatter_add_plugin

    monkeypatch.setattr(plugin.scatter_add_plugin, "register_scatter_add_creator", lambda: None)
    how = {"fails": "returns None"}

    def engine_from_bytes(data):
        if how["fails"] == "raises":
            raise PolygraphyException("Could not deserialize engine. See log for details.\nmore lines")
        return None

    monkeypatch.setattr(polygraphy.backend.trt, "engine_from_bytes", engine_from_bytes)
    return how


@pytest.mark.parametrize("fails, reason", [("returns None", "deserialize_cuda_engine returned None"),
                                           ("raises", "Could not deserialize engine. See log for details.")])
def test_an_engine_just_built_that_tensorrt_cannot_load_is_an_engine_error(unloadable, fails, reason):
    from network.engine import deserialize_engine

    unloadable["fails"] = fails
    with pytest.raises(EngineError) as raised:
        deserialize_engine(b"engine bytes", "the engine just built", just_built=True)
    assert str(raised.value) == f"TensorRT could not load the engine it just built: {reason}; -v shows TensorRT's log"
    with pytest.raises(InputError) as raised:  # a file: bad input, its name quoted as every path is
        deserialize_engine(b"engine bytes", "saved\nengine")
    assert str(raised.value).startswith("'saved\\nengine' is not an engine this TensorRT can load (built by another")


def test_the_cli_exits_4_when_the_engine_it_just_built_does_not_load(trt, unloadable, monkeypatch, capsys):
    import network.engine
    import network.run

    monkeypatch.setattr(network.run, "require_engine_dependencies", lambda *args, **kwargs: trt)
    monkeypatch.setattr(network.engine, "build_engine_bytes", lambda *args, **kwargs: (b"engine bytes", 0.5))
    status = cli.main(["--seed", "1"])
    captured = capsys.readouterr()
    assert status == 4
    assert captured.err.splitlines() == ["aliased_io_plugin.py: error: TensorRT could not load the engine it just built: "
                                         "deserialize_cuda_engine returned None; -v shows TensorRT's log"]
    assert "Classifier output" not in captured.out
