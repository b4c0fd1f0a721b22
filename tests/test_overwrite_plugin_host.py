"""The overwrite AOT plugins through TensorRT's C++ interface, in the plugin host (tests/plugin_host: libnvinfer's
stand-in that drives a plugin as TensorRT's builder does): createPlugin(kSTRICT_AOT) through the quick creator,
then every AOT build call in TensorRT's order, the kernel and PTX getKernel returns, the aliasing, and
getLaunchParams' symbolic grid and extra arguments evaluated for concrete sizes against plugin.kernels.aot's own
function of ints. Skipped where this `tensorrt` is no plugin host layout (tests/plugin_host/build.py DIR)."""

import pytest

from plugin.kernels.overwrite import OVERWRITE_KERNELS, compile_overwrite_ptx, overwrite_capacity
from tests.test_plugin_host import (  # noqa: F401 (fixtures)
    AOT_BUILD_CALLS,
    AOT_PROFILE,
    AOT_SIZES,
    aot,
    assert_evaluated_launch,
    churn,
    host,
)

pytestmark = pytest.mark.trt_bindings
VARIANTS = [("overwrite_claim", "float32"), ("overwrite_rows", "float32"), ("overwrite_rows", "float16")]


def overwrite_spec(host, trt, kernel, dtype_name, num_features):
    shapes = {"state": ["N", num_features], "src": ["E", num_features], "index": ["E"], "keys": ["C"],
              "winners": ["C"]}
    dtype = getattr(trt, dtype_name)
    types = {"state": dtype, "src": dtype, "index": trt.int64, "keys": trt.int64, "winners": trt.int64}
    return host.spec([(types[name], shapes[name]) for name in kernel.inputs], AOT_PROFILE)


def overwrite_build(host, trt, aot, plugin, dtype_name, num_features):
    kernel = OVERWRITE_KERNELS[aot.OVERWRITE_PLUGIN_KERNELS[f"{aot.NAMESPACE}::{plugin}"][dtype_name]]
    with host.hook(churn):
        engine, report = host.aot_build(plugin, aot.NAMESPACE, overwrite_spec(host, trt, kernel, dtype_name,
                                                                              num_features))
    return kernel, engine, report


@pytest.mark.parametrize("num_features", [1, 64])
@pytest.mark.parametrize("plugin, dtype_name", VARIANTS)
def test_overwrite_build_phase_gives_the_kernel_and_its_launch(trt, host, aot, plugin, dtype_name, num_features):
    kernel, engine, report = overwrite_build(host, trt, aot, plugin, dtype_name, num_features)
    try:
        assert report.ok, report
        assert report.calls == AOT_BUILD_CALLS, report
        assert report.step("getAliasedInput")["aliases"] == [kernel.inputs.index(name) for name in kernel.outputs]
        assert report.step("getAliasedInput")["aliases"] == ([1, 2] if plugin == "overwrite_claim" else [0])
        name, ptx = host.aot_kernel(engine)
        assert name == kernel.name and ptx == compile_overwrite_ptx()
        for num_nodes, num_edges, _ in AOT_SIZES:
            assert_evaluated_launch(host, engine, kernel, {"num_nodes": num_nodes, "num_edges": num_edges,
                                                           "num_features": num_features,
                                                           "capacity": overwrite_capacity(num_edges)})
    finally:
        host.free(engine)


def test_overwrite_rows_refusing_an_int32_table_fails_the_build(trt, host, aot):
    kernel = OVERWRITE_KERNELS["overwrite_rows_f32"]
    spec = host.spec([(trt.float32, ["N", 3]), (trt.float32, ["E", 3]), (trt.int64, ["E"]), (trt.int32, ["C"]),
                      (trt.int64, ["C"])], AOT_PROFILE)
    engine, report = host.aot_build("overwrite_rows", aot.NAMESPACE, spec)
    host.free(engine)
    assert not report.ok and "keys must be a 1-D DataType.INT64 tensor" in str(report), report
    assert kernel.inputs[3] == "keys"
