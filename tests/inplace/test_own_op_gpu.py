"""Each example on the GPU (marked gpu): eager torch equals the float64 reference; the example's AOT kernel,
launched exactly as TensorRT launches an AOT plugin (inplace.launch: its PTX loaded with cuModuleLoadData, input
pointers, int32 extra arguments, output pointers, each aliased output's pointer its input's), over repeated runs
on one state equals torch eager; made-up indices (negative, beyond the rows) keep every kernel inside its buffers.
Run under compute-sanitizer memcheck too (docs/own_inplace_op.md has the command).

The Triton kernels' PTX is read from $OWN_OP_PTX_DIR/<kernel>-<dtypes>.ptx where that is set (a GPU machine
may lack triton, or hold another release), written on a machine with requirements-triton.txt by `python3 -m
tests.inplace.test_own_op_gpu DIR` (the same triton.compile an engine build runs); else compiled here."""

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from inplace.aot import shared_memory
from inplace.checks import step_kernels
from tests.support.own_ops import EXAMPLES, example_inputs

pytestmark = pytest.mark.gpu
PTX_DIR = "OWN_OP_PTX_DIR"
RUNS = 5
SHAPES = [(1000, 64, 17), (100_000, 2048, 64), (3, 0, 2)]  # (rows, batch, features)


def ptx_file(kernel, dtypes):
    return f"{kernel.name}-{'-'.join(f'{k}_{v}' for k, v in sorted(dtypes.items()))}.ptx"


def ptx_of(kernel, dtypes):
    folder = os.environ.get(PTX_DIR)
    if getattr(kernel.source, "fn", None) is not None:
        if folder is not None and (Path(folder) / ptx_file(kernel, dtypes)).exists():
            return (Path(folder) / ptx_file(kernel, dtypes)).read_bytes()
        if importlib.util.find_spec("triton") is None:
            pytest.skip(f"triton is not installed and ${PTX_DIR} holds no {ptx_file(kernel, dtypes)}")
    return kernel.source.ptx(kernel.name, dtypes)


@pytest.fixture(scope="module")
def torch_cuda():
    torch = pytest.importorskip("torch", reason="torch is needed for the eager op and the buffers")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA GPU")
    pytest.importorskip("inplace.launch", reason="inplace/launch.py (issue 48's AOT launcher) is not in this tree")
    return torch


def dtype_cases():
    cases = []
    for name in sorted(EXAMPLES):
        for dtype in (np.float32, np.float16):
            op = EXAMPLES[name].op
            if np.dtype(dtype).name in op.inputs[0].dtypes:
                cases.append((name, dtype))
    return cases


def tolerance(dtype):
    return {"rtol": 1e-2, "atol": 1e-2} if dtype == np.float16 else {"rtol": 1e-5, "atol": 1e-5}


def on_gpu(torch, inputs):
    return {name: torch.from_numpy(np.ascontiguousarray(value)).cuda() for name, value in inputs.items()}


def eager_call(torch, op, tensors):
    returned = getattr(getattr(torch.ops, op.namespace), op.name)(*(tensors[t.name] for t in op.inputs))
    returned = () if returned is None else returned if isinstance(returned, tuple) else (returned,)
    return [tensors[name] for name in op.mutates] + list(returned)


def aot_call(torch, op, tensors, stream):
    """Every step of the op's first chain launched as TensorRT launches its AOT plugin; returns the outputs."""
    from inplace.launch import PreparedKernel, evaluate_launch, load_function, step_arguments

    chain = op.chains[0]
    sizes = {size: int(tensors[tensor].shape[axis]) for size, (tensor, axis) in op.sizes.items()}
    dtypes_all = {name: str(value.dtype).removeprefix("torch.") for name, value in tensors.items()}
    outputs = dict(tensors)
    for out in op.returns:
        shape = [int(dim.evaluate(sizes)) for dim in out.shape]
        like = out.dtype.removeprefix("like:")
        outputs[out.name] = torch.empty(shape, dtype=getattr(torch, dtypes_all.get(like, out.dtype)), device="cuda")
    pointers = {name: value.data_ptr() for name, value in outputs.items()}
    for step in chain.steps:
        dtypes = {name: str(outputs[name].dtype).removeprefix("torch.") for name in (*step.inputs, *step.outputs)}
        kernel = step.kernel(dtypes)
        grid, block, shared, _ = evaluate_launch(kernel, sizes, dtypes)
        assert shared == shared_memory(kernel, dtypes).evaluate(sizes)  # what the engine's aot_impl launches with
        values, types = step_arguments(step, kernel, pointers, sizes)
        for name in step.outputs:  # an aliased output's pointer is its input's
            if name in step.inputs:
                assert values[len(step.inputs) + len(kernel.launch.extra_args) + step.outputs.index(name)] == \
                    values[step.inputs.index(name)]
        function = load_function(ptx_of(kernel, dtypes), kernel.name)
        PreparedKernel(function, grid, block, shared, values, types, stream, kernel.name)()
    torch.cuda.synchronize()
    return [outputs[name] for name in op.output_names()]


def fresh(name, inputs, seed, dtype):
    """The next run's inputs other than the state(s)."""
    rows = inputs["buffer" if name == "ring" else "state"].shape[0]
    batch = inputs["rows" if name != "accumulate" else "delta"].shape[0]
    features = inputs["buffer" if name == "ring" else "state"].shape[1]
    new = example_inputs(name, seed, rows=rows, batch=batch, features=features, dtype=dtype)
    states = set(EXAMPLES[name].op.mutates)
    return {key: value for key, value in new.items() if key not in states}


@pytest.mark.parametrize("rows, batch, features", SHAPES)
@pytest.mark.parametrize("name, dtype", dtype_cases())
def test_eager_on_the_gpu_equals_the_float64_reference(torch_cuda, name, dtype, rows, batch, features):
    torch = torch_cuda
    op = EXAMPLES[name].op
    inputs = example_inputs(name, 11, rows=rows, batch=min(batch, rows), features=features, dtype=dtype)
    expected = op.reference(*(inputs[t.name].copy() for t in op.inputs))
    got = eager_call(torch, op, on_gpu(torch, inputs))
    for value, want in zip(got, expected):
        np.testing.assert_allclose(value.cpu().numpy().astype(np.float64), want, **tolerance(dtype))


@pytest.mark.parametrize("rows, batch, features", SHAPES)
@pytest.mark.parametrize("name, dtype", dtype_cases())
def test_the_aot_kernel_over_repeated_runs_equals_torch_eager(torch_cuda, name, dtype, rows, batch, features):
    torch = torch_cuda
    op = EXAMPLES[name].op
    inputs = example_inputs(name, 5, rows=rows, batch=min(batch, rows), features=features, dtype=dtype)
    eager_tensors, aot_tensors = on_gpu(torch, inputs), on_gpu(torch, inputs)
    stream = torch.cuda.current_stream().cuda_stream
    for run in range(RUNS):
        if run:
            update = fresh(name, inputs, 100 + run, dtype)
            eager_tensors.update(on_gpu(torch, update))
            aot_tensors.update(on_gpu(torch, update))
        expected = eager_call(torch, op, eager_tensors)
        addresses = {name: aot_tensors[name].data_ptr() for name in op.mutates}
        got = aot_call(torch, op, aot_tensors, stream)
        assert {name: aot_tensors[name].data_ptr() for name in op.mutates} == addresses  # in place
        for value, want in zip(got, expected):
            np.testing.assert_allclose(value.float().cpu().numpy(), want.float().cpu().numpy(), **tolerance(dtype))


@pytest.mark.parametrize("name, dtype", dtype_cases())
def test_made_up_indices_keep_every_kernel_inside_its_buffers(torch_cuda, name, dtype):
    """TensorRT may time a plugin on inputs it made up: indices outside the rows (and any position) are skipped
    or wrapped, never followed (memcheck sees every access)."""
    torch = torch_cuda
    op = EXAMPLES[name].op
    inputs = example_inputs(name, 7, rows=64, batch=32, features=8, dtype=dtype)
    if "idx" in inputs:
        inputs["idx"] = np.random.default_rng(0).integers(-2**40, 2**40, size=32).astype(np.int64)
        inputs["idx"][:4] = [-1, 64, 65, 2**31]
    else:
        inputs["pos"] = np.array([-(2**62)], np.int64)
    tensors = on_gpu(torch, inputs)
    before = tensors[op.mutates[0]].clone()
    aot_call(torch, op, tensors, torch.cuda.current_stream().cuda_stream)
    if "idx" in inputs:  # every index is outside the rows: the state is unchanged
        assert torch.equal(tensors[op.mutates[0]], before)


def write_ptx(folder: str) -> None:
    """Writes every Triton example kernel's PTX (each dtype combination) into `folder` (for a GPU machine
    without triton: $OWN_OP_PTX_DIR)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    for example in EXAMPLES.values():
        op = example.op
        for chain in op.chains:
            for step in chain.steps:
                for dtypes, kernel in step_kernels(op, chain, step):
                    if getattr(kernel.source, "fn", None) is not None:
                        (Path(folder) / ptx_file(kernel, dtypes)).write_bytes(kernel.source.ptx(kernel.name, dtypes))


if __name__ == "__main__":
    write_ptx(sys.argv[1])
