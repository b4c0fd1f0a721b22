"""The overwrite AOT plugin (aliased_io::overwrite_rows, plugin/overwrite_op.py OVERWRITE_ROWS's one step) through
TensorRT's C++ interface, in the plugin host (tests/plugin_host: libnvinfer's stand-in that drives a plugin as
TensorRT's builder does): createPlugin(kSTRICT_AOT) through the quick creator, then every AOT build call in
TensorRT's order, the kernel and PTX getKernel returns, the aliasing, and getLaunchParams' symbolic grid and extra
arguments evaluated for concrete sizes against the step's Launch evaluated on ints. Skipped where this `tensorrt`
is no plugin host layout (tests/plugin_host/build.py DIR)."""

import pytest

from plugin.kernels.aot import compile_overwrite_ptx
from plugin.overwrite_op import OVERWRITE_ROWS, STEP
from tests.plugin.test_plugin_host import (  # noqa: F401 (fixtures)
    AOT_BUILD_CALLS,
    AOT_SIZES,
    aot,
    aot_build,
    aot_spec,
    assert_evaluated_launch,
    churn,
    host,
)

pytestmark = pytest.mark.trt_bindings


def overwrite_variant(dtype_name):
    return OVERWRITE_ROWS, OVERWRITE_ROWS.chains[0], STEP, {"state": dtype_name, "src": dtype_name, "index": "int64"}


@pytest.mark.parametrize("num_features", [1, 64])
@pytest.mark.parametrize("dtype_name", ["float32", "float16"])
def test_overwrite_build_phase_gives_the_kernel_and_its_launch(trt, host, aot, dtype_name, num_features):
    _, chain, _, dtypes = variant = overwrite_variant(dtype_name)
    kernel, engine, report = aot_build(host, trt, variant, num_features)
    try:
        assert report.ok, report
        assert report.calls == AOT_BUILD_CALLS, report
        assert report.step("getAliasedInput")["aliases"] == [0]
        name, ptx = host.aot_kernel(engine)
        assert name == kernel.name and ptx.rstrip(b"\0") == compile_overwrite_ptx(_target_arch())
        for num_nodes, num_edges, _ in AOT_SIZES:
            assert_evaluated_launch(host, engine, chain, kernel, dtypes, num_nodes, num_edges, num_features)
    finally:
        host.free(engine)


def _target_arch():
    from plugin.kernels.aot import aot_target_arch

    return aot_target_arch()


def test_overwrite_rows_refusing_an_int32_index_fails_the_build(trt, host, aot):
    spec = aot_spec(host, trt, overwrite_variant("float32"), dtypes={"index": "int32"})
    engine, report = host.aot_build("overwrite_rows", OVERWRITE_ROWS.namespace, spec)
    host.free(engine)
    assert not report.ok and "aliased_io::overwrite_rows: index must be a 1-D int64 tensor" in str(report), report
