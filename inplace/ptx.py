"""Where an in-place op's kernel PTX comes from, and the check that its parameter list is what TensorRT launches.

    CudaSource(path)                 CUDA C with extern "C" entry points, compiled to PTX by NVRTC (compute_75,
                                     PTX ISA 8.0 declared: any driver TensorRT 10.16/11.x runs on loads it)
    TritonSource(fn, pointers, ...)  a @triton.jit function compiled with triton.compile for sm_<arch> (no GPU
                                     needed; triton is optional: requirements-triton.txt)
    entry_parameters(ptx, name)      the .entry's parameter kinds ("ptr", "i32", ...), in order
    check_entry_parameters(...)      InplaceOpError (one line) unless they are (input pointers, int32 extra
                                     arguments, output pointers), the order TensorRT passes an AOT plugin's

triton appends two pointer parameters to every kernel (global scratch and profile scratch memory), which
TensorRT's AOT launch does not pass. Where the kernel uses neither (Triton reports 0 bytes of each and the PTX
body never reads them) TritonSource removes them from the .entry's parameter list; a kernel that needs either is
refused in one line. Both sources compile each (kernel, dtypes) once per process.
"""

import functools
import importlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inplace.checks import InplaceOpError

TRITON_ARCH_VARIABLE = "ALIASED_IO_TRITON_ARCH"  # the architecture Triton compiles for (default 90: sm_90a)
TRITON_PTX_VERSION = 80  # PTX ISA 8.0, the oldest that has sm_90a
TRITON_TYPES = {"float32": "fp32", "float16": "fp16", "int32": "i32", "int64": "i64"}
TRITON_INSTALL = "pip install -r requirements-triton.txt (triton==3.9.0)"

_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\((.*?)\)", re.DOTALL)
_PARAMETER = re.compile(r"\.param\s+\.(\w+)(.*?)\s(\w+)\s*$")


def entry_parameters(ptx: bytes | str, name: str) -> list[tuple[str, str]]:
    """[(kind, parameter name)] of entry `name` in order; kind "ptr" for a 64-bit parameter (a pointer), "i32"
    for a 32-bit integer, else the PTX type. InplaceOpError if the PTX has no such entry."""
    text = ptx.decode(errors="replace") if isinstance(ptx, bytes) else ptx
    for entry, parameters in _ENTRY.findall(text):
        if entry != name:
            continue
        found = []
        for line in parameters.split(","):
            match = _PARAMETER.search(line.strip())
            if match is None:
                continue
            kind = {"u64": "ptr", "b64": "ptr", "u32": "i32", "s32": "i32", "b32": "i32"}.get(match.group(1),
                                                                                          match.group(1))
            found.append((kind, match.group(3)))
        return found
    raise InplaceOpError(f"kernel {name}: the PTX has no entry of that name (entries: "
                         f"{', '.join(entry for entry, _ in _ENTRY.findall(text)) or 'none'})")


def check_entry_parameters(ptx: bytes | str, name: str, inputs: int, extra_args: int, outputs: int) -> None:
    """InplaceOpError (one line) unless kernel `name`'s parameters are `inputs` pointers, `extra_args` int32 and
    `outputs` pointers: what TensorRT passes an AOT plugin's kernel, in that order."""
    kinds = [kind for kind, _ in entry_parameters(ptx, name)]
    wanted = ["ptr"] * inputs + ["i32"] * extra_args + ["ptr"] * outputs
    if kinds != wanted:
        raise InplaceOpError(f"kernel {name} takes ({', '.join(kinds)}); TensorRT launches it with ({', '.join(wanted)})"
                             f": {inputs} input pointers, {extra_args} int32 extra arguments, {outputs} output pointers")


@dataclass(frozen=True)
class CudaSource:
    """CUDA C in a file: each entry point extern "C", its parameters (input pointers, int arguments, output
    pointers). `defines` go to NVRTC as -DNAME=VALUE."""

    path: Path
    defines: tuple[str, ...] = ()

    def ptx(self, kernel: str, dtypes: Mapping[str, str]) -> bytes:
        return _cuda_ptx(Path(self.path).resolve(), self.defines)


@functools.cache
def _cuda_ptx(path: Path, defines: tuple[str, ...]) -> bytes:
    from common.nvrtc import compile_engine_ptx

    return compile_engine_ptx(path, defines)


def triton_arch() -> int:
    """The architecture Triton compiles for: $ALIASED_IO_TRITON_ARCH (e.g. 80, 90, 100), else 90."""
    value = os.environ.get(TRITON_ARCH_VARIABLE, "90")
    if not value.isdigit():
        raise InplaceOpError(f"{TRITON_ARCH_VARIABLE}={value!r}: give a compute capability such as 90")
    return int(value)


@dataclass(frozen=True, eq=False)
class TritonSource:
    """A @triton.jit function. `pointers` maps each pointer parameter to the tensor it points to (its dtype is
    that tensor's); `constexprs` gives its tl.constexpr parameters; every other parameter is an int32 extra
    argument. The PTX entry is the function's name; its block is num_warps * 32 threads and its dynamic shared
    memory Triton's (inplace.aot launches it with at least that)."""

    fn: Any  # the @triton.jit function, or "module:name" (imported when first compiled: triton stays optional)
    pointers: Mapping[str, str]
    constexprs: Mapping[str, int] = field(default_factory=dict)
    num_warps: int = 4

    @property
    def name(self) -> str:
        if isinstance(self.fn, str):
            return self.fn.rpartition(":")[2]
        return str(getattr(self.fn, "__name__", getattr(getattr(self.fn, "fn", None), "__name__", "")))

    def function(self) -> Any:
        """The @triton.jit function (imported from "module:name" the first time)."""
        if not isinstance(self.fn, str):
            return self.fn
        import_triton()
        module, _, name = self.fn.partition(":")
        return getattr(importlib.import_module(module), name)

    @property
    def block(self) -> tuple[int, int, int]:
        return (self.num_warps * 32, 1, 1)

    def signature(self, dtypes: Mapping[str, str]) -> dict[str, str]:
        """triton's signature of the function for these tensor dtypes."""
        signature = {}
        for parameter in self.function().arg_names:
            if parameter in self.constexprs:
                signature[parameter] = "constexpr"
            elif parameter in self.pointers:
                signature[parameter] = "*" + TRITON_TYPES[dtypes[self.pointers[parameter]]]
            else:
                signature[parameter] = "i32"
        return signature

    def compiled(self, dtypes: Mapping[str, str]) -> "TritonKernel":
        key = tuple(sorted((tensor, dtypes[tensor]) for tensor in self.pointers.values()))
        return _triton_compile(self, key, triton_arch())

    def ptx(self, kernel: str, dtypes: Mapping[str, str]) -> bytes:
        compiled = self.compiled(dtypes)
        if kernel != compiled.name:
            raise InplaceOpError(f"kernel {kernel}: the Triton function is named {compiled.name}; name the Kernel so")
        return compiled.ptx

    def shared_bytes(self, dtypes: Mapping[str, str]) -> int:
        return self.compiled(dtypes).shared


@dataclass(frozen=True)
class TritonKernel:
    name: str
    ptx: bytes
    shared: int
    num_warps: int


def import_triton() -> Any:
    """triton and its compiler entry points; InplaceOpError (one line with the install line) where absent."""
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError as error:
        raise InplaceOpError(f"triton is not installed ({error}); a Triton kernel compiles with it: "
                             f"{TRITON_INSTALL}") from None
    return triton, ASTSource, GPUTarget


@functools.lru_cache(maxsize=None)
def _triton_compile(source: TritonSource, key: tuple[tuple[str, str], ...], arch: int) -> TritonKernel:
    triton, ASTSource, GPUTarget = import_triton()
    dtypes = dict(key)
    function = source.function()
    ast = ASTSource(function, source.signature(dtypes), dict(source.constexprs))
    compiled = triton.compile(ast, target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": source.num_warps, "ptx_version": TRITON_PTX_VERSION,
                                       "enable_fp_fusion": True})
    metadata = compiled.metadata
    name = metadata.name
    ptx = compiled.asm["ptx"]
    ptx = ptx.encode() if isinstance(ptx, str) else ptx
    scratch = {"global": getattr(metadata, "global_scratch_size", 0) or 0,
               "profile": getattr(metadata, "profile_scratch_size", 0) or 0}
    needed = {kind: size for kind, size in scratch.items() if size}
    if needed:
        kind, size = next(iter(needed.items()))
        raise InplaceOpError(f"Triton kernel {name} needs {size} bytes of Triton's {kind} scratch memory, which "
                             "TensorRT's AOT launch does not pass; make it need none (no device-side tensor "
                             "descriptors, no spills beyond registers and shared memory)")
    return TritonKernel(name, drop_scratch_parameters(ptx, name, len(function.arg_names) - len(source.constexprs)),
                        int(metadata.shared), int(metadata.num_warps))


def drop_scratch_parameters(ptx: bytes, name: str, declared: int) -> bytes:
    """The PTX with the parameters triton appended after the function's own `declared` ones removed from entry
    `name`; InplaceOpError where the kernel body reads one of them."""
    text = ptx.decode()
    match = next((m for m in _ENTRY.finditer(text) if m.group(1) == name), None)
    if match is None:
        raise InplaceOpError(f"Triton kernel {name}: no .entry {name} in its PTX")
    parameters = [line for line in match.group(2).split(",") if line.strip()]
    appended = parameters[declared:]
    body = text[match.end():]
    for line in appended:
        parameter = line.strip().split()[-1]
        if re.search(rf"\b{re.escape(parameter)}\b", body):
            raise InplaceOpError(f"Triton kernel {name} reads its appended parameter {parameter} (scratch memory), "
                                 "which TensorRT's AOT launch does not pass")
    kept = ",".join(parameters[:declared]).rstrip()
    return (text[:match.start(2)] + kept + "\n" + text[match.end(2):]).encode()
