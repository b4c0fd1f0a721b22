"""What TensorRT does with tensorrt.plugin's objects during a build, for tests on its real Python bindings over the
stand-in libraries (no builder, no plugin registry): the one place that reaches into tensorrt.plugin's own private
modules. A test calls these; when a TensorRT release moves its internals, this file alone changes.

- `register_creator(name, namespace)`: what a network's first call of `trtp.op.<namespace>.<name>(...)` does before
  anything else (the creator made and registered), where there is no builder to make that call;
- `symbolic_builder(trtp, builder)`: the expression builder TensorRT sets while it calls an AOT implementation, so
  that SymInt32 arithmetic evaluates with `builder`;
- `aot_plugin_instance(...)`: the AOT plugin object TensorRT's creator makes for add_plugin(..., aot=True);
- `qdp_registry()`, `evaluated(expr)`: the registered plugin definitions, and the value of a symbolic size.
"""

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any


def plugin_internals(trtp: Any, name: str) -> Any:
    """A private module of tensorrt.plugin where its code lives (tensorrt_bindings.plugin in the wheels)."""
    return importlib.import_module(trtp.KernelLaunchParams.__module__.rsplit(".", 1)[0] + "." + name)


def qdp_registry() -> Any:
    """tensorrt.plugin's table of registered plugin definitions (register function, aot_impl, outputs)."""
    return plugin_internals(importlib.import_module("tensorrt.plugin"), "_lib").QDP_REGISTRY


def register_creator(name: str, namespace: str) -> None:
    """The creator of a lazily registered plugin made and registered, as a network's first use of it does (once)."""
    lib = plugin_internals(importlib.import_module("tensorrt.plugin"), "_lib")
    if f"{namespace}::{name}" not in lib.QDP_CREATORS:
        lib._register_plugin_creator(name, namespace, {})


@contextlib.contextmanager
def symbolic_builder(trtp: Any, builder: Any) -> Iterator[Any]:
    """tensorrt.plugin's expression builder set to `builder` inside the block, as TensorRT sets it during a build."""
    symbolic_int = plugin_internals(trtp, "_tensor").SymIntExpr  # holds the builder of TensorRT's current call
    previous = symbolic_int._exprBuilder
    symbolic_int._exprBuilder = builder
    try:
        yield builder
    finally:
        symbolic_int._exprBuilder = previous


def aot_plugin_instance(trtp: Any, definition: Any, name: str, namespace: str) -> Any:
    """TensorRT's own AOT plugin object (what the creator makes for add_plugin(..., aot=True)), no registry."""
    instance = plugin_internals(trtp, "_plugin_class")._TemplateAOTPlugin(name, namespace, definition.num_outputs)
    instance.init(definition.register_func, {}, definition.aot_impl_attr_names, definition.aot_impl_func,
                  definition.autotune_attr_names, definition.autotune_func)
    return instance


def evaluated(expr: Any) -> Any:
    """The value of a symbolic size that a SymbolicSizes-like builder made."""
    return expr._expr.value
