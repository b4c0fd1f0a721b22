"""Every example kernel's PTX, for every dtype combination its step takes, has exactly the parameters TensorRT
launches an AOT plugin's kernel with (input pointers, int32 extra arguments, output pointers), as
tests/kernels/test_aot_family.py and tests/plugin/test_overwrite_op.py check the project's own. Triton's PTX for sm_90 is made here on the
CPU (triton 3.9 appends two scratch pointers, which inplace.ptx removes: checked); CUDA C through NVRTC."""

import importlib

import pytest

from inplace.checks import InplaceOpError, step_kernels
from inplace.ptx import check_entry_parameters, drop_scratch_parameters, entry_parameters
from tests.support.own_ops import EXAMPLES, need_triton


def kernels_of(name):
    op = EXAMPLES[name].op
    return [(step, dtypes, kernel) for chain in op.chains for step in chain.steps
            for dtypes, kernel in step_kernels(op, chain, step)]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_kernel_takes_what_tensorrt_passes(name):
    need_triton(EXAMPLES[name])
    found = kernels_of(name)
    assert found
    for step, dtypes, kernel in found:
        ptx = kernel.source.ptx(kernel.name, dtypes)
        kinds = [kind for kind, _ in entry_parameters(ptx, kernel.name)]
        assert kinds == ["ptr"] * len(step.inputs) + ["i32"] * len(kernel.launch.extra_args) + \
            ["ptr"] * len(step.outputs), (dtypes, kinds)
        check_entry_parameters(ptx, kernel.name, len(step.inputs), len(kernel.launch.extra_args), len(step.outputs))


@pytest.mark.parametrize("name", [name for name in sorted(EXAMPLES) if EXAMPLES[name].triton])
def test_triton_ptx_is_for_sm_90_with_an_isa_cuda_12_drivers_load(name):
    need_triton(EXAMPLES[name])
    step, dtypes, kernel = kernels_of(name)[0]
    text = kernel.source.ptx(kernel.name, dtypes).decode()
    assert ".target sm_90a" in text and ".version 8.0" in text
    assert kernel.launch.block == (kernel.source.num_warps * 32, 1, 1)
    assert f".reqntid {kernel.launch.block[0]}" in text


PTX = """.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0,
\t.param .u32 k_param_1,
\t.param .u64 .ptr .global .align 1 k_param_2,
\t.param .u64 .ptr .global .align 1 k_param_3,
\t.param .u64 .ptr .global .align 1 k_param_4
)
{
\tld.param.b64 %rd1, [k_param_0];
\tld.param.b64 %rd2, [k_param_2];
}
"""


def test_triton_scratch_parameters_are_dropped_where_unused():
    kept = drop_scratch_parameters(PTX.encode(), "k", 3)
    assert entry_parameters(kept, "k") == [("ptr", "k_param_0"), ("i32", "k_param_1"), ("ptr", "k_param_2")]
    assert kept.split(b")", 1)[1] == PTX.encode().split(b")", 1)[1]  # the body as it was


def test_a_kernel_reading_its_scratch_parameter_is_refused_in_one_line():
    used = PTX.replace("[k_param_2];", "[k_param_2];\n\tld.param.b64 %rd3, [k_param_4];")
    with pytest.raises(InplaceOpError, match=r"^Triton kernel k reads its appended parameter k_param_4 \(scratch"):
        drop_scratch_parameters(used.encode(), "k", 3)


def test_parameters_out_of_tensorrts_order_are_refused_in_one_line():
    with pytest.raises(InplaceOpError, match=r"kernel k takes \(ptr, i32, ptr, ptr, ptr\); TensorRT launches it with "
                                             r"\(ptr, ptr, i32, ptr\)"):
        check_entry_parameters(PTX, "k", 2, 1, 1)
    with pytest.raises(InplaceOpError, match="no entry of that name"):
        entry_parameters(PTX, "other")


def test_triton_missing_is_one_line_with_the_install_line(monkeypatch):
    import builtins

    from inplace import ptx

    real_import = builtins.__import__

    def no_triton(name, *args, **kwargs):
        if name == "triton" or name.startswith("triton."):
            raise ImportError("No module named 'triton'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_triton)
    with pytest.raises(InplaceOpError, match=r"triton is not installed .*requirements-triton.txt"):
        ptx.import_triton()
    assert importlib.import_module("inplace.ptx") is ptx
