"""An in-place operation described once, as TensorRT's AOT plugins run it: the description every stage is made from.

TensorRT launches ONE kernel per AOT plugin, with (input pointers..., int32 extra arguments..., output pointers...)
and grid, block and shared memory given as expressions of the inputs' shapes. An operation that needs more than
one kernel, or memory that must be filled before its kernel runs, is a chain: scratch tensors the network makes
(fill layers, or ConstantOfShape nodes in ONNX) or the first plugin creates unfilled, then one plugin per kernel,
tensors passed between them by name.

    InplaceOp      the operation: its inputs, which of them it updates in place (an output aliased to each),
                   the new tensors it returns, its named sizes, its chains and a float64 numpy reference
    Chain          scratch tensors, then steps; `InplaceOp.choose` picks one from what is known when the engine
                   is built (dtypes, constant sizes, the profile's maxima)
    Step           one AOT plugin: its kernel, the tensors it reads (by name, in parameter order), the tensors it
                   writes (an output named like one of its inputs is that input's memory), its launch; optional
                   tactics (other kernels with the same tensors) that TensorRT times when it builds
    Expr           an integer expression over the named sizes (+, *, //, cdiv, min, max): evaluated with ints
                   here and in tests, with tensorrt.plugin's symbolic sizes in an AOT implementation, and as
                   shape layers or ONNX nodes where the network makes a scratch tensor

Everything here is plain Python (no numpy, torch, onnx or TensorRT), so the description is read by the torch op
(export), the ONNX rewrite and reference, the TensorRT registration, the engine description for C++ and the tests.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

DTYPES = ("float32", "float16", "int32", "int64")


class Backend(Protocol):
    """The arithmetic an Expr is evaluated with: ints, tensorrt.plugin's symbolic sizes, shape layers, ONNX nodes."""

    def const(self, value: int) -> Any: ...
    def add(self, a: Any, b: Any) -> Any: ...
    def mul(self, a: Any, b: Any) -> Any: ...
    def floordiv(self, a: Any, b: Any) -> Any: ...
    def cdiv(self, a: Any, b: Any) -> Any: ...
    def min(self, a: Any, b: Any) -> Any: ...
    def max(self, a: Any, b: Any) -> Any: ...


class IntBackend:
    """Python ints (non-negative sizes): what a test or a launcher evaluates an Expr with."""

    def const(self, value: int) -> int:
        return value

    def add(self, a: int, b: int) -> int:
        return a + b

    def mul(self, a: int, b: int) -> int:
        return a * b

    def floordiv(self, a: int, b: int) -> int:
        return a // b

    def cdiv(self, a: int, b: int) -> int:
        return -(-a // b)

    def min(self, a: int, b: int) -> int:
        return min(a, b)

    def max(self, a: int, b: int) -> int:
        return max(a, b)


INTS = IntBackend()


@dataclass(frozen=True)
class Expr:
    """An integer expression over named sizes: a size (`op` "size", `value` its name), a constant ("const",
    `value` an int), or an operation on two expressions ("add", "mul", "floordiv", "cdiv", "min", "max").
    No subtraction and no negative constants: TensorRT's symbolic sizes are non-negative."""

    op: str
    value: Any = None
    args: tuple["Expr", ...] = ()

    def __add__(self, other: "Expr | int") -> "Expr":
        return Expr("add", args=(self, expr(other)))

    __radd__ = __add__

    def __mul__(self, other: "Expr | int") -> "Expr":
        return Expr("mul", args=(self, expr(other)))

    __rmul__ = __mul__

    def __floordiv__(self, other: "Expr | int") -> "Expr":
        return Expr("floordiv", args=(self, expr(other)))

    def sizes(self) -> set[str]:
        """The names of the sizes it reads."""
        if self.op == "size":
            return {self.value}
        return set().union(*(arg.sizes() for arg in self.args)) if self.args else set()

    def evaluate(self, sizes: Mapping[str, Any], backend: Backend = INTS) -> Any:
        """Its value for `sizes` (name -> the backend's value) with `backend`'s arithmetic; KeyError naming a
        size it reads that `sizes` lacks."""
        if self.op == "size":
            return sizes[self.value]
        if self.op == "const":
            return backend.const(self.value)
        a, b = (arg.evaluate(sizes, backend) for arg in self.args)
        return getattr(backend, self.op)(a, b)


def size(name: str) -> Expr:
    return Expr("size", name)


def expr(value: "Expr | int") -> Expr:
    """An Expr from an Expr or a non-negative int."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a size expression takes Exprs and non-negative ints, got {value!r}")
    return Expr("const", value)


def cdiv(a: "Expr | int", b: "Expr | int") -> Expr:
    return Expr("cdiv", args=(expr(a), expr(b)))


def minimum(a: "Expr | int", b: "Expr | int") -> Expr:
    return Expr("min", args=(expr(a), expr(b)))


def maximum(a: "Expr | int", b: "Expr | int") -> Expr:
    return Expr("max", args=(expr(a), expr(b)))


@dataclass(frozen=True)
class TensorInput:
    """An input of the operation: its name (the torch op's argument name), the dtypes it takes, and its rank."""

    name: str
    dtypes: tuple[str, ...]
    rank: int


@dataclass(frozen=True)
class TensorOutput:
    """A new tensor the operation returns (not an alias): its shape over the sizes and its dtype ("like:NAME"
    for an input's dtype)."""

    name: str
    dtype: str
    shape: tuple[Expr, ...]


@dataclass(frozen=True)
class Scratch:
    """A tensor of the chain that the operation neither takes nor returns (unless returned under its name).

    Filled (`fill` a number): the network makes it before the chain, every element `fill` (a fill layer, a
    ConstantOfShape node, a memset), and the steps take it as an input and alias it. Unfilled (`fill` None): no
    fill is made, since each one costs a launch and a pass over its memory on every run; the chain's first step
    creates it as an output that is not one of its inputs, TensorRT allocating it with this dtype and shape, and
    later steps take it as an input and alias it. Its content is undefined until a kernel writes it, so an
    unfilled scratch tensor suits memory that a kernel fully writes before any kernel reads it."""

    name: str
    dtype: str
    shape: tuple[Expr, ...]
    fill: int | float | None = 0


class PtxSource(Protocol):
    """Where a kernel's PTX comes from: CUDA C through NVRTC, or a @triton.jit function compiled for the target
    architecture when the engine is built (no GPU needed either way)."""

    def ptx(self, kernel: str, dtypes: Mapping[str, str]) -> bytes: ...


@dataclass(frozen=True)
class Launch:
    """How TensorRT launches a step's kernel: grid and block (x, y, z), dynamic shared memory bytes, and the int32
    extra arguments in the kernel's parameter order (between the input and the output pointers)."""

    grid: tuple[Expr, Expr, Expr]
    block: tuple[int, int, int]
    extra_args: tuple[Expr, ...] = ()
    shared_mem: Expr = field(default_factory=lambda: expr(0))


@dataclass(frozen=True)
class Kernel:
    """One entry point of a PTX source and its launch."""

    name: str
    source: PtxSource
    launch: Launch


@dataclass(frozen=True)
class Step:
    """One AOT plugin (id "<namespace>::<plugin>"): reads `inputs`, writes `outputs` (each named like one of
    `inputs` is that input's memory; any other is a TensorOutput of the operation, or an unfilled scratch tensor
    the first step creates). `kernel` maps the dtypes of
    the step's tensors to the kernel that runs (one per dtype variant); `tactics` are alternative kernels for
    the same dtypes, timed by TensorRT when it builds (tensorrt.plugin autotune; tactic 0 is `kernel`'s).
    `reference` (numpy, the step's inputs -> its outputs, an unfilled scratch tensor it creates of any content)
    lets the ONNX Runtime proof run a chain of several steps; a chain of one step is proved with the operation's
    own reference."""

    plugin: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    kernel: Callable[[Mapping[str, str]], Kernel]
    tactics: Callable[[Mapping[str, str]], tuple[Kernel, ...]] = lambda dtypes: ()
    reference: Callable[..., tuple[Any, ...]] | None = None  # numpy, inputs -> outputs; a chain of several steps

    def aliases(self) -> dict[str, str]:
        """{output: the input whose memory it is}."""
        return {name: name for name in self.outputs if name in self.inputs}


@dataclass(frozen=True)
class Chain:
    """Scratch tensors, then steps in order; a tensor name written by a step refers to its new value after it."""

    steps: tuple[Step, ...]
    scratch: tuple[Scratch, ...] = ()

    def filled(self) -> tuple[Scratch, ...]:
        """The scratch tensors the network makes and fills before the first step."""
        return tuple(scratch for scratch in self.scratch if scratch.fill is not None)

    def created(self) -> tuple[Scratch, ...]:
        """The unfilled scratch tensors: the first step's outputs, TensorRT's allocation, no fill."""
        return tuple(scratch for scratch in self.scratch if scratch.fill is None)


@dataclass(frozen=True)
class BuildFacts:
    """What is known when the engine is built: each tensor's dtype, the sizes fixed by the network (constant
    dimensions) and the profile's maxima where known. `InplaceOp.choose` decides a chain from these alone."""

    dtypes: Mapping[str, str]
    constants: Mapping[str, int] = field(default_factory=dict)
    maxima: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class InplaceOp:
    """An operation that updates some of its inputs in place and may return new tensors.

    `sizes` names dimensions of the inputs ({"N": ("state", 0)}); launch and shape expressions read those
    names. Outputs, in order: each mutated input's new value (aliased), then `returns`. `reference` is a float64
    numpy function of the inputs returning the outputs in that order (the ONNX Runtime proof's oracle).
    `chains` lists every chain an engine may hold (the registration registers all their plugins);
    `choose(facts)` picks the one for a build (default: the only chain)."""

    namespace: str
    name: str
    inputs: tuple[TensorInput, ...]
    mutates: tuple[str, ...]
    sizes: Mapping[str, tuple[str, int]]
    chains: tuple[Chain, ...]
    returns: tuple[TensorOutput, ...] = ()
    reference: Callable[..., tuple[Any, ...]] | None = None
    choose: Callable[[BuildFacts], Chain] | None = None
    version: str = "1"

    def chain_for(self, facts: BuildFacts) -> Chain:
        return self.chains[0] if self.choose is None else self.choose(facts)

    def output_names(self) -> tuple[str, ...]:
        return (*self.mutates, *(out.name for out in self.returns))
