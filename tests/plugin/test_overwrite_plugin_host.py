"""The overwrite AOT plugin through TensorRT's C++ interface, in the plugin host (tests/plugin_host: libnvinfer's
stand-in that drives a plugin as TensorRT's builder does): createPlugin(kSTRICT_AOT) through the quick creator,
then every AOT build call in TensorRT's order, the kernel and PTX getKernel returns, the aliasing, and
getLaunchParams' symbolic grid and extra arguments evaluated for concrete sizes against plugin.kernels.aot's own
function of ints. Skipped where this `tensorrt` is no plugin host layout (tests/plugin_host/build.py DIR)."""

import pytest

from plugin.kernels.overwrite import compile_overwrite_ptx, overwrite_kernel
from tests.plugin.test_plugin_host import (  # noqa: F401 (fixtures)
    AOT_BUILD_CALLS,
    AOT_PROFILE,
    AOT_SIZES,
    aot,
    assert_evaluated_launch,
    churn,
    host,
)

pytestmark = pytest.mark.trt_bindings


def overwrite_build(host, trt, aot, dtype_name, num_features):
    kernel = overwrite_kernel(dtype_name)
    dtype = getattr(trt, dtype_name)
    spec = host.spec([(dtype, ["N", num_features]), (dtype, ["E", num_features]), (trt.int64, ["E"])], AOT_PROFILE)
    with host.hook(churn):
        engine, report = host.aot_build("overwrite_rows", aot.NAMESPACE, spec)
    return kernel, engine, report


@pytest.mark.parametrize("num_features", [1, 64])
@pytest.mark.parametrize("dtype_name", ["float32", "float16"])
def test_overwrite_build_phase_gives_the_kernel_and_its_launch(trt, host, aot, dtype_name, num_features):
    kernel, engine, report = overwrite_build(host, trt, aot, dtype_name, num_features)
    try:
        assert report.ok, report
        assert report.calls == AOT_BUILD_CALLS, report
        assert report.step("getAliasedInput")["aliases"] == [0]
        name, ptx = host.aot_kernel(engine)
        assert name == kernel.name and ptx == compile_overwrite_ptx()
        for num_nodes, num_edges, _ in AOT_SIZES:
            assert_evaluated_launch(host, engine, kernel, {"num_nodes": num_nodes, "num_edges": num_edges,
                                                           "num_features": num_features})
    finally:
        host.free(engine)


def test_overwrite_rows_refusing_an_int32_index_fails_the_build(trt, host, aot):
    spec = host.spec([(trt.float32, ["N", 3]), (trt.float32, ["E", 3]), (trt.int32, ["E"])], AOT_PROFILE)
    engine, report = host.aot_build("overwrite_rows", aot.NAMESPACE, spec)
    host.free(engine)
    assert not report.ok and "index must be a 1-D DataType.INT64 tensor" in str(report), report
