"""What network/ returns from an engine run, made up for CLI tests that stand in for TensorRT (no engine runs)."""

import numpy as np

from common.plugin_kind import PluginKind
from network.definition import STATE_UPDATE
from network.engine import EngineOrigin, EngineSignature, ProfileBounds, SizeRange
from network.steps import StepsResult, StepsRun


def steps_result(final_state: np.ndarray, engine_data: bytes | None = None) -> StepsResult:
    """network.steps.run_steps' result for a final state, as if a new Python-plugin engine had run two steps."""
    nodes, features = np.shape(final_state)
    signature = EngineSignature("fp32", features, 0, ProfileBounds(SizeRange(1, nodes, nodes), SizeRange(1, 5, 5)),
                                STATE_UPDATE)
    run = StepsRun(final_state=np.asarray(final_state, np.float32), step_ms=[0.01, 0.01], aliases=None,
                   first_step_changed_state=True, warmup_executions=2, host_ms=[0.005, 0.005])
    return StepsResult(final_state=np.asarray(final_state, np.float64), run=run,
                       origin=EngineOrigin(signature, 0.5, tensorrt_version="10.16.1.11"), plugin=PluginKind.PYTHON,
                       engine_data=engine_data)
