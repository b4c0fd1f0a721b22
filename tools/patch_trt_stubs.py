"""Writes a copy of the installed tensorrt-stubs that mypy can parse, into .mypy_stubs/ (used by mypy.ini).

tensorrt-stubs 10.13.0.35.1 names some plugin-method parameters `in` (a Python keyword) and gives
add_scale_nd a parameter without a default after ones with defaults; mypy stops at those syntax errors.
This renames `in` to `in_` and gives that parameter a default; nothing else changes.
"""

import importlib.util
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / ".mypy_stubs"
PACKAGES = ("tensorrt", "tensorrt_bindings")


def installed_stub_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{package} stubs are not installed: pip install --no-deps tensorrt-stubs")
    for location in spec.submodule_search_locations:
        if (Path(location) / "__init__.pyi").exists():
            return Path(location)
    sys.exit(f"{package} has no __init__.pyi: pip install --no-deps tensorrt-stubs")


def patch(text: str) -> str:
    text = re.sub(r"(\(self(?:: \w+)?, )in:", r"\1in_:", text)
    return text.replace("power: Weights = None, channel_axis: int)", "power: Weights = None, channel_axis: int = ...)")


def main() -> None:
    shutil.rmtree(TARGET, ignore_errors=True)
    for package in PACKAGES:
        source = installed_stub_dir(package)
        for stub in source.glob("*.pyi"):
            destination = TARGET / package / stub.name
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_text(patch(stub.read_text()))
    print(f"patched tensorrt stubs written to {TARGET.relative_to(ROOT)}/")


if __name__ == "__main__":
    main()
