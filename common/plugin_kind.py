"""Which scatter-add implementation an engine is built with (--plugin), decided once from the option's value.

The command line turns --plugin into a PluginKind (cli/options.py); the network (network/definition.py), the
ONNX parse (network/onnx_parse.py) and the ONNX rewrite (onnx_path/nodes.py) are handed that decision and read
what they need from it (`aot`) instead of comparing option strings. Standard library only: --help and a dry run
import it.
"""

from enum import Enum

from common.errors import InputError


class PluginKind(str, Enum):
    """A str, so that it prints, compares and serializes as the option's value ("python" or "aot")."""

    PYTHON = "python"  # ScatterAddPlugin: IPluginV3 in Python; the engine needs Python at run time
    AOT = "aot"  # tensorrt.plugin AOT plugins: PTX in the engine, no Python at run time (TensorRT >= 10.16)

    @property
    def aot(self) -> bool:
        return self is PluginKind.AOT

    def __str__(self) -> str:
        return str(self.value)


PLUGIN_NAMES = tuple(kind.value for kind in PluginKind)  # --plugin's choices


def plugin_kind(value: "str | PluginKind") -> PluginKind:
    """The PluginKind `value` names; InputError (one line) for any other value."""
    try:
        return PluginKind(value)
    except ValueError:
        raise InputError(f"plugin must be one of {', '.join(PLUGIN_NAMES)}, got {value!r}") from None
