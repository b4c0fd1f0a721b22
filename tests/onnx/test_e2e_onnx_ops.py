"""End to end on the full TensorRT with a GPU: a model that calls torch.ops.aliased_io.scatter_add_ (export/ops.py),
exported in this session with export.ops.custom_translation_table, parsed by TensorRT's ONNX parser into the
Python plugin (no rewrite: the exporter wrote the plugin node), built, and run for a few steps with fresh src and
idx each, X_out bound at X's address: X's own buffer must hold what eager torch's in-place op gives, and the
other outputs what eager torch returns. Skipped (with the reason) where TensorRT, a GPU or the ONNX packages are
missing: `python3 -m pytest -m tensorrt tests/onnx/test_e2e_onnx_ops.py` on such a machine.
"""

import numpy as np
import pytest

from tests.support.onnx_helpers import NUM_FEATURES, OPS_MODELS, needs_export, ops_inputs, ops_model, ops_module

pytestmark = [pytest.mark.tensorrt, needs_export]

NODES, EDGES, STEPS = 300, 1200, 3


def eager_steps(name: str, feeds: dict[str, np.ndarray], batches: list[dict[str, np.ndarray]]) -> list[dict]:
    """The eager module, in float32, run once per batch on one X updated in place: after each step X and the
    outputs (float64 copies), the reference for the engine's results at the model's precision."""
    import torch

    module = ops_module(name)
    state = torch.from_numpy(feeds["X"].astype(np.float32))
    results = []
    with torch.no_grad():
        for batch in batches:
            arguments = {**feeds, **batch}
            returned = module(state, *(torch.from_numpy(arguments[input_name].astype(np.float32)
                                                        if arguments[input_name].dtype != np.int64
                                                        else arguments[input_name])
                                       for input_name in OPS_MODELS[name][0][1:]))
            returned = returned if isinstance(returned, tuple) else (returned,)
            assert returned[0] is state
            results.append({output: value.numpy().astype(np.float64) for output, value in
                            zip(OPS_MODELS[name][1], returned)})
    return results


@pytest.mark.parametrize("name, precision", [("state", "fp32"), ("state", "fp16"), ("layers", "fp32")])
def test_the_engine_of_the_exported_custom_op_updates_x_in_place_like_eager_torch(tmp_path_factory, name, precision):
    from common.plugin_kind import PluginKind
    from network.onnx_parse import OnnxSource, populate_from_onnx
    from network.engine import build_engine_bytes, deserialize_engine, require_engine_dependencies
    from network.execution import ExecutionSession
    from plugin.device_array import DeviceArray
    from reference.compare import compare

    trt = require_engine_dependencies(PluginKind.PYTHON, onnx=True)
    path = ops_model(tmp_path_factory, name, precision)
    source = OnnxSource(path.read_bytes(), str(path), PluginKind.PYTHON)
    profile = {"X": ((1, NUM_FEATURES), (NODES, NUM_FEATURES), (2 * NODES, NUM_FEATURES)),
               "src": ((1, NUM_FEATURES), (EDGES, NUM_FEATURES), (2 * EDGES, NUM_FEATURES)),
               "idx": ((1,), (EDGES,), (2 * EDGES,))}
    data, _ = build_engine_bytes(lambda trt, network: populate_from_onnx(trt, network, source), profile)
    engine = deserialize_engine(data, str(path), just_built=True)

    feeds = ops_inputs(name, precision, NODES, EDGES, seed=11)
    batches = [{input_name: ops_inputs(name, precision, NODES, EDGES, seed=12 + step)[input_name]
                for input_name in ("src", "idx")} for step in range(STEPS)]
    expected = eager_steps(name, feeds, batches)
    buffers = {input_name: DeviceArray.from_array(feeds[input_name]) for input_name in OPS_MODELS[name][0]}
    session = None
    try:
        session = ExecutionSession(trt, engine, buffers, outputs_at_inputs={"X_out": "X"})
        for step, batch in enumerate(batches):
            for input_name, array in batch.items():
                buffers[input_name].upload(array)
            session.execute()
            session.synchronize()
            state = buffers["X"].download()
            comparison = compare(state, expected[step]["X_out"], precision)
            assert comparison.ok, f"step {step}, X in place: {comparison.summary()}"
            for output in OPS_MODELS[name][1][1:]:
                comparison = compare(session.outputs[output].download(), expected[step][output], precision)
                assert comparison.ok, f"step {step}, {output}: {comparison.summary()}"
        assert not np.allclose(state.astype(np.float64), feeds["X"].astype(np.float64))
    finally:
        if session is not None:
            session.close()
        for buffer in buffers.values():
            buffer.free()
