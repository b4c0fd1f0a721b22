"""A Step's kernel launched with cuda-python exactly as TensorRT launches an AOT plugin's: the one AOT launcher.

TensorRT loads the PTX an AOT implementation returned (cuModuleLoadData) and launches its ONE kernel with the grid,
block and dynamic shared memory of the launch parameters and the arguments (input pointers..., int32 extra arguments...,
output pointers...); an aliased output's pointer is its input's, and it makes no opt-in to more than the 48 KiB of
dynamic shared memory a launch gets without one. Here the same Launch is evaluated with ints (inplace/spec.py Expr), the
arguments are packed once as cuLaunchKernel's kernelParams, and scratch tensors are filled with memsets where the
network would fill them with layers (an unfilled one is left as it is). For tests and benchmarks: a GPU run of a
description gives the numbers an engine holding it would give, without TensorRT.

    step_arguments(step, kernel, pointers, sizes)   the argument values and their ctypes, in TensorRT's order
    pack_arguments(values, types)                   (kernelParams address, owner): packed once
    PreparedKernel(function, grid, block, shared, values, types, stream)()   one launch, its driver call alone
    PreparedChain(op, chain, dtypes, pointers, sizes, stream)()              fills, then every step's launch
    scratch_bytes(chain, sizes)                     {scratch tensor: bytes} for the caller to allocate
    check_chain_launches(chain, dtypes, sizes)      LaunchError unless every step's kernel (every tactic) launches
    LaunchError(kernel, value, wrong, sizes)        a ValueError: why a kernel could not launch, as fields and a line
"""

import ctypes
import struct
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from inplace.spec import Chain, InplaceOp, Kernel, Step

NO_OPT_IN_SHARED_BYTES = 48 * 1024  # dynamic shared memory a launch gets without cuFuncSetAttribute
INT32_MAX = 2**31 - 1
ITEMSIZE = {"float32": 4, "float16": 2, "int32": 4, "int64": 8}


class LaunchError(ValueError):
    """A kernel TensorRT could not launch at `sizes`: `kernel` (its name), `problem` (what is wrong: the value and
    what is wrong with it, without the sizes) and `sizes`, so a caller can word its own line from them. str() is
    evaluate_launch's one line: the kernel, the value, the sizes that made it (where `show_sizes`), what is wrong."""

    def __init__(self, kernel: str, value: str, wrong: str, sizes: Mapping[str, int], show_sizes: bool = True
                 ) -> None:
        self.kernel, self.problem, self.sizes = kernel, f"{value} {wrong}", dict(sizes)
        shown = f" for sizes {self.sizes}" if show_sizes else ""
        super().__init__(f"{kernel}: {value}{shown} {wrong}")


def evaluate_launch(kernel: Kernel, sizes: Mapping[str, int], dtypes: Mapping[str, str] | None = None
                    ) -> tuple[tuple[int, int, int], tuple[int, int, int], int, tuple[int, ...]]:
    """(grid, block, shared bytes, extra arguments) of `kernel` for int sizes; LaunchError where TensorRT could
    not launch it: an extra argument outside int32, a grid dimension below 1, shared memory beyond the 48 KiB
    of a launch without an opt-in. Shared memory: the launch's, or more where the source states the kernel
    needs more for these dtypes (`shared_bytes(dtypes)`: Triton decides it when it compiles), as the AOT
    registration launches it."""
    launch = kernel.launch
    grid = tuple(int(dim.evaluate(sizes)) for dim in launch.grid)
    extra = tuple(int(arg.evaluate(sizes)) for arg in launch.extra_args)
    shared = int(launch.shared_mem.evaluate(sizes))
    stated = getattr(kernel.source, "shared_bytes", None)
    if stated is not None and dtypes is not None:
        shared = max(shared, int(stated(dtypes)))
    if any(dim < 1 for dim in grid):
        raise LaunchError(kernel.name, f"grid {grid}", "has a dimension below 1", sizes)
    for value in extra:
        if not 0 <= value <= INT32_MAX:
            raise LaunchError(kernel.name, f"extra argument {value}", "is outside int32", sizes)
    if shared > NO_OPT_IN_SHARED_BYTES:
        raise LaunchError(kernel.name, f"{shared} bytes of dynamic shared memory;",
                          f"an AOT launch gets at most {NO_OPT_IN_SHARED_BYTES}", sizes, show_sizes=False)
    return (grid[0], grid[1], grid[2]), launch.block, shared, extra


def step_arguments(step: Step, kernel: Kernel, pointers: Mapping[str, int],
                   sizes: Mapping[str, int]) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    """(values, ctypes) of the kernel's parameters in TensorRT's order: the step's input pointers, the int32
    extra arguments, the output pointers; an output named like an input is that input's memory, so it gets the
    same pointer. KeyError naming a tensor without a pointer."""
    _, _, _, extra = evaluate_launch(kernel, sizes)
    values = (*(pointers[name] for name in step.inputs), *extra, *(pointers[name] for name in step.outputs))
    types = ((ctypes.c_void_p,) * len(step.inputs) + (ctypes.c_int32,) * len(extra)
             + (ctypes.c_void_p,) * len(step.outputs))
    return values, types


def pack_arguments(values: Sequence[int], types: Sequence[Any]) -> tuple[int, Any]:
    """(address, owner): the values as cuLaunchKernel's kernelParams (an array of pointers to each value, of its
    ctypes type), packed once, and the object that keeps them alive while the address may be passed."""
    slots = [kind(value) for kind, value in zip(types, values, strict=True)]
    array = (ctypes.c_void_p * max(1, len(slots)))(*(ctypes.addressof(slot) for slot in slots))
    return ctypes.addressof(array), (slots, array)


class PreparedKernel:
    """One kernel launch prepared as TensorRT prepares an AOT plugin's (grid, shared memory and arguments fixed):
    a call is the cuLaunchKernel alone, on `stream`."""

    def __init__(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int,
                 values: Sequence[int], types: Sequence[Any], stream: int, name: str = "kernel") -> None:
        from cuda.bindings import driver

        from common.cuda_check import check

        static = check(driver.cuFuncGetAttribute(
            driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function))
        if shared + int(static) > NO_OPT_IN_SHARED_BYTES:  # the launch would fail: say why
            raise ValueError(f"{name}: {shared} bytes of dynamic and {static} of static shared memory; a launch "
                             f"without an opt-in gets {NO_OPT_IN_SHARED_BYTES}")
        self.name = name
        address, self._owner = pack_arguments(values, types)
        self._launch = driver.cuLaunchKernel
        self._arguments = (function, *grid, *block, shared, driver.CUstream(int(stream)), address, 0)

    def __call__(self) -> None:
        result = self._launch(*self._arguments)
        if result[0]:
            from common.cuda_check import check

            check(result, call=f"cuLaunchKernel of {self.name}")


_modules: dict[tuple[int, bytes], Any] = {}
_modules_lock = threading.Lock()


def load_function(ptx: bytes, name: str) -> Any:
    """The CUfunction `name` of `ptx` loaded into the current context (device 0's primary context made current
    if none is) with cuModuleLoadData, as TensorRT loads an engine's PTX; each PTX is loaded once per context."""
    from cuda.bindings import driver

    from common.cuda_check import check, current_context_id

    key = (current_context_id(driver), ptx)
    with _modules_lock:
        module = _modules.get(key)
        if module is None:
            module = _modules[key] = check(driver.cuModuleLoadData(ptx if ptx.endswith(b"\0") else ptx + b"\0"))
    return check(driver.cuModuleGetFunction(module, name.encode()), call=f"cuModuleGetFunction of {name}")


def fill_words(dtype: str, fill: int | float) -> tuple[int, int]:
    """(32-bit pattern, words per element) of a scratch fill: cuMemsetD32 sets it. ValueError for a fill that no
    32-bit pattern repeats (an int64 other than 0 and -1, a float16)."""
    if dtype == "float32":
        return struct.unpack("<I", struct.pack("<f", float(fill)))[0], 1
    if dtype == "int32":
        return int(fill) & 0xFFFFFFFF, 1
    if dtype == "int64" and int(fill) in (0, -1):
        return int(fill) & 0xFFFFFFFF, 2
    raise ValueError(f"a {dtype} scratch tensor filled with {fill!r} has no 32-bit pattern")


def _elements(shape: Sequence[Any], sizes: Mapping[str, int]) -> int:
    count = 1
    for dim in shape:
        count *= int(dim.evaluate(sizes))
    return count


def scratch_bytes(chain: Chain, sizes: Mapping[str, int]) -> dict[str, int]:
    """{scratch tensor: bytes} of a chain at these sizes (what the network's fill layers and, for an unfilled one,
    TensorRT's allocation of the first step's output would make)."""
    return {scratch.name: _elements(scratch.shape, sizes) * ITEMSIZE[scratch.dtype] for scratch in chain.scratch}


def check_chain_launches(chain: Chain, dtypes: Mapping[str, str], sizes: Mapping[str, int]) -> None:
    """LaunchError (evaluate_launch's: the kernel, the value, the sizes) unless TensorRT could launch every
    step's kernel and every tactic of it at these sizes (a profile's maxima: an extra argument outside int32)."""
    for step in chain.steps:
        for kernel in (step.kernel(dtypes), *step.tactics(dtypes)):
            evaluate_launch(kernel, sizes, dtypes)


def step_kernel(step: Step, dtypes: Mapping[str, str], tactic: int = 0) -> Kernel:
    """The kernel a step runs for these dtypes: tactic 0 is step.kernel's, tactic k its k-th alternative."""
    if tactic == 0:
        return step.kernel(dtypes)
    tactics = step.tactics(dtypes)
    if not 1 <= tactic <= len(tactics):
        raise ValueError(f"{step.plugin} has tactics 0 to {len(tactics)}, not {tactic}")
    return tactics[tactic - 1]


class PreparedChain:
    """A chain of an InplaceOp run as an engine runs it: each filled scratch tensor set (a cuMemsetD32Async where the
    network has a fill layer; an unfilled one is left as it is), then each step's kernel launched as TensorRT launches
    its AOT plugin. `pointers` maps every tensor name of the chain (the op's inputs and returns and the scratch tensors,
    allocated by the caller: scratch_bytes) to a device address; `tactics` picks a step's tactic by plugin id (default
    0)."""

    def __init__(self, op: InplaceOp, chain: Chain, dtypes: Mapping[str, str], pointers: Mapping[str, int],
                 sizes: Mapping[str, int], stream: int, tactics: Mapping[str, int] | None = None) -> None:
        from cuda.bindings import driver

        on = driver.CUstream(int(stream))
        self.calls: list[Any] = []
        for scratch in chain.scratch:
            if scratch.fill is None:  # unfilled: the first step's output, which nothing sets
                continue
            words = _elements(scratch.shape, sizes)
            pattern, per_element = fill_words(scratch.dtype, scratch.fill)
            if words:
                self.calls.append(_Memset(driver, pointers[scratch.name], pattern, words * per_element, on))
        self.kernels: list[Kernel] = []
        for step in chain.steps:
            kernel = step_kernel(step, dtypes, (tactics or {}).get(step.plugin, 0))
            grid, block, shared, _ = evaluate_launch(kernel, sizes, dtypes)
            values, types = step_arguments(step, kernel, pointers, sizes)
            function = load_function(kernel.source.ptx(kernel.name, dtypes), kernel.name)
            self.calls.append(PreparedKernel(function, grid, block, shared, values, types, stream, kernel.name))
            self.kernels.append(kernel)
        self.op = op

    def __call__(self) -> None:
        for call in self.calls:
            call()


class _Memset:
    """A cuMemsetD32Async prepared once (a scratch tensor's fill)."""

    def __init__(self, driver: Any, pointer: int, pattern: int, words: int, stream: Any) -> None:
        self._call = driver.cuMemsetD32Async
        self._arguments = (driver.CUdeviceptr(int(pointer)), pattern, words, stream)

    def __call__(self) -> None:
        result = self._call(*self._arguments)
        if result[0]:
            from common.cuda_check import check

            check(result, call="cuMemsetD32Async of a scratch tensor")
