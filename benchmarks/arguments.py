"""The benchmark scripts' option parser: a usage error is one line on stderr and exit status 2, decided before
torch, TensorRT or a GPU is looked for (the scripts parse first, then call gpu_timing.require_torch_gpu)."""

import argparse
import sys

from cli.options import EXIT_BAD_INPUT  # the sample's exit status 2 (standard library only), as gpu_timing's 3


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line usage errors ("bench_x.py: error: ... (see --help)") and full option names only."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(**kwargs)

    def error(self, message: str):
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def positive_int(text: str) -> int:
    """An integer >= 1 (argparse type): '1e6' is taken where it is a whole number, as the tables write sizes."""
    try:
        value = float(text) if "e" in text.lower() else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not 1 <= value < 2**63 or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(value)


def dtype_names(text: str) -> list[str]:
    """'float32,float16' -> ['float32', 'float16'] (argparse type); each must be one the kernel takes."""
    names = [name.strip() for name in text.split(",")]
    unknown = [name for name in names if name not in ("float32", "float16")]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"expected float32 and/or float16, comma-separated, got {text!r}")
    return names
