"""The registrations of in-place ops (inplace.registry.register fills it): what the torch side (inplace.torch_op)
and every other stage read, kept apart from the registry's functions so that neither imports the other back."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from inplace.checks import InplaceOpError, op_id
from inplace.spec import InplaceOp

MODULES_KEY = "aliased_io.inplace_modules"


@dataclass(frozen=True)
class CustomNode:
    """The ONNX node the export writes for a call: its op_type (default: the op's name) and fixed attributes (an
    existing plugin's node format, e.g. the project's ScatterAddInPlace); its domain is the op's namespace."""

    op_type: str
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Registered:
    """A registered op: its eager implementation, the module that registers it, the custom node its export writes,
    its functional form's name and an op-specific call check (check(values, eager): one-line errors of its own,
    `eager` False where the tensors are fake and hold no values). `chains_only`: registered for its chains alone
    (inplace.registry.register_chains): its steps are found, its custom node is none of the facility's."""

    op: InplaceOp
    eager: Callable[..., Any] | None
    module: str
    node: CustomNode
    functional: str
    check: Callable[[Mapping[str, Any], bool], None] | None = None
    chains_only: bool = False


OPS: dict[str, Registered] = {}


def registered() -> list[Registered]:
    return list(OPS.values())


def entry_of(op: InplaceOp) -> Registered:
    """The registration of `op`; InplaceOpError where it was never registered."""
    entry = OPS.get(op_id(op))
    if entry is None or entry.op is not op:
        raise InplaceOpError(f"{op_id(op)}: not registered; register it first (inplace.registry.register)")
    return entry
