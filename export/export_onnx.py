"""Exports the sample's network (export/sample_modules.py) to ONNX with PyTorch's exporter (dynamo), N and E dynamic.

    python3 -m export.export_onnx --network classifier --precision fp32 --num_features 1 --num_classes 3 --out M.onnx
    python3 aliased_io_plugin.py --onnx M.onnx ...        (the rewrite puts the in-place plugin in; docs/onnx.md)

From another folder, run the file: python3 /path/to/repo/export/export_onnx.py ... (it puts the repository root
on sys.path, as NVIDIA's Python samples do for their common module), or python3 -m with PYTHONPATH=/path/to/repo.

Inputs X, src, idx (and W for the classifier); output softmax (classifier) or X_out (state). Bad arguments,
--out included (checked as aliased_io_plugin.py checks --save_onnx: common.paths), are one line and exit 2
before torch is imported; the model is written through a temporary file once the export has succeeded. torch,
onnx or onnxscript missing: one line with the pip line, exit 3.
"""

import argparse
import contextlib
import logging
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):  # run as a file from any folder: the repository root, for cli, common and export
    sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from cli.options import MAX_CLASSES, integer  # noqa: E402 (after the path above)
from common.errors import InputError  # noqa: E402
from common.paths import check_outputs, replacing  # noqa: E402

PROG = "python3 -m export.export_onnx"
EXIT_OK, EXIT_BAD_INPUT, EXIT_MISSING_DEPENDENCY, EXIT_EXPORT_FAILED = 0, 2, 3, 4
MAX_FEATURES = 65536
INSTALL_LINE = "pip install -r requirements-onnx.txt (torch==2.13.0, onnx, onnxscript)"


class _ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are InputError: one line and exit 2 (main)."""

    def error(self, message: str):
        raise InputError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--network", required=True, choices=["classifier", "state"],
                        help="classifier: X, src, idx, W -> softmax; state: X, src, idx -> X_out (for --steps)")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16"], help="dtype of X, src and W")
    parser.add_argument("--num_features", "--num-features", default="1", help="F, the features per node (default: 1)")
    parser.add_argument("--num_classes", "--num-classes", default=None,
                        help="C, the classes of the classifier (default: 3; not for --network state)")
    parser.add_argument("--out", required=True, metavar="M.onnx", help="the ONNX file to write")
    return parser


def check_arguments(options: argparse.Namespace) -> tuple[int, int]:
    """(F, C) from the options, and the output path checked; InputError names a bad value."""
    num_features = integer(options.num_features, "--num_features", 1, MAX_FEATURES)
    if options.network == "state" and options.num_classes is not None:
        raise InputError("--num_classes is for --network classifier; the state network has no classes")
    num_classes = integer(options.num_classes or "3", "--num_classes", 1, MAX_CLASSES)
    check_outputs({"--out": options.out}, {}, script=Path(__file__).resolve())
    return num_features, num_classes


@contextlib.contextmanager
def quiet_exporter() -> Iterator[None]:
    """torch.onnx's log below ERROR (the "torchvision is not installed" lines) and warnings (torch's deprecation and
    dynamic-axis-name notes, not ours to act on) left out while torch.onnx.export runs; the log level restored."""
    exporter_log = logging.getLogger("torch.onnx")
    level = exporter_log.level
    exporter_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        exporter_log.setLevel(level)


def export_sample(network: str, precision: str, num_features: int, num_classes: int, out: str | Path) -> Path:
    """Exports the sample network with torch.onnx.export(dynamo=True) to `out`; returns the path written."""
    import torch

    from export.sample_modules import export_spec

    spec = export_spec(network, precision, num_features, num_classes)
    with quiet_exporter():
        program = torch.onnx.export(spec.module, spec.args, dynamo=True, dynamic_shapes=spec.dynamic_shapes,
                                    input_names=list(spec.input_names), output_names=list(spec.output_names),
                                    external_data=False, verbose=False)
    assert program is not None  # dynamo=True always returns the ONNXProgram
    with replacing(str(out), "--out") as temporary:
        program.save(temporary)
    return Path(out)


def missing_dependency() -> str | None:
    """What is missing for the export (torch, onnx, onnxscript), as one line with the pip line; None if nothing."""
    import importlib.util

    absent = [name for name in ("torch", "onnx", "onnxscript") if importlib.util.find_spec(name) is None]
    return f"{', '.join(absent)} not installed; the export needs them: {INSTALL_LINE}" if absent else None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else "no message"


def main(argv: list[str] | None = None) -> int:
    try:
        options = build_parser().parse_args(argv)
        num_features, num_classes = check_arguments(options)
    except InputError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    missing = missing_dependency()
    if missing:
        print(f"{PROG}: error: {missing}", file=sys.stderr)
        return EXIT_MISSING_DEPENDENCY
    try:
        path = export_sample(options.network, options.precision, num_features, num_classes, options.out)
    except InputError as error:  # --out could not be written (a full disk): nothing is left there
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as error:  # the exporter's own failure (torch.onnx.errors.*): one line, not a traceback
        print(f"{PROG}: error: torch.onnx.export failed: {type(error).__name__}: {_first_line(error)}", file=sys.stderr)
        return EXIT_EXPORT_FAILED
    print(f"Wrote {path} ({options.network}, {options.precision}, F={num_features}"
          + (f", C={num_classes})" if options.network == "classifier" else ")"))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
