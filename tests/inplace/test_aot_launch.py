"""inplace/launch.py without a GPU: TensorRT's argument order (input pointers, int32 extra arguments, output
pointers; an aliased output gets its input's pointer), the packed kernelParams, the launch limits, scratch fills."""

import ctypes
import struct

import pytest

from inplace.launch import (LaunchError, evaluate_launch, fill_words, pack_arguments, scratch_bytes, step_arguments,
                            step_kernel)
from inplace.spec import Chain, Kernel, Launch, Scratch, Step, cdiv, expr, maximum, minimum, size


class NoPtx:
    def ptx(self, kernel: str, dtypes: object) -> bytes:
        raise AssertionError("not compiled here")


def kernel(name: str = "k", shared: object = 0, extra: tuple = (size("N"), size("E"))) -> Kernel:
    grid = (maximum(minimum(cdiv(size("E"), 256), 396), 1), expr(1), expr(1))
    return Kernel(name, NoPtx(), Launch(grid, (256, 1, 1), extra, expr(shared)))  # type: ignore[arg-type]


STEP = Step("ns::scatter", ("state", "src", "index", "counts"), ("state", "counts"), lambda dtypes: kernel(),
            tactics=lambda dtypes: (kernel("other"),))


def test_arguments_are_inputs_then_int32_extras_then_outputs_with_aliased_pointers():
    pointers = {"state": 0x1000, "src": 0x2000, "index": 0x3000, "counts": 0x4000}
    values, types = step_arguments(STEP, kernel(), pointers, {"N": 7, "E": 1000})
    assert values == (0x1000, 0x2000, 0x3000, 0x4000, 7, 1000, 0x1000, 0x4000)
    assert types == (ctypes.c_void_p,) * 4 + (ctypes.c_int32,) * 2 + (ctypes.c_void_p,) * 2


def test_packed_arguments_point_at_each_value_in_its_type():
    address, owner = pack_arguments((0xDEAD0000, 5, 0xBEEF0000), (ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p))
    array = ctypes.cast(address, ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.cast(array[0], ctypes.POINTER(ctypes.c_void_p))[0] == 0xDEAD0000
    assert ctypes.cast(array[1], ctypes.POINTER(ctypes.c_int32))[0] == 5
    assert ctypes.cast(array[2], ctypes.POINTER(ctypes.c_void_p))[0] == 0xBEEF0000


def test_launch_is_evaluated_with_ints():
    grid, block, shared, extra = evaluate_launch(kernel(shared=size("N") * 8), {"N": 3, "E": 10**6})
    assert (grid, block, shared, extra) == ((396, 1, 1), (256, 1, 1), 24, (3, 10**6))
    assert evaluate_launch(kernel(), {"N": 3, "E": 0})[0] == (1, 1, 1)


def test_what_tensorrt_cannot_launch_is_refused():
    with pytest.raises(ValueError, match="48 KiB|49152"):
        evaluate_launch(kernel(shared=49153), {"N": 1, "E": 1})
    with pytest.raises(ValueError, match="int32"):
        evaluate_launch(kernel(extra=(size("E") * 4,)), {"N": 1, "E": 2**30})
    zero_grid = Kernel("z", NoPtx(), Launch((size("E"), expr(1), expr(1)), (32, 1, 1)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="below 1"):
        evaluate_launch(zero_grid, {"E": 0})


def test_a_launch_error_carries_the_kernel_the_problem_and_the_sizes():
    with pytest.raises(LaunchError) as raised:
        evaluate_launch(kernel(extra=(size("E") * 4,)), {"N": 1, "E": 2**30})
    error = raised.value
    assert (error.kernel, error.problem, error.sizes) == ("k", f"extra argument {2**32} is outside int32",
                                                          {"N": 1, "E": 2**30})
    assert str(error) == f"k: extra argument {2**32} for sizes {{'N': 1, 'E': {2**30}}} is outside int32"


def test_tactics_pick_the_kernel():
    assert step_kernel(STEP, {}).name == "k" and step_kernel(STEP, {}, 1).name == "other"
    with pytest.raises(ValueError, match="tactics 0 to 1"):
        step_kernel(STEP, {}, 2)


def test_scratch_fills_and_sizes():
    assert fill_words("int32", -1) == (0xFFFFFFFF, 1)
    assert fill_words("float32", 1.5) == (struct.unpack("<I", struct.pack("<f", 1.5))[0], 1)
    assert fill_words("int64", 0) == (0, 2)
    with pytest.raises(ValueError, match="32-bit pattern"):
        fill_words("int64", 3)
    chain = Chain((STEP,), (Scratch("keys", "int32", (minimum(size("N"), size("E") * 4),), -1),
                            Scratch("values", "float32", (minimum(size("N"), size("E") * 4), size("F")))))
    assert scratch_bytes(chain, {"N": 10**6, "E": 10, "F": 3}) == {"keys": 160, "values": 480}


def test_a_source_that_states_more_shared_memory_gets_it():
    class Stated(NoPtx):
        def shared_bytes(self, dtypes: object) -> int:
            return 16

    stated = Kernel("t", Stated(), Launch((expr(1), expr(1), expr(1)), (32, 1, 1)))  # type: ignore[arg-type]
    assert evaluate_launch(stated, {}, {"x": "float32"})[2] == 16
    assert evaluate_launch(kernel(shared=64), {"N": 1, "E": 1}, {})[2] == 64


def test_a_prepared_chain_memsets_only_its_filled_scratch_tensors(monkeypatch):
    """counts (filled 0) is set by a cuMemsetD32Async before the launches; table (fill None, the first step's
    output) gets none: TensorRT allocates it and a kernel writes it. Recorded: no GPU."""
    import cuda.bindings

    import inplace.launch as launch
    from tests.support.kernel_fakes import RecordingDriver

    driver = RecordingDriver()
    driver.cuFuncGetAttribute = lambda attribute, function: (driver.CUresult.CUDA_SUCCESS, 0)
    monkeypatch.setattr(cuda.bindings, "driver", driver)
    monkeypatch.setattr(launch, "load_function", lambda ptx, name: driver.CUfunction(0x1000))

    class EmptyPtx:
        def ptx(self, kernel: str, dtypes: object) -> bytes:
            return b""

    one = Kernel("k", EmptyPtx(), Launch((expr(1), expr(1), expr(1)), (32, 1, 1)))  # type: ignore[arg-type]
    first = Step("ns::first", ("index", "counts"), ("counts", "table"), lambda dtypes: one)
    second = Step("ns::second", ("state", "counts", "table"), ("state", "table"), lambda dtypes: one)
    chain = Chain((first, second), (Scratch("counts", "int64", (size("N"),), 0),
                                    Scratch("table", "float32", (size("E"), expr(2)), None)))
    pointers = {"state": 0x1000, "index": 0x2000, "counts": 0x3000, "table": 0x4000}
    prepared = launch.PreparedChain(None, chain, {}, pointers, {"N": 10, "E": 7}, 0)  # type: ignore[arg-type]
    prepared()
    assert driver.names() == ["cuMemsetD32Async", "cuLaunchKernel", "cuLaunchKernel"]
    pointer, pattern, words, _ = driver.calls[0][1]
    assert (int(pointer), pattern, words) == (0x3000, 0, 20)
    assert scratch_bytes(chain, {"N": 10, "E": 7}) == {"counts": 80, "table": 56}
