"""scatter_add_aot.cu's kernel signatures against plugin.kernels.aot.AOT_KERNELS, by name: TensorRT passes an
AOT plugin's kernel (input pointers..., extra int32 arguments..., output pointers...) in AOT_KERNELS's order,
so each parameter's name (an aliased input ends in _in, its output in _out) must be the one AOT_KERNELS puts
there. The PTX test (test_aot_plugin.py) compares the parameter types only, which two int32 sizes in the wrong
order pass. Reads the source; no NVRTC, no GPU."""

import re

import pytest

from plugin.kernels.aot import AOT_KERNELS, AOT_SOURCE_PATH, SIZE_NAMES

KERNEL_SIGNATURE = re.compile(r'extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\(([^)]*)\)', re.DOTALL)


def kernel_parameters() -> dict[str, list[tuple[str, str]]]:
    """{kernel name: [(type, name), ...]} of every extern "C" kernel in scatter_add_aot.cu."""
    source = re.sub(r"//[^\n]*", "", AOT_SOURCE_PATH.read_text())
    kernels = {}
    for name, parameters in KERNEL_SIGNATURE.findall(source):
        pairs = [re.fullmatch(r"(.+?)\s*(\w+)", parameter.strip()).groups() for parameter in parameters.split(",")]
        kernels[name] = [(kind.strip(), parameter) for kind, parameter in pairs]
    return kernels


def test_every_aot_kernel_is_described_and_every_description_has_a_kernel():
    assert sorted(kernel_parameters()) == sorted(AOT_KERNELS)


@pytest.mark.parametrize("name", sorted(AOT_KERNELS))
def test_aot_kernel_parameter_names_follow_aot_kernels_order(name):
    kernel = AOT_KERNELS[name]
    parameters = kernel_parameters()[name]
    inputs = len(kernel.inputs)
    extras = len(kernel.extra_args)
    tensor_inputs, extra_args, outputs = (parameters[:inputs], parameters[inputs:inputs + extras],
                                          parameters[inputs + extras:])
    assert [re.sub(r"_in$", "", p) for _, p in tensor_inputs] == list(kernel.inputs)
    assert [p for _, p in extra_args] == list(kernel.extra_args) and set(kernel.extra_args) <= set(SIZE_NAMES)
    assert [re.sub(r"_out$", "", p) for _, p in outputs] == list(kernel.outputs)
    assert all(kind.endswith("*") for kind, _ in tensor_inputs + outputs)
    assert all(kind == "int" for kind, _ in extra_args)  # int32 on every platform CUDA supports
    aliased = [p for _, p in tensor_inputs if p.endswith("_in")]
    assert [p[:-3] for p in aliased] == list(kernel.outputs)  # each output aliases the input of its name
